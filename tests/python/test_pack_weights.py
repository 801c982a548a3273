"""Weight packing (the pack_weights pass and the derived cache on a weight's storage).

A compiled graph reads a weight it never writes from a copy packed into its kernel's fastest
layout, made on the second call and reused while the weight's bytes stay the same. These tests
check that packed results equal PyNative's, that every way of changing a weight is seen (in-place
ops, set_data, an optimizer step, a loaded checkpoint), and that memory a NumPy array may write is
never packed.

Which copies are made depends on the CPU: with few rows a weight is copied row-major on every
machine, with more rows into oneDNN's blocked layout (AVX-512) or kiln's 16-column panels (AVX2),
and not at all on CPUs with neither, so the expected counts come from `expected_packs`, and the
tests of stale copies use the few-rows path every machine has as well as the many-rows one.
"""
import pathlib
import sys

import numpy as np
import pytest

import kiln as ms
from kiln import _C, Parameter, Tensor, nn, ops

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
from helpers import jit_train_step  # noqa: E402

import five_ways  # noqa: E402

RNG = np.random.default_rng(5)
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def _reset():
    yield
    ms.reset_context()


def stats():
    return _C.packed_weight_stats()


def delta(before):
    now = stats()
    return {k: now[k] - before[k] for k in now}


# A dense layer whose weight every machine packs at few rows (row-major copy: >= 64 columns).
IN, OUT = 32, 80


def expected_packs(rows, k, n):
    """Packed copies a (rows, k) @ (k, n) product over a dense layer's weight makes."""
    if n <= 16:  # kiln's few-column kernel reads the weight as given (narrow_gemm.h)
        return 0
    if rows <= 16:  # sgemm reads a row-major copy, worth it from 64 columns
        return int(n >= 64)
    return int(_C.onednn_blocks_matmul_weights(rows, k, n) or _C.panel_gemm_available())


def compiled_and_eager(net, x, calls=3):
    """Graph-mode outputs of `calls` calls, then the PyNative output."""
    ms.set_context(mode=ms.GRAPH_MODE)
    outs = [net(x).asnumpy().copy() for _ in range(calls)]
    ms.set_context(mode=ms.PYNATIVE_MODE)
    return outs, net(x).asnumpy()


@pytest.mark.parametrize("batch", [1, 3, 16, 17, 64])
def test_seed_network_packs_its_weights_and_agrees_with_pynative(batch):
    ms.set_seed(0)
    net = five_ways.Network()
    x = Tensor(RNG.standard_normal((batch, 1, 28, 28)).astype(np.float32))
    before = stats()
    outs, eager = compiled_and_eager(net, x)
    d = delta(before)
    # Packed on the 2nd call, reused on the 3rd; the 10-column output layer keeps its weight as
    # given (kiln's few-column kernel reads the transposed view).
    packed = sum(expected_packs(batch, k, n) for k, n in [(784, 512), (512, 512), (512, 10)])
    assert d["packs"] == packed and d["hits"] == packed
    for out in outs:
        np.testing.assert_allclose(out, eager, **TOL)
    assert "pack_weight=True" in net._kiln_graph_fn.graph_text()


def test_batched_input_folds_into_rows_and_is_packed():
    dense = nn.Dense(24, 40, activation="relu")
    x = Tensor(RNG.standard_normal((5, 7, 24)).astype(np.float32))  # 35 rows: the oneDNN path
    before = stats()
    outs, eager = compiled_and_eager(dense, x)
    assert delta(before)["packs"] == expected_packs(35, 24, 40)
    for out in outs:
        np.testing.assert_allclose(out, eager, **TOL)


class DenseWithSkip(nn.Cell):
    """act(x @ w.T + b) + x: the residual add is fused into the product's epilogue."""

    def __init__(self, width, activation):
        super().__init__()
        self.dense = nn.Dense(width, width, activation=activation)

    def construct(self, x):
        return self.dense(x) + x


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "sigmoid"])
@pytest.mark.parametrize("rows", [17, 40])
def test_packed_products_apply_every_epilogue(activation, rows):
    net = DenseWithSkip(24, activation)
    x = Tensor(RNG.standard_normal((rows, 24)).astype(np.float32))
    before = stats()
    outs, eager = compiled_and_eager(net, x)
    assert delta(before)["packs"] == expected_packs(rows, 24, 24)
    for out in outs:
        np.testing.assert_allclose(out, eager, **TOL)


def run_twice_then_change(change, batch=1):
    """Runs a compiled dense until packed, applies `change`, and checks the next call sees it."""
    dense = nn.Dense(IN, OUT)
    x = Tensor(RNG.standard_normal((batch, IN)).astype(np.float32))
    ms.set_context(mode=ms.GRAPH_MODE)
    before = stats()
    for _ in range(3):
        dense(x)
    assert delta(before)["packs"] == expected_packs(batch, IN, OUT)
    change(dense)
    got = dense(x).asnumpy().copy()
    again = dense(x).asnumpy().copy()  # the stale copy must not come back either
    ms.set_context(mode=ms.PYNATIVE_MODE)
    want = dense(x).asnumpy()
    np.testing.assert_allclose(got, want, **TOL)
    np.testing.assert_allclose(again, want, **TOL)
    return dense


@pytest.mark.parametrize("batch", [1, 64])
def test_set_data_between_calls_is_seen(batch):
    new = RNG.standard_normal((OUT, IN)).astype(np.float32)
    run_twice_then_change(lambda d: d.weight.set_data(Tensor(new)), batch)


