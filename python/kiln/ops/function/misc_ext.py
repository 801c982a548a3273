"""More functional ops composed of registry ops: integer gcd/lcm/popcount, gated activations
(fast_gelu, swiglu, rms_norm), statistics (trapz, cov, renorm, pdist), einsum, matrix_power,
combinations, in-place assign_add/assign_sub, and random draws built on uniform/normal."""
import itertools

import numpy as np

from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops._core import call, dtype_attr, int_arg, is_tensor
from kiln.ops.function.array import _axis, narrow, reshape, transpose

__all__ = [
    "gcd", "lcm", "population_count", "fast_gelu", "swiglu", "rms_norm", "trapz", "cov",
    "renorm", "pdist", "matrix_power", "combinations", "einsum", "kaiser_window",
    "clip_by_value", "adjoint", "conj", "is_nonzero", "eps", "assign_add", "assign_sub",
]


def _tensor(op, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _integer(op, x, name="input"):
    _tensor(op, x, name)
    if x.dtype.is_floating_point or x.dtype == mstype.bool_:
        raise TypeError(f"{op}: {name} must be an integer Tensor, got {x.dtype}")
    return x


def gcd(input, other):  # noqa: A002
    """The greatest common divisor of |a| and |b| (gcd(0, 0) = 0), by Euclid's steps: as many
    as the dtype's width can ever need, so the graph has a fixed size."""
    a = call("abs", (_integer("gcd", input),))
    b = call("abs", (_integer("gcd", other, "other"),))
    steps = 2 * mstype.dtype_to_nptype(call("add", (a, b)).dtype)(0).nbytes * 8
    for _ in range(steps):  # (a, b) -> (b, a mod b) while b != 0
        done = call("equal", (b, 0))
        safe = call("where", (done, 1, b))
        a, b = call("where", (done, a, b)), call("where", (done, 0, call("mod", (a, safe))))
    return a


def lcm(input, other):  # noqa: A002
    """|a * b| / gcd(a, b) (0 when either is 0)."""
    g = gcd(input, other)
    safe = call("where", (call("equal", (g, 0)), 1, g))
    return call("abs", (call("mul", (call("floor_div", (input, safe)), other)),))


def population_count(input_x):
    """The number of set bits of each element (two's complement), as uint8."""
    x = _integer("population_count", input_x, "input_x")
    bits = mstype.dtype_to_nptype(x.dtype)(0).nbytes * 8
    total = call("mul", (x, 0))
    for i in range(bits):
        bit = call("bitwise_and", (call("bitwise_right_shift", (x, i)), 1))
        total = call("add", (total, bit))
    return call("cast", (total,), (dtype_attr(mstype.uint8),))


def fast_gelu(x):
    """x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|)), MindSpore's FastGeLU."""
    _tensor("fast_gelu", x, "x")
    ax = call("abs", (x,))
    den = call("add", (1.0, call("exp", (call("mul", (ax, -1.702)),))))
    return call("mul", (call("div", (x, den)),
                        call("exp", (call("mul", (call("sub", (x, ax)), 0.851)),))))


def swiglu(input, dim=-1):  # noqa: A002
    """silu(a) * b, a and b the two halves of input along dim."""
    x = _tensor("swiglu", input)
    d = _axis(dim, len(x.shape), "swiglu", "dim")
    if x.shape[d] % 2:
        raise ValueError(f"swiglu: dim {d} of shape {tuple(x.shape)} must have an even size")
    half = x.shape[d] // 2
    a, b = narrow(x, d, 0, half), narrow(x, d, half, half)
    return call("mul", (call("silu", (a,)), b))


def rms_norm(x, gamma, epsilon=1e-06):
    """(x / sqrt(mean(x^2 over gamma's dims) + epsilon) * gamma, 1 / that root)."""
    _tensor("rms_norm", x, "x")
    k = len(gamma.shape)
    axes = tuple(range(len(x.shape) - k, len(x.shape)))
    ms_ = call("reduce_mean", (call("mul", (x, x)),), (axes, True))
    rstd = call("rsqrt", (call("add", (ms_, float(epsilon))),))
    return call("mul", (call("mul", (x, rstd)), gamma)), rstd


def trapz(y, x=None, *, dx=1.0, dim=-1):
    """The trapezoid-rule integral of y along dim, at spacing dx or sample points x."""
    _tensor("trapz", y, "y")
    d = _axis(dim, len(y.shape), "trapz", "dim")
    n = y.shape[d]
    if n < 2:
        return call("reduce_sum", (call("mul", (y, 0.0)),), ((d,), False, None))
    mid = call("mul", (call("add", (narrow(y, d, 1, n - 1), narrow(y, d, 0, n - 1))), 0.5))
    if x is None:
        return call("mul", (call("reduce_sum", (mid,), ((d,), False, None)), float(dx)))
    xd = d if len(x.shape) == len(y.shape) else len(x.shape) - 1
    m = x.shape[xd]
    step = call("sub", (narrow(x, xd, 1, m - 1), narrow(x, xd, 0, m - 1)))
    if len(x.shape) == 1 and len(y.shape) > 1:
        shape = [1] * len(y.shape)
        shape[d] = m - 1
        step = reshape(step, tuple(shape))
    return call("reduce_sum", (call("mul", (mid, step)),), ((d,), False, None))


def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """The covariance of the rows of input (variables) over its columns (observations)."""
    x = _tensor("cov", input)
    if len(x.shape) > 2:
        raise ValueError(f"cov: input must be at most 2-D, got shape {tuple(x.shape)}")
    x = reshape(x, (1, -1)) if len(x.shape) < 2 else x
    if not x.dtype.is_floating_point:
        x = call("cast", (x,), (dtype_attr(mstype.float32),))
    w = None
    for given in (fweights, aweights):
        if given is not None:
            g = call("cast", (given,), (dtype_attr(x.dtype),))
            w = g if w is None else call("mul", (w, g))
    w = call("add", (call("mul", (narrow(x, 0, 0, 1), 0.0)), 1.0)) if w is None else \
        reshape(w, (1, -1))
    wsum = call("reduce_sum", (w,), (None, False, None))
    mean = call("div", (call("reduce_sum", (call("mul", (x, w)),), ((1,), True, None)), wsum))
    dev = call("sub", (x, mean))
    prod = call("matmul", (call("mul", (dev, w)), transpose(dev, (1, 0))))
    if aweights is None:
        norm = call("sub", (wsum, float(correction)))
    else:
        aw = reshape(call("cast", (aweights,), (dtype_attr(x.dtype),)), (1, -1))
        norm = call("sub", (wsum, call("div", (call("mul", (float(correction), call(
            "reduce_sum", (call("mul", (w, aw)),), (None, False, None)))), wsum))))
    out = call("div", (prod, call("maximum", (norm, 0.0))))
    return reshape(out, ()) if len(input.shape) < 2 else out


def renorm(input, p, axis, maxnorm):  # noqa: A002
    """Each slice along axis rescaled so its p-norm is at most maxnorm."""
    x = _tensor("renorm", input)
    a = _axis(axis, len(x.shape), "renorm")
    others = tuple(d for d in range(len(x.shape)) if d != a)
    norm = call("pow", (call("reduce_sum", (call("pow", (call("abs", (x,)), float(p))),),
                                            (others, True, None)), 1.0 / float(p)))
    scale = call("where", (call("greater", (norm, float(maxnorm))),
                           call("div", (float(maxnorm), call("add", (norm, 1e-7)))), 1.0))
    return call("mul", (x, scale))


def pdist(input, p=2.0):  # noqa: A002
    """The p-norm distances between the rows i < j of a (N, M) tensor, in row order."""
    x = _tensor("pdist", input)
    n = x.shape[-2]
    i, j = np.triu_indices(n, 1)
    a = call("gather", (x, tensor_of(i.astype(np.int64))), (len(x.shape) - 2, 0))
    b = call("gather", (x, tensor_of(j.astype(np.int64))), (len(x.shape) - 2, 0))
    from kiln.ops.function.reduce_ext import vector_norm  # noqa: PLC0415
    return vector_norm(call("sub", (a, b)), p, -1)


def matrix_power(input, n):  # noqa: A002
    """input @ input @ ... (n times; n = 0 gives identities) by repeated squaring."""
    x = _tensor("matrix_power", input)
    n = int_arg(n, "matrix_power", "n")
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"matrix_power: input must be square matrices, got shape "
                         f"{tuple(x.shape)}")
    if n < 0:
        raise ValueError("matrix_power: negative powers need a matrix inverse, which kiln does "
                         "not have yet")
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else call("matmul", (result, base))
        n >>= 1
        if n:
            base = call("matmul", (base, base))
    if result is None:
        eye = np.broadcast_to(np.eye(x.shape[-1]), tuple(x.shape)).copy()
        return call("cast", (tensor_of(eye),), (dtype_attr(x.dtype),))
    return result


