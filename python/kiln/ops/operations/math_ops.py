"""MindSpore's math, comparison, scan, sort and array primitive classes over kiln's functional
ops (same registry ops, same gradients): configured once, called on tensors."""
import functools

import numpy as np

from kiln.common import dtype as mstype
from kiln.ops import function as _ops
from kiln.ops._core import call, dtype_attr
from kiln.ops.primitive import Primitive

_SIMPLE = {
    # name: functional op (called with the primitive's call arguments)
    "Mod": "truncate_mod", "FloorDiv": "floor_div", "FloorMod": "floor_mod",
    "TruncateDiv": "truncate_div", "TruncateMod": "truncate_mod",
    "Inv": "reciprocal", "Tan": "tan", "Asin": "asin", "ACos": "acos", "Atan": "atan",
    "Atan2": "atan2", "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh",
    "Atanh": "atanh", "Erf": "erf", "Erfc": "erfc", "Erfinv": "erfinv", "Lgamma": "lgamma",
    "Digamma": "digamma", "Ceil": "ceil", "Floor": "floor", "Trunc": "trunc", "Sinc": "sinc",
    "Hypot": "hypot", "Xlogy": "xlogy", "Xdivy": "xdivy", "Heaviside": "heaviside",
    "LessEqual": "less_equal", "GreaterEqual": "greater_equal", "NotEqual": "not_equal",
    "LogicalAnd": "logical_and", "LogicalOr": "logical_or", "LogicalNot": "logical_not",
    "LogicalXor": "logical_xor", "IsNan": "isnan", "IsInf": "isinf", "IsFinite": "isfinite",
    "GatherD": "gather_d", "MaskedFill": "masked_fill", "Lerp": "lerp", "Addcdiv": "addcdiv",
    "Addcmul": "addcmul", "Diag": "diag", "Trace": "trace", "Slice": "slice", "Tile": "tile",
    "Size": "numel", "Rank": "rank", "Eye": "eye",
    "LinSpace": "linspace", "Zeros": "zeros", "Ones": "ones",
    "UnsortedSegmentSum": "unsorted_segment_sum", "UnsortedSegmentMax": "unsorted_segment_max",
    "UnsortedSegmentMin": "unsorted_segment_min", "UnsortedSegmentProd": "unsorted_segment_prod",
    "GatherNd": "gather_nd", "TensorScatterAdd": "tensor_scatter_add",
    "TensorScatterSub": "tensor_scatter_sub", "TensorScatterUpdate": "tensor_scatter_update",
    "ScatterNd": "scatter_nd", "Gcd": "gcd", "Lcm": "lcm", "PopulationCount": "population_count",
    "FastGeLU": "fast_gelu", "MatrixBandPart": "matrix_band_part", "IndexFill": "index_fill",
    "BesselI0": "bessel_i0", "BesselI0e": "bessel_i0e", "BesselI1": "bessel_i1",
    "BesselI1e": "bessel_i1e", "BesselJ0": "bessel_j0", "BesselJ1": "bessel_j1",
    "BesselK0": "bessel_k0", "BesselK0e": "bessel_k0e", "BesselK1": "bessel_k1",
    "BesselK1e": "bessel_k1e", "BesselY0": "bessel_y0", "BesselY1": "bessel_y1",
    "Polygamma": "polygamma", "Zeta": "zeta", "Igamma": "igamma", "Igammac": "igammac",
    "Geqrf": "geqrf", "Orgqr": "orgqr",
}

__all__ = sorted(_SIMPLE) + [
    "Assign", "Identity", "Round", "Sort", "TopK", "CumSum", "CumProd", "Cummax", "Cummin",
    "ReduceAll", "ReduceAny", "ReduceProd", "ArgMinWithValue", "ArgMaxWithValue", "Argmin",
    "StridedSlice", "ReverseV2", "Meshgrid", "Unstack", "BroadcastTo", "Cross", "DivNoNan",
    "SquaredDifference", "Range", "Shape", "TensorShape", "DType", "Partial", "Fill", "IsClose",
    "NanToNum", "Cdist", "ApproximateEqual", "TensorScatterElements", "Einsum", "Renorm",
    "MatrixPower", "InTopK", "CumulativeLogsumexp", "ReverseSequence", "SpaceToBatchND",
    "BatchToSpaceND", "Bucketize", "SearchSorted", "LogSpace", "Svd", "Qr", "Ormqr", "LuUnpack",
]


