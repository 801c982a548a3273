"""jit applied to a Cell: an instance (jit(net) compiles net's construct with net as self) and a
Cell class (@jit on the class compiles its construct, and instances still run Cell.__call__)."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn


class Scaled(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 3)

    def construct(self, x):
        return self.fc(x) * 2


def pynative(net, x):
    """net's construct run op by op, whatever jit did to its class."""
    return (net.fc(x) * 2).asnumpy()


X = Tensor(np.arange(8, dtype=np.float32).reshape(2, 4) / 8)


def test_jit_of_an_instance_runs_its_construct_compiled():
    ms.set_seed(0)
    net = Scaled()
    graph = ms.jit(net)
    compiles = ms.get_jit_stats()["compiles"]
    np.testing.assert_allclose(graph(X).asnumpy(), pynative(net, X), rtol=1e-6)
    assert ms.get_jit_stats()["compiles"] == compiles + 1
    graph(X)
    assert ms.get_jit_stats()["compiles"] == compiles + 1  # cached per input signature


def test_jit_of_an_instance_reads_the_weights_at_each_call():
    ms.set_seed(0)
    net = Scaled()
    graph = ms.jit(net)
    before = graph(X).asnumpy()
    net.fc.weight.set_data(Tensor(np.zeros((3, 4), np.float32)))
    after = graph(X).asnumpy()
    np.testing.assert_allclose(after, pynative(net, X), rtol=1e-6)
    assert not np.allclose(before, after)


def test_jit_of_an_instance_is_differentiable():
    ms.set_seed(0)
    net = Scaled()
    graph = ms.jit(net)
    grad_fn = ms.value_and_grad(lambda x: graph(x).sum(), None, net.trainable_params())
    loss, grads = grad_fn(X)
    np.testing.assert_allclose(loss.asnumpy(), pynative(net, X).sum(), rtol=1e-6)
    # d/dW sum(2 (x W^T + b)) = 2 * column sums of x, the same for every output row.
    expected = np.tile(2 * X.asnumpy().sum(axis=0), (3, 1))
    np.testing.assert_allclose(grads[0].asnumpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(grads[1].asnumpy(), np.full(3, 4.0), rtol=1e-6)


def test_jit_on_a_cell_class_compiles_construct_and_keeps_the_hooks():
    @ms.jit
    class Decorated(Scaled):
        def construct(self, x):
            return self.fc(x) * 2

    assert isinstance(Decorated, type) and issubclass(Decorated, nn.Cell)
    ms.set_seed(0)
    net = Decorated()
    seen = []
    net.register_forward_hook(lambda cell, args, out: seen.append(out.shape))
    compiles = ms.get_jit_stats()["compiles"]
    np.testing.assert_allclose(net(X).asnumpy(), pynative(net, X), rtol=1e-6)
    assert ms.get_jit_stats()["compiles"] == compiles + 1
    assert seen == [(2, 3)]


def test_a_subclass_of_a_decorated_class_and_jit_of_its_instance():
    @ms.jit
    class Decorated(Scaled):
        pass

    class Shifted(Decorated):
        def construct(self, x):
            return self.fc(x) * 2 + 1

    ms.set_seed(0)
    base, shifted = Decorated(), Shifted()
    np.testing.assert_allclose(ms.jit(base)(X).asnumpy(), pynative(base, X), rtol=1e-6)
    np.testing.assert_allclose(shifted(X).asnumpy(), pynative(shifted, X) + 1, rtol=1e-6)
    np.testing.assert_allclose(ms.jit(shifted)(X).asnumpy(), pynative(shifted, X) + 1,
                               rtol=1e-6)


def test_jit_still_refuses_what_is_not_callable():
    with pytest.raises(TypeError, match="jit: expected a function, got int"):
        ms.jit(3)
