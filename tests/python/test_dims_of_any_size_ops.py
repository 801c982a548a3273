"""Ops along dimensions of any size in compiled graphs (input_signature / set_inputs with None):
broadcasting, variance, flips, joins, pads, triangles, einsum, sizes read by ops, creation and
random draws by such sizes, reshapes by them, and what refuses them, each against PyNative
(values and gradients) for several sizes served by one graph."""
import numpy as np
import pytest
from test_dims_of_any_size import SIGNATURE, SIZES, _squared_sum_of

import kiln as ms


def _check_value_and_gradient_against_pynative(body):
    """body's value and the gradient of its squared sum, compiled once for SIGNATURE, equal
    PyNative's for every size in SIZES."""
    fn = ms.jit(body, input_signature=SIGNATURE)
    grad = ms.jit(ms.grad(_squared_sum_of(body)), input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4) / 10
        np.testing.assert_allclose(fn(ms.Tensor(a)).asnumpy(), body(ms.Tensor(a)).asnumpy())
        want = ms.grad(_squared_sum_of(body))(ms.Tensor(a)).asnumpy()
        np.testing.assert_allclose(grad(ms.Tensor(a)).asnumpy(), want, rtol=1e-5)


def broadcast_to_shape_of(x):
    return ms.ops.broadcast_to(x[:, :1], x.shape) * x


def expand_to_shape_of(x):
    return x[:1].expand(x.shape[0], -1, 4) * 2.0


def expand_as_tensor(x):
    return x[:, :1].expand_as(x) - x


def first_column_times_all(x):
    return x[:, :1] * x  # the first operand's 1 is stretched to the runtime size


@pytest.mark.parametrize("body", [broadcast_to_shape_of, expand_to_shape_of, expand_as_tensor,
                                  first_column_times_all],
                         ids=["broadcast_to", "expand", "expand_as", "stretched operand"])
def test_broadcasting_to_sizes_of_any_size_and_its_gradient(body):
    # The result takes the runtime size (before: broadcast_to's -1 kept the input's size 1, a
    # silent wrong answer), and the gradient sums back what was stretched at run time.
    _check_value_and_gradient_against_pynative(body)


def variance_over_rows(x):
    return x.var(axis=1)


def std_over_the_first_axis(x):
    return x.std(axis=0, ddof=1)


def var_of_all(x):
    return ms.ops.var(x, ddof=1)


@pytest.mark.parametrize("body,want", [
    (variance_over_rows, lambda a: a.var(axis=1)),
    (std_over_the_first_axis, lambda a: a.std(axis=0, ddof=1)),
    (var_of_all, lambda a: a.var(ddof=1)),
], ids=["var", "std with ddof", "var of all"])
def test_variance_over_dimensions_of_any_size_counts_at_run_time(body, want):
    # Before: the count came from the placeholder's size (var over rows was half NumPy's).
    fn = ms.jit(body, input_signature=SIGNATURE)
    grad = ms.jit(ms.grad(lambda x: body(x).sum()), input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4) ** 1.5 / 10
        np.testing.assert_allclose(fn(ms.Tensor(a)).asnumpy(), want(a), rtol=1e-5)
        eager = ms.grad(lambda x: body(x).sum())(ms.Tensor(a)).asnumpy()
        np.testing.assert_allclose(grad(ms.Tensor(a)).asnumpy(), eager, rtol=1e-4, atol=1e-6)


def flipped_rows(x):
    return ms.ops.flip(x, (0, 1)) * 2.0


def test_flip_along_dimensions_of_any_size():
    # Before: a dimension of size -1 counted as "at most one element" and came back unreversed.
    fn = ms.jit(flipped_rows, input_signature=SIGNATURE)
    grad = ms.jit(ms.grad(_squared_sum_of(flipped_rows)), input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4)
        np.testing.assert_array_equal(fn(ms.Tensor(a)).asnumpy(), a[::-1, ::-1] * 2.0)
        np.testing.assert_allclose(grad(ms.Tensor(a)).asnumpy(), 8.0 * a)


def concat_rows(x):
    return ms.ops.cat((x, x[1:] * 2.0), axis=0)


def concat_columns(x):
    return ms.ops.cat((x * 3.0, x), axis=1)


def tiled(x):
    return ms.ops.tile(x, (2, 1, 3))


def padded(x):
    return ms.ops.pad(x, (1, 2, 0, 1), value=0.5)


def cropped(x):
    return ms.ops.pad(x, (0, 0, -1, 0, 0, -1))


def gathered_from_the_end(x):
    index = ms.ops.zeros_like(x[:, :1], dtype=ms.int64) - 1  # the last row of each column
    return ms.ops.gather_elements(x, 1, index)


