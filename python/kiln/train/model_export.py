"""kiln.export and kiln.load: a network as one MindIR model file, and back (docs/export.md)."""
import os

from kiln import _C
from kiln._version import __version__
from kiln.common.tensor import Tensor
from kiln.jit.api import JitFunction, export_function
from kiln.jit.cell_interface import CellBase
from kiln.nn.graph_cell import LoadedGraph

__all__ = ["export", "load"]

_FORMATS = ("MINDIR", "ONNX", "AIR")
# Weights past this many bytes go to `<file>.data` beside the model (protobuf's 2 GB limit).
_EXTERNAL_DATA_THRESHOLD = 1 << 30


def _plain(fn):
    """The Python function under a @jit decoration."""
    return fn.fn if isinstance(fn, JitFunction) else fn


def export(net, *inputs, file_name, file_format="MINDIR", **kwargs):
    """Compiles ``net(*inputs)`` as a graph and writes it with its weights to one file:
    MindIR (``file_format="MINDIR"``, read back by kiln.load and by MindSpore) or ONNX
    (``"ONNX"``, opset 20, for the ops that have ONNX operators; no control flow).

    ``inputs`` are Tensors giving each input's dtype and shape; a placeholder
    ``Tensor(shape=[None, 64], dtype=ms.float32)`` leaves a dimension free (a dynamic batch).
    The file name gets a ``.mindir`` (``.onnx``) suffix when it has none. A Cell is exported
    in inference mode (``set_train(False)``) and restored afterwards. The graph must compile in
    STRICT syntax.
    """
    if not isinstance(file_name, str) or not file_name:
        raise TypeError(f"export: 'file_name' must be a non-empty str, got {file_name!r}")
    if file_format not in _FORMATS:
        raise ValueError(f"export: 'file_format' must be one of {_FORMATS}, got {file_format!r}")
    if file_format == "AIR":
        raise ValueError("export: file_format='AIR' is for Ascend devices, which kiln does not "
                         "run on; use 'MINDIR' or 'ONNX' (docs/export.md)")
    unknown = set(kwargs) - {"external_data_threshold"}
    if unknown:
        raise TypeError(f"export: unexpected keyword arguments {sorted(unknown)}")
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor):
            raise TypeError(f"export: input {i} must be a Tensor (or a placeholder "
                            f"Tensor(shape=..., dtype=...)), got {type(x).__name__}")
    suffix = ".mindir" if file_format == "MINDIR" else ".onnx"
    if not file_name.endswith(suffix):
        file_name += suffix
    path = os.path.realpath(file_name)
    threshold = kwargs.get("external_data_threshold", _EXTERNAL_DATA_THRESHOLD)
    if isinstance(net, CellBase):
        was_training = net.training
        net.set_train(False)
        try:
            export_function(_plain(type(net).construct), inputs, net, path, __version__,
                            threshold, file_format)
        finally:
            net.set_train(was_training)
    elif callable(net):
        export_function(_plain(net), inputs, None, path, __version__, threshold, file_format)
    else:
        raise TypeError(f"export: 'net' must be a Cell or a function, got {type(net).__name__}")


def load(file_name, **kwargs):
    """Reads a model file kiln.export wrote; run it with ``nn.GraphCell(kiln.load(path))``.

    ValueError for a missing file or one without the ``.mindir`` suffix; RuntimeError naming
    the problem for a damaged file, one kiln did not write, or one from a newer kiln.
    """
    if not isinstance(file_name, str):
        raise TypeError(f"load: 'file_name' must be a str, got {type(file_name).__name__}")
    if not file_name.endswith(".mindir"):
        raise ValueError(f"load: only MindIR files (.mindir) can be loaded, got {file_name!r}")
    if not os.path.isfile(file_name):
        raise ValueError(f"load: the file {file_name!r} does not exist")
    unknown = set(kwargs) - {"dec_key", "dec_mode", "obf_func"}
    if unknown:
        raise TypeError(f"load: unexpected keyword arguments {sorted(unknown)}")
    if kwargs.get("dec_key") is not None or kwargs.get("obf_func") is not None:
        raise ValueError("load: encrypted or obfuscated models are not supported")
    try:
        executable, weights, names, inputs = _C.load_model(file_name, "O1")
    except ValueError as e:
        raise RuntimeError(str(e)) from None
    return LoadedGraph(file_name, executable, weights, names, inputs)
