"""Graph-mode programs, each run in both modes and compared (STRICT syntax, SPEC §2)."""

import numpy as np
import pytest
from graph_check import assert_same_in_both_modes as both

import kiln as ms
from kiln import Tensor

RNG = np.random.default_rng(0)


def t(*shape, dtype=np.float32):
    return Tensor(RNG.standard_normal(shape).astype(dtype))


# ---- straight-line code, numbers and Python semantics ----
def arith(x, y):
    a = x * y + 2.0
    b = a / (y * y + 1.0) - x**2
    return -b, abs(b), b // 1.0, b % 2.0


def python_numbers(x):
    k = 16 / 4  # a float, as in Python
    j = 7 // 2 + 2**3
    return x * k + j, k, j


def shapes_are_static(x):
    n, m = x.shape
    return x.reshape(m, n) * x.ndim, len(x), x.size


def tuple_unpack_and_starred(x):
    a, *rest = (x, x + 1, x + 2)
    first, (second, third) = a, (rest[0], rest[1])
    return first + second + third, len(rest)


def aug_assign(x):
    y = x
    y += 1.0
    y *= 2.0
    y -= x
    return y


def comparisons_and_logic(x, y):
    return (x > y) & (x < 1.0), (x >= 0.0) | ~(y <= 0.0), x == y, x != y


def method_calls(x):
    return x.sum(), x.mean(axis=1), x.max(axis=0), x.argmax(axis=1), x.T, x.exp().log()


def indexing(x):
    return x[0], x[:, 1], x[::2, 1:], x[..., None], x[-1, -2]


def index_assignment(x):
    y = x + 0.0
    y[0] = 5.0
    y[1, 1:] = y[0, 1:] * 2.0
    return y


def builtins_in_code(x):
    pieces = [x * i for i in range(3)]
    total = sum(pieces[1:], pieces[0])
    sizes = {k: v.shape for k, v in zip("abc", pieces)}
    flags = (
        isinstance(x, Tensor),
        isinstance(3, int),
        hasattr(x, "shape"),
        type(len(pieces)).__name__ == "int",
    )
    return (
        total,
        sizes["b"],
        flags,
        max(3, 7),
        min([4, 2]),
        round(2.6),
        abs(-3),
        any([0, 1]),
        all([]),
    )


def closures_and_lambdas(x):
    scale = 3.0

    def inner(v, bias=1.0):
        return v * scale + bias

    square = lambda v: v * v  # noqa: E731
    return inner(x), inner(x, bias=0.0), square(x), list(map(square, (x, x + 1)))[1]


def comprehensions(x):
    doubled = [x * 2.0 for _ in range(2)]
    by_name = {name: x + i for i, name in enumerate(["p", "q"])}
    evens = [i for i in range(10) if i % 2 == 0]
    return doubled[1], by_name["q"], len(evens)


def constant_branches(x, flag, mode):
    if flag:
        x = x + 1.0
    elif mode == "double":
        x = x * 2.0
    else:
        x = x - 1.0
    return x if mode != "neg" else -x


def unrolled_for_loops(x, steps):
    out = x
    for i in range(steps):
        out = out + i
    for i, v in enumerate((1.0, 2.0, 3.0)):
        out = out * v + i
    for a, b in zip([1, 2], [3.0, 4.0]):
        out = out + a * b
    return out


def break_and_continue_when_unrolled(x):
    out = x
    for i in range(10):
        if i == 2:
            continue
        if i == 5:
            break
        out = out + i
    return out


# ---- tensor-dependent control flow ----
def tensor_if(x):
    if x.sum() > 0:
        y = x * 2.0
    else:
        y = -x
    return y


def tensor_if_elif(x):
    s = x.mean()
    if s > 1.0:
        y = x + 10.0
    elif s > -1.0:
        y = x * 3.0
    else:
        y = x - 10.0
    return y


def tensor_if_without_else(x):
    y = x
    if x[0, 0] > 0:
        y = y * 100.0
    return y


def tensor_if_expression(x):
    return x * 2.0 if x.sum() > 0 else x * 3.0


