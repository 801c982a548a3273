"""The tests' reference for the recurrent ops: a recurrent layer's time loop written with kiln's
own cells (nn.layer.rnn's lstm_cell, gru_cell, ...) in a graph loop, one cell call per step,
with seq_length masking as MindSpore defines it (a finished sequence keeps its state and
outputs zeros). Patched over nn.layer.rnn.recurrent, it makes nn.LSTM/GRU/RNN run this loop."""
from kiln import ops
from kiln.common import dtype as mstype
from kiln.nn import _functional as F
from kiln.nn._loops import while_loop


def _step_of(x, index):
    """x[index] for a 0-d int tensor index, as a one-hot contraction over the time axis."""
    steps = x.shape[0]
    hit = ops.cast(ops.equal(ops.arange(0, steps, 1), index), x.dtype)
    return ops.sum(x * F.reshape(hit, (steps,) + (1,) * (len(x.shape) - 1)), 0)


def _put(out, index, value):
    """out with out[index] replaced by value, as a one-hot select over the time axis."""
    steps = out.shape[0]
    hit = ops.equal(ops.arange(0, steps, 1), index)
    hit = F.reshape(hit, (steps,) + (1,) * (len(out.shape) - 1))
    return ops.where(hit, ops.expand_dims(value, 0), out)


def cell_loop(cell, x, state, weights, lengths):
    """recurrent()'s contract: cell over x (T, N, I) from `state` (a tensor, or (h, c) for the
    LSTM); lengths (N, 1) or None. Returns (outputs (T, N, H), final state)."""
    is_lstm = isinstance(state, tuple)
    steps = x.shape[0]
    h_shape = tuple((state[0] if is_lstm else state).shape)
    states = tuple(state) if is_lstm else (state,)

    def keep_going(t, outputs, *carried):
        return t < steps

    def step(t, outputs, *carried):
        old = carried if is_lstm else carried[0]
        new = cell(_step_of(x, t), old, *weights)
        out = new[0] if is_lstm else new
        if lengths is not None:
            live = lengths > t
            out = ops.where(live, out, 0.0)
            new = tuple(ops.where(live, a, b) for a, b in zip(new, old)) if is_lstm else \
                ops.where(live, new, old)
        new = tuple(new) if is_lstm else (new,)
        return (t + 1, _put(outputs, t, out)) + new

    start = (ops.zeros((), mstype.int32), ops.zeros((steps,) + h_shape, x.dtype)) + states
    _, outputs, *final = while_loop(keep_going, step, start)
    return outputs, (tuple(final) if is_lstm else final[0])
