"""mint's elementwise, reduction and linear-algebra functions, adapted from kiln.ops."""
from kiln import ops
from kiln.common import dtype as mstype

# the same function as kiln.ops: same arguments (names and defaults) and results as mint's
SAME = (
    "acos acosh addbmm addmm addmv arccos arccosh arcsinh arctan arctan2 arctanh asin asinh atan "
    "atan2 atanh cosh cross cumprod dstack einsum erf erfc erfinv exp2 eye float_power gcd hstack "
    "inverse isclose isfinite isinf isneginf lerp nan_to_num outer reciprocal searchsorted sinc "
    "sinh take tan trace trunc unbind unique_consecutive xlogy"
).split()


def _integral(t):
    return t.dtype in mstype.int_type + mstype.uint_type or t.dtype == mstype.bool_


def _floating(t):
    """Integers and bools become float32 first, as PyTorch's float-only functions do."""
    return ops.cast(t, mstype.float32) if _integral(t) else t


def arcsin(x):
    return ops.arcsin(x)


def isnan(tensor):
    return ops.isnan(tensor)


def frac(input):  # noqa: A002 - mint's argument names
    return ops.frac(input)


def fix(input):  # noqa: A002
    """Rounds toward zero (mint's other name for trunc)."""
    return ops.trunc(input)


def ceil(input):  # noqa: A002
    """An integer input is already whole: a copy of it, as PyTorch gives."""
    return ops.mul(input, 1) if _integral(input) and input.dtype != mstype.bool_ else \
        ops.ceil(input)


def log2(input):  # noqa: A002
    return ops.log2(_floating(input))


def log10(input):  # noqa: A002
    return ops.log10(_floating(input))


def logaddexp(input, other):  # noqa: A002
    return ops.logaddexp(_floating(input), _floating(other))


def logaddexp2(input, other):  # noqa: A002
    return ops.logaddexp2(_floating(input), _floating(other))


def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    return ops.addcdiv(input, tensor1, tensor2, value)


def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    return ops.addcmul(input, tensor1, tensor2, value)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    return ops.baddbmm(input, batch1, batch2, beta, alpha)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """One bool: every element of input is close to other's (broadcast)."""
    return bool(ops.isclose(input, other, rtol, atol, equal_nan).all())


def _vector(name, t):
    if len(t.shape) != 1:
        raise ValueError(f"{name}: expects 1-D tensors, got shape {tuple(t.shape)}")


def dot(input, other):  # noqa: A002
    """The inner product of two 1-D tensors."""
    _vector("dot", input)
    _vector("dot", other)
    return ops.inner(input, other)


def vdot(input, other):  # noqa: A002
    """dot with input conjugated: the same as dot for kiln's real dtypes."""
    _vector("vdot", input)
    _vector("vdot", other)
    return ops.inner(input, other)


def mv(input, vec):  # noqa: A002
    return ops.mv(input, vec)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """compute_mode only picks an algorithm in PyTorch; the distances are the same."""
    return ops.cdist(x1, x2, p)


def diag(input, diagonal=0):  # noqa: A002
    """1-D input: a square matrix with input on the given diagonal; 2-D: that diagonal."""
    if len(input.shape) == 1:
        return ops.diagflat(input, diagonal)
    if len(input.shape) == 2:
        return ops.diagonal(input, diagonal, 0, 1)
    raise ValueError(f"diag: expects a 1-D or 2-D tensor, got shape {tuple(input.shape)}")


def diff(input, n=1, dim=-1, prepend=None, append=None):  # noqa: A002
    return ops.diff(input, n, dim, prepend, append)


def linspace(start, end, steps, *, dtype=None):
    """steps evenly spaced values, computed in float32, then cast to dtype (default float32)."""
    out = ops.linspace(float(start), float(end), steps)
    return out if dtype is None or dtype == mstype.float32 else ops.cast(out, dtype)


def meshgrid(*tensors, indexing=None):
    """indexing defaults to 'ij' (PyTorch's default; ops.meshgrid's is 'xy')."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    return ops.meshgrid(*tensors, indexing="ij" if indexing is None else indexing)


# ---- reductions and scans ----
def cumsum(input, dim, dtype=None):  # noqa: A002
    """An integer or bool input sums to int64 unless dtype says otherwise (PyTorch's rule)."""
    if dtype is None and _integral(input):
        dtype = mstype.int64
    return ops.cumsum(input if dtype is None else ops.cast(input, dtype), dim)


def cummax(input, dim):  # noqa: A002
    return ops.cummax(input, dim)


def cummin(input, dim):  # noqa: A002
    values, indices = ops.cummin(input, dim)
    return values, ops.cast(indices, mstype.int64)


def count_nonzero(input, dim=None):  # noqa: A002
    return ops.count_nonzero(input, () if dim is None else dim, False, mstype.int64)


def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    return ops.nansum(input, dim, keepdim, dtype=dtype)


def std(input, dim=None, *, correction=1, keepdim=False):  # noqa: A002
    return ops.std(input, dim, correction, keepdim)


def var(input, dim=None, *, correction=1, keepdim=False):  # noqa: A002
    return ops.var(input, dim, correction, keepdim)


def std_mean(input, dim=None, *, correction=1, keepdim=False):  # noqa: A002
    return ops.std_mean(input, dim, correction, keepdim)


def var_mean(input, dim=None, *, correction=1, keepdim=False):  # noqa: A002
    return ops.var_mean(input, dim, correction, keepdim)


# ---- indexing ----
def index_select(input, dim, index):  # noqa: A002
    return ops.index_select(input, dim, index)


def scatter(input, dim, index, src):  # noqa: A002
    return ops.scatter(input, dim, index, src)


def scatter_add(input, dim, index, src):  # noqa: A002
    """out[index[i][j]][j] += src[i][j] along dim 0 (and so on); src may be larger than index."""
    if tuple(src.shape) != tuple(index.shape):
        src = src[tuple(slice(0, n) for n in index.shape)]
    return ops.tensor_scatter_elements(input, index, src, dim, "add")


def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    """input with alpha * source's slice i added to input's slice index[i] along dim."""
    if len(index.shape) != 1:
        raise ValueError(f"index_add: index must be 1-D, got shape {tuple(index.shape)}")
    axis = dim % len(source.shape) if source.shape else 0
    if source.shape and source.shape[axis] != index.shape[0]:
        raise ValueError(f"index_add: source's dimension {dim} has {source.shape[axis]} "
                         f"elements but index has {index.shape[0]}")
    view = [1] * len(source.shape)
    view[axis] = index.shape[0]
    spread = ops.broadcast_to(ops.reshape(index, tuple(view)), tuple(source.shape))
    scaled = source if alpha == 1 else ops.mul(source, alpha)
    return ops.tensor_scatter_elements(input, spread, ops.cast(scaled, input.dtype), axis, "add")


def repeat_interleave(input, repeats, dim=None, *, output_size=None):  # noqa: A002
    """output_size only spares PyTorch a device sync; the result is the same without it."""
    return ops.repeat_interleave(input, repeats, dim)


# what `from kiln.mint.math import *` hands to kiln.mint: the functions defined here
__all__ = [n for n, v in list(globals().items())
           if callable(v) and not n.startswith("_") and getattr(v, "__module__", "") == __name__]
