"""Prints kiln's coverage of MindSpore's public API per namespace (the table of
docs/compatibility.md, "API coverage").

Two steps, because MindSpore and kiln live in different environments:

    <mindspore python> tools/api_coverage.py dump names.json     # MindSpore's public names
    PYTHONPATH=<kiln> python tools/api_coverage.py compare names.json [--missing NAMESPACE]

A name counts as covered when kiln has an attribute of that name in the same namespace.
"""
import argparse
import inspect
import json
import sys

NAMESPACES = ("top-level", "ops functions", "ops primitive classes", "nn Cells",
              "nn functions", "Tensor methods", "train", "amp", "mint functions",
              "mint.nn Cells", "mint.nn.functional")


def _public(module):
    return sorted(n for n in dir(module) if not n.startswith("_"))


def dump(path):
    """Writes MindSpore's public names, grouped as NAMESPACES, to `path` (MindSpore's Python)."""
    import mindspore  # noqa: PLC0415 - only in the MindSpore environment
    from mindspore import amp, mint, nn, ops, train  # noqa: PLC0415
    from mindspore.mint.nn import functional as mint_f  # noqa: PLC0415
    from mindspore.ops import Primitive  # noqa: PLC0415

    def classes_of(module, base):
        return [n for n in _public(module)
                if inspect.isclass(getattr(module, n)) and issubclass(getattr(module, n), base)]

    names = {
        "version": mindspore.__version__,
        "top-level": _public(mindspore),
        "ops functions": [n for n in _public(ops) if inspect.isfunction(getattr(ops, n))],
        "ops primitive classes": classes_of(ops, Primitive),
        "nn Cells": classes_of(nn, nn.Cell),
        "nn functions": [n for n in _public(nn) if inspect.isfunction(getattr(nn, n))],
        "Tensor methods": [n for n in dir(mindspore.Tensor) if not n.startswith("_")],
        "train": _public(train),
        "amp": _public(amp),
        "mint functions": [n for n in _public(mint) if inspect.isfunction(getattr(mint, n))],
        "mint.nn Cells": classes_of(mint.nn, nn.Cell),
        "mint.nn.functional": [n for n in _public(mint_f)
                               if inspect.isfunction(getattr(mint_f, n))],
    }
    with open(path, "w") as f:
        json.dump(names, f, indent=1)


def _kiln_module(namespace):
    import kiln  # noqa: PLC0415

    return {"top-level": kiln, "ops functions": kiln.ops, "ops primitive classes": kiln.ops,
            "nn Cells": kiln.nn, "nn functions": kiln.nn, "Tensor methods": kiln.Tensor,
            "train": kiln.train, "amp": getattr(kiln, "amp", None),
            "mint functions": getattr(kiln, "mint", None),
            "mint.nn Cells": getattr(getattr(kiln, "mint", None), "nn", None),
            "mint.nn.functional": _mint_functional()}[namespace]


def _mint_functional():
    try:
        from kiln.mint.nn import functional  # noqa: PLC0415
    except ImportError:
        return None
    return functional


def compare(path, missing_of=None):
    with open(path) as f:
        names = json.load(f)
    print(f"kiln against MindSpore {names['version']}\n")
    print("| namespace | kiln has | of MindSpore's | share |")
    print("|---|---|---|---|")
    for namespace in NAMESPACES:
        module = _kiln_module(namespace)
        theirs = names.get(namespace, [])
        ours = [n for n in theirs if module is not None and hasattr(module, n)]
        share = 100.0 * len(ours) / max(len(theirs), 1)
        print(f"| {namespace} | {len(ours)} | {len(theirs)} | {share:.0f}% |")
        if namespace == missing_of:
            lacking = sorted(set(theirs) - set(ours))
            print(f"\nmissing in {namespace}: {', '.join(lacking)}\n", file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("dump").add_argument("path")
    cmp = sub.add_parser("compare")
    cmp.add_argument("path")
    cmp.add_argument("--missing", choices=NAMESPACES, help="also list one namespace's gaps")
    args = parser.parse_args(argv)
    if args.command == "dump":
        dump(args.path)
    else:
        compare(args.path, args.missing)


if __name__ == "__main__":
    main()
