"""fused_matmul: act(a @ b + bias) (+ residual when act is "none"), and the fuse_epilogue pass.

The op is checked against NumPy (float64 references) and against the unfused composition of
registry ops it replaces, in values and in gradients; float32 takes oneDNN's fused primitive (or
the small-M sgemm path), other dtypes the unfused kernels. The pass is checked end to end: the seed
network compiled with kiln.jit holds fused_matmul nodes and gives PyNative's logits.
"""
import pathlib
import sys

import numpy as np
import pytest
from gradcheck import check_grad

import kiln as ms
from kiln import Tensor, nn, ops
from kiln.ops._core import call

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
import five_ways  # noqa: E402

RNG = np.random.default_rng(11)
ACTIVATIONS = ["none", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh"]
F32_TOL = dict(rtol=2e-5, atol=2e-5)


@pytest.fixture(autouse=True)
def _reset():
    yield
    ms.reset_context()


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def fused(a, b, bias=None, residual=None, ta=False, tb=False, act="none"):
    return call("fused_matmul", (a, b, bias, residual), (ta, tb, act))


def act_ref(x, act):
    if act == "relu":
        return np.maximum(x, 0)
    if act == "gelu":
        from math import erf  # noqa: PLC0415

        return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))
    if act == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    if act == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if act == "tanh":
        return np.tanh(x)
    return x


def reference(a, b, bias=None, residual=None, ta=False, tb=False, act="none"):
    a, b = a.astype(np.float64), b.astype(np.float64)
    if ta and a.ndim > 1:
        a = np.swapaxes(a, -1, -2)
    if tb and b.ndim > 1:
        b = np.swapaxes(b, -1, -2)
    out = a @ b
    if bias is not None:
        out = out + bias
    out = act_ref(out, act)
    if residual is not None:
        out = out + residual
    return out


def unfused(a, b, bias=None, residual=None, ta=False, tb=False, act="none"):
    """The registry ops fuse_epilogue folds, one at a time."""
    out = call("matmul", (a, b), (ta, tb))
    if bias is not None:
        out = ops.add(out, bias)
    if act == "relu":
        out = ops.relu(out)
    elif act == "gelu_tanh":
        out = ops.gelu(out, approximate="tanh")
    elif act == "gelu":
        out = ops.gelu(out)
    elif act == "sigmoid":
        out = ops.sigmoid(out)
    elif act == "tanh":
        out = ops.tanh(out)
    if residual is not None:
        out = ops.add(out, residual)
    return out


def check(a, b, bias=None, residual=None, ta=False, tb=False, act="none", tol=F32_TOL):
    t = [None if x is None else Tensor(x) for x in (a, b, bias, residual)]
    got = fused(*t, ta=ta, tb=tb, act=act)
    want = reference(a, b, bias, residual, ta, tb, act)
    assert got.shape == want.shape
    assert got.dtype == t[0].dtype
    np.testing.assert_allclose(got.asnumpy(), want, **tol)
    return got


# ---- values


@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("m", [3, 64])  # sgemm + epilogue sweep, then oneDNN's fused primitive
def test_each_activation_with_and_without_bias(act, with_bias, m):
    a, b = rand(m, 20), rand(20, 12)
    check(a, b, rand(12) if with_bias else None, act=act)


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("m", [3, 64])
def test_residual_after_the_product(with_bias, m):
    a, b = rand(m, 20), rand(20, 12)
    check(a, b, rand(12) if with_bias else None, rand(m, 12))


def test_residual_broadcast_over_rows():
    check(rand(40, 9), rand(9, 5), rand(5), rand(5))
    check(rand(40, 9), rand(9, 5), None, rand(40, 1))


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("m", [4, 48])
def test_transposes(ta, tb, m):
    a = rand(16, m) if ta else rand(m, 16)
    b = rand(10, 16) if tb else rand(16, 10)
    check(a, b, rand(10), ta=ta, tb=tb, act="relu")
    check(a, b, rand(10), rand(m, 10), ta=ta, tb=tb)


@pytest.mark.parametrize("act", ["relu", "tanh"])
@pytest.mark.parametrize("shapes", [((3, 5, 7), (7, 6)), ((3, 5, 7), (3, 7, 6)),
                                    ((2, 1, 5, 7), (3, 7, 6)), ((5, 7), (4, 7, 6))])
def test_batched(act, shapes):
    sa, sb = shapes
    a, b = rand(*sa), rand(*sb)
    out_shape = np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    check(a, b, rand(sb[-1]), act=act)
    check(a, b, rand(sb[-1]), rand(*out_shape))


