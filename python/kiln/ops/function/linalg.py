"""Linear-algebra functional ops: matmul, bmm, mm and dense, all on the registry's MatMul."""
from kiln.ops._core import call

__all__ = ["matmul", "bmm", "mm", "dense"]


def _ndim(x, name, op):
    shape = getattr(x, "shape", None)
    if shape is None:
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return len(shape)


def matmul(input, other):  # noqa: A002 - MindSpore's argument names
    """NumPy matmul: 1-D operands are promoted to matrices, batch dims broadcast."""
    return call("matmul", (input, other))


def bmm(input_x, mat2):
    """Batched matrix product (..., n, m) @ (..., m, p) -> (..., n, p) of tensors of rank 3 or
    more (MindSpore's bmm takes any number of batch dimensions; they broadcast)."""
    a, b = _ndim(input_x, "input_x", "bmm"), _ndim(mat2, "mat2", "bmm")
    if a < 3 or b < 3:
        raise ValueError(f"bmm: expected tensors of rank 3 or more, got shapes "
                         f"{tuple(input_x.shape)} and {tuple(mat2.shape)}")
    return call("matmul", (input_x, mat2))


def mm(input, mat2):  # noqa: A002
    """Matrix product of two 2-D tensors."""
    a, b = _ndim(input, "input", "mm"), _ndim(mat2, "mat2", "mm")
    if a != 2 or b != 2:
        raise ValueError(f"mm: expected 2-D tensors, got shapes {tuple(input.shape)} and "
                         f"{tuple(mat2.shape)}")
    return call("matmul", (input, mat2))


def dense(input, weight, bias=None):  # noqa: A002
    """input @ weight.T + bias with weight of shape (out, in) (or (in,)), like nn.Dense."""
    if _ndim(weight, "weight", "dense") not in (1, 2):
        raise ValueError(f"dense: weight must be 1-D or 2-D, got shape {tuple(weight.shape)}")
    # transpose_b lets oneDNN read weight as a column-major matrix: no copy of the weights.
    out = call("matmul", (input, weight), (False, True))
    if bias is not None:
        out = call("add", (out, bias))
    return out
