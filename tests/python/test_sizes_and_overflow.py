"""Checked size arithmetic, Python ints that do not fit a dtype, NaN through relu, Ctrl-C."""

import os
import signal
import subprocess

import numpy as np
import pytest

import kiln as ms
from kiln import ops


def f32(values):
    return ms.Tensor(np.asarray(values, np.float32))


# ---- element and byte counts never wrap: an error instead of a tiny buffer ----
@pytest.mark.parametrize(
    "make",
    [
        lambda: ops.zeros((2**62,)),
        lambda: ops.zeros((2**40, 2**40)),
        lambda: ops.ones((2**31, 2**31, 4)),
        lambda: ops.arange(0, 2**62),
        lambda: ops.tile(f32([1.0, 2.0]), (2**61,)),
        lambda: ops.broadcast_to(f32([1.0]), (2**31, 2**31, 4)).sum(),
        lambda: ops.broadcast_to(f32([1.0]), (2**62, 4)),
        lambda: ops.reshape(f32([1.0] * 4), (2**62, 4)),
        lambda: ops.full((2**33, 2**33), 1.0),
    ],
)
def test_oversized_shapes_raise_value_error_naming_the_op(make):
    with pytest.raises(ValueError, match=r"^\w+: a tensor of shape \(.*\) has too many"):
        make()


def test_zero_size_tensor_with_huge_other_dims_is_refused_not_wrapped():
    with pytest.raises(ValueError, match="too many"):
        ops.zeros((0, 2**62, 2**62))


def test_allocation_beyond_the_machine_is_a_memory_error():
    with pytest.raises(MemoryError, match=r"cannot allocate .* GiB"):
        ops.zeros((2**50,), ms.int8)


def test_oversized_shapes_are_refused_at_compile_time_too():
    @ms.jit
    def f(x):
        return ops.broadcast_to(x, (2**40, 2**40))

    with pytest.raises(ValueError, match="broadcast_to: a tensor of shape"):
        f(f32([1.0]))


def test_large_but_valid_shapes_still_work():
    x = ops.broadcast_to(f32([2.0]), (2**20, 2**10))  # a view: no bytes allocated
    assert x.shape == (2**20, 2**10)
    assert float(x[5, 7]) == 2.0


# ---- Python ints that do not fit the tensor's dtype: OverflowError, as NumPy 2 ----
@pytest.mark.parametrize(
    "compute",
    [
        lambda: ms.Tensor(np.array([1], np.int32)) + 2**40,
        lambda: ms.Tensor(np.array([1], np.int8)) * 300,
        lambda: 300 - ms.Tensor(np.array([1], np.int8)),
        lambda: ms.Tensor(np.array([1], np.uint8)) + (-1),
        lambda: ms.Tensor(300, ms.int8),
        lambda: ms.Tensor([1, [2, 300]][:1] + [300], ms.int8),
        lambda: ops.full((2,), 300, dtype=ms.int8),
        lambda: ops.full((2,), 2**63),
        lambda: ms.Tensor(np.array([1], np.uint16)) + 65536,
        lambda: ms.Tensor(np.array([1], np.uint32)) - 2**32,
        lambda: ms.Tensor(np.array([1], np.uint64)) + (-1),
        lambda: ms.Tensor(np.array([1], np.uint64)) + 2**64,
        lambda: ms.Tensor(-1, ms.uint32),
        lambda: ops.full((2,), 2**64, dtype=ms.uint64),
    ],
)
def test_python_int_out_of_dtype_range_raises_overflow(compute):
    with pytest.raises(OverflowError, match="out of bounds"):
        compute()


def test_in_range_python_ints_keep_the_tensor_dtype():
    x = ms.Tensor(np.array([1], np.int32))
    y = x + (-(2**31) + 1)
    assert y.dtype == ms.int32 and int(y[0]) == -(2**31) + 2
    assert (ms.Tensor(np.array([1], np.uint8)) + 254).asnumpy().tolist() == [255]
    assert (ms.Tensor(np.array([1], np.uint64)) + (2**64 - 2)).asnumpy().tolist() == [2**64 - 1]
    assert (ms.Tensor(np.array([1.0], np.float32)) + 2**40).dtype == ms.float32


def test_setitem_with_out_of_range_int_raises_and_leaves_tensor_unchanged():
    t = ms.Tensor(np.zeros(2, np.int8))
    with pytest.raises(OverflowError, match="setitem: Python integer 300 out of bounds for int8"):
        t[0] = 300
    assert t.asnumpy().tolist() == [0, 0]


