"""Random draws built on the registry's uniform_real and standard_normal (so set_seed makes them
reproducible and compiled code draws anew each call): *_like, randint, randperm, normal,
bernoulli, multinomial, laplace, shuffle."""
from kiln.common import dtype as mstype
from kiln.ops import _indexing
from kiln.ops._core import call, dtype_attr, int_arg, is_tensor, shape_attr
from kiln.ops.function import array

__all__ = ["rand_like", "randn_like", "randint", "randint_like", "randperm", "normal",
           "bernoulli", "multinomial", "laplace", "standard_laplace", "shuffle"]


def _seed(op, seed):
    return None if seed is None else int_arg(seed, op, "seed")


def _uniform(op, shape, seed, dtype=mstype.float32, low=0.0, high=1.0, like=None):
    """Uniform draws of `shape`; `like` (a tensor of that shape) gives it as a graph runs where
    it has a dimension of any size (-1)."""
    return call("uniform_real", _like_where_needed(shape, like),
                (tuple(shape), dtype_attr(dtype), low, high, _seed(op, seed)))


def _normal(op, shape, seed, dtype=mstype.float32, like=None):
    return call("standard_normal", _like_where_needed(shape, like),
                (tuple(shape), dtype_attr(dtype), 0.0, 1.0, _seed(op, seed)))


def _like_where_needed(shape, like):
    return (like,) if like is not None and min(tuple(shape), default=0) < 0 else ()


def _tensor(op, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def rand_like(input, seed=None, *, dtype=None):  # noqa: A002
    """Uniform [0, 1) samples of input's shape (and dtype unless given)."""
    x = _tensor("rand_like", input)
    return _uniform("rand_like", x.shape, seed, dtype or x.dtype, like=x)


def randn_like(input, seed=None, *, dtype=None):  # noqa: A002
    x = _tensor("randn_like", input)
    return _normal("randn_like", x.shape, seed, dtype or x.dtype, like=x)


def _ints_in(op, low, high, shape, seed, dtype):
    low, high = int_arg(low, op, "low"), int_arg(high, op, "high")
    if high <= low:
        raise ValueError(f"{op}: high ({high}) must be greater than low ({low})")
    u = _uniform(op, shape, seed, mstype.float64)
    drawn = call("floor", (call("add", (call("mul", (u, float(high - low))), float(low))),))
    drawn = call("minimum", (drawn, float(high - 1)))  # u just below 1 may round up
    return call("cast", (drawn,), (dtype_attr(dtype),))


def randint(low, high, size, seed=None, *, dtype=None):
    """Integers drawn uniformly from [low, high); int64 by default."""
    return _ints_in("randint", low, high, shape_attr(size, "randint", "size"), seed,
                    dtype or mstype.int64)


def randint_like(input, low, high, seed=None, *, dtype=None):  # noqa: A002
    x = _tensor("randint_like", input)
    dtype = mstype.to_dtype(dtype) if dtype is not None else x.dtype
    if dtype.is_floating_point or dtype == mstype.bool_:
        raise ValueError(f"randint_like: the dtype must be an int type, got {dtype}")
    return _ints_in("randint_like", low, high, x.shape, seed, dtype)


def randperm(n, seed=0, offset=0, dtype=mstype.int64):
    """A random permutation of 0..n-1 (the order of n uniform draws)."""
    n = int_arg(n, "randperm", "n")
    if n < 0:
        raise ValueError(f"randperm: n must be non-negative, got {n}")
    keys = _uniform("randperm", (n,), seed or None)
    order = call("argsort", (keys,), (0, False))
    return call("cast", (order,), (dtype_attr(dtype),))


def normal(shape, mean, stddev, seed=None):
    """mean + stddev * N(0, 1) samples; shape broadcast with mean's and stddev's."""
    like = array._shaped_as(tuple(shape) if isinstance(shape, (tuple, list)) else (shape,),
                            "normal", "shape")  # sizes read off dimensions of any size
    z = _normal("normal", shape_attr(shape, "normal"), seed, like=like)
    return call("add", (call("mul", (z, stddev)), mean))


def bernoulli(input, p=0.5, seed=None):  # noqa: A002
    """1 with probability p (a number or a tensor like input), else 0, in input's dtype."""
    x = _tensor("bernoulli", input)
    u = _uniform("bernoulli", x.shape, seed, like=x)
    return call("cast", (call("less", (u, p)),), (dtype_attr(x.dtype),))


def multinomial(input, num_samples, replacement=True, seed=None):  # noqa: A002
    """num_samples category indices per row of (unnormalized) probabilities, int32; without
    replacement by Gumbel top-k over log-probabilities."""
    probs = _tensor("multinomial", input)
    k = int_arg(num_samples, "multinomial", "num_samples")
    rows = probs if len(probs.shape) == 2 else call("reshape", (probs,), ((1, -1),))
    n, c = rows.shape
    if not replacement:
        if k > c:
            raise ValueError(f"multinomial: {k} samples without replacement from {c} "
                             f"categories")
        u = _uniform("multinomial", (n, c), seed, mstype.float32, 1e-20, 1.0)
        gumbel = call("neg", (call("log", (call("neg", (call("log", (u,)),)),)),))
        keys = call("add", (call("log", (rows,)), gumbel))
        idx = call("argsort", (keys,), (1, True))
        idx = call("strided_slice", (idx,), ((0, 0), (n, k), (1, 1)))
    else:
        cdf = call("cumsum", (rows,), (1, False))
        total = call("strided_slice", (cdf,), ((0, c - 1), (n, c), (1, 1)))
        u = call("mul", (_uniform("multinomial", (n, k), seed), total))  # (n, k)
        below = call("less_equal", (call("expand_dims", (cdf,), (1,)),
                                    call("expand_dims", (u,), (2,))))  # (n, k, c)
        idx = call("minimum", (call("reduce_sum", (below,), ((2,), False, dtype_attr(
            mstype.int64))), c - 1))
    idx = call("cast", (idx,), (dtype_attr(mstype.int32),))
    return idx if len(probs.shape) == 2 else call("reshape", (idx,), ((k,),))


def laplace(shape, mean, lambda_param, seed=None):
    """Laplace samples: mean - b * sign(u) * log(1 - 2|u|), u uniform in (-1/2, 1/2)."""
    u = _uniform("laplace", shape_attr(shape, "laplace"), seed, mstype.float32, -0.5, 0.5)
    mag = call("log", (call("sub", (1.0, call("mul", (call("abs", (u,)), 2.0)))),))
    draw = call("neg", (call("mul", (call("sign", (u,)), mag)),))
    return call("add", (call("mul", (draw, lambda_param)), mean))


def standard_laplace(shape, seed=None):
    return laplace(shape_attr(shape, "standard_laplace", "shape"), 0.0, 1.0,
                   _seed("standard_laplace", seed))


def shuffle(x, seed=None):
    """x with its first axis in a random order."""
    _tensor("shuffle", x, "x")
    if not x.shape:
        return call("identity", (x,))
    keys = _uniform("shuffle", (x.shape[0],), seed, like=_indexing.filled_along(x, 0, 0)
                    if x.shape[0] < 0 else None)
    return call("gather", (x, call("argsort", (keys,), (0, False))), (0, 0))

