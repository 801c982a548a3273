"""Recurrent layers with MindSpore's names, parameters (weight_ih_l0, ..., `_reverse` for the
backward direction; initial U(-1/sqrt(hidden), 1/sqrt(hidden))), gate orders and seq_length
masking: RNNCell, LSTMCell, GRUCell and the stacked, optionally bidirectional RNN, LSTM, GRU.

A layer's time loop, one direction, is one registry op (lstm_sequence, gru_sequence,
rnn_sequence: ops/recurrent*.cc, with their backward), in PyNative and Graph mode alike; the
cells are what RNNCell, LSTMCell and GRUCell run."""
import math

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.initializer import Uniform, initializer
from kiln.common.parameter import Parameter
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.nn.layer.basic import Dropout, check_bool, check_int
from kiln.ops._core import call
from kiln.ops.function.array import size_when_run

__all__ = ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU"]


def _gates(x, h, w_ih, w_hh, b_ih, b_hh):
    gi = F.matmul(x, w_ih, transpose_b=True)
    gh = F.matmul(h, w_hh, transpose_b=True)
    if b_ih is not None:
        gi, gh = gi + b_ih, gh + b_hh
    return gi, gh


def _chunks(t, n):
    size = t.shape[-1] // n
    return [F.slice_nd(t, (0, i * size), (t.shape[0], (i + 1) * size), (1, 1))
            for i in range(n)]


def rnn_tanh_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    gi, gh = _gates(x, h, w_ih, w_hh, b_ih, b_hh)
    return ops.tanh(gi + gh)


def rnn_relu_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    gi, gh = _gates(x, h, w_ih, w_hh, b_ih, b_hh)
    return ops.relu(gi + gh)


def lstm_cell(x, state, w_ih, w_hh, b_ih, b_hh):
    """Gates in MindSpore's (and PyTorch's) order: input, forget, cell, output."""
    h, c = state
    gi, gh = _gates(x, h, w_ih, w_hh, b_ih, b_hh)
    i, f, g, o = _chunks(gi + gh, 4)
    c_new = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
    return ops.sigmoid(o) * ops.tanh(c_new), c_new


def gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    """Gates r, z, n; h' = n + z * (h - n)."""
    gi, gh = _gates(x, h, w_ih, w_hh, b_ih, b_hh)
    i_r, i_z, i_n = _chunks(gi, 3)
    h_r, h_z, h_n = _chunks(gh, 3)
    r, z = ops.sigmoid(i_r + h_r), ops.sigmoid(i_z + h_z)
    n = ops.tanh(i_n + r * h_n)
    return n + z * (h - n)


_CELLS = {"RNN_TANH": rnn_tanh_cell, "RNN_RELU": rnn_relu_cell, "LSTM": lstm_cell,
          "GRU": gru_cell}
_CHUNKS = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _check_float(who, name, t):
    # MindSpore takes float16 and float32; kiln also computes in float64.
    if t.dtype not in (mstype.float16, mstype.float32, mstype.float64):
        raise TypeError(f"{who}: {name} must be float16, float32 or float64, got {t.dtype}")


class _RNNCellBase(Cell):
    _MODE = "RNN_TANH"

    def __init__(self, input_size, hidden_size, has_bias=True, dtype=mstype.float32, *,
                 _mode=None):
        super().__init__()
        if _mode is not None:
            self._MODE = _mode
        who = type(self).__name__
        self.input_size = check_int(input_size, who, "input_size")
        self.hidden_size = check_int(hidden_size, who, "hidden_size")
        self.has_bias = check_bool(has_bias, who, "has_bias")
        gates = _CHUNKS[self._MODE] * self.hidden_size
        init = Uniform(1 / math.sqrt(self.hidden_size))
        self.weight_ih = Parameter(initializer(init, (gates, input_size), dtype), "weight_ih")
        self.weight_hh = Parameter(initializer(init, (gates, hidden_size), dtype), "weight_hh")
        self.bias_ih = Parameter(initializer(init, (gates,), dtype), "bias_ih") \
            if has_bias else None
        self.bias_hh = Parameter(initializer(init, (gates,), dtype), "bias_hh") \
            if has_bias else None

    def _step(self, x, hx):
        who = type(self).__name__
        _check_float(who, "x", x)
        weights = tuple(w if w is None else ops.cast(w, x.dtype) for w in (
            self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh))
        return _CELLS[self._MODE](x, hx, *weights)


