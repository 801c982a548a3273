"""Gradients of the reduce and normalization families against finite differences and NumPy.

ms.grad of a non-scalar output uses ones as its sensitivity; check_grad projects the output on a
random weight, so every output element's gradient is checked separately."""
import numpy as np
import pytest
from gradcheck import check_grad

import kiln as ms
from kiln import Tensor, ops
from kiln.ops._core import KIND, call

RNG = np.random.default_rng(7)


def rand(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape)


def distinct(*shape):
    """Values far apart (no ties within 1e-6), so max/min are differentiable at them."""
    n = int(np.prod(shape)) if shape else 1
    return (RNG.permutation(n) * 0.37 - n * 0.1).reshape(shape)


# ---- sum / mean / prod / amax / amin: (reduction, axis, keepdims, input shape)

REDUCE_FNS = {
    "sum": lambda x, a, k: ops.sum(x, a, k),
    "mean": lambda x, a, k: ops.mean(x, a, k),
    "prod": lambda x, a, k: ops.prod(x, a, k),
    "amax": lambda x, a, k: ops.amax(x, a, k),
    "amin": lambda x, a, k: ops.amin(x, a, k),
}

AXES = [
    (None, (2, 3, 4)), (None, (5,)), (None, ()), ((), (2, 3)), (0, (3,)), (0, ()), (-1, ()),
    (1, (2, 3, 4)), (-1, (2, 3, 4)), (-3, (2, 3, 4)), ((0, 2), (2, 3, 4)), ((-1, 0), (2, 3, 4)),
    ((0, 1, 2), (2, 3, 4)), (1, (4, 1, 3)), (0, (1, 5)),
]
REDUCE_CASES = [(name, axis, keep, shape) for name in REDUCE_FNS for axis, shape in AXES
                for keep in (False, True)]


@pytest.mark.parametrize("name,axis,keepdims,shape", REDUCE_CASES,
                         ids=[f"{n}-{a}-{'keep' if k else 'drop'}-{s}"
                              for n, a, k, s in REDUCE_CASES])
def test_reduction_gradients(name, axis, keepdims, shape):
    fn = REDUCE_FNS[name]
    x = distinct(*shape) if name in ("amax", "amin") else rand(*shape, low=0.5, high=1.5)
    if name == "prod":  # mixed signs, magnitudes near 1
        x = x * RNG.choice([-1.0, 1.0], size=shape)
    check_grad(lambda t: fn(t, axis, keepdims), x)


def test_sum_gradient_is_broadcast_dy():
    g = ms.grad(lambda x: ops.sum(x, 1) * Tensor(np.array([1.0, 2.0])))(Tensor(np.zeros((2, 3))))
    np.testing.assert_array_equal(g.asnumpy(), [[1, 1, 1], [2, 2, 2]])


def test_mean_gradient_divides_by_count():
    g = ms.grad(lambda x: ops.mean(x, (0, 2)))(Tensor(np.zeros((2, 3, 5))))
    np.testing.assert_allclose(g.asnumpy(), np.full((2, 3, 5), 0.1))


def test_sum_with_a_dtype_gives_the_input_dtype_gradient():
    x = Tensor(np.ones((2, 3), np.float32))
    g = ms.grad(lambda t: ops.sum(t, 1, dtype=ms.float64) * 3.0)(x)
    assert g.dtype == ms.float32
    np.testing.assert_array_equal(g.asnumpy(), np.full((2, 3), 3.0))


@pytest.mark.parametrize("dtype,np_dtype", [(ms.float32, np.float32), (ms.float16, np.float16),
                                            (ms.bfloat16, np.float32)])
def test_reduction_gradients_keep_low_precision_dtypes(dtype, np_dtype):
    x = Tensor(np.arange(1.0, 7.0).reshape(2, 3).astype(np_dtype)).astype(dtype)
    for fn, want in [(lambda t: ops.sum(t, -1), np.ones((2, 3))),
                     (lambda t: ops.mean(t), np.full((2, 3), 1 / 6)),
                     (lambda t: ops.amax(t, 0), [[0, 0, 0], [1, 1, 1]])]:
        g = ms.grad(fn)(x)
        assert g.dtype == dtype
        np.testing.assert_allclose(g.astype(ms.float32).asnumpy(), want, rtol=1e-2)