def sorted_rows(x):
    return ms.ops.sort(x * ms.Tensor(np.array([1.0, -2.0, 3.0, -4.0], np.float32)), axis=1)[0]


@pytest.mark.parametrize("body", [concat_rows, concat_columns, tiled, padded, cropped,
                                  gathered_from_the_end, sorted_rows],
                         ids=["concat along the first", "concat along the second", "tile", "pad",
                              "negative pad", "gather_elements of -1", "sort"])
def test_ops_along_dimensions_of_any_size_and_their_gradients(body):
    # Before: each failed to compile (split, reshape or fill by the size -1), or, for a
    # negative pad, cut one element too many along an unknown dimension.
    _check_value_and_gradient_against_pynative(body)


def running_max(x):
    return ms.ops.cummax(x, 0)[0]


def slices_of_rows(x):
    return x.unbind(0)[0]


def first_row(x):
    return ms.ops.narrow(x, 0, 0, 1)


def kronecker_of_planes(x):
    return ms.ops.kron(x[0], x[1])


@pytest.mark.parametrize("body,op", [(running_max, "cummax"), (slices_of_rows, "unbind"),
                                     (first_row, "narrow"), (kronecker_of_planes, "kron")])
def test_ops_that_need_the_size_along_a_dimension_of_any_size_say_so(body, op):
    # Before: cummax ran none of its steps (a silent wrong answer), unbind returned no slices,
    # narrow named a size -1 and kron failed in a reshape when the graph ran.
    with pytest.raises(ValueError, match=f"{op}: .*(known only when the graph runs|a graph "
                                         f"learns only when it runs)"):
        ms.jit(body, input_signature=SIGNATURE)(ms.Tensor(np.ones((3, 2, 4), np.float32)))


def rows_over_half(x):
    return x[x[:, 0, 0] > 0.5] * 2.0


