"""nn.Cell and Parameter: registration, hierarchical names, traversal, modes, repr, containers."""
import copy
from collections import OrderedDict

import numpy as np
import pytest

import kiln as ms
from kiln import Parameter, ParameterTuple, Tensor, nn


class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 3)
        self.scale = Parameter(Tensor(np.ones(3, np.float32)))
        self.act = nn.ReLU()

    def construct(self, x):
        return self.act(self.fc(x)) * self.scale


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.seq = nn.SequentialCell(nn.Dense(3, 5), nn.Tanh(), nn.Dense(5, 2))
        self.layers = nn.CellList([nn.Dense(2, 2), nn.Dense(2, 2)])

    def construct(self, x):
        x = self.seq(self.block(x))
        for layer in self.layers:
            x = layer(x)
        return x


# ---- Parameter ----

def test_parameter_is_a_tensor_with_a_name():
    p = Parameter(Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), name="w")
    assert isinstance(p, ms.Tensor)
    assert p.name == "w" and p.requires_grad is True
    assert p.shape == (2, 3) and p.dtype == ms.float32
    np.testing.assert_array_equal((p + 1).asnumpy(), np.arange(6).reshape(2, 3) + 1)
    assert "name=w" in repr(p)


def test_parameter_from_numbers_arrays_and_initializers():
    assert Parameter(3).dtype == ms.int32
    assert Parameter(1.5).dtype == ms.float32
    assert Parameter(np.zeros((2, 2), np.float64)).dtype == ms.float64
    p = Parameter(ms.common.initializer.initializer("ones", (2, 3)), name="o")
    np.testing.assert_array_equal(p.asnumpy(), np.ones((2, 3)))
    with pytest.raises(TypeError, match="Parameter"):
        Parameter("not data")