def test_vector_operands():
    check(rand(7), rand(7, 6), rand(6), act="relu")      # a row vector: out (6,)
    check(rand(7), rand(7, 6), None, rand(6))
    check(rand(5, 7), rand(7), rand(5), act="sigmoid")   # b a column vector: out (5,)
    check(rand(3, 5, 7), rand(7), rand(5), rand(3, 5))


def test_transposed_weight_view_and_strided_inputs():
    a = rand(30, 40)[:, ::2]           # non-unit inner stride: copied first
    w = rand(12, 20)
    check(a, np.ascontiguousarray(w.T), rand(12), act="gelu_tanh")
    check(a, w, rand(12), ta=False, tb=True, act="relu")


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 12, 13, 16, 17])
@pytest.mark.parametrize("m", [1, 5, 64])
@pytest.mark.parametrize("k", [1, 15, 16, 513])
def test_narrow_products_through_a_transposed_weight(n, m, k):
    """Up to 16 columns with b a row-major weight's transposed view (a Dense layer), kiln's
    dot-product kernel (kernels/cpu/narrow_gemm.h): every width, row counts around its blocks, a
    depth with and without a vector tail; 17 columns take oneDNN again."""
    w = rand(n, k)
    check(rand(m, k), w, rand(n), tb=True, act="relu", tol=dict(rtol=1e-4, atol=1e-4))
    check(rand(m, k), w, None, rand(m, n), tb=True, tol=dict(rtol=1e-4, atol=1e-4))


def test_narrow_product_of_row_slices_and_of_many_rows():
    a = rand(70, 40)[:, 3:35]  # rows 40 floats apart
    check(a, rand(10, 32), rand(10), tb=True, act="tanh")
    big = rand(5000, 256)  # enough rows to split over threads
    check(big, rand(10, 256), rand(10), tb=True, tol=dict(rtol=1e-4, atol=1e-4))
    check(rand(3, 100, 64), rand(6, 64), rand(6), tb=True, act="sigmoid")  # batch folded


def test_empty_contraction_and_empty_output():
    check(rand(4, 0), rand(0, 3), rand(3), act="sigmoid")  # act(bias) on every row
    got = fused(Tensor(rand(0, 5)), Tensor(rand(5, 3)), Tensor(rand(3)), act="relu")
    assert got.shape == (0, 3)


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_float32_matches_the_unfused_ops(act):
    for m in (2, 64):
        a, b, bias = Tensor(rand(m, 33)), Tensor(rand(17, 33)), Tensor(rand(17))
        got = fused(a, b, bias, tb=True, act=act).asnumpy()
        want = unfused(a, b, bias, tb=True, act=act).asnumpy()
        if act in ("none", "relu"):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        else:  # oneDNN's and kiln's activation formulas round differently
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_float64_falls_back_to_the_unfused_kernels(act):
    a, b, bias = (rand(*s, dtype=np.float64) for s in ((6, 8), (8, 5), (5,)))
    residual = rand(6, 5, dtype=np.float64) if act == "none" else None
    got = check(a, b, bias, residual, act=act, tol=dict(rtol=1e-12, atol=1e-12))
    assert got.dtype == ms.float64
    t = [None if x is None else Tensor(x) for x in (a, b, bias, residual)]
    np.testing.assert_array_equal(got.asnumpy(), unfused(*t, act=act).asnumpy())


@pytest.mark.parametrize("dtype", [ms.float16, ms.bfloat16])
def test_half_types_equal_the_unfused_ops(dtype):
    """float16 runs the unfused ops; bfloat16 runs one oneDNN primitive where the CPU has bf16
    instructions (the epilogue in float32, one rounding at the end), so it may differ from the
    unfused ops' three roundings by a unit in the last place."""
    a, b, bias = (Tensor(rand(*s), dtype) for s in ((9, 16), (16, 8), (8,)))
    for act in ("relu", "gelu_tanh"):
        got = fused(a, b, bias, act=act)
        assert got.dtype == dtype
        want = unfused(a, b, bias, act=act).float().asnumpy()
        if dtype == ms.float16:
            np.testing.assert_array_equal(got.float().asnumpy(), want)
            continue
        # bfloat16: at least as close to the float32 result as the unfused ops, up to half a
        # unit in the last place (2**-9 relative).
        exact = act_ref(a.float().asnumpy() @ b.float().asnumpy() + bias.float().asnumpy(), act)
        got_err = np.abs(got.float().asnumpy() - exact)
        assert np.all(got_err <= np.abs(want - exact) + np.abs(exact) * 2 ** -9 + 1e-6)


