"""Determinants, inverses and Cholesky factors by elimination unrolled over the (static) matrix
size: row swaps as one-hot permutation products, so gradients follow from registry ops. Cost
O(n) ops of O(n^2) work each; meant for the small matrices these calls see in models."""
import numpy as np

from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops._core import call, dtype_attr, is_tensor
from kiln.ops.function.array import concat, narrow, reshape, transpose

__all__ = ["det", "matrix_determinant", "slogdet", "log_matrix_determinant", "logdet",
           "inverse", "cholesky", "cholesky_inverse", "cholesky_solve"]


def _square(op, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{op}: {name} must be square matrices (..., n, n), got shape "
                         f"{tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: {name} must be a float Tensor, got {x.dtype}")
    return x


def _pivot(a, k):
    """a with the row of largest |a[i, k]| (i >= k) swapped into row k, and the swap's sign."""
    n = a.shape[-2]  # rows (a may be augmented with more columns)
    col = call("abs", (narrow(narrow(a, -1, k, 1), -2, k, n - k),))  # (..., n-k, 1)
    p = call("add", (call("argmax", (reshape(col, tuple(col.shape[:-2]) + (n - k,)),),
                          (-1, False)), k))  # (...,)
    p = call("cast", (p,), (dtype_attr(mstype.int64),))
    rows = tensor_of(np.arange(n, dtype=np.int64))
    pe = call("expand_dims", (p,), (len(p.shape),))
    # target row r takes source row: p if r == k, k if r == p, else r
    src = call("where", (call("equal", (rows, k)), pe,
                         call("where", (call("equal", (rows, pe)), k, rows))))
    perm = call("one_hot", (src,), (n, -1, 1, 0, dtype_attr(a.dtype), ""))
    sign = call("where", (call("equal", (p, k)), 1.0, -1.0))
    return call("matmul", (perm, a)), call("cast", (sign,), (dtype_attr(a.dtype),))


def _lu_diagonal(a):
    """(the diagonal of U in P A = L U, the permutation's sign)."""
    n = a.shape[-1]
    sign = None
    pivots = []
    for k in range(n):
        a, s = _pivot(a, k)
        sign = s if sign is None else call("mul", (sign, s))
        row = narrow(a, -2, k, 1)
        pivot = narrow(row, -1, k, 1)  # (..., 1, 1)
        pivots.append(reshape(pivot, tuple(a.shape[:-2])))
        if k + 1 < n:
            safe = call("where", (call("equal", (pivot, 0)), 1.0, pivot))
            below = narrow(a, -2, k + 1, n - k - 1)
            factors = call("div", (narrow(below, -1, k, 1), safe))
            below = call("sub", (below, call("mul", (factors, row))))
            a = concat([narrow(a, -2, 0, k + 1), below], -2)
    from kiln.ops.function.array import stack  # noqa: PLC0415
    return stack(pivots, -1), sign


def det(input):  # noqa: A002
    """The determinant of each square matrix (partial-pivoting elimination)."""
    diag, sign = _lu_diagonal(_square("det", input))
    return call("mul", (sign, call("reduce_prod", (diag,), ((-1,), False))))


def matrix_determinant(input):  # noqa: A002
    return det(input)


def slogdet(input):  # noqa: A002
    """(sign, log |det|) of each square matrix."""
    diag, sign = _lu_diagonal(_square("slogdet", input))
    sign = call("mul", (sign, call("reduce_prod", (call("sign", (diag,)),), ((-1,), False))))
    logabs = call("reduce_sum", (call("log", (call("abs", (diag,)),)),), ((-1,), False, None))
    return sign, logabs


def log_matrix_determinant(input):  # noqa: A002
    return slogdet(input)


def logdet(input):  # noqa: A002
    """log(det): NaN for a negative determinant, -inf for a singular matrix."""
    return call("log", (det(input),))


def inverse(input):  # noqa: A002
    """The inverse of each square matrix (Gauss-Jordan with partial pivoting; a singular
    matrix gives inf/NaN entries)."""
    a = _square("inverse", input)
    n = a.shape[-1]
    eye = np.broadcast_to(np.eye(n), tuple(a.shape)).copy()
    aug = concat([a, call("cast", (tensor_of(eye),), (dtype_attr(a.dtype),))], -1)
    rows = tensor_of(np.arange(n, dtype=np.int64).reshape(n, 1))
    for k in range(n):
        aug, _ = _pivot(aug, k)
        row = narrow(aug, -2, k, 1)
        row = call("div", (row, narrow(row, -1, k, 1)))
        col = narrow(aug, -1, k, 1)
        eliminated = call("sub", (aug, call("mul", (col, row))))
        aug = call("where", (call("equal", (rows, k)), row, eliminated))
    return narrow(aug, -1, n, n)


def cholesky(input_x, upper=False):
    """L with L L^T = input_x for symmetric positive-definite matrices (U = L^T if upper)."""
    a = _square("cholesky", input_x, "input_x")
    n = a.shape[-1]
    cols = []
    for j in range(n):
        v = narrow(a, -1, j, 1)  # (..., n, 1)
        if cols:
            lc = concat(cols, -1)  # (..., n, j)
            v = call("sub", (v, call("matmul", (lc, transpose_last(narrow(lc, -2, j, 1))))))
        d = call("sqrt", (narrow(v, -2, j, 1),))
        below = tensor_of((np.arange(n) >= j).reshape(n, 1))
        cols.append(call("where", (below, call("div", (v, d)), 0.0)))
    low = concat(cols, -1)
    return transpose_last(low) if upper else low


def transpose_last(x):
    n = len(x.shape)
    return transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def cholesky_inverse(input_x, upper=False):
    """The inverse of A from its Cholesky factor (A = L L^T, or U^T U if upper)."""
    f = _square("cholesky_inverse", input_x, "input_x")
    a = call("matmul", (transpose_last(f), f)) if upper else \
        call("matmul", (f, transpose_last(f)))
    return inverse(a)


def cholesky_solve(input, input2, upper=False):  # noqa: A002
    """X with A X = input, A given by its Cholesky factor input2."""
    f = _square("cholesky_solve", input2, "input2")
    a = call("matmul", (transpose_last(f), f)) if upper else \
        call("matmul", (f, transpose_last(f)))
    return call("matmul", (inverse(a), input))
