"""The op registry: every op has every facet, and the public ops of SPEC §1 exist."""
import pytest

import kiln as ms
from kiln import _C

SPEC_OPS = """add sub mul div pow neg abs exp log sqrt rsqrt sin cos tanh sigmoid relu gelu silu
softmax log_softmax maximum minimum where cast reshape transpose concat stack split squeeze
expand_dims broadcast_to sum mean max min argmax argmin matmul bmm zeros ones zeros_like
ones_like full arange gather one_hot clamp conv2d max_pool2d avg_pool2d dropout layer_norm
batch_norm flatten cross_entropy mse_loss depend""".split()


@pytest.mark.parametrize("name", _C.op_names())
def test_registered_op_has_every_facet(name):
    kind = _C.op_names().index(name)
    assert _C.is_registered(kind), f"{name} is in op_list.def but not registered"
    schema = _C.op_schema(kind)
    assert schema["name"] == name
    assert schema["has_infer"], f"{name} lacks shape/dtype inference"
    assert schema["has_kernel"], f"{name} lacks a CPU kernel"
    assert schema["has_grad"], f"{name} lacks a gradient rule (NotDifferentiable if it has none)"


@pytest.mark.parametrize("name", SPEC_OPS)
def test_spec_functional_op_exists(name):
    assert callable(getattr(ms.ops, name, None)), f"kiln.ops.{name} is missing"


def test_unknown_op_kind_is_an_error():
    with pytest.raises(ValueError, match="out of range"):
        _C.op_schema(10_000)
