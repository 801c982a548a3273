"""fused_attention: softmax(q @ k * scale + mask) @ v as one op, and the fuse_attention pass (O2).

The op is checked against NumPy (float64 references) and against the unfused chain of registry
ops it replaces, in values and gradients, in PyNative and Graph mode; float32 takes the tiled
online-softmax kernel (key tiles of 256, query blocks of 128, so sizes around those are covered),
other dtypes the chain's own kernels. The pass is checked end to end: the encoder block of
benchmarks/bench_transformer.py and nn.MultiheadAttention compiled at O2 hold a fused_attention
node and give O1's (unfused) values; their training steps give O1's losses and gradients.
"""
import pathlib
import sys

import numpy as np
import pytest
from gradcheck import check_grad

import kiln as ms
from kiln import Tensor, nn, ops
from kiln.ops._core import call

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_transformer  # noqa: E402

RNG = np.random.default_rng(5)
F32_TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def _reset():
    yield
    ms.reset_context()


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def fused(q, k, v, mask=None, tk=False, scale=1.0):
    return call("fused_attention", (q, k, v, mask), (tk, scale))


def unfused(q, k, v, mask=None, tk=False, scale=1.0):
    s = ops.matmul(q, ops.swapaxes(k, -1, -2) if tk else k) * scale
    if mask is not None:
        s = s + mask
    return ops.matmul(ops.softmax(s, -1), v)


def reference(q, k, v, mask=None, tk=False, scale=1.0):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ (np.swapaxes(k, -1, -2) if tk else k) * scale
    if mask is not None:
        s = s + mask
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def operands(batch, sq, sk, d, dv, tk, dtype=np.float32, mask_shape=None):
    q = rand(*batch, sq, d, dtype=dtype)
    k = rand(*batch, sk, d, dtype=dtype) if tk else rand(*batch, d, sk, dtype=dtype)
    v = rand(*batch, sk, dv, dtype=dtype)
    mask = None if mask_shape is None else rand(*mask_shape, dtype=dtype)
    return q, k, v, mask


# ---- values


@pytest.mark.parametrize("d,dv", [(24, 20), (64, 64), (16, 33)])
@pytest.mark.parametrize("sq,sk", [(13, 37), (130, 300)])
def test_head_sizes_across_register_block_edges(d, dv, sq, sk):
    # The tile products run in blocks of 6 rows x 16 (AVX2) or 64 (AVX-512) columns, with the
    # rows and columns left over on other paths: sizes on both sides of each edge.
    q, k, v, _ = operands((2,), sq, sk, d, dv, True)
    got = fused(Tensor(q), Tensor(k), Tensor(v), tk=True, scale=0.2)
    np.testing.assert_allclose(got.asnumpy(), reference(q, k, v, tk=True, scale=0.2), **F32_TOL)


@pytest.mark.parametrize("sq,sk", [(1, 1), (3, 5), (127, 255), (128, 256), (129, 257),
                                   (130, 511), (7, 512), (5, 513), (70, 1100)])
@pytest.mark.parametrize("tk", [False, True])
def test_values_match_numpy_across_tile_boundaries(sq, sk, tk):
    q, k, v, _ = operands((2,), sq, sk, 8, 6, tk)
    got = fused(Tensor(q), Tensor(k), Tensor(v), tk=tk, scale=0.3)
    assert got.shape == (2, sq, 6) and got.dtype == ms.float32
    np.testing.assert_allclose(got.asnumpy(), reference(q, k, v, tk=tk, scale=0.3), **F32_TOL)


@pytest.mark.parametrize("mask_shape", [(600,), (70, 600), (1, 70, 1), (2, 3, 70, 600)])
def test_masks_broadcast_to_the_scores(mask_shape):
    q, k, v, mask = operands((2, 3), 70, 600, 16, 4, True, mask_shape=mask_shape)
    got = fused(Tensor(q), Tensor(k), Tensor(v), Tensor(mask), tk=True, scale=0.25)
    want = reference(q, k, v, mask, tk=True, scale=0.25)
    np.testing.assert_allclose(got.asnumpy(), want, **F32_TOL)