def _simple(name, fn_name):
    def __call__(self, *args, **kwargs):
        return getattr(_ops, fn_name)(*args, **kwargs)

    return type(name, (Primitive,), {"__call__": __call__,
                                      "__doc__": f"Primitive of ops.{fn_name}."})


globals().update({name: _simple(name, fn) for name, fn in _SIMPLE.items()})


class Assign(Primitive):
    """Writes value into variable (a Parameter) and returns it."""

    def __call__(self, variable, value):
        return _ops.assign(variable, value)


class Identity(Primitive):
    """A new tensor equal to input_x."""

    def __call__(self, input_x):
        return call("identity", (input_x,))


class Round(Primitive):
    def __call__(self, input, decimals=0):  # noqa: A002
        return _ops.round(input, decimals=decimals)


class _Configured(Primitive):
    """A primitive whose __init__ arguments become attributes (MindSpore's attrs)."""

    _attrs = ()

    def __init__(self, *args, **kwargs):
        super().__init__()
        names = [n for n, _ in self._attrs]
        values = dict(self._attrs)
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes {len(names)} arguments, got "
                            f"{len(args)}")
        values.update(zip(names, args))
        for key, value in kwargs.items():
            if key not in values:
                raise TypeError(f"{type(self).__name__}() got an unexpected argument {key!r}")
            values[key] = value
        for key, value in values.items():
            setattr(self, key, value)


class Svd(_Configured):
    """(s, u, v) of each matrix (ops.svd)."""

    _attrs = (("full_matrices", False), ("compute_uv", True))

    def __call__(self, a):
        out = _ops.svd(a, self.full_matrices, self.compute_uv)
        if self.compute_uv:
            return out
        # MindSpore 2.10 gives one-element zero tensors in place of u and v
        return out, _ops.zeros((1,), out.dtype), _ops.zeros((1,), out.dtype)


class Qr(_Configured):
    """(Q, R) of each matrix; full_matrices=True is ops.qr's 'complete' mode."""

    _attrs = (("full_matrices", False),)

    def __call__(self, x):
        return _ops.qr(x, "complete" if self.full_matrices else "reduced")


class Ormqr(_Configured):
    """Q @ other (or other @ Q, Q^T) from geqrf's Householder form (ops.ormqr)."""

    _attrs = (("left", True), ("transpose", False))

    def __call__(self, x, tau, other):
        return _ops.ormqr(x, tau, other, self.left, self.transpose)


class LuUnpack(_Configured):
    """(P, L, U) from packed LU factors and 1-based pivots (ops.lu_unpack)."""

    _attrs = (("unpack_data", True), ("unpack_pivots", True))

    def __call__(self, lu_data, lu_pivots):
        return _ops.lu_unpack(lu_data, lu_pivots, self.unpack_data, self.unpack_pivots)


class Sort(_Configured):
    _attrs = (("axis", -1), ("descending", False))

    def __call__(self, x):
        return _ops.sort(x, self.axis, self.descending)


class TopK(_Configured):
    _attrs = (("sorted", True),)

    def __call__(self, input_x, k):
        return _ops.top_k(input_x, k, self.sorted)


class _Scan(_Configured):
    _attrs = (("exclusive", False), ("reverse", False))

    def _scan(self, x, axis, fn, identity):
        a = _ops.reduce_ext._axis(type(self).__name__, x, axis)
        if self.reverse:
            x = _ops.flip(x, (a,))
        out = fn(x, a)
        if self.exclusive:  # shift by one: the identity first, the last total dropped
            n = x.shape[a]
            head = _ops.full_like(_ops.narrow(x, a, 0, 1), identity)
            out = _ops.concat([head, _ops.narrow(out, a, 0, n - 1)], a) if n else out
        return _ops.flip(out, (a,)) if self.reverse else out


class CumSum(_Scan):
    def __call__(self, input, axis):  # noqa: A002
        return self._scan(input, axis, _ops.cumsum, 0)


class CumProd(_Scan):
    def __call__(self, x, axis):
        return self._scan(x, axis, lambda t, a: _ops.cumprod(t, a, t.dtype), 1)


