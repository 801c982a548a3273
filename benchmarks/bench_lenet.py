"""A LeNet-style conv net (SPEC §4) on 28×28 inputs, batch 64: forward and training step
(softmax cross-entropy + Momentum), kiln PyNative and Graph mode against PyTorch eager,
torch.compile, JAX jit and MindSpore (PyNative and Graph), in one process, on the same inputs and
the same weights.

conv 1→6 5×5 (pad same) → relu → maxpool 2 → conv 6→16 5×5 (valid) → relu → maxpool 2 →
flatten → dense 400→120 → relu → dense 120→84 → relu → dense 84→10.

Before timing, kiln Graph is checked against kiln PyNative (forward, and the losses and weights
of three training steps) and both against PyTorch with the same weights; a disagreement stops
the script with an AssertionError.

MindSpore runs the very same LeNet class as kiln (kiln's API is MindSpore's), from kiln's
weights, with the same loss and Momentum; its logits and first three losses are checked against
kiln's, and a mode that fails or disagrees gets a note instead of a column. Its Graph columns run
in GRAPH_MODE, the training step as one nn.TrainOneStepCell. It is timed after every other
framework (see _common.py).

Run: PYTHONPATH=build/bench/python python benchmarks/bench_lenet.py --threads 1
(with MindSpore: the venv of benchmarks/requirements-peers.txt instead of `python`)
Beside busy processes (issue #16): add --contention N [--nice K] (see _common.py).
"""
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

BATCH = 64
# (name, kind, shape) of each layer's parameters, in kiln's layouts (conv OIHW, dense (out, in)).
LAYERS = [("conv1", "conv", (6, 1, 5, 5)), ("conv2", "conv", (16, 6, 5, 5)),
          ("fc1", "dense", (120, 400)), ("fc2", "dense", (84, 120)), ("fc3", "dense", (10, 84))]


def flops(batch):
    """Forward and training-step FLOPs of the convolutions and matmuls (2 per multiply-add)."""
    conv1 = 2 * batch * 28 * 28 * 6 * 1 * 25
    conv2 = 2 * batch * 10 * 10 * 16 * 6 * 25
    dense = 2 * batch * (400 * 120 + 120 * 84 + 84 * 10)
    forward = conv1 + conv2 + dense
    # Backward: a weight gradient for every layer, an input gradient for all but conv1.
    return forward, 3 * forward - conv1


def lenet_class(nn):
    """The LeNet cell class on `nn`: kiln.nn, or mindspore.nn (the same API), for MindSpore."""

    class LeNet(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="same", has_bias=True)
            self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=True)
            self.relu = nn.ReLU()
            self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
            self.flatten = nn.Flatten()
            self.fc1 = nn.Dense(400, 120)
            self.fc2 = nn.Dense(120, 84)
            self.fc3 = nn.Dense(84, 10)

        def construct(self, x):
            x = self.pool(self.relu(self.conv1(x)))
            x = self.pool(self.relu(self.conv2(x)))
            x = self.flatten(x)
            x = self.relu(self.fc1(x))
            x = self.relu(self.fc2(x))
            return self.fc3(x)

    return LeNet


def kiln_weights(net):
    """{layer: (weight, bias)} as NumPy arrays."""
    return {name: (getattr(net, name).weight.asnumpy().copy(),
                   getattr(net, name).bias.asnumpy().copy()) for name, _, _ in LAYERS}


def load_kiln(net, weights, Tensor):
    for name, (w, b) in weights.items():
        getattr(net, name).weight.set_data(Tensor(w))
        getattr(net, name).bias.set_data(Tensor(b))
    return net


def torch_lenet(torch, weights):
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    layers = [m for m in model if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        for layer, (name, _, _) in zip(layers, LAYERS):
            w, b = weights[name]
            layer.weight.copy_(torch.from_numpy(w))
            layer.bias.copy_(torch.from_numpy(b))
    return model


def jax_lenet(jax, weights):
    jnp = jax.numpy
    params = {name: (jnp.asarray(w), jnp.asarray(b)) for name, (w, b) in weights.items()}

    def conv(x, w, b, padding):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), padding,
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + b[None, :, None, None]

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                     "VALID")

    def forward(params, x):
        x = pool(jax.nn.relu(conv(x, *params["conv1"], "SAME")))
        x = pool(jax.nn.relu(conv(x, *params["conv2"], "VALID")))
        x = x.reshape(x.shape[0], -1)
        for name in ("fc1", "fc2"):
            w, b = params[name]
            x = jax.nn.relu(x @ w.T + b)
        w, b = params["fc3"]
        return x @ w.T + b

    def loss(params, x, y):
        logp = jax.nn.log_softmax(forward(params, x))
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    step = jax_momentum_step(jax, loss)

    velocity = jax.tree_util.tree_map(jnp.zeros_like, params)
    return jax.jit(forward), step, params, velocity


