"""Decompositions and what is built on them: svd and qr (LAPACK kernels, csrc/ops/linalg_decomp.cc),
triangular_solve, and pinv, lstsq, cond and the matrix norms composed of them, so their gradients
follow from the registry's rules."""
import math

from kiln.common import dtype as mstype
from kiln.ops._core import axes_attr, call, dtype_attr, is_tensor
from kiln.ops.function.array import narrow, reshape, transpose
from kiln.ops.function.reduce_ext import vector_norm

__all__ = ["svd", "qr", "geqrf", "orgqr", "ormqr", "pinv", "lstsq", "cond", "matrix_norm",
           "norm"]

_FLOATS = (mstype.float32, mstype.float64)


def _matrices(op, x, name="input", dtypes=_FLOATS):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    if x.dtype not in dtypes:
        allowed = ", ".join(str(d).lower() for d in dtypes)
        raise TypeError(f"{op}: the dtype of {name} must be one of ({allowed}), got {x.dtype} "
                        f"(complex dtypes are not in kiln)")
    if len(x.shape) < 2:
        raise ValueError(f"{op}: {name} must have rank >= 2 (..., m, n), got shape "
                         f"{tuple(x.shape)}")
    return x


def _mt(x):
    n = len(x.shape)
    return transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def svd(input, full_matrices=False, compute_uv=True):  # noqa: A002 - MindSpore's name
    """(s, u, v) with input = u @ diag(s) @ v^T, s descending (MindSpore's order: v, not v^T);
    only s when compute_uv is False. LAPACK gesdd, batched over leading dims."""
    x = _matrices("svd", input)
    if not isinstance(full_matrices, bool) or not isinstance(compute_uv, bool):
        raise TypeError("svd: full_matrices and compute_uv must be bool")
    s, u, v = call("svd", (x,), (full_matrices and compute_uv,))
    return (s, u, v) if compute_uv else s


def qr(input, mode="reduced"):  # noqa: A002
    """(Q, R) with input = Q @ R: Q's columns orthonormal, R upper triangular ('reduced': k =
    min(m, n) columns of Q; 'complete': all m)."""
    if mode not in ("reduced", "complete"):
        raise TypeError(f"qr: the arg mode must be 'reduced' or 'complete', but got {mode!r}")
    x = _matrices("qr", input)
    return call("qr", (x,), (mode == "complete",))


def geqrf(input):  # noqa: A002
    """(y, tau): QR in LAPACK's Householder form (R on and above y's diagonal, the reflectors'
    vectors below it, their scales in tau). Not differentiable, as in MindSpore."""
    return call("geqrf", (_matrices("geqrf", input),))


def orgqr(input, tau):  # noqa: A002
    """The m x n Q with orthonormal columns from geqrf's (input, tau); needs m >= n >= k."""
    x = _matrices("orgqr", input)
    if not is_tensor(tau):
        raise TypeError(f"orgqr: tau must be a Tensor, got {type(tau).__name__}")
    return call("orgqr", (x, tau))


def ormqr(input, tau, other, left=True, transpose=False):  # noqa: A002
    """Q @ other (left) or other @ Q, Q^T with transpose, for the full mn x mn Q of geqrf's
    (input, tau): orgqr over input widened with zero columns (reflectors past k are the
    identity)."""
    x = _matrices("ormqr", input)
    o = _matrices("ormqr", other, "other")
    if not isinstance(left, bool) or not isinstance(transpose, bool):
        raise TypeError("ormqr: left and transpose must be bool")
    mn = x.shape[-2]
    if (o.shape[-2] if left else o.shape[-1]) != mn:
        raise ValueError(f"ormqr: other of shape {tuple(o.shape)} does not fit Q of size {mn} "
                         f"(left={left})")
    if x.shape[-1] > mn:
        x = narrow(x, -1, 0, mn)
    elif x.shape[-1] < mn:
        pad = call("fill", (), (tuple(x.shape[:-1]) + (mn - x.shape[-1],), 0.0,
                                dtype_attr(x.dtype)))
        x = call("concat", (x, pad), (len(x.shape) - 1,))
    q = orgqr(x, tau)
    return call("matmul", (q, o) if left else (o, q), (transpose, False) if left else
                (False, transpose))