class Cummax(_Configured):
    _attrs = (("axis", 0),)

    def __call__(self, input):  # noqa: A002
        return _ops.cummax(input, self.axis)


class Cummin(Cummax):
    def __call__(self, input):  # noqa: A002
        return _ops.cummin(input, self.axis)


class _LogicalReduce(_Configured):
    _attrs = (("keep_dims", False),)
    _fn = None

    def __call__(self, x, axis=()):
        axis = None if axis == () else axis
        return getattr(_ops, self._fn)(x, axis, self.keep_dims)


class ReduceAll(_LogicalReduce):
    _fn = "all"


class ReduceAny(_LogicalReduce):
    _fn = "any"


class ReduceProd(_LogicalReduce):
    _fn = "prod"


class _ArgWithValue(_Configured):
    _attrs = (("axis", 0), ("keep_dims", False))
    _largest = True

    def __call__(self, input):  # noqa: A002
        fn = _ops.argmax if self._largest else _ops.argmin
        index = fn(input, self.axis, self.keep_dims)
        value = (_ops.amax if self._largest else _ops.amin)(input, self.axis, self.keep_dims)
        return call("cast", (index,), (dtype_attr(mstype.int64),)), value


class ArgMaxWithValue(_ArgWithValue):
    """(index as int64, value) of the maximum along axis."""


class ArgMinWithValue(_ArgWithValue):
    """(index as int64, value) of the minimum along axis."""

    _largest = False


class Argmin(_Configured):
    _attrs = (("axis", -1), ("output_type", mstype.int32))

    def __call__(self, x):
        return call("cast", (_ops.argmin(x, self.axis),), (dtype_attr(self.output_type),))


class StridedSlice(_Configured):
    _attrs = (("begin_mask", 0), ("end_mask", 0), ("ellipsis_mask", 0), ("new_axis_mask", 0),
              ("shrink_axis_mask", 0))

    def __call__(self, input_x, begin, end, strides):
        return _ops.strided_slice(input_x, begin, end, strides, self.begin_mask, self.end_mask,
                                  self.ellipsis_mask, self.new_axis_mask,
                                  self.shrink_axis_mask)


class ReverseV2(_Configured):
    _attrs = (("axis", ()),)

    def __call__(self, input):  # noqa: A002
        return _ops.flip(input, self.axis)


class Meshgrid(_Configured):
    _attrs = (("indexing", "xy"),)

    def __call__(self, inputs):
        return _ops.meshgrid(*inputs, indexing=self.indexing)


class Unstack(_Configured):
    _attrs = (("axis", 0), ("num", None))

    def __call__(self, x):
        return _ops.unstack(x, self.axis)


class BroadcastTo(_Configured):
    _attrs = (("shape", ()),)

    def __call__(self, input):  # noqa: A002
        return _ops.broadcast_to(input, self.shape)


class Cross(_Configured):
    _attrs = (("dim", -65530),)  # MindSpore's "not given": the first axis of size 3

    def __call__(self, input, other):  # noqa: A002
        return _ops.cross(input, other, None if self.dim == -65530 else self.dim)


class DivNoNan(Primitive):
    """x / y, 0 where y == 0."""

    def __call__(self, x, y):
        zero = call("equal", (y, 0))
        return call("where", (zero, 0.0, call("div", (x, call("where", (zero, 1.0, y))))))


class SquaredDifference(Primitive):
    """(x - y) ** 2."""

    def __call__(self, x, y):
        return call("square", (call("sub", (x, y)),))


class Range(_Configured):
    _attrs = (("maxlen", 1000000),)

    def __call__(self, start, end, step):
        return _ops.range(start, end, step, self.maxlen)


class Shape(Primitive):
    def __call__(self, x):
        return tuple(x.shape)


class TensorShape(Primitive):
    """The shape as an int64 tensor."""

    def __call__(self, input_x):
        return call("tensor_shape", (input_x,))  # the sizes a graph runs with


class DType(Primitive):
    def __call__(self, x):
        return x.dtype


