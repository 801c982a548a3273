"""kiln.mint -- MindSpore's PyTorch-style functional namespace (``mindspore.mint``).

mint's functions take PyTorch's argument names and meanings (``dim``/``keepdim``, ``transpose
(input, dim0, dim1)``, ``gather(input, dim, index)``, ``max(input, dim)`` returning values and
indices). A name is kiln.ops' own function only where MindSpore 2.10 gives both the same
signature and results; every other name is an adapter over kiln's ops with mint's signature
(checked against MindSpore 2.10, tests/python/test_mint.py). Names of mindspore.mint that kiln
lacks raise AttributeError pointing at docs/compatibility.md.
"""
import builtins

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common import tensor_methods as _tm
from kiln.common._missing import missing_attribute as _missing_attribute
from kiln.mint import _math, _order, linalg, nn  # noqa: F401
from kiln.mint._math import *  # noqa: F403 - the adapters, each with mint's signature
from kiln.mint._order import *  # noqa: F403
from kiln.mint.nn._extra import norm  # noqa: F401 - mint.norm is mint.nn.functional.norm_ext
from kiln.mint.nn.functional import conv2d  # noqa: F401 - MindSpore's mint.conv2d is this one
from kiln.ops._core import is_tensor

# the same function as kiln.ops (same signature and results in MindSpore 2.10)
_SAME = (
    "abs add bitwise_and bitwise_or bitwise_xor bmm broadcast_to cos div divide exp expm1 "
    "floor floor_divide fmod ge greater greater_equal gt le less less_equal log log1p "
    "logical_and logical_not logical_or logical_xor lt masked_select matmul maximum minimum mm "
    "mul narrow ne neg negative not_equal pow remainder roll round rsqrt sigmoid sign sin sqrt "
    "square sub tanh tile tril triu unsqueeze zeros_like ones_like full_like full arange"
).split()
for _name in _SAME:
    globals()[_name] = getattr(ops, _name)
for _name in _math.SAME + _order.SAME:
    globals()[_name] = getattr(ops, _name)
eq = ops.equal


def add(input, other, *, alpha=1):  # noqa: A002 - mint's argument names
    return _tm.add(input, other, alpha=alpha)


def sub(input, other, *, alpha=1):  # noqa: A002
    return _tm.sub(input, other, alpha=alpha)


def clamp(input, min=None, max=None):  # noqa: A002
    return ops.clamp(input, min, max)


clip = clamp


def equal(input, other):  # noqa: A002
    """True when both have the same shape and elements (one bool, PyTorch's torch.equal)."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(ops.equal(input, other).all())


# ---- reductions: dim / keepdim, PyTorch's result dtypes ----
def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001,A002
    return ops.sum(input, dim, keepdim, dtype=dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The mean; an integer input keeps its dtype (the mean rounded toward zero), as
    MindSpore 2.10's mint.mean returns it."""
    src = input if dtype is None else ops.cast(input, dtype)
    out = ops.mean(ops.cast(src, mstype.float32) if _integral(src) else src, dim, keepdim)
    return ops.cast(out, src.dtype) if _integral(src) else out