def test_prod_gradient_with_zeros():
    x = np.array([[2.0, 0.0, 3.0, 4.0],     # one zero: the zero gets 2*3*4, the rest 0
                  [0.0, 5.0, 0.0, 1.0],     # two zeros: all 0
                  [1.0, 2.0, -3.0, 0.5]])   # none: prod / x
    g = ms.grad(lambda t: ops.prod(t, 1))(Tensor(x))
    want = [[0, 24, 0, 0], [0, 0, 0, 0], [-3.0, -1.5, 1.0, -6.0]]
    np.testing.assert_allclose(g.asnumpy(), want)
    g_all = ms.grad(lambda t: ops.prod(t))(Tensor(np.array([3.0, 0.0, 2.0])))
    np.testing.assert_allclose(g_all.asnumpy(), [0, 6, 0])


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_extremum_gradient_splits_ties_evenly(name):
    x = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0]])
    if name == "amin":
        x = -x
    fn = REDUCE_FNS[name]
    g = ms.grad(lambda t: fn(t, 1, False) * Tensor(np.array([1.0, 2.0])))(Tensor(x))
    np.testing.assert_allclose(g.asnumpy(), [[0, 0.5, 0.5, 0], [0.5, 0.5, 0.5, 0.5]])
    g = ms.grad(lambda t: fn(t, None, False))(Tensor(x))  # four 5s overall
    np.testing.assert_allclose(g.asnumpy(), [[0, 0, 0, 0], [0.25] * 4])


def test_max_with_indices_and_nan_gradients():
    x = Tensor(np.array([[1.0, 4.0, 2.0], [np.nan, 0.0, 7.0]]))
    g = ms.grad(lambda t: ops.max(t, 1)[0])(x)
    np.testing.assert_array_equal(g.asnumpy(), [[0, 1, 0], [1, 0, 0]])  # NaN is the maximum
    g = ms.grad(lambda t: ops.min(t, 0)[0])(x)
    np.testing.assert_array_equal(g.asnumpy(), [[0, 0, 1], [1, 1, 0]])


def test_argmax_and_argmin_have_no_gradient():
    for name in ("argmax", "argmin", "layer_norm_grad", "batch_norm_grad"):
        assert ms._C.op_schema(KIND[name])["has_grad"]
    x = Tensor(rand(3, 4))
    g = ms.grad(lambda t: t * ops.cast(ops.argmax(t, 1), ms.float64).reshape(3, 1))(x)
    np.testing.assert_array_equal(g.asnumpy(), np.broadcast_to(
        np.argmax(x.asnumpy(), 1).reshape(3, 1).astype(float), (3, 4)))


def test_logsumexp_gradient_is_softmax():
    check_grad(lambda t: ops.logsumexp(t, 1), rand(3, 5))
    x = rand(3, 5)
    g = ms.grad(lambda t: ops.logsumexp(t, -1))(Tensor(x))
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(g.asnumpy(), e / e.sum(-1, keepdims=True), rtol=1e-12)


# ---- softmax / log_softmax

SOFTMAX_CASES = [((), -1), ((), 0), ((1,), 0), ((5,), -1), ((3, 4), 0), ((3, 4), -1),
                 ((2, 3, 4), 1), ((2, 3, 4), -3), ((2, 3, 4), -1)]


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES, ids=[f"{s}-{a}" for s, a in SOFTMAX_CASES])
def test_softmax_gradients(name, shape, axis):
    fn = getattr(ops, name)
    check_grad(lambda t: fn(t, axis), rand(*shape))


def test_softmax_gradient_in_float32_matches_float64():
    x = rand(4, 33)
    w = RNG.uniform(0.5, 1.5, size=(4, 33))
    for fn in (ops.softmax, ops.log_softmax):
        want = ms.grad(lambda t, fn=fn: fn(t) * Tensor(w))(Tensor(x)).asnumpy()
        got = ms.grad(lambda t, fn=fn: fn(t) * Tensor(w.astype(np.float32)))(
            Tensor(x.astype(np.float32)))
        assert got.dtype == ms.float32
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-4, atol=1e-5)


def test_cross_entropy_gradient():
    target = Tensor(np.array([2, 0, 1], np.int64))
    check_grad(lambda t: ops.cross_entropy(t, target), rand(3, 4))


# ---- layer_norm

