"""An LSTM's and a GRU's loss and gradients over a sequence: kiln PyNative and Graph mode
(each layer one op, ops/recurrent.cc) against PyTorch eager's fused nn.LSTM/nn.GRU and JAX jit
(lax.scan), in one process, on the same inputs and weights.

nn.LSTM(64, 64) and nn.GRU(64, 64), batch 16, sequences of 50 and 200 steps (batch_first); the
loss is the mean square of the outputs, differentiated with respect to the four weights (no
optimizer, so the frameworks do the same arithmetic). Before timing, kiln Graph is checked
against PyNative and both against PyTorch and JAX (loss and every gradient); a disagreement
stops the script.

Run: PYTHONPATH=build/dev/python python benchmarks/bench_rnn.py --threads 1
Beside busy processes (issue #16): add --contention N [--nice K] (see _common.py).
"""
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import (  # noqa: E402
    bench_time,
    benchmark_setup,
    check_close,
    contention_session,
    protocol_header,
    table,
)

BATCH, FEATURES, HIDDEN = 16, 64, 64
STEPS = (50, 200)


def kiln_setup(ms, nn, kind):
    """(the layer's weights as NumPy arrays, a value_and_grad function of the input)."""
    ms.set_seed(0)
    layer = getattr(nn, kind)(FEATURES, HIDDEN, batch_first=True)
    weights = layer.trainable_params()

    def loss(inputs):
        out, _ = layer(inputs)
        return (out * out).mean()

    return [w.asnumpy() for w in weights], ms.value_and_grad(loss, None, weights)


def torch_setup(torch, kind, weights):
    layer = getattr(torch.nn, kind)(FEATURES, HIDDEN, batch_first=True)
    params = [layer.weight_ih_l0, layer.weight_hh_l0, layer.bias_ih_l0, layer.bias_hh_l0]
    with torch.no_grad():
        for p, w in zip(params, weights):
            p.copy_(torch.from_numpy(w))

    def run(x):
        out, _ = layer(x)
        loss = (out * out).mean()
        return loss, torch.autograd.grad(loss, params)

    return run


def jax_setup(jax, kind, weights):
    jnp = jax.numpy

    def lstm_step(params, state, x_t):
        w_ih, w_hh, b_ih, b_hh = params
        h, c = state
        i, f, g, o = jnp.split(x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    def gru_step(params, h, x_t):
        w_ih, w_hh, b_ih, b_hh = params
        i_r, i_z, i_n = jnp.split(x_t @ w_ih.T + b_ih, 3, axis=-1)
        h_r, h_z, h_n = jnp.split(h @ w_hh.T + b_hh, 3, axis=-1)
        r, z = jax.nn.sigmoid(i_r + h_r), jax.nn.sigmoid(i_z + h_z)
        n = jnp.tanh(i_n + r * h_n)
        h = n + z * (h - n)
        return h, h

    def loss(params, x):
        zeros = jnp.zeros((x.shape[0], HIDDEN), x.dtype)
        step = lstm_step if kind == "LSTM" else gru_step
        start = (zeros, zeros) if kind == "LSTM" else zeros
        _, out = jax.lax.scan(lambda s, x_t: step(params, s, x_t), start, jnp.swapaxes(x, 0, 1))
        return (out * out).mean()

    grad_fn = jax.jit(jax.value_and_grad(loss))
    params = [jnp.asarray(w) for w in weights]
    return lambda x: grad_fn(params, x)


def measure(kind, steps, ms, nn, jax, torch):
    """{column: seconds} for one layer kind and sequence length."""
    x_np = np.random.default_rng(steps).standard_normal((BATCH, steps, FEATURES))
    x_np = x_np.astype(np.float32)
    x = ms.Tensor(x_np)
    weights, grad_fn = kiln_setup(ms, nn, kind)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    eager_loss, eager_grads = grad_fn(x)
    ms.set_context(mode=ms.GRAPH_MODE)
    compiled = ms.jit(grad_fn)
    graph_loss, graph_grads = compiled(x)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    check_close(f"{kind} T={steps} loss, kiln Graph vs PyNative", graph_loss.asnumpy(),
                eager_loss.asnumpy(), 1e-5, 1e-7)
    for g, e in zip(graph_grads, eager_grads):
        check_close(f"{kind} T={steps} gradient, kiln Graph vs PyNative", g.asnumpy(), e.asnumpy(),
                    1e-4, 1e-6)
    times = {"kiln PyNative": bench_time(lambda: grad_fn(x), 5)}
    ms.set_context(mode=ms.GRAPH_MODE)
    times["kiln Graph"] = bench_time(lambda: compiled(x), 5)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    if torch is not None:
        run = torch_setup(torch, kind, weights)
        xt = torch.from_numpy(x_np)
        loss, grads = run(xt)
        check_close(f"{kind} T={steps} loss, PyTorch vs kiln", loss.item(), eager_loss.asnumpy(),
                    1e-5, 1e-7)
        for g, e in zip(grads, eager_grads):
            check_close(f"{kind} T={steps} gradient, PyTorch vs kiln", g.numpy(), e.asnumpy(), 1e-3,
                        1e-6)
        times["PyTorch eager"] = bench_time(lambda: run(xt), 5)
    if jax is not None:
        run = jax_setup(jax, kind, weights)
        xj = jax.numpy.asarray(x_np)
        loss, grads = run(xj)
        check_close(f"{kind} T={steps} loss, JAX vs kiln", np.asarray(loss), eager_loss.asnumpy(),
                    1e-5, 1e-7)
        for g, e in zip(grads, eager_grads):
            check_close(f"{kind} T={steps} gradient, JAX vs kiln", np.asarray(g), e.asnumpy(), 1e-3,
                        1e-6)
        times["JAX jit"] = bench_time(lambda: jax.block_until_ready(run(xj)), 5)
    return times


def main():
    args, pinned, jax, torch, _mindspore, _peak = benchmark_setup()
    import kiln as ms  # noqa: PLC0415
    from kiln import nn  # noqa: PLC0415

    if pinned:
        print(pinned)
    rows = []
    for kind in ("LSTM", "GRU"):
        for steps in STEPS:
            times = measure(kind, steps, ms, nn, jax, torch)
            graph = times["kiln Graph"]
            for name, seconds in times.items():
                rows.append([f"{kind} loss + gradients, T={steps}", name,
                             f"{seconds * 1e3:.1f}", f"{graph / seconds:.2f}"])
    for line in protocol_header():  # after the timing: the busy processes start with it
        print(line)
    print(f"\n{args.threads} thread(s); ms per call; last column kiln Graph's time / the row's\n")
    print(table(["workload", "framework", "ms", "kiln Graph / this"], rows))


if __name__ == "__main__":
    with contention_session():
        main()
