"""The IR's text form (round trip, golden files), verifier and interpreter."""

import pathlib

import numpy as np
import pytest

import kiln as ms
from kiln import _C

IR_DIR = pathlib.Path(__file__).resolve().parents[1] / "ir"


@pytest.mark.parametrize("path", sorted(IR_DIR.glob("*.ir")), ids=lambda p: p.name)
def test_golden_files_round_trip(path):
    text = path.read_text()
    printed = _C.ir_reprint(text)
    assert _C.ir_reprint(printed) == printed
    body = "\n".join(line for line in text.splitlines() if not line.startswith("//")).strip()
    assert printed.strip() == body, "the file is not in canonical form"
    _C.ir_verify(text)


def test_interpreter_runs_loops_and_branches():
    text = (IR_DIR / "control_flow.ir").read_text()
    (out,) = _C.ir_run(text, [ms.Tensor(np.array(5, np.int64)), ms.Tensor(np.zeros(3, np.float32))])
    # squares of 2, 3, 4 are added (the branch skips i <= 1)
    np.testing.assert_array_equal(out.asnumpy(), np.full(3, 4 + 9 + 16, np.float32))


SIMPLE = """func @main(%0: f32[2,3], %1: f32[3]) -> (f32[2,3]) {
  %2 = add(%0, %1) : f32[2,3]
  %3 = reduce_sum(%2) {axes=(1,), keepdims=True, dtype=None} : f32[2,1]
  %4 = mul(%2, %3) : f32[2,3]
  return %4
}
"""


def test_ops_with_attributes_run_like_eager():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.array([1.0, 2.0, 3.0], np.float32)
    (out,) = _C.ir_run(SIMPLE, [ms.Tensor(x), ms.Tensor(y)])
    s = x + y
    np.testing.assert_allclose(out.asnumpy(), s * s.sum(1, keepdims=True))
    assert _C.ir_reprint(SIMPLE) == SIMPLE


@pytest.mark.parametrize(
    "bad,word",
    [
        (SIMPLE.replace("%2 = add(%0, %1) : f32[2,3]", "%2 = add(%0, %1) : f32[2,4]"), "recorded"),
        (SIMPLE.replace("add(%0, %1)", "add(%0, %9)"), "undefined value"),
        (SIMPLE.replace("reduce_sum", "no_such_op"), "unknown op"),
        (SIMPLE.replace("keepdims=True", "keepdim=True"), "no attribute"),
        (SIMPLE.replace("%4 = mul", "%5 = mul"), "numbered in order"),
        (SIMPLE.replace("f32[3]) ->", "q32[3]) ->"), "unknown type"),
        (
            "func @main(%0: b[]) -> (b[]) {\n  %1 = if %0(%0) then @a else @b : b[]\n"
            "  return %1\n}\n",
            "does not exist",
        ),
        (
            "func @main(%0: f32[2]) -> (f32[2]) {\n"
            "  %1 = if %0(%0) then @main else @main : f32[2]\n"
            "  return %1\n}\n",
            "bool scalar",
        ),
    ],
)
def test_bad_ir_is_reported_not_crashed(bad, word):
    with pytest.raises(ValueError, match=word):
        _C.ir_verify(bad)


def test_print_and_raise_act_at_run_time(capfd):
    text = """func @main(%0: f32[2]) -> (f32[2]) {
  print "x = {}"(%0)
  raise ValueError "bad value {}"(%0)
  return %0
}
"""
    with pytest.raises(ValueError, match=r"bad value \[1\. 2\.\]"):
        _C.ir_run(text, [ms.Tensor(np.array([1.0, 2.0], np.float32))])
    assert "x = [1. 2.]" in capfd.readouterr().out


def test_wrong_input_types_are_rejected():
    with pytest.raises(TypeError, match="input 1"):
        _C.ir_run(
            SIMPLE, [ms.Tensor(np.zeros((2, 3), np.float32)), ms.Tensor(np.zeros(4, np.float32))]
        )