def test_parameter_set_data_is_in_place():
    p = Parameter(Tensor(np.zeros((2, 2), np.float32)), name="w")
    before = p._data_ptr
    out = p.set_data(Tensor(np.full((2, 2), 7, np.float32)))
    assert out is p and p._data_ptr == before
    np.testing.assert_array_equal(p.asnumpy(), np.full((2, 2), 7))
    p.set_data(np.ones((2, 2)))  # float64 array is converted to the parameter's dtype
    assert p.dtype == ms.float32
    np.testing.assert_array_equal(p.asnumpy(), np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        p.set_data(Tensor(np.zeros(3, np.float32)))


def test_parameter_clone_copies_data():
    p = Parameter(Tensor(np.ones(3, np.float32)), name="w", requires_grad=False)
    q = p.clone()
    assert q is not p and q.name == "w" and q.requires_grad is False
    q.set_data(Tensor(np.zeros(3, np.float32)))
    np.testing.assert_array_equal(p.asnumpy(), np.ones(3))
    assert isinstance(copy.deepcopy(p), Parameter)


def test_parameter_tuple():
    a = Parameter(Tensor(np.ones(2, np.float32)), name="a")
    b = Parameter(Tensor(np.ones(3, np.float32)), name="b")
    t = ParameterTuple([a, b])
    assert isinstance(t, tuple) and t[0] is a
    m = t.clone("moment", init="zeros")
    assert [p.name for p in m] == ["moment.a", "moment.b"]
    np.testing.assert_array_equal(m[1].asnumpy(), np.zeros(3))
    with pytest.raises(TypeError, match="Parameter"):
        ParameterTuple([a, Tensor(np.ones(2, np.float32))])
    with pytest.raises(ValueError, match="'a'"):
        ParameterTuple([a, Parameter(Tensor(np.ones(2, np.float32)), name="a")])


# ---- registration and names ----

def test_attributes_register_parameters_and_cells():
    b = Block()
    assert set(b._params) == {"scale"}
    assert set(b._cells) == {"fc", "act"}
    assert "scale" not in b.__dict__
    assert b.scale.name == "scale"  # an unnamed parameter takes its attribute's name


def test_hierarchical_unique_names():
    net = Net()
    names = [p.name for p in net.get_parameters()]
    assert names == [
        "block.scale", "block.fc.weight", "block.fc.bias",
        "seq.0.weight", "seq.0.bias", "seq.2.weight", "seq.2.bias",
        "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
    ]
    assert [n for n, _ in net.parameters_and_names()] == names
    assert len(set(names)) == len(names)
    net.check_names()


def test_parameters_and_names_lists_shared_parameters_once():
    class Tied(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a = nn.Dense(3, 3)
            self.b = nn.Dense(3, 3)
            self.b.weight = self.a.weight

        def construct(self, x):
            return self.b(self.a(x))

    net = Tied()
    params = list(net.get_parameters())
    assert len(params) == 3
    assert net.b.weight is net.a.weight


def test_trainable_and_untrainable_params():
    net = nn.SequentialCell(nn.Dense(2, 2), nn.BatchNorm1d(2))
    trainable = [p.name for p in net.trainable_params()]
    assert trainable == ["0.weight", "0.bias", "1.gamma", "1.beta"]
    assert [p.name for p in net.untrainable_params()] == ["1.moving_mean", "1.moving_variance"]
    assert list(net.parameters_dict()) == [p.name for p in net.get_parameters()]


def test_cells_and_names():
    net = Net()
    names = [n for n, _ in net.cells_and_names()]
    assert names[:4] == ["", "block", "block.fc", "block.act"]
    assert "seq.2" in names and "layers.1" in names
    assert list(net.name_cells()) == ["block", "seq", "layers"]


def test_assigning_tensor_to_a_parameter_attribute_updates_in_place():
    b = Block()
    p = b.scale
    b.scale = Tensor(np.full(3, 2, np.float32))
    assert b.scale is p
    np.testing.assert_array_equal(p.asnumpy(), np.full(3, 2))
    with pytest.raises(TypeError, match="scale"):
        b.scale = "x"


def test_missing_super_init_is_a_clear_error():
    class Bad(nn.Cell):
        def __init__(self):  # no super().__init__(): the point of the test
            self.fc = nn.Dense(2, 2)

    with pytest.raises(AttributeError, match="super"):
        Bad()


def test_unknown_attribute_error_names_the_cell():
    with pytest.raises(AttributeError, match="Block.*nope"):
        _ = Block().nope


def test_construct_must_be_defined():
    with pytest.raises(NotImplementedError, match="construct"):
        nn.Cell()(1)


def test_delattr_removes_registered_entries():
    b = Block()
    del b.act
    assert "act" not in b._cells


# ---- modes ----

def test_set_train_is_recursive_and_defaults_to_eval():
    net = Net()
    assert net.training is False and net.block.fc.training is False
    assert net.set_train() is net
    assert all(c.training for _, c in net.cells_and_names())
    net.set_train(False)
    assert not any(c.training for _, c in net.cells_and_names())
    with pytest.raises(TypeError):
        net.set_train("yes")


def test_repr_is_readable():
    text = repr(Net())
    assert text.startswith("Net<")
    assert "(block): Block<" in text
    assert "(fc): Dense<input_channels=4, output_channels=3, has_bias=True>" in text
    assert "(1): Tanh<>" in text


def test_forward_runs():
    net = Net()
    x = Tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    assert net(x).shape == (5, 2)


# ---- containers ----

def test_sequential_cell_indexing_and_forms():
    d1, d2 = nn.Dense(2, 3), nn.Dense(3, 1)
    seq = nn.SequentialCell([d1, nn.ReLU(), d2])
    assert len(seq) == 3 and seq[0] is d1 and seq[-1] is d2
    assert isinstance(seq[:2], nn.SequentialCell) and len(seq[:2]) == 2
    named = nn.SequentialCell(OrderedDict([("fc", nn.Dense(2, 2)), ("act", nn.ReLU())]))
    assert [p.name for p in named.get_parameters()] == ["fc.weight", "fc.bias"]
    seq.append(nn.Sigmoid())
    assert len(seq) == 4
    x = Tensor(np.ones((4, 2), np.float32))
    assert seq(x).shape == (4, 1)
    with pytest.raises(TypeError, match="SequentialCell"):
        nn.SequentialCell([nn.ReLU(), "relu"])


def test_cell_list():
    cl = nn.CellList([nn.Dense(2, 2)])
    cl.append(nn.Dense(2, 3))
    cl.extend([nn.ReLU()])
    cl.insert(0, nn.Tanh())
    assert len(cl) == 4 and isinstance(cl[0], nn.Tanh)
    assert [type(c).__name__ for c in cl] == ["Tanh", "Dense", "Dense", "ReLU"]
    assert [p.name for p in cl.get_parameters()][:2] == ["0.weight", "0.bias"]
    with pytest.raises(IndexError):
        cl[10]
