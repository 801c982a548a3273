"""ops.Custom: pyfunc (a Python function of NumPy arrays) and aot (a compiled C++ function with
MindSpore's signature), with bprop, in PyNative and compiled code."""
import warnings

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn, ops

ADD_SOURCE = r"""
#include <cstdint>
#include <cstring>
extern "C" int ScaledAdd(int nparam, void** params, int* ndims, int64_t** shapes,
                         const char** dtypes, void* stream, void* extra) {
  if (nparam != 3 || stream != nullptr || extra != nullptr) return 1;
  for (int i = 0; i < nparam; ++i)
    if (std::strcmp(dtypes[i], "float32") != 0) return 2;
  const float* a = static_cast<const float*>(params[0]);
  const float* b = static_cast<const float*>(params[1]);
  float* out = static_cast<float*>(params[2]);
  int64_t size = 1;
  for (int i = 0; i < ndims[2]; ++i) size *= shapes[2][i];
  for (int64_t i = 0; i < size; ++i) out[i] = a[i] + 10.0f * b[i];
  return 0;
}
"""


def T(values, dtype=np.float32):
    return Tensor(np.array(values, dtype))


def both_modes():
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        yield
    ms.set_context(mode=ms.PYNATIVE_MODE)


class Holder(nn.Cell):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def construct(self, *xs):
        return self.op(*xs)


def square_with_bprop():
    grad_op = ops.Custom(lambda x, dout: 2.0 * x * dout, lambda x, _: x, lambda x, _: x,
                         func_type="pyfunc")

    def bprop(x, out, dout):
        return (grad_op(x, dout),)

    return ops.Custom(lambda x: x * x, lambda x: x, lambda x: x, bprop=bprop,
                      func_type="pyfunc")


def test_pyfunc_values_and_bprop_gradient_in_both_modes():
    x = T([1.0, 4.0, 9.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # compiled code notes the run-time Python node
        for _ in both_modes():
            net = Holder(square_with_bprop())
            np.testing.assert_allclose(net(x).asnumpy(), [1.0, 16.0, 81.0])
            np.testing.assert_allclose(ms.grad(net)(x).asnumpy(), [2.0, 8.0, 18.0])


def test_pyfunc_with_two_outputs_and_fixed_declarations():
    op = ops.Custom(lambda a: (a + 1, (a * 2).astype(np.int32)), out_shape=((2,), (2,)),
                    out_dtype=(ms.float32, ms.int32), func_type="pyfunc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in both_modes():
            first, second = Holder(op)(T([1.5, 2.0]))
            np.testing.assert_allclose(first.asnumpy(), [2.5, 3.0])
            assert second.dtype == ms.int32
            np.testing.assert_array_equal(second.asnumpy(), [3, 4])


def test_pyfunc_output_of_another_shape_than_declared_is_an_error():
    op = ops.Custom(lambda a: a[:1], lambda a: a, lambda a: a, func_type="pyfunc")
    with pytest.raises(ValueError, match=r"output 0 has shape \(1,\), out_shape declares \(3,\)"):
        op(T([1.0, 2.0, 3.0]))


def test_aot_compiles_a_source_and_runs_it_in_both_modes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scaled_add.cc").write_text(ADD_SOURCE)
    op = ops.Custom("./scaled_add.cc:ScaledAdd", out_shape=lambda a, _: a,
                    out_dtype=lambda a, _: a, func_type="aot")
    assert len(list((tmp_path / "akg_kernel_meta").glob("*.so"))) == 1
    a, b = T([[0.0, 1.0], [2.0, 3.0]]), T([[1.0, 1.0], [0.5, -1.0]])
    for _ in both_modes():
        np.testing.assert_allclose(Holder(op)(a, b).asnumpy(), [[10.0, 11.0], [7.0, -7.0]])
    # a non-contiguous input reaches the function as a packed copy
    np.testing.assert_allclose(op(a.T, b.T).asnumpy(), [[10.0, 7.0], [11.0, -7.0]])
    # the function's error code is a RuntimeError naming it
    with pytest.raises(RuntimeError, match="ScaledAdd.*returned error code 2"):
        op(a.astype(ms.float64), b.astype(ms.float64))


def test_aot_gets_gradients_from_bprop(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scaled_add.cc").write_text(ADD_SOURCE)

    def bprop(a, b, out, dout):
        return (dout, dout * 10.0)

    op = ops.Custom(str(tmp_path / "scaled_add.cc") + ":ScaledAdd", lambda a, _: a,
                    lambda a, _: a, bprop=bprop, func_type="aot")
    a, b = T([1.0, 2.0]), T([3.0, 4.0])
    for _ in both_modes():
        da, db = ms.grad(lambda a, b: (Holder(op)(a, b) ** 2).sum(), grad_position=(0, 1))(a, b)
        np.testing.assert_allclose(da.asnumpy(), [62.0, 84.0])
        np.testing.assert_allclose(db.asnumpy(), [620.0, 840.0])


def test_bad_declarations_and_kinds_are_clear_errors(tmp_path):
    with pytest.raises(NotImplementedError, match="func_type='akg'"):
        ops.Custom(lambda x: x, lambda x: x, lambda x: x, func_type="akg")
    with pytest.raises(ValueError, match="needs out_shape and out_dtype"):
        ops.Custom(lambda x: x, func_type="pyfunc")
    with pytest.raises(ValueError, match="does not exist"):
        ops.Custom(str(tmp_path / "missing.so") + ":f", lambda x: x, lambda x: x,
                   func_type="aot")
    with pytest.raises(TypeError, match="input 0 must be a Tensor"):
        ops.Custom(lambda x: x, lambda x: x, lambda x: x)(np.ones(2))
