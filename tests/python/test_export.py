"""kiln.export / kiln.load / nn.GraphCell, and the Python-free runtime (kiln-run, the C++ example)
on the same files: the seed network, LeNet and the encoder block give identical outputs from
Python, from kiln-run and from the example; dynamic batch, control flow, low-precision weights,
damaged and refused files."""
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln as ms
from kiln import nn, ops

BIN = Path(ms.__file__).resolve().parent / "bin"
if not BIN.is_dir():  # a development build: build/<dir>/python/kiln/bin (the symlinked package)
    BIN = Path(ms._C.__file__).resolve().parent / "bin"


class SeedNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.body = nn.SequentialCell(nn.Dense(28 * 28, 512), nn.ReLU(), nn.Dense(512, 512),
                                      nn.ReLU(), nn.Dense(512, 10))

    def construct(self, x):
        return self.body(self.flatten(x))


class LeNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="same", has_bias=True)
        self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=True)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(400, 120)
        self.fc2 = nn.Dense(120, 84)
        self.fc3 = nn.Dense(84, 10)

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        x = self.relu(self.fc1(self.flatten(x)))
        return self.fc3(self.relu(self.fc2(x)))


class EncoderBlock(nn.Cell):
    def __init__(self, d=32, heads=4, ff=64):
        super().__init__()
        self.ln1 = nn.LayerNorm((d,), begin_norm_axis=-1, begin_params_axis=-1)
        self.qkv = nn.Dense(d, 3 * d)
        self.proj = nn.Dense(d, d)
        self.ln2 = nn.LayerNorm((d,), begin_norm_axis=-1, begin_params_axis=-1)
        self.fc1 = nn.Dense(d, ff)
        self.fc2 = nn.Dense(ff, d)
        self.heads, self.head_dim = heads, d // heads
        self.scale = 1.0 / math.sqrt(d // heads)

    def construct(self, x):
        b, s, d = x.shape
        q, k, v = ops.split(self.qkv(self.ln1(x)), d, axis=-1)
        split = (b, s, self.heads, self.head_dim)
        q = ops.transpose(ops.reshape(q, split), (0, 2, 1, 3))
        k = ops.transpose(ops.reshape(k, split), (0, 2, 3, 1))
        v = ops.transpose(ops.reshape(v, split), (0, 2, 1, 3))
        p = ops.softmax(ops.matmul(q, k) * self.scale, -1)
        o = ops.reshape(ops.transpose(ops.matmul(p, v), (0, 2, 1, 3)), (b, s, d))
        x = x + self.proj(o)
        return x + self.fc2(ops.gelu(self.fc1(self.ln2(x)), approximate="none"))


def ramp(shape, dtype=np.float32):
    """The inputs the C++ example feeds: element i = (i % 17) / 17."""
    return ((np.arange(math.prod(shape)) % 17) / 17.0).astype(dtype).reshape(shape)


NETWORKS = [
    ("seed", SeedNet, (4, 1, 28, 28)),
    ("lenet", LeNet, (2, 1, 28, 28)),
    ("encoder", EncoderBlock, (2, 8, 32)),
]


@pytest.fixture(autouse=True)
def _pynative():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    yield
    ms.set_context(mode=ms.PYNATIVE_MODE)


def run_tool(*args):
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("name,make,shape", NETWORKS)
def test_python_kiln_run_and_the_cpp_example_give_identical_outputs(tmp_path, name, make, shape):
    ms.set_seed(3)
    net = make()
    x = ms.Tensor(ramp(shape))
    eager = net(x).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE)  # the loaded model runs the same optimized graph
    want = net(x).asnumpy()
    ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(want, eager, rtol=1e-5, atol=1e-6)
    path = tmp_path / f"{name}.mindir"
    ms.export(net, x, file_name=str(tmp_path / name), file_format="MINDIR")
    assert path.is_file()
    got = nn.GraphCell(ms.load(str(path)))(x).asnumpy()
    np.testing.assert_array_equal(got, want)

    np.save(tmp_path / "x.npy", ramp(shape))
    rc, out, err = run_tool(BIN / "kiln-run", path, "--input", tmp_path / "x.npy",
                            "--output", tmp_path / "y.npy", "--bench", "2")
    assert rc == 0, err
    assert "bench: 2 runs" in out
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want)

    rc, out, err = run_tool(BIN / "kiln-example", path, "3")  # three threads at once
    assert rc == 0, err
    line = out.splitlines()[0].split()
    assert line[:3] == ["output", "0", "float32"]
    assert line[3] == "[" + ",".join(map(str, want.shape)) + "]"
    assert float(line[5]) == pytest.approx(float(want.astype(np.float64).sum()), rel=1e-6,
                                           abs=1e-6)


