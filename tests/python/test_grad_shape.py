"""Gradients of shape, view, indexing and creation ops against finite differences.

ms.grad of a non-scalar output uses ones as its sensitivity, so tests take no sums (the
reductions' gradients are tested with their family)."""
import numpy as np
import pytest
from gradcheck import check_grad

import kiln as ms
from kiln import Tensor, ops
from kiln.ops._core import call

RNG = np.random.default_rng(2)


def rand(*shape):
    return RNG.uniform(-2.0, 2.0, size=shape)


def idx(values):
    return Tensor(np.asarray(values, np.int64))


# ---- views and reshapes: (name, fn, input shape)

VIEWS = [
    ("reshape", lambda x: ops.reshape(x, (6, 4)), (2, 3, 4)),
    ("reshape_infer", lambda x: ops.reshape(x, (4, -1)), (2, 3, 4)),
    ("reshape_0d", lambda x: ops.reshape(x, (1, 1)), ()),
    ("reshape_to_0d", lambda x: ops.reshape(x, ()), (1,)),
    ("transpose", lambda x: ops.transpose(x, (2, 0, 1)), (2, 3, 4)),
    ("transpose_negative", lambda x: ops.transpose(x, (-1, 0, -2)), (2, 3, 4)),
    ("transpose_2d", lambda x: ops.transpose(x, (1, 0)), (3, 5)),
    ("permute", lambda x: ops.permute(x, (1, 2, 0)), (2, 3, 4)),
    ("swapaxes", lambda x: ops.swapaxes(x, 0, -1), (2, 3, 4)),
    ("broadcast_rank", lambda x: ops.broadcast_to(x, (2, 3)), (3,)),
    ("broadcast_stretch", lambda x: ops.broadcast_to(x, (4, 5)), (4, 1)),
    ("broadcast_both", lambda x: ops.broadcast_to(x, (2, 3, -1)), (1, 4)),
    ("broadcast_0d", lambda x: ops.broadcast_to(x, (2, 2)), ()),
    ("broadcast_same", lambda x: ops.broadcast_to(x, (2, 3)), (2, 3)),
    ("squeeze_all", lambda x: ops.squeeze(x), (1, 3, 1, 2)),
    ("squeeze_negative", lambda x: ops.squeeze(x, -1), (3, 2, 1)),
    ("squeeze_tuple", lambda x: ops.squeeze(x, (0, 2)), (1, 3, 1, 2)),
    ("squeeze_nothing", lambda x: ops.squeeze(x), (2, 3)),
    ("expand_dims", lambda x: ops.expand_dims(x, 0), (2, 3)),
    ("expand_dims_negative", lambda x: ops.expand_dims(x, -1), (2, 3)),
    ("unsqueeze_middle", lambda x: ops.unsqueeze(x, 1), (2, 3)),
    ("flatten", lambda x: ops.flatten(x), (2, 3, 4)),
    ("flatten_f", lambda x: ops.flatten(x, "F", start_dim=0), (2, 3)),
    ("tile", lambda x: ops.tile(x, (2, 3)), (2, 2)),
    ("narrow", lambda x: ops.narrow(x, -1, 1, 2), (3, 4)),
    ("depend", lambda x: ops.depend(x * 2.0, x), (3,)),
]


@pytest.mark.parametrize("name,fn,shape", VIEWS, ids=[v[0] for v in VIEWS])
def test_view_gradients(name, fn, shape):
    check_grad(fn, rand(*shape))


# ---- strided_slice (through getitem): basic indices of every kind

