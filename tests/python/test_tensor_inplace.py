"""In-place Tensor methods: real writes (aliases see them), both modes, and autodiff."""
import functools

import numpy as np
import pytest

import kiln as ms
from kiln import Parameter, Tensor, nn, ops

RNG = np.random.default_rng(1)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)
I = np.arange(12, dtype=np.int32).reshape(3, 4) - 5

# (id, in-place call, numpy reference of the new value, inputs: the first is written)
CASES = [
    ("add_", lambda x, y: x.add_(y, alpha=2), lambda a, b: a + 2 * b, (A, B)),
    ("add_row", lambda x, y: x.add_(y[0]), lambda a, b: a + b[0], (A, B)),
    ("sub_", lambda x, y: x.sub_(y), lambda a, b: a - b, (A, B)),
    ("mul_", lambda x, y: x.mul_(y), lambda a, b: a * b, (A, B)),
    ("div_", lambda x, y: x.div_(y), lambda a, b: a / b, (A, np.abs(B) + 1)),
    ("div_int", lambda x: x.div_(4), lambda a: np.trunc(a / 4).astype(np.int32), (I,)),
    ("div_floor", lambda x: x.div_(4, rounding_mode="floor"), lambda a: a // 4, (I,)),
    ("add_int_float", lambda x: x.add_(1.5), lambda a: np.trunc(a + 1.5).astype(np.int32), (I,)),
    ("floor_divide_", lambda x: x.floor_divide_(3), lambda a: a // 3, (I,)),
    ("remainder_", lambda x: x.remainder_(3), lambda a: np.remainder(a, 3), (I,)),
    ("pow_", lambda x: x.pow_(2), np.square, (A,)),
    ("copy_", lambda x, y: x.copy_(y), lambda a, b: b, (A, B)),
    ("copy_cast", lambda x, y: x.copy_(y), lambda a, b: b.astype(np.float32), (A, I)),
    ("fill_", lambda x: x.fill_(2.5), lambda a: np.full_like(a, 2.5), (A,)),
    ("zero_", lambda x: x.zero_(), np.zeros_like, (I,)),
    ("clamp_", lambda x: x.clamp_(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), (A,)),
    ("masked_fill_", lambda x: x.masked_fill_(x > 0, 7.0), lambda a: np.where(a > 0, 7, a), (A,)),
    ("exp_", lambda x: x.exp_(), np.exp, (A,)),
    ("log_", lambda x: x.log_(), np.log, (np.abs(A) + 0.1,)),
    ("floor_", lambda x: x.floor_(), np.floor, (A,)),
    ("sigmoid_", lambda x: x.sigmoid_(), lambda a: 1 / (1 + np.exp(-a)), (A,)),
    ("tanh_", lambda x: x.tanh_(), np.tanh, (A,)),
    ("sign_", lambda x: x.sign_(), np.sign, (A,)),
    ("abs_", lambda x: x.abs_(), np.abs, (A,)),
    ("fill_diagonal_", lambda x: x.fill_diagonal_(5.0), lambda a: a - np.diag(np.diag(a)) +
     np.diag([5.0] * 3).astype(np.float32), (A[:, :3].copy(),)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_inplace_writes_self_in_pynative(case):
    _, method, ref, inputs = case
    x = Tensor(inputs[0].copy())
    alias = x[:]  # a view of x: sees the write
    out = method(x, *(Tensor(a) for a in inputs[1:]))
    assert out is x
    want = ref(*inputs)
    assert x.dtype == Tensor(inputs[0]).dtype
    np.testing.assert_allclose(x.asnumpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(alias.asnumpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_inplace_in_graph_mode_writes_back_the_argument(case):
    _, method, ref, inputs = case

    @ms.jit
    def f(x, *rest):
        y = x  # another name for the same tensor sees the write
        r = method(x, *rest)
        return r, y, x

    x = Tensor(inputs[0].copy())
    r, y, x_after = f(x, *(Tensor(a) for a in inputs[1:]))
    want = ref(*inputs)
    for got in (r, y, x_after, x):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_random_inplace_methods_fill_with_samples():
    x = Tensor(np.zeros(2000, np.float32))
    assert x.uniform_(2, 3) is x
    assert 2 <= x.asnumpy().min() and x.asnumpy().max() < 3
    x.normal_(1.0, 0.5)
    assert abs(x.asnumpy().mean() - 1.0) < 0.1 and abs(x.asnumpy().std() - 0.5) < 0.1
    x.exponential_(2.0)
    assert x.asnumpy().min() >= 0 and abs(x.asnumpy().mean() - 0.5) < 0.1


def test_write_that_would_change_shape_raises():
    x = Tensor(A.copy())
    with pytest.raises(ValueError, match="add_"):
        x.add_(Tensor(np.ones((2, 3, 4), np.float32)))
    with pytest.raises(ValueError):
        ms.jit(lambda t: t.mul_(Tensor(np.ones((2, 3, 4), np.float32))))(x)


def test_copy_from_an_overlapping_view():
    x = Tensor(np.arange(9, dtype=np.float32).reshape(3, 3))
    x.copy_(x.T)
    np.testing.assert_array_equal(x.asnumpy(), np.arange(9).reshape(3, 3).T)


def test_index_put_and_index_put_():
    idx = (Tensor(np.array([0, 2, 0])), Tensor(np.array([1, 1, 1])))
    vals = Tensor(np.array([1.0, 2.0, 3.0], np.float32))
    x = Tensor(A.copy())
    want = A.copy()
    np.add.at(want, (np.array([0, 2, 0]), np.array([1, 1, 1])), [1.0, 2.0, 3.0])
    assert x.index_put_(idx, vals, accumulate=True) is x
    np.testing.assert_allclose(x.asnumpy(), want, rtol=1e-6)
    put = Tensor(A).index_put(idx[:1], Tensor(np.float32(4.0)))
    want = A.copy()
    want[[0, 2]] = 4.0
    np.testing.assert_allclose(put.asnumpy(), want)


def _grad_case(a):
    y = a * 2
    z = y * y  # mul's rule reads y: the write below must not change what it reads
    y.mul_(a)
    y.add_(z, alpha=0.5)
    return (y * z).sum()


def test_gradients_through_inplace_methods_in_both_modes():
    a = np.array([1.0, 2.0, -1.5], np.float32)
    # y = 2a^2 + 2a^2 = 4a^2 ; z = 4a^2 ; out = 16 a^4 -> 64 a^3
    want = 64 * a ** 3
    for fn in (_grad_case, ms.jit(_grad_case)):
        np.testing.assert_allclose(ms.grad(fn)(Tensor(a)).asnumpy(), want, rtol=1e-5)


def test_gradient_of_written_value_goes_to_the_source():
    def f(a, b):
        y = a * 1
        y.copy_(b * 3)  # a's elements are all overwritten: no gradient to a
        return y.sum()

    a, b = Tensor(A), Tensor(B)
    for fn in (f, ms.jit(f)):
        ga, gb = ms.grad(fn, grad_position=(0, 1))(a, b)
        np.testing.assert_allclose(ga.asnumpy(), 0)
        np.testing.assert_allclose(gb.asnumpy(), 3)


class _Counter(nn.Cell):
    def __init__(self):
        super().__init__()
        self.n = Parameter(Tensor(np.zeros(2, np.float32)), name="n")

    def construct(self, v):
        self.n.add_(v)
        self.n.mul_(2)
        return self.n + 0


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_parameter_updated_in_place_by_a_cell(mode):
    ms.set_context(mode=mode)
    net = _Counter()
    one = Tensor(np.ones(2, np.float32))
    net(one)
    out = net(one)
    np.testing.assert_allclose(net.n.asnumpy(), [6.0, 6.0])
    np.testing.assert_allclose(out.asnumpy(), [6.0, 6.0])


def test_graph_tensor_setitem_writes_back_each_time():
    @ms.jit
    def f(x):
        x[0] = 5.0
        x[1] = 7.0
        return x

    x = Tensor(np.zeros(3, np.float32))
    f(x)
    np.testing.assert_array_equal(x.asnumpy(), [5, 7, 0])


def _scaled_copy(x, k=2.0):
    b = ops.zeros((3,), ms.float32)
    b.add_(x[:3])
    b.mul_(k)
    return b


_CALLABLES = [_scaled_copy]


class _Scaler:
    def __call__(self, x):
        return _scaled_copy(x)


_SCALER = _Scaler()
_PARTIAL = functools.partial(_scaled_copy, k=2.0)


def _through_a_default(x, fn=_scaled_copy):
    return fn(x).sum()


def _through_a_lambda(x):
    bump = lambda y: y.add_(1.0)  # noqa: E731 - the pattern under test
    z = x * 1
    bump(z)
    return z.sum()


def test_in_place_methods_in_a_function_reached_through_a_default_or_a_lambda():
    x = Tensor(np.array([1.5, -2.0, 3.0, 0.5], np.float32))
    for fn in (_through_a_default, _through_a_lambda):
        want = float(fn(x).asnumpy())
        assert float(ms.jit(fn)(x).asnumpy()) == pytest.approx(want), fn.__name__
    grad = ms.jit(ms.grad(_through_a_default))(x).asnumpy()
    np.testing.assert_allclose(grad, [2.0, 2.0, 2.0, 0.0])


def _through_a_partial(x):
    return _PARTIAL(x).sum()


def _branchy(x, scale):
    if x.sum() > 0:  # a tensor condition: compiled code, not plain Python
        return x * scale
    return x - scale


_BRANCHY = functools.partial(_branchy, scale=Tensor(np.float32(3.0)))


def _through_a_partial_with_a_bound_tensor(x):
    return _BRANCHY(x).sum()


@pytest.mark.parametrize("fn", [_through_a_partial, _through_a_partial_with_a_bound_tensor])
def test_a_partial_of_a_user_function_compiles_from_source(fn):
    for row in ([1.5, -2.0, 3.0, 0.5], [-1.5, -2.0, 3.0, -0.5]):
        x = Tensor(np.array(row, np.float32))
        assert float(ms.jit(fn)(x).asnumpy()) == pytest.approx(float(fn(x).asnumpy()))


@pytest.mark.parametrize("reach", ["list", "callable object"])
def test_in_place_methods_in_code_run_as_plain_python_are_refused(reach):
    def through(x):
        if reach == "list":
            return _CALLABLES[0](x).sum()
        return _SCALER(x).sum()

    x = Tensor(np.array([1.5, -2.0, 3.0, 0.5], np.float32))
    assert float(through(x).asnumpy()) == pytest.approx(5.0)  # PyNative
    with pytest.raises(TypeError, match=r"add_: .*runs as plain Python.*would be lost"):
        ms.jit(through)(x)
