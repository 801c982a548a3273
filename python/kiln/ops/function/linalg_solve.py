"""Determinants, inverses and Cholesky factors by elimination unrolled over the (static) matrix
size: row swaps as one-hot permutation products, so gradients follow from registry ops. Cost
O(n) ops of O(n^2) work each; meant for the small matrices these calls see in models."""
import numpy as np

from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops._core import call, dtype_attr, is_tensor
from kiln.ops.function.array import concat, narrow, reshape, transpose

__all__ = ["det", "matrix_determinant", "slogdet", "log_matrix_determinant", "logdet",
           "inverse", "cholesky", "cholesky_inverse", "cholesky_solve", "lu_unpack", "lu_solve"]


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


def _row_swaps(pivots, m, dtype):
    """R with R @ A = A after LAPACK's row swaps (row i with row pivots[i] - 1, in order), as a
    product of one-hot permutation matrices, so A = R^T L U."""
    piv = call("cast", (pivots,), (dtype_attr(mstype.int64),))
    rows = tensor_of(np.arange(m, dtype=np.int64))
    r = None
    for i in range(pivots.shape[-1]):
        j = call("expand_dims", (call("sub", (narrow(piv, -1, i, 1), 1)),), (len(piv.shape),))
        j = reshape(j, tuple(piv.shape[:-1]) + (1,))
        src = call("where", (call("equal", (rows, i)), j,
                             call("where", (call("equal", (rows, j)), i, rows))))
        swap = call("one_hot", (src,), (m, -1, 1, 0, dtype_attr(dtype), ""))
        r = swap if r is None else call("matmul", (swap, r))
    if r is None:
        eye = np.broadcast_to(np.eye(m), tuple(pivots.shape[:-1]) + (m, m)).copy()
        r = call("cast", (tensor_of(eye),), (dtype_attr(dtype),))
    return r


def _lu_args(op, data, pivots):
    if not is_tensor(data) or not is_tensor(pivots):
        raise TypeError(f"{op}: LU_data and LU_pivots must be Tensors")
    if len(data.shape) < 2 or not data.dtype.is_floating_point:
        raise ValueError(f"{op}: LU_data must be a float tensor of rank >= 2, got "
                         f"{data.dtype} of shape {tuple(data.shape)}")
    if pivots.dtype not in mstype.int_type + mstype.uint_type:
        raise TypeError(f"{op}: LU_pivots must be an integer tensor, got {pivots.dtype}")
    m, n = data.shape[-2:]
    if tuple(pivots.shape) != tuple(data.shape[:-2]) + (min(m, n),):
        raise ValueError(f"{op}: LU_pivots of shape {tuple(pivots.shape)} must be (*, "
                         f"min(M, N)) for LU_data of shape {tuple(data.shape)}")


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):  # noqa: N803
    """(P, L, U) with A = P @ L @ U from the packed LU factors (LAPACK's getrf layout: L's unit
    diagonal implied, 1-based pivots); None for the parts not asked for."""
    _lu_args("lu_unpack", LU_data, LU_pivots)
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    p = transpose_last(_row_swaps(LU_pivots, m, LU_data.dtype)) if unpack_pivots else None
    if not unpack_data:
        return p, None, None
    dt = dtype_attr(LU_data.dtype)
    below = call("cast", (tensor_of(np.tril(np.ones((m, k)), -1)),), (dt,))
    eye = call("cast", (tensor_of(np.eye(m, k)),), (dt,))
    low = call("add", (call("mul", (narrow(LU_data, -1, 0, k), below)), eye))
    upper = call("cast", (tensor_of(np.triu(np.ones((k, n)))),), (dt,))
    up = call("mul", (narrow(LU_data, -2, 0, k), upper))
    return p, low, up


def lu_solve(b, LU_data, LU_pivots):  # noqa: N803
    """y with A y = b for A = P L U given as lu_unpack's packed factors: two triangular
    solves after the row swaps."""
    _lu_args("lu_solve", LU_data, LU_pivots)
    if not is_tensor(b) or len(b.shape) < 2:
        raise ValueError("lu_solve: b must be a Tensor of shape (*, m, k)")
    m = LU_data.shape[-1]
    if LU_data.shape[-2] != m or b.shape[-2] != m:
        raise ValueError(f"lu_solve: LU_data must be square (*, m, m) and b (*, m, k), got "
                         f"{tuple(LU_data.shape)} and {tuple(b.shape)}")
    batch = tuple(np.broadcast_shapes(tuple(b.shape[:-2]), tuple(LU_data.shape[:-2])))
    lu = call("broadcast_to", (LU_data,), (batch + (m, m),))
    r = _row_swaps(call("broadcast_to", (LU_pivots,), (batch + (m,),)), m, LU_data.dtype)
    rb = call("matmul", (r, call("broadcast_to", (b,), (batch + tuple(b.shape[-2:]),))))
    y = call("triangular_solve", (rb, lu), (False, False, True))
    return call("triangular_solve", (y, lu), (True, False, False))
