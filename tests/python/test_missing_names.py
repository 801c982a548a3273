"""A MindSpore name kiln lacks raises an AttributeError that says it is not in kiln yet and points
at docs/compatibility.md, in PyNative and in compiled code; existing names and submodules are
unaffected."""
import pathlib

import numpy as np
import pytest

import kiln as ms
from kiln import nn, ops

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"


@pytest.mark.parametrize("module,name,shown", [
    (ms, "boost", "mindspore.boost"), (ops, "roll_the_dice", "mindspore.ops.roll_the_dice"),
    (nn, "FluxCapacitor2d", "mindspore.nn.FluxCapacitor2d"),
])
def test_missing_names_say_so(module, name, shown):
    with pytest.raises(AttributeError, match=rf"{shown} is not in kiln yet.*docs/compatibility"):
        getattr(module, name)
    assert not hasattr(module, name)


def test_the_document_exists_and_lists_coverage_per_namespace():
    text = DOC.read_text()
    assert "## API coverage" in text
    for namespace in ("mindspore.ops", "mindspore.nn", "mindspore.Tensor"):
        assert namespace in text


def test_present_names_dunders_and_imports_are_unaffected():
    assert ops.leaky_relu is not None and nn.GroupNorm is not None and ms.Tensor is not None
    with pytest.raises(AttributeError) as info:
        ms.__wrapped__  # noqa: B018 - probing a dunder
    assert "not in kiln yet" not in str(info.value)
    with pytest.raises(ImportError):
        from kiln.ops import roll_the_dice  # noqa: F401


def _uses_a_missing_op(x):
    return ops.roll_the_dice(x)


def test_compiled_code_gets_the_same_error():
    with pytest.raises(AttributeError, match="not in kiln yet"):
        ms.jit(_uses_a_missing_op)(ms.Tensor(np.ones(2, np.float32)))
