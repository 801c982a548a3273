"""Passes that rest on the analysis layer (csrc/analysis): constant folding while a user's
gradient tape records leaves nothing on the tape, and cse keeps apart values written in place."""

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


def assign_after_duplicate(a, b, c):
    t = a + b
    u = a + b  # the same value as t until t is assigned
    ops.assign(t, c)
    return t, u


def test_cse_keeps_a_value_written_in_place_apart_from_its_twin():
    a = Tensor(np.ones(3, np.float32))
    b = Tensor(np.ones(3, np.float32))
    c = Tensor(np.full(3, 7, np.float32))
    want = [v.asnumpy() for v in assign_after_duplicate(a, b, c)]
    got = [v.asnumpy() for v in ms.jit(assign_after_duplicate)(a, b, c)]
    np.testing.assert_array_equal(want[1], np.full(3, 2, np.float32))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
