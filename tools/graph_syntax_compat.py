"""Runs a MindSpore test folder against MindSpore or kiln, file by file, and reports pass rates.

Measures issue #12's compatibility target: a MindSpore test folder (e.g. MindSpore's
tests/ut/python/graph_syntax, fetched into a scratch folder OUTSIDE this repository), with only
the package name rewritten (``mindspore`` -> ``kiln``), run by pytest one file at a time under a
time limit. The result (every test's outcome and, for a failure, its exception line) is saved as
JSON; given MindSpore's own result as ``--baseline``, the pass rate is computed on the tests
MindSpore passes, the denominator of docs/compatibility.md.

    python tools/graph_syntax_compat.py --root /work/scratch-compat \\
        --folder tests/ut/python/graph_syntax --python /work/ms-venv/bin/python \\
        --package mindspore --out /work/scratch-compat/ms.json
    python tools/graph_syntax_compat.py --root /work/scratch-compat \\
        --folder tests/ut/python/graph_syntax --python .venv/bin/python \\
        --pythonpath build/dev/python --out /work/scratch-compat/kiln.json \\
        --baseline /work/scratch-compat/ms.json

``--root`` is the folder that holds the ``tests`` package (its ``__init__.py`` files and helpers
such as ``tests/ut/python/ut_filter.py`` travel with the test folder, since the tests import them
as ``tests.ut.python...``). Nothing is written inside --root: the copy lives in a temporary dir.
"""
import argparse
import io
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tokenize

# A pytest plugin the harness writes next to the copied tests: one JSON line per test outcome
# (written as it happens, so a file killed by the time limit keeps what it finished) and one per
# collected test, so tests a killed file never reached are counted too.
_PLUGIN = '''
import json, os
_OUT = os.environ["COMPAT_RESULT_FILE"]

def _write(rec):
    with open(_OUT, "a") as f:
        f.write(json.dumps(rec) + "\\n")

def pytest_collection_modifyitems(session, config, items):
    for item in items:
        _write({"collected": item.nodeid})

def pytest_collectreport(report):
    if report.failed:
        _write({"collect_error": report.nodeid, "reason": _reason(report)})

def _reason(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message.splitlines()[0][:400] if crash.message else ""
    return str(report.longrepr).strip().splitlines()[-1][:400] if report.longrepr else ""

def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        outcome = report.outcome
        if report.when != "call" and outcome == "failed":
            outcome = "error"
        _write({"test": report.nodeid, "outcome": outcome,
                "reason": "" if outcome == "passed" else _reason(report)})
'''

_SKIP_DIRS = {"__pycache__", ".pytest_cache"}


def rename_package(source, old, new):
    """Rewrites the identifier `old` (the package name) to `new` in Python source: only NAME
    tokens, so strings, comments and longer names (mindspore_test_framework) stay as they are."""
    if old == new:
        return source
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    lines = source.splitlines(keepends=True)
    # Replace right to left so earlier columns stay valid.
    for tok in reversed(tokens):
        if tok.type == tokenize.NAME and tok.string == old:
            (row, col), (_, end) = tok.start, tok.end
            line = lines[row - 1]
            lines[row - 1] = line[:col] + new + line[end:]
    return "".join(lines)


def copy_tree(root, folder, dest, old, new):
    """Copies everything under root and rewrites the package name in each .py file.

    The package __init__.py files ABOVE the test folder are copied empty: MindSpore's own
    (tests/ut/python/__init__.py) loads tests/vm_impl, its simulator's registry of NumPy
    implementations built on MindSpore internals (_c_expression, vm_impl_registry), which is
    test-runner bootstrap, not part of any test; it is emptied for both packages alike."""
    above = {str(p) for p in pathlib.PurePosixPath(folder).parents if str(p) != "."}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in _SKIP_DIRS for part in rel.parts) or not path.is_file():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.name == "__init__.py" and str(rel.parent.as_posix()) in above:
            target.write_text("")
        elif path.suffix == ".py":
            text = path.read_text(encoding="utf-8")
            try:
                text = rename_package(text, old, new)
            except (tokenize.TokenError, SyntaxError, IndentationError):
                pass  # left as is: pytest reports the file's own syntax error
            target.write_text(text, encoding="utf-8")
        else:
            shutil.copy2(path, target)


def run_file(python, workdir, test_file, env, timeout):
    """Runs pytest on one file; returns (records, seconds, timed_out, exit code)."""
    result_file = workdir / ".compat_result.jsonl"
    result_file.unlink(missing_ok=True)
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_compat_report",
           "-o", "addopts=", "--rootdir", str(workdir), str(test_file)]
    run_env = dict(env, COMPAT_RESULT_FILE=str(result_file))
    start = time.monotonic()
    log_file = workdir / ".compat_pytest.log"
    with open(log_file, "w") as log:
        proc = subprocess.Popen(cmd, cwd=workdir, env=run_env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    timed_out = False
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)  # the whole session: pytest and anything it started
        code = proc.wait()
    seconds = time.monotonic() - start
    records = []
    if result_file.exists():
        records = [json.loads(line) for line in result_file.read_text().splitlines() if line]
    if not records and code != 0:  # pytest itself failed (e.g. a conftest): keep its last line
        lines = log_file.read_text(errors="replace").strip().splitlines() or ["no output"]
        records = [{"collect_error": str(test_file), "reason": lines[-1][:400]}]
    return records, seconds, timed_out, code


