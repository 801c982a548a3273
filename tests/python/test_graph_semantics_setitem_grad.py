"""Gradients through index assignment y[index] = v: the overwritten elements of y get no
gradient and v gets the gradient of the places it went to, in PyNative, in ms.jit and in a
Cell's construct under GRAPH_MODE, checked against NumPy for every kind of index."""

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn

RNG = np.random.default_rng(7)
X1 = RNG.standard_normal(5).astype(np.float32)
X2 = RNG.standard_normal((3, 4)).astype(np.float32)
W1 = RNG.standard_normal(5).astype(np.float32)
W2 = RNG.standard_normal((3, 4)).astype(np.float32)
ROW_MASK = np.array([True, False, True, True])

# (x, weights, index as NumPy sees it, index as kiln code writes it, value's shape)
CASES = {
    "int": (X1, W1, 1, 1, ()),
    "negative int": (X1, W1, -1, -1, ()),
    "slice": (X1, W1, slice(1, 4), slice(1, 4), (3,)),
    "slice broadcast": (X1, W1, slice(1, 4), slice(1, 4), (1,)),
    "negative step": (X1, W1, slice(None, None, -2), slice(None, None, -2), (3,)),
    "row": (X2, W2, 1, 1, (4,)),
    "column": (X2, W2, (slice(None), 2), (slice(None), 2), (3,)),
    "ellipsis": (X2, W2, (Ellipsis, 0), (Ellipsis, 0), (3,)),
    "none": (X2, W2, (None, 1), (None, 1), (1, 4)),
    "int array": (X1, W1, [0, 3], [0, 3], (2,)),
    "int tensor": (X1, W1, np.array([4, 1]), Tensor(np.array([4, 1])), (2,)),
    "slice and array": (X2, W2, (slice(0, 2), [1, 3]), (slice(0, 2), [1, 3]), (2, 2)),
    "int and mask": (X2, W2, (2, ROW_MASK), (2, Tensor(ROW_MASK)), (3,)),
}


def _sum_to(a, shape):
    """a summed over the axes broadcasting added or stretched to reach it from `shape`."""
    a = a.sum(axis=tuple(range(a.ndim - len(shape)))) if a.ndim > len(shape) else a
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and a.shape[i] != 1)
    return a.sum(axis=axes, keepdims=True) if axes else a


def _expected(x, w, np_index, v):
    """Loss sum(w * y) with y = 2x; y[index] = 3v; and its gradients by NumPy."""
    y = 2 * x
    y[np_index] = 3 * v
    written = np.zeros(x.shape, bool)
    written[np_index] = True
    dx = np.where(written, 0, 2 * w)
    dv = 3 * _sum_to(w[np_index], v.shape)
    return (w * y).sum(), dx, dv


def _loss(index):
    def loss(x, w, v):
        y = x * 2
        y[index] = v * 3
        return (w * y).sum()

    return loss


def _run_both(fn, *args):
    yield "pynative", fn(*args)
    yield "jit", ms.jit(fn)(*args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_setitem_gradient_matches_numpy_in_both_modes(name):
    x, w, np_index, index, vshape = CASES[name]
    v = RNG.standard_normal(vshape).astype(np.float32)
    value, dx, dv = _expected(x.copy(), w, np_index, v)
    fn = ms.value_and_grad(_loss(index), grad_position=(0, 2))
    for mode, (out, (gx, gv)) in _run_both(fn, Tensor(x), Tensor(w), Tensor(v)):
        np.testing.assert_allclose(out.asnumpy(), value, rtol=1e-5, err_msg=mode)
        np.testing.assert_allclose(gx.asnumpy(), dx, rtol=1e-5, err_msg=mode)
        np.testing.assert_allclose(gv.asnumpy(), dv, rtol=1e-5, err_msg=mode)


def _mask_loss(x, m, v):
    y = x * 2
    y[m] = v
    return (y * y).sum()


@pytest.mark.parametrize("vshape", [(), (1,), (3,)])
def test_mask_assignment_gradient_with_a_run_time_mask_in_both_modes(vshape):
    x = np.array([1.0, -2.0, 3.0, -4.0, -5.0], np.float32)
    m = x < 0
    v = np.arange(1, 1 + int(np.prod(vshape)), dtype=np.float32).reshape(vshape)
    y = 2 * x
    y[m] = v
    dx = np.where(m, 0, 4 * y)
    dv = _sum_to(2 * y[m], v.shape)
    fn = ms.grad(_mask_loss, grad_position=(0, 2))
    for mode, (gx, gv) in _run_both(fn, Tensor(x), Tensor(m), Tensor(v)):
        np.testing.assert_allclose(gx.asnumpy(), dx, err_msg=mode)
        np.testing.assert_allclose(gv.asnumpy(), dv, err_msg=mode)


def test_mask_assignment_of_a_number_stops_the_gradient_there_in_both_modes():
    def loss(x, m):
        y = x * 2
        y[m] = 0.0
        y[m] = 1.0
        return y.sum()

    x = Tensor(np.array([1.0, -2.0, 3.0, -4.0], np.float32))
    for mode, g in _run_both(ms.grad(loss), x, x < 0):
        np.testing.assert_array_equal(g.asnumpy(), [2.0, 0.0, 2.0, 0.0], err_msg=mode)


def _read_then_assign(x, m):
    y = x * 2
    part = y[1:3]
    y[m] += 1.0  # reads y[m], then overwrites those elements
    return (y * y).sum() + part.sum()


def test_read_then_assign_gradient_in_both_modes():
    """An op that read y before y[m] += 1 overwrote it keeps the values it read: Graph mode
    copies, and PyNative's tape keeps a copy of what the write is about to change."""
    x = np.array([1.0, -2.0, 3.0, -4.0], np.float32)
    m = x < 0
    y = 2 * x
    y[m] += 1.0
    expected = 4 * y + np.array([0, 2, 2, 0])  # d(y*y) and the slice read before the write
    for mode, g in _run_both(ms.grad(_read_then_assign), Tensor(x), Tensor(m)):
        np.testing.assert_allclose(g.asnumpy(), expected, err_msg=mode)


def _overwrite_an_output(x):
    y = ms.ops.exp(x)  # exp's gradient reads its output
    y[0] = 5.0
    return y.sum()


def _overwrite_a_read_input(x):
    y = x * 1
    z = y * y  # mul's gradient reads y
    y[1:] = 0.0
    return z.sum() + y.sum()


def test_values_a_gradient_rule_reads_survive_a_later_overwrite_in_both_modes():
    x = np.array([0.0, 1.0, 2.0], np.float32)
    for mode, g in _run_both(ms.grad(_overwrite_an_output), Tensor(x)):
        np.testing.assert_allclose(g.asnumpy(), np.exp(x) * [0, 1, 1], rtol=1e-6, err_msg=mode)
    for mode, g in _run_both(ms.grad(_overwrite_a_read_input), Tensor(x)):
        np.testing.assert_allclose(g.asnumpy(), 2 * x + [1, 0, 0], err_msg=mode)


def test_assignment_into_a_tensor_made_of_zeros_passes_the_gradient_to_the_value():
    def fill(v):
        y = ms.ops.zeros((2, 3), ms.float32)
        y[1, 1:] = v
        y[0] = v.sum()
        return (y * Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))).sum()

    v = Tensor(np.array([1.0, 2.0], np.float32))
    for mode, g in _run_both(ms.grad(fill), v):
        np.testing.assert_allclose(g.asnumpy(), [4.0 + 3.0, 5.0 + 3.0], err_msg=mode)