def test_integer_operands_with_relu():
    a = RNG.integers(-3, 4, size=(4, 5)).astype(np.int32)
    b = RNG.integers(-3, 4, size=(5, 3)).astype(np.int32)
    bias = np.array([1, -2, 3], np.int32)
    got = fused(Tensor(a), Tensor(b), Tensor(bias), act="relu")
    assert got.dtype == ms.int32
    np.testing.assert_array_equal(got.asnumpy(), np.maximum(a @ b + bias, 0))


def test_operands_promote_to_one_dtype():
    got = fused(Tensor(rand(3, 4)), Tensor(rand(4, 2, dtype=np.float64)), Tensor(rand(2)))
    assert got.dtype == ms.float64


@pytest.mark.parametrize("args,kwargs,error,word", [
    ((rand(3, 4), rand(4, 2), rand(3)), {}, ValueError, "bias must be 1-D of length 2"),
    ((rand(3, 4), rand(4, 2), rand(1, 2)), {}, ValueError, "bias must be 1-D"),
    ((rand(3, 4), rand(4, 2), None, rand(3, 2)), dict(act="relu"), ValueError,
     "only added when activation is 'none'"),
    ((rand(3, 4), rand(4, 2), None, rand(4, 2)), {}, ValueError, "does not broadcast"),
    ((rand(3, 4), rand(4, 2)), dict(act="swish"), ValueError, "activation must be"),
    ((rand(3, 4), rand(5, 2)), {}, ValueError, "not aligned"),
])
def test_errors_name_the_op(args, kwargs, error, word):
    with pytest.raises(error, match=word) as info:
        fused(*[None if x is None else Tensor(x) for x in args], **kwargs)
    assert "fused_matmul" in str(info.value)


def test_float_only_activations_reject_integers():
    a = Tensor(np.ones((2, 2), np.int32))
    with pytest.raises(TypeError, match="floating"):
        fused(a, a, act="sigmoid")


# ---- gradients


def grads_of(fn, arrays, weight):
    """kiln.grad of sum(fn(*arrays) * weight) for every array."""
    def projected(*xs):
        return ops.mul(fn(*xs), Tensor(weight))

    tensors = [Tensor(x) for x in arrays]
    return [g.asnumpy() for g in ms.grad(projected, tuple(range(len(arrays))))(*tensors)]


@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradients_equal_the_unfused_composition(act, ta, tb, dtype):
    m, k, n = 6, 5, 4
    a = rand(*((k, m) if ta else (m, k)), dtype=dtype)
    b = rand(*((n, k) if tb else (k, n)), dtype=dtype)
    arrays = [a, b, rand(n, dtype=dtype)]
    if act == "none":
        arrays.append(rand(m, n, dtype=dtype))
    weight = RNG.uniform(0.5, 1.5, size=(m, n)).astype(dtype)
    got = grads_of(lambda *xs: fused(*xs, ta=ta, tb=tb, act=act), arrays, weight)
    want = grads_of(lambda *xs: unfused(*xs, ta=ta, tb=tb, act=act), arrays, weight)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    for k_, (g, w, x) in enumerate(zip(got, want, arrays)):
        assert g.shape == x.shape and g.dtype == x.dtype, f"input {k_}"
        np.testing.assert_allclose(g, w, err_msg=f"gradient of input {k_}", **tol)


def test_gradients_batched_without_bias_and_broadcast_inputs():
    a, b, r = rand(2, 3, 4), rand(4, 5), rand(5)
    weight = RNG.uniform(0.5, 1.5, size=(2, 3, 5)).astype(np.float32)
    got = grads_of(lambda a, b, r: fused(a, b, None, r), [a, b, r], weight)
    want = grads_of(lambda a, b, r: unfused(a, b, None, r), [a, b, r], weight)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_graph_mode_gradients_of_the_op_equal_pynative(act):
    """Graph mode's autodiff runs the same rule, emitting IR nodes."""
    arrays = [rand(6, 5), rand(4, 5), rand(4)] + ([rand(6, 4)] if act == "none" else [])

    def f(*xs):
        return ops.sum(ops.mul(fused(*xs, tb=True, act=act), fused(*xs, tb=True, act=act)))

    tensors = [Tensor(x) for x in arrays]
    grad_fn = ms.grad(f, tuple(range(len(arrays))))
    want = grad_fn(*tensors)
    got = ms.jit(lambda *xs: grad_fn(*xs))(*tensors)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act", ["relu", "gelu", "gelu_tanh", "sigmoid", "tanh"])
def test_gradients_match_finite_differences(act):
    a, b, bias = (rand(*s, dtype=np.float64) for s in ((3, 4), (4, 2), (2,)))
    check_grad(lambda a, b, bias: fused(a, b, bias, act=act), a, b, bias)
    check_grad(lambda a, b, r: fused(a, b, None, r, tb=True), a, rand(2, 4, dtype=np.float64),
               rand(3, 2, dtype=np.float64))


