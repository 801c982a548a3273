"""dict.has_key in compiled code (MindSpore's Graph-mode dict method): `k in d` there, Python's
AttributeError in PyNative, and other objects' own has_key untouched."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn


def test_has_key_in_a_jit_function():
    @ms.jit
    def f():
        x = {"a": [2, 3, "123"], "b": 2, 3: None, True: 1}
        return x.has_key("a"), x.has_key("c"), x.has_key(3), x.has_key(True)

    assert f() == (True, False, True, True)


def test_has_key_as_a_condition_on_a_dict_of_tensors_in_a_graph_mode_cell():
    ms.set_context(mode=ms.GRAPH_MODE)

    class Net(nn.Cell):
        def construct(self, t):
            d = {"k": t}
            if d.has_key("k") and not d.has_key("z"):
                return d["k"] * 2
            return t

    np.testing.assert_array_equal(Net()(Tensor(np.ones(2, np.float32))).asnumpy(), [2.0, 2.0])


def test_has_key_is_python_in_pynative():
    class Net(nn.Cell):
        def construct(self, t):
            return {"k": t}.has_key("k")

    with pytest.raises(AttributeError, match="has_key"):
        Net()(Tensor(np.ones(2, np.float32)))  # PyNative: a Python dict, as in MindSpore


def test_other_objects_keep_their_own_has_key():
    class Table:
        def has_key(self, key):
            return key == 1

    @ms.jit
    def f():
        return Table().has_key(1), Table().has_key(2)

    assert f() == (True, False)

    @ms.jit
    def no_method():
        return [1, 2].has_key(1)

    with pytest.raises(AttributeError, match="has_key"):
        no_method()