def main():
    args, pinned, jax, torch, mindspore, peak = benchmark_setup()
    import kiln as ms  # noqa: PLC0415
    from kiln import Tensor, nn  # noqa: PLC0415
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((BATCH, 1, 28, 28)).astype(np.float32)
    y_np = rng.integers(0, 10, size=BATCH)
    x, y = Tensor(x_np), Tensor(y_np)
    LeNet = lenet_class(nn)
    ms.set_seed(0)
    net = LeNet()
    weights = kiln_weights(net)
    fwd_flops, train_flops = flops(BATCH)

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
    fwd["pynative"] = bench_time(lambda: net(x), 50)
    ms.set_context(mode=ms.GRAPH_MODE)
    fwd["graph"] = bench_time(lambda: net(x), 50)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    notes = ["torch.compile: skipped (--no-compile)"] if args.no_compile else []
    if torch is not None:
        model = torch_lenet(torch, weights).eval()
        xt = torch.from_numpy(x_np.copy())
        with torch.no_grad():
            check_close("forward, kiln PyNative vs PyTorch", eager_out, model(xt).numpy(),
                        1e-3, 1e-4)
            fwd["torch"] = bench_time(lambda: model(xt), 50)
            if not args.no_compile:
                compiled, seconds, note = try_torch_compile(torch, model, xt)
                notes += [f"forward: {note}"] if note else []
                if compiled is not None:
                    check_close("forward, torch.compile vs PyTorch eager",
                                compiled(xt).numpy(), model(xt).numpy(), 1e-4, 1e-5)
                    print(f"torch.compile forward compile (first call): {seconds:.1f} s")
                    fwd["compile"] = bench_time(lambda: compiled(xt), 50)
    if jax is not None:
        jforward, jstep, jparams, jvel = jax_lenet(jax, weights)
        xj, yj = jax.numpy.asarray(x_np), jax.numpy.asarray(y_np)
        check_close("forward, JAX vs kiln PyNative", np.asarray(jforward(jparams, xj)),
                    eager_out, 1e-3, 1e-4)
        fwd["jax"] = bench_time(lambda: jforward(jparams, xj).block_until_ready(), 50)

    # ---- training step: three steps from the same weights must agree, then timing ----
    ms.set_seed(0)
    eager_net = load_kiln(LeNet(), weights, Tensor)
    eager_step = kiln_momentum_step(ms, eager_net, nn.CrossEntropyLoss())
    graph_net = load_kiln(LeNet(), weights, Tensor)
    graph_step = ms.jit(kiln_momentum_step(ms, graph_net, nn.CrossEntropyLoss()))
    eager_losses = [float(eager_step(x, y).asnumpy()) for _ in range(3)]
    before = ms.get_jit_stats()["compile_seconds"]
    start = time.perf_counter()
    graph_losses = [float(graph_step(x, y).asnumpy())]
    print(f"kiln Graph train step compile: "
          f"{(ms.get_jit_stats()['compile_seconds'] - before) * 1e3:.1f} ms "
          f"(first call incl. run: {(time.perf_counter() - start) * 1e3:.1f} ms)")
    graph_losses += [float(graph_step(x, y).asnumpy()) for _ in range(2)]
    check_close("train step losses (3 steps), kiln Graph vs PyNative", graph_losses,
                eager_losses, 1e-4, 1e-5)
    for name, _, _ in LAYERS:
        check_close(f"weights of {name} after 3 steps, kiln Graph vs PyNative",
                    getattr(graph_net, name).weight.asnumpy(),
                    getattr(eager_net, name).weight.asnumpy(), 1e-3, 1e-5)
    if torch is not None:
        tmodel = torch_lenet(torch, weights)
        xt, yt = torch.from_numpy(x_np.copy()), torch.from_numpy(y_np.copy())
        tstep = torch_momentum_step(torch, tmodel, torch.nn.CrossEntropyLoss())
        torch_losses = [float(tstep(xt, yt)) for _ in range(3)]
        check_close("train step losses (3 steps), kiln PyNative vs PyTorch", eager_losses,
                    torch_losses, 1e-3, 1e-4)
        check_close("weights of fc1 after 3 steps, kiln PyNative vs PyTorch",
                    eager_net.fc1.weight.asnumpy(), tmodel[7].weight.detach().numpy(),
                    1e-3, 1e-4)
    train = {}
    train["pynative"] = bench_time(lambda: eager_step(x, y), 20)
    compiles = ms.get_jit_stats()["compiles"]
    train["graph"] = bench_time(lambda: graph_step(x, y), 20)
    if ms.get_jit_stats()["compiles"] != compiles:
        raise AssertionError("kiln Graph train step recompiled while being timed")
    if torch is not None:
        train["torch"] = bench_time(lambda: tstep(xt, yt), 20)
        if "compile" in fwd:
            seconds = torch_compiled_step_time(
                torch, lambda: torch_lenet(torch, weights), torch.nn.CrossEntropyLoss(), xt, yt,
                torch_losses, 20, notes)
            if seconds is not None:
                train["compile"] = seconds
    if jax is not None:
        train["jax"] = jax_step_time(jstep, jparams, jvel, xj, yj, eager_losses, 20)

    if mindspore is not None:  # last: its runtime threads keep spinning once used
        def mindspore_net():
            return mindspore_load(mindspore, lenet_class(mindspore.nn)(), net)

        fwd.update(mindspore_forward_times(mindspore, mindspore_net, [x_np], eager_out,
                                           "forward", 50, notes))
        train.update(mindspore_train_times(  # its CrossEntropyLoss wants int32 labels
            mindspore, mindspore_net, mindspore.nn.CrossEntropyLoss,
            [x_np, y_np.astype(np.int32)], eager_losses, "train step", 20, notes))

    if pinned:
        print(pinned)
    for note in notes:
        print(note)
    print()
    print(f"LeNet, batch {BATCH}")
    report(args.threads, peak, [(f"LeNet forward, batch {BATCH}", fwd_flops, fwd),
                                (f"LeNet train step, batch {BATCH}", train_flops, train)])


if __name__ == "__main__":
    with contention_session():  # busy processes (--contention) stop with main, however it ends
        main()
