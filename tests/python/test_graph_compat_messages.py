"""Mistakes in compiled code raise MindSpore's exception type with a message that names the
call, the value and what it should be (issue #12 item 4): isinstance's second argument,
max/min, enumerate, list.pop/insert, list/tuple.index, shifts of Python numbers, len and
iteration of a 0-d tensor, missing attributes of constants and namedtuples, and a container
that holds itself. Also: a namedtuple argument keeps its class inside the graph."""

from collections import namedtuple

import numpy as np
import pytest
from graph_check import in_three_modes

import kiln as ms
from kiln import Tensor, nn


def _compiled(fn, *args):
    """fn compiled by ms.jit and as a Cell's construct under GRAPH_MODE."""
    return [(mode, run) for mode, run in in_three_modes(fn, *args) if mode != "pynative"]


def _raises_compiled(error, fn, *args, match):
    for mode, run in _compiled(fn, *args):
        with pytest.raises(error, match=match):
            run()
        assert mode in ("jit", "cell")


def isinstance_list(x):
    return isinstance(x, [int, float])


def isinstance_tensor(x):
    return isinstance(x, x)


def test_isinstance_second_argument_is_named():
    _raises_compiled(TypeError, isinstance_list, 1,
                     match=r"arg 2 must be a type or tuple of types .*got list \[<class 'int'>")
    _raises_compiled(TypeError, isinstance_tensor, Tensor(1),
                     match="arg 2 must be a type or tuple of types .*got Tensor")


def isinstance_ok(x):
    return isinstance(x, (int, (float, Tensor))), isinstance(x, int | float)


def test_isinstance_with_nested_tuples_and_unions_still_works():
    for _, run in _compiled(isinstance_ok, Tensor(1)):
        assert run() == (True, False)


def max_empty():
    return max(())


def min_of_0d():
    return min(Tensor(1))


def max_nested():
    return max([[Tensor(1.0), Tensor(2.0)]])


def max_default():
    return max((), default=3), min([4, 2, 7])


def test_max_min_mistakes():
    _raises_compiled(ValueError, max_empty, match=r"max\(\) arg is an empty sequence: ")
    _raises_compiled(TypeError, min_of_0d, match="Cannot iterate over a scalar tensor")
    _raises_compiled(TypeError, max_nested, match="lists or tuples that hold tensors")
    for _, run in _compiled(max_default):
        assert run() == (3, 2)


def enumerate_int():
    return tuple(enumerate(5))


def enumerate_float_start(x):
    return tuple(enumerate((x, x), start=1.5))


def enumerate_ok(x):
    return tuple([i for i, _ in enumerate((x, x, x), 2)])


def test_enumerate_arguments():
    _raises_compiled(TypeError, enumerate_int, match="'first input' should be tuple or list or "
                     "tensor, but got <class 'int'>: the value 5 cannot be iterated")
    _raises_compiled(TypeError, enumerate_float_start, Tensor(1),
                     match="'start' should be a const int number, but got 1.5")
    for _, run in _compiled(enumerate_ok, Tensor(1)):
        assert run() == (2, 3, 4)


def pop_out_of_range():
    x = [1, 2, 3]
    return x.pop(3)


def pop_empty():
    return [].pop()


def pop_float():
    x = [1, 2, 3]
    return x.pop(1.0)


def insert_float():
    x = [1, 2]
    x.insert(0.5, 9)
    return x


def list_methods_ok():
    x = [1, 2, 3]
    x.insert(-1, 7)
    return x.pop(-2), x.pop(), x, (4, 5, 6).index(6), {"a": 1}.pop("a")


