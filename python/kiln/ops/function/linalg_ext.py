"""Products beyond matmul (outer, inner, dot, kron, tensor_dot, the add*mm family), cross
products and distances, all composed of matmul and elementwise registry ops."""
import builtins
import math

from kiln.ops._core import call, int_arg, is_tensor, require_known_sizes
from kiln.ops.function.array import _axis, concat, narrow, reshape, transpose

__all__ = [
    "outer", "ger", "inner", "dot", "mv", "vecdot", "addmm", "addmv", "addbmm", "baddbmm",
    "addr", "tensor_dot", "kron", "cross", "dist", "cdist", "cosine_similarity",
]


def _tensor(op, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _rank(op, x, name, ranks):
    _tensor(op, x, name)
    if len(x.shape) not in ranks:
        raise ValueError(f"{op}: {name} must have rank {' or '.join(map(str, ranks))}, got "
                         f"shape {tuple(x.shape)}")
    return x


def outer(input, vec2):  # noqa: A002
    """The outer product of two 1-D tensors."""
    a, b = _rank("outer", input, "input", (1,)), _rank("outer", vec2, "vec2", (1,))
    return call("mul", (reshape(a, (-1, 1)), reshape(b, (1, -1))))


def ger(input, vec2):  # noqa: A002
    return outer(input, vec2)


def inner(input, other):  # noqa: A002
    """Sums over the last axes: out[i.., j..] = sum_k a[i.., k] b[j.., k]; 0-D: a * b."""
    a, b = _tensor("inner", input), _tensor("inner", other, "other")
    if not a.shape or not b.shape:
        return call("mul", (a, b))
    k = a.shape[-1]
    if b.shape[-1] != k:
        raise ValueError(f"inner: the last dimensions differ: {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    out = call("matmul", (reshape(a, (-1, k)), transpose(reshape(b, (-1, k)), (1, 0))))
    return reshape(out, tuple(a.shape[:-1]) + tuple(b.shape[:-1]))


def dot(input, other):  # noqa: A002
    """np.dot for rank >= 2: sums input's last axis with other's second-to-last."""
    a, b = _tensor("dot", input), _tensor("dot", other, "other")
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ValueError(f"dot: input and other must have rank >= 2, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    k = a.shape[-1]
    if b.shape[-2] != k:
        raise ValueError(f"dot: input's last dimension {k} must equal other's second-to-last "
                         f"{b.shape[-2]}")
    nb = len(b.shape)
    bt = transpose(b, (nb - 2,) + tuple(i for i in range(nb) if i != nb - 2))
    out = call("matmul", (reshape(a, (-1, k)), reshape(bt, (k, -1))))
    return reshape(out, tuple(a.shape[:-1]) + tuple(b.shape[:-2]) + tuple(b.shape[-1:]))


def mv(mat, vec):
    """mat (n, m) times vec (m,)."""
    _rank("mv", mat, "mat", (2,))
    _rank("mv", vec, "vec", (1,))
    return call("matmul", (mat, vec))


def vecdot(x, y, *, axis=-1):
    """sum(x * y) along axis (broadcasting x and y)."""
    prod = call("mul", (_tensor("vecdot", x, "x"), y))
    return call("reduce_sum", (prod,), ((_axis(axis, len(prod.shape), "vecdot"),), False, None))


def _scaled_sum(beta, base, alpha, prod):
    if beta == 0:  # beta 0 ignores base, NaN included (MindSpore's and PyTorch's rule)
        return prod if alpha == 1 else call("mul", (prod, alpha))
    left = base if beta == 1 else call("mul", (base, beta))
    right = prod if alpha == 1 else call("mul", (prod, alpha))
    return call("add", (left, right))


def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002
    """beta * input + alpha * (mat1 @ mat2)."""
    _rank("addmm", mat1, "mat1", (2,))
    _rank("addmm", mat2, "mat2", (2,))
    return _scaled_sum(beta, input, alpha, call("matmul", (mat1, mat2)))


def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    """beta * input + alpha * (mat @ vec)."""
    return _scaled_sum(beta, input, alpha, mv(mat, vec))


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """beta * input + alpha * sum_b batch1[b] @ batch2[b] (2-D operands: the column sums of
    batch1 @ batch2, as MindSpore computes them)."""
    _rank("addbmm", batch1, "batch1", (2, 3))
    _rank("addbmm", batch2, "batch2", (2, 3))
    total = call("reduce_sum", (call("matmul", (batch1, batch2)),), ((0,), False, None))
    return _scaled_sum(beta, input, alpha, total)


def baddbmm(input, batch1, batch2, beta=1, alpha=1):  # noqa: A002
    """beta * input + alpha * (batch1 @ batch2), batched (2-D operands: one product)."""
    _rank("baddbmm", batch1, "batch1", (2, 3))
    _rank("baddbmm", batch2, "batch2", (2, 3))
    return _scaled_sum(beta, input, alpha, call("matmul", (batch1, batch2)))


def addr(x, vec1, vec2, *, beta=1, alpha=1):
    """beta * x + alpha * outer(vec1, vec2)."""
    return _scaled_sum(beta, x, alpha, outer(vec1, vec2))


def tensor_dot(x1, x2, axes):
    """Sums the products over axes (an int n: x1's last n with x2's first n; or two lists)."""
    a, b = _tensor("tensor_dot", x1, "x1"), _tensor("tensor_dot", x2, "x2")
    na, nb = len(a.shape), len(b.shape)
    if not isinstance(axes, (tuple, list)):
        axes = int_arg(axes, "tensor_dot", "axes")
        ax_a, ax_b = list(range(na - axes, na)), list(range(axes))
    elif isinstance(axes, (list, tuple)) and len(axes) == 2:
        ax_a, ax_b = ([axes[i]] if isinstance(axes[i], int) else list(axes[i]) for i in (0, 1))
    else:
        raise ValueError(f"tensor_dot: axes must be an int or two lists of axes, got {axes!r}")
    ax_a = [_axis(v, na, "tensor_dot", "axes") for v in ax_a]
    ax_b = [_axis(v, nb, "tensor_dot", "axes") for v in ax_b]
    if [a.shape[i] for i in ax_a] != [b.shape[i] for i in ax_b]:
        raise ValueError(f"tensor_dot: summed axes differ in size: {tuple(a.shape)} axes "
                         f"{ax_a} and {tuple(b.shape)} axes {ax_b}")
    free_a = [i for i in range(na) if i not in ax_a]
    free_b = [i for i in range(nb) if i not in ax_b]
    k = math.prod(a.shape[i] for i in ax_a)
    am = reshape(transpose(a, tuple(free_a + ax_a)), (-1, k))
    bm = reshape(transpose(b, tuple(ax_b + free_b)), (k, -1))
    out = call("matmul", (am, bm))
    return reshape(out, tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b))


def kron(input, other):  # noqa: A002
    """The Kronecker product (np.kron)."""
    a, b = _tensor("kron", input), _tensor("kron", other, "other")
    require_known_sizes("kron", a, b)
    n = builtins.max(len(a.shape), len(b.shape))
    sa = (1,) * (n - len(a.shape)) + tuple(a.shape)
    sb = (1,) * (n - len(b.shape)) + tuple(b.shape)
    a2 = reshape(a, builtins.sum(((d, 1) for d in sa), ()))
    b2 = reshape(b, builtins.sum(((1, d) for d in sb), ()))
    return reshape(call("mul", (a2, b2)), tuple(x * y for x, y in zip(sa, sb)))


def cross(input, other, dim=None):  # noqa: A002
    """The cross product of 3-vectors along dim (None: the first axis of size 3)."""
    a, b = _tensor("cross", input), _tensor("cross", other, "other")
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"cross: input and other must have one shape, got {tuple(a.shape)} "
                         f"and {tuple(b.shape)}")
    if dim is None:
        dims = [i for i, d in enumerate(a.shape) if d == 3]
        if not dims:
            raise ValueError(f"cross: no axis of size 3 in shape {tuple(a.shape)}")
        d = dims[0]
    else:
        d = _axis(dim, len(a.shape), "cross", "dim")
        if a.shape[d] != 3:
            raise ValueError(f"cross: dim {d} must have size 3, got {a.shape[d]}")
    ai = [narrow(a, d, i, 1) for i in range(3)]
    bi = [narrow(b, d, i, 1) for i in range(3)]

    def term(i, j):
        return call("sub", (call("mul", (ai[i], bi[j])), call("mul", (ai[j], bi[i]))))

    return concat([term(1, 2), term(2, 0), term(0, 1)], d)


def dist(input, other, p=2):  # noqa: A002
    """The p-norm of input - other."""
    from kiln.ops.function.reduce_ext import vector_norm  # noqa: PLC0415
    return vector_norm(call("sub", (_tensor("dist", input), other)), p)


def cdist(x1, x2, p=2.0):
    """Pairwise p-norm distances between the rows of x1 (B, P, M) and x2 (B, R, M)."""
    a, b = _tensor("cdist", x1, "x1"), _tensor("cdist", x2, "x2")
    if len(a.shape) not in (2, 3) or len(a.shape) != len(b.shape) or a.shape[-1] != b.shape[-1]:
        raise ValueError(f"cdist: x1 and x2 must be (B, P, M) and (B, R, M) (or 2-D), got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    diff = call("sub", (call("expand_dims", (a,), (len(a.shape) - 1,)),
                        call("expand_dims", (b,), (len(b.shape) - 2,))))
    from kiln.ops.function.reduce_ext import vector_norm  # noqa: PLC0415
    return vector_norm(diff, p, -1)


def cosine_similarity(x1, x2, dim=1, eps=1e-08):
    """sum(x1 * x2) / max(|x1| |x2|, eps) along dim."""
    a, b = _tensor("cosine_similarity", x1, "x1"), _tensor("cosine_similarity", x2, "x2")
    prod = call("mul", (a, b))
    d = (_axis(dim, len(prod.shape), "cosine_similarity", "dim"),)
    num = call("reduce_sum", (prod,), (d, False, None))
    na = call("reduce_sum", (call("mul", (a, a)),), (d, False, None))
    nb = call("reduce_sum", (call("mul", (b, b)),), (d, False, None))
    den = call("sqrt", (call("maximum", (call("mul", (na, nb)), float(eps) ** 2)),))
    return call("div", (num, den))