LAYER_NORM_CASES = [((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((5, 6), (6,)), ((4,), (4,)),
                    ((3, 1), (1,)), ((2, 2, 3, 2), (2, 3, 2))]


@pytest.mark.parametrize("shape,normalized", LAYER_NORM_CASES,
                         ids=[f"{s}-{n}" for s, n in LAYER_NORM_CASES])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm_gradients(shape, normalized, affine):
    x = rand(*shape)
    w, b = rand(*normalized), rand(*normalized)
    if affine == "both":
        check_grad(lambda t, u, v: ops.layer_norm(t, normalized, u, v), x, w, b)
    elif affine == "weight":
        check_grad(lambda t, u: ops.layer_norm(t, normalized, u, None), x, w)
    elif affine == "bias":
        check_grad(lambda t, v: ops.layer_norm(t, normalized, None, v), x, b)
    else:
        check_grad(lambda t: ops.layer_norm(t, normalized), x)


def test_layer_norm_wide_rows_and_eps():
    # Rows wider than the kernel's column block; a large eps changes rstd noticeably.
    check_grad(lambda t, u, v: ops.layer_norm(t, (300,), u, v, eps=0.5), rand(2, 300),
               rand(300), rand(300), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("which", [1, 2])
def test_layer_norm_saved_statistics_gradients(which):
    check_grad(lambda t: call("layer_norm", (t, None, None), (1, 1e-5))[which], rand(3, 2, 4))
    check_grad(lambda t, u: ops.mul(call("layer_norm", (t, u, None), (-1, 1e-3))[which], 2.0)
               + call("layer_norm", (t, u, None), (-1, 1e-3))[0][..., :1],
               rand(3, 5), rand(5))


def _np_layer_norm_grads(x, w, b, dy, begin, eps):
    axes = tuple(range(begin, x.ndim))
    mu = x.mean(axes, keepdims=True)
    rstd = 1 / np.sqrt(((x - mu) ** 2).mean(axes, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    g = dy * w
    dx = rstd * (g - g.mean(axes, keepdims=True) - xhat * (g * xhat).mean(axes, keepdims=True))
    lead = tuple(range(begin))
    return dx, (dy * xhat).sum(lead), dy.sum(lead)


@pytest.mark.parametrize("dtype,np_dtype,rtol", [(ms.float32, np.float32, 1e-4),
                                                 (ms.float16, np.float16, 2e-2)])
def test_layer_norm_low_precision_gradients(dtype, np_dtype, rtol):
    x, w, b, dy = rand(4, 8, 16), rand(16), rand(16), rand(4, 8, 16)
    cast = lambda a: Tensor(a.astype(np_dtype))  # noqa: E731
    grads = ms.grad(lambda t, u, v: ops.layer_norm(t, (16,), u, v) * cast(dy), (0, 1, 2))(
        cast(x), cast(w), cast(b))
    xs, ws, dys = (a.astype(np_dtype).astype(np.float64) for a in (x, w, dy))
    want = _np_layer_norm_grads(xs, ws, None, dys, 2, 1e-5)
    for got, ref in zip(grads, want):
        assert got.dtype == dtype
        np.testing.assert_allclose(got.asnumpy().astype(np.float64), ref, rtol=rtol,
                                   atol=rtol * np.abs(ref).max())


# ---- batch_norm

def _np_batch_norm_grads(x, w, dy, eps):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mu = x.mean(axes, keepdims=True)
    invstd = 1 / np.sqrt(x.var(axes, keepdims=True) + eps)
    xhat = (x - mu) * invstd
    dx = w.reshape(shape) * invstd * (dy - dy.mean(axes, keepdims=True)
                                      - xhat * (dy * xhat).mean(axes, keepdims=True))
    return dx, (dy * xhat).sum(axes), dy.sum(axes)


BATCH_NORM_SHAPES = [(4, 3), (2, 3, 5), (2, 3, 2, 3), (3, 2, 1, 1), (1, 2, 4)]


@pytest.mark.parametrize("shape", BATCH_NORM_SHAPES, ids=[str(s) for s in BATCH_NORM_SHAPES])
def test_batch_norm_training_gradients(shape):
    c = shape[1]
    x, w, b = rand(*shape), rand(c), rand(c)
    check_grad(lambda t, u, v: ops.batch_norm(t, None, None, u, v, training=True), x, w, b)
    # With running statistics (updated in place on every call; the output does not use them).
    rm, rv = Tensor(np.zeros(c)), Tensor(np.ones(c))
    check_grad(lambda t, u, v: ops.batch_norm(t, rm, rv, u, v, training=True, eps=1e-3), x, w, b)
    check_grad(lambda t: ops.batch_norm(t, None, None, None, None, training=True), x)


@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3, 3)], ids=str)
def test_batch_norm_training_gradients_match_numpy(shape):
    c = shape[1]
    x, w, b, dy = rand(*shape), rand(c), rand(c), rand(*shape)
    grads = ms.grad(lambda t, u, v: ops.batch_norm(t, None, None, u, v, True) * Tensor(dy),
                    (0, 1, 2))(Tensor(x), Tensor(w), Tensor(b))
    for got, want in zip(grads, _np_batch_norm_grads(x, w, dy, 1e-5)):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-10, atol=1e-12)
    # float32 input with float64 per-channel parameters (only the input is promoted).
    grads32 = ms.grad(lambda t, u, v: ops.batch_norm(t, None, None, u, v, True)
                      * Tensor(dy.astype(np.float32)), (0, 1, 2))(
        Tensor(x.astype(np.float32)), Tensor(w), Tensor(b))
    assert [g.dtype for g in grads32] == [ms.float32, ms.float64, ms.float64]
    for got, want in zip(grads32, _np_batch_norm_grads(x, w, dy, 1e-5)):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-4, atol=1e-4)


