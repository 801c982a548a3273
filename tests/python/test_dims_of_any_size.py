"""Graphs compiled for dimensions of any size (input_signature / Cell.set_inputs with None):
indexing along them, their sizes read through x.shape, reshapes by them and ops.dyn_shape,
checked against NumPy for several sizes served by one compiled graph."""
import numpy as np
import pytest

import kiln as ms

SIGNATURE = (ms.Tensor(shape=[None, None, 4], dtype=ms.float32),)

# Each body indexes x of shape (n, m, 4), n >= 3 and m >= 2 in the sizes below. Named
# functions: ms.jit reads each one's source.
def int_index(x):
    return x[1]


def negative_int(x):
    return x[-1]


def int_on_the_fixed_dim(x):
    return x[:, :, 2]


def ints(x):
    return x[0, -1]


def plain_slice(x):
    return x[1:]


def slice_with_stop(x):
    return x[:2, 1:]


def negative_bounds(x):
    return x[-2:, :-1]


def step(x):
    return x[::2]


def new_axis(x):
    return x[:, None, 0]


def ellipsis(x):
    return x[..., 1]


def mixed(x):
    return x[1:, 0, None, 1:3]


CASES = [int_index, negative_int, int_on_the_fixed_dim, ints, plain_slice, slice_with_stop,
         negative_bounds, step, new_axis, ellipsis, mixed]

SIZES = [(3, 2), (5, 3), (4, 7)]


@pytest.mark.parametrize("body", CASES, ids=[f.__name__ for f in CASES])
def test_index_along_dimensions_of_any_size_matches_numpy(body):
    fn = ms.jit(body, input_signature=SIGNATURE)
    before = ms.get_jit_stats()["compiles"]
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4)
        np.testing.assert_array_equal(fn(ms.Tensor(a)).asnumpy(), body(a))
    assert ms.get_jit_stats()["compiles"] - before == 1  # one graph for every size


def past_the_end(x):
    return x[3] + 1.0


def reversed_rows(x):
    return x[::-1]


def tensor_rows(x, rows):
    return x[rows] * 2.0


def test_a_tensor_index_along_a_dimension_of_any_size():
    fn = ms.jit(tensor_rows, input_signature=SIGNATURE + (ms.Tensor(shape=[None], dtype=ms.int32),))
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4)
        rows = np.array([0, n - 1, 1], np.int32)
        np.testing.assert_array_equal(fn(ms.Tensor(a), ms.Tensor(rows)).asnumpy(), a[rows] * 2)


def test_an_int_past_the_end_of_a_dimension_of_any_size_is_an_index_error():
    fn = ms.jit(past_the_end, input_signature=SIGNATURE)
    a = np.ones((5, 2, 4), np.float32)
    np.testing.assert_array_equal(fn(ms.Tensor(a)).asnumpy(), a[3] + 1.0)
    with pytest.raises(IndexError, match="out of bounds"):
        fn(ms.Tensor(np.ones((3, 2, 4), np.float32)))


def test_a_negative_step_along_a_dimension_of_any_size_is_refused():
    fn = ms.jit(reversed_rows, input_signature=SIGNATURE)
    with pytest.raises(IndexError, match="negative step.*any size"):
        fn(ms.Tensor(np.ones((3, 2, 4), np.float32)))


def test_setitem_along_a_dimension_of_any_size():
    def write(x):
        y = x * 1.0
        y[1:, 0] = 0.0
        y[0] = 5.0
        return y

    fn = ms.jit(write, input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4)
        want = a.copy()
        want[1:, 0] = 0.0
        want[0] = 5.0
        np.testing.assert_array_equal(fn(ms.Tensor(a)).asnumpy(), want)


def plus_rows(x):
    return x.sum() + x.shape[0] * x.shape[2] + x.shape[1] - x.shape[0] / 2 * x


def functional_ops_with_rows(x):
    return ms.ops.div(ms.ops.add(x, x.shape[0]), x.shape[1])


def sum_rows_in_a_loop(x):
    total = x[0] * 0.0
    for i in range(x.shape[0]):
        total = total + x[i]
    return total


