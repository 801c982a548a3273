"""kiln.mint.linalg -- MindSpore's mint.linalg: inv, qr and the norms, with PyTorch's argument
names (A, ord, dim, keepdim)."""
from kiln import ops
from kiln.common._missing import missing_attribute as _missing_attribute

__all__ = ["inv", "qr", "matrix_norm", "vector_norm", "norm"]


def inv(A):  # noqa: N803 - mint's argument name
    """The inverse of each square matrix."""
    return ops.inverse(A)


def qr(A, mode="reduced"):  # noqa: N803
    """(Q, R) of each matrix ('reduced' or 'complete'; 'r' gives an empty Q, as PyTorch does)."""
    if mode == "r":
        _, r = ops.qr(A, "reduced")
        return ops.zeros((0,), A.dtype), r
    return ops.qr(A, mode)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002,N803
    return ops.matrix_norm(A, ord, dim, keepdim, dtype=dtype)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    return ops.vector_norm(x, ord, dim, keepdim, dtype=dtype)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002,N803
    """A matrix norm when dim names two axes (or A is 2-D and dim is None with an ord), else
    the vector norm (of all elements when dim and ord are None)."""
    two_axes = isinstance(dim, (tuple, list)) and len(dim) == 2
    if two_axes or (dim is None and ord is not None and len(A.shape) == 2):
        return ops.matrix_norm(A, "fro" if ord is None else ord, dim or (-2, -1), keepdim,
                               dtype=dtype)
    if isinstance(ord, str):
        raise ValueError(f"norm: ord {ord!r} needs a matrix (a 2-D input or two axes in dim)")
    return ops.vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


__getattr__ = _missing_attribute(__name__, "mindspore.mint.linalg")