def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """The r-element combinations of a 1-D tensor's elements, one per row."""
    x = _tensor("combinations", input)
    if len(x.shape) != 1:
        raise ValueError(f"combinations: input must be 1-D, got shape {tuple(x.shape)}")
    fn = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(fn(range(x.shape[0]), int_arg(r, "combinations", "r")))
    if not rows:
        return reshape(narrow(x, 0, 0, 0), (0, r)) if r else reshape(narrow(x, 0, 0, 0), (0,))
    idx = tensor_of(np.asarray(rows, np.int64))
    return call("gather", (x, idx), (0, 0))


def einsum(equation, *operands):
    """Einstein summation over explicit ('ij,jk->ik') or implicit ('ij,jk') output labels, by
    broadcast products and sums; '...' stands for the broadcast leading dims (aligned from the
    right, as NumPy does; an explicit output without '...' sums them, as MindSpore documents).
    The sublist form einsum(x, [0, ...], y, [..., 1], [0, 1]) names labels by ints < 52 and
    '...' by Ellipsis. A label may appear once per operand."""
    if not isinstance(equation, str):
        equation, operands = _sublist_equation((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: {len(terms)} operands in {equation!r}, {len(operands)} given")
    for t in operands:
        _tensor("einsum", t, "operand")
    terms, ell = _expand_ellipses(equation, terms, operands)
    if arrow:
        if out.count("...") > 1 or out.replace("...", "").count("."):
            raise ValueError(f"einsum: invalid output {out!r} in {equation!r}")
        out = out.replace("...", ell)
    else:
        letters = [c for c in "".join(terms) if c not in ell]
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    used = set("".join(terms))
    if len(set(out)) != len(out) or not set(out) <= used:
        raise ValueError(f"einsum: output labels {out!r} must be distinct labels of the inputs")
    labels = sorted(used - set(out))
    order = list(out) + labels
    total = None
    for term, t in zip(terms, operands):
        perm = tuple(sorted(range(len(term)), key=lambda i: order.index(term[i])))
        # Size-1 axes where the term lacks a label (no sizes needed: also for a graph's
        # dimensions of any size).
        aligned = transpose(t, perm)
        for axis, label in enumerate(order):
            if label not in term:
                aligned = call("expand_dims", (aligned,), (axis,))
        total = aligned if total is None else call("mul", (total, aligned))
    if labels:
        total = call("reduce_sum", (total,), (tuple(range(len(out), len(order))), False, None))
    return total


def _sublist_equation(args):
    """(equation, operands) of einsum's sublist form: operand, sublist, operand, sublist, ...,
    [output sublist]."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def term(sublist):
        if not isinstance(sublist, (list, tuple)):
            raise TypeError(f"einsum: a sublist must be a list, got {type(sublist).__name__}")
        out = ""
        for item in sublist:
            if item is Ellipsis:
                out += "..."
            elif isinstance(item, int) and not isinstance(item, bool) and 0 <= item < 52:
                out += letters[item]
            else:
                raise ValueError(f"einsum: sublist labels must be Ellipsis or ints in [0, 52), "
                                 f"got {item!r}")
        return out

    operands, terms = args[0:len(args) - len(args) % 2:2], args[1::2]
    if len(terms) != len(operands):
        raise ValueError("einsum: each operand needs a sublist")
    equation = ",".join(term(t) for t in terms)
    if len(args) % 2:
        equation += "->" + term(args[-1])
    return equation, tuple(operands)


def _expand_ellipses(equation, terms, operands):
    """Each term with its '...' replaced by labels for the dims it covers (private characters,
    one per broadcast dim counted from the right), and the labels of the widest '...'."""
    widths = []
    for term, t in zip(terms, operands):
        if term.count("...") > 1 or term.replace("...", "").count("."):
            raise ValueError(f"einsum: invalid term {term!r} in {equation!r}")
        named = len(term.replace("...", ""))
        if not term.replace("...", "").isalpha() and named:
            raise ValueError(f"einsum: labels must be letters, got {term!r} in {equation!r}")
        width = len(t.shape) - named if "..." in term else 0
        if width < 0 or ("..." not in term and named != len(t.shape)):
            raise ValueError(f"einsum: term {term!r} does not fit shape {tuple(t.shape)}")
        if len(set(term.replace("...", ""))) != named:
            raise ValueError(f"einsum: term {term!r} repeats a label (a label may appear once "
                             f"per operand in kiln)")
        widths.append(width)
    widest = max(widths, default=0)
    ell = "".join(chr(0x2460 + i) for i in range(widest))  # never a letter of an equation
    return [term.replace("...", ell[widest - w:]) for term, w in zip(terms, widths)], ell


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None):
    """The Kaiser window (float64 unless dtype says otherwise, as MindSpore 2.10 returns)."""
    n = int_arg(window_length, "kaiser_window", "window_length")
    if n < 0:
        raise ValueError(f"kaiser_window: window_length must be non-negative, got {n}")
    values = np.kaiser(n + 1, float(beta))[:-1] if periodic and n > 1 else np.kaiser(n, beta)
    dtype = mstype.to_dtype(dtype or mstype.float64)
    return call("cast", (tensor_of(np.asarray(values, np.float64)),), (dtype_attr(dtype),))


def clip_by_value(x, clip_value_min=None, clip_value_max=None):
    """x limited to [clip_value_min, clip_value_max] (numbers or tensors); a list or tuple of
    tensors gives a list of the clipped tensors."""
    from kiln.ops.function.elementwise import clamp  # noqa: PLC0415
    if isinstance(x, (list, tuple)):
        return [clamp(t, clip_value_min, clip_value_max) for t in x]
    return clamp(x, clip_value_min, clip_value_max)


def adjoint(x):
    """The conjugate transpose of the last two axes (kiln's tensors are real)."""
    _tensor("adjoint", x, "x")
    n = len(x.shape)
    return transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def conj(input):  # noqa: A002
    """The complex conjugate: a real tensor itself (a new tensor)."""
    return call("identity", (_tensor("conj", input),))


def is_nonzero(input):  # noqa: A002
    """Whether a one-element tensor is nonzero (a Python bool)."""
    x = _tensor("is_nonzero", input)
    if x.size != 1:
        raise RuntimeError(f"is_nonzero: input must hold one element, got shape "
                           f"{tuple(x.shape)}")
    return bool(x.asnumpy().reshape(()) != 0)


def eps(x):
    """A tensor like x filled with its float dtype's machine epsilon."""
    _tensor("eps", x, "x")
    if not x.dtype.is_floating_point:
        raise TypeError(f"eps: x must be a float Tensor, got {x.dtype}")
    value = 2.0 ** -7 if x.dtype == mstype.bfloat16 else \
        float(np.finfo(mstype.dtype_to_nptype(x.dtype)).eps)
    return call("cast", (tensor_of(np.full(tuple(x.shape), value)),), (dtype_attr(x.dtype),))


def assign_add(variable, value):
    """variable += value in place (a Parameter), returning it."""
    from kiln.ops.function.array import assign  # noqa: PLC0415
    return assign(variable, call("add", (variable, value)))


def assign_sub(variable, value):
    """variable -= value in place (a Parameter), returning it."""
    from kiln.ops.function.array import assign  # noqa: PLC0415
    return assign(variable, call("sub", (variable, value)))