SLICES = [
    ("leading", lambda x: x[1:3], (4, 3)),
    ("full", lambda x: x[:], (4, 3)),
    ("steps", lambda x: x[::2, 1:], (5, 4)),
    ("negative_bounds", lambda x: x[:, -3:-1], (2, 5)),
    ("later_axis", lambda x: x[..., ::2], (2, 3, 5)),
    ("clamped", lambda x: x[2:100], (4, 3)),
    ("int", lambda x: x[1], (3, 4)),
    ("int_negative", lambda x: x[:, -1], (3, 4)),
    ("none", lambda x: x[None, 1:], (3, 2)),
    ("reversed", lambda x: x[::-1], (4, 3)),
    ("reversed_step", lambda x: x[:, ::-2], (2, 5)),
    ("empty", lambda x: ops.concat([x[3:1], x[:1]]), (4, 2)),
]


@pytest.mark.parametrize("name,fn,shape", SLICES, ids=[s[0] for s in SLICES])
def test_slice_gradients(name, fn, shape):
    check_grad(fn, rand(*shape))


def test_slice_gradient_has_zeros_outside_the_slice():
    g = ms.grad(lambda x: x[1:4:2])(Tensor(np.zeros((5, 2))))
    np.testing.assert_array_equal(g.asnumpy(), [[0, 0], [1, 1], [0, 0], [1, 1], [0, 0]])


def test_strided_slice_grad_op_is_differentiable():
    # Second derivative through x[1:3] ** 2: d/dx (2 * x[1:3] scattered) = 2 on the slice.
    def first(x):
        return ms.grad(lambda t: t[1:3] * t[1:3])(x)

    g2 = ms.grad(lambda x: first(x) * Tensor(np.arange(4.0)))(Tensor(rand(4)))
    np.testing.assert_allclose(g2.asnumpy(), [0, 2, 4, 0])


# ---- concat, stack, split, chunk

def test_concat_gradients():
    check_grad(lambda a, b: ops.concat([a, b]), rand(2, 3), rand(4, 3))
    check_grad(lambda a, b, c: ops.concat([a, b, c], axis=-1), rand(2, 1), rand(2, 3), rand(2, 2))
    check_grad(lambda a, b: ops.concat([a, b], axis=1), rand(2, 0, 3), rand(2, 2, 3))
    check_grad(lambda a: ops.concat([a, a * 2.0], axis=0), rand(3))


def test_stack_gradients():
    check_grad(lambda a, b: ops.stack([a, b], axis=-1), rand(2, 3), rand(2, 3))


def test_concat_gradient_keeps_each_input_dtype():
    a = Tensor(np.ones(2, np.float32))
    b = Tensor(np.ones(3, np.float64))
    ga, gb = ms.grad(lambda x, y: ops.concat([x, y]) * 2.0, (0, 1))(a, b)
    assert ga.dtype == ms.float32 and gb.dtype == ms.float64
    np.testing.assert_array_equal(ga.asnumpy(), [2, 2])


def test_concat_with_an_integer_input():
    n = Tensor(np.array([1, 2], np.int64))
    g = ms.grad(lambda x: ops.concat([x, n]) * 3.0)(Tensor(np.ones(2)))
    np.testing.assert_array_equal(g.asnumpy(), [3, 3])


def test_split_gradients():
    check_grad(lambda x: ops.concat(ops.split(x, [1, 3, 1], axis=0)[::-1]), rand(5, 2))
    check_grad(lambda x: ops.split(x, 2, axis=-1)[1], rand(3, 5))  # others get no gradient
    check_grad(lambda x: ops.chunk(x, 3, axis=1)[0] * ops.chunk(x, 3, axis=1)[2], rand(2, 6))


def test_split_gradient_of_unused_pieces_is_zero():
    g = ms.grad(lambda x: ops.split(x, [2, 2])[0])(Tensor(np.zeros(4)))
    np.testing.assert_array_equal(g.asnumpy(), [1, 1, 0, 0])


# ---- gather and advanced indexing

GATHERS = [
    ("axis0", (4, 3), [2, 0, 2], 0),
    ("axis_negative", (2, 3, 4), [[3, 0], [1, 3]], -1),
    ("middle", (2, 3, 4), [1, -1], 1),
    ("repeated", (3,), [1, 1, 1, 0], 0),
    ("scalar_index", (3, 2), 1, 0),
]