def test_graph_mode_network_exports_the_same_graph(tmp_path):
    ms.set_seed(4)
    net = LeNet()
    x = ms.Tensor(ramp((3, 1, 28, 28)))
    ms.set_context(mode=ms.GRAPH_MODE)
    want = net(x).asnumpy()
    ms.export(net, x, file_name=str(tmp_path / "g.mindir"))
    got = nn.GraphCell(ms.load(str(tmp_path / "g.mindir")))(x).asnumpy()
    np.testing.assert_array_equal(got, want)


def test_a_placeholder_input_exports_a_dynamic_batch(tmp_path):
    net = SeedNet()
    ms.export(net, ms.Tensor(shape=[None, 1, 28, 28], dtype=ms.float32),
              file_name=str(tmp_path / "dyn"))
    graph = ms.load(str(tmp_path / "dyn.mindir"))
    assert graph.inputs == [("arg0", ms.float32, (-1, 1, 28, 28))]
    cell = nn.GraphCell(graph)
    for batch in (1, 6):
        x = ms.Tensor(ramp((batch, 1, 28, 28)))
        np.testing.assert_allclose(cell(x).asnumpy(), net(x).asnumpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"input 0 \('arg0'\) expects f32\[\?,1,28,28\]"):
        cell(ms.Tensor(ramp((2, 1, 28, 27))))
    rc, _, err = run_tool(BIN / "kiln-run", tmp_path / "dyn.mindir")
    assert rc == 1 and "takes 1 inputs" in err


