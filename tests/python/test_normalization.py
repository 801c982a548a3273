"""Softmax, log_softmax, layer_norm, batch_norm, dropout and the losses, against NumPy."""
import numpy as np
import pytest
from helpers import FLOAT_DTYPES, INT_DTYPES, assert_close, non_contiguous, random_array, to_kiln

import kiln as ms
from kiln import ops
from kiln.ops._core import call

FLOAT_IDS = [str(d[0]) for d in FLOAT_DTYPES]
LOW_PRECISION = (ms.float16, ms.bfloat16)


def _input(shape, dtype, np_dtype, strided, seed=0, low=-3.0, high=3.0):
    """A kiln input (strided or not) and the float64 values it holds."""
    arr = random_array(shape, np_dtype, np.random.default_rng(seed), low=low, high=high)
    x = non_contiguous(arr, dtype) if strided else to_kiln(arr, dtype)
    return x, x.asnumpy().astype(np.float64)


def _np_log_softmax(a, axis):
    if a.size == 0:
        return a.copy()
    m = np.max(a, axis=axis, keepdims=True)
    return (a - m) - np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True))


# ---- softmax / log_softmax

SOFTMAX_CASES = [((), -1), ((), 0), ((1,), 0), ((5,), -1), ((3, 4), 0), ((3, 4), -1),
                 ((2, 3, 4), 1), ((2, 3, 4), -3), ((2, 7, 300), 1), ((2, 0, 3), 1), ((0, 4), -1)]


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES, ids=[f"{s}-{a}" for s, a in SOFTMAX_CASES])
@pytest.mark.parametrize("strided", [False, True])
def test_softmax_and_log_softmax(dtype, np_dtype, shape, axis, strided):
    x, a = _input(shape, dtype, np_dtype, strided)
    np_axis = None if a.ndim == 0 else axis
    logp = _np_log_softmax(a, np_axis)
    assert_close(ops.softmax(x, axis), np.exp(logp), dtype)
    tol = dict(atol=2e-2) if dtype in LOW_PRECISION else {}  # log values up to ~8 in magnitude
    assert_close(ops.log_softmax(x, axis), logp, dtype, **tol)


def test_softmax_is_stable_for_large_and_infinite_inputs():
    a = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -np.inf, -999.0], [0.0, np.nan, 1.0]],
                 np.float32)
    x = ms.Tensor(a)
    with np.errstate(invalid="ignore"):
        expected = _np_log_softmax(a.astype(np.float64), 1)
    assert_close(ops.log_softmax(x, 1), expected, ms.float32)
    assert_close(ops.softmax(x, 1), np.exp(expected), ms.float32)
    h = ms.Tensor(np.array([60000.0, 60000.0], np.float16))  # exp would overflow float16
    assert_close(ops.softmax(h), np.array([0.5, 0.5]), ms.float16)


@pytest.mark.parametrize("dtype,np_dtype", INT_DTYPES, ids=[str(d[0]) for d in INT_DTYPES])
def test_softmax_of_integers_computes_in_float32(dtype, np_dtype):
    a = np.array([[1, 2, 3], [0, 0, 5]], np_dtype)
    assert_close(ops.softmax(ms.Tensor(a), 1), np.exp(_np_log_softmax(a.astype(np.float64), 1)),
                 ms.float32)


def test_softmax_dtype_argument_and_errors():
    x = ms.Tensor(np.array([[1.0, 2.0], [3.0, 5.0]], np.float32))
    assert ops.softmax(x, 0, dtype=ms.float64).dtype == ms.float64
    with pytest.raises(IndexError, match=r"softmax.*\(2, 2\)"):
        ops.softmax(x, 2)
    with pytest.raises(IndexError, match=r"log_softmax.*\(2, 2\)"):
        ops.log_softmax(x, -3)
    with pytest.raises(TypeError, match="softmax"):
        ops.softmax(x, None)
    with pytest.raises(TypeError, match="log_softmax"):
        ops.log_softmax([1.0, 2.0])


# ---- layer_norm

