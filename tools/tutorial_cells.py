"""Runs the Python code cells of MindSpore tutorial pages against kiln, as a MindSpore user who
changed one import would: `mindspore` and its submodules resolve to `kiln`'s.

    python tools/tutorial_cells.py PAGE.md|PAGE.ipynb ... [--json OUT]

Each page runs in its own process and folder, its cells in order in one namespace; a cell
passes when it runs without an exception. The pages are read from where they are given (for
example a checkout of MindSpore's docs repository); none is kept in kiln. Data sets the pages
download are made locally instead: `download.download` (the package MindSpore's tutorials use)
is answered with files of random images in the formats asked for (MNIST idx, CIFAR-10 binary,
an ImageNet-like folder of JPEGs, a JPEG), written where the page expects them.
Cells that need a package kiln does not have installed (matplotlib, ...) fail like any other,
with the error in the report. After a cell fails its statements run one by one, so that a
missing name fails that cell, not every later one that uses another name of its imports.
"""
import argparse
import ast
import importlib
import importlib.abc
import importlib.util
import json
import linecache
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import types

PAGE_TIMEOUT_S = 300


def cells_of(path):
    text = open(path, encoding="utf-8").read()
    if path.endswith(".ipynb"):
        return ["".join(c["source"]) for c in json.loads(text)["cells"]
                if c["cell_type"] == "code"]
    # Blocks inside lists are indented, fences and all.
    return [textwrap.dedent(m) for m in re.findall(r"^[ \t]*```python\n(.*?)^[ \t]*```", text,
                                                   flags=re.S | re.M)]


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """mindspore[.x] → kiln[.x]: the module kiln has under that name."""

    def find_spec(self, name, path=None, target=None):
        if name == "mindspore" or name.startswith("mindspore."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module("kiln" + spec.name[len("mindspore"):])
        sys.modules[spec.name] = module
        return module

    def exec_module(self, module):
        pass


def _write_mnist(root, rng):
    import numpy as np  # noqa: PLC0415

    for part, prefix, n in (("train", "train", 600), ("test", "t10k", 100)):
        folder = os.path.join(root, "MNIST_Data", part)
        os.makedirs(folder, exist_ok=True)
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        for kind, magic, array in (("images-idx3", 0x803, images), ("labels-idx1", 0x801, labels)):
            with open(os.path.join(folder, f"{prefix}-{kind}-ubyte"), "wb") as f:
                f.write(magic.to_bytes(4, "big"))
                for dim in array.shape:
                    f.write(int(dim).to_bytes(4, "big"))
                f.write(array.tobytes())


def _write_cifar10(root, rng):
    import numpy as np  # noqa: PLC0415

    folder = os.path.join(root, "cifar-10-batches-bin")
    os.makedirs(folder, exist_ok=True)
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        records = np.concatenate([rng.integers(0, 10, (100, 1)),
                                  rng.integers(0, 256, (100, 3072))], axis=1)
        with open(os.path.join(folder, name), "wb") as f:
            f.write(records.astype(np.uint8).tobytes())


def _write_jpeg(path, rng):
    import cv2  # noqa: PLC0415

    image = cv2.resize(rng.integers(0, 256, (8, 8, 3)).astype("uint8"), (256, 192))
    cv2.imwrite(path, image)


def _local_download(url, path="./", kind="file", replace=False, **kwargs):
    """The tutorials' `download(url, path, ...)`: MNIST, CIFAR-10 (binary) and single JPEG
    images are made locally; anything else fails."""
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(0)
    name = url.rsplit("/", 1)[-1]
    if "mnist" in url.lower():
        _write_mnist(path, rng)
    elif "cifar-10-binary" in name:
        _write_cifar10(path, rng)
    elif name.endswith(".tar.gz") and "ImageNet" in name:  # a folder of classes of JPEGs
        folder = os.path.join(path, name[: -len(".tar.gz")])
        for cls in ("class_a", "class_b"):
            os.makedirs(os.path.join(folder, cls), exist_ok=True)
            for i in range(8):
                _write_jpeg(os.path.join(folder, cls, f"{i}.JPEG"), rng)
    elif name.lower().endswith((".jpg", ".jpeg")) and kind == "file":
        _write_jpeg(path if not os.path.isdir(path) else os.path.join(path, name), rng)
    else:
        raise RuntimeError(f"no local stand-in for {url}")
    return path


def run_page(path):
    """In this (child) process: each cell's outcome, in order."""
    sys.meta_path.insert(0, _Alias())
    sys.modules["download"] = types.SimpleNamespace(download=_local_download)
    namespace = {"__name__": "__main__"}
    results = []
    for i, source in enumerate(cells_of(path)):
        # IPython's magics (`%matplotlib inline`) and shell lines are the notebook's, not Python.
        source = "\n".join(line for line in source.splitlines()
                           if not line.lstrip().startswith(("%", "!")))
        name = f"{os.path.basename(path)}[{i}]"
        # Source for inspect (kiln.jit reads the functions it compiles), as a file would give.
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        try:
            exec(compile(source, name, "exec"), namespace)
            results.append({"cell": i, "ok": True})
        except BaseException as exc:  # noqa: BLE001 - a cell's failure is a result
            results.append({"cell": i, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]})
            _run_statements(source, name, namespace)
    return results


def _run_statements(source, name, namespace):
    """After a cell fails, its statements one by one (the cell still counts as failed), so that
    one missing name (an import of what kiln lacks) does not fail every later cell too."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    for statement in tree.body:
        parts = [statement]
        if isinstance(statement, ast.ImportFrom) and len(statement.names) > 1:
            parts = [ast.ImportFrom(statement.module, [alias], statement.level)
                     for alias in statement.names]  # each name that exists
        for part in parts:
            try:
                exec(compile(ast.fix_missing_locations(ast.Module([part], [])), name, "exec"),
                     namespace)
            except BaseException:  # noqa: BLE001, S110 - reported with the cell already
                pass


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+")
    parser.add_argument("--json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        results = run_page(args.pages[0])
        with open(args.json, "w") as f:
            json.dump(results, f)
        return 0
    report = {}
    for page in args.pages:
        with tempfile.TemporaryDirectory(prefix="kiln-tutorial-") as folder:
            env = dict(os.environ, MPLBACKEND="Agg")
            out = os.path.join(folder, ".results.json")
            try:
                done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                                       "--json", out, os.path.abspath(page)], cwd=folder,
                                      env=env, capture_output=True, text=True,
                                      timeout=PAGE_TIMEOUT_S)
                if done.returncode == 0:
                    with open(out) as f:
                        results = json.load(f)
                else:
                    results = [{"cell": -1, "ok": False, "error": done.stderr[-300:]}]
            except subprocess.TimeoutExpired:
                results = [{"cell": -1, "ok": False, "error": "timed out"}]
        report[os.path.basename(page)] = results
        passed = sum(r["ok"] for r in results)
        print(f"{os.path.basename(page)}: {passed}/{len(results)} cells pass")
        for r in results:
            if not r["ok"]:
                print(f"  cell {r['cell']}: {r['error']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
