"""The seed network (SPEC §4) end to end: compile time, forward and training step, kiln
PyNative and Graph mode against PyTorch eager, torch.compile, JAX jit and MindSpore (PyNative and
Graph), in one process on the same inputs.

torch.compile (inductor) compiles the model; in the training step its backward comes from
AOTAutograd and the optimizer step is eager, as in bench_lenet.py and bench_transformer.py. The
compiled results are checked against PyTorch eager, and compiling is never timed.

MindSpore runs the same network from kiln's initial weights, so its logits and its first losses
are checked against kiln's. Its Graph columns run in GRAPH_MODE, the training step as one
nn.TrainOneStepCell (see mindspore_train_step in _common.py); each timed call ends in asnumpy(),
as its PyNative ops run asynchronously. MindSpore is timed last. The peers are optional: a
missing one gets no column, and a MindSpore mode that fails or disagrees gets a note instead.

The second table gives each time as GFLOP/s and a fraction of the machine's measured fp32 peak,
counting the three matmuls (2 FLOPs per multiply-add); the training step counts 3x the forward.

Run: PYTHONPATH=build/rel/python python benchmarks/bench_seed_network.py --threads 1 [--no-compile]
(with MindSpore: the venv of benchmarks/requirements-peers.txt instead of `python`)
Beside busy processes (issue #16): add --contention N [--nice K] (see _common.py).
"""
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
import kiln as ms  # noqa: E402
from _common import (  # noqa: E402
    bench_time,
    benchmark_setup,
    check_close,
    contention_session,
    jax_momentum_step,
    kiln_momentum_step,
    mindspore_forward_times,
    mindspore_load,
    mindspore_train_times,
    report,
    torch_momentum_step,
    try_torch_compile,
)
from five_ways import Network  # noqa: E402 - the seed network, defined once (SPEC §4)
from kiln import Tensor, nn  # noqa: E402


def flops(batch):
    """Forward FLOPs of the three matmuls at `batch` (2 per multiply-add); the training step
    counts 3x the forward (the forward, then input and weight gradients)."""
    return 2 * batch * (784 * 512 + 512 * 512 + 512 * 10)


def kiln_train_step(net):
    """Softmax cross-entropy + Momentum on the seed network (batch 64 in main)."""
    return kiln_momentum_step(ms, net, nn.CrossEntropyLoss())


def torch_mlp(torch):
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(784, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))


def torch_train_step(torch, model, forward=None):
    """The same training step in PyTorch; `forward` is the (possibly compiled) model."""
    return torch_momentum_step(torch, model, torch.nn.CrossEntropyLoss(), forward)


def torch_compiled(torch, model, x, what, notes):
    """`model` compiled by torch.compile and already called once on x (so compiling is never
    timed), or None when compiling fails; a failure's reason goes into notes."""
    # Start from an empty dynamo cache: every compile here is of nn.Sequential.forward, and a
    # second input shape for that code would otherwise recompile it with a dynamic batch size.
    torch._dynamo.reset()
    compiled, seconds, note = try_torch_compile(torch, model, x)
    notes += [f"{what}: {note}"] if note else []
    if compiled is not None:
        print(f"torch.compile {what} compile (first call): {seconds:.1f} s")
    return compiled


def mindspore_network(mindspore, kiln_net):
    """The seed network as a MindSpore nn.Cell (the same layers and parameter names), starting
    from kiln_net's weights."""
    mnn = mindspore.nn

    class Network(mnn.Cell):
        def __init__(self):
            super().__init__()
            self.flatten = mnn.Flatten()
            self.dense_relu_sequential = mnn.SequentialCell(
                mnn.Dense(784, 512), mnn.ReLU(), mnn.Dense(512, 512), mnn.ReLU(),
                mnn.Dense(512, 10))

        def construct(self, x):
            return self.dense_relu_sequential(self.flatten(x))

    return mindspore_load(mindspore, Network(), kiln_net)


def jax_model(jax, rng):
    """The same MLP in JAX: jitted forward and a jitted SGD-with-momentum training step."""
    jnp = jax.numpy
    sizes = [(784, 512), (512, 512), (512, 10)]
    params = [(jnp.asarray(rng.standard_normal((i, o)).astype(np.float32) * 0.05),
               jnp.zeros(o, jnp.float32)) for i, o in sizes]

    def forward(params, x):
        h = x.reshape(x.shape[0], -1)
        for k, (w, b) in enumerate(params):
            h = h @ w + b
            if k < len(params) - 1:
                h = jax.nn.relu(h)
        return h

    def loss(params, x, y):
        logp = jax.nn.log_softmax(forward(params, x))
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    step = jax_momentum_step(jax, loss)

    velocity = jax.tree_util.tree_map(jnp.zeros_like, params)
    return jax.jit(forward), step, params, velocity