def _np_layer_norm(a, k, w, b, eps):
    axes = tuple(range(a.ndim - k, a.ndim))
    mu = a.mean(axis=axes, keepdims=True)
    var = ((a - mu) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (a - mu) * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mu, rstd


LN_CASES = [((4,), (4,)), ((3, 5), (5,)), ((3, 5), (3, 5)), ((2, 3, 4), (3, 4)),
            ((2, 3, 4), (4,)), ((1, 1, 7), (7,)), ((0, 4), (4,))]


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape,norm", LN_CASES, ids=[f"{s}-{n}" for s, n in LN_CASES])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("strided", [False, True])
def test_layer_norm(dtype, np_dtype, shape, norm, affine, strided):
    x, a = _input(shape, dtype, np_dtype, strided)
    w = b = wa = ba = None
    if affine:
        w, wa = _input(norm, dtype, np_dtype, strided, seed=1)
        b, ba = _input(norm, dtype, np_dtype, False, seed=2)
    expected, mu, rstd = _np_layer_norm(a, len(norm), wa, ba, 1e-5)
    tol = dict(atol=5e-2) if dtype in LOW_PRECISION else dict(atol=1e-5)
    assert_close(ops.layer_norm(x, norm, w, b), expected, dtype, **tol)
    # The statistics the gradient uses: leading shape, normalized dims kept as 1.
    _, mean, r = call("layer_norm", (x, w, b), (len(shape) - len(norm), 1e-5))
    stat_dtype = ms.float32 if dtype in LOW_PRECISION else dtype
    assert_close(mean, mu, stat_dtype, rtol=1e-5, atol=1e-6)
    assert_close(r, rstd, stat_dtype, rtol=1e-5, atol=1e-6)


def test_layer_norm_large_offset_and_eps():
    rng = np.random.default_rng(5)
    a = (1e4 + rng.standard_normal((3, 64))).astype(np.float32)
    expected, _, _ = _np_layer_norm(a.astype(np.float64), 1, None, None, 1e-3)
    assert_close(ops.layer_norm(ms.Tensor(a), 64, eps=1e-3), expected, ms.float32, atol=1e-3)


def test_layer_norm_errors():
    x = ms.Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"layer_norm.*\(2, 3\)"):
        ops.layer_norm(x, (2,))
    with pytest.raises(ValueError, match=r"layer_norm.*\(4,\)"):
        ops.layer_norm(x, (3,), ms.Tensor(np.ones(4, np.float32)))
    with pytest.raises(ValueError, match=r"layer_norm"):
        ops.layer_norm(x, ())
    with pytest.raises(TypeError, match=r"layer_norm"):
        ops.layer_norm(x, "3")
    with pytest.raises(IndexError, match=r"layer_norm.*\(2, 3\)"):
        call("layer_norm", (x, None, None), (2, 1e-5))


# ---- batch_norm

def _np_batch_norm_stats(a):
    axes = (0,) + tuple(range(2, a.ndim))
    n = a.size // a.shape[1]
    mean = a.mean(axis=axes)
    var = a.var(axis=axes)
    return mean, var, var * n / (n - 1)


def _per_channel(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


BN_SHAPES = [(4, 3), (2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 3)]


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BN_SHAPES, ids=[str(s) for s in BN_SHAPES])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("strided", [False, True])
def test_batch_norm_training_updates_running_stats(dtype, np_dtype, shape, affine, strided):
    x, a = _input(shape, dtype, np_dtype, strided)
    c = shape[1]
    rm0 = np.linspace(-1, 1, c).astype(np.float32)
    rv0 = np.linspace(0.5, 2, c).astype(np.float32)
    rm, rv = ms.Tensor(rm0.copy()), ms.Tensor(rv0.copy())
    w = b = None
    wa, ba = np.ones(c), np.zeros(c)
    if affine:
        wa, ba = np.linspace(0.5, 1.5, c), np.linspace(-1, 1, c)
        w, b = ms.Tensor(wa.astype(np.float32)), ms.Tensor(ba.astype(np.float32))
    y = ops.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2, eps=1e-5)
    mean, var, unbiased = _np_batch_norm_stats(a)
    expected = ((a - _per_channel(mean, a.ndim)) / np.sqrt(_per_channel(var, a.ndim) + 1e-5)
                * _per_channel(wa, a.ndim) + _per_channel(ba, a.ndim))
    tol = dict(atol=5e-2) if dtype in LOW_PRECISION else dict(atol=1e-5)
    assert_close(y, expected, dtype, **tol)
    # Updated in place, in their own dtype (float32 even for 16-bit inputs).
    assert_close(rm, 0.8 * rm0 + 0.2 * mean, ms.float32, atol=1e-5)
    assert_close(rv, 0.8 * rv0 + 0.2 * unbiased, ms.float32, atol=1e-5)


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", BN_SHAPES, ids=[str(s) for s in BN_SHAPES])
def test_batch_norm_eval_uses_running_stats_and_leaves_them(dtype, np_dtype, shape):
    x, a = _input(shape, dtype, np_dtype, True)
    c = shape[1]
    rm0, rv0 = np.linspace(-1, 1, c), np.linspace(0.5, 2, c)
    rm, rv = ms.Tensor(rm0.astype(np.float64)), ms.Tensor(rv0.astype(np.float64))
    w, b = ms.Tensor(np.full(c, 2.0, np.float32)), ms.Tensor(np.full(c, 0.5, np.float32))
    y = ops.batch_norm(x, rm, rv, w, b)
    expected = (a - _per_channel(rm0, a.ndim)) / np.sqrt(_per_channel(rv0, a.ndim) + 1e-5) * 2 + 0.5
    tol = dict(atol=5e-2) if dtype in LOW_PRECISION else dict(atol=1e-5)
    assert_close(y, expected, dtype, **tol)
    assert_close(rm, rm0, ms.float64)
    assert_close(rv, rv0, ms.float64)