class Partial(Primitive):
    """``Partial()(func, *args)``: func with its first arguments fixed (functools.partial), in
    PyNative and in compiled code, e.g. to hand ``ops.Map``/``HyperMap`` a function of one
    argument."""

    def __call__(self, func, *args):
        if not callable(func):
            raise TypeError(f"Partial: func must be callable, got {type(func).__name__}")
        return functools.partial(func, *args)


class Fill(Primitive):
    def __call__(self, dtype, dims, x):
        return _ops.fill(dtype, dims, x)


class IsClose(_Configured):
    _attrs = (("rtol", 1e-05), ("atol", 1e-08), ("equal_nan", False))

    def __call__(self, input, other):  # noqa: A002
        return _ops.isclose(input, other, self.rtol, self.atol, self.equal_nan)


class NanToNum(_Configured):
    _attrs = (("nan", None), ("posinf", None), ("neginf", None))

    def __call__(self, input):  # noqa: A002
        return _ops.nan_to_num(input, self.nan, self.posinf, self.neginf)


class Cdist(_Configured):
    _attrs = (("p", 2.0),)

    def __call__(self, x1, x2):
        return _ops.cdist(x1, x2, self.p)


class ApproximateEqual(_Configured):
    _attrs = (("tolerance", 1e-05),)

    def __call__(self, x, y):
        return _ops.approximate_equal(x, y, self.tolerance)


class TensorScatterElements(_Configured):
    _attrs = (("axis", 0), ("reduction", "none"))

    def __call__(self, input_x, indices, updates):
        return _ops.tensor_scatter_elements(input_x, indices, updates, self.axis, self.reduction)


class Einsum(_Configured):
    _attrs = (("equation", ""),)

    def __call__(self, operands):
        return _ops.einsum(self.equation, *operands)


class Renorm(_Configured):
    _attrs = (("p", 2), ("dim", 0), ("maxnorm", 1.0))

    def __call__(self, x):
        return _ops.renorm(x, self.p, self.dim, self.maxnorm)


class MatrixPower(_Configured):
    _attrs = (("n", 1),)

    def __call__(self, x):
        return _ops.matrix_power(x, self.n)


class InTopK(_Configured):
    _attrs = (("k", 1),)

    def __call__(self, x1, x2):
        return _ops.intopk(x1, x2, self.k)


class CumulativeLogsumexp(_Scan):
    """logcumsumexp with MindSpore's exclusive (starts at -inf) and reverse flags."""

    def __call__(self, x, axis):
        # exclusive starts at the lowest finite value, as MindSpore's kernel does (not -inf)
        lowest = -3.3895313892515355e38 if x.dtype == mstype.bfloat16 else \
            -float(np.finfo(mstype.dtype_to_nptype(x.dtype)).max)
        return self._scan(x, axis, _ops.logcumsumexp, lowest)


class ReverseSequence(_Configured):
    _attrs = (("seq_dim", 0), ("batch_dim", 0))

    def __call__(self, x, seq_lengths):
        return _ops.reverse_sequence(x, seq_lengths, self.seq_dim, self.batch_dim)


class SpaceToBatchND(_Configured):
    _attrs = (("block_shape", 1), ("paddings", ()))

    def __call__(self, input_x):
        return _ops.space_to_batch_nd(input_x, self.block_shape, self.paddings)


class BatchToSpaceND(_Configured):
    _attrs = (("block_shape", 1), ("crops", ()))

    def __call__(self, input_x):
        return _ops.batch_to_space_nd(input_x, self.block_shape, self.crops)


class Bucketize(_Configured):
    _attrs = (("boundaries", ()),)

    def __call__(self, input):  # noqa: A002
        # the primitive counts boundaries <= x (TensorFlow's rule): the function's right=True
        return _ops.bucketize(input, list(self.boundaries), right=True)


class SearchSorted(_Configured):
    _attrs = (("dtype", mstype.int64), ("right", False))

    def __call__(self, sorted_sequence, values, sorter=None):
        out = _ops.searchsorted(sorted_sequence, values, right=self.right, sorter=sorter)
        return call("cast", (out,), (dtype_attr(self.dtype),))


class LogSpace(_Configured):
    _attrs = (("steps", 10), ("base", 10), ("dtype", mstype.float32))

    def __call__(self, start, end):
        return _ops.logspace(start, end, self.steps, self.base, dtype=self.dtype)
