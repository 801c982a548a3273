"""Compile-cache guards: outside values a graph read are re-checked; what it writes is not."""
import warnings

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn
from kiln.jit.guards import JitSideEffectWarning


def T(v):
    return ms.Tensor(np.array(v, np.float32))


def compiles():
    return ms.get_jit_stats()["compiles"]


def same_as_pynative_after(fn, change, *args):
    """Compiles fn, applies `change`, then checks fn agrees with PyNative (run second, so a
    function that writes its inputs is compared on the same state)."""
    jitted = ms.jit(fn)
    jitted(*args)
    change()
    graph = jitted(*args).asnumpy()
    np.testing.assert_allclose(graph, fn(*args).asnumpy(), rtol=1e-6)
    return jitted


class Config:
    def __init__(self, mult):
        self.mult = mult


cfg = Config(2.0)
configs = [Config(3.0)]
scales = [1.0, 2.0]


def reads_cfg(x):
    return x * cfg.mult


def reads_config_in_list(x):
    return x * configs[0].mult


def reads_list_item(x):
    return x * scales[1]


def test_an_attribute_of_a_global_object_is_guarded():
    def change():
        cfg.mult = 5.0

    try:
        same_as_pynative_after(reads_cfg, change, T([1.0, 2.0]))
    finally:
        cfg.mult = 2.0


def test_an_object_in_a_global_list_is_guarded():
    def change():
        configs[0].mult = 9.0

    same_as_pynative_after(reads_config_in_list, change, T([1.0, 2.0]))


def test_a_global_list_item_is_guarded():
    def change():
        scales[1] = 7.0

    same_as_pynative_after(reads_list_item, change, T([1.0, 2.0]))


def _closures():
    weight = T([1.0, 1.0])
    factors = [3.0]

    def scaled(x):
        return x * weight * factors[0]

    def rebind(value):
        nonlocal weight
        weight = value

    return scaled, rebind, factors


def test_a_closure_list_item_is_guarded():
    scaled, _, factors = _closures()
    same_as_pynative_after(scaled, lambda: factors.__setitem__(0, 4.0), T([1.0, 2.0]))


def test_rebinding_a_closure_tensor_recompiles():
    scaled, rebind, _ = _closures()
    same_as_pynative_after(scaled, lambda: rebind(T([2.0, 5.0])), T([1.0, 2.0]))


buffers = [T([0.0, 0.0, 0.0])]
buffer = T([0.0, 0.0, 0.0])


def writes_global_list_tensor(x):
    buffers[0][1] = x.sum()
    return x * 1.0


def writes_global_tensor(x):
    buffer[0] = x.sum()
    return x + 1.0


def test_index_assignment_into_a_tensor_of_a_global_list_writes_it():
    before = compiles()
    jitted = ms.jit(writes_global_list_tensor)
    for value in (1.0, 2.0, 3.0):
        jitted(T([value, 1.0]))
        np.testing.assert_allclose(buffers[0].asnumpy(), [0.0, value + 1.0, 0.0])
    assert compiles() - before == 1  # what the graph writes is run-time state, not a guard


def test_index_assignment_into_a_global_tensor_does_not_recompile():
    before = compiles()
    jitted = ms.jit(writes_global_tensor)
    for value in (1.0, 2.0, 3.0):
        jitted(T([value, 1.0]))
        np.testing.assert_allclose(buffer.asnumpy(), [value + 1.0, 0.0, 0.0])
    assert compiles() - before == 1


DEFAULT = T([10.0, 20.0])


def default_plus(x, b=DEFAULT):
    return x + b * 2.0


def default_written(x, b=DEFAULT):
    b[1] = 5.0
    return x + b


def test_a_default_tensor_is_read_on_every_call():
    def change():
        DEFAULT[0] = -1.0

    try:
        same_as_pynative_after(default_plus, change, T([1.0, 2.0]))
    finally:
        DEFAULT[0], DEFAULT[1] = 10.0, 20.0


def test_index_assignment_into_a_default_tensor_writes_it_as_in_python():
    try:
        ms.jit(default_written)(T([1.0, 2.0]))
        np.testing.assert_allclose(DEFAULT.asnumpy(), [10.0, 5.0])  # PyNative changes it too
    finally:
        DEFAULT[0], DEFAULT[1] = 10.0, 20.0


calls = []
escaped = []


def appends_a_number(x):
    calls.append(1)
    return x + 1.0


def appends_a_graph_value(x):
    y = x + 1.0
    escaped.append(y)
    return y


