"""A transformer encoder block (SPEC §4: d=256, 4 heads, sequence 128, batch 8): forward and
training step, kiln PyNative and Graph mode against PyTorch eager, torch.compile, JAX jit and
MindSpore (PyNative and Graph), in one process, on the same inputs and the same weights.

Pre-norm block, built in kiln from nn.Dense, nn.LayerNorm, ops.matmul, ops.softmax, ops.gelu,
ops.reshape and ops.transpose (and written op for op the same way in PyTorch and JAX — no fused
attention kernels, so every framework does the same arithmetic; MindSpore runs the very same
class, kiln's API being MindSpore's):

    h = LayerNorm(x);  q, k, v = Dense(h) each, split into 4 heads of 64
    x = x + Dense(softmax(q @ k^T / 8) @ v)          (heads merged back)
    x = x + Dense(gelu(Dense(LayerNorm(x))))        (256 → 1024 → 256, exact (erf) GELU)

The training step is mean-squared error against a fixed random target + Momentum (lr 0.01,
momentum 0.9). Before timing, kiln Graph is checked against kiln PyNative (forward, and the
losses and weights of three training steps) and both against PyTorch with the same weights; a
disagreement stops the script with an AssertionError.

MindSpore starts from kiln's weights, with the same loss and Momentum; its output and first three
losses are checked against kiln's, and a mode that fails or disagrees gets a note instead of a
column. Its Graph columns run in GRAPH_MODE, the training step as one nn.TrainOneStepCell. It is
timed after every other framework (see _common.py).

Run: PYTHONPATH=build/bench/python python benchmarks/bench_transformer.py --threads 1
(with MindSpore: the venv of benchmarks/requirements-peers.txt instead of `python`)
Beside busy processes (issue #16): add --contention N [--nice K] (see _common.py).
"""
import math
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import (  # noqa: E402
    bench_time,
    benchmark_setup,
    check_close,
    contention_session,
    jax_momentum_step,
    jax_step_time,
    kiln_momentum_step,
    mindspore_forward_times,
    mindspore_load,
    mindspore_train_times,
    report,
    torch_compiled_step_time,
    torch_momentum_step,
    try_torch_compile,
)

D, HEADS, SEQ, BATCH, FF = 256, 4, 128, 8, 1024
DENSES = [("q", D, D), ("k", D, D), ("v", D, D), ("proj", D, D), ("fc1", D, FF), ("fc2", FF, D)]
NORMS = ["ln1", "ln2"]


