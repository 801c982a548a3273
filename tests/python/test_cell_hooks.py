"""Cell forward hooks (order, replaced values, removal) in both modes, and ops.Print."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops


class _Scale(nn.Cell):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def construct(self, x):
        return x * self.k


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.a = _Scale(2.0)
        self.b = _Scale(10.0)

    def construct(self, x):
        return self.b(self.a(x)) + 1


X = Tensor(np.array([1.0, 2.0], np.float32))


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_hooks_replace_inputs_and_outputs_in_order(mode):
    ms.set_context(mode=mode)
    net = _Net()
    np.testing.assert_allclose(net(X).asnumpy(), [21, 41])

    def triple_input(cell, args):
        return (args[0] * 3,)

    def add_five(cell, args, output):
        return output + 5

    def halve(cell, args, output):
        return output / 2

    h1 = net.a.register_forward_pre_hook(triple_input)
    h2 = net.a.register_forward_hook(add_five)
    h3 = net.a.register_forward_hook(halve, prepend=True)  # runs before add_five
    # a(x) = (3x * 2) / 2 + 5 = 3x + 5; out = 10 * a + 1
    np.testing.assert_allclose(net(X).asnumpy(), 10 * (3 * X.asnumpy() + 5) + 1)
    h3.remove()
    np.testing.assert_allclose(net(X).asnumpy(), 10 * (6 * X.asnumpy() + 5) + 1)
    h1.remove()
    h2.remove()
    h2.remove()  # removing twice is harmless
    np.testing.assert_allclose(net(X).asnumpy(), [21, 41])


def test_hooks_see_the_cell_and_arguments_and_run_each_call():
    seen = []
    net = _Net()
    net.b.register_forward_pre_hook(lambda cell, args: seen.append(("pre", cell.k)))
    net.b.register_forward_hook(lambda cell, args, out: seen.append(("post", len(args))))
    net(X)
    net(X)
    assert seen == [("pre", 10.0), ("post", 1)] * 2


def test_hooks_with_kwargs_and_always_call():
    net = _Scale(2.0)
    log = []

    def pre(cell, args, kwargs):
        return (args[0] + 1,), kwargs

    def post(cell, args, kwargs, output):
        log.append(output)

    net.register_forward_pre_hook(pre, with_kwargs=True)
    net.register_forward_hook(post, with_kwargs=True, always_call=True)
    np.testing.assert_allclose(net(X).asnumpy(), (X.asnumpy() + 1) * 2)
    with pytest.raises(TypeError):
        net(X, bad=1)  # construct takes no keyword: the always_call hook still runs
    assert len(log) == 2 and log[1] is None


def test_top_level_cell_hooks_in_graph_mode():
    ms.set_context(mode=ms.GRAPH_MODE)
    net = _Net()
    handle = net.register_forward_hook(lambda cell, args, out: out * 0)
    np.testing.assert_allclose(net(X).asnumpy(), [0, 0])
    handle.remove()
    np.testing.assert_allclose(net(X).asnumpy(), [21, 41])


def test_hook_must_be_callable():
    with pytest.raises(TypeError, match="hook_fn"):
        _Net().register_forward_hook(3)


def test_print_in_both_modes(capfd):
    p = ops.Print()
    x = Tensor(np.array([[1], [2]], np.int32))
    assert p("value:", x, 3) is None
    eager = capfd.readouterr().out
    assert eager.splitlines()[0] == "value:" and "dtype=Int32" in eager and eager.endswith("3\n")

    @ms.jit
    def f(t):
        p("graph {}", t + 1)
        return t

    f(x)
    graph = capfd.readouterr().out
    assert graph.startswith("graph {}\nTensor(shape=[2, 1], dtype=Int32, value=\n")
    assert "[[2]" in graph and "[3]]" in graph
    with pytest.raises(TypeError, match="Print"):
        p([1, 2])


def test_print_function_prints_run_time_values_in_both_modes(capfd):
    def f(t):
        y = t * 2
        ops.print_("doubled:", y)
        return y

    x = Tensor(np.array([1.0, 2.0], np.float32))
    assert ops.print_("eager", 7) is None
    assert capfd.readouterr().out == "eager\n7\n"
    f(x)
    assert capfd.readouterr().out.startswith("doubled:\nTensor(shape=[2], dtype=Float32")
    g = ms.jit(f)
    g(x)
    g(Tensor(np.array([5.0, 6.0], np.float32)))  # the second run prints its own values
    out = capfd.readouterr().out
    assert out.count("doubled:") == 2 and "[10. 12.]" in out
    with pytest.raises(TypeError, match="Print"):
        ops.print_({"a": 1})