def test_masked_keys_and_fully_masked_rows():
    """-inf keys get no weight (in any key tile); a row with every key masked is NaN, as the
    unfused softmax makes it."""
    q, k, v, _ = operands((1,), 4, 700, 8, 3, True)
    mask = np.zeros((4, 700), np.float32)
    mask[0, :600] = -np.inf       # the first tile wholly masked for row 0
    mask[1, 100:] = -np.inf
    mask[2, :] = -np.inf
    got = fused(Tensor(q), Tensor(k), Tensor(v), Tensor(mask), tk=True).asnumpy()
    want = unfused(Tensor(q), Tensor(k), Tensor(v), Tensor(mask), tk=True).asnumpy()
    assert np.isnan(got[0, 2]).all() and np.isnan(want[0, 2]).all()
    for r in (0, 1, 3):
        np.testing.assert_allclose(got[0, r], want[0, r], **F32_TOL)


def test_strided_and_broadcast_operands():
    """Transposed views (the encoder block's heads), a column-major query and a key shared by
    every batch item run without copies or through one, with the same values."""
    x = rand(2, 9, 3, 8)  # (batch, seq, heads, dh)
    q = ops.transpose(Tensor(x), (0, 2, 1, 3))
    k = ops.transpose(Tensor(x), (0, 2, 3, 1))
    v = ops.transpose(Tensor(x), (0, 2, 1, 3))
    got = fused(q, k, v, scale=0.5)
    want = reference(q.asnumpy(), k.asnumpy(), v.asnumpy(), scale=0.5)
    np.testing.assert_allclose(got.asnumpy(), want, **F32_TOL)
    qt = ops.swapaxes(Tensor(rand(2, 8, 9)), -1, -2)  # unit stride down the columns
    kshared = rand(8, 11)
    vb = rand(1, 11, 4)
    got = fused(qt, Tensor(kshared), Tensor(vb))
    np.testing.assert_allclose(got.asnumpy(), reference(qt.asnumpy(), kshared, vb), **F32_TOL)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_other_dtypes_give_the_unfused_values(dtype):
    q, k, v, mask = operands((2,), 5, 7, 4, 3, False, dtype=dtype, mask_shape=(5, 7))
    got = fused(Tensor(q), Tensor(k), Tensor(v), Tensor(mask), scale=0.5)
    want = unfused(Tensor(q), Tensor(k), Tensor(v), Tensor(mask), scale=0.5)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())


def test_bad_operands_are_clear_errors():
    q, k, v, _ = operands((2,), 3, 5, 4, 6, False)
    with pytest.raises(ValueError, match="fused_attention"):
        fused(Tensor(q), Tensor(k), Tensor(rand(2, 4, 6)))
    with pytest.raises(ValueError, match="fused_attention.*mask"):
        fused(Tensor(q), Tensor(k), Tensor(v), Tensor(rand(2, 2, 3, 5)))
    with pytest.raises(TypeError, match="fused_attention"):
        fused(Tensor(q), Tensor(k.astype(np.float64)), Tensor(v))
    with pytest.raises(TypeError, match="fused_attention"):
        fused(Tensor(q.astype(np.int32)), Tensor(k.astype(np.int32)), Tensor(v.astype(np.int32)))
    with pytest.raises(ValueError, match="fused_attention"):
        fused(Tensor(rand(4)), Tensor(k), Tensor(v))


# ---- gradients


def grads_of(fn, arrays, weight, jit=False):
    """kiln.grad of sum(fn(*arrays) * weight) for every array, PyNative or Graph mode."""
    def projected(*xs):
        return ops.sum(ops.mul(fn(*xs), Tensor(weight)))

    grad_fn = ms.grad(projected, tuple(range(len(arrays))))
    if jit:
        grad_fn = ms.jit(grad_fn)
    return [g.asnumpy() for g in grad_fn(*[Tensor(x) for x in arrays])]