def test_batch_norm_eval_gradients_use_the_running_statistics():
    x, w, b, dy = rand(4, 3, 2), rand(3), rand(3), rand(4, 3, 2)
    rm_np, rv_np = rand(3), rand(3, low=0.5, high=2.0)
    rm, rv = Tensor(rm_np), Tensor(rv_np)
    check_grad(lambda t, u, v: ops.batch_norm(t, rm, rv, u, v, training=False), x, w, b)
    fn = lambda t, m, v, u, c: ops.batch_norm(t, m, v, u, c) * Tensor(dy)  # noqa: E731
    gx, gm, gv, gw, gb = ms.grad(fn, (0, 1, 2, 3, 4))(Tensor(x), rm, rv, Tensor(w), Tensor(b))
    invstd = 1 / np.sqrt(rv_np + 1e-5)
    k = (1, 3, 1)
    np.testing.assert_allclose(gx.asnumpy(), dy * (w * invstd).reshape(k), rtol=1e-12)
    np.testing.assert_allclose(gw.asnumpy(),
                               (dy * (x - rm_np.reshape(k)) * invstd.reshape(k)).sum((0, 2)),
                               rtol=1e-12)
    np.testing.assert_allclose(gb.asnumpy(), dy.sum((0, 2)), rtol=1e-12)
    np.testing.assert_array_equal(gm.asnumpy(), 0)  # running statistics get no gradient
    np.testing.assert_array_equal(gv.asnumpy(), 0)


@pytest.mark.parametrize("which", [1, 2])
def test_batch_norm_saved_statistics_gradients(which):
    check_grad(lambda t: call("batch_norm", (t, None, None, None, None), (True, 0.1, 1e-5))[which],
               rand(4, 3, 2))


def _batch_norm_first_grads(training, with_stats, c):
    """(x, w, b, dy) -> batch_norm's three first-order gradients under the output gradient dy,
    as functions to differentiate (dy an argument too: in a second derivative it is one)."""
    rm, rv = Tensor(np.full(c, 0.3)), Tensor(np.full(c, 1.7))

    def f(t, u, v, d):
        stats = (rm, rv) if with_stats else (None, None)
        return ops.batch_norm(t, *stats, u, v, training=training) * d

    first = ms.grad(f, (0, 1, 2))
    return [lambda t, u, v, d, k=k: first(t, u, v, d)[k] for k in range(3)]


@pytest.mark.parametrize("training,with_stats", [(True, False), (True, True), (False, True)])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 2, 3)], ids=str)
def test_batch_norm_second_derivatives(shape, training, with_stats):
    c = shape[1]
    x, w, b, dy = rand(*shape), rand(c), rand(c), rand(*shape)
    for grad_k in _batch_norm_first_grads(training, with_stats, c):
        check_grad(grad_k, x, w, b, dy, rtol=1e-5, atol=1e-6)


