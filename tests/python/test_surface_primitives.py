"""User-defined primitives (Primitive, PrimitiveWithInfer, prim_attr_register), constexpr and
_primexpr, ops.operations as a package, and the graph helpers F.fill/F.dtype/F.shape,
ops.select and ops.partial, in PyNative and under @ms.jit."""

import logging

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops
from kiln.ops import functional as F


def ones(*shape):
    return Tensor(np.ones(shape, np.float32))


# ---- ops.operations is a package ----
def test_operations_package_keeps_every_import():
    from kiln.ops import operations as P
    from kiln.ops.operations import MatMul, Primitive
    from kiln.ops.operations._inner_ops import DynamicBroadcastTo

    assert P.MatMul is MatMul is ops.MatMul and Primitive is ops.Primitive
    assert repr(P.MatMul(transpose_b=True)) == "Prim[MatMul]<transpose_a=False, transpose_b=True>"
    out = DynamicBroadcastTo()(ones(3), (2, 3))
    assert out.shape == (2, 3)
    assert DynamicBroadcastTo()(ones(3), Tensor(np.array([2, 3]))).shape == (2, 3)


# ---- user-defined primitives ----
class Scale(ops.PrimitiveWithInfer):
    @ops.prim_attr_register
    def __init__(self, factor, offset=0):
        self.init_prim_io_names(inputs=["x"], outputs=["y"])

    def infer_value(self, x):
        return None if x is None else x * self.factor + self.offset


def test_prim_attr_register_records_init_arguments():
    prim = Scale(2)
    assert prim.name == "Scale"
    assert prim.attrs["factor"] == 2 and prim.attrs["offset"] == 0 and prim.factor == 2
    assert prim.init_attrs == {"factor": 2, "offset": 0}
    assert prim.input_names == ["x"]
    assert repr(prim) == "Prim[Scale]<factor=2, offset=0>"
    prim.add_prim_attr("mode", "fast").del_prim_attr("offset")
    assert "offset" not in prim.attrs and prim.mode == "fast"


def test_primitive_with_infer_folds_known_values_and_refuses_the_rest():
    assert Scale(2, 1)(3) == 7  # infer_value on a known input

    class Opaque(ms.ops.Primitive):
        @ms.ops.prim_attr_register
        def __init__(self):
            pass

    with pytest.raises(NotImplementedError, match="Opaque"):
        Opaque()(ones(2))

    class Keep(ms.ops.Primitive):
        @ms.ops.prim_attr_register
        def __init__(self):
            pass

        def check_elim(self, x):
            return (True, x)

    t = ones(2)
    assert Keep()(t) is t

    @ms.jit
    def f(x):
        return x + Scale(2, 1)(3)  # folded to 7 at compile time

    np.testing.assert_allclose(f(ones(1)).asnumpy(), [8.0])

    @ms.jit
    def g(x):
        return Scale(2)(x)  # a run-time value: no infer_value, no kernel

    with pytest.raises(NotImplementedError, match="Scale"):
        g(ones(1))


def test_user_primitive_as_a_cell_attribute_in_graph_mode():
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.prim = Scale(4)

        def construct(self, x):
            return x * self.prim.factor + self.prim(1)

    ms.set_context(mode=ms.GRAPH_MODE)
    np.testing.assert_allclose(Net()(ones(1)).asnumpy(), [8.0])


# ---- constexpr and _primexpr ----
@ms.constexpr
def _tuple_len(t):
    return len(t)


@ops.constexpr(get_instance=False, name="Product")
def _product(shape):
    out = 1
    for d in shape:
        out *= d
    return out


def test_constexpr_in_pynative_and_at_compile_time():
    assert _tuple_len((1, 2, 3)) == 3
    assert _product()((2, 3)) == 6 and _product.__name__ == "Product"
    calls = []

    @ms.constexpr
    def counted(n):
        calls.append(n)
        return n * 10

    @ms.jit
    def f(x):
        return x + counted(x.shape[0]) + _product()(x.shape)

    np.testing.assert_allclose(f(ones(2, 3)).asnumpy(), np.full((2, 3), 27.0))
    f(ones(2, 3))
    assert calls == [2]  # ran once, while compiling; the cached graph holds the constant


