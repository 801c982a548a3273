"""RNN/LSTM/GRU layers and cells vs a NumPy reference of MindSpore's equations (gate orders,
stacking, bidirectional, seq_length masking), finite-difference gradients, parameter names, and
compiled code: one op per layer and direction (with or without seq_length, float32 or float16),
same values and gradients."""

import numpy as np
import pytest
from gradcheck import check_grad
from helpers import assert_close

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(17)


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def np_cell(mode, x, state, w_ih, w_hh, b_ih, b_hh):
    gi, gh = x @ w_ih.T + b_ih, (state[0] if mode == "LSTM" else state) @ w_hh.T + b_hh
    if mode == "RNN":
        return np.tanh(gi + gh)
    if mode == "LSTM":
        i, f, g, o = np.split(gi + gh, 4, axis=-1)
        c = sigmoid(f) * state[1] + sigmoid(i) * np.tanh(g)
        return sigmoid(o) * np.tanh(c), c
    (ir, iz, inn), (hr, hz, hn) = np.split(gi, 3, -1), np.split(gh, 3, -1)
    r, z = sigmoid(ir + hr), sigmoid(iz + hz)
    n = np.tanh(inn + r * hn)
    return (1 - z) * n + z * state


def np_run(mode, x, state, weights, lengths=None):
    outs = []
    for t in range(x.shape[0]):
        new = np_cell(mode, x[t], state, *weights)
        out = new[0] if mode == "LSTM" else new
        if lengths is not None:
            live = (lengths > t)[:, None]
            out = np.where(live, out, 0)
            new = tuple(np.where(live, a, b) for a, b in zip(new, state)) if mode == "LSTM" \
                else np.where(live, new, state)
        outs.append(out)
        state = new
    return np.stack(outs), state


def np_reverse(x, lengths):
    if lengths is None:
        return x[::-1]
    y = x.copy()
    for b, n in enumerate(lengths):
        y[:n, b] = x[:n, b][::-1]
    return y


