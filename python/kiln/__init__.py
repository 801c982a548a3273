"""kiln: a deep-learning framework with a C++ core; MindSpore's programming model and names.

``import kiln as ms`` is the one line a MindSpore program changes.
"""
import builtins

from kiln import _C, ops  # noqa: F401
from kiln._version import __version__  # noqa: F401
from kiln.common import dtype  # noqa: F401 - public as ms.dtype
from kiln.common.dtype import (  # noqa: F401
    bfloat16,
    bool_,
    double,
    dtype_to_nptype,
    dtype_to_pytype,
    float16,
    float32,
    float64,
    float_,
    half,
    int8,
    int16,
    int32,
    int64,
    int_,
    list_,
    pytype_to_dtype,
    tuple_,
    uint8,
    uint16,
    uint32,
    uint64,
)
from kiln.common.tensor import Tensor, tensor  # noqa: F401
from kiln.context import (  # noqa: F401
    COMPATIBLE,
    GRAPH_MODE,
    LAX,
    PYNATIVE_MODE,
    STRICT,
    ParallelMode,
    get_auto_parallel_context,
    get_context,
    reset_auto_parallel_context,
    reset_context,
    set_auto_parallel_context,
    set_context,
    set_device,
)
from kiln.jit import GraphSyntaxError, JitConfig, get_jit_stats, jit, mutable  # noqa: F401
from kiln.ops.composite import grad, value_and_grad  # noqa: F401
from kiln.ops.function.shape_ext import is_tensor  # noqa: E402,F401 - mindspore.is_tensor
from kiln.ops.vmap_api import vmap  # noqa: F401 - mindspore.vmap is ops.vmap

from_numpy = Tensor.from_numpy  # mindspore.from_numpy: a tensor sharing the array's memory


def set_num_threads(n):
    """Sets the number of intra-op threads (shared by kiln's kernels and oneDNN)."""
    _C.set_num_threads(int(n))


def get_num_threads():
    return _C.get_num_threads()


def set_seed(seed):
    """Makes random ops, dropout and parameter initialisation reproducible."""
    if not isinstance(seed, int) or isinstance(seed, builtins.bool) or seed < 0:
        raise TypeError(f"set_seed: seed must be a non-negative int, got {seed!r}")
    _C.set_seed(seed)
    _seed_state["seed"] = seed


def get_seed():
    return _seed_state["seed"]


_seed_state = {"seed": None}

# nn, parameters and checkpoints (added by the nn engineer), and the rest of the module surface
# MindSpore code imports (docs/graph_mode.md, "Module surface").
from kiln import common as _common  # noqa: E402
from kiln import communication, dataset, experimental, log, mint, nn, runtime, train  # noqa: E402,F401
from kiln.common.api import jit_class  # noqa: E402,F401
from kiln.common.parameter import Parameter, ParameterTuple  # noqa: E402,F401
from kiln.common.sparse_tensor import COOTensor, CSRTensor, RowTensor  # noqa: E402,F401
from kiln.ops.primitive import constexpr  # noqa: E402,F401
from kiln.train._ckpt_convert import ckpt_to_safetensors, safetensors_to_ckpt  # noqa: E402,F401
from kiln.train.amp import build_train_network  # noqa: E402,F401
from kiln.train.callback import *  # noqa: E402,F401,F403 - ms.LossMonitor, ms.RunContext, ...
from kiln.train.data_sink import data_sink  # noqa: E402,F401
from kiln.train.loss_scale_manager import (  # noqa: E402,F401
    DynamicLossScaleManager,
    FixedLossScaleManager,
    LossScaleManager,
)
from kiln.train.metrics import *  # noqa: E402,F401,F403 - ms.Accuracy, ms.Metric, ...
from kiln.train.model import Model  # noqa: E402,F401
from kiln.train.model_export import export, load  # noqa: E402,F401
from kiln.train.serialization import (  # noqa: E402,F401
    load_checkpoint,
    load_param_into_net,
    save_checkpoint,
)

# MindSpore code writes `from mindspore.common import Tensor, Parameter`; kiln.common's own
# __init__ sits below the Tensor class (kiln/common/__init__.py), so the names are added here.
_common.Parameter, _common.ParameterTuple, _common.Tensor = Parameter, ParameterTuple, Tensor
_common.COOTensor, _common.CSRTensor, _common.RowTensor = COOTensor, CSRTensor, RowTensor
globals()["bool"] = bool_  # ms.bool, MindSpore's alias of bool_ (this module uses builtins.bool)

# A MindSpore name kiln lacks: an AttributeError saying so (kiln.common._missing).
from kiln import amp  # noqa: E402,F401,I001 - after train: kiln.amp builds on kiln.train.amp
from kiln.common._missing import missing_attribute as _missing_attribute  # noqa: E402

__getattr__ = _missing_attribute("kiln", "mindspore")