def prod(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    src = input if dtype is None else ops.cast(input, dtype)
    if _integral(src) and dtype is None:
        src = ops.cast(src, mstype.int64)  # PyTorch's (and mint's) integer product is int64
    return ops.prod(src, dim, keepdim)


def _integral(t):
    return t.dtype in mstype.int_type + mstype.uint_type or t.dtype == mstype.bool_


def max(input, dim=None, keepdim=False, *, out=None):  # noqa: A001,A002
    """max(input): the largest element; max(input, dim, keepdim): (values, int64 indices);
    max(input, other): the elementwise maximum."""
    if is_tensor(dim):
        return ops.maximum(input, dim)
    if dim is None:
        return ops.amax(input)
    return ops.max(input, dim, keepdim)


def min(input, dim=None, keepdim=False, *, out=None):  # noqa: A001,A002
    if is_tensor(dim):
        return ops.minimum(input, dim)
    if dim is None:
        return ops.amin(input)
    return ops.min(input, dim, keepdim)


def amax(input, dim=(), keepdim=False):  # noqa: A002
    return ops.amax(input, None if dim == () else dim, keepdim)


def amin(input, dim=(), keepdim=False):  # noqa: A002
    return ops.amin(input, None if dim == () else dim, keepdim)


def argmax(input, dim=None, keepdim=False):  # noqa: A002
    return ops.argmax(input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):  # noqa: A002
    """int64 indices, as mint's argmin documents (ops.argmin's are int32)."""
    if dim is None:  # the flat index, as argmax gives it
        index = ops.argmin(ops.reshape(input, (-1,)), 0, False)
    else:
        index = ops.argmin(input, dim, keepdim)
    return ops.cast(index, mstype.int64)


def all(input, dim=None, keepdim=False):  # noqa: A001,A002
    return ops.amin(ops.cast(input, mstype.bool_), dim, keepdim)


def any(input, dim=None, keepdim=False):  # noqa: A001,A002
    return ops.amax(ops.cast(input, mstype.bool_), dim, keepdim)


def logsumexp(input, dim, keepdim=False):  # noqa: A002
    return ops.logsumexp(input, dim, keepdim)


def softmax(input, dim, *, dtype=None):  # noqa: A002
    return ops.softmax(input, dim, dtype=dtype)


# ---- shape ----
def cat(tensors, dim=0):
    return ops.cat(tensors, dim)


concat = cat


def stack(tensors, dim=0):
    return ops.stack(tensors, dim)


def transpose(input, dim0, dim1):  # noqa: A002
    """Swaps two dimensions (PyTorch's transpose, not ops.transpose's permutation)."""
    return ops.swapaxes(input, dim0, dim1)


def swapaxes(input, axis0, axis1):  # noqa: A002
    return ops.swapaxes(input, axis0, axis1)


def permute(input, dims):  # noqa: A002
    return ops.transpose(input, tuple(dims))


def squeeze(input, dim=None):  # noqa: A002
    return ops.squeeze(input, dim)


def reshape(input, shape):  # noqa: A002
    return ops.reshape(input, tuple(shape))


def flatten(input, start_dim=0, end_dim=-1):  # noqa: A002
    return ops.flatten(input, start_dim=start_dim, end_dim=end_dim)


def split(tensor, split_size_or_sections, dim=0):
    return ops.split(tensor, split_size_or_sections, dim)


def chunk(input, chunks, dim=0):  # noqa: A002
    return ops.chunk(input, chunks, dim)


def gather(input, dim, index):  # noqa: A002
    """out[i][j] = input[index[i][j]][j] along dim 0 (and so on): PyTorch's gather."""
    return _tm.gather_elements(input, dim, index)


def select(input, dim, index):  # noqa: A002
    return _tm.select(input, dim, index)


def flip(input, dims):  # noqa: A002
    return _tm.flip(input, dims)


def ravel(input):  # noqa: A002
    return ops.reshape(input, (-1,))


def t(input):  # noqa: A002
    return _tm.t(input)


def clone(input):  # noqa: A002
    return ops.mul(input, 1) if input.dtype != mstype.bool_ else ops.logical_and(input, True)


def bitwise_not(input):  # noqa: A002
    return ops.invert(input)


def nonzero(input, *, as_tuple=False):  # noqa: A002
    return ops.nonzero(input, as_tuple)


def where(condition, input=None, other=None):  # noqa: A002
    """where(condition, input, other): elements of input where condition holds, else other;
    where(condition): the indices of its nonzero elements, one tensor per dimension."""
    if input is None and other is None:
        return ops.nonzero(condition, True)
    return ops.where(condition, input, other)


# ---- creation ----
def zeros(size, *, dtype=None):
    return ops.zeros(_size(size), dtype)


def ones(size, *, dtype=None):
    return ops.ones(_size(size), dtype)


def rand(*size, generator=None, dtype=None, device=None):
    return ops.rand(*size, dtype=dtype)


def randn(*size, generator=None, dtype=None, device=None):
    return ops.randn(*size, dtype=dtype)


def _size(size):
    return (size,) if isinstance(size, int) else tuple(size)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):  # noqa: N803
    """(X, A) with op(A) X = b for triangular A (op: A, or A^T when transpose)."""
    from kiln.ops.function.linalg_decomp import triangular_solve as solve  # noqa: PLC0415
    return solve(b, A, upper, transpose, unitriangular)


__getattr__ = _missing_attribute("kiln.mint", "mindspore.mint")


_ = builtins  # the builtins max/min/sum/any/all are shadowed above on purpose
