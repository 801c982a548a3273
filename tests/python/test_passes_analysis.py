"""Constant folding while a user's gradient tape records leaves nothing on the tape (the pass
runs ops through ops/evaluate.h, not eager dispatch)."""

import numpy as np

import kiln as ms
from kiln import _C, Tensor, nn, ops
from kiln.common.api import _cell_graph_executor
from kiln.jit.api import cell_jit_function


def test_folding_while_a_tape_records_leaves_nothing_on_it():
    x = Tensor(np.array([0.5, 1.0, 1.5], np.float32))

    @ms.constexpr
    def watched():
        return x  # the compiled graph reads the watched tensor as a constant

    class Net(nn.Cell):
        def construct(self, a):
            return a + ops.exp(watched() * 2)  # exp(x * 2) folds while compiling

    net = Net()
    zeros = Tensor(np.zeros(3, np.float32))
    tape = _C.Tape()
    with tape:
        tape.watch(x)
        _cell_graph_executor.compile(net, zeros)
        assert tape.num_records == 0
        y = x * 3  # an eager op on the watched tensor is still recorded
        assert tape.num_records == 1
    (compiled,) = cell_jit_function(net).variants()
    assert "exp(" not in compiled.executable.text()  # folded
    out = _cell_graph_executor(net, zeros)
    np.testing.assert_allclose(out.asnumpy(), np.exp(x.asnumpy() * 2), rtol=1e-6)
    grad = tape.gradient([y], [None], [x])[0]
    np.testing.assert_array_equal(grad.asnumpy(), np.full(3, 3, np.float32))

