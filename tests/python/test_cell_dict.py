"""nn.CellDict: cells by name, registered as children, in both modes."""
from collections import OrderedDict

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(8)


class Branches(nn.Cell):
    def __init__(self):
        super().__init__()
        self.heads = nn.CellDict({"wide": nn.Dense(4, 6), "narrow": nn.Dense(4, 2)})
        self.act = nn.CellDict([("relu", nn.ReLU()), ("tanh", nn.Tanh())])

    def construct(self, x):
        total = ops.sum(self.act["relu"](self.heads["wide"](x)))
        for _, head in self.heads.items():
            total = total + ops.sum(self.act["tanh"](head(x)))
        for act in self.act.values():
            total = total + ops.sum(act(x))
        return total


def test_parameters_are_registered_under_their_keys():
    net = Branches()
    names = [p.name for p in net.trainable_params()]
    assert names == ["heads.wide.weight", "heads.wide.bias", "heads.narrow.weight",
                     "heads.narrow.bias"]


def test_graph_mode_agrees_with_pynative_values_and_gradients():
    ms.set_seed(2)
    net = Branches()
    x = Tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    grad_fn = ms.value_and_grad(net, None, net.trainable_params())
    loss, grads = grad_fn(x)
    ms.set_context(mode=ms.GRAPH_MODE)
    loss_g, grads_g = ms.jit(grad_fn)(x)
    np.testing.assert_allclose(loss_g.asnumpy(), loss.asnumpy(), rtol=1e-6)
    for a, b in zip(grads_g, grads):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-7)


def test_dict_methods():
    relu, tanh, dense = nn.ReLU(), nn.Tanh(), nn.Dense(2, 2)
    cells = nn.CellDict(OrderedDict(relu=relu))
    cells["tanh"] = tanh
    cells.update([("dense", dense)])
    assert list(cells) == ["relu", "tanh", "dense"] and len(cells) == 3
    assert list(cells.keys()) == ["relu", "tanh", "dense"]
    assert list(cells.values()) == [relu, tanh, dense]
    assert "tanh" in cells and "sigmoid" not in cells
    assert cells.pop("tanh") is tanh and list(cells) == ["relu", "dense"]
    cells["relu"] = tanh  # a replaced cell keeps its place
    assert list(cells.items()) == [("relu", tanh), ("dense", dense)]
    del cells["relu"]
    assert list(cells) == ["dense"] and len(cells.trainable_params()) == 2
    cells.clear()
    assert len(cells) == 0 and not cells.trainable_params()
    assert len(nn.CellDict(nn.CellDict({"a": relu}))) == 1


def test_bad_keys_items_and_calls_raise():
    cells = nn.CellDict()
    with pytest.raises(KeyError, match="child name"):
        cells["a.b"] = nn.ReLU()
    with pytest.raises(KeyError, match="child name"):
        cells[""] = nn.ReLU()
    with pytest.raises(TypeError, match="must be a Cell"):
        cells["x"] = 3
    with pytest.raises(KeyError, match="no cell named 'missing'"):
        cells["missing"]
    with pytest.raises(TypeError, match="pair"):
        nn.CellDict([nn.ReLU()])
    with pytest.raises(NotImplementedError, match="container"):
        cells(Tensor(np.ones(2, np.float32)))
