"""Checks that MindSpore 2.10 runs kiln's MindIR exports (docs/export.md, "MindSpore").

Two steps in two environments, since kiln and MindSpore are never installed together:

    PYTHONPATH=build/dev/python python tools/mindspore_interop_check.py --write DIR   # kiln
    /path/to/ms-venv/bin/python tools/mindspore_interop_check.py --check DIR           # MindSpore

--write exports the seed network, LeNet and a small dense network with kiln and saves an input
and kiln's output beside each; --check loads each file with mindspore.load + nn.GraphCell, runs
it in Graph and PyNative mode and compares with kiln's output.
"""
import pathlib
import sys

import numpy as np
from _networks import lenet_class, mlp_class  # tools/_networks.py


def write(out):
    import kiln as ms  # noqa: PLC0415 - only this step runs under kiln
    from kiln import nn  # noqa: PLC0415

    Seed, LeNet = mlp_class(nn), lenet_class(nn)

    out.mkdir(parents=True, exist_ok=True)
    ms.set_seed(1)
    rng = np.random.default_rng(1)
    for name, net, shape in [("seed", Seed(), (4, 1, 28, 28)), ("lenet", LeNet(), (2, 1, 28, 28)),
                             ("mlp", Seed(16), (3, 1, 28, 28))]:
        x = rng.standard_normal(shape).astype(np.float32)
        ms.export(net, ms.Tensor(x), file_name=str(out / name), file_format="MINDIR")
        np.savez(out / f"{name}_io.npz", x=x, y=net(ms.Tensor(x)).asnumpy())
        print(f"kiln wrote {name}.mindir")


def check(out):
    import mindspore as ms  # noqa: PLC0415 - only this step runs under MindSpore
    from mindspore import nn  # noqa: PLC0415

    failures = 0
    for path in sorted(out.glob("*.mindir")):
        io = np.load(path.with_name(path.stem + "_io.npz"))
        for mode in (ms.GRAPH_MODE, ms.PYNATIVE_MODE):
            ms.set_context(mode=mode)
            try:
                y = nn.GraphCell(ms.load(str(path)))(ms.Tensor(io["x"])).asnumpy()
                diff = float(np.abs(y - io["y"]).max())
                ok = np.allclose(y, io["y"], rtol=1e-5, atol=1e-5)
            except Exception as e:  # noqa: BLE001 - report every model, then fail
                diff, ok = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}", False
            failures += not ok
            print(f"{path.name} mode {mode}: {'ok' if ok else 'FAILED'} (max |diff| {diff})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("--write", "--check"):
        sys.exit(__doc__)
    (write if sys.argv[1] == "--write" else check)(pathlib.Path(sys.argv[2]))