class RNNCell(_RNNCellBase):
    """h' = nonlinearity(x W_ih^T + b_ih + h W_hh^T + b_hh), nonlinearity 'tanh' or 'relu'."""

    def __init__(self, input_size, hidden_size, has_bias=True, nonlinearity="tanh",
                 dtype=mstype.float32):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got "
                             f"{nonlinearity!r}")
        super().__init__(input_size, hidden_size, has_bias, dtype,
                         _mode="RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU")
        self.nonlinearity = nonlinearity

    def construct(self, x, hx):
        return self._step(x, hx)


class LSTMCell(_RNNCellBase):
    """One LSTM step: (x, (h, c)) -> (h', c')."""
    _MODE = "LSTM"

    def construct(self, x, hx):
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError("LSTMCell: hx must be a tuple (h, c) of two Tensors")
        return self._step(x, tuple(hx))


class GRUCell(_RNNCellBase):
    """One GRU step: (x, h) -> h'."""
    _MODE = "GRU"

    def construct(self, x, hx):
        return self._step(x, hx)


# ---- the time loop ----

def _bias_or_zeros(bias, rows, dtype):
    return ops.zeros((rows,), dtype) if bias is None else bias


def _whole_sequence(cell, x, state, weights, lengths):
    """The layer over all of x (T, N, I) as one registry op (ops/recurrent.cc and
    recurrent_gru.cc: the time loop and its backward in C++). lengths (N,) or None: each
    sequence's state stays frozen after its length. Returns (states (T, N, H), final state)."""
    w_ih, w_hh, b_ih, b_hh = weights
    rows = w_ih.shape[0]
    if cell is gru_cell:  # r * (h W_hn + b_hn) keeps the two biases apart
        out, h, _ = call("gru_sequence", (x, state, w_ih, w_hh, _bias_or_zeros(b_ih, rows, x.dtype),
                                          _bias_or_zeros(b_hh, rows, x.dtype), lengths), ())
        return out, h
    bias = ops.zeros((rows,), x.dtype) if b_ih is None else b_ih + b_hh
    if cell is lstm_cell:
        out, h, c, _, _ = call("lstm_sequence",
                               (x, state[0], state[1], w_ih, w_hh, bias, lengths), ())
        return out, (h, c)
    out, h = call("rnn_sequence", (x, state, w_ih, w_hh, bias, lengths), (cell is rnn_relu_cell,))
    return out, h


def _cast_state(state, dtype):
    return tuple(ops.cast(s, dtype) for s in state) if isinstance(state, tuple) else \
        ops.cast(state, dtype)


def recurrent(cell, x, state, weights, lengths):
    """Runs cell over x (T, N, I) from `state` (a tensor, or (h, c) for the LSTM) as one op;
    lengths (N, 1) (or None) freezes each sequence's state after its length and zeroes its
    later outputs. Returns (outputs (T, N, H), final state). float16 layers compute in float32
    and round once at the end, as float16 products do."""
    half = x.dtype == mstype.float16
    if half:
        x, state = ops.cast(x, mstype.float32), _cast_state(state, mstype.float32)
        weights = tuple(None if w is None else ops.cast(w, mstype.float32) for w in weights)
    flat = None if lengths is None else F.reshape(lengths, (-1,))
    out, final = _whole_sequence(cell, x, state, weights, flat)
    if lengths is not None:  # the op repeats a finished sequence's state; outputs are zeros
        live = F.reshape(_steps(x), (-1, 1, 1)) < F.reshape(lengths, (1, -1, 1))
        out = ops.where(live, out, 0.0)
    if half:
        out, final = ops.cast(out, mstype.float16), _cast_state(final, mstype.float16)
    return out, final