def test_batch_norm_saved_statistics_and_no_running_stats():
    a = np.random.default_rng(2).standard_normal((6, 3, 2)).astype(np.float32)
    y, saved_mean, saved_invstd = call("batch_norm", (ms.Tensor(a), None, None, None, None),
                                       (True, 0.1, 1e-5))
    mean, var, _ = _np_batch_norm_stats(a.astype(np.float64))
    assert_close(saved_mean, mean, ms.float32)
    assert_close(saved_invstd, 1 / np.sqrt(var + 1e-5), ms.float32, rtol=1e-5)
    assert tuple(y.shape) == a.shape


def test_batch_norm_errors():
    x = ms.Tensor(np.zeros((4, 3), np.float32))
    ones = ms.Tensor(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="batch_norm.*training"):
        ops.batch_norm(x, None, None, None, None)
    with pytest.raises(ValueError, match=r"batch_norm.*\(4, 3\)"):
        ops.batch_norm(x, ones, ms.Tensor(np.ones(2, np.float32)), None, None)
    with pytest.raises(ValueError, match=r"batch_norm.*\(1, 3\)"):
        ops.batch_norm(ms.Tensor(np.zeros((1, 3), np.float32)), ones, ones, None, None, True)
    with pytest.raises(ValueError, match=r"batch_norm.*\(3,\)"):
        ops.batch_norm(ms.Tensor(np.zeros(3, np.float32)), ones, ones, None, None)
    with pytest.raises(TypeError, match="batch_norm.*running_mean"):
        ops.batch_norm(x, ms.Tensor(np.zeros(3, np.int32)), ones, None, None)
    with pytest.raises(ValueError, match="batch_norm.*momentum"):
        ops.batch_norm(x, ones, ones, None, None, True, momentum=2.0)


# ---- dropout

def test_dropout_mask_statistics_and_scaling():
    x = ms.Tensor(np.full((200, 500), 3.0, np.float32))
    y, mask = call("dropout", (x,), (0.3, None))
    m = mask.asnumpy()
    assert set(np.unique(m)) <= {0.0, np.float32(1 / 0.7)}
    assert abs((m != 0).mean() - 0.7) < 0.01
    np.testing.assert_allclose(y.asnumpy(), 3.0 * m, rtol=1e-6)
    # The mask is not structured: neighbouring rows differ.
    assert not np.array_equal(m[0], m[1])


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=FLOAT_IDS)
def test_dropout_reproducible_with_set_seed(dtype, np_dtype):
    x, a = _input((64, 33), dtype, np_dtype, True)
    ms.set_seed(123)
    first = ops.dropout(x, 0.5).asnumpy()
    second = ops.dropout(x, 0.5).asnumpy()
    ms.set_seed(123)
    again = ops.dropout(x, 0.5).asnumpy()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, second)
    kept = first != 0
    assert 0.4 < kept.mean() < 0.6
    np.testing.assert_array_equal(first[kept], (a * 2)[kept])  # doubling is exact in any dtype


