"""Reductions and scans beyond sum/mean/max: var/std, all/any, nan-aware sums, cumsum/cumprod,
sorting and selection (sort, argsort, topk, median), norms and differences."""
import builtins
import math

from kiln.common import dtype as mstype
from kiln.ops._core import axes_attr, call, dtype_attr, int_arg, is_tensor

__all__ = [
    "all", "any", "var", "std", "var_mean", "std_mean", "nansum", "nanmean", "count_nonzero",
    "aminmax", "cumsum", "cumprod", "logcumsumexp", "cummax", "cummin", "sort", "argsort",
    "msort", "topk", "top_k", "median", "vector_norm", "diff", "trace",
]


def _tensor(op, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _axis(op, x, axis, name="axis"):
    n = builtins.max(1, len(x.shape))
    a = int_arg(axis, op, name)
    if not -n <= a < n:
        raise ValueError(f"{op}: axis {a} is out of range for a tensor of rank {len(x.shape)} "
                         f"(expected [{-n}, {n}))")
    return a % n


def _bool(x):
    return x if x.dtype == mstype.bool_ else call("not_equal", (x, 0))


def all(input, axis=None, keep_dims=False):  # noqa: A001,A002 - MindSpore's names
    """True where every element along axis is nonzero (None: all axes)."""
    b = _bool(_tensor("all", input))
    return call("reduce_min", (b,), (axes_attr(axis, "all"), bool(keep_dims)))


def any(input, axis=None, keep_dims=False):  # noqa: A001,A002
    """True where some element along axis is nonzero (None: all axes)."""
    b = _bool(_tensor("any", input))
    return call("reduce_max", (b,), (axes_attr(axis, "any"), bool(keep_dims)))


def _moments(op, input, axis, ddof, keepdims):  # noqa: A002
    x = _tensor(op, input)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: input must be a float Tensor, got {x.dtype}")
    if not isinstance(ddof, int):  # a bool counts as 0 or 1, as in MindSpore
        raise TypeError(f"{op}: ddof must be an int, got {type(ddof).__name__}")
    ddof = int(ddof)
    axes = axes_attr(axis, op)
    mean = call("reduce_mean", (x,), (axes, True))
    dev = call("sub", (x, mean))
    ss = call("reduce_sum", (call("mul", (dev, dev)),), (axes, bool(keepdims), None))
    if builtins.min(tuple(x.shape), default=0) < 0:
        # A graph's dimension of any size: the count is known when it runs (a sum of ones).
        ones = call("fill_like", (x,), (1, dtype_attr(x.dtype)))
        count = call("reduce_sum", (ones,), (axes, bool(keepdims), None))
        var_ = call("div", (ss, call("maximum", (call("sub", (count, float(ddof))), 0.0))))
    else:
        count = x.size // builtins.max(1, ss.size) if x.size else 0
        var_ = call("div", (ss, float(builtins.max(count - ddof, 0))))
    if not keepdims:
        mean = call("reduce_mean", (x,), (axes, False))
    return var_, mean


def var(input, axis=None, ddof=0, keepdims=False):  # noqa: A002
    """The variance over axis (None: all) with ddof degrees of freedom removed."""
    return _moments("var", input, axis, ddof, keepdims)[0]


def std(input, axis=None, ddof=0, keepdims=False):  # noqa: A002
    return call("sqrt", (_moments("std", input, axis, ddof, keepdims)[0],))


def var_mean(input, axis=None, ddof=0, keepdims=False):  # noqa: A002
    """(variance, mean) over axis."""
    return _moments("var_mean", input, axis, ddof, keepdims)


def std_mean(input, axis=None, ddof=0, keepdims=False):  # noqa: A002
    v, m = _moments("std_mean", input, axis, ddof, keepdims)
    return call("sqrt", (v,)), m


def _nan_zeroed(op, x):
    _tensor(op, x)
    if not x.dtype.is_floating_point:
        return x
    return call("where", (call("not_equal", (x, x)), 0.0, x))


def nansum(input, axis=None, keepdims=False, *, dtype=None):  # noqa: A002
    """The sum treating NaN as zero; integers keep their dtype (MindSpore's rule)."""
    x = _nan_zeroed("nansum", input)
    out = call("reduce_sum", (x,), (axes_attr(axis, "nansum"), bool(keepdims),
                                    dtype_attr(dtype or x.dtype)))
    return out


def nanmean(input, axis=None, keepdims=False, *, dtype=None):  # noqa: A002
    """The mean of the non-NaN elements (NaN where all are NaN)."""
    x = _tensor("nanmean", input)
    if not x.dtype.is_floating_point:
        raise TypeError(f"nanmean: input must be a float Tensor, got {x.dtype}")
    axes = axes_attr(axis, "nanmean")
    kept = call("cast", (call("equal", (x, x)),), (dtype_attr(x.dtype),))
    total = call("reduce_sum", (_nan_zeroed("nanmean", x),), (axes, bool(keepdims), None))
    out = call("div", (total, call("reduce_sum", (kept,), (axes, bool(keepdims), None))))
    return out if dtype is None else call("cast", (out,), (dtype_attr(dtype),))


def count_nonzero(x, axis=(), keep_dims=False, dtype=mstype.int32):
    """How many elements along axis (() or None: all) are nonzero."""
    b = call("cast", (_bool(_tensor("count_nonzero", x, "x")),), (dtype_attr(mstype.int64),))
    axes = None if isinstance(axis, tuple) and not axis else axes_attr(axis, "count_nonzero")
    return call("reduce_sum", (b,), (axes, bool(keep_dims), dtype_attr(dtype)))


def aminmax(input, *, axis=0, keepdims=False):  # noqa: A002
    """(min, max) along axis (None: all elements); NaN is skipped, as MindSpore 2.10 does (NaN
    only where every element is NaN)."""
    x = _tensor("aminmax", input)
    axes = None if axis is None else (_axis("aminmax", x, axis),) if x.shape else None
    if not x.dtype.is_floating_point:
        return (call("reduce_min", (x,), (axes, bool(keepdims))),
                call("reduce_max", (x,), (axes, bool(keepdims))))
    nan = call("not_equal", (x, x))
    low = call("reduce_min", (call("where", (nan, math.inf, x)),), (axes, bool(keepdims)))
    high = call("reduce_max", (call("where", (nan, -math.inf, x)),), (axes, bool(keepdims)))
    all_nan = call("reduce_min", (nan,), (axes, bool(keepdims)))
    return (call("where", (all_nan, math.nan, low)), call("where", (all_nan, math.nan, high)))


def cumsum(x, axis, dtype=None):
    """Running sums along axis; dtype casts the input first."""
    _tensor("cumsum", x, "x")
    if dtype is not None:
        x = call("cast", (x,), (dtype_attr(dtype),))
    if x.dtype == mstype.bool_:
        x = call("cast", (x,), (dtype_attr(mstype.int64),))
    return call("cumsum", (x,), (_axis("cumsum", x, axis), False))


def cumprod(input, dim, dtype=None):  # noqa: A002
    """Running products along dim: exp(cumsum(log|x|)) with the sign and zeros tracked, so the
    gradient follows from registry ops; integers give int64 (MindSpore's rule)."""
    x = _tensor("cumprod", input)
    if dtype is not None:
        x = call("cast", (x,), (dtype_attr(dtype),))
    out_dtype = x.dtype if x.dtype.is_floating_point else mstype.int64
    xf = x if x.dtype.is_floating_point else call("cast", (x,), (dtype_attr(mstype.float64),))
    a = _axis("cumprod", xf, dim, "dim")
    zero = call("equal", (xf, 0))
    mag = call("log", (call("abs", (call("where", (zero, 1.0, xf)),)),))
    neg = call("cast", (call("less", (xf, 0)),), (dtype_attr(xf.dtype),))
    zeros = call("cast", (zero,), (dtype_attr(xf.dtype),))
    parity = call("mod", (call("cumsum", (neg,), (a, False)), 2.0))
    sign = call("sub", (1.0, call("mul", (parity, 2.0))))
    alive = call("equal", (call("cumsum", (zeros,), (a, False)), 0))
    out = call("mul", (sign, call("exp", (call("cumsum", (mag,), (a, False)),))))
    out = call("where", (alive, out, 0.0))
    if out_dtype != out.dtype:
        out = call("cast", (_rint(out),), (dtype_attr(out_dtype),))
    return out


def _rint(x):
    return call("floor", (call("add", (x, 0.5)),))


def logcumsumexp(input, axis):  # noqa: A002
    """log(cumsum(exp(x))) along axis, shifted by the maximum so it does not overflow."""
    x = _tensor("logcumsumexp", input)
    if not x.dtype.is_floating_point:
        raise TypeError(f"logcumsumexp: input must be a float Tensor, got {x.dtype}")
    a = _axis("logcumsumexp", x, axis)
    m = call("stop_gradient", (call("reduce_max", (x,), ((a,), True)),))
    m = call("where", (call("equal", (call("abs", (m,)), math.inf)), 0.0, m))
    s = call("cumsum", (call("exp", (call("sub", (x, m)),)),), (a, False))
    return call("add", (call("log", (s,)), m))


def _take_along(x, index, axis):
    """x[..., index, ...] per position (np.take_along_axis) through advanced_index."""
    from kiln.ops.function.selection import gather_elements  # noqa: PLC0415
    return gather_elements(x, axis, index)


def _scan_extreme(op, input, axis, is_max):  # noqa: A002
    x = _tensor(op, input)
    a = _axis(op, x, axis)
    n = x.shape[a] if x.shape else 1
    if n < 0:  # its doubling steps are unrolled by the axis's size
        raise ValueError(f"{op}: axis {a} of shape {tuple(x.shape)} has a size known only when "
                         f"the graph runs (declared None), which {op} does not support; declare "
                         f"that dimension's size or run {op} in PyNative mode")
    from kiln.ops.function.selection import _arange_along  # noqa: PLC0415
    pos = _arange_along(x, a)
    # the running extreme by doubling: after step k, each position holds the extreme of the
    # 2^k elements ending there; ties keep the later index, as MindSpore's cummax does
    vals, idx, step = x, call("add", (pos, 0)), 1
    while step < n:
        from kiln.ops.function.shape_ext import _shift  # noqa: PLC0415
        pv, pi = _shift(vals, step, a), _shift(idx, step, a)
        valid = call("greater_equal", (pos, step))
        better = call("greater" if is_max else "less", (pv, vals))
        take = call("logical_and", (valid, better))
        vals = call("where", (take, pv, vals))
        idx = call("where", (take, pi, idx))
        step *= 2
    return vals, idx


def cummax(input, axis):  # noqa: A002
    """(running maximum, its index) along axis; indices are int64."""
    return _scan_extreme("cummax", input, axis, True)


def cummin(input, axis):  # noqa: A002
    """(running minimum, its index) along axis; indices are int32 (MindSpore 2.10's, though
    cummax's are int64)."""
    values, idx = _scan_extreme("cummin", input, axis, False)
    return values, call("cast", (idx,), (dtype_attr(mstype.int32),))


def argsort(input, axis=-1, descending=False):  # noqa: A002
    """Indices (int32) that sort input along axis; stable; NaN sorts as the largest."""
    x = _tensor("argsort", input)
    idx = call("argsort", (x,), (_axis("argsort", x, axis), bool(descending)))
    return call("cast", (idx,), (dtype_attr(mstype.int32),))


def sort(input_x, axis=-1, descending=False):
    """(sorted values, int32 indices) along axis; the gradient flows to the values' places."""
    x = _tensor("sort", input_x, "input_x")
    a = _axis("sort", x, axis)
    idx = call("argsort", (x,), (a, bool(descending)))
    return _take_along(x, idx, a), call("cast", (idx,), (dtype_attr(mstype.int32),))


def msort(input):  # noqa: A002
    """input sorted along axis 0."""
    return sort(input, 0)[0]


def topk(input, k, dim=None, largest=True, sorted=True):  # noqa: A002
    """The k largest (or smallest) values along dim (None: the last) and their int32 indices;
    ties keep the lower index first."""
    x = _tensor("topk", input)
    a = _axis("topk", x, -1 if dim is None else dim, "dim")
    k = int_arg(k, "topk", "k")
    n = x.shape[a] if x.shape else 1
    if not 0 <= k <= n:
        raise ValueError(f"topk: k must be in [0, {n}] for dim {a} of shape {tuple(x.shape)}, "
                         f"got {k}")
    idx = call("arg_topk", (x,), (a, k, bool(largest)))
    return _take_along(x, idx, a), call("cast", (idx,), (dtype_attr(mstype.int32),))


def top_k(input_x, k, sorted=True):  # noqa: A002
    """topk along the last axis (the primitive's functional form)."""
    return topk(input_x, int_arg(k, "top_k", "k"), -1, True, sorted)


def median(input, axis=-1, keepdims=False):  # noqa: A002
    """(the lower median along axis, its int64 index)."""
    x = _tensor("median", input)
    a = _axis("median", x, axis)
    n = x.shape[a] if x.shape else 1
    idx = call("argsort", (x,), (a, False))
    from kiln.ops.function.array import narrow, squeeze  # noqa: PLC0415
    mid = narrow(idx, a, (n - 1) // 2, 1)
    vals = _take_along(x, mid, a)
    if not keepdims and x.shape:
        vals, mid = squeeze(vals, a), squeeze(mid, a)
    return vals, mid


def vector_norm(x, ord=2, axis=None, keepdims=False, *, dtype=None):  # noqa: A002
    """The ord-norm of the vectors along axis (None: all elements): ord may be a number,
    inf or -inf (max/min of |x|) or 0 (count of nonzeros)."""
    x = _tensor("vector_norm", x, "x")
    if dtype is not None:
        x = call("cast", (x,), (dtype_attr(dtype),))
    if not x.dtype.is_floating_point:
        x = call("cast", (x,), (dtype_attr(mstype.float32),))
    axes, keep = axes_attr(axis, "vector_norm"), bool(keepdims)
    if ord == 2:  # the common case needs no |x|
        return call("sqrt", (call("reduce_sum", (call("mul", (x, x)),), (axes, keep, None)),))
    if ord == 0:
        nz = call("cast", (call("not_equal", (x, 0)),), (dtype_attr(x.dtype),))
        return call("reduce_sum", (nz,), (axes, keep, None))
    ax = call("abs", (x,))
    if ord == math.inf:
        return call("reduce_max", (ax,), (axes, keep))
    if ord == -math.inf:
        return call("reduce_min", (ax,), (axes, keep))
    if ord == 1:
        return call("reduce_sum", (ax,), (axes, keep, None))
    p = float(ord)
    total = call("reduce_sum", (call("pow", (ax, p)),), (axes, keep, None))
    return call("pow", (total, 1.0 / p))


def diff(x, n=1, axis=-1, prepend=None, append=None):
    """The n-th forward difference along axis (np.diff)."""
    _tensor("diff", x, "x")
    a = _axis("diff", x, axis)
    from kiln.ops.function.array import concat, narrow  # noqa: PLC0415
    parts = [p for p in (prepend, x, append) if p is not None]
    out = concat(parts, a) if len(parts) > 1 else x
    for _ in range(int_arg(n, "diff", "n")):
        m = out.shape[a]
        if m == 0:
            break
        later, earlier = narrow(out, a, 1, m - 1), narrow(out, a, 0, m - 1)
        out = call("logical_xor", (later, earlier)) if out.dtype == mstype.bool_ else \
            call("sub", (later, earlier))
    return out


def trace(input):  # noqa: A002
    """The sum of the main diagonal of a 2-D tensor (in its dtype)."""
    x = _tensor("trace", input)
    if len(x.shape) != 2:
        raise ValueError(f"trace: input must be 2-D, got shape {tuple(x.shape)}")
    from kiln.ops.function.shape_ext import diagonal  # noqa: PLC0415
    return call("reduce_sum", (diagonal(x),), (None, False, dtype_attr(x.dtype)))