def main():
    args, pinned, jax, torch, mindspore, peak = benchmark_setup()
    if pinned:
        print(pinned)
    rng = np.random.default_rng(0)
    jx = jax_model(jax, rng) if jax is not None else None
    notes = ["torch.compile: skipped (--no-compile)"] if args.no_compile else []
    compile_ok = torch is not None and not args.no_compile  # stops trying after a failure
    results = []
    deferred = []  # (the workload's times, a function returning the MindSpore ones)

    # Compile time of the seed network's forward.
    ms.set_seed(0)
    net = Network()
    x64 = Tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    before = ms.get_jit_stats()["compile_seconds"]
    ms.set_context(mode=ms.GRAPH_MODE)
    start = time.perf_counter()
    net(x64)
    first_call = time.perf_counter() - start
    compile_ms = (ms.get_jit_stats()["compile_seconds"] - before) * 1e3
    print(f"seed network compile: {compile_ms:.1f} ms "
          f"(first call incl. run: {first_call*1e3:.1f} ms)")

    for batch in (64, 1):
        number = 200 if batch == 1 else 50
        x = Tensor(rng.standard_normal((batch, 1, 28, 28)).astype(np.float32))
        t = {}
        ms.set_context(mode=ms.PYNATIVE_MODE)
        want = net(x).asnumpy()  # what MindSpore must agree with
        t["pynative"] = bench_time(lambda x=x: net(x), number)
        ms.set_context(mode=ms.GRAPH_MODE)
        t["graph"] = bench_time(lambda x=x: net(x), number)
        ms.set_context(mode=ms.PYNATIVE_MODE)
        if torch is not None:
            model = torch_mlp(torch)
            xt = torch.from_numpy(x.asnumpy().copy())
            with torch.no_grad():
                t["torch"] = bench_time(lambda model=model, xt=xt: model(xt), number)
                compiled = (torch_compiled(torch, model, xt, f"forward, batch {batch}", notes)
                            if compile_ok else None)
                compile_ok = compiled is not None
                if compiled is not None:
                    check_close(f"forward, batch {batch}, torch.compile vs PyTorch eager",
                                compiled(xt).numpy(), model(xt).numpy(), 1e-4, 1e-5)
                    t["compile"] = bench_time(lambda c=compiled, xt=xt: c(xt), number)
        if jx is not None:
            jforward, _, jparams, _ = jx
            xj = jax.numpy.asarray(x.asnumpy())
            t["jax"] = bench_time(lambda f=jforward, p=jparams, a=xj: f(p, a).block_until_ready(),
                                  number)
        if mindspore is not None:  # timed last: MindSpore's runtime threads spin once started
            deferred.append((t, lambda x=x, want=want, batch=batch, number=number:
                             mindspore_forward_times(
                                 mindspore, lambda: mindspore_network(mindspore, net),
                                 [x.asnumpy()], want, f"forward, batch {batch}", number, notes,
                                 1e-4, 1e-5)))
        results.append((f"forward, batch {batch}", flops(batch), t))

    # Training step at batch 64: softmax cross-entropy + Momentum.
    x = Tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, size=64))
    t = {}
    ms.set_seed(0)
    eager_step = kiln_train_step(Network())
    kiln_losses = [float(eager_step(x, y).asnumpy()) for _ in range(3)]
    t["pynative"] = bench_time(lambda: eager_step(x, y), 20)
    ms.set_seed(0)
    graph_step = ms.jit(kiln_train_step(Network()))
    compiles = ms.get_jit_stats()["compiles"]
    t["graph"] = bench_time(lambda: graph_step(x, y), 20)
    recompiled = ms.get_jit_stats()["compiles"] - compiles
    if recompiled > 1:
        notes.append(f"kiln Graph train step: {recompiled} compiles while timed")
    if torch is not None:
        tmodel, cmodel = torch_mlp(torch), torch_mlp(torch)
        cmodel.load_state_dict(tmodel.state_dict())  # the same start, so the losses compare
        xt = torch.from_numpy(x.asnumpy().copy())
        yt = torch.from_numpy(y.asnumpy().copy())
        tstep = torch_train_step(torch, tmodel)
        torch_losses = [float(tstep(xt, yt)) for _ in range(3)]
        t["torch"] = bench_time(lambda: tstep(xt, yt), 20)
        compiled = (torch_compiled(torch, cmodel, xt, "train step, batch 64", notes)
                    if compile_ok else None)
        if compiled is not None:
            cstep = torch_train_step(torch, cmodel, compiled)
            start = time.perf_counter()
            closs = [float(cstep(xt, yt)) for _ in range(3)]  # warm-up; may compile backward
            print(f"torch.compile train step, first 3 steps (after the first call): "
                  f"{time.perf_counter() - start:.1f} s")
            check_close("train step losses (3 steps), torch.compile vs PyTorch eager", closs,
                        torch_losses, 1e-3, 1e-4)
            t["compile"] = bench_time(lambda: cstep(xt, yt), 20)
    if jx is not None:
        _, jstep, jparams, jvel = jx
        xj, yj = jax.numpy.asarray(x.asnumpy()), jax.numpy.asarray(y.asnumpy())
        state = [jparams, jvel]

        def run_jax():
            state[0], state[1], value = jstep(state[0], state[1], xj, yj)
            value.block_until_ready()

        t["jax"] = bench_time(run_jax, 20)
    if mindspore is not None:
        deferred.append((t, lambda: mindspore_train_times(
            mindspore, lambda: mindspore_network(mindspore, net), mindspore.nn.CrossEntropyLoss,
            [x.asnumpy(), y.asnumpy().astype(np.int32)], kiln_losses, "train step", 20, notes,
            1e-4, 1e-5)))  # MindSpore's CrossEntropyLoss wants int32 labels
    results.append(("train step, batch 64", 3 * flops(64), t))
    for times, measure in deferred:
        times.update(measure())

    for note in notes:
        print(note)
    print()
    report(args.threads, peak, results)


if __name__ == "__main__":
    with contention_session():  # busy processes (--contention) stop with main, however it ends
        main()