@pytest.fixture
def kiln_records():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Keep()
    ms.log.get_level()
    logging.getLogger("kiln").addHandler(handler)
    yield records
    logging.getLogger("kiln").removeHandler(handler)


def test_constexpr_sees_run_time_values_as_none_and_warns(kiln_records):
    @ms.constexpr
    def unknowns(items):
        return sum(1 for v in items if v is None or (isinstance(v, tuple) and None in v))

    @ms.constexpr(check=False)
    def quiet_unknowns(items):
        return sum(1 for v in items if v is None)

    @ms.jit
    def f(x):
        return x + unknowns((1, x, (x, 2), [3])) * 10 + quiet_unknowns([x, 2, x + 1])

    np.testing.assert_allclose(f(ones(1)).asnumpy(), [23.0])
    assert kiln_records == ['The "unknowns" is a constexpr function. The input arguments must '
                            'be all constant value.']

    @ms.jit
    def g(x):
        return x + quiet_unknowns(ms.mutable([1, 2, 3]))  # a mutable list: None throughout

    np.testing.assert_allclose(g(ones(1)).asnumpy(), [4.0])


def test_primexpr_compiles_into_the_graph_on_run_time_values():
    from kiln.ops.primitive import _primexpr

    @_primexpr
    def clip_positive(x):
        if x.sum() > 0:
            return x
        return x * 0.0

    np.testing.assert_allclose(clip_positive(-ones(2)).asnumpy(), [0.0, 0.0])  # PyNative

    @ms.jit
    def f(x):
        return clip_positive(ms.mutable([x])[0])  # mutable() on a graph value: still a variable

    np.testing.assert_allclose(f(ones(2)).asnumpy(), [1.0, 1.0])
    np.testing.assert_allclose(f(-ones(2)).asnumpy(), [0.0, 0.0])


# ---- graph helpers ----
def test_fill_dtype_shape():
    x = Tensor(np.zeros((2, 3), np.int32))
    assert F.dtype(x) == ms.int32 and F.shape(x) == (2, 3)
    y = F.fill(ms.float32, (2, 2), 2.5)
    assert y.dtype == ms.float32
    np.testing.assert_allclose(y.asnumpy(), np.full((2, 2), 2.5))

    @ms.jit
    def f(x):
        return F.fill(F.dtype(x), F.shape(x), 4) + x

    out = f(x)
    assert out.dtype == ms.int32
    np.testing.assert_array_equal(out.asnumpy(), np.full((2, 3), 4))
    with pytest.raises(TypeError, match="dtype"):
        F.dtype(3)
    with pytest.raises(TypeError, match="fill"):
        F.fill("nonsense", (2,), 1)
    with pytest.raises(TypeError, match="fill"):
        F.fill(ms.float32, 2, 1)


def test_select():
    cond = Tensor(np.array([True, False]))
    x, y = Tensor(np.array([1.0, 2.0], np.float32)), Tensor(np.array([5.0, 6.0], np.float32))
    np.testing.assert_allclose(ops.select(cond, x, y).asnumpy(), [1.0, 6.0])
    np.testing.assert_allclose(ops.select(cond, x, 0.0).asnumpy(), [1.0, 0.0])
    np.testing.assert_allclose(ms.jit(ops.select)(cond, x, y).asnumpy(), [1.0, 6.0])
    with pytest.raises(TypeError, match="bool"):
        ops.select(x, x, y)
    with pytest.raises(TypeError, match="other"):
        ops.select(cond, x, "y")


def test_partial():
    def affine(a, b, x):
        return a * x + b

    scaled = ops.partial(affine, 2.0, 1.0)
    np.testing.assert_allclose(scaled(ones(2)).asnumpy(), [3.0, 3.0])

    @ms.jit
    def f(x):
        g = F.partial(affine, 3.0)
        return g(0.5, x)

    np.testing.assert_allclose(f(ones(2)).asnumpy(), [3.5, 3.5])
    with pytest.raises(TypeError, match="callable"):
        ops.partial(3)
