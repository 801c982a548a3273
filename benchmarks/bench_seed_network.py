"""The seed network (SPEC §4) end to end: compile time, forward and training step, kiln
PyNative and Graph mode against PyTorch eager, in one process on the same inputs.

Run: PYTHONPATH=build/rel/python python benchmarks/bench_seed_network.py --threads 1
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
import kiln as ms  # noqa: E402
from _common import (  # noqa: E402
    best_time,
    import_torch,
    kiln_momentum_step,
    table,
    torch_momentum_step,
)
from five_ways import Network  # noqa: E402 - the seed network, defined once (SPEC §4)
from kiln import Tensor, nn  # noqa: E402


def kiln_train_step(net):
    """Softmax cross-entropy + Momentum on the seed network (batch 64 in main)."""
    return kiln_momentum_step(ms, net, nn.CrossEntropyLoss())


def torch_model(torch):
    model = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(784, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    return model, torch_momentum_step(torch, model, torch.nn.CrossEntropyLoss())


def jax_model(rng, threads):
    """The same MLP in JAX: jitted forward and a jitted SGD-with-momentum training step."""
    if threads == 1:  # XLA's CPU client otherwise uses every core whatever the others do
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                           "intra_op_parallelism_threads=1")
    try:
        import jax  # noqa: PLC0415
        import jax.numpy as jnp  # noqa: PLC0415
    except ImportError:
        return None
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

    @jax.jit
    def step(params, velocity, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        velocity = jax.tree_util.tree_map(lambda v, g: 0.9 * v + g, velocity, grads)
        params = jax.tree_util.tree_map(lambda p, v: p - 0.01 * v, params, velocity)
        return params, velocity, value

    velocity = jax.tree_util.tree_map(jnp.zeros_like, params)
    return jax, jax.jit(forward), step, params, velocity


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    ms.set_num_threads(args.threads)
    torch = import_torch(args.threads)
    rng = np.random.default_rng(0)
    rows = []
    jx = jax_model(rng, args.threads)

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
        x = Tensor(rng.standard_normal((batch, 1, 28, 28)).astype(np.float32))
        ms.set_context(mode=ms.PYNATIVE_MODE)
        pynative = best_time(lambda x=x: net(x), 200 if batch == 1 else 50)
        ms.set_context(mode=ms.GRAPH_MODE)
        graph = best_time(lambda x=x: net(x), 200 if batch == 1 else 50)
        ms.set_context(mode=ms.PYNATIVE_MODE)
        row = [f"forward, batch {batch}", f"{pynative*1e6:.1f}", f"{graph*1e6:.1f}"]
        if torch is not None:
            model, _ = torch_model(torch)
            xt = torch.from_numpy(x.asnumpy().copy())
            with torch.no_grad():
                t = best_time(lambda model=model, xt=xt: model(xt), 200 if batch == 1 else 50)
            row += [f"{t*1e6:.1f}", f"{graph / t:.2f}"]
        if jx is not None:
            jax_mod, jforward, _, jparams, _ = jx
            xj = jax_mod.numpy.asarray(x.asnumpy())
            j = best_time(lambda f=jforward, p=jparams, a=xj: f(p, a).block_until_ready(),
                          200 if batch == 1 else 50)
            row += [f"{j*1e6:.1f}", f"{graph / j:.2f}"]
        rows.append(row)

    # Training step at batch 64: softmax cross-entropy + Momentum.
    x = Tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, size=64))
    ms.set_seed(0)
    eager_step = kiln_train_step(Network())
    pynative = best_time(lambda: eager_step(x, y), 20)
    ms.set_seed(0)
    graph_step = ms.jit(kiln_train_step(Network()))
    compiles = ms.get_jit_stats()["compiles"]
    graph = best_time(lambda: graph_step(x, y), 20)
    recompiled = ms.get_jit_stats()["compiles"] - compiles
    row = ["train step, batch 64", f"{pynative*1e6:.1f}",
           f"{graph*1e6:.1f}" + (f" ({recompiled} compiles)" if recompiled > 1 else "")]
    if torch is not None:
        _, tstep = torch_model(torch)
        xt = torch.from_numpy(x.asnumpy().copy())
        yt = torch.from_numpy(y.asnumpy().copy())
        t = best_time(lambda: tstep(xt, yt), 20)
        row += [f"{t*1e6:.1f}", f"{graph / t:.2f}"]
    if jx is not None:
        jax_mod, _, jstep, jparams, jvel = jx
        xj, yj = jax_mod.numpy.asarray(x.asnumpy()), jax_mod.numpy.asarray(y.asnumpy())
        state = [jparams, jvel]

        def run_jax():
            state[0], state[1], value = jstep(state[0], state[1], xj, yj)
            value.block_until_ready()

        j = best_time(run_jax, 20)
        row += [f"{j*1e6:.1f}", f"{graph / j:.2f}"]
    rows.append(row)

    headers = ["workload", "kiln PyNative µs", "kiln Graph µs"]
    if torch is not None:
        headers += ["PyTorch eager µs", "Graph / PyTorch"]
    if jx is not None:
        headers += ["JAX jit µs", "Graph / JAX"]
    print(f"threads: {args.threads}")
    print(table(headers, rows))


if __name__ == "__main__":
    main()