@pytest.mark.parametrize("tk", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("jit", [False, True])
def test_gradients_equal_the_unfused_chain(tk, with_mask, jit):
    q, k, v, mask = operands((2, 3), 5, 7, 4, 6, tk, mask_shape=(5, 7) if with_mask else None)
    arrays = [q, k, v] + ([mask] if with_mask else [])
    weight = RNG.uniform(0.5, 1.5, size=(2, 3, 5, 6)).astype(np.float32)
    got = grads_of(lambda *xs: fused(*xs, tk=tk, scale=0.7), arrays, weight, jit)
    want = grads_of(lambda *xs: unfused(*xs, tk=tk, scale=0.7), arrays, weight)
    for i, (g, w, x) in enumerate(zip(got, want, arrays)):
        assert g.shape == x.shape, f"input {i}"
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"gradient of input {i}")


@pytest.mark.parametrize("tk", [False, True])
def test_gradients_match_finite_differences(tk):
    q, k, v, mask = operands((2,), 3, 4, 2, 3, tk, dtype=np.float64, mask_shape=(3, 4))
    check_grad(lambda *xs: fused(*xs, tk=tk, scale=0.6), q, k, v, mask)
    check_grad(lambda *xs: fused(*xs, tk=tk), q[:1], k[:1], v)  # q, k broadcast over v's batch


# ---- the pass


def optimized(fn, *args, level="O2"):
    jitted = ms.jit(fn, jit_level=level)
    out = jitted(*args)
    return out, jitted.graph_text()


def encoder_block():
    ms.set_seed(0)
    return bench_transformer.block_class(nn, ops)()


def test_the_encoder_block_fuses_at_o2_only_and_keeps_its_values():
    net = encoder_block()
    x = Tensor(rand(2, 70, bench_transformer.D))
    fused_out, text = optimized(lambda x: net(x), x)
    assert text.count("fused_attention(") == 1 and "softmax" not in text
    plain_out, text1 = optimized(lambda x: net(x), x, level="O1")
    assert "fused_attention" not in text1 and "softmax" in text1
    np.testing.assert_allclose(fused_out.asnumpy(), plain_out.asnumpy(), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(fused_out.asnumpy(), net(x).asnumpy(), rtol=2e-5, atol=2e-5)


def test_the_encoder_training_step_at_o2_matches_o1():
    """The backward reads the probabilities, so the chain stays unfused there; the step's loss
    and gradients are O1's."""
    net = encoder_block()
    x, y = Tensor(rand(2, 16, bench_transformer.D)), Tensor(rand(2, 16, bench_transformer.D))
    step = ms.value_and_grad(lambda x, y: ops.mean((net(x) - y) ** 2), None,
                             net.trainable_params())
    loss2, grads2 = ms.jit(step, jit_level="O2")(x, y)
    loss1, grads1 = ms.jit(step, jit_level="O1")(x, y)
    np.testing.assert_allclose(loss2.asnumpy(), loss1.asnumpy(), rtol=1e-5)
    for g2, g1 in zip(grads2, grads1):
        np.testing.assert_allclose(g2.asnumpy(), g1.asnumpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("masked", [False, True])
def test_multihead_attention_fuses_without_weights(masked):
    ms.set_seed(1)
    mha = nn.MultiheadAttention(32, 4)
    x = Tensor(rand(9, 2, 32))  # (seq, batch, embed)
    mask = Tensor(np.triu(np.ones((9, 9), bool), 1)) if masked else None

    def run(x):
        return mha(x, x, x, attn_mask=mask, need_weights=False)[0]

    out2, text = optimized(run, x)
    assert "fused_attention(" in text
    out1, _ = optimized(run, x, level="O1")
    np.testing.assert_allclose(out2.asnumpy(), out1.asnumpy(), **F32_TOL)
    np.testing.assert_allclose(out2.asnumpy(), run(x).asnumpy(), **F32_TOL)
