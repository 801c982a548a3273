"""Activation ops and layers of the API-breadth work vs NumPy: values, dtypes, finite-difference
gradients, and PyNative vs compiled (ms.jit and a Cell under GRAPH_MODE)."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes
from helpers import FLOAT_DTYPES, assert_close, random_array, to_kiln

import kiln as ms
from kiln import nn, ops

RNG = np.random.default_rng(7)
SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def np_softplus(x, beta=1.0, threshold=20.0):
    z = beta * x
    return np.where(z > threshold, x, np.logaddexp(0.0, z) / beta)


def np_elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


REFERENCES = {
    "leaky_relu": (lambda x: ops.leaky_relu(x), lambda x: np.maximum(0.2 * x, x)),
    "leaky_relu_big": (lambda x: ops.leaky_relu(x, 1.5), lambda x: np.minimum(1.5 * x, x)),
    "elu": (lambda x: ops.elu(x, 0.7), lambda x: np_elu(x, 0.7)),
    "celu": (lambda x: ops.celu(x, 2.0), lambda x: np.where(x > 0, x, 2 * np.expm1(x / 2))),
    "selu": (ops.selu, lambda x: SELU_S * np_elu(x, SELU_A)),
    "relu6": (ops.relu6, lambda x: np.clip(x, 0, 6)),
    "hardsigmoid": (ops.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    "hardswish": (ops.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "hardtanh": (lambda x: ops.hardtanh(x, -0.5, 2.0), lambda x: np.clip(x, -0.5, 2.0)),
    "mish": (ops.mish, lambda x: x * np.tanh(np.logaddexp(0.0, x))),
    "softplus": (ops.softplus, np_softplus),
    "softplus_beta": (lambda x: ops.softplus(x, 2, 3), lambda x: np_softplus(x, 2.0, 3.0)),
    "softplus_negative_beta": (lambda x: ops.softplus(x, -1.5, 2),
                               lambda x: np_softplus(x, -1.5, 2.0)),
    "softplus_strided": (lambda x: ops.softplus(x[::2]), lambda x: np_softplus(x[::2])),
    "softsign": (ops.softsign, lambda x: x / (1 + np.abs(x))),
    "logsigmoid": (ops.logsigmoid, lambda x: -np.logaddexp(0.0, -x)),
    "log1p": (ops.log1p, np.log1p),
    "softmin": (lambda x: ops.softmin(x, 0), lambda x: np.exp(-x) / np.exp(-x).sum(0)),
    "threshold": (lambda x: ops.threshold(x, 1.0, -3.0), lambda x: np.where(x > 1, x, -3.0)),
    "tanhshrink": (ops.tanhshrink, lambda x: x - np.tanh(x)),
    "softshrink": (lambda x: ops.softshrink(x, 0.7),
                   lambda x: np.where(np.abs(x) > 0.7, x - 0.7 * np.sign(x), 0)),
    "hardshrink": (lambda x: ops.hardshrink(x, 0.7), lambda x: np.where(np.abs(x) > 0.7, x, 0)),
    "expm1": (ops.expm1, np.expm1),
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_values_against_numpy_float64(name):
    fn, ref = REFERENCES[name]
    x = np.concatenate([RNG.uniform(-8, 8, 40), [-40.0, -1e-9, 0.0, 1e-9, 0.5, 40.0]])
    if name == "log1p":
        x = np.abs(x) + np.array([0.0] * 43 + [1e-12, 1e-7, 3.0])
    got = fn(ms.Tensor(x))
    assert got.dtype == ms.float64
    assert_close(got, ref(x), ms.float64, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", ["leaky_relu", "elu", "hardswish", "mish", "softplus",
                                  "logsigmoid"])
def test_float_dtypes_keep_their_dtype(name, dtype, np_dtype):
    fn, ref = REFERENCES[name]
    x = random_array((3, 5), np_dtype, RNG)
    got = fn(to_kiln(x, dtype))
    assert got.dtype == dtype
    assert_close(got, ref(to_kiln(x, dtype).asnumpy().astype(np.float64)), dtype)


def test_small_arguments_keep_their_digits():
    x = np.array([-30.0, -1e-6, 1e-7], np.float32)
    assert_close(ops.softplus(ms.Tensor(x)), np.logaddexp(0, x.astype(np.float64)), ms.float32,
                 rtol=1e-6, atol=0)
    assert_close(ops.log1p(ms.Tensor(x[1:] * -1)), np.log1p(-x[1:].astype(np.float64)),
                 ms.float32, rtol=1e-6, atol=0)


@pytest.mark.parametrize("beta,threshold", [(1, 20), (0.5, 4), (-2, 3)])
def test_softplus_over_many_chunks_and_threads(beta, threshold):
    # float32 runs go through the op's chunked loops (256 values) split over threads.
    x = RNG.uniform(-60, 60, 100_003).astype(np.float32)
    x[::97] = 0.0
    want = np_softplus(x.astype(np.float64), beta, threshold)
    assert_close(ops.softplus(ms.Tensor(x), beta, threshold), want, ms.float32, rtol=2e-6,
                 atol=1e-30)
    assert_close(ops.mish(ms.Tensor(x)), x * np.tanh(np.logaddexp(0.0, x.astype(np.float64))),
                 ms.float32, rtol=2e-6, atol=1e-30)


@pytest.mark.parametrize("name", sorted(set(REFERENCES) - {"relu6", "hardtanh"}))
def test_gradients_by_finite_differences(name):
    fn, _ = REFERENCES[name]
    x = RNG.uniform(-4, 4, (2, 5))
    # away from the kinks of the hard activations and shrinks
    x = x[(np.abs(np.abs(x) - 3) > 0.05) & (np.abs(np.abs(x) - 0.7) > 0.05) &
          (np.abs(x - 1) > 0.05)]
    if name == "log1p":
        x = np.abs(x)
    check_grad(fn, x.reshape(-1), rtol=1e-5, atol=1e-7)


def test_gradients_stay_finite_where_a_branch_overflows():
    # (expm1 itself legitimately overflows to inf at 200 in float32, its gradient with it.)
    x = ms.Tensor(np.array([-200.0, -50.0, 0.5, 50.0, 200.0], np.float32))
    for fn in (ops.elu, ops.selu, ops.celu, ops.softplus, ops.mish, ops.logsigmoid):
        grad = ms.grad(lambda t, f=fn: ops.sum(f(t)))(x)
        assert np.all(np.isfinite(grad.asnumpy())), fn.__name__


def test_prelu_per_channel_and_scalar():
    x = RNG.standard_normal((2, 3, 4))
    w = np.array([0.1, -0.2, 0.3])
    ref = np.maximum(x, 0) + w[None, :, None] * np.minimum(x, 0)
    assert_close(ops.prelu(ms.Tensor(x), ms.Tensor(w)), ref, ms.float64)
    one = ops.prelu(ms.Tensor(x), ms.Tensor(np.array([0.25])))
    assert_close(one, np.maximum(x, 0) + 0.25 * np.minimum(x, 0), ms.float64)
    check_grad(ops.prelu, x, w)
    with pytest.raises(ValueError, match="prelu: weight has 2 values"):
        ops.prelu(ms.Tensor(x), ms.Tensor(np.ones(2)))


def test_integer_inputs_are_type_errors_naming_the_op():
    with pytest.raises(TypeError, match="leaky_relu: input must be a floating-point"):
        ops.leaky_relu(ms.Tensor(np.arange(3)))
    with pytest.raises(TypeError, match="mish: x must be a Tensor"):
        ops.mish([1.0])
    with pytest.raises(ValueError, match="softplus: beta"):
        ops.softplus(ms.Tensor(np.ones(2)), beta=0)


LAYERS = [
    (lambda: nn.LeakyReLU(), lambda x: np.maximum(0.2 * x, x)),
    (lambda: nn.LeakyReLU(alpha=0.05), lambda x: np.maximum(0.05 * x, x)),
    (lambda: nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (lambda: nn.ELU(), np_elu),
    (lambda: nn.HSwish(), lambda x: x * np.clip(x + 3, 0, 6) / 6),
    (lambda: nn.HSigmoid(), lambda x: np.clip(x + 3, 0, 6) / 6),
    (lambda: nn.Mish(), lambda x: x * np.tanh(np.logaddexp(0.0, x))),
    (lambda: nn.ReLU6(), lambda x: np.clip(x, 0, 6)),
    (lambda: nn.SeLU(), lambda x: SELU_S * np_elu(x, SELU_A)),
    (lambda: nn.Softsign(), lambda x: x / (1 + np.abs(x))),
    (lambda: nn.LogSigmoid(), lambda x: -np.logaddexp(0.0, -x)),
    (lambda: nn.CELU(), np_elu),
    (lambda: nn.Hardtanh(), lambda x: np.clip(x, -1, 1)),
    (lambda: nn.PReLU(), lambda x: np.maximum(x, 0) + 0.25 * np.minimum(x, 0)),
    (lambda: nn.Softmin(), lambda x: np.exp(-x) / np.exp(-x).sum(-1, keepdims=True)),
    (lambda: nn.Softmax2d(), lambda x: np.exp(x) / np.exp(x).sum(-3, keepdims=True)),
    (lambda: nn.Tanhshrink(), lambda x: x - np.tanh(x)),
    (lambda: nn.SoftShrink(1.5), lambda x: np.where(np.abs(x) > 1.5, x - 1.5 * np.sign(x), 0)),
    (lambda: nn.HShrink(), lambda x: np.where(np.abs(x) > 0.5, x, 0)),
    (lambda: nn.Threshold(0.2, 7.0), lambda x: np.where(x > 0.2, x, 7.0)),
    (lambda: nn.GLU(-1), lambda x: x[..., :2] / (1 + np.exp(-x[..., 2:]))),
]


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("index", range(len(LAYERS)))
def test_layers_in_both_modes(index, mode):
    make, ref = LAYERS[index]
    x = RNG.uniform(-5, 5, (2, 1, 3, 4)).astype(np.float32)
    layer = make()
    if mode == "graph":
        ms.set_context(mode=ms.GRAPH_MODE)
    try:
        got = layer(ms.Tensor(x))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert got.dtype == ms.float32
    assert_close(got, ref(x.astype(np.float64)), ms.float32, rtol=1e-5, atol=1e-6)


def test_functional_activations_compile_like_they_run():
    x = ms.Tensor(RNG.uniform(-5, 5, (3, 4)).astype(np.float32))

    def many(t):
        return (ops.leaky_relu(t), ops.elu(t), ops.hardswish(t), ops.mish(t), ops.softplus(t),
                ops.logsigmoid(t), ops.selu(t), ops.softsign(t))

    assert_same_in_both_modes(many, x)


def test_prelu_layer_parameter_and_training():
    layer = nn.PReLU(channel=3, w=0.1)
    (param,) = layer.trainable_params()
    assert param.name == "a" and param.shape == (3,)
    np.testing.assert_allclose(param.asnumpy(), [0.1] * 3)
    x = ms.Tensor(-np.ones((2, 3, 2), np.float32))
    grad = ms.grad(lambda t: ops.sum(layer(t)), grad_position=None, weights=[param])(x)
    np.testing.assert_allclose(grad[0].asnumpy(), [-4.0] * 3)
    with pytest.raises(ValueError, match="PReLU"):
        nn.PReLU(channel=2, w=[0.1, 0.2, 0.3])
    with pytest.raises(TypeError, match="LeakyReLU: alpha"):
        nn.LeakyReLU("0.2")


def test_glu_and_rrelu():
    x = RNG.standard_normal((2, 6))
    check_grad(lambda t: ops.glu(t, 1), x)
    with pytest.raises(ValueError, match="glu: the size of axis 0 must be even"):
        ops.glu(ms.Tensor(RNG.standard_normal((3, 2))), 0)
    ms.set_seed(5)
    y = ops.rrelu(ms.Tensor(np.full((1000,), -2.0, np.float32)), 0.1, 0.3).asnumpy()
    assert np.all((y <= -0.2 + 1e-6) & (y >= -0.6 - 1e-6)) and np.std(y) > 0.01
    np.testing.assert_array_equal(nn.RReLU()(ms.Tensor(np.ones(4, np.float32))).asnumpy(), 1.0)
    with pytest.raises(ValueError, match="RReLU: upper must be >= lower"):
        nn.RReLU(0.5, 0.1)


def test_get_activation_knows_the_new_names():
    assert isinstance(nn.get_activation("leakyrelu"), nn.LeakyReLU)
    assert isinstance(nn.get_activation("hswish"), nn.HSwish)
    assert isinstance(nn.get_activation("silu"), nn.SiLU)
    assert isinstance(nn.get_activation("softshrink"), nn.SoftShrink)
    with pytest.raises(KeyError):
        nn.get_activation("selu")          # not one of MindSpore 2.10's names
    dense = nn.Dense(3, 2, activation="mish")
    assert isinstance(dense.activation, nn.Mish)
