"""fuse_elementwise and the executor's chunked runner: chains of elementwise ops run as one pass.

Every fused program is checked against the same program at jit_level O0 (no fusion; the same
kernels run op by op, so values must be identical) and against PyNative, across chunk boundaries,
broadcast operands (rows, one-element values), dtypes and shapes.
"""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, ops

RNG = np.random.default_rng(3)


def fused_and_plain(fn, *args):
    fused = ms.jit(fn, jit_level="O1")
    plain = ms.jit(fn, jit_level="O0")
    got = fused(*args)
    assert "call @fused_elementwise" in fused.graph_text()
    return got, plain(*args), fn(*args)


def assert_same(got, plain, eager):
    np.testing.assert_array_equal(got.asnumpy(), plain.asnumpy())
    np.testing.assert_allclose(got.asnumpy(), eager.asnumpy(), rtol=1e-6, atol=1e-6)


def bias_tanh_square(x, b):
    y = ops.tanh(x * 0.5 + b)
    return y * y


@pytest.mark.parametrize("shape", [(3, 5), (64, 512), (7, 8193), (1, 10000), (8192,), (3, 4, 1000)])
def test_row_operand_across_chunk_boundaries(shape):
    x = Tensor(RNG.standard_normal(shape).astype(np.float32))
    b = Tensor(RNG.standard_normal(shape[-1]).astype(np.float32))
    assert_same(*fused_and_plain(bias_tanh_square, x, b))


def gelu_erf_residual(x, r):
    return ops.gelu(x + 1.0) * 2.0 + r


@pytest.mark.parametrize("n", [1, 100, 8191, 8192, 8193, 100_003])
def test_flat_chunks_of_every_size(n):
    x = Tensor(RNG.standard_normal(n).astype(np.float32))
    r = Tensor(RNG.standard_normal(n).astype(np.float32))
    assert_same(*fused_and_plain(gelu_erf_residual, x, r))


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float16])
def test_other_dtypes(dtype):
    def f(x, y):
        return ops.relu(x - y) * y + x
    x = Tensor((RNG.standard_normal((33, 70)) * 10).astype(dtype))
    y = Tensor((RNG.standard_normal((33, 70)) * 10).astype(dtype))
    got, plain, eager = fused_and_plain(f, x, y)
    np.testing.assert_array_equal(got.asnumpy(), plain.asnumpy())
    np.testing.assert_array_equal(got.asnumpy(), eager.asnumpy())


def test_comparison_and_cast_inside_a_group():
    def f(x):
        mask = ops.cast(x > 0.25, ms.float32)
        return mask * ops.exp(x) + (1.0 - mask)
    x = Tensor(RNG.standard_normal((40, 300)).astype(np.float32))
    assert_same(*fused_and_plain(f, x))


def test_one_element_and_leading_ones_operands():
    def f(x, s, row):
        return ops.sigmoid(x * s) - row
    x = Tensor(RNG.standard_normal((2, 3, 50)).astype(np.float32))
    s = Tensor(np.array([[[1.5]]], np.float32))
    row = Tensor(RNG.standard_normal((1, 1, 50)).astype(np.float32))
    assert_same(*fused_and_plain(f, x, s, row))


def test_noncontiguous_inputs_are_read_correctly():
    base = Tensor(RNG.standard_normal((64, 96)).astype(np.float32))
    x = base.T  # a transposed view
    b = Tensor(RNG.standard_normal(64).astype(np.float32))
    assert_same(*fused_and_plain(bias_tanh_square, x, b))


def test_fused_value_used_twice_and_as_a_result():
    def f(x):
        y = ops.exp(x) - 1.0
        z = ops.sqrt(ops.abs(y)) + 3.0
        return z, z * 2.0
    x = Tensor(RNG.standard_normal((16, 16)).astype(np.float32))
    fused = ms.jit(f)
    plain = ms.jit(f, jit_level="O0")
    for g, p in zip(fused(x), plain(x)):
        np.testing.assert_array_equal(g.asnumpy(), p.asnumpy())


def test_side_effect_between_ops_blocks_fusion():
    def f(x, p):
        y = ops.exp(x)
        ops.assign(p, x)  # a write between the group's ops: the chain must not move past it
        return ops.log(y) + p
    x = Tensor(RNG.standard_normal((4, 4)).astype(np.float32))
    p = ms.Parameter(Tensor(np.zeros((4, 4), np.float32)))
    fused = ms.jit(f)
    out = fused(x, p)
    np.testing.assert_allclose(out.asnumpy(), 2 * x.asnumpy(), rtol=1e-5, atol=1e-6)


def test_fused_chain_holds_one_buffer():
    def chain(x):
        for _ in range(10):
            x = ops.exp(x * 0.5) - 1.0
        return x
    x = Tensor(np.ones((512, 512), np.float32))
    fused = ms.jit(chain)
    fused(x)
    exe = fused.variants()[0].executable
    exe.run([x])
    one = 512 * 512 * 4
    # The output plus two chunk buffers (32 Ki float32) per thread.
    scratch = ms.get_num_threads() * 2 * 32768 * 4
    assert exe.last_peak_bytes <= one + scratch, exe.last_peak_bytes



def test_fused_in_a_while_loop_body():
    def f(x, n):
        i = 0
        while i < n:
            x = ops.tanh(x * 1.5 + 0.1)
            i += 1
        return x
    x = Tensor(RNG.standard_normal((8, 8)).astype(np.float32))
    n = Tensor(np.array(3, np.int64))
    fused = ms.jit(f)
    plain = ms.jit(f, jit_level="O0")
    np.testing.assert_array_equal(fused(x, n).asnumpy(), plain(x, n).asnumpy())
    assert "fused_elementwise" in fused.graph_text()
