"""Tensor methods of the functional ops added for API breadth (x.flip(dims) is ops.flip(x, dims),
...): installed on Tensor once, before Graph mode copies Tensor's methods to GraphTensor."""
from kiln import ops

# Methods whose arguments after self are exactly the functional op's after its first.
_FORWARDED = """acos acosh addbmm addcdiv addcmul addmm addmv addr aminmax approximate_equal arccos
arccosh arcsin arcsinh arctan arctan2 arctanh argsort argwhere asin asinh atan atan2 atanh baddbmm
ceil copysign cosh count_nonzero cross cummax cummin cumprod deg2rad diag diagflat diagonal diff
digamma dot dsplit eq erf erfc erfinv flip fliplr flipud float_power fmax fmin frac
gather_elements ger heaviside hsplit hypot index_select inner inv is_complex is_floating_point
isclose isfinite isinf isnan isneginf isposinf isreal ldexp lerp lgamma log10 log2 logaddexp
logaddexp2 logcumsumexp logit masked_fill median moveaxis movedim msort mvlgamma nan_to_num
nanmean nansum norm numel outer positive rad2deg ravel reciprocal repeat_interleave reverse
rot90 sgn signbit sinc sinh sort std swapdims t take tan tensor_split top_k topk trunc type_as
unbind var view_as vsplit xdivy xlogy unsorted_segment_max unsorted_segment_min
unsorted_segment_prod gather_nd scatter index_fill select_scatter slice_scatter gcd lcm cov
renorm matrix_power adjoint conj multinomial det slogdet logdet inverse cholesky cholesky_inverse
cholesky_solve unique_consecutive quantile nanquantile nanmedian histc
svd lstsq igamma igammac i0 geqrf orgqr ormqr
lu_solve""".split()


def _forward(name):
    fn = getattr(ops, name)

    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Same as ops.{name}(self, ...)."
    return method


def _cumsum(self, axis=None, dtype=None):
    """Running sums along axis (None: over the flattened tensor)."""
    if axis is None:
        return ops.cumsum(ops.reshape(self, (-1,)), 0, dtype)
    return ops.cumsum(self, axis, dtype)


def _expand(self, *size):
    """self broadcast to size (given as ints, one tuple or a Tensor; -1 keeps a dimension)."""
    if len(size) == 1 and not isinstance(size[0], int):
        size = size[0]
    return ops.expand(self, size)


def _searchsorted(self, v, side="left", sorter=None):
    """Where v would be inserted into self (sorted along its last axis)."""
    return ops.searchsorted(self, v, side=side, sorter=sorter)


def _trace(self, offset=0, axis1=0, axis2=1, dtype=None):
    """The sum along diagonal `offset` of the (axis1, axis2) planes."""
    return ops.sum(ops.diagonal(self, offset, axis1, axis2), -1, dtype=dtype or self.dtype)


def _qr(self, some=True):
    """(Q, R); some=False gives the complete factorization."""
    return ops.qr(self, "reduced" if some else "complete")


def _triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):  # noqa: N803
    """(X, A) with op(A) X = self for triangular A."""
    from kiln.ops.function.linalg_decomp import triangular_solve  # noqa: PLC0415
    return triangular_solve(self, A, upper, transpose, unitriangular)


_SPECIAL = {"cumsum": _cumsum, "qr": _qr, "triangular_solve": _triangular_solve,
            "expand": _expand, "searchsorted": _searchsorted, "trace": _trace}


def install(tensor_class):
    """Adds the methods tensor_class does not define itself (its own ones stay)."""
    methods = {name: _forward(name) for name in _FORWARDED}
    methods.update(_SPECIAL)
    for name, method in methods.items():
        if name not in vars(tensor_class):
            setattr(tensor_class, name, method)
