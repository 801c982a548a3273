"""Every differentiable op's gradient in Graph mode equals PyNative's (same rules, two builders)."""

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, ops

RNG = np.random.default_rng(5)


def arr(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def pos(*shape):
    return arr(*shape, low=0.3, high=2.0)


# (name, function of the inputs, input arrays)
CASES = [
    ("add", lambda a, b: a + b, [arr(3, 4), arr(4)]),
    ("sub", lambda a, b: a - b, [arr(3, 4), arr(3, 1)]),
    ("mul", lambda a, b: a * b, [arr(2, 3), arr(2, 3)]),
    ("div", lambda a, b: a / b, [arr(2, 3), pos(3)]),
    ("pow", lambda a, b: ops.pow(a, b), [pos(3), arr(3)]),
    ("maximum", lambda a, b: ops.maximum(a, b), [arr(4), arr(4)]),
    ("minimum", lambda a, b: ops.minimum(a, b), [arr(4), arr(4)]),
    ("neg_abs", lambda a: ops.abs(-a), [arr(5)]),
    ("exp_log", lambda a: ops.log(ops.exp(a) + 1.0), [arr(5)]),
    ("sqrt_rsqrt", lambda a: ops.sqrt(a) + ops.rsqrt(a), [pos(5)]),
    ("trig", lambda a: ops.sin(a) * ops.cos(a), [arr(5)]),
    (
        "activations",
        lambda a: ops.tanh(a) + ops.sigmoid(a) + ops.relu(a) + ops.silu(a) + ops.gelu(a),
        [arr(6)],
    ),
    ("square_clamp", lambda a: ops.square(ops.clamp(a, -1.0, 1.0)), [arr(6)]),
    ("where", lambda a, b: ops.where(a > 0, a * b, b), [arr(5), arr(5)]),
    ("cast", lambda a: ops.cast(a, ms.float64) * 2.0, [arr(3)]),
    (
        "reductions",
        lambda a: ops.sum(a, 1) + ops.mean(a, 1) + ops.amax(a, 1) + ops.prod(a, 1),
        [pos(3, 4)],
    ),
    ("softmax", lambda a: ops.softmax(a, -1) * ops.log_softmax(a, 0), [arr(3, 4)]),
    ("layer_norm", lambda a, w, b: ops.layer_norm(a, (4,), w, b), [arr(3, 4), arr(4), arr(4)]),
    ("matmul", lambda a, b: ops.matmul(a, b), [arr(2, 3, 4), arr(4, 5)]),
    (
        "conv_pool",
        lambda x, w: (
            ops.max_pool2d(ops.conv2d(x, w, pad_mode="same"), 2, 2)
            + ops.avg_pool2d(ops.conv2d(x, w, pad_mode="same"), 2, 2)
        ),
        [arr(1, 2, 6, 6), arr(3, 2, 3, 3)],
    ),
    (
        "shape_ops",
        lambda a: ops.transpose(ops.reshape(a, (4, 3)), (1, 0)).expand_dims(0).squeeze(0),
        [arr(3, 4)],
    ),
    (
        "broadcast_concat_split",
        lambda a, b: ops.concat(ops.split(ops.broadcast_to(a, (4, 3)), 2, 0) + (b,), 0),
        [arr(1, 3), arr(2, 3)],
    ),
    ("indexing", lambda a: a[1:, ::2] * a[0, 1], [arr(3, 4)]),
    ("gather", lambda a: ops.gather(a, Tensor(np.array([2, 0, 2])), 0), [arr(3, 2)]),
    ("cross_entropy", lambda a: ops.cross_entropy(a, Tensor(np.array([1, 0, 3]))), [arr(3, 4)]),
    ("mse", lambda a, b: ops.mse_loss(a, b), [arr(3, 2), arr(3, 2)]),
]


@pytest.mark.parametrize("name,fn,inputs", CASES, ids=[c[0] for c in CASES])
def test_graph_gradient_equals_pynative(name, fn, inputs):
    tensors = [Tensor(a) for a in inputs]
    out = fn(*tensors)
    weight = Tensor(RNG.uniform(0.5, 1.5, size=out.shape).astype(out.asnumpy().dtype))
    positions = tuple(range(len(tensors)))

    def loss(*xs):
        return ops.sum(fn(*xs) * weight)

    eager = ms.grad(loss, positions)(*tensors)

    def compiled(*xs):
        return ms.grad(loss, positions)(*xs)

    graph = ms.jit(compiled)(*tensors)
    for e, g in zip(eager, graph):
        assert e.dtype == g.dtype and e.shape == g.shape
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy(), rtol=1e-5, atol=1e-6)