def summarize_file(rel, records, timed_out, code):
    """Per-test outcomes of one file: passed / failed / error / skipped / timeout / crash."""
    tests = {}
    for rec in records:
        if "collected" in rec:
            tests.setdefault(rec["collected"], {"outcome": None, "reason": ""})
        elif "test" in rec:
            entry = tests.setdefault(rec["test"], {"outcome": None, "reason": ""})
            if entry["outcome"] in (None, "passed"):  # a teardown error overrides a pass
                entry.update(outcome=rec["outcome"], reason=rec["reason"])
    collect_errors = [rec["reason"] for rec in records if "collect_error" in rec]
    unfinished = "timeout" if timed_out else "crash"
    for entry in tests.values():
        if entry["outcome"] is None:
            entry.update(outcome=unfinished, reason=f"{unfinished} (pytest exit {code})")
    return {"tests": tests, "collect_errors": collect_errors, "timed_out": timed_out,
            "exit_code": code}


def count(tests, outcome="passed"):
    return sum(1 for t in tests.values() if t["outcome"] == outcome)


def report(result, baseline):
    """Prints per-file and total counts; with a baseline, the rate on the tests it passes."""
    total = passed = base_total = base_passed = 0
    for rel, entry in result["files"].items():
        tests = entry["tests"]
        line = f"{rel:<80} {count(tests):>4}/{len(tests):<4}"
        if entry["collect_errors"]:
            line += f"  collect error: {entry['collect_errors'][0][:60]}"
        elif entry["timed_out"]:
            line += "  TIMEOUT"
        if baseline is not None:
            base_ok = _baseline_passes(baseline, rel)
            got = sum(1 for t in base_ok if tests.get(t, {}).get("outcome") == "passed")
            line += f"  on baseline's passes: {got}/{len(base_ok)}"
            base_total += len(base_ok)
            base_passed += got
        total += len(tests)
        passed += count(tests)
        print(line)
    print(f"TOTAL: {passed}/{total} tests passed in {len(result['files'])} files")
    if baseline is not None and base_total:
        print(f"RATE on the {base_total} tests the baseline passes: {base_passed}/{base_total} "
              f"= {100.0 * base_passed / base_total:.1f}%")
    return passed, total, base_passed, base_total


def _baseline_passes(baseline, rel):
    tests = baseline["files"].get(rel, {}).get("tests", {})
    return [name for name, t in tests.items() if t["outcome"] == "passed"]


def list_failures(result, baseline):
    """Each test the baseline passes that this result does not: `file::test outcome: reason`."""
    for rel in sorted(result["files"]):  # the files this run ran (--only may pick some)
        entry = result["files"][rel]
        for name in _baseline_passes(baseline, rel):
            got = entry["tests"].get(name)
            if got is None:
                why = (entry["collect_errors"] or ["not collected"])[0]
                print(f"{name} not-collected: {why}")
            elif got["outcome"] != "passed":
                print(f"{name} {got['outcome']}: {got['reason']}")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, type=pathlib.Path,
                        help="folder holding the `tests` package (outside this repository)")
    parser.add_argument("--folder", required=True,
                        help="test folder relative to --root, e.g. tests/ut/python/graph_syntax")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    parser.add_argument("--pythonpath", default="", help="prepended to PYTHONPATH (kiln's build)")
    parser.add_argument("--package", default="kiln", help="package the tests should import")
    parser.add_argument("--original", default="mindspore", help="package name in the sources")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per file")
    parser.add_argument("--out", required=True, type=pathlib.Path, help="result JSON")
    parser.add_argument("--baseline", type=pathlib.Path, help="a result JSON to compare with")
    parser.add_argument("--only", nargs="*", default=[], help="run only files containing these")
    parser.add_argument("--list-failures", action="store_true",
                        help="print each test the baseline passes and this run does not, with "
                             "its outcome and exception line")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: report on --out (an earlier result) against --baseline")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    root = args.root.resolve()
    if not (root / args.folder).is_dir():
        sys.exit(f"graph_syntax_compat: no folder {root / args.folder}")
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    if args.report_only:
        result = json.loads(args.out.read_text())
        report(result, baseline)
        if args.list_failures and baseline is not None:
            list_failures(result, baseline)
        return
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="compat-"))
    try:
        copy_tree(root, args.folder, workdir, args.original, args.package)
        (workdir / "_compat_report.py").write_text(_PLUGIN)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(workdir), args.pythonpath, env.get("PYTHONPATH", "")) if p)
        files = sorted((workdir / args.folder).rglob("test_*.py"))
        files = [f for f in files if not args.only or any(s in str(f) for s in args.only)]
        result = {"package": args.package, "python": args.python, "folder": args.folder,
                  "files": {}}
        for test_file in files:
            rel = str(test_file.relative_to(workdir))
            records, seconds, timed_out, code = run_file(args.python, workdir, test_file, env,
                                                         args.timeout)
            entry = summarize_file(rel, records, timed_out, code)
            entry["seconds"] = round(seconds, 1)
            result["files"][rel] = entry
            print(f"  ran {rel}: {count(entry['tests'])}/{len(entry['tests'])} "
                  f"in {seconds:.0f}s", file=sys.stderr, flush=True)
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
        report(result, baseline)
        if args.list_failures and baseline is not None:
            list_failures(result, baseline)
    finally:
        if args.keep:
            print(f"copy kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
