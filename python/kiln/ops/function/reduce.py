"""Reduction functional ops: sum, mean, prod, max/min (with indices), amax/amin, argmax/argmin,
softmax, log_softmax and logsumexp (MindSpore 2.x signatures)."""
from kiln.common import dtype as mstype
from kiln.ops._core import axes_attr, call, dtype_attr, int_arg, is_tensor
from kiln.ops.function import elementwise as _ew

__all__ = [
    "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "softmax",
    "log_softmax", "logsumexp",
]


def _check_tensor(op, name, value):
    if not is_tensor(value):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")


def _axes(op, axis, name="axis"):
    """None, an int or a sequence of ints -> the registry's axes attribute (None or a tuple)."""
    return axes_attr(axis, op, name)


def _single_axis(op, axis, name="axis"):
    """None or one int (a 1-tuple is accepted too, as MindSpore's softmax does)."""
    if isinstance(axis, (tuple, list)) and len(axis) == 1:
        axis = axis[0]
    return None if axis is None else int_arg(axis, op, name)


def _flag(op, name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be a bool, got {value!r}")
    return value


def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001,A002 - MindSpore's names
    """Sum over `dim` (None or () = all). Bool and integer inputs sum to int64 unless `dtype`
    says otherwise; floats accumulate in double."""
    _check_tensor("sum", "input", input)
    return call("reduce_sum", (input,), (_axes("sum", dim, "dim"), _flag("sum", "keepdim", keepdim),
                                         dtype_attr(dtype)))


def mean(input, axis=None, keep_dims=False):  # noqa: A002
    """Arithmetic mean. An integer input keeps its dtype, as in MindSpore: the sum in that dtype
    (wrapping on overflow) divided by the count, truncated toward zero. A bool input gives
    float32 (MindSpore refuses it)."""
    _check_tensor("mean", "input", input)
    keep_dims = _flag("mean", "keep_dims", keep_dims)
    axes = _axes("mean", axis)
    dtype = input.dtype
    if dtype.is_floating_point or dtype == mstype.bool_:
        return call("reduce_mean", (input,), (axes, keep_dims))
    return _integer_mean(input, axes, keep_dims)


def _integer_mean(input, axes, keep_dims):  # noqa: A002
    dtype = input.dtype
    total = call("reduce_sum", (input,), (axes, keep_dims, dtype_attr(dtype)))  # checks axes
    # The division runs in 64 bits (a count of 300 does not fit int8), the result in `dtype`.
    wide = mstype.uint64 if dtype in mstype.uint_type else mstype.int64
    total = _ew.cast(total, wide)
    shape = tuple(input.shape)
    count = 1
    for a in (range(len(shape)) if not axes or not shape else set(axes)):
        count *= shape[a]  # reduce_sum has refused out-of-range axes
    if any(d < 0 for d in shape):  # a dimension known only when the graph runs (export)
        ones = _ew.add(_ew.mul(_ew.cast(input, wide), 0), 1)
        count = call("reduce_sum", (ones,), (axes, keep_dims, dtype_attr(wide)))
    elif count <= 0:
        raise ValueError(f"mean: the mean of an integer tensor over an empty axis (shape {shape}, "
                         f"axis {axes}) has no integer value; cast the input to a float dtype")
    quotient = _ew.floor_divide(total, count)
    if wide == mstype.int64:  # round toward zero, as MindSpore's integer division
        up = _ew.neg(_ew.floor_divide(_ew.neg(total), count))
        quotient = _ew.where(total < 0, up, quotient)
    return _ew.cast(quotient, dtype)


def prod(input, axis=None, keep_dims=False):  # noqa: A002
    """Product; bool and integer inputs give int64 (wrapping on overflow, as NumPy)."""
    _check_tensor("prod", "input", input)
    keep_dims = _flag("prod", "keep_dims", keep_dims)
    return call("reduce_prod", (input,), (_axes("prod", axis), keep_dims))


def _masked(op, input, initial, where):
    """NumPy's `where=`: masked-out elements become `initial`, which must then be given."""
    if where is None:
        return input
    if initial is None:
        raise ValueError(f"{op}: 'initial' is required when 'where' is given")
    return _ew.where(where, input, initial)


def _with_initial(values, initial, is_max):
    if initial is None:
        return values
    return _ew.maximum(values, initial) if is_max else _ew.minimum(values, initial)


def _extremum(op, is_max, input, axis, keepdims, initial, where, with_indices):
    _check_tensor(op, "input", input)
    _flag(op, "keepdims", keepdims)
    if with_indices:
        axis = _single_axis(op, axis)
    x = _masked(op, input, initial, where)
    values = call("reduce_max" if is_max else "reduce_min", (x,), (_axes(op, axis), keepdims))
    values = _with_initial(values, initial, is_max)
    if not with_indices:
        return values
    indices = call("argmax" if is_max else "argmin", (x,), (axis, keepdims))
    return values, indices


def max(input, axis=None, keepdims=False, *, initial=None, where=None):  # noqa: A001,A002
    """(values, indices) of the maximum along `axis`, as MindSpore's ops.max.

    With axis=None the values are the maximum of all elements and the index is the argmax of
    the flattened input (MindSpore documents 0 there; the flat index is the more useful answer).
    NaN counts as the maximum; ties give the first index.
    """
    return _extremum("max", True, input, axis, keepdims, initial, where, True)


def min(input, axis=None, keepdims=False, *, initial=None, where=None):  # noqa: A001,A002
    """(values, indices) of the minimum along `axis`; see max for axis=None and NaN."""
    return _extremum("min", False, input, axis, keepdims, initial, where, True)


def amax(input, axis=None, keepdims=False, *, initial=None, where=None):  # noqa: A002
    """Maximum over `axis` (None or () = all; a tuple reduces several axes)."""
    return _extremum("amax", True, input, axis, keepdims, initial, where, False)


def amin(input, axis=None, keepdims=False, *, initial=None, where=None):  # noqa: A002
    """Minimum over `axis` (None or () = all; a tuple reduces several axes)."""
    return _extremum("amin", False, input, axis, keepdims, initial, where, False)


def argmax(input, dim=None, keepdim=False):  # noqa: A002
    """int64 index of the maximum along `dim` (None: of the flattened input); first occurrence
    wins and NaN counts as the maximum (NumPy)."""
    _check_tensor("argmax", "input", input)
    return call("argmax", (input,), (_single_axis("argmax", dim, "dim"),
                                     _flag("argmax", "keepdim", keepdim)))


def argmin(input, axis=None, keepdims=False):  # noqa: A002
    """int32 index of the minimum along `axis` (None: of the flattened input); int32 as
    MindSpore 2.10's ops.argmin returns (its argmax returns int64)."""
    _check_tensor("argmin", "input", input)
    keepdims = _flag("argmin", "keepdims", keepdims)
    index = call("argmin", (input,), (_single_axis("argmin", axis), keepdims))
    return call("cast", (index,), (mstype.int32._enum,))


def softmax(input, axis=-1, *, dtype=None):  # noqa: A002
    """exp(x - max) / sum over `axis`; integer inputs compute in float32. `dtype` casts the
    input first."""
    _check_tensor("softmax", "input", input)
    axis = _single_axis("softmax", axis)
    if axis is None:
        raise TypeError("softmax: axis must be an int, got None")
    if dtype is not None:
        input = call("cast", (input,), (dtype_attr(dtype),))
    return call("softmax", (input,), (axis,))


def log_softmax(logits, axis=-1):
    """(x - max) - log(sum(exp(x - max))) over `axis`."""
    _check_tensor("log_softmax", "logits", logits)
    axis = _single_axis("log_softmax", axis)
    if axis is None:
        raise TypeError("log_softmax: axis must be an int, got None")
    return call("log_softmax", (logits,), (axis,))


def logsumexp(input, axis, keep_dims=False):  # noqa: A002
    """log(sum(exp(x))) over `axis`, shifted by the maximum so large values do not overflow."""
    _check_tensor("logsumexp", "input", input)
    axes = _axes("logsumexp", axis)
    _flag("logsumexp", "keep_dims", keep_dims)
    if not input.dtype.is_floating_point:
        input = call("cast", (input,), (dtype_attr(mstype.float32),))
    # An infinite maximum would give inf - inf = NaN: shift by 0 there instead.
    m = call("reduce_max", (input,), (axes, True))
    m = _ew.where(_ew.equal(_ew.abs(m), float("inf")), 0.0, m)
    total = call("reduce_sum", (_ew.exp(_ew.sub(input, m)),), (axes, keep_dims, None))
    shift = m if keep_dims else call("reduce_max", (m,), (axes, False))  # drops the kept dims
    return _ew.add(_ew.log(total), shift)