def _steps(x):
    """0, 1, ..., T - 1 for x's first axis (T steps; also where the graph learns T only when it
    runs)."""
    return ops.arange(size_when_run(x, 0))


def _reverse(x, lengths):
    """x (T, N, ...) reversed along time; with lengths, only each sequence's first length
    steps are reversed (ReverseSequence), through a one-hot permutation product."""
    if lengths is None:
        return ops.flip(x, 0)
    t = F.reshape(_steps(x), (-1, 1))
    lens = F.reshape(ops.cast(lengths, mstype.int32), (1, -1))
    source = ops.where(t < lens, lens - 1 - t, t)                       # (T, N)
    perm = ops.cast(source[None, :, :] == t[:, None, :], x.dtype)  # (T, T, N): source's one-hot
    perm = F.transpose(perm, (2, 1, 0))                               # (N, T, T)
    moved = ops.matmul(perm, F.transpose(x, (1, 0, 2)))                  # (N, T, F)
    return F.transpose(moved, (1, 0, 2))


class _RNNBase(Cell):
    _MODE = "RNN_TANH"

    def __init__(self, input_size, hidden_size, num_layers=1, has_bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, dtype=mstype.float32, *, _mode=None):
        super().__init__()
        if _mode is not None:
            self._MODE = _mode
        who = type(self).__name__
        self.input_size = check_int(input_size, who, "input_size")
        self.hidden_size = check_int(hidden_size, who, "hidden_size")
        self.num_layers = check_int(num_layers, who, "num_layers")
        self.has_bias = check_bool(has_bias, who, "has_bias")
        self.batch_first = check_bool(batch_first, who, "batch_first")
        self.bidirectional = check_bool(bidirectional, who, "bidirectional")
        if isinstance(dropout, bool) or not isinstance(dropout, float):
            raise TypeError(f"{who}: dropout must be a float, got {dropout!r}")
        if not 0 <= dropout < 1:
            raise ValueError(f"{who}: dropout must be in [0, 1), got {dropout}")
        self.dropout = dropout
        self.dropout_op = Dropout(p=float(dropout))
        self.is_lstm = self._MODE == "LSTM"
        self._names = self._make_parameters(dtype)

    def _make_parameters(self, dtype):
        """weight_ih_l{k}[_reverse], weight_hh_..., bias_ih_..., bias_hh_... (MindSpore's
        names and order: all weight_ih first, then weight_hh, then the biases)."""
        gates = _CHUNKS[self._MODE] * self.hidden_size
        dirs = 2 if self.bidirectional else 1
        init = Uniform(1 / math.sqrt(self.hidden_size))
        suffixes = [f"l{k}{'_reverse' if d else ''}" for k in range(self.num_layers)
                    for d in range(dirs)]
        inputs = [self.input_size if k == 0 else self.hidden_size * dirs
                  for k in range(self.num_layers) for _ in range(dirs)]
        kinds = [("weight_ih", lambda n: (gates, n)), ("weight_hh", lambda n: (gates,
                                                                             self.hidden_size))]
        if self.has_bias:
            kinds += [("bias_ih", lambda n: (gates,)), ("bias_hh", lambda n: (gates,))]
        names = {}
        for kind, shape_of in kinds:
            names[kind] = []
            for suffix, n in zip(suffixes, inputs):
                name = f"{kind}_{suffix}"
                setattr(self, name, Parameter(initializer(init, shape_of(n), dtype), name))
                names[kind].append(name)
        return names

    def _weights(self, index, dtype):
        kinds = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        return tuple(ops.cast(getattr(self, self._names[k][index]), dtype) if k in self._names
                     else None for k in kinds)

    def _initial(self, x, hx, batch):
        who = type(self).__name__
        dirs = 2 if self.bidirectional else 1
        shape = (self.num_layers * dirs, batch, self.hidden_size)
        if hx is None:
            rows = size_when_run(x, 0 if self.batch_first else 1)  # as the graph runs
            zeros = ops.zeros((shape[0], rows, shape[2]), x.dtype)
            return (zeros, zeros) if self.is_lstm else zeros
        parts = hx if self.is_lstm else (hx,)
        if self.is_lstm and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"{who}: hx must be a tuple (h_0, c_0)")
        for part in parts:
            _check_float(who, "hx", part)
            if part.dtype != x.dtype:
                raise TypeError(f"{who}: x and hx must have one dtype, got {x.dtype} and "
                                f"{part.dtype}")
            if tuple(part.shape) != shape:
                raise ValueError(f"{who}: hx must have shape {shape}, got {tuple(part.shape)}")
        return tuple(hx) if self.is_lstm else hx

    def construct(self, x, hx=None, seq_length=None):
        who = type(self).__name__
        if len(x.shape) != 3:
            raise ValueError(f"{who}: x must be 3-D, got shape {tuple(x.shape)}")
        _check_float(who, "x", x)
        batch = x.shape[0] if self.batch_first else x.shape[1]
        state = self._initial(x, hx, batch)
        lengths = None
        if seq_length is not None:
            if seq_length.dtype not in (mstype.int32, mstype.int64) or \
                    tuple(seq_length.shape) != (batch,):
                raise ValueError(f"{who}: seq_length must be an int32/int64 Tensor of shape "
                                 f"({batch},), got {seq_length.dtype} {tuple(seq_length.shape)}")
            lengths = F.reshape(ops.cast(seq_length, mstype.int32), (batch, 1))
        if self.batch_first:
            x = F.transpose(x, (1, 0, 2))
        out, final = self._stack(x, state, lengths)
        if self.batch_first:
            out = F.transpose(out, (1, 0, 2))
        return out, final

    def _stack(self, x, state, lengths):
        cell = _CELLS[self._MODE]
        dirs = 2 if self.bidirectional else 1
        layer_in, finals = x, []
        for k in range(self.num_layers):
            outs = []
            for d in range(dirs):
                i = k * dirs + d
                start = (state[0][i], state[1][i]) if self.is_lstm else state[i]
                seq = layer_in if d == 0 else _reverse(layer_in, lengths)
                out, last = recurrent(cell, seq, start, self._weights(i, x.dtype), lengths)
                outs.append(out if d == 0 else _reverse(out, lengths))
                finals.append(last)
            layer_out = outs[0] if dirs == 1 else ops.concat(outs, 2)
            last_layer = k == self.num_layers - 1
            layer_in = layer_out if last_layer or self.dropout == 0 else \
                self.dropout_op(layer_out)
        if self.is_lstm:
            return layer_out, (ops.stack([f[0] for f in finals], 0),
                               ops.stack([f[1] for f in finals], 0))
        return layer_out, ops.stack(finals, 0)


class RNN(_RNNBase):
    """Elman RNN; nonlinearity 'tanh' (default) or 'relu'. construct(x, hx=None,
    seq_length=None) -> (output, h_n)."""

    def __init__(self, *args, **kwargs):
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(*args, **kwargs,
                         _mode="RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU")
        self.nonlinearity = nonlinearity


class GRU(_RNNBase):
    """construct(x, hx=None, seq_length=None) -> (output, h_n)."""
    _MODE = "GRU"


class LSTM(_RNNBase):
    """construct(x, hx=None, seq_length=None) with hx = (h_0, c_0) -> (output, (h_n, c_n))."""
    _MODE = "LSTM"