@pytest.mark.parametrize("name,shape,indices,axis", GATHERS, ids=[g[0] for g in GATHERS])
def test_gather_gradients(name, shape, indices, axis):
    i = idx(indices)
    check_grad(lambda x: ops.gather(x, i, axis), rand(*shape))


def test_gather_gradient_adds_repeated_indices():
    g = ms.grad(lambda x: ops.gather(x, idx([0, 2, 0, 0]), 0))(Tensor(np.zeros(3)))
    np.testing.assert_array_equal(g.asnumpy(), [3, 0, 1])


ADVANCED = [
    ("one_array", lambda x: x[idx([2, 0, 2])], (4, 3)),
    ("later_axis", lambda x: x[:, idx([[1, 0], [1, 1]])], (2, 3)),
    ("two_adjacent", lambda x: x[idx([0, 1]), idx([2, 2])], (2, 3, 2)),
    ("non_adjacent", lambda x: x[idx([0, 1, 1]), :, idx([1, 0, 1])], (2, 3, 2)),
    ("with_slice", lambda x: x[1:, idx([0, 0])], (3, 2)),
    ("negative", lambda x: x[idx([-1, 0])], (3, 2)),
    ("bool_mask", lambda x: x[Tensor(np.array([True, False, True]))], (3, 2)),
    ("masked_select", lambda x: ops.masked_select(x, Tensor(np.array([True, False]))), (3, 2)),
]


@pytest.mark.parametrize("name,fn,shape", ADVANCED, ids=[a[0] for a in ADVANCED])
def test_advanced_index_gradients(name, fn, shape):
    check_grad(fn, rand(*shape))


# ---- gather with batch_dims (MindSpore semantics), forward and gradient

def np_batch_gather(params, indices, axis, batch_dims):
    if batch_dims == 0:
        return np.take(params, indices, axis)
    return np.stack([np_batch_gather(p, i, axis - 1, batch_dims - 1)
                     for p, i in zip(params, indices)])


BATCHED = [
    ("axis_is_batch_dims", (2, 4, 3), (2, 5), 1, 1),
    ("axis_after", (2, 3, 4, 2), (2, 2, 2), 2, 1),
    ("axis_last", (2, 3, 4), (2, 3), -1, 1),
    ("two_batch_dims", (2, 3, 4, 2), (2, 3, 2), 2, 2),
    ("negative_batch_dims", (2, 3, 4), (2, 1), 2, -1),
    ("all_index_dims", (3, 4), (3,), 1, 1),
]


@pytest.mark.parametrize("name,pshape,ishape,axis,batch_dims", BATCHED,
                         ids=[b[0] for b in BATCHED])
def test_gather_batch_dims(name, pshape, ishape, axis, batch_dims):
    params = rand(*pshape)
    n = pshape[axis]
    indices = RNG.integers(-n, n, size=ishape)
    nbd = batch_dims % len(ishape) if batch_dims < 0 else batch_dims
    want = np_batch_gather(params, indices, axis % len(pshape), nbd)
    got = ops.gather(Tensor(params), Tensor(indices), axis, batch_dims=batch_dims)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.asnumpy(), want)
    # A non-contiguous params view gives the same result.
    view = Tensor(np.concatenate([params, params], axis=-1))[..., ::2]
    wide = np.concatenate([params, params], axis=-1)[..., ::2]
    np.testing.assert_array_equal(
        ops.gather(view, Tensor(indices), axis, batch_dims=batch_dims).asnumpy(),
        np_batch_gather(wide, indices, axis % len(pshape), nbd))
    check_grad(lambda x: ops.gather(x, Tensor(indices), axis, batch_dims=batch_dims), params)


# ---- index_put and assign (in place on a fresh tensor)