def test_dropout_scaling_values_and_edge_probabilities():
    a = np.random.default_rng(1).uniform(1, 2, (50, 40)).astype(np.float32)
    x = ms.Tensor(a)
    y = ops.dropout(x, 0.25).asnumpy()
    kept = y != 0
    np.testing.assert_allclose(y[kept], a[kept] / 0.75, rtol=1e-6)
    assert_close(ops.dropout(x, 0.0), a, ms.float32)
    assert_close(ops.dropout(x, 1.0), np.zeros_like(a), ms.float32)
    assert ops.dropout(x, 0.5, training=False) is x


def test_dropout_seed_argument_and_thread_count_independence():
    x = ms.Tensor(np.ones((300, 300), np.float32))
    a = ops.dropout(x, 0.5, seed=7).asnumpy()
    ms.set_seed(99)
    np.testing.assert_array_equal(ops.dropout(x, 0.5, seed=7).asnumpy(), a)
    threads = ms.get_num_threads()
    try:
        ms.set_num_threads(1)
        np.testing.assert_array_equal(ops.dropout(x, 0.5, seed=7).asnumpy(), a)
    finally:
        ms.set_num_threads(threads)


def test_dropout_errors():
    with pytest.raises(TypeError, match="dropout"):
        call("dropout", (ms.Tensor(np.ones(3, np.int32)),), (0.5, None))
    x = ms.Tensor(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="dropout"):
        ops.dropout(x, 1.5)
    with pytest.raises(ValueError, match=r"dropout.*\(3,\)"):
        call("dropout", (x,), (-0.1, None))
    with pytest.raises(TypeError, match="dropout"):
        ops.dropout(x, "0.5")


# ---- losses

def _np_reduce(loss, reduction):
    return {"none": loss, "sum": np.sum(loss), "mean": np.mean(loss)}[reduction]


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=FLOAT_IDS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("target_shape", [(3, 4), (3, 1), (4,)])
def test_mse_and_l1_loss_broadcast(dtype, np_dtype, reduction, target_shape):
    x, a = _input((3, 4), dtype, np_dtype, True)
    t, b = _input(target_shape, dtype, np_dtype, False, seed=1)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype in LOW_PRECISION else {}
    assert_close(ops.mse_loss(x, t, reduction), _np_reduce((a - b) ** 2, reduction), dtype, **tol)
    assert_close(ops.l1_loss(x, t, reduction), _np_reduce(np.abs(a - b), reduction), dtype, **tol)


def _np_cross_entropy(logp, target, weight, ignore_index, reduction, smoothing):
    """PyTorch's definition, on log-probabilities `logp` with the class axis 1 (0 for 1-d)."""
    axis = 0 if logp.ndim == 1 else 1
    classes = logp.shape[axis]
    w = np.ones(classes) if weight is None else weight
    if target.dtype.kind == "f":
        t = target * (1 - smoothing) + smoothing / classes
        loss = -(logp * t * w.reshape((classes,) + (1,) * (logp.ndim - axis - 1))).sum(axis)
        return _np_reduce(loss, reduction)
    lp = np.moveaxis(logp, axis, -1)
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    picked = np.take_along_axis(lp, safe[..., None], -1)[..., 0]
    wt = w[safe] * valid
    nll = -picked * wt
    smooth = -(lp * w).sum(-1) * valid
    if reduction == "none":
        return (1 - smoothing) * nll + smoothing / classes * smooth
    if reduction == "sum":
        return (1 - smoothing) * nll.sum() + smoothing / classes * smooth.sum()
    return ((1 - smoothing) * nll.sum() + smoothing / classes * smooth.sum()) / wt.sum()


CE_SHAPES = [(5,), (4, 5), (3, 4, 2), (2, 3, 2, 2)]


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=FLOAT_IDS)
@pytest.mark.parametrize("shape", CE_SHAPES, ids=[str(s) for s in CE_SHAPES])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_and_nll_loss_class_indices(dtype, np_dtype, shape, reduction, weighted,
                                                  smoothing):
    rng = np.random.default_rng(4)
    x, a = _input(shape, dtype, np_dtype, True)
    axis = 0 if len(shape) == 1 else 1
    classes = shape[axis]
    target = rng.integers(0, classes, size=shape[:axis] + shape[axis + 1:])
    if target.size > 1:
        target.flat[1] = -100  # ignored
    weight = np.linspace(0.5, 2.0, classes) if weighted else None
    kw = ms.Tensor(weight.astype(np.float32)) if weighted else None
    logp = _np_log_softmax(a, axis)
    expected = _np_cross_entropy(logp, target, weight, -100, reduction, smoothing)
    tol = dict(rtol=3e-2, atol=3e-2) if dtype in LOW_PRECISION else dict(rtol=1e-5, atol=1e-5)
    got = ops.cross_entropy(x, ms.Tensor(target), kw, reduction=reduction,
                            label_smoothing=smoothing)
    assert_close(got, expected, **tol)
    lp = ms.Tensor(logp.astype(np.float32)).astype(dtype)
    got = ops.nll_loss(lp, ms.Tensor(target.astype(np.int32)), kw, reduction=reduction,
                       label_smoothing=smoothing)
    assert_close(got, expected, **tol)