def test_list_pop_and_insert_check_the_index():
    _raises_compiled(IndexError, pop_out_of_range,
                     match=r"list.pop\(3\): The pop index out of range for a list of 3 items "
                           r"\(valid: -3 to 2\)")
    _raises_compiled(IndexError, pop_empty, match="out of range for an empty list")
    _raises_compiled(TypeError, pop_float, match="Integer argument expected, but got FP32Imm "
                     "type value: 1.0")
    _raises_compiled(TypeError, insert_float, match=r"list.insert\(\) index")
    for _, run in _compiled(list_methods_ok):
        assert run() == (7, 3, [1, 2], 2, 1)


def tuple_index_missing():
    return (1, 2, 3).index(5)


def test_index_names_the_missing_value():
    _raises_compiled(ValueError, tuple_index_missing,
                     match=r"tuple.index\(5\): 5 is not in the tuple \(1, 2, 3\)")


def shift_floats():
    a, b = 10.0, 1.0
    return a >> b


def shift_negative(x, y):
    return x << y


def shifts_ok(x):
    a = 3
    return a << 2, 64 >> a, x << 1, True << 1


def test_shifts_of_python_numbers():
    _raises_compiled(TypeError, shift_floats, match="only integer types are supported, but got "
                     "float and float")
    _raises_compiled(ValueError, shift_negative, 16, -2,
                     match="shift count must be a non-negative integer, got -2")
    for _, run in _compiled(shifts_ok, Tensor(np.array([1, 2], np.int32))):
        got = run()
        assert got[:2] == (12, 8) and got[3] == 2
        np.testing.assert_array_equal(got[2].asnumpy(), [2, 4])


def length(x):
    return len(x)


def iterate(x):
    return tuple([v for v in x])


def test_len_and_iteration_of_a_0d_tensor_in_every_mode():
    for _, run in in_three_modes(length, Tensor(np.array(100))):
        with pytest.raises(TypeError, match="Not support len of a 0-D tensor. .*x.size"):
            run()
    for mode, run in in_three_modes(iterate, Tensor(np.array(100))):
        with pytest.raises(TypeError, match="Cannot iterate over a scalar tensor"):
            run()
        assert mode


Pair = namedtuple("Pair", ["left", "right"])


def shape_of(x):
    return x.shape


def missing_field(p):
    return p.middle


def add_fields(p):
    return p.left + p.right, type(p).__name__


def test_missing_attributes_of_constants_and_namedtuples():
    _raises_compiled(AttributeError, shape_of, 1,
                     match="'Int' object has no attribute 'shape': the Python int 1")
    _raises_compiled(AttributeError, missing_field, Pair(1, 2),
                     match="'NamedTuple' object has no attribute 'middle': .*Pair namedtuple, "
                           "whose fields are left, right")


def test_a_namedtuple_argument_keeps_its_class():
    p = Pair(Tensor(np.array([1.0], np.float32)), Tensor(np.array([2.0], np.float32)))
    for _, run in _compiled(add_fields, p):
        total, name = run()
        assert name == "Pair"
        np.testing.assert_array_equal(total.asnumpy(), [3.0])


class First(nn.Cell):
    def construct(self, x):
        return x[0]


def test_a_container_holding_itself_is_refused():
    x = [1]
    x.append(x)
    with pytest.raises(RecursionError, match="contains itself. Detect recursion when converting"):
        ms.jit(First().construct)(x)


def loop_over_range(x, n):
    out = x
    for _ in range(n):
        out = out + 1
    return out


def test_range_of_a_tensor_needs_one_integer():
    x = Tensor(np.zeros(2, np.float32))
    _raises_compiled(TypeError, loop_over_range, x, Tensor(np.ones((2, 3), np.float32)),
                     match=r"the 0th input should be a int scalar .*Float32 tensor of shape "
                           r"\(2, 3\)(.|\n)*for _ in range\(n\)")
    _raises_compiled(TypeError, loop_over_range, x, Tensor(np.array(2.0, np.float32)),
                     match="0th input should be a int scalar")
    for _, run in _compiled(loop_over_range, x, Tensor(np.array(3, np.int32))):
        np.testing.assert_array_equal(run().asnumpy(), [3.0, 3.0])
