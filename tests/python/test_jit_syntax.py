"""More STRICT-syntax programs, each compiled and compared with PyNative (SPEC §2)."""

import numpy as np
import pytest
from graph_check import assert_same_in_both_modes as both

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(11)


def t(*shape):
    return Tensor(RNG.standard_normal(shape).astype(np.float32))


def is_and_in(x, opt):
    extra = 0.0 if opt is None else opt
    names = ("a", "b")
    return x + extra + (1.0 if "a" in names else 0.0) + (2.0 if "z" not in names else 0.0)


def strings_and_fstrings(x, tag):
    label = f"{tag}-{x.shape[0]}"
    return x * len(label), label.upper()


def dict_iteration(x):
    weights = {"p": 1.0, "q": 2.0, "r": 3.0}
    total = x * 0.0
    for key, value in weights.items():
        if key != "q":
            total = total + x * value
    return total, sorted(weights)


def nested_comprehension(x):
    grid = [[x * (i + j) for j in range(2)] for i in range(3)]
    return grid[2][1], len(grid), [len(row) for row in grid]


def enumerate_zip_map_filter(x):
    out = x
    for i, (a, b, c) in enumerate(zip([1, 2], [3, 4], [5, 6]), start=1):
        out = out + i * (a + b + c)
    evens = list(filter(lambda v: v % 2 == 0, range(7)))
    squares = list(map(lambda v: v * v, evens))
    return out, squares


def builtin_conversions(x):
    return (
        x * int(3.7),
        x + float("2.5"),
        str(5),
        tuple([1, 2]),
        list(range(3)),
        dict(a=1),
        pow(2, 5),
        round(3.14159, 2),
        bool(0),
        abs(-2.5),
        max(1, 4, 2),
        min((5, 3)),
        sum([1, 2]),
    )


def slicing_python_sequences(x):
    seq = (x, x * 2.0, x * 3.0, x * 4.0)
    return seq[-1], seq[1:3], seq[::2][1], len(seq[:0])


def chained_comparisons(x):
    s = x.sum()
    if -1.0 < s < 1.0:
        return x * 10.0
    return x


def constant_chained(x, k):
    return x * (2.0 if 0 < k < 5 else 3.0)


def while_with_inner_unrolled_for(x, n):
    i = 0
    while i < n:
        for scale in (0.5, 2.0):
            x = x * scale + 0.1
        i = i + 1
    return x


def if_inside_for_inside_if(x, flag):
    if flag:
        for i in range(3):
            if x.mean() > i:
                x = x - 1.0
            else:
                x = x + 1.0
    return x


def closure_factory(x):
    def make_scaler(k):
        def scale(v):
            return v * k

        return scale

    double, triple = make_scaler(2.0), make_scaler(3.0)
    return double(x) + triple(x)


def lambda_defaults(x):
    f = lambda v, k=4.0: v * k  # noqa: E731
    return f(x), f(x, 0.5)


def starred_call(x, y):
    args = (x, y)
    kwargs = {"axis": 0}
    return ops.concat(list(args), **kwargs), ops.maximum(*args)


def nested_tuple_unpack(x):
    (a, b), c = (x, x + 1.0), x + 2.0
    first, *middle, last = [a, b, c, x]
    return first + last, len(middle)


def getattr_and_type(x):
    shape = x.shape
    kind = type(x.shape[0]).__name__
    return x * shape[0], kind, hasattr(x, "no_such_attribute")


def assert_on_tensor(x):
    assert x.shape[0] == 3, "need three rows"
    assert (x * x).sum() >= 0
    return x + 1.0


def elif_chain_constants(x, mode):
    if mode == 0:
        y = x
    elif mode == 1:
        y = x * 2.0
    elif mode == 2:
        y = x * 3.0
    else:
        y = -x
    return y


def tensor_not_and_or(x, y):
    a = x.sum() > 0
    b = y.sum() > 0
    if not a or b:
        return x + y
    return x - y


def numeric_edge_cases(x):
    return x / 4, 16 / 4, 7 // 2, -7 // 2, -7 % 3, 2**-1, x**0.5 if False else x * 1.0


def augmented_on_containers(x):
    parts = [x]
    parts += [x * 2.0]
    counts = {"n": 1}
    counts["n"] += 2
    return parts[1], counts["n"]


def tensor_methods_chain(x):
    return x.reshape(2, 3).transpose().sum(axis=0).exp().mean(), x.abs().max(), x.argmin()


def walrus(x):
    if (n := x.shape[0]) > 1:
        return x * n
    return x


class SuperCell(nn.Cell):
    def __init__(self):
        super().__init__()
        self.bias = 1.5

    def construct(self, x):
        return x + self.bias


class DerivedCell(SuperCell):
    def construct(self, x):
        return super().construct(x) * 2.0


def uses_super(x):
    return DerivedCell()(x)


def int_tensor_math(x):
    i = ops.cast(x * 10.0, ms.int32)
    return i // 3, i % 3, i * 2 - 1, (i > 0).astype(ms.int32).sum()


CASES = [
    (is_and_in, lambda: (t(2), None)),
    (is_and_in, lambda: (t(2), 4.0)),
    (strings_and_fstrings, lambda: (t(3), "ab")),
    (dict_iteration, lambda: (t(2),)),
    (nested_comprehension, lambda: (t(2),)),
    (enumerate_zip_map_filter, lambda: (t(2),)),
    (builtin_conversions, lambda: (t(2),)),
    (slicing_python_sequences, lambda: (t(2),)),
    (chained_comparisons, lambda: (Tensor(np.array([0.1, 0.2], np.float32)),)),
    (chained_comparisons, lambda: (Tensor(np.array([3.0, 0.2], np.float32)),)),
    (constant_chained, lambda: (t(2), 3)),
    (constant_chained, lambda: (t(2), 7)),
    (while_with_inner_unrolled_for, lambda: (t(3), Tensor(np.array(3)))),
    (if_inside_for_inside_if, lambda: (t(4), True)),
    (if_inside_for_inside_if, lambda: (t(4), False)),
    (closure_factory, lambda: (t(3),)),
    (lambda_defaults, lambda: (t(3),)),
    (starred_call, lambda: (t(2), t(2))),
    (nested_tuple_unpack, lambda: (t(2),)),
    (getattr_and_type, lambda: (t(3),)),
    (assert_on_tensor, lambda: (t(3),)),
    (elif_chain_constants, lambda: (t(2), 0)),
    (elif_chain_constants, lambda: (t(2), 2)),
    (elif_chain_constants, lambda: (t(2), 9)),
    (tensor_not_and_or, lambda: (t(3), t(3))),
    (tensor_not_and_or, lambda: (Tensor(np.ones(2, np.float32)), Tensor(-np.ones(2, np.float32)))),
    (numeric_edge_cases, lambda: (t(2),)),
    (augmented_on_containers, lambda: (t(2),)),
    (tensor_methods_chain, lambda: (t(6),)),
    (walrus, lambda: (t(3),)),
    (uses_super, lambda: (t(2),)),
    (int_tensor_math, lambda: (t(5),)),
]


@pytest.mark.parametrize(
    "fn,make_args", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)]
)
def test_syntax_matches_pynative(fn, make_args):
    both(fn, *make_args(), rtol=1e-5, atol=1e-6)


def failing_assert(x):
    assert x.sum() > 100.0, "sum too small"
    return x


def test_tensor_assert_fails_at_run_time():
    f = ms.jit(failing_assert)
    with pytest.raises(AssertionError, match="sum too small"):
        f(t(3))