@pytest.mark.parametrize("shape", CE_SHAPES, ids=[str(s) for s in CE_SHAPES])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_probability_targets(shape, reduction, weighted, smoothing):
    rng = np.random.default_rng(6)
    a = rng.standard_normal(shape)
    axis = 0 if len(shape) == 1 else 1
    probs = rng.random(shape)
    probs /= probs.sum(axis=axis, keepdims=True)
    weight = np.linspace(0.5, 2.0, shape[axis]) if weighted else None
    logp = _np_log_softmax(a, axis)
    expected = _np_cross_entropy(logp, probs, weight, -100, reduction, smoothing)
    kw = None if weight is None else ms.Tensor(weight)
    got = ops.cross_entropy(ms.Tensor(a), ms.Tensor(probs), kw, reduction=reduction,
                            label_smoothing=smoothing)
    assert_close(got, expected, ms.float64)


def test_cross_entropy_masked_logits_and_all_ignored():
    # A -inf logit for a class that is not the target must not turn the loss into NaN.
    x = ms.Tensor(np.array([[0.0, -np.inf, 1.0], [2.0, 0.5, -np.inf]], np.float32))
    t = ms.Tensor(np.array([2, 0]))
    logp = _np_log_softmax(np.array([[0.0, -np.inf, 1.0], [2.0, 0.5, -np.inf]]), 1)
    assert_close(ops.cross_entropy(x, t), np.mean([-logp[0, 2], -logp[1, 0]]), ms.float32)
    ignored = ops.cross_entropy(x, ms.Tensor(np.array([-100, -100])), reduction="sum")
    assert_close(ignored, np.array(0.0), ms.float32)


def test_loss_errors():
    x = ms.Tensor(np.zeros((4, 3), np.float32))
    t = ms.Tensor(np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="cross_entropy.*reduction"):
        ops.cross_entropy(x, t, reduction="avg")
    with pytest.raises(ValueError, match=r"cross_entropy.*\(4, 3\)"):
        ops.cross_entropy(x, ms.Tensor(np.zeros(3, np.int64)))
    with pytest.raises(ValueError, match=r"cross_entropy.*\(4, 3\)"):
        ops.cross_entropy(x, ms.Tensor(np.zeros((4, 2), np.float32)))
    with pytest.raises(TypeError, match="cross_entropy"):
        ops.cross_entropy(x, ms.Tensor(np.zeros(4, np.bool_)))
    with pytest.raises(ValueError, match=r"cross_entropy.*weight"):
        ops.cross_entropy(x, t, ms.Tensor(np.ones(4, np.float32)))
    with pytest.raises(ValueError, match="cross_entropy.*label_smoothing"):
        ops.cross_entropy(x, t, label_smoothing=1.5)
    with pytest.raises(ValueError, match="cross_entropy"):
        ops.cross_entropy(ms.Tensor(np.float32(1.0)), t)
    with pytest.raises(TypeError, match="nll_loss"):
        ops.nll_loss(x, ms.Tensor(np.zeros(4, np.float32)))
    with pytest.raises(ValueError, match="mse_loss"):
        ops.mse_loss(x, x, reduction="max")
    with pytest.raises(TypeError, match="l1_loss"):
        ops.l1_loss(1.0, x)


def test_cross_entropy_rejects_out_of_range_classes():
    import kiln as _ms

    logits = _ms.Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(IndexError, match=r"cross_entropy: target class 9 is out of range \[0, 3\)"):
        _ms.ops.cross_entropy(logits, _ms.Tensor(np.array([9, 0])))
    with pytest.raises(IndexError, match="out of range"):
        _ms.ops.nll_loss(logits, _ms.Tensor(np.array([-3, 0])))
    # ignore_index is allowed outside the range
    _ms.ops.cross_entropy(logits, _ms.Tensor(np.array([-100, 0])))