def test_batch_norm_second_derivatives_in_graph_mode():
    x, w, b, dy = rand(3, 2, 2, 2), rand(2), rand(2), rand(3, 2, 2, 2)
    dx = _batch_norm_first_grads(True, False, 2)[0]

    def h(t, u, v):
        return ops.sum(dx(t, u, v, Tensor(dy)) ** 2)

    want = ms.grad(h, (0, 1))(Tensor(x), Tensor(w), Tensor(b))
    got = ms.jit(ms.grad(h, (0, 1)))(Tensor(x), Tensor(w), Tensor(b))
    for g, r in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), r.asnumpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_second_derivatives(approximate):
    # gelu_grad(dy, x) differentiated in dy and x (dy an input: in a second derivative it is).
    first = ms.grad(lambda t, d: ops.gelu(t, approximate) * d, 0)
    x, dy = rand(3, 4) * 3, rand(3, 4)
    check_grad(first, x, dy, rtol=1e-5, atol=1e-7)

    def h(t):
        return ops.sum(first(t, Tensor(dy)) ** 2)

    want = ms.grad(h)(Tensor(x))
    np.testing.assert_allclose(ms.jit(ms.grad(h))(Tensor(x)).asnumpy(), want.asnumpy(),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape,normalized", [((3, 4), (4,)), ((2, 3, 4), (3, 4)),
                                              ((5,), (5,))], ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_second_derivatives(shape, normalized, affine):
    # layer_norm_grad differentiated in dy, x and the weight (dy an input, as in a second
    # derivative); its gradient ops' outputs each get a check of their own.
    def f(t, u, v, d):
        return ops.layer_norm(t, normalized, u if affine else None, v if affine else None) * d

    first = ms.grad(f, (0, 1, 2) if affine else 0)
    x, w, b, dy = rand(*shape), rand(*normalized), rand(*normalized), rand(*shape)
    outputs = range(3) if affine else [None]
    for k in outputs:
        def grad_k(t, u, v, d, k=k):
            out = first(t, u, v, d)
            return out if k is None else out[k]

        check_grad(grad_k, x, w, b, dy, rtol=1e-5, atol=1e-6)


def test_layer_norm_second_derivatives_in_graph_mode():
    x, w, b, dy = rand(2, 3, 4), rand(4), rand(4), rand(2, 3, 4)
    first = ms.grad(lambda t, u, v: ops.layer_norm(t, (4,), u, v) * Tensor(dy), (0, 1))

    def h(t, u, v):
        gx, gw = first(t, u, v)
        return ops.sum(gx * gx) + ops.sum(gw * gw)

    want = ms.grad(h, (0, 1))(Tensor(x), Tensor(w), Tensor(b))
    got = ms.jit(ms.grad(h, (0, 1)))(Tensor(x), Tensor(w), Tensor(b))
    for g, r in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), r.asnumpy(), rtol=1e-10, atol=1e-12)


# ---- dropout

@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 1.0])
def test_dropout_gradient_is_dy_times_mask(p):
    x = Tensor(rand(6, 50))
    dy = rand(6, 50)
    _, mask = call("dropout", (x,), (p, 1234))
    g = ms.grad(lambda t: call("dropout", (t,), (p, 1234))[0] * Tensor(dy))(x)
    np.testing.assert_array_equal(g.asnumpy(), dy * mask.asnumpy())
    if 0 < p < 1:
        kept = mask.asnumpy() != 0
        assert 0 < kept.mean() < 1
        np.testing.assert_allclose(mask.asnumpy()[kept], 1 / (1 - p))


def test_dropout_gradient_through_the_functional_op():
    ms.set_seed(5)
    x = Tensor(np.ones((4, 100), np.float32))
    g = ms.grad(lambda t: ops.dropout(t, 0.25) * 2.0)(x).asnumpy()
    assert g.dtype == np.float32
    assert set(np.unique(g)) <= {0.0, np.float32(2.0 / 0.75)}
    assert 0 < np.count_nonzero(g) < g.size


# ---- second order through the composite rules

def test_second_derivative_of_softmax_and_mean():
    x = rand(5)

    def first(t):
        return ms.grad(lambda u: ops.sum(ops.softmax(u) * Tensor(np.arange(5.0))))(t)

    check_grad(first, x, rtol=1e-4, atol=1e-6)
    g2 = ms.grad(lambda t: ms.grad(lambda u: ops.mean(u * u))(t))(Tensor(x))
    np.testing.assert_allclose(g2.asnumpy(), np.full(5, 2 / 5))
