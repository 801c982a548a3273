"""Parameter names as MindSpore 2.x gives them: an unnamed Parameter gets a fresh generated name
(so unnamed ones can share a ParameterTuple), which a Cell attribute replaces."""
import numpy as np
import pytest

import kiln as ms
from kiln import Parameter, ParameterTuple, Tensor, nn


def param(value, name=None):
    return Parameter(Tensor(np.array([value], np.float32)), name=name)


def test_unnamed_parameters_get_distinct_generated_names():
    a, b, blank = param(1.0), param(2.0), param(3.0, name="  ")
    assert a.name.startswith("Parameter#") and b.name.startswith("Parameter#")
    assert len({a.name, b.name, blank.name}) == 3
    assert param(4.0, name=" w ").name == "w"  # surrounding blanks are stripped, as MindSpore


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_parameter_tuple_of_unnamed_parameters_in_a_cell(mode):
    ms.set_context(mode=mode)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.res = ParameterTuple((param(2.0), param(4.0)))

        def construct(self):
            return self.res[0] + self.res[1]

    np.testing.assert_array_equal(Net()().asnumpy(), [6.0])


def test_cell_attribute_names_a_generated_parameter_only():
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.weight = param(1.0)
            self.bias = param(0.0, name="my_bias")

    names = sorted(p.name for p in Net().get_parameters())
    assert names == ["my_bias", "weight"]


def test_duplicate_and_bad_names_still_rejected():
    with pytest.raises(ValueError, match="'w'"):
        ParameterTuple((param(1.0, "w"), param(2.0, "w")))
    with pytest.raises(ValueError, match="str or None"):
        param(1.0, name=3)
    a = param(1.0)
    assert len(ParameterTuple((a, a))) == 2  # one object twice is fine (tied weights)