@pytest.mark.parametrize("batch", [1, 64])
def test_in_place_op_on_a_view_of_the_weight_is_seen(batch):
    def change(dense):
        row = dense.weight[3]  # a view: the write reaches the weight through another TensorImpl
        ops.assign(row, ops.ones_like(row))
    dense = run_twice_then_change(change, batch)
    np.testing.assert_array_equal(dense.weight.asnumpy()[3], 1.0)


@pytest.mark.parametrize("batch", [1, 64])
def test_optimizer_step_between_calls_is_seen(batch):
    def change(dense):
        opt = nn.Momentum(dense.trainable_params(), learning_rate=0.5, momentum=0.9)
        grads = tuple(ops.ones_like(p) for p in dense.trainable_params())
        opt(grads)
    run_twice_then_change(change, batch)


@pytest.mark.parametrize("batch", [1, 64])
def test_loaded_checkpoint_between_calls_is_seen(tmp_path, batch):
    other = nn.Dense(IN, OUT)
    path = str(tmp_path / "dense.ckpt")
    ms.save_checkpoint(other, path)

    def change(dense):
        ms.load_param_into_net(dense, ms.load_checkpoint(path))
    dense = run_twice_then_change(change, batch)
    np.testing.assert_array_equal(dense.weight.asnumpy(), other.weight.asnumpy())


@pytest.mark.parametrize("shared", [True, False])
def test_memory_numpy_can_write_is_never_packed(shared):
    array = RNG.standard_normal((OUT, IN)).astype(np.float32)
    # Tensor.from_numpy(array) shares `array`, so writes to it change the weight; Tensor(array)
    # copies it into memory kiln owns.
    w = Parameter(Tensor.from_numpy(array) if shared else Tensor(array))
    x = Tensor(RNG.standard_normal((1, IN)).astype(np.float32))
    f = ms.jit(lambda x: ops.dense(x, w))
    before = stats()
    for _ in range(3):
        f(x)
    assert delta(before)["packs"] == (0 if shared else 1)
    if shared:
        array[:] = 2.0  # invisible to kiln's write counters
        np.testing.assert_allclose(f(x).asnumpy(), x.asnumpy() @ array.T, **TOL)


def test_asnumpy_makes_a_packed_weight_unpackable():
    dense = nn.Dense(IN, OUT)
    x = Tensor(RNG.standard_normal((1, IN)).astype(np.float32))
    ms.set_context(mode=ms.GRAPH_MODE)
    for _ in range(3):
        dense(x)
    view = dense.weight.asnumpy()  # writable: kiln can no longer see writes to this memory
    view[:] = 0.5
    np.testing.assert_allclose(dense(x).asnumpy(), x.asnumpy() @ view.T + dense.bias.asnumpy(),
                               **TOL)


def test_printing_and_saving_keep_weights_packable(tmp_path):
    dense = nn.Dense(IN, OUT)
    repr(dense.weight), str(dense.weight), dense.weight.tolist()
    ms.save_checkpoint(dense, str(tmp_path / "d.ckpt"))
    x = Tensor(RNG.standard_normal((1, IN)).astype(np.float32))
    before = stats()
    ms.set_context(mode=ms.GRAPH_MODE)
    for _ in range(3):
        dense(x)
    assert delta(before)["packs"] == 1


def test_a_fresh_weight_each_call_is_never_packed():
    f = ms.jit(lambda x, w: ops.dense(x, w))
    x = Tensor(RNG.standard_normal((1, IN)).astype(np.float32))
    before = stats()
    for _ in range(4):
        w = Tensor(Tensor(RNG.standard_normal((OUT, IN)).astype(np.float32))._clone())
        np.testing.assert_allclose(f(x, w).asnumpy(), x.asnumpy() @ w.asnumpy().T, **TOL)
    assert delta(before)["packs"] == 0


def test_training_step_does_not_pack_the_weights_it_updates():
    ms.set_seed(0)
    net = five_ways.Network()
    loss_fn = nn.CrossEntropyLoss()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    step = jit_train_step(net, opt, loss_fn)
    x = Tensor(RNG.standard_normal((8, 1, 28, 28)).astype(np.float32))
    y = Tensor(RNG.integers(0, 10, 8).astype(np.int32))
    for _ in range(3):
        step(x, y)
    assert "pack_weight=True" not in step.graph_text()


def test_jit_level_o0_does_not_pack():
    dense = nn.Dense(IN, OUT)
    f = ms.jit(lambda x: dense(x), jit_level="O0")
    x = Tensor(RNG.standard_normal((1, IN)).astype(np.float32))
    before = stats()
    for _ in range(3):
        f(x)
    assert delta(before)["packs"] == 0
    assert "pack_weight=True" not in f.graph_text()


def test_a_dropped_asnumpy_view_lets_packing_resume_and_its_writes_are_seen():
    dense = nn.Dense(IN, OUT)
    x = Tensor(RNG.standard_normal((1, IN)).astype(np.float32))
    ms.set_context(mode=ms.GRAPH_MODE)
    for _ in range(3):
        dense(x)
    view = dense.weight.asnumpy()
    view[:] = 0.25  # written while packing is off ...
    del view  # ... and the array is gone: the write counts, packing may resume
    before = stats()
    outs = [dense(x).asnumpy().copy() for _ in range(3)]
    assert delta(before)["packs"] == 1
    want = x.asnumpy() @ np.full((IN, OUT), 0.25, np.float32) + dense.bias.asnumpy()
    for out in outs:
        np.testing.assert_allclose(out, want, **TOL)