def _tol(value, like):
    """atol/rtol (a number or a Tensor, one per matrix) as a tensor of like's dtype."""
    if is_tensor(value):
        return call("cast", (value,), (dtype_attr(like.dtype),))
    return call("fill", (), ((), float(value), dtype_attr(like.dtype)))


def pinv(x, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse from the SVD: singular values at most max(atol, rtol *
    s_max) count as zero (rtol defaults to max(m, n) * eps when atol is not given, else 0).
    hermitian=True takes the same path (for a symmetric matrix the SVD gives the same result)."""
    if is_tensor(x) and not x.shape:
        raise TypeError("pinv: the 0-D input is not supported")
    a = _matrices("pinv", x, "x")
    if not isinstance(hermitian, bool):
        raise TypeError(f"pinv: hermitian must be bool, got {type(hermitian).__name__}")
    if rtol is None:
        rtol = 0.0 if atol is not None else max(a.shape[-2:]) * _eps(a.dtype)
    atol = 0.0 if atol is None else atol
    s, u, v = call("svd", (a,), (False,))
    s_max = narrow(s, -1, 0, 1) if s.shape[-1] else s
    atol_t, rtol_t = _tol(atol, s), _tol(rtol, s)
    if atol_t.shape:
        atol_t = call("expand_dims", (atol_t,), (len(atol_t.shape),))
    if rtol_t.shape:
        rtol_t = call("expand_dims", (rtol_t,), (len(rtol_t.shape),))
    threshold = call("maximum", (atol_t, call("mul", (rtol_t, s_max))))
    keep = call("greater", (s, threshold))
    safe = call("where", (keep, s, 1.0))
    s_inv = call("where", (keep, call("div", (1.0, safe)), 0.0))
    scaled = call("mul", (v, call("expand_dims", (s_inv,), (len(s_inv.shape) - 1,))))
    return call("matmul", (scaled, u), (False, True))


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):  # noqa: N803
    """(X, A) with op(A) X = b for triangular A (op: A or A^T; unitriangular takes A's diagonal
    as ones), batch dims broadcast: mint's (and Tensor's) triangular_solve."""
    bb, a = _matrices("triangular_solve", b, "b"), _matrices("triangular_solve", A, "A")
    flags = {"upper": upper, "transpose": transpose, "unitriangular": unitriangular}
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise TypeError(f"triangular_solve: {name} must be bool, got {type(flag).__name__}")
    batch = _broadcast_batch("triangular_solve", bb.shape[:-2], a.shape[:-2])
    bb = call("broadcast_to", (bb,), (batch + tuple(bb.shape[-2:]),))
    ab = call("broadcast_to", (a,), (batch + tuple(a.shape[-2:]),))
    return call("triangular_solve", (bb, ab), (upper, transpose, unitriangular)), a


def _broadcast_batch(op, x, y):
    out = []
    for i in range(1, max(len(x), len(y)) + 1):
        p = x[-i] if i <= len(x) else 1
        q = y[-i] if i <= len(y) else 1
        if p != q and 1 not in (p, q):
            raise ValueError(f"{op}: batch dimensions {tuple(x)} and {tuple(y)} cannot be "
                             f"broadcast together")
        out.append(q if p == 1 else p)
    return tuple(reversed(out))


def _eps(dtype):
    return 2.220446049250313e-16 if dtype == mstype.float64 else 1.1920928955078125e-07


def lstsq(input, A):  # noqa: A002,N803 - MindSpore's names
    """The least-squares solution X of input @ X = A (input m x n, A m x k or m): pinv(input) @ A,
    which is also the minimum-norm solution when input is rank-deficient."""
    x = _matrices("lstsq", input, dtypes=(mstype.float16,) + _FLOATS)
    if len(x.shape) != 2:
        raise ValueError(f"lstsq: input must be 2-D, got shape {tuple(x.shape)}")
    if not is_tensor(A):
        raise TypeError(f"lstsq: A must be a Tensor, got {type(A).__name__}")
    if len(A.shape) not in (1, 2) or A.shape[0] != x.shape[0]:
        raise ValueError(f"lstsq: A must be 1-D or 2-D with {x.shape[0]} rows (input is "
                         f"{tuple(x.shape)}), got shape {tuple(A.shape)}")
    if A.dtype != x.dtype:
        raise TypeError(f"lstsq: input and A must have one dtype, got {x.dtype} and {A.dtype}")
    half = x.dtype == mstype.float16
    xf = call("cast", (x,), (dtype_attr(mstype.float32),)) if half else x
    af = call("cast", (A,), (dtype_attr(mstype.float32),)) if half else A
    out = call("matmul", (pinv(xf), af))
    return call("cast", (out,), (dtype_attr(mstype.float16),)) if half else out


def _svd_values(a, rows, cols):
    """The singular values of the (rows, cols) planes of a, over a's other axes."""
    n = len(a.shape)
    rest = [i for i in range(n) if i not in (rows, cols)]
    moved = transpose(a, tuple(rest) + (rows, cols))
    return call("svd", (moved,), (False,))[0]


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002,N803
    """The matrix norm over the two axes dim: 'fro', 'nuc' (sum of singular values), 2 / -2
    (largest / smallest singular value), 1 / -1 (max / min column sum of |A|), inf / -inf
    (max / min row sum)."""
    if not is_tensor(A):
        raise TypeError(f"matrix_norm: A must be a Tensor, got {type(A).__name__}")
    n = len(A.shape)
    dims = axes_attr(dim, "matrix_norm", "dim")
    if dims is None or len(dims) != 2 or n < 2:
        raise ValueError(f"matrix_norm: dim must be two axes of a tensor of rank >= 2, got dim "
                         f"{dim} for shape {tuple(A.shape)}")
    rows, cols = (d % n if -n <= d < n else _bad_dim(d, n) for d in dims)
    if rows == cols:
        raise ValueError(f"matrix_norm: dim must be two different axes, got {dim}")
    if ord not in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):
        raise ValueError(f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got "
                         f"{ord!r}")
    if dtype is not None:
        A = call("cast", (A,), (dtype_attr(dtype),))  # noqa: N806
    if ord == "fro":
        return vector_norm(A, 2, (rows, cols), keepdim)
    if ord in ("nuc", 2, -2):
        s = _svd_values(A, rows, cols)
        red = {"nuc": "reduce_sum", 2: "reduce_max", -2: "reduce_min"}[ord]
        out = call(red, (s,), ((-1,), False, None) if red == "reduce_sum" else ((-1,), False))
        if keepdim:
            for axis in sorted((rows, cols)):
                out = call("expand_dims", (out,), (axis,))
        return out
    if ord in (math.inf, -math.inf):
        rows, cols = cols, rows
    sums = vector_norm(A, 1, rows, True)
    red = "reduce_max" if ord > 0 else "reduce_min"
    out = call(red, (sums,), ((cols,), True))
    return out if keepdim else reshape(out, tuple(d for i, d in enumerate(out.shape)
                                                  if i not in (rows, cols)))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: N803 - MindSpore's name
    """A matrix norm (matrix_norm) when dim names two axes, or A is 2-D, dim None and ord
    given; else the vector norm (ord None: the 2-norm of all elements, or along dim)."""
    axes_attr(dim, "norm", "dim")
    two_axes = isinstance(dim, (tuple, list)) and len(dim) == 2
    if two_axes or (dim is None and ord is not None and len(A.shape) == 2):
        return matrix_norm(A, "fro" if ord is None else ord, dim or (-2, -1), keepdim,
                           dtype=dtype)
    if ord in (None, "fro"):
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise ValueError(f"norm: ord {ord!r} needs a matrix (a 2-D input or two axes in dim)")
    return vector_norm(A, ord, dim, keepdim, dtype=dtype)


def _bad_dim(d, n):
    raise ValueError(f"matrix_norm: dim {d} is out of range for rank {n}")


def cond(A, p=None):  # noqa: N803
    """The condition number ||A||_p ||A^-1||_p (p None: 2, the ratio of the extreme singular
    values)."""
    a = _matrices("cond", A, "A")
    if p is None or p == 2:
        s = call("svd", (a,), (False,))[0]
        return call("div", (call("reduce_max", (s,), ((-1,), False)),
                            call("reduce_min", (s,), ((-1,), False))))
    if p == -2:
        s = call("svd", (a,), (False,))[0]
        return call("div", (call("reduce_min", (s,), ((-1,), False)),
                            call("reduce_max", (s,), ((-1,), False))))
    from kiln.ops.function.linalg_solve import inverse  # noqa: PLC0415
    return call("mul", (matrix_norm(a, p), matrix_norm(inverse(a), p)))