def branch_on_rows(x):
    if x.shape[0] > 3:
        return x * 2.0
    return x


@pytest.mark.parametrize("body,want", [
    (plus_rows, lambda a: a.sum() + a.shape[0] * 4 + a.shape[1] - a.shape[0] / 2 * a),
    (functional_ops_with_rows, lambda a: (a + a.shape[0]) / a.shape[1]),
    (sum_rows_in_a_loop, lambda a: a.sum(axis=0)),
    (branch_on_rows, lambda a: a * 2.0 if a.shape[0] > 3 else a),
], ids=["arithmetic", "functional ops", "range", "if"])
def test_shape_of_a_dimension_of_any_size_is_its_size_as_the_graph_runs(body, want):
    # MindSpore's Graph mode gives the runtime size there; a -1 would compute silently wrong.
    fn = ms.jit(body, input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4)
        np.testing.assert_allclose(fn(ms.Tensor(a)).asnumpy(), want(a), rtol=1e-6)


def rows_as_python_int(x):
    return x * float(x.shape[0] == 3)


@pytest.mark.filterwarnings("ignore")  # LAX: float() of a runtime value runs in Python
def test_a_dimension_of_any_size_through_a_python_builtin_is_its_runtime_value():
    fn = ms.jit(rows_as_python_int, input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.ones((n, m, 4), np.float32)
        np.testing.assert_array_equal(fn(ms.Tensor(a)).asnumpy(), a * float(n == 3))


def shape_vector(x):
    return ms.ops.dyn_shape(x) * 2


def test_dyn_shape_in_a_graph_is_the_shape_it_runs_with():
    fn = ms.jit(shape_vector, input_signature=SIGNATURE)
    for n, m in SIZES:
        got = fn(ms.Tensor(np.ones((n, m, 4), np.float32)))
        assert got.dtype == ms.int64
        np.testing.assert_array_equal(got.asnumpy(), [2 * n, 2 * m, 8])
    np.testing.assert_array_equal(ms.ops.dyn_shape(ms.Tensor(np.ones((2, 3)))).asnumpy(), [2, 3])


IMAGES = (ms.Tensor(shape=[None, 1, 6, 6], dtype=ms.float32),)


def flatten_rows(x):
    return x.view(x.shape[0], -1) * 2.0


def drop_channel(x):
    return x.reshape((x.shape[0], 6, 6)) + 1.0


def wrong_rows(x):
    return x.reshape(x.shape[0], 7)


@pytest.mark.parametrize("body,want", [
    (flatten_rows, lambda a: a.reshape(a.shape[0], -1) * 2.0),
    (drop_channel, lambda a: a.reshape(a.shape[0], 6, 6) + 1.0),
], ids=["view(n, -1)", "reshape((n, 6, 6))"])
def test_reshape_by_a_size_read_from_the_tensor(body, want):
    fn = ms.jit(body, input_signature=IMAGES)
    before = ms.get_jit_stats()["compiles"]
    for n in (1, 4, 9):
        a = np.arange(n * 36, dtype=np.float32).reshape(n, 1, 6, 6)
        np.testing.assert_array_equal(fn(ms.Tensor(a)).asnumpy(), want(a))
    assert ms.get_jit_stats()["compiles"] - before == 1


def test_a_reshape_that_cannot_hold_the_elements_is_a_value_error():
    fn = ms.jit(wrong_rows, input_signature=IMAGES)
    with pytest.raises(ValueError, match=r"cannot reshape \(\?, 1, 6, 6\) to \(\?, 7\)"):
        fn(ms.Tensor(np.ones((2, 1, 6, 6), np.float32)))


def zeros_like_plus_one(x):
    return ms.ops.zeros_like(x) + 1.0


def initial_state(x):
    return ms.ops.zeros((2, x.shape[0], 3)) + x.sum()


def ones_of_rows(x):
    return ms.ops.ones((x.shape[0], x.shape[1]), ms.int32)


def full_like_seven(x):
    return ms.ops.full_like(x, 7.0)


def filled_rows(x):
    return ms.ops.fill(ms.float16, (x.shape[1], 2), 2.5)


def new_full_of_rows(x):
    return x.new_full((x.shape[0], 2), 3.0)


@pytest.mark.parametrize("body,want", [
    (zeros_like_plus_one, lambda a: np.ones_like(a)),
    (initial_state, lambda a: np.zeros((2, a.shape[0], 3), np.float32) + a.sum()),
    (ones_of_rows, lambda a: np.ones(a.shape[:2], np.int32)),
    (full_like_seven, lambda a: np.full_like(a, 7.0)),
    (filled_rows, lambda a: np.full((a.shape[1], 2), 2.5, np.float16)),
    (new_full_of_rows, lambda a: np.full((a.shape[0], 2), 3.0, np.float32)),
], ids=["zeros_like", "zeros((2, n, 3))", "ones((n, m))", "full_like", "fill", "Tensor.new_full"])
def test_creation_by_sizes_of_any_size(body, want):
    fn = ms.jit(body, input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4)
        got, expected = fn(ms.Tensor(a)).asnumpy(), want(a)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


def scaled_sum(x):
    return (x * 2.0 + ms.ops.zeros_like(x)).sum()


def mean_over_rows(x):
    return (x * x).mean(axis=1).sum()


def mean_of_all(x):
    return x.mean()


@pytest.mark.parametrize("body,want", [
    (scaled_sum, lambda a: np.full_like(a, 2.0)),  # no gradient flows through fill_like
    (mean_over_rows, lambda a: 2 * a / a.shape[1]),
    (mean_of_all, lambda a: np.full_like(a, 1 / a.size)),
], ids=["sum", "mean over a dim of any size", "mean of all"])
def test_gradients_of_reductions_over_dimensions_of_any_size(body, want):
    # The input's gradient takes the size the graph runs with (before: the placeholder's 1,
    # and a mean divided by a negative count).
    grad = ms.jit(ms.grad(body), input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4)
        np.testing.assert_allclose(grad(ms.Tensor(a)).asnumpy(), want(a), rtol=1e-5)


def _squared_sum_of(body):
    def loss(x):
        y = body(x)
        return (y * y).sum()
    return loss


@pytest.mark.parametrize("body", CASES, ids=[f.__name__ for f in CASES])
def test_gradients_through_indexing_along_dimensions_of_any_size(body):
    # The input's gradient has the input's shape as the graph runs, with dy in the indexed places
    # (before: a slice along such a dimension passed dy through whole, of the slice's size; an int
    # index failed to build zeros of size -1).
    grad = ms.jit(ms.grad(_squared_sum_of(body)), input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4)
        want = np.zeros_like(a)
        view = body(want)  # NumPy basic indexing: a view of `want`
        view += 2 * body(a)
        np.testing.assert_allclose(grad(ms.Tensor(a)).asnumpy(), want, rtol=1e-6)


def rows_of_four(x):
    return (x.reshape(-1, 4) * ms.Tensor(np.arange(4, dtype=np.float32))).sum()


def flattened(x):
    return (x.reshape(-1) ** 2).sum()


def stacked(x):
    return (ms.ops.stack((x, x * 3.0)) ** 2).sum()


def squeezed(x):
    return (x[:, :1].squeeze(1) ** 2).sum()


def cross_entropy_over_rows(x):
    logits = x.reshape(-1, 4)
    labels = ms.ops.zeros((logits.shape[0],), ms.int32)
    return ms.ops.cross_entropy(logits, labels)


@pytest.mark.parametrize("body", [rows_of_four, flattened, stacked, squeezed,
                                  cross_entropy_over_rows],
                         ids=["reshape to one unknown", "flatten", "stack", "squeeze",
                              "cross_entropy"])
def test_gradients_back_through_reshapes_with_several_dimensions_of_any_size(body):
    # Back to (?, ?, 4) a reshape takes the input's shape as the graph runs (before: "only one
    # dimension can be -1").
    grad = ms.jit(ms.grad(body), input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4) / 10
        want = ms.grad(body)(ms.Tensor(a)).asnumpy()
        np.testing.assert_allclose(grad(ms.Tensor(a)).asnumpy(), want, rtol=1e-5, atol=1e-6)