# ---- the pass, end to end


def optimized_graphs(tmp_path, fn):
    """Runs fn with save_graphs on; returns the text of every optimized graph it compiled."""
    ms.set_context(save_graphs=True, save_graphs_path=str(tmp_path))
    fn()
    ms.set_context(save_graphs=False)
    return [p.read_text() for p in sorted(tmp_path.glob("*_optimized.ir"))]


def test_seed_network_compiles_to_fused_matmuls_and_agrees_with_pynative(tmp_path):
    x = Tensor(RNG.standard_normal((64, 1, 28, 28)).astype(np.float32))
    net = five_ways.build()
    ms.set_context(mode=ms.PYNATIVE_MODE)
    reference = net(x).asnumpy()
    jitted = ms.jit(lambda x: net(x))
    texts = optimized_graphs(tmp_path, lambda: jitted(x))
    (text,) = texts
    # dense+relu, dense+relu, dense: three fused_matmul nodes and no separate matmul/add/relu
    assert text.count("fused_matmul(") == 3, text
    assert text.count('activation="relu"') == 2, text
    for op in ("= matmul(", "= add(", "= relu("):
        assert op not in text, text
    np.testing.assert_allclose(jitted(x).asnumpy(), reference, rtol=1e-5, atol=1e-5)
    for batch in (1, 5):  # the small-M sgemm path of the fused kernel
        xb = Tensor(RNG.standard_normal((batch, 1, 28, 28)).astype(np.float32))
        np.testing.assert_allclose(jitted(xb).asnumpy(), net(xb).asnumpy(), rtol=1e-5, atol=1e-5)


def test_graph_mode_seed_network_uses_fused_matmul(tmp_path):
    x = Tensor(RNG.standard_normal((16, 1, 28, 28)).astype(np.float32))
    net = five_ways.build()
    reference = net(x).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE)
    texts = optimized_graphs(tmp_path, lambda: net(x))
    assert any("fused_matmul(" in t for t in texts)
    np.testing.assert_allclose(net(x).asnumpy(), reference, rtol=1e-5, atol=1e-5)


class Block(nn.Cell):
    """x + dense(x), then gelu(tanh)/gelu/sigmoid/tanh layers: every pattern the pass folds."""

    def __init__(self):
        super().__init__()
        self.d0 = nn.Dense(8, 8)
        self.d1 = nn.Dense(8, 8)
        self.dg = nn.Dense(8, 8)
        self.d2 = nn.Dense(8, 8)
        self.d3 = nn.Dense(8, 4)

    def construct(self, x):
        x = x + self.d0(x)
        x = ops.gelu(self.d1(x), approximate="tanh")
        x = ops.gelu(self.dg(x))
        x = ops.sigmoid(self.d2(x))
        return ops.tanh(self.d3(x))


def test_every_activation_and_the_residual_fuse_in_a_jitted_block(tmp_path):
    ms.set_seed(3)
    net = Block()
    x = Tensor(rand(32, 8))
    reference = net(x).asnumpy()
    jitted = ms.jit(lambda x: net(x))
    (text,) = optimized_graphs(tmp_path, lambda: jitted(x))
    assert text.count("fused_matmul(") == 5, text
    for act in ("none", "gelu", "gelu_tanh", "sigmoid", "tanh"):
        assert f'activation="{act}"' in text, text
    np.testing.assert_allclose(jitted(x).asnumpy(), reference, rtol=1e-5, atol=1e-5)


def test_training_step_in_graph_mode_folds_the_relus_and_matches_pynative(tmp_path):
    """relu's gradient reads relu's output, so after autodiff the pre-activation still has one
    user and the relu folds into the product; the gradients stay PyNative's."""
    x = Tensor(rand(16, 1, 28, 28))
    y = Tensor(RNG.integers(0, 10, size=16))
    loss_fn = nn.CrossEntropyLoss()

    def grads(net):
        return ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, net.trainable_params())

    net = five_ways.build()
    loss, want = grads(net)(x, y)
    step = ms.jit(grads(net))
    (text,) = optimized_graphs(tmp_path, lambda: step(x, y))
    assert text.count('activation="relu"') == 2, text
    assert "= relu(" not in text and text.count("= relu_grad(") == 2, text
    loss_g, got = step(x, y)
    np.testing.assert_allclose(loss_g.asnumpy(), loss.asnumpy(), rtol=1e-5, atol=1e-6)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-4, atol=1e-5)
