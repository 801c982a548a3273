"""tools/graph_syntax_compat.py: the package rename touches only name tokens, and a run over a
small MindSpore-style test folder counts passes, failures, import errors and time-outs, and the
rate on the baseline's passes."""
import importlib.util
import json
import pathlib
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("graph_syntax_compat",
                                               ROOT / "tools" / "graph_syntax_compat.py")
compat = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compat)


def test_rename_touches_only_the_package_name_tokens():
    src = textwrap.dedent('''\
        import mindspore as ms
        from mindspore.common.api import jit
        from tests.mindspore_test_framework import x  # mindspore in a comment
        s = "mindspore"
        y = mindspore_thing + ms.mindspore
        ''')
    out = compat.rename_package(src, "mindspore", "kiln")
    assert out == textwrap.dedent('''\
        import kiln as ms
        from kiln.common.api import jit
        from tests.mindspore_test_framework import x  # mindspore in a comment
        s = "mindspore"
        y = mindspore_thing + ms.kiln
        ''')
    assert compat.rename_package(src, "mindspore", "mindspore") == src


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_a_run_counts_outcomes_and_the_rate_on_the_baseline(tmp_path, capsys):
    root = tmp_path / "src"
    folder = root / "tests" / "ut" / "python" / "graph_syntax"
    # The package __init__ above the folder imports what does not exist: it is copied empty.
    _write(root / "tests" / "__init__.py", "import mindspore_internal_bootstrap\n")
    _write(folder / "__init__.py", "")
    _write(folder / "test_ok.py", '''\
        import numpy as np
        import mindspore as ms

        def test_add():
            out = ms.jit(lambda x: x + 1)(ms.Tensor(np.ones(2, np.float32)))
            assert out.asnumpy().tolist() == [2.0, 2.0]

        def test_fails():
            assert ms.Tensor(1.0).asnumpy() == 2.0
        ''')
    _write(folder / "test_missing.py", "from mindspore import NoSuchName\n\ndef test_a():\n"
                                       "    pass\n")
    _write(folder / "test_slow.py", "import time\n\ndef test_first():\n    pass\n\n"
                                    "def test_sleeps():\n    time.sleep(30)\n")
    baseline = {"files": {
        "tests/ut/python/graph_syntax/test_ok.py": {"tests": {
            "tests/ut/python/graph_syntax/test_ok.py::test_add": {"outcome": "passed"},
            "tests/ut/python/graph_syntax/test_ok.py::test_fails": {"outcome": "passed"}}},
        "tests/ut/python/graph_syntax/test_missing.py": {"tests": {
            "tests/ut/python/graph_syntax/test_missing.py::test_a": {"outcome": "passed"}}},
    }}
    (tmp_path / "base.json").write_text(json.dumps(baseline))
    out_file = tmp_path / "kiln.json"
    kiln_path = str(pathlib.Path(sys.modules["kiln"].__file__).parents[1])
    compat.main(["--root", str(root), "--folder", "tests/ut/python/graph_syntax",
                 "--python", sys.executable, "--pythonpath", kiln_path, "--timeout", "8",
                 "--out", str(out_file), "--baseline", str(tmp_path / "base.json"),
                 "--list-failures"])
    printed = capsys.readouterr().out
    result = json.loads(out_file.read_text())["files"]
    ok = result["tests/ut/python/graph_syntax/test_ok.py"]["tests"]
    assert ok["tests/ut/python/graph_syntax/test_ok.py::test_add"]["outcome"] == "passed"
    assert ok["tests/ut/python/graph_syntax/test_ok.py::test_fails"]["outcome"] == "failed"
    missing = result["tests/ut/python/graph_syntax/test_missing.py"]
    assert missing["tests"] == {} and "NoSuchName" in missing["collect_errors"][0]
    slow = result["tests/ut/python/graph_syntax/test_slow.py"]
    assert slow["timed_out"]
    assert {k.split("::")[1]: v["outcome"] for k, v in slow["tests"].items()} == {
        "test_first": "passed", "test_sleeps": "timeout"}
    assert "RATE on the 3 tests the baseline passes: 1/3 = 33.3%" in printed
    assert "test_missing.py::test_a not-collected" in printed
    assert (root / "tests" / "__init__.py").read_text().startswith("import mindspore")  # untouched