def test_zero_dimensional_assignment_gradient_in_both_modes():
    def loss(x, v):
        y = x * 2
        y[...] = v * 5
        return y * y

    x, v = Tensor(np.float32(3.0)), Tensor(np.float32(2.0))
    for mode, (gx, gv) in _run_both(ms.grad(loss, grad_position=(0, 1)), x, v):
        assert float(gx.asnumpy()) == 0.0, mode
        assert float(gv.asnumpy()) == 100.0, mode  # d(25 v^2)/dv at v = 2


class MaskedGrad(nn.Cell):
    """A Cell whose construct differentiates a mask assignment (GRAPH_MODE compiles it)."""

    def construct(self, x, m, v):
        return ms.grad(_mask_loss, grad_position=(0, 2))(x, m, v)


def test_mask_assignment_gradient_in_a_cell_under_graph_mode():
    x = np.array([1.0, -2.0, 3.0], np.float32)
    args = (Tensor(x), Tensor(x < 0), Tensor(np.float32(4.0)))
    eager = MaskedGrad()(*args)
    ms.set_context(mode=ms.GRAPH_MODE)
    graph = MaskedGrad()(*args)
    for e, g in zip(eager, graph):
        np.testing.assert_allclose(g.asnumpy(), e.asnumpy())
    np.testing.assert_allclose(graph[0].asnumpy(), [8.0, 0.0, 24.0])
    np.testing.assert_allclose(graph[1].asnumpy(), 8.0)


def test_assignment_without_a_gradient_still_writes_in_place_and_through_views():
    x = Tensor(np.zeros((2, 3), np.float32))
    view = x[1]
    view[1:] = 7.0  # PyNative: a view's write reaches its base
    np.testing.assert_array_equal(x.asnumpy(), [[0, 0, 0], [0, 7, 7]])


# ---- PyNative writes through views (Graph mode refuses a write into a view of a visible
# tensor with a TypeError, tests/python/test_jit_adversarial.py) ----
def _write_through_a_row(x):
    base = x * 1
    row = base[1]  # a view: writing it writes base
    row[1:] = 0.0
    return (base * base).sum()


def _write_the_base_of_a_used_view(x):
    base = x * 1
    row = base[1]
    base[1, 0] = 9.0  # row sees it too
    return (row * row).sum()


def _write_a_row_seen_through_a_transpose(x):
    base = x * 1
    flipped = base.T  # a strided view of all of base, read after the write
    row = base[1]
    row[:2] = 0.0
    return (flipped * flipped).sum()


def test_gradients_follow_writes_through_views_in_pynative():
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    g = ms.grad(_write_through_a_row)(Tensor(x))
    np.testing.assert_allclose(g.asnumpy(), 2 * x * [[1, 1, 1], [1, 0, 0]])
    g = ms.grad(_write_the_base_of_a_used_view)(Tensor(x))
    np.testing.assert_allclose(g.asnumpy(), 2 * x * [[0, 0, 0], [0, 1, 1]])
    g = ms.grad(_write_a_row_seen_through_a_transpose)(Tensor(x))
    np.testing.assert_allclose(g.asnumpy(), 2 * x * [[1, 1, 1], [0, 0, 1]])


def _write_a_partly_overlapping_view(x):
    base = x * 1
    head, tail = base[0:3], base[1:4]
    tail[0] = 5.0  # changes head[1] too
    return head.sum()


def test_a_write_autodiff_cannot_follow_is_a_runtime_error_not_a_wrong_gradient():
    x = Tensor(np.arange(4, dtype=np.float32))
    np.testing.assert_allclose(_write_a_partly_overlapping_view(x).asnumpy(), 0 + 5 + 2)
    with pytest.raises(RuntimeError, match="overlaps it only in part"):
        ms.grad(_write_a_partly_overlapping_view)(x)
