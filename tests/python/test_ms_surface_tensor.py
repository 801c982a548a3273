"""Tensor properties MindSpore code reads in both modes: nbytes and strides (byte strides of the
row-major layout), on inputs, on Cell attributes and on values computed in the graph."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn

SHAPES = [(2, 3, 4, 5), (7,), ()]
DTYPES = [(ms.float32, np.float32), (ms.float64, np.float64), (ms.int8, np.int8),
          (ms.bool_, np.bool_)]


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype,np_dtype", DTYPES)
def test_nbytes_and_strides_match_numpy(mode, shape, dtype, np_dtype):
    ms.set_context(mode=mode)
    ref = np.zeros(shape, np_dtype)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.value = Tensor(ref, dtype)

        def construct(self, x):
            y = ms.ops.concat((x.reshape((-1,)), x.reshape((-1,)))).reshape((2,) + x.shape)[0]
            return self.value.nbytes, self.value.strides, y.nbytes, y.strides

    nbytes, strides, y_nbytes, y_strides = Net()(Tensor(ref, dtype))
    assert nbytes == y_nbytes == ref.nbytes
    assert tuple(strides) == tuple(y_strides) == ref.strides


def test_compiled_strides_are_constants_of_the_graph():
    @ms.jit
    def f(x):
        return x.reshape((6, 4)).strides, x.nbytes

    strides, nbytes = f(Tensor(np.ones((2, 3, 4), np.float32)))
    assert tuple(strides) == (16, 4) and nbytes == 96