def put(x, v, indices, axes, accumulate):
    y = x * 1.0  # a tracked copy, written in place
    call("index_put", (y, v) + tuple(indices), (axes, accumulate))
    return y


INDEX_PUTS = [
    ("rows", (4, 3), (2, 3), [[2, 0]], (0,)),
    ("broadcast_value", (4, 3), (3,), [[3, 1]], (0,)),
    ("scalar_value", (4, 3), (), [[0, 2]], (0,)),
    ("last_axis", (2, 3), (2, 1), [[-1]], (-1,)),
    ("two_axes", (3, 2, 4), (2, 2), [[0, 2], [1, 0]], (0, 2)),
]


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("name,xshape,vshape,indices,axes", INDEX_PUTS,
                         ids=[p[0] for p in INDEX_PUTS])
def test_index_put_gradients(name, xshape, vshape, indices, axes, accumulate):
    ind = [idx(i) for i in indices]
    check_grad(lambda x, v: put(x, v, ind, axes, accumulate), rand(*xshape), rand(*vshape))


def test_index_put_gradient_zeros_overwritten_positions():
    gx, gv = ms.grad(lambda x, v: put(x, v, [idx([1])], (0,), False) * 2.0, (0, 1))(
        Tensor(np.zeros((3, 2))), Tensor(np.zeros(2)))
    np.testing.assert_array_equal(gx.asnumpy(), [[2, 2], [0, 0], [2, 2]])
    np.testing.assert_array_equal(gv.asnumpy(), [2, 2])


def test_setitem_gradients():
    def fn(x, v):
        y = x * 1.0
        y[idx([0, 2])] = v
        return y

    check_grad(fn, rand(3, 2), rand(2))

    def fn_value_dtype(x, v):
        y = x * 1.0
        y[idx([1])] = v
        return y

    gv = ms.grad(fn_value_dtype, 1)(Tensor(np.zeros((2, 2))), Tensor(np.ones(2, np.float32)))
    assert gv.dtype == ms.float32
    np.testing.assert_array_equal(gv.asnumpy(), [1, 1])


def assign(x, v):
    y = x * 1.0
    call("assign", (y, v))
    return y


def test_assign_gradients():
    check_grad(lambda x, v: assign(x, v) * x, rand(2, 3), rand(2, 3))
    check_grad(assign, rand(2, 3), rand(3))
    check_grad(assign, rand(2, 3), rand(2, 1))
    check_grad(assign, rand(4), rand())


def test_assign_gradient_goes_to_value_only():
    gx, gv = ms.grad(lambda x, v: assign(x, v) * 3.0, (0, 1))(
        Tensor(np.ones((2, 2))), Tensor(np.ones(2, np.float32)))
    np.testing.assert_array_equal(gx.asnumpy(), np.zeros((2, 2)))
    assert gv.dtype == ms.float32
    np.testing.assert_array_equal(gv.asnumpy(), [6, 6])


def test_depend_expr_gets_no_gradient():
    gv, ge = ms.grad(lambda v, e: ops.depend(v, e) * 2.0, (0, 1))(
        Tensor(np.ones(2)), Tensor(np.ones(3)))
    np.testing.assert_array_equal(gv.asnumpy(), [2, 2])
    np.testing.assert_array_equal(ge.asnumpy(), [0, 0, 0])


# ---- inputs that are views, and chains of views

def test_view_inputs():
    base = Tensor(rand(4, 6))
    x = base[::2, 1::2]  # non-contiguous
    g = ms.grad(lambda t: ops.reshape(ops.transpose(t, (1, 0)), (-1,)) *
                           Tensor(np.arange(6.0)))(x)
    want = np.arange(6.0).reshape(3, 2).T
    np.testing.assert_array_equal(g.asnumpy(), want)
    g = ms.grad(lambda t: ops.broadcast_to(t, (3, 2, 3)))(x)
    np.testing.assert_array_equal(g.asnumpy(), np.full((2, 3), 3.0))


