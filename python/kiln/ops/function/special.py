"""Special functions with their own kernels (csrc/ops/special.cc): the Bessel functions i0..y1
and their scaled forms, polygamma, the Hurwitz zeta function and the regularized incomplete
gamma functions."""
from kiln.common import dtype as mstype
from kiln.ops._core import call, is_tensor

_BESSEL = "i0 i0e i1 i1e j0 j1 k0 k0e k1 k1e y0 y1".split()
__all__ = ["bessel_" + n for n in _BESSEL] + ["i0", "polygamma", "zeta", "igamma", "igammac"]


def _float_tensor(op, x, name):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: {name} must be a float16, float32 or float64 Tensor, got "
                        f"{x.dtype}")
    return x


def _bessel(suffix):
    op = "bessel_" + suffix

    def fn(x):
        return call(op, (_float_tensor(op, x, "x"),))

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"The Bessel function {suffix} of each element (float16/32/64)."
    return fn


for _n in _BESSEL:
    globals()["bessel_" + _n] = _bessel(_n)


def i0(input):  # noqa: A002 - MindSpore's name
    """bessel_i0 (MindSpore's alias)."""
    return bessel_i0(input)  # noqa: F821 - defined by the loop above


def polygamma(n, input):  # noqa: A002
    """The n-th derivative of digamma at each element; n is a 0-d integer Tensor."""
    if not is_tensor(n):
        raise TypeError(f"polygamma: n must be a Tensor, got {type(n).__name__}")
    if n.dtype not in mstype.int_type + mstype.uint_type:
        raise TypeError(f"polygamma: n must be an integer Tensor, got {n.dtype}")
    if n.shape:
        raise ValueError(f"polygamma: n must be a 0-dim Tensor, but got rank: {len(n.shape)}")
    return call("polygamma", (n, _float_tensor("polygamma", input, "input")))


def _pair(op, a, b, names):
    _float_tensor(op, a, names[0])
    _float_tensor(op, b, names[1])
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: {names[0]} and {names[1]} must have the same dtype, got "
                        f"{a.dtype} and {b.dtype}")
    return call(op, (a, b))


def zeta(input, other):  # noqa: A002
    """The Hurwitz zeta function sum_k (k + other)^-input."""
    return _pair("zeta", input, other, ("input", "other"))


def igamma(input, other):  # noqa: A002
    """P(input, other): the regularized lower incomplete gamma function."""
    return _pair("igamma", input, other, ("input", "other"))


def igammac(input, other):  # noqa: A002
    """Q(input, other) = 1 - P(input, other): the regularized upper incomplete gamma function."""
    return _pair("igammac", input, other, ("input", "other"))
