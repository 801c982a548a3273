"""kiln.export(file_format="ONNX"): the seed network, LeNet and the encoder block run in
onnxruntime with kiln's outputs; a free batch dimension; clear errors for what ONNX cannot say."""
import numpy as np
import onnxruntime as ort
import pytest
from test_export import NETWORKS, Loop, ramp

import kiln as ms
from kiln import nn, ops


@pytest.fixture(autouse=True)
def _modes():
    yield
    ms.set_context(mode=ms.PYNATIVE_MODE)


def run_onnx(path, *inputs):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs)))


@pytest.mark.parametrize("name,make,shape", NETWORKS)
def test_onnxruntime_gives_kilns_outputs(tmp_path, name, make, shape):
    ms.set_seed(5)
    net = make()
    x = ramp(shape)
    ms.set_context(mode=ms.GRAPH_MODE)
    want = net(ms.Tensor(x)).asnumpy()
    ms.export(net, ms.Tensor(x), file_name=str(tmp_path / name), file_format="ONNX")
    (got,) = run_onnx(tmp_path / f"{name}.onnx", x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_placeholder_gives_a_free_batch_dimension(tmp_path):
    net = NETWORKS[0][1]()
    ms.export(net, ms.Tensor(shape=[None, 1, 28, 28], dtype=ms.float32),
              file_name=str(tmp_path / "dyn"), file_format="ONNX")
    session = ort.InferenceSession(str(tmp_path / "dyn.onnx"), providers=["CPUExecutionProvider"])
    assert isinstance(session.get_inputs()[0].shape[0], str)  # a named size
    for batch in (1, 5):
        x = ramp((batch, 1, 28, 28))
        (got,) = session.run(None, {session.get_inputs()[0].name: x})
        np.testing.assert_allclose(got, net(ms.Tensor(x)).asnumpy(), rtol=1e-5, atol=1e-6)


def test_several_outputs_and_constants(tmp_path):
    def f(a, b):
        return ops.softmax(a * 2.0 + b, -1), ops.mean(a, 1), ops.sqrt(ops.abs(b))

    a, b = ramp((2, 5)), ramp((2, 5)) + 1.0
    ms.export(f, ms.Tensor(a), ms.Tensor(b), file_name=str(tmp_path / "f"), file_format="ONNX")
    got = run_onnx(tmp_path / "f.onnx", a, b)
    want = [t.asnumpy() for t in f(ms.Tensor(a), ms.Tensor(b))]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_what_onnx_cannot_say_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="control flow"):
        ms.export(Loop(), ms.Tensor(ramp((2, 4))), ms.Tensor(3), file_name=str(tmp_path / "l"),
                  file_format="ONNX")
    assert not (tmp_path / "l.onnx").exists()

    class Argmax(nn.Cell):
        def construct(self, x):
            return ops.argmax(x, 1)

    with pytest.raises(ValueError, match=r"ONNX: argmax .*test_onnx_export.py:\d+: this op has "
                                         r"no ONNX mapping yet"):
        ms.export(Argmax(), ms.Tensor(ramp((2, 3))), file_name=str(tmp_path / "a"),
                  file_format="ONNX")