@pytest.mark.parametrize("path", sorted((IR_DIR / "passes").glob("*.ir")), ids=lambda p: p.name)
def test_pass_golden_files(path):
    """Each file: `// RUN: pass,pass`, the input IR, `// ---- expected`, the expected IR."""
    text = path.read_text()
    header = text.splitlines()[0]
    assert header.startswith("// RUN:"), "the first line must name the passes"
    names = [n.strip() for n in header[len("// RUN:") :].split(",")]
    source, expected = text.split("// ---- expected")
    source = "\n".join(line for line in source.splitlines() if not line.startswith("//"))
    assert _C.ir_run_passes(source, names).strip() == expected.strip()


def test_non_tensor_inputs_are_a_type_error():
    with pytest.raises(TypeError, match="Tensors"):
        _C.ir_run(SIMPLE, [1, 2])


# ---- Malformed IR (the kinds of mutant the IR fuzzer makes): a ValueError, never a crash ----


def _one_node(node, param="f32[2,2]"):
    return f"func @main(%0: {param}) -> () {{\n  {node}\n  return\n}}\n"


@pytest.mark.parametrize(
    "text,words",
    [
        # missing operands: the verifier checks arity before any inference function runs
        (_one_node("%1 = matmul(%0) : f32[2,2]"), ["matmul", "@main node 0", "'other'"]),
        (_one_node("%1 = max_pool2d() : f32[2,2]"), ["max_pool2d", "required"]),
        (_one_node("%1 = add(%0, none) : f32[2,2]"), ["add", "required"]),
        # surplus operands
        (_one_node("%1 = add(%0, %0, %0) : f32[2,2]"), ["add", "at most 2"]),
        # wrong attribute types
        (_one_node('%1 = reduce_sum(%0) {keepdims="yes"} : f32[]'), ["'keepdims' must be a bool"]),
        (_one_node("%1 = transpose(%0) {perm=1.5} : f32[2,2]"), ["'perm' must be a tuple"]),
        # out-of-range ints and floats: parse errors with line:column
        (_one_node("%1 = neg(%0) : f32[2,2]", "f32[99999999999999999999]"), ["line 1:20"]),
        (_one_node("%1 = reduce_sum(%0) {axes=(99999999999999999999,)} : f32[]"), ["line 2:"]),
        (_one_node("%1 = const [300] : u8[]"), ["line 2:15", "out of range"]),
        (_one_node("%1 = const [1e999] : f64[]"), ["out of range"]),
        (_one_node("%1 = const [1e39] : f32[]"), ["out of range for float32"]),
        (_one_node('%1 = neg(%0) : f32[2,2] loc("m.py":99999999999:1)'), ["a line", "range"]),
        # the halves of an overlapped all-reduce: the wait takes the start's int64 handle
        (_one_node("%1 = all_reduce_wait(%0, %0) : f32[2,2]"), ["int64 scalar"]),
        (_one_node("%1 = all_reduce_wait(%0) : f32[2,2]"), ["('handle') is required"]),
        (_one_node("%1 = all_reduce_start(%0) : f32[2,2]"), ["is i64[] but recorded"]),
        (_one_node('%1 = all_reduce_start(%0) {op="avg"} : i64[]'), ["SUM, MAX, MIN or PROD"]),
        # huge dims: no size computed from the type may overflow
        (_one_node("%1 = neg(%0) : f32[2,2]", "f32[4611686018427387904,4]"), ["2^63 bytes"]),
    ],
)
def test_malformed_ir_is_a_clear_error(text, words):
    with pytest.raises(ValueError) as info:
        _C.ir_verify(text)
    for word in words:
        assert word in str(info.value)


def test_every_op_without_its_operands_is_an_error_not_a_crash():
    for name in _C.op_names():
        with pytest.raises((ValueError, TypeError), match=name):
            _C.ir_verify(_one_node(f"%1 = {name}() : f32[2,2]"))


def test_int64_constants_round_trip_exactly():
    text = _one_node("%1 = const [9007199254740993] : i64[]")
    assert "[9007199254740993]" in _C.ir_reprint(text)