VIEW_CHAINS = [
    ("transpose_reshape", lambda x: ops.reshape(ops.transpose(x, (1, 0)), (-1,)), (3, 4)),
    ("slice_transpose_slice", lambda x: ops.transpose(x[1:], (1, 0))[::2], (4, 3)),
    ("broadcast_slice", lambda x: ops.broadcast_to(x, (3, 4))[:, 1:3], (1, 4)),
    ("expand_broadcast_squeeze", lambda x: ops.squeeze(
        ops.broadcast_to(ops.expand_dims(x, 1), (3, 2, 2)), None)[:, 0], (3, 2)),
    ("split_of_transpose", lambda x: ops.split(ops.transpose(x, (1, 0)), [1, 2], 0)[1], (2, 3)),
    ("gather_of_slice", lambda x: ops.gather(x[:, ::2], idx([1, 0, 1]), 1), (2, 4)),
    ("index_of_transpose", lambda x: ops.transpose(x, (1, 0))[idx([2, 0])], (2, 3)),
]


@pytest.mark.parametrize("name,fn,shape", VIEW_CHAINS, ids=[v[0] for v in VIEW_CHAINS])
def test_view_chain_gradients(name, fn, shape):
    check_grad(fn, rand(*shape))


# ---- ops without a gradient

def test_non_differentiable_ops_give_zeros_without_error():
    x = Tensor(np.array([[0.0, 1.5], [-2.0, 0.0]]))

    def fn(t):
        nz = ops.cast(ops.nonzero(t), ms.float64)  # integer result: no gradient path
        made = ops.zeros((2, 2), ms.float64) + ops.ones_like(t)
        made = made + ops.full((2,), 2.0, dtype=ms.float64)
        noise = ops.rand(2, 2, dtype=ms.float64) + ops.randn(2, dtype=ms.float64)
        hot = ops.cast(ops.one_hot(ms.Tensor([1, 0]), 2), ms.float64)
        r = ops.cast(ops.arange(2), ms.float64)
        return nz + made + noise + hot + r + t * 0.0  # (2, 2); sens is ones

    g = ms.grad(fn)(x)
    np.testing.assert_array_equal(g.asnumpy(), np.zeros((2, 2)))


def test_creation_only_output_has_zero_gradient():
    g = ms.grad(lambda t: ops.zeros_like(t) + ops.full((2,), 1.0, dtype=ms.float64))(
        Tensor(np.ones(2)))
    np.testing.assert_array_equal(g.asnumpy(), [0, 0])


@pytest.mark.parametrize("name", ["nonzero", "one_hot", "fill", "arange", "uniform_real",
                                  "standard_normal", "strided_slice_grad"])
def test_every_op_of_the_family_has_a_gradient_rule(name):
    schema = ms._C.op_schema(ms.ops._core.KIND[name])
    assert schema["has_grad"]


@pytest.mark.parametrize("src,dst", [((2, 3, 4), (3, 1)), ((4, 1, 3), (1, 1, 3)), ((3, 2), (3, 2))])
def test_sum_to_like_gradient_matches_finite_differences_in_both_modes(src, dst):
    like = Tensor(np.zeros(dst))

    def fn(x):
        return call("sum_to_like", (x, like))

    check_grad(fn, rand(*src))
    a = rand(*src)
    weight = Tensor(np.random.default_rng(1).uniform(0.5, 1.5, size=dst))
    graph = ms.jit(ms.grad(weighted_sum_to_like))(Tensor(a), like, weight)
    eager = ms.grad(weighted_sum_to_like)(Tensor(a), like, weight)
    np.testing.assert_allclose(graph.asnumpy(), eager.asnumpy(), rtol=1e-12)


def weighted_sum_to_like(x, like, weight):
    return (call("sum_to_like", (x, like)) * weight).sum()