def early_return(x):
    if x.sum() > 0:
        return x + 1.0
    y = x * 5.0
    return y - 1.0


def tensor_while(x, n):
    i = 0
    acc = x
    while i < n:
        acc = acc * 1.5 + 1.0
        i = i + 1
    return acc, i


def tensor_while_on_values(x):
    while x.sum() < 100.0:
        x = x * 2.0 + 1.0
    return x


def for_over_tensor_range(x, n):
    acc = x * 0.0
    for i in range(n):
        acc = acc + x * i
    return acc


def nested_control_flow(x, n):
    i = 0
    while i < n:
        if (x.sum() + i) > 0:
            x = x - 1.0
        else:
            x = x + 2.0
        i += 1
    return x


def print_at_run_time(x):
    print("value:", x)
    return x + 1.0


PROGRAMS = [
    (arith, lambda: (t(3, 4), t(3, 4))),
    (python_numbers, lambda: (t(2, 2),)),
    (shapes_are_static, lambda: (t(2, 3),)),
    (tuple_unpack_and_starred, lambda: (t(4),)),
    (aug_assign, lambda: (t(3),)),
    (comparisons_and_logic, lambda: (t(5), t(5))),
    (method_calls, lambda: (t(3, 4),)),
    (indexing, lambda: (t(4, 5),)),
    (index_assignment, lambda: (t(3, 4),)),
    (builtins_in_code, lambda: (t(2),)),
    (closures_and_lambdas, lambda: (t(3),)),
    (comprehensions, lambda: (t(2),)),
    (constant_branches, lambda: (t(2), True, "x")),
    (constant_branches, lambda: (t(2), False, "double")),
    (constant_branches, lambda: (t(2), False, "neg")),
    (unrolled_for_loops, lambda: (t(3), 4)),
    (break_and_continue_when_unrolled, lambda: (t(2),)),
    (tensor_if, lambda: (t(3, 3),)),
    (tensor_if, lambda: (Tensor(np.full((3, 3), -1.0, np.float32)),)),
    (tensor_if_elif, lambda: (Tensor(np.full(4, 2.0, np.float32)),)),
    (tensor_if_elif, lambda: (Tensor(np.full(4, 0.0, np.float32)),)),
    (tensor_if_elif, lambda: (Tensor(np.full(4, -2.0, np.float32)),)),
    (tensor_if_without_else, lambda: (t(2, 2),)),
    (tensor_if_expression, lambda: (t(3),)),
    (early_return, lambda: (Tensor(np.ones(3, np.float32)),)),
    (early_return, lambda: (Tensor(-np.ones(3, np.float32)),)),
    (tensor_while, lambda: (t(2), Tensor(np.array(4, np.int64)))),
    (tensor_while, lambda: (t(2), Tensor(np.array(0, np.int64)))),
    (tensor_while_on_values, lambda: (Tensor(np.ones(3, np.float32)),)),
    (for_over_tensor_range, lambda: (t(3), Tensor(np.array(5, np.int64)))),
    (nested_control_flow, lambda: (t(4), Tensor(np.array(6, np.int64)))),
]


@pytest.mark.parametrize(
    "fn,make_args", PROGRAMS, ids=[f"{p[0].__name__}-{i}" for i, p in enumerate(PROGRAMS)]
)
def test_program_matches_pynative(fn, make_args):
    both(fn, *make_args())


def test_print_acts_at_run_time_with_values(capfd):
    x = Tensor(np.array([1.0, 2.0], np.float32))
    jitted = ms.jit(print_at_run_time)
    jitted(x)
    jitted(x * 2.0)
    out = capfd.readouterr().out
    assert "value: [1. 2.]" in out and "value: [2. 4.]" in out


def test_tensor_condition_is_not_frozen_to_the_first_path():
    jitted = ms.jit(tensor_if)
    pos, neg = Tensor(np.ones(2, np.float32)), Tensor(-np.ones(2, np.float32))
    np.testing.assert_array_equal(jitted(pos).asnumpy(), [2.0, 2.0])
    np.testing.assert_array_equal(jitted(neg).asnumpy(), [1.0, 1.0])
    assert ms.get_jit_stats()["compiles"] >= 1


