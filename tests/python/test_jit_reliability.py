"""Graph mode reliability: user exception classes, linear compile time, deep recursion."""
import gc
import sys
import threading
import time

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
        with pytest.raises(MyError) as info:  # Python's arguments; the tensor's as text
            fn(T([1.0, 2.0]))
        assert info.value.args[0] == "sum is positive:" and float(info.value.args[1]) == 3.0


def test_user_exceptions_decided_at_compile_time_keep_their_class():
    fn = ms.jit(raise_decided_at_compile_time)
    with pytest.raises(TwoArgError) as info:
        fn(T([1.0]), True)
    assert info.value.args == ("flag set", 7)
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


# ---- unrolled loops compile in linear time ----
def unrolled(x, n):
    y = x
    for _ in range(n):
        y = y * 0.5 + 1.0
    return y


def unrolled_matmul(x, w, n):
    y = x
    for _ in range(n):
        y = (y @ w) * 0.5 + 1.0
    return y


def _compile_seconds(fn, *args):
    gc.collect()
    gc.disable()  # a collection's cost depends on the whole test session's heap, not on fn
    try:
        start = time.perf_counter()
        fn(*args)
        return time.perf_counter() - start
    finally:
        gc.enable()


@pytest.mark.parametrize("case", ["elementwise", "matmul"])
def test_an_unrolled_loop_compiles_in_linear_time(case):
    x, w = T([[1.0, 2.0]]), T(np.eye(2) * 0.5)

    def compile_steps(n):
        if case == "elementwise":
            return min(_compile_seconds(ms.jit(unrolled), x, n) for _ in range(3))
        return min(_compile_seconds(ms.jit(unrolled_matmul), x, w, n) for _ in range(3))

    compile_steps(50)  # warm up imports and caches
    small, large = compile_steps(1000), compile_steps(4000)
    # 4x the steps: ~4x the time when linear, ~16x when quadratic (it was 30x and more)
    assert large / small < 8, f"1000 steps: {small:.3f}s, 4000 steps: {large:.3f}s"


def test_an_unrolled_loop_result_is_right():
    expected = np.array([1.0, 2.0], np.float32)
    for _ in range(300):
        expected = expected * 0.5 + 1.0
    np.testing.assert_allclose(ms.jit(unrolled)(T([1.0, 2.0]), 300).asnumpy(), expected)


def test_the_fused_elementwise_names_stay_unique_across_many_groups():
    fn = ms.jit(unrolled_matmul)
    x, w = T([[1.0, 2.0]]), T(np.eye(2) * 0.5)
    expected = x.asnumpy()
    for _ in range(40):
        expected = (expected @ w.asnumpy()) * 0.5 + 1.0
    np.testing.assert_allclose(fn(x, w, 40).asnumpy(), expected, rtol=1e-6)
    text = fn.graph_text()
    names = [line.split()[1] for line in text.splitlines() if line.startswith("func @")]
    assert len(names) == len(set(names)) and len(names) > 40


# ---- deep recursion is a RecursionError, never a crash ----
def count_down(x, n):
    if n.sum() > 0:  # a tensor condition: recursion never stops while compiling
        return count_down(x * 2.0, n - 1)
    return x


def forever(x, k):
    return forever(x + 1.0, k + 1)


def _expect_recursion_error(fn, *args):
    with pytest.raises(RecursionError, match="Graph mode: calls nest") as info:
        ms.jit(fn)(*args)
    message = str(info.value)
    assert "constant stopping condition" in message and "line" in message
    assert len(message) < 1000  # located once, not once per level on the way out


@pytest.mark.parametrize("fn, args", [(count_down, (T([1.0]), T(3, np.int32))),
                                      (forever, (T([1.0]), 0))])
def test_unbounded_recursion_is_a_recursion_error(fn, args):
    _expect_recursion_error(fn, *args)


def test_unbounded_recursion_under_a_high_recursion_limit_in_a_thread():
    errors = []

    def run():
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(100_000)
        try:
            _expect_recursion_error(forever, T([1.0]), 0)
            _expect_recursion_error(count_down, T([1.0]), T(3, np.int32))
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
        finally:
            sys.setrecursionlimit(old)

    t = threading.Thread(target=run)
    t.start()
    t.join(timeout=300)
    assert errors == []


def test_graph_raise_is_a_runtime_error_for_direct_executable_runs():
    assert issubclass(_C.GraphRaise, RuntimeError)


def test_max_call_depth_bounds_compiled_recursion_and_names_the_function():
    ms.set_context(max_call_depth=30)
    try:
        with pytest.raises(RecursionError, match=r"more than 30 deep in forever"):
            ms.jit(forever)(T([1.0]), 0)
    finally:
        ms.set_context(max_call_depth=1000)