def weights_of(layer, suffix):
    return [getattr(layer, f"{k}_{suffix}").asnumpy().astype(np.float64)
            for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("with_lengths", [False, True])
def test_layers_match_numpy(mode, bidirectional, with_lengths):
    layer = getattr(nn, mode)(3, 4, 2, bidirectional=bidirectional)
    x = RNG.standard_normal((5, 2, 3))
    lengths = np.array([5, 3], np.int32) if with_lengths else None
    out, final = layer(Tensor(x.astype(np.float32)),
                       seq_length=None if lengths is None else Tensor(lengths))
    dirs = 2 if bidirectional else 1
    inp, hs, cs = x, [], []
    for k in range(2):
        outs = []
        for d in range(dirs):
            w = weights_of(layer, f"l{k}{'_reverse' if d else ''}")
            start = (np.zeros((2, 4)),) * 2 if mode == "LSTM" else np.zeros((2, 4))
            seq = inp if d == 0 else np_reverse(inp, lengths)
            o, last = np_run(mode, seq, start, w, lengths)
            outs.append(o if d == 0 else np_reverse(o, lengths))
            hs.append(last[0] if mode == "LSTM" else last)
            cs.append(last[1] if mode == "LSTM" else None)
        inp = np.concatenate(outs, -1)
    assert_close(out, inp, ms.float32, rtol=1e-4, atol=1e-5)
    h_n = final[0] if mode == "LSTM" else final
    assert_close(h_n, np.stack(hs), ms.float32, rtol=1e-4, atol=1e-5)
    if mode == "LSTM":
        assert_close(final[1], np.stack(cs), ms.float32, rtol=1e-4, atol=1e-5)


def test_parameter_names_follow_mindspore():
    lstm = nn.LSTM(3, 4, 2, bidirectional=True)
    names = [p.name for p in list(lstm.get_parameters())]
    assert names[:4] == ["weight_ih_l0", "weight_ih_l0_reverse", "weight_ih_l1",
                         "weight_ih_l1_reverse"]
    assert names[-1] == "bias_hh_l1_reverse" and len(names) == 16
    assert lstm.weight_ih_l1.shape == (16, 8)
    bound = 1 / np.sqrt(4)
    assert all(np.abs(p.asnumpy()).max() <= bound for p in lstm.get_parameters())
    assert [p.name for p in list(nn.GRUCell(3, 4).get_parameters())] == [
        "weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert len(list(nn.GRU(3, 4, has_bias=False).get_parameters())) == 2


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_cells_match_numpy(mode):
    cell = getattr(nn, mode + "Cell")(3, 4)
    x, h, c = (RNG.standard_normal(s) for s in ((2, 3), (2, 4), (2, 4)))
    w = [getattr(cell, k).asnumpy().astype(np.float64)
         for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    state = (Tensor(h.astype(np.float32)), Tensor(c.astype(np.float32))) if mode == "LSTM" \
        else Tensor(h.astype(np.float32))
    got = cell(Tensor(x.astype(np.float32)), state)
    want = np_cell(mode, x, (h, c) if mode == "LSTM" else h, *w)
    for g, r in zip(got if mode == "LSTM" else (got,), want if mode == "LSTM" else (want,)):
        assert_close(g, r, ms.float32, rtol=1e-5, atol=1e-6)


def test_gradients_by_finite_differences():
    lstm = nn.LSTM(2, 3, 1, dtype=ms.float64)
    gru = nn.GRU(2, 3, 1, bidirectional=True, dtype=ms.float64)
    x = RNG.standard_normal((4, 2, 2))
    check_grad(lambda t: lstm(t)[0], x, rtol=1e-5, atol=1e-7)
    check_grad(lambda t: gru(t, seq_length=Tensor(np.array([4, 2], np.int32)))[0], x,
               rtol=1e-5, atol=1e-7)


def test_argument_errors():
    with pytest.raises(ValueError, match="RNN: nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(TypeError, match="LSTM: dropout must be a float"):
        nn.LSTM(3, 4, dropout=1)
    lstm = nn.LSTM(3, 4)
    x = Tensor(np.zeros((5, 2, 3), np.float32))
    with pytest.raises(ValueError, match="LSTM: hx must have shape \\(1, 2, 4\\)"):
        lstm(x, (Tensor(np.zeros((1, 3, 4), np.float32)),) * 2)
    with pytest.raises(ValueError, match="seq_length"):
        lstm(x, seq_length=Tensor(np.array([1.0, 2.0], np.float32)))
    with pytest.raises(TypeError, match="LSTMCell: hx must be a tuple"):
        nn.LSTMCell(3, 4)(Tensor(np.zeros((2, 3), np.float32)), Tensor(np.zeros((2, 4),
                                                                                np.float32)))


class _Tagger(nn.Cell):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 4, 2, batch_first=True, bidirectional=True)
        self.head = nn.Dense(8, 2)

    def construct(self, x, lengths):
        out, _ = self.lstm(x, seq_length=lengths)
        return self.head(out)


def _loss(net):
    def loss(x, lengths):
        return ops.mean(net(x, lengths) ** 2)
    return loss


def test_graph_mode_values_and_gradients_match_pynative():
    net = _Tagger()
    x = Tensor(RNG.standard_normal((2, 6, 3)).astype(np.float32))
    lengths = Tensor(np.array([6, 4], np.int32))
    eager = net(x, lengths)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        graph = net(x, lengths)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert_close(graph, eager.asnumpy(), ms.float32, rtol=1e-5, atol=1e-6)
    params = net.trainable_params()
    grad_fn = ms.grad(_loss(net), grad_position=None, weights=params)
    want = grad_fn(x, lengths)
    got = ms.jit(grad_fn)(x, lengths)
    for g, w in zip(got, want):
        assert_close(g, w.asnumpy(), ms.float32, rtol=1e-4, atol=1e-6)


def _gru_last(gru, lengths=None):
    def run(x):
        return gru(x, seq_length=lengths)[1]
    return run


@pytest.mark.parametrize("layer,op", [(nn.GRU, "gru_sequence"), (nn.LSTM, "lstm_sequence"),
                                      (nn.RNN, "rnn_sequence")])
@pytest.mark.parametrize("lengths", [None, [5, 2]])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_whole_sequences_are_one_op(layer, op, lengths, dtype):
    lengths = None if lengths is None else Tensor(np.array(lengths, np.int32))
    fn = ms.jit(_gru_last(layer(3, 4, dtype=ms.float16 if dtype == np.float16 else ms.float32),
                          lengths))
    fn(Tensor(RNG.standard_normal((5, 2, 3)).astype(dtype)))
    text = fn.graph_text("frontend")
    assert f"= {op}(" in text and "while" not in text