def test_a_list_the_function_appends_to_is_not_a_guard_failing_every_call():
    before, first = compiles(), len(calls)
    jitted = ms.jit(appends_a_number)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            jitted(T([1.0]))
    assert compiles() - before == 1
    # LAX (the default): the append happens when the graph runs, on every call, as in
    # PyNative; the list is run-time state, never a guard
    assert len(calls) - first == 5
    assert not [w for w in caught if issubclass(w.category, JitSideEffectWarning)]
    strict = ms.JitConfig(jit_syntax_level="STRICT")
    with pytest.raises(TypeError, match="STRICT"):
        ms.jit(appends_a_number, jit_config=strict)(T([1.0]))


def test_a_graph_value_stored_into_a_global_list_is_an_error_at_strict():
    strict = ms.JitConfig(jit_syntax_level="STRICT")
    before = list(escaped)
    with pytest.raises(TypeError, match="list.append"):
        ms.jit(appends_a_graph_value, jit_config=strict)(T([1.0]))
    assert escaped == before  # refused before the list changed
    # LAX (the default) appends the run-time value when the graph runs (test_jit_lax.py)


def sets_an_outside_attribute(x):
    cfg.mult = 3.0
    return x


def test_assigning_an_attribute_of_an_outside_object_is_refused_at_strict():
    strict = ms.JitConfig(jit_syntax_level="STRICT")
    with pytest.raises(ms.GraphSyntaxError, match="'mult' of an object from outside"):
        ms.jit(sets_an_outside_attribute, jit_config=strict)(T([1.0]))
    assert cfg.mult == 2.0  # (LAX sets it when the graph runs: test_jit_lax.py)


def builds_and_sets_a_local_object(x):
    local = Config(1.0)
    local.mult = 4.0
    return x * local.mult


def test_objects_built_inside_the_function_can_be_changed():
    np.testing.assert_allclose(ms.jit(builds_and_sets_a_local_object)(T([1.0])).asnumpy(), [4.0])


# ---- arguments: objects of user classes and unhashable values ----
def scaled_by(x, config):
    return x * config.mult


def scaled_by_size(x, items):
    return x * len(items)


def test_an_object_argument_is_keyed_by_its_attributes():
    jitted = ms.jit(scaled_by)
    config = Config(2.0)
    np.testing.assert_allclose(jitted(T([1.0]), config).asnumpy(), [2.0])
    config.mult = 5.0  # was: the graph of mult=2.0, found by the object's hash
    np.testing.assert_allclose(jitted(T([1.0]), config).asnumpy(), [5.0])
    before = compiles()
    np.testing.assert_allclose(jitted(T([1.0]), Config(5.0)).asnumpy(), [5.0])
    assert compiles() == before  # an equal object reuses the variant


def test_an_unhashable_argument_never_reaches_another_objects_variant():
    jitted = ms.jit(scaled_by_size)
    for n in range(1, 5):  # fresh sets: their ids are reused as they die
        np.testing.assert_allclose(jitted(T([1.0]), set(range(n))).asnumpy(), [float(n)])


offsets = np.array([1.0, 0.0], np.float32)


def adds_array_argument(x, array):
    return x + ms.Tensor(array) * 2.0


def adds_global_array(x):
    return x + ms.Tensor(offsets) * 2.0


def test_a_numpy_array_argument_changed_in_place_recompiles():
    array = np.array([1.0, 0.0], np.float32)
    same_as_pynative_after(adds_array_argument, lambda: array.__setitem__(0, 10.0),
                           T([1.0, 2.0]), array)


def test_a_global_numpy_array_changed_in_place_recompiles():
    def change():
        offsets[0] = 10.0

    try:
        same_as_pynative_after(adds_global_array, change, T([1.0, 2.0]))
    finally:
        offsets[0] = 1.0


def test_guard_text_names_tensors_and_cells_without_formatting_their_contents():
    # A guard's text is made at every compile; formatting a weight's values (or a whole network)
    # there cost a ResNet-18 most of its compile time.
    from kiln.jit import guards

    class Calls(Tensor):
        reprs = 0

        def __repr__(self):
            Calls.reprs += 1
            return super().__repr__()

    weight = ms.Parameter(Tensor(np.full((3, 4), 7.25, np.float32)), name="fc.weight")
    text = guards.show([weight, nn.Dense(2, 3), 1.5])
    assert "fc.weight" in text and "shape=(3, 4)" in text and "7.25" not in text
    assert "Dense" in text and text.endswith("1.5]")
    tensor = Calls(np.zeros((2,), np.float32))
    assert "shape=(2,)" in guards.show((tensor,)) and Calls.reprs == 0
