"""nn.LSTM, nn.GRU and nn.RNN over whole sequences run as one registry op each (lstm_sequence,
gru_sequence, rnn_sequence: ops/recurrent.cc and recurrent_gru.cc), with their BPTT as the
*_grad ops, with sequence lengths (seq_length) as an optional input. Checked against a
cell-by-cell loop (rnn_cell_loop.py; values and gradients, PyNative and Graph mode,
stacked, bidirectional, batch_first, without biases, whole and masked sequences), against finite
differences, and at the ops' edges: no steps, an empty batch, bad shapes and dtypes, and a
second-order gradient."""
import numpy as np
import pytest
from gradcheck import check_grad
from rnn_cell_loop import cell_loop

import kiln as ms
from kiln import _C, Tensor, nn, ops
from kiln.nn.layer import rnn as rnn_module
from kiln.ops._core import call

RNG = np.random.default_rng(23)


LAYERS = {
    "LSTM": lambda **kw: nn.LSTM(4, 5, **kw),
    "GRU": lambda **kw: nn.GRU(4, 5, **kw),
    "RNN": lambda **kw: nn.RNN(4, 5, **kw),
    "RNN relu": lambda **kw: nn.RNN(4, 5, nonlinearity="relu", **kw),
}


def _layer_and_input(kind="LSTM", steps=6, batch=3, **kwargs):
    ms.set_seed(1)
    layer = LAYERS[kind](**kwargs)
    shape = (batch, steps, 4) if kwargs.get("batch_first") else (steps, batch, 4)
    return layer, Tensor(RNG.standard_normal(shape).astype(np.float32))


def _loss_and_grads(layer, x, lengths):
    def loss(inputs):
        out, last = layer(inputs, seq_length=lengths)
        last = last[0] * last[1] if isinstance(last, tuple) else last * last
        return (out * out).mean() + last.sum()

    return ms.value_and_grad(loss, 0, layer.trainable_params())


# Whole sequences, then lengths with a full row, a short one and an empty one, and lengths past
# the end and below zero (the loop's `lengths > t` treats them as all steps and none).
LENGTHS = [None, [6, 3, 0], [9, 1, -2]]


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("kwargs", [{}, {"num_layers": 2, "bidirectional": True},
                                    {"batch_first": True, "has_bias": False}])
@pytest.mark.parametrize("lengths", LENGTHS)
def test_whole_sequence_op_matches_the_cell_loop(mode, kind, kwargs, lengths, monkeypatch):
    layer, x = _layer_and_input(kind, **kwargs)
    lengths = None if lengths is None else Tensor(np.array(lengths, np.int32))
    fused = _loss_and_grads(layer, x, lengths)
    ms.set_context(mode=mode)
    try:
        if mode == ms.GRAPH_MODE:
            fused = ms.jit(fused)
        (got_loss, (got_dx, got_dw)) = fused(x)
        monkeypatch.setattr(rnn_module, "recurrent", cell_loop)
        looped = _loss_and_grads(layer, x, lengths)
        if mode == ms.GRAPH_MODE:
            looped = ms.jit(looped)
        (want_loss, (want_dx, want_dw)) = looped(x)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(got_loss.asnumpy(), want_loss.asnumpy(), rtol=1e-5)
    np.testing.assert_allclose(got_dx.asnumpy(), want_dx.asnumpy(), rtol=1e-4, atol=1e-6)
    for g, w in zip(got_dw, want_dw):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_masked_sequences_by_finite_differences(kind):
    # float64, lengths 4, 2 and 0 of 5 steps: the inputs and the initial state, through the
    # outputs and the final state.
    ms.set_seed(2)
    layer = LAYERS[kind](dtype=ms.float64)
    lengths = Tensor(np.array([4, 2, 0], np.int32))
    x = RNG.standard_normal((5, 3, 4))
    h0 = RNG.standard_normal((1, 3, 5))

    def run(inputs, hx):
        out, last = layer(inputs, hx, seq_length=lengths)
        last = last[0] * last[1] if isinstance(last, tuple) else last
        return (out * out).sum() + (last * last).sum()

    hx = (Tensor(h0), Tensor(h0 * 0.5)) if kind == "LSTM" else Tensor(h0)
    check_grad(lambda t: run(t, hx), x, rtol=1e-5, atol=1e-7)
    if kind == "LSTM":
        check_grad(lambda c: run(Tensor(x), (Tensor(h0), c)), h0 * 0.5, rtol=1e-5, atol=1e-7)
    else:
        check_grad(lambda h: run(Tensor(x), h), h0, rtol=1e-5, atol=1e-7)


