"""The signature a compiled graph records (which inputs are weights, how results nest): the
front end fills it, the engine rebuilds each call's result from it and checks inputs by it."""
import enum
import gc
import weakref

import numpy as np
import pytest

import kiln as ms
from kiln import _C, Tensor, nn, ops
from kiln.jit.api import cell_graph_call


class Color(enum.IntEnum):
    RED = 1


MARKER = object()


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(3, 2)

    def construct(self, x, scale):
        h = self.fc(x)
        return h, {"sum": h.sum(), "n": 3, "eps": 0.5, "ok": True, "none": None,
                   "big": 1 << 70, "color": Color.RED, "marker": MARKER}, [h * scale, "s"]


def inputs():
    return Tensor(np.ones((4, 3), np.float32)), Tensor(np.float32(2.0))


def check_structure(out):
    h, d, (scaled, s) = out
    assert isinstance(out, tuple) and isinstance(out[2], list) and s == "s"
    assert list(d) == ["sum", "n", "eps", "ok", "none", "big", "color", "marker"]
    assert d["n"] == 3 and type(d["n"]) is int and d["eps"] == 0.5 and d["ok"] is True
    assert d["none"] is None and d["big"] == 1 << 70
    assert d["color"] is Color.RED and d["marker"] is MARKER  # kept as themselves (opaque)
    np.testing.assert_allclose(scaled.asnumpy(), 2 * h.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(d["sum"].asnumpy(), h.asnumpy().sum(), rtol=1e-5)


def test_signature_names_inputs_weights_and_the_output_tree():
    net = Net()
    net.set_train(False)
    jitted = ms.jit(net.construct)
    jitted(*inputs())
    text = jitted.graph_text()
    assert text.startswith("signature {\n"), text
    assert '  input %0 "arg0" : f32[4,3]\n  input %1 "arg1" : f32[]\n' in text
    assert '  weight %2 "fc.weight" : f32[2,3]\n  weight %3 "fc.bias" : f32[2]\n' in text
    assert ('  outputs (result 0, {"sum": result 1, "n": 3, "eps": 0.5, "ok": True, '
            '"none": None, "big": opaque 0, "color": opaque 1, "marker": opaque 2}, '
            '[result 2, "s"])\n') in text
    assert _C.ir_reprint(text) == text  # the text form round-trips with its signature


def test_nested_results_with_opaque_values_come_back_as_themselves():
    net = Net()
    jitted = ms.jit(net.construct)
    x, scale = inputs()
    for _ in range(2):  # compiled, then the cached variant
        check_structure(jitted(x, scale))


class LiteralNet(Net):
    def construct(self, x, scale):
        h = self.fc(x)
        return h, {"sum": h.sum(), "n": 3, "none": None}, [h * scale, "s", -1.5]


def test_the_fast_path_rebuilds_nested_results_from_the_signature():
    jitted = ms.jit(LiteralNet().construct)
    x, scale = inputs()
    first = jitted(x, scale)  # compiles and arms the fast path
    hits = _C.fast_call_hits()
    second = jitted(x, scale)
    assert _C.fast_call_hits() == hits + 1
    for out in (first, second):
        h, d, (scaled, s, f) = out
        assert isinstance(out, tuple) and list(d) == ["sum", "n", "none"]
        assert d["n"] == 3 and d["none"] is None and s == "s" and f == -1.5
        np.testing.assert_allclose(scaled.asnumpy(), 2 * h.asnumpy(), rtol=1e-6)


def test_a_tensor_returned_twice_and_constant_results():
    def f(x):
        y = x + 1.0
        return y, y, (), [None], {1: -2.5}

    jitted = ms.jit(f)
    x = Tensor(np.zeros(2, np.float32))
    for _ in range(2):
        a, b, empty, none_list, d = jitted(x)
        np.testing.assert_array_equal(a.asnumpy(), [1.0, 1.0])
        np.testing.assert_array_equal(b.asnumpy(), [1.0, 1.0])
        assert empty == () and none_list == [None] and d == {1: -2.5}


def test_direct_calls_are_checked_against_the_signature():
    jitted = ms.jit(lambda x: ops.relu(x))
    x = Tensor(np.ones((2, 3), np.float32))
    jitted(x)
    (compiled,) = jitted.variants()
    exe = compiled.executable
    np.testing.assert_array_equal(exe.call([x], [], ()).asnumpy(), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"input 0 \('arg0'\) expects f32\[2,3\], got f32\[3,2\]"):
        exe.call([Tensor(np.ones((3, 2), np.float32))], [], ())
    with pytest.raises(TypeError, match=r"expects f32\[2,3\], got i32\[2,3\]"):
        exe.call([Tensor(np.ones((2, 3), np.int32))], [], ())
    with pytest.raises(TypeError, match="takes 1 inputs, got 2"):
        exe.call([x, x], [], ())


class ReturnsItself(nn.Cell):
    def construct(self, x):
        return x * 2.0, self  # `self` is an opaque value of the signature


def test_a_cell_its_own_graph_returns_is_still_collected():
    net = ReturnsItself()
    x = Tensor(np.ones(2, np.float32))
    for _ in range(3):  # the last calls take the fast path, which is handed the opaque values
        out = cell_graph_call(net, (x,), {})
    ref = weakref.ref(net)
    del net, out
    gc.collect()
    assert ref() is None


# ---- the fast path with per-call identity guards (globals and closure variables) ----

_GLOBAL_SCALE_CELL = None


class _Scale(nn.Cell):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def construct(self, x):
        return x * self.factor


def _fast_hits_of(fn, *args, calls=3):
    before = _C.fast_call_hits()
    outs = [fn(*args) for _ in range(calls)]
    return _C.fast_call_hits() - before, outs


def _jit_and_repeat(apply, size):
    """ms.jit(apply) called once on ones(size) (compiling, arming the fast path), then three
    times more: (the jitted function, the input, fast-path hits of those three calls)."""
    jitted = ms.jit(apply)
    x = Tensor(np.ones(size, np.float32))
    jitted(x)
    hits, _ = _fast_hits_of(jitted, x)
    return jitted, x, hits


def test_a_training_step_closing_over_grad_fn_and_the_optimizer_takes_the_fast_path():
    # The MindSpore idiom: a step function closing over grad_fn and the optimizer (Cells and
    # functions, checked by identity on each call) runs through the fast path, and trains the
    # same as PyNative.
    def make_step():
        ms.set_seed(3)
        net = nn.SequentialCell([nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 1)])
        opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
        loss_fn = nn.MSELoss()

        def forward(x, y):
            return loss_fn(net(x), y)

        grad_fn = ms.value_and_grad(forward, None, opt.parameters)

        def step(x, y):
            loss, grads = grad_fn(x, y)
            opt(grads)
            return loss

        return step

    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((16, 4)).astype(np.float32))
    y = Tensor(rng.standard_normal((16, 1)).astype(np.float32))
    eager = make_step()
    want = [float(eager(x, y).asnumpy()) for _ in range(6)]
    jitted = ms.jit(make_step())
    first = float(jitted(x, y).asnumpy())
    hits, outs = _fast_hits_of(jitted, x, y, calls=5)
    assert hits == 5
    np.testing.assert_allclose([first] + [float(o.asnumpy()) for o in outs], want, rtol=1e-5)