class Loop(nn.Cell):
    """Control flow on tensor values: a while loop with an if inside, several outputs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 4)

    def construct(self, x, n):
        acc = ops.zeros_like(x)
        i = 0
        while i < n:
            if acc.sum() > 2.0:
                acc = acc - self.fc(x) * 0.5
            else:
                acc = acc + ops.relu(self.fc(x))
            i += 1
        return acc, {"steps": n, "scale": 2}


@pytest.mark.parametrize("name,make,shape", NETWORKS[:2])
def test_networks_mindspore_can_run_are_written_in_its_vocabulary(tmp_path, name, make, shape):
    ms.export(make(), ms.Tensor(ramp(shape)), file_name=str(tmp_path / name))
    data = (tmp_path / f"{name}.mindir").read_bytes()
    assert b"REF::MatMul" in data and b"REF::ReLU" in data  # MindSpore's primitives


def test_control_flow_and_nested_outputs_survive_the_round_trip(tmp_path):
    net = Loop()
    x, n = ms.Tensor(ramp((2, 4))), ms.Tensor(5)
    ms.set_context(mode=ms.GRAPH_MODE)
    want_acc, want_tree = net(x, n)
    ms.export(net, x, n, file_name=str(tmp_path / "loop"))
    assert b"REF::" not in (tmp_path / "loop.mindir").read_bytes()  # kiln's own vocabulary
    got_acc, got_tree = nn.GraphCell(ms.load(str(tmp_path / "loop.mindir")))(x, n)
    np.testing.assert_array_equal(got_acc.asnumpy(), want_acc.asnumpy())
    assert got_tree["scale"] == 2 and int(got_tree["steps"]) == 5


class LowPrecision(nn.Cell):
    def __init__(self, dtype):
        super().__init__()
        self.w = ms.Parameter(ms.Tensor(ramp((8, 3))).astype(dtype), name="w")
        self.b = ms.Parameter(ms.Tensor(ramp((3,))).astype(dtype), name="b")

    def construct(self, x):
        return ops.matmul(x, self.w) + self.b


@pytest.mark.parametrize("dtype", [ms.float16, ms.bfloat16])
def test_low_precision_weights_export_as_such(tmp_path, dtype):
    net = LowPrecision(dtype)
    x = ms.Tensor(ramp((2, 8))).astype(dtype)
    ms.set_context(mode=ms.GRAPH_MODE)
    want = net(x)
    ms.export(net, x, file_name=str(tmp_path / "half"))
    cell = nn.GraphCell(ms.load(str(tmp_path / "half.mindir")))
    assert {p.dtype for p in cell.get_parameters()} == {dtype}
    got = cell(x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.astype(ms.float32).asnumpy(),
                                  want.astype(ms.float32).asnumpy())


def test_params_init_replaces_weights_and_is_checked(tmp_path):
    net = nn.Dense(3, 2)
    x = ms.Tensor(ramp((1, 3)))
    ms.export(net, x, file_name=str(tmp_path / "d"))
    graph = ms.load(str(tmp_path / "d.mindir"))
    names = sorted(nn.GraphCell(graph).parameters_dict())
    assert names == ["bias", "weight"]
    zero = {"weight": ms.Tensor(np.zeros((2, 3), np.float32))}
    out = nn.GraphCell(graph, params_init=zero)(x).asnumpy()
    np.testing.assert_array_equal(out, net.bias.asnumpy()[None])
    with pytest.raises(ValueError, match="no weight named 'nope'"):
        nn.GraphCell(graph, params_init={"nope": zero["weight"]})


def test_a_function_exports_too_and_file_names_get_the_suffix(tmp_path):
    def f(a, b):
        return ops.matmul(a, b) + 1.0

    a, b = ms.Tensor(ramp((2, 3))), ms.Tensor(ramp((3, 4)))
    ms.export(f, a, b, file_name=str(tmp_path / "f"))
    out = nn.GraphCell(ms.load(str(tmp_path / "f.mindir")))(a, b)
    np.testing.assert_allclose(out.asnumpy(), ramp((2, 3)) @ ramp((3, 4)) + 1.0, rtol=1e-6)


def test_kiln_run_takes_and_writes_npz_files(tmp_path):
    def f(a, b):
        return ops.matmul(a, b), a.sum()

    a, b = ramp((2, 3)), ramp((3, 4)) * 2
    ms.export(f, ms.Tensor(a), ms.Tensor(b), file_name=str(tmp_path / "two"))
    np.savez(tmp_path / "named.npz", arg1=b, arg0=a)  # matched by name, not by order
    np.savez_compressed(tmp_path / "ordered.npz", a, b)  # arr_0, arr_1: taken in order
    for inputs in ("named.npz", "ordered.npz"):
        rc, _, err = run_tool(BIN / "kiln-run", tmp_path / "two.mindir", "--input",
                              tmp_path / inputs, "--output", tmp_path / "out.npz")
        assert rc == 0, err
        with np.load(tmp_path / "out.npz") as out:
            assert sorted(out.files) == ["output0", "output1"]
            np.testing.assert_allclose(out["output0"], a @ b, rtol=1e-6)
            np.testing.assert_allclose(out["output1"], a.sum(), rtol=1e-6)
    np.savez(tmp_path / "one.npz", a)
    rc, _, err = run_tool(BIN / "kiln-run", tmp_path / "two.mindir", "--input",
                          tmp_path / "one.npz")
    assert rc == 1 and "takes 2 inputs" in err
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 not really a zip")
    rc, _, err = run_tool(BIN / "kiln-run", tmp_path / "two.mindir", "--input",
                          tmp_path / "bad.npz")
    assert rc == 1 and "not a readable .npz" in err


def test_export_restores_training_mode_and_refuses_what_it_cannot_save(tmp_path):
    net = nn.SequentialCell(nn.Dense(4, 4), nn.Dropout(p=0.5))
    net.set_train(True)
    x = ms.Tensor(ramp((2, 4)))
    ms.export(net, x, file_name=str(tmp_path / "drop"))
    assert net.training
    out = nn.GraphCell(ms.load(str(tmp_path / "drop.mindir")))(x)  # inference: no dropout
    net.set_train(False)
    np.testing.assert_array_equal(out.asnumpy(), net(x).asnumpy())

    class ReturnsAnObject(nn.Cell):
        def construct(self, x):
            return x, nn.ReLU

    with pytest.raises(TypeError, match="neither a tensor nor a constant"):
        ms.export(ReturnsAnObject(), x, file_name=str(tmp_path / "bad"))
    assert not (tmp_path / "bad.mindir").exists()
    with pytest.raises(ValueError, match="'AIR' is for Ascend"):
        ms.export(net, x, file_name=str(tmp_path / "n"), file_format="AIR")
    with pytest.raises(ValueError, match="file_format"):
        ms.export(net, x, file_name=str(tmp_path / "n"), file_format="PB")
    with pytest.raises(TypeError, match="input 0 must be a Tensor"):
        ms.export(net, np.ones((2, 4), np.float32), file_name=str(tmp_path / "n"))


def test_load_refuses_missing_damaged_and_foreign_files(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        ms.load(str(tmp_path / "none.mindir"))
    with pytest.raises(ValueError, match=r"\.mindir"):
        ms.load(str(tmp_path / "model.onnx"))
    net = nn.Dense(3, 2)
    ms.export(net, ms.Tensor(ramp((1, 3))), file_name=str(tmp_path / "ok"))
    data = (tmp_path / "ok.mindir").read_bytes()
    (tmp_path / "cut.mindir").write_bytes(data[: len(data) // 2])
    with pytest.raises(RuntimeError, match="cut.mindir"):
        ms.load(str(tmp_path / "cut.mindir"))
    (tmp_path / "junk.mindir").write_bytes(b"\x08\x96\x01" * 10)
    with pytest.raises(RuntimeError, match="junk.mindir"):
        ms.load(str(tmp_path / "junk.mindir"))
    with pytest.raises(TypeError):
        nn.GraphCell(net)


def test_kiln_run_reports_bad_inputs_in_one_line(tmp_path):
    net = nn.Dense(3, 2)
    ms.export(net, ms.Tensor(ramp((1, 3))), file_name=str(tmp_path / "m"))
    model = tmp_path / "m.mindir"
    np.save(tmp_path / "wrong.npy", np.ones((1, 4), np.float32))
    rc, _, err = run_tool(BIN / "kiln-run", model, "--input", tmp_path / "wrong.npy")
    assert rc == 1 and "expects f32[1,3], got f32[1,4]" in err
    np.save(tmp_path / "f.npy", np.asfortranarray(np.ones((2, 3), np.float32)))
    rc, _, err = run_tool(BIN / "kiln-run", model, "--input", tmp_path / "f.npy")
    assert rc == 1 and "Fortran" in err
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY\x01\x00\xff\xff{'descr'")
    rc, _, err = run_tool(BIN / "kiln-run", model, "--input", tmp_path / "bad.npy")
    assert rc == 1 and "truncated" in err
    rc, out, _ = run_tool(BIN / "kiln-run", model, "--input", tmp_path / "nope.npy")
    assert rc == 1
    rc, _, err = run_tool(BIN / "kiln-run", model, "--bench", "x")
    assert rc == 1 and "--bench takes a count" in err


def test_the_runtime_programs_do_not_link_libpython():
    lib = next((BIN.parent / "lib").glob("libkiln.so*"), None) or next(
        BIN.parent.parent.parent.glob("libkiln.so*"))
    for binary in (BIN / "kiln-run", BIN / "kiln-example", lib):
        rc, out, err = run_tool("readelf", "-d", binary)
        assert rc == 0, err
        needed = [line for line in out.splitlines() if "(NEEDED)" in line]
        assert needed and not [line for line in needed if "libpython" in line], needed
    assert os.path.getsize(BIN / "kiln-run") > 0


class _UsesLoaded(nn.Cell):
    def __init__(self, loaded):
        super().__init__()
        self.loaded = loaded
        self.head = nn.Dense(3, 2)

    def construct(self, x):
        return self.head(self.loaded(x) * 2.0)


def test_a_graph_cell_inside_a_compiled_function_joins_its_graph(tmp_path):
    net = nn.SequentialCell(nn.Dense(4, 3), nn.ReLU())
    x = ms.Tensor(np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
    ms.export(net, x, file_name=str(tmp_path / "inner"), file_format="MINDIR")
    loaded = nn.GraphCell(ms.load(str(tmp_path / "inner.mindir")))
    outer = _UsesLoaded(loaded)
    eager = outer(x).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        graph = outer(x).asnumpy()
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(graph, eager, rtol=1e-6)
    jitted = ms.jit(lambda t: loaded(t) + 1.0)(x).asnumpy()
    np.testing.assert_allclose(jitted, net(x).asnumpy() + 1.0, rtol=1e-6)
    with pytest.raises(TypeError, match="GraphCell: input"):
        ms.jit(lambda t: loaded(t))(ms.Tensor(np.ones((2, 5), np.float32)))
