"""Boolean-mask assignment y[mask] = v and y[mask] reads: NumPy's results in PyNative and
compiled, where the mask's count of True elements is only known when the graph runs."""

import numpy as np
import pytest
from graph_check import assert_same_in_both_modes

import kiln as ms

Y = np.arange(6, dtype=np.float32).reshape(2, 3)
MASK = np.array([[True, False, True], [False, True, False]])


def assign(y, mask, value):
    y = y + 0
    y[mask] = value
    return y


def add_into(y, mask):
    y = y + 0
    y[mask] += 10
    return y


def read(y, mask):
    return y[mask]


@pytest.mark.parametrize("value", [
    5.0,                                           # a number
    ms.Tensor(np.float32(7.0)),                    # a 0-d tensor
    ms.Tensor(np.float32([7.0, 8.0, 9.0])),        # one value per True element (3 of them)
])
def test_full_mask_assignment_matches_numpy(value):
    graph = assert_same_in_both_modes(assign, ms.Tensor(Y), ms.Tensor(MASK), value)
    expected = Y.copy()
    expected[MASK] = value.asnumpy() if isinstance(value, ms.Tensor) else value
    np.testing.assert_array_equal(graph.asnumpy(), expected)


@pytest.mark.parametrize("value", [2.5, ms.Tensor(np.float32([7.0, 8.0, 9.0]))])
def test_row_mask_assignment_broadcasts_over_the_rest(value):
    rows = np.array([True, False])
    graph = assert_same_in_both_modes(assign, ms.Tensor(Y), ms.Tensor(rows), value)
    expected = Y.copy()
    expected[rows] = value.asnumpy() if isinstance(value, ms.Tensor) else value
    np.testing.assert_array_equal(graph.asnumpy(), expected)


def test_mask_augmented_assignment_and_read():
    graph = assert_same_in_both_modes(add_into, ms.Tensor(Y), ms.Tensor(MASK))
    expected = Y.copy()
    expected[MASK] += 10
    np.testing.assert_array_equal(graph.asnumpy(), expected)
    graph = assert_same_in_both_modes(read, ms.Tensor(Y), ms.Tensor(MASK))
    np.testing.assert_array_equal(graph.asnumpy(), Y[MASK])


def test_mask_assignment_into_an_integer_tensor_converts_the_value():
    y = np.arange(6, dtype=np.int32).reshape(2, 3)
    graph = assert_same_in_both_modes(assign, ms.Tensor(y), ms.Tensor(MASK), 2.7)
    expected = y.copy()
    expected[MASK] = 2.7
    np.testing.assert_array_equal(graph.asnumpy(), expected)


def test_mask_assignment_writes_back_a_tensor_argument():
    def in_place(y, mask):
        y[mask] = -1.0
        return y.sum()

    y = ms.Tensor(Y.copy())
    ms.jit(in_place)(y, ms.Tensor(MASK))
    expected = Y.copy()
    expected[MASK] = -1.0
    np.testing.assert_array_equal(y.asnumpy(), expected)


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_values_of_the_wrong_count_raise_in_both_modes(mode):
    fn = assign if mode == "eager" else ms.jit(assign)
    two = ms.Tensor(np.float32([1.0, 2.0]))  # the mask selects 3 elements
    with pytest.raises(ValueError, match=r"index_put: .*\(2,\)"):
        fn(ms.Tensor(Y), ms.Tensor(MASK), two)


def test_a_mask_of_the_wrong_shape_is_an_index_error_when_compiling():
    with pytest.raises(IndexError, match="boolean index did not match"):
        ms.jit(assign)(ms.Tensor(Y), ms.Tensor(np.array([True, False, True])), 1.0)
