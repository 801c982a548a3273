"""The same mistake raises the same exception type in PyNative, in ms.jit and in a Cell's
construct under GRAPH_MODE, and that type is MindSpore 2.10's (checked against it by hand:
docs/compatibility.md lists where kiln deliberately differs)."""

import numpy as np
import pytest
from graph_check import in_three_modes

import kiln as ms
from kiln import Tensor, ops

V3 = Tensor(np.array([1.0, -2.0, 3.0], np.float32))


def _modes(fn, *args):
    return in_three_modes(fn, *args)


def _raises_in_every_mode(error, fn, *args, match=None):
    for mode, run in _modes(fn, *args):
        with pytest.raises(error, match=match) as info:
            run()
        assert isinstance(info.value, error), mode


# ---- a tensor of several elements where one value is needed: ValueError ----
def if_on_vector(x):
    if x > 0:
        return x
    return -x


def while_on_vector(x):
    while x < 10:
        x = x + 1
    return x


def int_of_vector(x):
    return x * int(x)


def float_of_vector(x):
    return x * float(x)


def bool_of_vector(x):
    return x * bool(x)


def item_of_vector(x):
    return x * x.item()


@pytest.mark.parametrize("fn", [if_on_vector, while_on_vector, int_of_vector, float_of_vector,
                                bool_of_vector, item_of_vector])
def test_a_vector_where_one_value_is_needed_is_a_value_error(fn):
    _raises_in_every_mode(ValueError, fn, V3)


def test_the_condition_error_names_the_line_in_graph_mode():
    with pytest.raises(ValueError, match=r"ambiguous(.|\n)*line \d+(.|\n)*if x > 0"):
        ms.jit(if_on_vector)(V3)


# ---- an index of a type that cannot index: IndexError (a TypeError too, as kiln had it) ----
def float_index(x):
    return x[1.5]


def float_tensor_index(x):
    return x[Tensor(np.array([0.5], np.float32))]


def str_index(x):
    return x["a"]


def float_index_assignment(x):
    y = x * 1
    y[1.5] = 0.0
    return y


@pytest.mark.parametrize("fn", [float_index, float_tensor_index, str_index,
                                float_index_assignment])
def test_an_index_of_the_wrong_type_is_an_index_error(fn):
    _raises_in_every_mode(IndexError, fn, V3)
    _raises_in_every_mode(TypeError, fn, V3)


# ---- axes out of range: numpy's AxisError, a ValueError (MindSpore's) and an IndexError ----
def sum_axis(x):
    return x.sum(axis=3)


def softmax_axis(x):
    return ops.softmax(x, axis=2)


def concat_axis(x):
    return ops.concat((x, x), axis=1)


def squeeze_axis(x):
    return ops.squeeze(x, 4)


def gather_axis(x):
    return ops.gather(x, Tensor(np.array([0])), 2)


@pytest.mark.parametrize("fn", [sum_axis, softmax_axis, concat_axis, squeeze_axis, gather_axis])
def test_an_axis_out_of_range_is_numpy_s_axis_error(fn):
    _raises_in_every_mode(np.exceptions.AxisError, fn, V3, match="axis")
    _raises_in_every_mode(ValueError, fn, V3)
    _raises_in_every_mode(IndexError, fn, V3)


# ---- the branches of a tensor-dependent if must agree: TypeError naming the variable ----
def tensor_or_none(x):
    if x.sum() > 0:
        y = x
    else:
        y = None
    return y


def two_shapes(x):
    if x.sum() > 0:
        y = x
    else:
        y = x[:2]
    return y


def two_dtypes(x):
    if x.sum() > 0:
        y = x
    else:
        y = x.astype(ms.int32)
    return y


@pytest.mark.parametrize("fn, what", [(tensor_or_none, "NoneType"), (two_shapes, "shape"),
                                      (two_dtypes, "dtype")])
def test_branches_that_disagree_are_a_type_error_when_compiling(fn, what):
    for mode in ("jit", "cell"):
        run = dict(_modes(fn, V3))[mode]
        with pytest.raises(TypeError, match=r"branches give(.|\n)*for y(.|\n)*line \d+") as info:
            run()
        assert what in str(info.value), mode


# ---- other mistakes keep Python's (and MindSpore's) types in every mode ----
def add_mismatch(x):
    return x + x[:2]


def reshape_mismatch(x):
    return x.reshape((2, 2))


def bitwise_on_floats(x):
    return x & x


def missing_tensor_method(x):
    return x.no_such_method()


def undefined_name(x):
    return x + undefined_name_xyz  # noqa: F821


def tuple_index_out_of_range(x):
    return x * (1, 2)[3]


def element_out_of_range(x):
    return x[5]


def too_many_indices(x):
    return x[0, 0]


def missing_argument(x):
    def inner(a, b):
        return a + b

    return inner(x)


@pytest.mark.parametrize("fn, error", [
    (add_mismatch, ValueError),
    (reshape_mismatch, ValueError),
    (bitwise_on_floats, TypeError),
    (missing_tensor_method, AttributeError),
    (undefined_name, NameError),
    (tuple_index_out_of_range, IndexError),
    (element_out_of_range, IndexError),
    (too_many_indices, IndexError),
    (missing_argument, TypeError),
])
def test_common_mistakes_raise_the_same_type_in_every_mode(fn, error):
    _raises_in_every_mode(error, fn, V3)


def test_a_missing_attribute_names_tensor_in_graph_mode():
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'no_such_method'"):
        ms.jit(missing_tensor_method)(V3)


def deleting(x):
    y = x
    del y
    return x


def test_syntax_graph_mode_cannot_compile_is_a_runtime_error_as_in_mindspore():
    with pytest.raises(RuntimeError, match="del"):
        ms.jit(deleting)(V3)


def test_calling_a_jitted_function_with_too_few_arguments_is_a_type_error():
    with pytest.raises(TypeError, match="missing a required argument"):
        ms.jit(add_mismatch)()


def flatten_with_a_number_as_order(x):
    return x.flatten(order=123)


def flatten_with_an_unknown_order(x):
    return x.flatten(order="K")


def test_flatten_order_of_the_wrong_type_or_value():
    _raises_in_every_mode(TypeError, flatten_with_a_number_as_order, V3)
    _raises_in_every_mode(ValueError, flatten_with_an_unknown_order, V3)


def identity(x):
    return x


def test_a_container_holding_itself_is_a_runtime_error_not_a_deep_recursion():
    looped = [1, 2]
    looped.append(looped)
    held = {"a": 1}
    held["self"] = held
    for value in (looped, held, (1, looped)):
        for mode, run in _modes(identity, value):
            if mode == "pynative":
                continue  # plain Python: nothing converts the argument
            with pytest.raises(RuntimeError, match="contains itself") as info:  # MindSpore's
                run()
            assert isinstance(info.value, RecursionError), mode
