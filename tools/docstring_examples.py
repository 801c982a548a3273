"""Runs MindSpore's docstring examples on kiln and reports how many give MindSpore's output (the
match rate of docs/compatibility.md, "API coverage").

Two steps, because MindSpore and kiln live in different environments:

    <mindspore python> tools/docstring_examples.py dump runs.json    # examples + their outputs
    PYTHONPATH=<kiln> python tools/docstring_examples.py compare runs.json [--details]

`dump` reads the examples from the installed MindSpore's docstrings and runs them there; the file
it writes holds MindSpore's text, so keep it out of the repository. `compare` runs the same
examples with `mindspore` importing kiln, for every name kiln has, and compares what each example
prints: its numbers within rtol 1e-4 / atol 1e-5 (2e-3 for float16 examples), dtype names and
booleans exactly. Examples of
random ops are checked for running only. Names whose examples fail on MindSpore's own CPU build
are left out of the rate.
"""
import argparse
import contextlib
import doctest
import inspect
import io
import json
import re
import signal
import sys
import traceback

NAMESPACES = ("ops functions", "ops primitive classes", "nn Cells", "nn functions",
              "mint.nn Cells", "mint.nn.functional")
RANDOM_WORDS = ("random", "dropout", "uniform", "normal", "bernoulli", "shuffle", "rrelu",
                "multinomial", "poisson", "randint", "randn", "rand", "choice",
                "sampler", "initializer", "seed")
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?\b(?:nan|inf)\b",
                    re.IGNORECASE)
WORD = re.compile(r"\b(?:True|False|(?:Float|Int|UInt|BFloat|Bool|Complex)\d*)\b")


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _examples(obj):
    doc = inspect.getdoc(obj) or ""
    if "Examples:" not in doc:
        return []
    return [e.source for e in doctest.DocTestParser().get_examples(doc)]


def _run(sources, seconds=300):
    """What each example prints (or 'EXC: <type>' when it raises; the rest still run)."""
    import mindspore  # noqa: PLC0415 - MindSpore itself, or kiln under its name
    import numpy as np  # noqa: PLC0415

    mindspore.set_context(mode=mindspore.PYNATIVE_MODE)  # an earlier example may have changed it
    np.random.seed(0)
    scope = {"__name__": "__main__"}
    outputs = []
    signal.signal(signal.SIGALRM, _alarm)
    for source in sources:
        buf = io.StringIO()
        signal.alarm(seconds)
        try:
            with contextlib.redirect_stdout(buf):
                exec(compile(source, "<example>", "single"), scope)  # noqa: S102
            outputs.append(buf.getvalue())
        except _Timeout:
            outputs.append("EXC: timeout")
        except BaseException as exc:  # noqa: BLE001 - an example's failure is a result
            outputs.append(f"{buf.getvalue()}EXC: {type(exc).__name__}")
        finally:
            signal.alarm(0)
    return outputs


def _objects():
    import mindspore  # noqa: PLC0415
    from mindspore import mint, nn, ops  # noqa: PLC0415
    from mindspore.mint.nn import functional as mint_f  # noqa: PLC0415
    from mindspore.ops import Primitive  # noqa: PLC0415

    def public(module):
        return sorted(n for n in dir(module) if not n.startswith("_"))

    def classes(module, base):
        return [n for n in public(module) if inspect.isclass(getattr(module, n))
                and issubclass(getattr(module, n), base)]

    return mindspore.__version__, {
        "ops functions": [(n, getattr(ops, n)) for n in public(ops)
                          if inspect.isfunction(getattr(ops, n))],
        "ops primitive classes": [(n, getattr(ops, n)) for n in classes(ops, Primitive)],
        "nn Cells": [(n, getattr(nn, n)) for n in classes(nn, nn.Cell)],
        "nn functions": [(n, getattr(nn, n)) for n in public(nn)
                         if inspect.isfunction(getattr(nn, n))],
        "mint.nn Cells": [(n, getattr(mint.nn, n)) for n in classes(mint.nn, nn.Cell)],
        "mint.nn.functional": [(n, getattr(mint_f, n)) for n in public(mint_f)
                               if inspect.isfunction(getattr(mint_f, n))],
    }


def dump(path, only=None, resume=False, namespaces=None):
    version, groups = _objects()
    out = {"version": version, "examples": {}}
    if resume:
        with open(path) as f:
            out = json.load(f)
    for namespace, items in groups.items():
        if namespaces and namespace not in namespaces:
            continue
        for name, obj in items:
            if only and name not in only:
                continue
            sources = _examples(obj)
            if sources and f"{namespace}:{name}" not in out["examples"]:
                print(f"{namespace}:{name}", file=sys.stderr, flush=True)
                out["examples"][f"{namespace}:{name}"] = {"sources": sources,
                                                          "outputs": _run(sources)}
                with open(path, "w") as f:      # as it goes: an example may end the process
                    json.dump(out, f)


