"""The seed network of SPEC section 4, written exactly as there; mode 1 (PyNative)."""
import numpy as np  # noqa: I001 - the imports exactly as SPEC section 4 writes them
import kiln as ms
from kiln import nn, Tensor


class Network(nn.Cell):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.dense_relu_sequential = nn.SequentialCell(
            nn.Dense(28 * 28, 512), nn.ReLU(),
            nn.Dense(512, 512), nn.ReLU(),
            nn.Dense(512, 10))

    def construct(self, x):
        x = self.flatten(x)
        return self.dense_relu_sequential(x)


x = Tensor(np.ones([64, 1, 28, 28]).astype(np.float32))   # logits: (64, 10)


def test_mode_1_pynative():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    logits = Network()(x)
    assert isinstance(logits, ms.Tensor)
    assert logits.shape == (64, 10) and logits.dtype == ms.float32


def test_pynative_matches_numpy_forward():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    net = Network()
    data = np.random.default_rng(0).standard_normal((8, 1, 28, 28)).astype(np.float32)
    params = {p.name: p.asnumpy().astype(np.float64) for p in net.get_parameters()}
    h = data.reshape(8, -1)
    for i, relu in ((0, True), (2, True), (4, False)):
        h = h @ params[f"dense_relu_sequential.{i}.weight"].T + \
            params[f"dense_relu_sequential.{i}.bias"]
        if relu:
            h = np.maximum(h, 0)
    np.testing.assert_allclose(net(Tensor(data)).asnumpy(), h, rtol=1e-4, atol=1e-5)


def test_parameter_names_and_shapes():
    net = Network()
    assert [(p.name, p.shape) for p in net.trainable_params()] == [
        ("dense_relu_sequential.0.weight", (512, 784)), ("dense_relu_sequential.0.bias", (512,)),
        ("dense_relu_sequential.2.weight", (512, 512)), ("dense_relu_sequential.2.bias", (512,)),
        ("dense_relu_sequential.4.weight", (10, 512)), ("dense_relu_sequential.4.bias", (10,)),
    ]


def test_same_seed_same_logits():
    ms.set_seed(42)
    a = Network()(x).asnumpy()
    ms.set_seed(42)
    b = Network()(x).asnumpy()
    np.testing.assert_array_equal(a, b)
