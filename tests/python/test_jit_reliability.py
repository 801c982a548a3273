"""Graph mode reliability: user exception classes, linear compile time, deep recursion."""

import numpy as np
import pytest

import kiln as ms
from kiln import _C


def T(v, dtype=np.float32):
    return ms.Tensor(np.array(v, dtype=dtype))


# ---- exceptions raised by compiled code keep their class ----
class MyError(Exception):
    pass


class TwoArgError(Exception):
    def __init__(self, what, code):
        super().__init__(what, code)


class ValueError(Exception):  # noqa: A001 - a user class shadowing the builtin's name
    pass


def raise_when_positive(x):
    if x.sum() > 0:  # decided when the graph runs
        raise MyError("sum is positive:", x.sum())
    return x * 2.0


def raise_decided_at_compile_time(x, flag):
    if flag:  # a Python value: decided while compiling
        raise TwoArgError("flag set", 7)
    raise ValueError("the shadowing class")


def test_a_user_exception_raised_at_run_time_keeps_its_class():
    fn = ms.jit(raise_when_positive)
    np.testing.assert_allclose(fn(T([-1.0, -2.0])).asnumpy(), [-2.0, -4.0])
    for _ in range(2):  # the checked path, then the one-call fast path
        with pytest.raises(MyError, match=r"sum is positive: 3"):
            fn(T([1.0, 2.0]))


def test_user_exceptions_decided_at_compile_time_keep_their_class():
    fn = ms.jit(raise_decided_at_compile_time)
    with pytest.raises(TwoArgError, match="flag set 7"):
        fn(T([1.0]), True)
    with pytest.raises(ValueError, match="the shadowing class") as info:
        fn(T([1.0]), False)
    assert type(info.value) is ValueError  # the user's class, not the builtin of that name


def test_raising_what_is_not_an_exception_is_a_type_error():
    def bad(x):
        raise 5  # noqa: B016 - the point of the test

    with pytest.raises(TypeError, match="exceptions must derive from BaseException"):
        ms.jit(bad)(T([1.0]))


def test_two_user_classes_with_one_name_stay_apart():
    def make():
        class Clash(Exception):
            pass
        return Clash

    first, second = make(), make()

    def pick(x, which):
        if x.sum() > 0:
            raise (first if which else second)("boom")
        return x

    for which, cls in ((True, first), (False, second)):
        with pytest.raises(cls) as info:
            ms.jit(pick)(T([1.0]), which)
        assert type(info.value) is cls


def test_graph_raise_is_a_runtime_error_for_direct_executable_runs():
    assert issubclass(_C.GraphRaise, RuntimeError)