def test_a_boolean_mask_along_a_dimension_of_any_size():
    fn = ms.jit(rows_over_half, input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.random.default_rng(n).random((n, m, 4)).astype(np.float32)
        np.testing.assert_array_equal(fn(ms.Tensor(a)).asnumpy(), a[a[:, 0, 0] > 0.5] * 2.0)


def mean_by_numel(x):
    return x.sum() / x.numel() + x.sum() / x.size


def rolled(x):
    return ms.ops.roll(x, 1, 0)


def diagonal_planes(x):
    return ms.ops.diagonal(x, 1, 0, 1)


def trace_of_rows(x):
    return ms.ops.trace(x[:, :, 0])


def grid_of(x):
    return ms.ops.meshgrid(x[:, 0, 0], x[0, :, 0])[0]


def flattened_all(x):
    return ms.ops.flatten(x, start_dim=0)


@pytest.mark.parametrize("body", [mean_by_numel, rolled, diagonal_planes, trace_of_rows,
                                  grid_of, flattened_all],
                         ids=["numel and size", "roll", "diagonal", "trace", "meshgrid",
                              "flatten"])
def test_sizes_read_by_ops_along_dimensions_of_any_size(body):
    # Before: each computed with the placeholder's -1 and gave a silent wrong answer (roll an
    # empty tensor, diagonal no elements, numel -4) or failed.
    fn = ms.jit(body, input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4) / 10
        np.testing.assert_allclose(fn(ms.Tensor(a)).asnumpy(), body(ms.Tensor(a)).asnumpy(),
                                   rtol=1e-6)


def resized(x):
    return ms.ops.interpolate(x[None], size=(4, 8))  # (1, n, m, 4): m of any size


def test_interpolate_from_spatial_sizes_of_any_size_says_so():
    with pytest.raises(ValueError, match="interpolate: .*known only when the graph runs"):
        ms.jit(resized, input_signature=SIGNATURE)(ms.Tensor(np.ones((2, 3, 4), np.float32)))


def positions_of_rows(x):
    return ms.ops.arange(x.shape[0]) * 10 + ms.ops.arange(1, x.shape[1], 2).sum()


def identity_of_rows(x):
    return ms.ops.eye(x.shape[0], 3, ms.float32) * 2.0


def mask_of_lengths(x):
    return ms.ops.sequence_mask(ms.Tensor(np.array([1, 2], np.int32)), x.shape[1])


def shape_primitive(x):
    return ms.ops.TensorShape()(x) * 1


@pytest.mark.parametrize("body", [positions_of_rows, identity_of_rows, mask_of_lengths,
                                  shape_primitive],
                         ids=["arange", "eye", "sequence_mask", "TensorShape"])
def test_creation_by_a_size_of_any_size(body):
    # Before: arange(-1) was empty and TensorShape held -1 (silent wrong answers); eye and
    # sequence_mask failed.
    fn = ms.jit(body, input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.zeros((n, m, 4), np.float32)
        np.testing.assert_array_equal(fn(ms.Tensor(a)).asnumpy(), body(ms.Tensor(a)).asnumpy())


def spaced_by_rows(x):
    return ms.ops.linspace(0.0, 1.0, x.shape[0])


def test_an_int_argument_of_any_size_is_refused_not_taken_as_minus_one():
    with pytest.raises(ValueError, match="linspace: steps is the size of a dimension declared "
                                         "None"):
        ms.jit(spaced_by_rows, input_signature=SIGNATURE)(ms.Tensor(np.ones((3, 2, 4),
                                                                            np.float32)))


def view_rows(x):
    return x.view(x.shape[0], -1) * 2.0


def flatten_from_one(x):
    return ms.ops.flatten(x) * 2.0


@pytest.mark.parametrize("body", [view_rows, flatten_from_one], ids=["view", "flatten"])
def test_reshape_by_one_size_of_any_size_beside_another(body):
    # x is (?, ?, 4): x.view(x.shape[0], -1) keeps the first size and merges the others, in the
    # forward and back (before: "only one dimension can be -1").
    fn = ms.jit(body, input_signature=SIGNATURE)
    grad = ms.jit(ms.grad(_squared_sum_of(body)), input_signature=SIGNATURE)
    for n, m in SIZES:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4)
        np.testing.assert_array_equal(fn(ms.Tensor(a)).asnumpy(), a.reshape(n, -1) * 2.0)
        want = ms.grad(_squared_sum_of(body))(ms.Tensor(a)).asnumpy()
        np.testing.assert_allclose(grad(ms.Tensor(a)).asnumpy(), want)


def uniform_like(x):
    return ms.ops.rand_like(x) + ms.ops.bernoulli(x * 0.0 + 0.5) * 10.0


def normal_like(x):
    return ms.ops.randn_like(x) + ms.ops.normal(x.shape, ms.Tensor(0.0), ms.Tensor(1.0)) * 0.0


def shuffled_rows(x):
    return ms.ops.shuffle(x)


@pytest.mark.parametrize("body", [uniform_like, normal_like, shuffled_rows],
                         ids=["rand_like and bernoulli", "randn_like and normal", "shuffle"])
def test_random_draws_shaped_by_dimensions_of_any_size(body):
    # Before: "uniform_real: shape dimensions must be non-negative, got -1".
    fn = ms.jit(body, input_signature=SIGNATURE)
    for n, m in [(3, 2), (40, 30)]:
        a = np.arange(n * m * 4, dtype=np.float32).reshape(n, m, 4)
        out = fn(ms.Tensor(a)).asnumpy()
        assert out.shape == (n, m, 4)
        if body is uniform_like:
            assert ((out >= 0) & (out < 11)).all() and len(np.unique(out // 10)) == 2
        elif body is shuffled_rows:
            np.testing.assert_array_equal(np.sort(out[:, 0, 0]), a[:, 0, 0])
        elif n == 40:  # 4800 normal draws
            assert abs(out.mean()) < 0.1 and 0.9 < out.std() < 1.1


def causal_scores(x):
    scores = x @ x.transpose(0, 2, 1)  # (n, m, m)
    allowed = ms.ops.tril(ms.ops.ones((x.shape[1], x.shape[1]), ms.float32))
    return ms.ops.triu(scores, 1) * 0.5 + ms.ops.masked_fill(scores, allowed == 0, -1e9)


def test_triangles_over_dimensions_of_any_size():
    # A causal mask of the runtime length (before: tril failed building a -1 x -1 mask).
    _check_value_and_gradient_against_pynative(causal_scores)


def einsum_scores(x):
    return ms.ops.einsum("nmk,nlk->nml", x, x * 0.5) + ms.ops.einsum("nmk->n", x)[:, None, None]


def test_einsum_over_dimensions_of_any_size():
    # Its operands are aligned by inserted size-1 axes (before: a reshape by -1 sizes).
    _check_value_and_gradient_against_pynative(einsum_scores)


def merged_rows(x):
    return x.reshape(x.shape[0] * x.shape[1], 4) * 2.0


def test_reshape_by_a_size_computed_from_sizes_of_any_size():
    # Before: "reshape: shape must be an int or a tuple of ints" (a 0-d tensor in the target).
    _check_value_and_gradient_against_pynative(merged_rows)
