"""Graph-mode programs with Cells, Parameters, keyword arguments and library ops, in both modes."""

import numpy as np
import pytest
from graph_check import assert_same_in_both_modes as both

import kiln as ms
from kiln import Parameter, Tensor, nn, ops

RNG = np.random.default_rng(3)


def t(*shape):
    return Tensor(RNG.standard_normal(shape).astype(np.float32))


class Gate(nn.Cell):
    """A user Cell with tensor-dependent control flow and a helper method."""

    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(4, 4)
        self.scale = Parameter(Tensor(np.array(0.5, np.float32)), name="scale")
        self.steps = 2

    def helper(self, x):
        return ops.tanh(x) * self.scale

    def construct(self, x):
        y = self.dense(x)
        for _ in range(self.steps):
            y = self.helper(y)
        if y.mean() > 0:
            return y + 1.0
        return y - 1.0


class Stack(nn.Cell):
    def __init__(self):
        super().__init__()
        self.blocks = nn.CellList([Gate(), Gate()])
        self.norm = nn.LayerNorm((4,))

    def construct(self, x, extra=None):
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        if extra is not None:
            x = x + extra
        return ops.softmax(x, axis=-1)


def run_stack(net, x, extra):
    return net(x, extra=extra)


def test_nested_user_cells_match_pynative():
    ms.set_seed(1)
    net = Stack()
    both(run_stack, net, t(3, 4), None)
    both(run_stack, net, t(3, 4), t(3, 4))


class Counter(nn.Cell):
    """`self.p = ...` updates a Parameter in place, in program order."""

    def __init__(self):
        super().__init__()
        self.count = Parameter(Tensor(np.zeros(1, np.float32)), name="count")

    def construct(self, x):
        self.count = self.count + 1.0
        return x * self.count


def test_parameter_assignment_is_in_place_and_ordered():
    net = Counter()
    jitted = ms.jit(Counter.construct)
    x = Tensor(np.ones(2, np.float32))
    out1 = jitted(net, x)
    out2 = jitted(net, x)
    assert out1.asnumpy().tolist() == [1.0, 1.0]
    assert out2.asnumpy().tolist() == [2.0, 2.0]
    assert net.count.asnumpy().tolist() == [2.0]


def conv_block(x, w):
    y = ops.conv2d(x, w, pad_mode="same")
    y = ops.max_pool2d(ops.relu(y), 2, 2)
    return ops.flatten(y)


def attention(q, k, v):
    scores = ops.matmul(q, k.swapaxes(-1, -2)) / (q.shape[-1] ** 0.5)
    return ops.matmul(ops.softmax(scores, axis=-1), v)


def losses(logits, labels, target):
    return (
        ops.cross_entropy(logits, labels),
        ops.mse_loss(logits, target),
        ops.log_softmax(logits, axis=1).sum(),
    )


def kwargs_and_defaults(x, scale=2.0, *, shift=1.0, **more):
    return x * scale + shift + more.get("bias", 0.0)


def varargs(*xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total, len(xs)


def recursion(x, depth):
    if depth == 0:
        return x
    return recursion(x * 2.0, depth - 1) + 1.0


def dict_and_list_results(x):
    parts = ops.split(x, 2, axis=0)
    return {"first": parts[0], "rest": list(parts[1:]), "n": len(parts)}


def reductions_and_indexing(x):
    values, indices = ops.max(x, axis=1)
    onehot = ops.one_hot(indices, x.shape[1], 1.0, 0.0)
    picked = ops.gather(x, Tensor(np.array([0, 2])), 1)
    return values, onehot, picked, x[x.shape[0] - 1], ops.where(x > 0, x, 0.0)


def creation_in_graph(x):
    z = ops.zeros((2, 3), ms.float32)
    o = ops.ones_like(x)
    r = ops.arange(0, 6).reshape(2, 3)
    return z + o + r, ops.full((2,), 7.0), ops.concat([x, o], axis=0), ops.stack([x, o])


CASES = [
    (conv_block, lambda: (t(2, 3, 8, 8), t(4, 3, 3, 3))),
    (attention, lambda: (t(2, 5, 8), t(2, 5, 8), t(2, 5, 8))),
    (losses, lambda: (t(4, 5), Tensor(np.array([0, 2, 4, 1])), t(4, 5))),
    (kwargs_and_defaults, lambda: (t(3),)),
    (varargs, lambda: (t(2), t(2), t(2))),
    (recursion, lambda: (t(2), 3)),
    (dict_and_list_results, lambda: (t(6, 2),)),
    (reductions_and_indexing, lambda: (t(3, 4),)),
    (creation_in_graph, lambda: (t(2, 3),)),
]


@pytest.mark.parametrize("fn,make_args", CASES, ids=[c[0].__name__ for c in CASES])
def test_library_ops_in_graphs_match_pynative(fn, make_args):
    both(fn, *make_args(), rtol=1e-4, atol=1e-5)


def test_keyword_arguments_reach_the_graph():
    x = t(3)
    both(kwargs_and_defaults, x, 3.0, shift=0.5, bias=2.0)
