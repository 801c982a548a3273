"""kiln.load on MindIR files MindSpore 2.10 wrote (tests/fixtures/mindspore, made by
tools/make_mindspore_fixtures.py): the seed network's layers, LeNet and a mix of elementwise,
shape and softmax primitives give MindSpore's outputs, from Python and from kiln-run."""
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln as ms
from kiln import nn

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mindspore"
BIN = Path(ms.__file__).resolve().parent / "bin"
if not BIN.is_dir():
    BIN = Path(ms._C.__file__).resolve().parent / "bin"


@pytest.mark.parametrize("name", ["mlp", "lenet", "ops"])
def test_a_mindspore_export_runs_with_mindspores_results(name):
    io = np.load(FIXTURES / f"{name}_io.npz")
    graph = ms.load(str(FIXTURES / f"{name}.mindir"))
    assert [n for n, _, _ in graph.inputs] == ["x"]
    cell = nn.GraphCell(graph)
    np.testing.assert_allclose(cell(ms.Tensor(io["x"])).asnumpy(), io["y"], rtol=1e-5, atol=1e-6)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        np.testing.assert_allclose(cell(ms.Tensor(io["x"])).asnumpy(), io["y"], rtol=1e-5,
                                   atol=1e-6)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def test_mindspore_parameter_names_are_the_cells_own():
    names = sorted(nn.GraphCell(ms.load(str(FIXTURES / "lenet.mindir"))).parameters_dict())
    assert names == sorted(f"{layer}.{p}" for layer in ("conv1", "conv2", "fc1", "fc2", "fc3")
                           for p in ("weight", "bias"))


def test_kiln_run_runs_a_mindspore_export(tmp_path):
    io = np.load(FIXTURES / "lenet_io.npz")
    np.save(tmp_path / "x.npy", io["x"])
    done = subprocess.run([str(BIN / "kiln-run"), str(FIXTURES / "lenet.mindir"), "--input",
                           str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), io["y"], rtol=1e-5, atol=1e-6)