def _tokens(text):
    return NUMBER.findall(text), WORD.findall(text)


def _same(theirs, ours, rtol=1e-4):
    import numpy as np  # noqa: PLC0415

    if "EXC:" in ours:
        return False
    (n1, w1), (n2, w2) = _tokens(theirs), _tokens(ours)
    if len(n1) != len(n2) or [w.lower() for w in w1] != [w.lower() for w in w2]:
        return False
    a, b = np.array(n1, dtype=np.float64), np.array(n2, dtype=np.float64)
    return bool(np.allclose(a, b, rtol=rtol, atol=1e-5, equal_nan=True))


def _alias_mindspore():
    """`import mindspore` (and its submodules that kiln has) gives kiln."""
    import kiln  # noqa: PLC0415
    import kiln.common.initializer  # noqa: F401,PLC0415
    import kiln.mint.nn.functional  # noqa: F401,PLC0415
    import kiln.nn  # noqa: F401,PLC0415
    import kiln.ops  # noqa: F401,PLC0415

    for name, module in list(sys.modules.items()):
        if name == "kiln" or name.startswith("kiln."):
            sys.modules["mindspore" + name[len("kiln"):]] = module
    return kiln


def compare(path, details=False):
    kiln = _alias_mindspore()
    with open(path) as f:
        data = json.load(f)
    where = {"ops functions": kiln.ops, "ops primitive classes": kiln.ops, "nn Cells": kiln.nn,
             "nn functions": kiln.nn, "mint.nn Cells": kiln.mint.nn,
             "mint.nn.functional": kiln.mint.nn.functional}
    rows = {ns: [0, 0, 0] for ns in NAMESPACES}     # matched, compared, MindSpore failed
    report = []
    for key, entry in sorted(data["examples"].items()):
        namespace, name = key.split(":", 1)
        if not hasattr(where[namespace], name):
            continue
        theirs = entry["outputs"]
        if any("EXC:" in t for t in theirs):
            rows[namespace][2] += 1
            continue
        if details:
            print(f"running {key}", file=sys.stderr, flush=True)
        try:
            ours = _run(entry["sources"])
        except Exception:  # noqa: BLE001
            ours = ["EXC: " + traceback.format_exc(limit=1)]
        # "gamma" alone is the random sampler; lgamma, polygamma, igamma... are deterministic
        random = any(w in name.lower() for w in RANDOM_WORDS) or name.lower() == "gamma"
        # float16 results are printed to 4 digits: compare them within float16's precision
        rtol = 2e-3 if any("float16" in src for src in entry["sources"]) else 1e-4
        if random:
            ok = not any("EXC:" in o for o in ours)
        else:
            ok = len(ours) == len(theirs) and all(_same(t, o, rtol)
                                                  for t, o in zip(theirs, ours))
        rows[namespace][0] += ok
        rows[namespace][1] += 1
        if not ok:
            first = next((i for i, (t, o) in enumerate(zip(theirs, ours))
                          if ("EXC:" in o) or (not random and not _same(t, o, rtol))), 0)
            report.append((key, entry["sources"][first].strip(), theirs[first].strip(),
                           ours[first].strip() if first < len(ours) else ""))
    print(f"kiln against MindSpore {data['version']}'s docstring examples\n")
    print("| namespace | match | compared | share | MindSpore's CPU build fails |")
    print("|---|---|---|---|---|")
    total = [0, 0]
    for ns in NAMESPACES:
        m, c, f = rows[ns]
        total[0] += m
        total[1] += c
        print(f"| {ns} | {m} | {c} | {100.0 * m / max(c, 1):.0f}% | {f} |")
    print(f"| all | {total[0]} | {total[1]} | {100.0 * total[0] / max(total[1], 1):.0f}% | |")
    if details:
        for key, source, theirs, ours in report:
            print(f"\n== {key}\n>>> {source}\nMindSpore: {theirs[:300]}\nkiln:      {ours[:300]}",
                  file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("path")
    d.add_argument("--only", nargs="*", help="just these names")
    d.add_argument("--resume", action="store_true", help="keep the names already in the file")
    d.add_argument("--namespaces", nargs="*", choices=NAMESPACES, help="just these namespaces")
    c = sub.add_parser("compare")
    c.add_argument("path")
    c.add_argument("--details", action="store_true", help="show each mismatch (stderr)")
    args = parser.parse_args(argv)
    if args.command == "dump":
        dump(args.path, args.only, args.resume, args.namespaces)
    else:
        compare(args.path, args.details)


if __name__ == "__main__":
    main()