def test_past_its_length_a_sequence_keeps_its_state_and_outputs_zeros():
    layer, x = _layer_and_input("LSTM")
    out, (h, c) = layer(x, seq_length=Tensor(np.array([6, 2, 0], np.int32)))
    out = out.asnumpy()
    assert np.all(out[2:, 1] == 0) and np.all(out[:, 2] == 0) and np.all(out[:2, 1] != 0)
    np.testing.assert_array_equal(h.asnumpy()[0, 1], out[1, 1])
    np.testing.assert_array_equal(h.asnumpy()[0, 2], np.zeros(5, np.float32))
    short, (h2, c2) = layer(Tensor(x.asnumpy()[:2]))  # the same sequence cut at its length
    np.testing.assert_allclose(h2.asnumpy()[0, 1], h.asnumpy()[0, 1], rtol=1e-6)
    np.testing.assert_allclose(c2.asnumpy()[0, 1], c.asnumpy()[0, 1], rtol=1e-6)


def test_lengths_input_is_checked():
    layer, x = _layer_and_input("GRU")
    h = ops.zeros((3, 5), ms.float32)
    w_ih, w_hh, b_ih, b_hh = (p for p in layer.trainable_params())
    args = (x, h, w_ih, w_hh, b_ih, b_hh)
    with pytest.raises(TypeError, match="gru_sequence: lengths must be int32 or int64"):
        call("gru_sequence", args + (Tensor(np.ones(3, np.float32)),), ())
    with pytest.raises(ValueError, match=r"gru_sequence: lengths must be \(batch\) = \(3\)"):
        call("gru_sequence", args + (Tensor(np.ones(4, np.int64)),), ())


@pytest.mark.parametrize("layer", [nn.GRU, nn.RNN])
def test_gru_and_rnn_initial_state_by_finite_differences(layer):
    rnn = layer(2, 3, dtype=ms.float64)
    x = Tensor(RNG.standard_normal((5, 2, 2)))
    check_grad(lambda h: rnn(x, h)[0], RNG.standard_normal((1, 2, 3)), rtol=1e-5, atol=1e-7)


def test_lstm_initial_state_gradients_by_finite_differences():
    lstm = nn.LSTM(2, 3, dtype=ms.float64)
    x = Tensor(RNG.standard_normal((5, 2, 2)))
    c0 = Tensor(RNG.standard_normal((1, 2, 3)))
    h0 = RNG.standard_normal((1, 2, 3))
    check_grad(lambda h: lstm(x, (h, c0))[0], h0, rtol=1e-5, atol=1e-7)
    check_grad(lambda c: lstm(x, (Tensor(h0), c))[1][1], c0.asnumpy(), rtol=1e-5, atol=1e-7)


def _op_inputs(steps, batch, features=2, hidden=3, dtype=np.float32):
    def t(*shape):
        return Tensor(RNG.standard_normal(shape).astype(dtype))

    return (t(steps, batch, features), t(batch, hidden), t(batch, hidden),
            t(4 * hidden, features), t(4 * hidden, hidden), t(4 * hidden))


@pytest.mark.parametrize("steps,batch", [(0, 2), (3, 0)])
def test_no_steps_or_an_empty_batch(steps, batch):
    inputs = _op_inputs(steps, batch)  # an LSTM's
    y, h, c, _, _ = call("lstm_sequence", inputs, ())
    assert y.shape == (steps, batch, 3)
    if steps == 0:  # the state passes through unchanged
        np.testing.assert_array_equal(h.asnumpy(), inputs[1].asnumpy())
        np.testing.assert_array_equal(c.asnumpy(), inputs[2].asnumpy())

    def loss(*args):
        out, last_h, last_c, _, _ = call("lstm_sequence", args, ())
        return out.sum() + last_h.sum() + last_c.sum()

    grads = ms.grad(loss, (0, 1, 2, 3, 4, 5))(*inputs)
    for g, a in zip(grads, inputs):
        assert g.shape == a.shape
    if steps == 0:
        np.testing.assert_array_equal(grads[1].asnumpy(), np.ones((batch, 3), np.float32))
        np.testing.assert_array_equal(grads[3].asnumpy(), np.zeros((12, 2), np.float32))


def test_bad_shapes_and_dtypes_are_clear_errors():
    x, h0, c0, w_ih, w_hh, bias = _op_inputs(4, 2)
    with pytest.raises(ValueError, match=r"lstm_sequence: weights must be .* got \(12, 3\)"):
        call("lstm_sequence", (x, h0, c0, w_hh, w_hh, bias), ())
    with pytest.raises(ValueError, match=r"lstm_sequence: h0 and c0 must be \(batch, hidden\)"):
        call("lstm_sequence", (x, h0, Tensor(np.zeros((3, 3), np.float32)), w_ih, w_hh, bias), ())
    with pytest.raises(ValueError, match=r"lstm_sequence: x must be \(steps, batch, features\)"):
        call("lstm_sequence", (h0, h0, c0, w_ih, w_hh, bias), ())
    with pytest.raises(TypeError, match="lstm_sequence: every input must be float32 or float64"):
        call("lstm_sequence", (x, h0, c0, w_ih, w_hh, ops.cast(bias, ms.float64)), ())