def flops():
    """Forward and training-step FLOPs of the matmuls (2 per multiply-add)."""
    tokens = BATCH * SEQ
    dense = sum(2 * tokens * i * o for _, i, o in DENSES)
    attention = 2 * (2 * BATCH * HEADS * SEQ * SEQ * (D // HEADS))  # q @ k^T and p @ v
    forward = dense + attention
    # Backward: every matmul has a weight (or second operand) gradient and an input gradient
    # (the first layers' inputs come from LayerNorm, whose parameters are trained).
    return forward, 3 * forward


def block_class(nn, ops):
    """The encoder block cell class on `nn` and `ops`: kiln's, or mindspore's (the same API)."""

    class EncoderBlock(nn.Cell):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm((D,), begin_norm_axis=-1, begin_params_axis=-1,
                                    epsilon=1e-5)
            self.q = nn.Dense(D, D)
            self.k = nn.Dense(D, D)
            self.v = nn.Dense(D, D)
            self.proj = nn.Dense(D, D)
            self.ln2 = nn.LayerNorm((D,), begin_norm_axis=-1, begin_params_axis=-1,
                                    epsilon=1e-5)
            self.fc1 = nn.Dense(D, FF)
            self.fc2 = nn.Dense(FF, D)
            self.heads = HEADS
            self.head_dim = D // HEADS
            self.scale = 1.0 / math.sqrt(D // HEADS)

        def construct(self, x):
            b, s, d = x.shape
            h = self.ln1(x)
            split = (b, s, self.heads, self.head_dim)
            q = ops.transpose(ops.reshape(self.q(h), split), (0, 2, 1, 3))   # (b, H, s, dh)
            k = ops.transpose(ops.reshape(self.k(h), split), (0, 2, 3, 1))   # (b, H, dh, s)
            v = ops.transpose(ops.reshape(self.v(h), split), (0, 2, 1, 3))   # (b, H, s, dh)
            p = ops.softmax(ops.matmul(q, k) * self.scale, -1)              # (b, H, s, s)
            o = ops.reshape(ops.transpose(ops.matmul(p, v), (0, 2, 1, 3)), (b, s, d))
            x = x + self.proj(o)
            return x + self.fc2(ops.gelu(self.fc1(self.ln2(x)), approximate="none"))

    return EncoderBlock


def kiln_weights(net):
    """{name: (weight, bias)} as NumPy arrays; LayerNorm's are (gamma, beta)."""
    out = {}
    for name, _, _ in DENSES:
        out[name] = (getattr(net, name).weight.asnumpy().copy(),
                     getattr(net, name).bias.asnumpy().copy())
    rng = np.random.default_rng(1)  # non-trivial LayerNorm parameters, so the check sees them
    for name in NORMS:
        out[name] = (1 + 0.1 * rng.standard_normal(D).astype(np.float32),
                     0.1 * rng.standard_normal(D).astype(np.float32))
    return out


def load_kiln(net, weights, Tensor):
    for name, _, _ in DENSES:
        getattr(net, name).weight.set_data(Tensor(weights[name][0]))
        getattr(net, name).bias.set_data(Tensor(weights[name][1]))
    for name in NORMS:
        getattr(net, name).gamma.set_data(Tensor(weights[name][0]))
        getattr(net, name).beta.set_data(Tensor(weights[name][1]))
    return net


def torch_block(torch, weights):
    nn, F = torch.nn, torch.nn.functional

    class EncoderBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D, eps=1e-5), nn.LayerNorm(D, eps=1e-5)
            for name, i, o in DENSES:
                setattr(self, name, nn.Linear(i, o))

        def forward(self, x):
            b, s, d = x.shape
            h = self.ln1(x)
            q = self.q(h).reshape(b, s, HEADS, d // HEADS).permute(0, 2, 1, 3)
            k = self.k(h).reshape(b, s, HEADS, d // HEADS).permute(0, 2, 3, 1)
            v = self.v(h).reshape(b, s, HEADS, d // HEADS).permute(0, 2, 1, 3)
            p = torch.softmax(torch.matmul(q, k) * (1.0 / math.sqrt(d // HEADS)), -1)
            o = torch.matmul(p, v).permute(0, 2, 1, 3).reshape(b, s, d)
            x = x + self.proj(o)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    model = EncoderBlock()
    with torch.no_grad():
        for name, (w, b) in weights.items():
            getattr(model, name).weight.copy_(torch.from_numpy(w))
            getattr(model, name).bias.copy_(torch.from_numpy(b))
    return model


def jax_block(jax, weights):
    jnp = jax.numpy
    params = {name: (jnp.asarray(w), jnp.asarray(b)) for name, (w, b) in weights.items()}

    def dense(p, x):
        return x @ p[0].T + p[1]

    def layer_norm(p, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p[0] + p[1]

    def forward(params, x):
        b, s, d = x.shape
        h = layer_norm(params["ln1"], x)
        q = dense(params["q"], h).reshape(b, s, HEADS, d // HEADS).transpose(0, 2, 1, 3)
        k = dense(params["k"], h).reshape(b, s, HEADS, d // HEADS).transpose(0, 2, 3, 1)
        v = dense(params["v"], h).reshape(b, s, HEADS, d // HEADS).transpose(0, 2, 1, 3)
        p = jax.nn.softmax((q @ k) * (1.0 / math.sqrt(d // HEADS)), -1)
        o = (p @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
        x = x + dense(params["proj"], o)
        h = jax.nn.gelu(dense(params["fc1"], layer_norm(params["ln2"], x)), approximate=False)
        return x + dense(params["fc2"], h)

    def loss(params, x, target):
        return jnp.mean((forward(params, x) - target) ** 2)

    step = jax_momentum_step(jax, loss)

    velocity = jax.tree_util.tree_map(jnp.zeros_like, params)
    return jax.jit(forward), step, params, velocity


def main():
    args, pinned, jax, torch, mindspore, peak = benchmark_setup()
    import kiln as ms  # noqa: PLC0415
    from kiln import Tensor, nn, ops  # noqa: PLC0415
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((BATCH, SEQ, D)).astype(np.float32)
    t_np = rng.standard_normal((BATCH, SEQ, D)).astype(np.float32)
    x, target = Tensor(x_np), Tensor(t_np)
    Block = block_class(nn, ops)
    ms.set_seed(0)
    weights = kiln_weights(Block())
    net = load_kiln(Block(), weights, Tensor)
    fwd_flops, train_flops = flops()

    # ---- forward: agreement, then timing ----
    ms.set_context(mode=ms.PYNATIVE_MODE)
    eager_out = net(x).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE)
    before = ms.get_jit_stats()["compile_seconds"]
    graph_out = net(x).asnumpy()
    print(f"kiln Graph forward compile: "
          f"{(ms.get_jit_stats()['compile_seconds'] - before) * 1e3:.1f} ms")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    check_close("forward, kiln Graph vs PyNative", graph_out, eager_out, 1e-4, 1e-5)
    fwd = {}
    fwd["pynative"] = bench_time(lambda: net(x), 10)
    ms.set_context(mode=ms.GRAPH_MODE)
    fwd["graph"] = bench_time(lambda: net(x), 10)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    notes = ["torch.compile: skipped (--no-compile)"] if args.no_compile else []
    if torch is not None:
        model = torch_block(torch, weights).eval()
        xt, tt = torch.from_numpy(x_np.copy()), torch.from_numpy(t_np.copy())
        with torch.no_grad():
            check_close("forward, kiln PyNative vs PyTorch", eager_out, model(xt).numpy(),
                        1e-3, 1e-4)
            fwd["torch"] = bench_time(lambda: model(xt), 10)
            if not args.no_compile:
                compiled, seconds, note = try_torch_compile(torch, model, xt)
                notes += [f"forward: {note}"] if note else []
                if compiled is not None:
                    check_close("forward, torch.compile vs PyTorch eager",
                                compiled(xt).numpy(), model(xt).numpy(), 1e-4, 1e-5)
                    print(f"torch.compile forward compile (first call): {seconds:.1f} s")
                    fwd["compile"] = bench_time(lambda: compiled(xt), 10)
    if jax is not None:
        jforward, jstep, jparams, jvel = jax_block(jax, weights)
        xj, tj = jax.numpy.asarray(x_np), jax.numpy.asarray(t_np)
        check_close("forward, JAX vs kiln PyNative", np.asarray(jforward(jparams, xj)),
                    eager_out, 1e-3, 1e-4)
        fwd["jax"] = bench_time(lambda: jforward(jparams, xj).block_until_ready(), 10)

    # ---- training step: three steps from the same weights must agree, then timing ----
    eager_net = load_kiln(Block(), weights, Tensor)
    eager_step = kiln_momentum_step(ms, eager_net, nn.MSELoss())
    graph_net = load_kiln(Block(), weights, Tensor)
    graph_step = ms.jit(kiln_momentum_step(ms, graph_net, nn.MSELoss()))
    eager_losses = [float(eager_step(x, target).asnumpy()) for _ in range(3)]
    before = ms.get_jit_stats()["compile_seconds"]
    start = time.perf_counter()
    graph_losses = [float(graph_step(x, target).asnumpy())]
    print(f"kiln Graph train step compile: "
          f"{(ms.get_jit_stats()['compile_seconds'] - before) * 1e3:.1f} ms "
          f"(first call incl. run: {(time.perf_counter() - start) * 1e3:.1f} ms)")
    graph_losses += [float(graph_step(x, target).asnumpy()) for _ in range(2)]
    check_close("train step losses (3 steps), kiln Graph vs PyNative", graph_losses,
                eager_losses, 1e-4, 1e-5)
    for name, _, _ in DENSES:
        check_close(f"weights of {name} after 3 steps, kiln Graph vs PyNative",
                    getattr(graph_net, name).weight.asnumpy(),
                    getattr(eager_net, name).weight.asnumpy(), 1e-3, 1e-5)
    for name in NORMS:
        check_close(f"gamma of {name} after 3 steps, kiln Graph vs PyNative",
                    getattr(graph_net, name).gamma.asnumpy(),
                    getattr(eager_net, name).gamma.asnumpy(), 1e-3, 1e-5)
    if torch is not None:
        tmodel = torch_block(torch, weights)
        tstep = torch_momentum_step(torch, tmodel, torch.nn.MSELoss())
        torch_losses = [float(tstep(xt, tt)) for _ in range(3)]
        check_close("train step losses (3 steps), kiln PyNative vs PyTorch", eager_losses,
                    torch_losses, 1e-3, 1e-4)
        check_close("weights of fc1 after 3 steps, kiln PyNative vs PyTorch",
                    eager_net.fc1.weight.asnumpy(), tmodel.fc1.weight.detach().numpy(),
                    1e-3, 1e-4)
    train = {}
    train["pynative"] = bench_time(lambda: eager_step(x, target), 5)
    compiles = ms.get_jit_stats()["compiles"]
    train["graph"] = bench_time(lambda: graph_step(x, target), 5)
    if ms.get_jit_stats()["compiles"] != compiles:
        raise AssertionError("kiln Graph train step recompiled while being timed")
    if torch is not None:
        train["torch"] = bench_time(lambda: tstep(xt, tt), 5)
        if "compile" in fwd:
            seconds = torch_compiled_step_time(
                torch, lambda: torch_block(torch, weights), torch.nn.MSELoss(), xt, tt,
                torch_losses, 5, notes)
            if seconds is not None:
                train["compile"] = seconds
    if jax is not None:
        train["jax"] = jax_step_time(jstep, jparams, jvel, xj, tj, eager_losses, 5)

    if mindspore is not None:  # last: its runtime threads keep spinning once used
        def mindspore_net():
            return mindspore_load(mindspore, block_class(mindspore.nn, mindspore.ops)(), net)

        fwd.update(mindspore_forward_times(mindspore, mindspore_net, [x_np], eager_out,
                                           "forward", 10, notes))
        train.update(mindspore_train_times(mindspore, mindspore_net, mindspore.nn.MSELoss,
                                           [x_np, t_np], eager_losses, "train step", 5, notes))

    if pinned:
        print(pinned)
    for note in notes:
        print(note)
    print()
    print(f"Transformer encoder block, d={D}, {HEADS} heads, sequence {SEQ}, batch {BATCH}")
    report(args.threads, peak, [(f"encoder block forward, batch {BATCH}", fwd_flops, fwd),
                                (f"encoder block train step, batch {BATCH}", train_flops,
                                 train)])


if __name__ == "__main__":
    with contention_session():  # busy processes (--contention) stop with main, however it ends
        main()