def test_raise_acts_at_run_time():
    @ms.jit
    def checked(x):
        if x.sum() > 10.0:
            raise ValueError("too large:", x)
        return x * 2.0

    np.testing.assert_array_equal(checked(Tensor([1.0])).asnumpy(), [2.0])
    with pytest.raises(ValueError, match="too large"):
        checked(Tensor([20.0]))


# ---- exits from loops decided at run time ----
def break_on_tensor_condition(x, n):
    i = 0
    while i < n:
        x = x * 2.0
        if x.sum() > 50.0:
            break
        i += 1
    return x, i


def continue_on_tensor_condition(x, n):
    total = x * 0.0
    for i in range(n):
        if (x.sum() + i) % 2.0 > 0.5:
            continue
        total = total + x * i
    return total


def break_in_unrolled_loop(x):
    acc = x
    for _i in range(6):
        acc = acc + 1.0
        if acc.sum() > 12.0:
            break
        acc = acc * 1.5
    return acc


EXIT_PROGRAMS = [
    (break_on_tensor_condition, lambda: (Tensor(np.ones(3, np.float32)), Tensor(np.array(10)))),
    (
        break_on_tensor_condition,
        lambda: (Tensor(np.ones(3, np.float32) * 0.01), Tensor(np.array(3))),
    ),
    (
        continue_on_tensor_condition,
        lambda: (Tensor(np.array([0.5, 0.25], np.float32)), Tensor(np.array(6))),
    ),
    (break_in_unrolled_loop, lambda: (Tensor(np.ones(2, np.float32)),)),
    (break_in_unrolled_loop, lambda: (Tensor(np.full(2, 10.0, np.float32)),)),
]


@pytest.mark.parametrize(
    "fn,make_args", EXIT_PROGRAMS, ids=[f"{p[0].__name__}-{i}" for i, p in enumerate(EXIT_PROGRAMS)]
)
def test_loop_exits_match_pynative(fn, make_args):
    both(fn, *make_args())


# ---- return inside loops ----
def first_index_over(x, limit):
    i = 0
    while i < x.shape[0]:
        if x[i] > limit:
            return x[i] * 10.0, i
        i = i + 1
    return x[0] * 0.0, i


def search_unrolled(x):
    for k in range(4):
        if x.sum() > k:
            return x * k
    return -x


def countdown_return(x, n):
    for _i in range(n):
        x = x - 1.0
        if x.sum() < 0:
            return x * 100.0
    return x


RETURN_PROGRAMS = [
    (first_index_over, lambda: (Tensor(np.array([0.5, 2.0, 3.0], np.float32)), 1.0)),
    (first_index_over, lambda: (Tensor(np.array([0.5, 0.2, 0.3], np.float32)), 1.0)),
    (search_unrolled, lambda: (Tensor(np.array([0.5, 0.7], np.float32)),)),
    (search_unrolled, lambda: (Tensor(np.array([-3.0, 0.7], np.float32)),)),
    (countdown_return, lambda: (Tensor(np.array([2.5], np.float32)), Tensor(np.array(5)))),
    (countdown_return, lambda: (Tensor(np.array([9.5], np.float32)), Tensor(np.array(3)))),
]


@pytest.mark.parametrize(
    "fn,make_args",
    RETURN_PROGRAMS,
    ids=[f"{p[0].__name__}-{i}" for i, p in enumerate(RETURN_PROGRAMS)],
)
def test_return_inside_loops_matches_pynative(fn, make_args):
    both(fn, *make_args())


def print_with_braces(x):
    print("set {a}:", {"k": 1}, x)
    return x


def test_print_keeps_literal_braces(capfd):
    ms.jit(print_with_braces)(Tensor(np.array([1.5], np.float32)))
    assert "set {a}: {'k': 1} [1.5]" in capfd.readouterr().out
