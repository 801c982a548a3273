"""jit in all its forms, the compile cache and its guards, mutable, save_graphs, errors."""

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops


def ones(*shape):
    return Tensor(np.ones(shape, np.float32))


def stats():
    return ms.get_jit_stats()


# ---- the forms of jit ----
def test_decorator_forms_and_transform():
    @ms.jit
    def a(x):
        return x + 1.0

    @ms.jit(jit_level="O0")
    def b(x):
        return x + 2.0

    def plain(x):
        return x + 3.0

    c = ms.jit(plain)
    d = ms.jit(jit_config=ms.JitConfig(jit_level="O2"))(plain)
    x = ones(2)
    assert a(x).asnumpy().tolist() == [2.0, 2.0]
    assert b(x).asnumpy().tolist() == [3.0, 3.0]
    assert c(x).asnumpy().tolist() == [4.0, 4.0]
    assert d(x).asnumpy().tolist() == [4.0, 4.0]
    assert plain(x).asnumpy().tolist() == [4.0, 4.0]  # the original still runs eagerly


def test_jit_config_validation_and_alias():
    assert ms.JitConfig(exc_mode="auto").exec_mode == "auto"
    with pytest.raises(ValueError, match="jit_level"):
        ms.JitConfig(jit_level="O9")
    with pytest.raises(ValueError, match="unknown"):
        ms.JitConfig(speed="max")
    with pytest.raises(TypeError, match="jit_config"):
        ms.jit(lambda x: x, jit_config={"jit_level": "O1"})