def test_rebinding_a_closure_variable_leaves_the_fast_path():
    double = _Scale(2.0)

    def make():
        scale = double

        def apply(x):
            return scale(x)

        def rebind(cell):
            nonlocal scale
            scale = cell

        return apply, rebind

    apply, rebind = make()
    jitted = ms.jit(apply)
    x = Tensor(np.ones(3, np.float32))
    jitted(x)
    hits, outs = _fast_hits_of(jitted, x)
    assert hits == 3 and outs[-1].asnumpy().tolist() == [2.0, 2.0, 2.0]
    rebind(_Scale(5.0))
    np.testing.assert_array_equal(jitted(x).asnumpy(), [5.0, 5.0, 5.0])
    rebind(lambda v: v - 1.0)  # a function in the Cell's place
    np.testing.assert_array_equal(jitted(x).asnumpy(), [0.0, 0.0, 0.0])


def test_rebinding_a_global_leaves_the_fast_path():
    global _GLOBAL_SCALE_CELL
    _GLOBAL_SCALE_CELL = _Scale(3.0)

    def apply(x):
        return _GLOBAL_SCALE_CELL(x)

    jitted, x, hits = _jit_and_repeat(apply, 2)
    assert hits == 3
    _GLOBAL_SCALE_CELL = _Scale(-1.0)
    np.testing.assert_array_equal(jitted(x).asnumpy(), [-1.0, -1.0])
    globals().pop("_GLOBAL_SCALE_CELL")  # a vanished global is an error, not the old graph
    try:
        with pytest.raises(NameError):
            jitted(x)
    finally:
        _GLOBAL_SCALE_CELL = None


def test_changing_a_sequential_cells_children_recompiles_its_callers():
    seq = nn.SequentialCell([_Scale(2.0)])

    def apply(x):
        return seq(x)

    jitted, x, hits = _jit_and_repeat(apply, 2)
    assert hits == 3  # the children registry is checked by epoch, not item by item
    seq.append(_Scale(3.0))
    np.testing.assert_array_equal(jitted(x).asnumpy(), [6.0, 6.0])
    seq[0] = _Scale(10.0)
    np.testing.assert_array_equal(jitted(x).asnumpy(), [30.0, 30.0])
    del seq[1]
    np.testing.assert_array_equal(jitted(x).asnumpy(), [10.0, 10.0])
    seq._cells["0"] = _Scale(7.0)  # even a direct write into the registry is seen
    np.testing.assert_array_equal(jitted(x).asnumpy(), [7.0, 7.0])


def test_a_list_a_step_reads_is_still_compared_on_every_call():
    factors = [2.0]

    def apply(x):
        return x * factors[0]

    jitted, x, hits = _jit_and_repeat(apply, 2)
    assert hits == 0  # contents, not identity: only the full check can compare them
    factors[0] = 4.0
    np.testing.assert_array_equal(jitted(x).asnumpy(), [4.0, 4.0])


def test_replacing_a_sequential_cells_child_keeps_its_position():
    seq = nn.SequentialCell([_Scale(2.0), _Scale(3.0)])
    seq[0] = _Scale(10.0)
    assert list(seq._cells) == ["0", "1"]
    del seq[1]
    np.testing.assert_array_equal(seq(Tensor(np.ones(2, np.float32))).asnumpy(), [10.0, 10.0])
