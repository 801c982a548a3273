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