class Scaled(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = ms.Parameter(Tensor(np.full(3, 2.0, np.float32)), name="w")
        self.flag = True

    def construct(self, x):
        if self.flag:
            return x * self.w
        return x - self.w


def test_graph_mode_cells_and_parameter_updates_without_recompiling():
    net = Scaled()
    ms.set_context(mode=ms.GRAPH_MODE)
    x = ones(3)
    assert net(x).asnumpy().tolist() == [2.0] * 3
    before = stats()["compiles"]
    ops.assign(net.w, Tensor(np.full(3, 5.0, np.float32)))
    assert net(x).asnumpy().tolist() == [5.0] * 3
    assert stats()["compiles"] == before, "a Parameter update must not recompile"


def test_changing_a_self_attribute_recompiles_with_a_reason():
    net = Scaled()
    ms.set_context(mode=ms.GRAPH_MODE)
    x = ones(3)
    net(x)
    compiles = stats()["compiles"]
    net.flag = False
    assert net(x).asnumpy().tolist() == [-1.0] * 3
    assert stats()["compiles"] == compiles + 1
    assert any("flag" in r for r in stats()["recompile_reasons"])


FACTOR = 2.0


def uses_global(x):
    return x * FACTOR


def test_changing_a_global_recompiles():
    global FACTOR
    f = ms.jit(uses_global)
    x = ones(2)
    assert f(x).asnumpy().tolist() == [2.0, 2.0]
    FACTOR = 3.0
    try:
        assert f(x).asnumpy().tolist() == [3.0, 3.0]
    finally:
        FACTOR = 2.0


def test_cache_hits_on_same_signature_and_recompiles_on_new_shapes_or_constants():
    @ms.jit
    def f(x, k):
        return x * k

    start = stats()
    f(ones(2), 3)
    f(ones(2), 3)
    f(ones(2) * 5.0, 3)
    mid = stats()
    assert mid["compiles"] - start["compiles"] == 1
    assert mid["cache_hits"] - start["cache_hits"] == 2
    f(ones(4), 3)  # new shape
    f(ones(2), 4)  # new constant
    assert stats()["compiles"] - mid["compiles"] == 2


def test_mutable_scalars_are_graph_inputs():
    @ms.jit
    def f(x, k):
        return x * k

    f(ones(2), ms.mutable(2))
    before = stats()["compiles"]
    out = f(ones(2), ms.mutable(7))
    assert stats()["compiles"] == before
    assert out.asnumpy().tolist() == [7.0, 7.0]
    with pytest.raises(TypeError):
        ms.mutable("text")


def test_save_graphs_writes_ir_text(tmp_path):
    ms.set_context(save_graphs=True, save_graphs_path=str(tmp_path))

    @ms.jit
    def f(x):
        return ops.relu(x) * 2.0

    f(ones(3))
    files = list(tmp_path.glob("*.ir"))
    assert files, "no IR was written"
    text = files[0].read_text()
    assert "func @main" in text and "relu" in text


# ---- errors before anything runs ----
def many_unsupported(x):
    try:
        y = x + 1
    except ValueError:
        y = x
    with open("f") as fh:  # noqa: F841
        pass
    del y
    return {v for v in (1, 2)}


def test_unsupported_syntax_lists_every_construct():
    strict = ms.JitConfig(jit_syntax_level="STRICT")
    with pytest.raises(ms.GraphSyntaxError) as info:
        ms.jit(many_unsupported, jit_config=strict)(ones(2))
    msg = str(info.value)
    assert isinstance(info.value, RuntimeError)
    for what in ("try/except", "with", "del", "set comprehensions"):
        assert what in msg, what
    assert msg.count("line ") >= 4 and "test_jit_api.py" in msg and "PyNative" in msg
    with pytest.raises(ms.GraphSyntaxError) as info:  # LAX (the default) runs `with`
        ms.jit(many_unsupported)(ones(2))
    assert "with is not supported" not in str(info.value) and "try/except" in str(info.value)


def undefined_name(x):
    return x + not_defined_anywhere  # noqa: F821


def test_undefined_names_raise_name_error_with_the_line():
    with pytest.raises(NameError) as info:
        ms.jit(undefined_name)(ones(2))
    assert "not_defined_anywhere" in str(info.value) and "test_jit_api.py" in str(info.value)


def mismatched_join(x):
    if x.sum() > 0:
        y = x
    else:
        y = x.astype(ms.int32)
    return y


def test_branches_that_disagree_raise_type_error_naming_both_sides():
    with pytest.raises(TypeError) as info:
        ms.jit(mismatched_join)(ones(2))
    msg = str(info.value)
    assert "Float32" in msg and "Int32" in msg and "line" in msg


def shape_error(x):
    y = x.reshape(2, 2)
    return y + ones(3)


def test_op_shape_errors_name_op_shapes_and_user_line():
    with pytest.raises(ValueError) as info:
        ms.jit(shape_error)(ones(4))
    msg = str(info.value)
    assert "add" in msg and "(2, 2)" in msg and "(3,)" in msg and "test_jit_api.py" in msg


def uses_value_at_compile_time(x):
    return float(x) * 2.0


def test_needing_a_tensor_value_while_compiling_explains_what_to_do():
    strict = ms.JitConfig(jit_syntax_level="STRICT")
    with pytest.raises(TypeError, match="only known when the compiled graph runs"):
        ms.jit(uses_value_at_compile_time, jit_config=strict)(ones(1))
    # LAX (the default): Python takes the value when the graph runs, as in PyNative
    assert ms.jit(uses_value_at_compile_time)(ones(1)) == uses_value_at_compile_time(ones(1))


def test_lambdas_compile_too():
    f = ms.jit(lambda x: x * 3.0)
    assert f(ones(1)).asnumpy().tolist() == [3.0]


def test_cell_attribute_guards_are_rechecked_after_any_cell_change():
    net = Scaled()
    ms.set_context(mode=ms.GRAPH_MODE)
    x = ones(3)
    net(x)
    net(x)  # guards pass; later calls skip re-reading them until a Cell attribute changes
    net.flag = False
    assert net(x).asnumpy().tolist() == [-1.0] * 3
    net.set_train(True)  # set_train bypasses __setattr__ but still invalidates the shortcut
    net.flag = True
    assert net(x).asnumpy().tolist() == [2.0] * 3


def test_steady_state_calls_take_the_fast_path_and_still_see_every_change():
    """After a guarded call, calls with the same tensor types go straight to C++; a new shape,
    a changed Cell attribute or a non-tensor argument goes back through the checked path."""
    import numpy as np  # noqa: PLC0415

    from kiln import Tensor, nn  # noqa: PLC0415

    class Scale(nn.Cell):
        def __init__(self):
            super().__init__()
            self.factor = 2.0
            self.dense = nn.Dense(3, 3)

        def construct(self, x):
            return self.dense(x) * self.factor

    net = Scale()
    x = Tensor(np.ones((2, 3), np.float32))
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        first = net(x).asnumpy()
        hits = ms.get_jit_stats()["cache_hits"]
        for _ in range(3):
            np.testing.assert_array_equal(net(x).asnumpy(), first)
        assert ms.get_jit_stats()["cache_hits"] == hits + 3
        net.factor = 3.0  # a Cell attribute the graph read as a constant: recompiles
        np.testing.assert_allclose(net(x).asnumpy(), first * 1.5, rtol=1e-6)
        y = Tensor(np.ones((4, 3), np.float32))  # a new shape: a new graph
        assert net(y).shape == (4, 3)
        net.dense.weight.set_data(Tensor(np.zeros((3, 3), np.float32)))  # in place: same graph
        np.testing.assert_allclose(net(x).asnumpy(), 3.0 * net.dense.bias.asnumpy()[None, :]
                                   .repeat(2, 0), rtol=1e-6)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def test_fast_path_of_a_jitted_method_follows_the_instance():
    """@jit on construct is shared by every instance: the one-call fast path belongs to the last
    instance that took the checked path, and another instance never runs with its weights."""
    import numpy as np  # noqa: PLC0415

    from kiln import Parameter, Tensor, nn  # noqa: PLC0415

    class Scale(nn.Cell):
        def __init__(self, factor):
            super().__init__()
            self.w = Parameter(Tensor(np.full((3,), factor, np.float32)))

        @ms.jit
        def construct(self, x):
            return x * self.w

    a, b = Scale(2.0), Scale(5.0)
    x = Tensor(np.ones((3,), np.float32))
    for _ in range(3):
        np.testing.assert_array_equal(a(x).asnumpy(), 2.0)
        np.testing.assert_array_equal(b(x).asnumpy(), 5.0)
    del a  # the fast path holds the instance weakly
    np.testing.assert_array_equal(b(x).asnumpy(), 5.0)


def test_two_lambdas_on_one_line_each_compile_their_own_body():
    first, second = (lambda t: t + 1.0), (lambda t: t * 10.0)
    x = ones(2)
    assert ms.jit(first)(x).asnumpy().tolist() == [2.0, 2.0]
    assert ms.jit(second)(x).asnumpy().tolist() == [10.0, 10.0]