@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_float16_layers_compute_in_float32_and_round_once(kind, mode):
    ms.set_seed(3)
    half = LAYERS[kind](dtype=ms.float16)
    ms.set_seed(3)
    wide = LAYERS[kind]()
    x = RNG.standard_normal((5, 3, 4)).astype(np.float16)
    lengths = Tensor(np.array([5, 2, 4], np.int32))

    def run(layer, inputs):
        out, last = layer(inputs, seq_length=lengths)
        return out, (last[0] if isinstance(last, tuple) else last)

    ms.set_context(mode=mode)
    try:
        fn = ms.jit(run) if mode == ms.GRAPH_MODE else run
        out, last = fn(half, Tensor(x))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    want_out, want_last = run(wide, Tensor(x.astype(np.float32)))
    assert out.dtype == ms.float16 and last.dtype == ms.float16
    # float16 weights are the float32 ones rounded: agree to float16 precision
    np.testing.assert_allclose(out.asnumpy(), want_out.asnumpy(), rtol=2e-2, atol=2e-3)
    np.testing.assert_allclose(last.asnumpy(), want_last.asnumpy(), rtol=2e-2, atol=2e-3)
    grads = ms.grad(lambda t: run(half, t)[0].astype(ms.float32).sum())(Tensor(x))
    assert grads.dtype == ms.float16 and np.all(np.isfinite(grads.asnumpy()))


@pytest.mark.parametrize("kind,words", [
    ("LSTM", "lstm_sequence_grad: second derivatives"),
    ("GRU", "gru_sequence_grad: second derivatives"),
    ("RNN", "rnn_sequence_grad: second derivatives")])
def test_second_order_gradients_raise(kind, words):
    layer, x = _layer_and_input(kind)

    def weight_grad_norm(inputs):
        grads = ms.grad(lambda t: layer(t)[0].sum(), None, layer.trainable_params())(inputs)
        return sum((g * g).sum() for g in grads)

    with pytest.raises(NotImplementedError, match=words):
        ms.grad(weight_grad_norm)(x)


def test_gru_and_rnn_ops_with_no_steps_and_bad_shapes():
    x, h0 = Tensor(np.zeros((0, 2, 3), np.float32)), Tensor(np.ones((2, 4), np.float32))
    w3 = Tensor(np.zeros((12, 3), np.float32)), Tensor(np.zeros((12, 4), np.float32))
    b3 = Tensor(np.zeros((12,), np.float32))
    y, h, _ = call("gru_sequence", (x, h0, *w3, b3, b3), ())
    assert y.shape == (0, 2, 4)
    np.testing.assert_array_equal(h.asnumpy(), h0.asnumpy())
    w1 = Tensor(np.zeros((4, 3), np.float32)), Tensor(np.zeros((4, 4), np.float32))
    y, h = call("rnn_sequence", (x, h0, *w1, Tensor(np.zeros((4,), np.float32))), (True,))
    np.testing.assert_array_equal(h.asnumpy(), h0.asnumpy())
    with pytest.raises(ValueError, match=r"gru_sequence: weights must be w_ih \(3\*hidden"):
        call("gru_sequence", (x, h0, *w1, b3, b3), ())
    with pytest.raises(ValueError, match=r"rnn_sequence: h0 must be \(batch, hidden\)"):
        call("rnn_sequence", (x, Tensor(np.ones((3, 4), np.float32)), *w1, b3), (False,))


@pytest.mark.parametrize("op", ["lstm_sequence", "gru_sequence"])
def test_a_hidden_size_whose_gate_rows_overflow_is_refused(op):
    # Graph inference sees shapes with no memory behind them (1-byte elements let the parser
    # accept 2**62 of them): gates * hidden must be refused before it wraps.
    params = ["i8[1,1,1]", f"i8[1,{2**62}]", f"i8[1,{2**62}]", "i8[4,1]", "i8[4,1]", "i8[4]"]
    args = ", ".join(f"%{i}" for i in range(6))
    signature = ", ".join(f"%{i}: {p}" for i, p in enumerate(params))
    text = (f"func @main({signature}) -> () {{\n  %6 = {op}({args}) : f32[1,1,1]\n"
            "  return\n}\n")
    with pytest.raises(ValueError, match=f"{op}: h0 must be \\(batch, hidden\\)"):
        _C.ir_verify(text)


class _Recurrent(nn.Cell):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def construct(self, x):
        return self.layer(x)[0]


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN relu"])
def test_exported_models_run_the_same(kind, tmp_path):
    layer, x = _layer_and_input(kind, num_layers=2, bidirectional=True)
    net = _Recurrent(layer)
    path = str(tmp_path / "recurrent")
    ms.export(net, x, file_name=path, file_format="MINDIR")
    loaded = nn.GraphCell(ms.load(path + ".mindir"))
    np.testing.assert_array_equal(loaded(x).asnumpy(), net(x).asnumpy())