def test_python_int_overflow_in_graph_mode_is_a_compile_time_overflow_error():
    @ms.jit
    def f(x):
        return x + 2**40

    with pytest.raises(OverflowError, match="add: Python integer 1099511627776"):
        f(ms.Tensor(np.array([1], np.int32)))


@pytest.mark.parametrize(
    "compute",
    [
        lambda: ms.Tensor(np.array([1], np.int64)) + 2**63,
        lambda: ops.tile(f32([1.0]), (2**63,)),
        lambda: ops.sum(f32([1.0]), 2**64),
    ],
)
def test_ints_past_int64_raise_overflow_not_bad_cast(compute):
    with pytest.raises(OverflowError, match="out of bounds"):
        compute()


# ---- relu lets NaN through, in both modes and in the fused matmul epilogue ----
def test_relu_propagates_nan_like_numpy_maximum():
    x = f32([np.nan, -1.0, 2.0, -0.0])
    expected = np.array([np.nan, 0.0, 2.0, 0.0], np.float32)
    np.testing.assert_array_equal(ops.relu(x).asnumpy(), expected)
    np.testing.assert_array_equal(ms.jit(lambda v: ops.relu(v))(x).asnumpy(), expected)


def test_relu_after_dense_propagates_nan_in_graph_mode():
    w = f32(np.ones((3, 2)))
    b = f32([0.0, -10.0])

    def f(x):
        return ops.relu(ops.matmul(x, w) + b)

    x = f32([[np.nan, 1.0, 1.0], [1.0, 1.0, 1.0]])
    eager = f(x).asnumpy()
    graph = ms.jit(f)(x).asnumpy()
    np.testing.assert_array_equal(eager, [[np.nan, np.nan], [3.0, 0.0]])
    np.testing.assert_array_equal(graph, eager)


# ---- Ctrl-C stops a graph loop that would never end ----
def test_ctrl_c_interrupts_a_running_graph_while_loop():
    @ms.jit
    def forever(x):
        while x > 0:
            x = x + 1
        return x

    # Python's own Ctrl-C handler, even where the test runner was started with SIGINT ignored
    # (a background job of a non-interactive shell is): then Python installs none, and the
    # signal would never arrive.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    # Another process sends the signal, as a terminal would: the loop holds the GIL, so a
    # Python thread of this process could not.
    killer = subprocess.Popen(["sh", "-c", f"sleep 0.5; kill -INT {os.getpid()}"])
    try:
        with pytest.raises(KeyboardInterrupt):
            forever(ms.Tensor(1.0))
    finally:
        killer.wait()
        signal.signal(signal.SIGINT, previous)
    # The engine is still usable afterwards.
    assert float(ms.jit(lambda v: v * 2)(ms.Tensor(3.0))) == 6.0


# ---- a graph that calls itself is refused, never a stack overflow ----
SELF_CALLING_IR = """
func @main(%0: f32[]) -> (f32[]) {
  %1 = call @main(%0) : f32[]
  return %1
}
"""


def test_self_calling_ir_is_refused_by_the_verifier():
    from kiln import _C

    with pytest.raises(ValueError, match="@main calls itself"):
        _C.ir_run(SELF_CALLING_IR, [ms.Tensor(1.0)])
    assert float(_C.ir_run(SELF_CALLING_IR.replace("call @main(%0)", "neg(%0)"),
                           [ms.Tensor(1.0)])[0]) == -1.0


@pytest.mark.parametrize("shape", [(2.0,), (2, 3.5), (True, 2)])
def test_tensor_with_init_refuses_float_or_bool_shape(shape):
    with pytest.raises(TypeError, match="Tensor: shape must be"):
        ms.Tensor(shape=shape, dtype=ms.float32, init="zeros")


# ---- a kernel's error in a compiled graph names the user's line ----
def test_kernel_error_in_graph_mode_names_the_source_line():
    @ms.jit
    def loss(logits, labels):
        scaled = logits * 2
        return ops.cross_entropy(scaled, labels)  # the line the error must name

    with open(__file__) as source:
        line = next(i for i, text in enumerate(source, 1) if "error must name" in text)
    where = rf"\(at .*test_sizes_and_overflow.py:{line}\)"
    with pytest.raises(IndexError, match=rf"target class 7 .*{where}"):
        loss(ms.Tensor(np.ones((2, 3), np.float32)), ms.Tensor(np.array([0, 7], np.int32)))


@pytest.mark.parametrize("method", ["any", "all"])
def test_tensor_any_all_name_themselves_for_a_float_axis(method):
    t = ms.Tensor(np.array([[True, False]]))
    with pytest.raises(TypeError, match=rf"Tensor.{method}: axis must be"):
        getattr(t, method)(1.0)
    assert getattr(t, method)(1).asnumpy().tolist() == [method == "any"]
