"""kiln.train -- Model and its callbacks, checkpoints (kiln.train.serialization),
metrics and mixed precision (kiln.train.amp), as mindspore.train."""
from kiln.train import amp, callback, metrics  # noqa: F401
from kiln.train._ckpt_convert import ckpt_to_safetensors, safetensors_to_ckpt  # noqa: F401
from kiln.train.amp import build_train_network  # noqa: F401
from kiln.train.callback import *  # noqa: F401,F403
from kiln.train.data_sink import data_sink  # noqa: F401
from kiln.train.grad_accumulation import GradAccumulationCell  # noqa: F401
from kiln.train.loss_scale_manager import (  # noqa: F401
    DynamicLossScaleManager,
    FixedLossScaleManager,
    LossScaleManager,
)
from kiln.train.metrics import *  # noqa: F401,F403
from kiln.train.model import Model  # noqa: F401
from kiln.train.model_export import export, load  # noqa: F401
from kiln.train.serialization import (  # noqa: F401
    CheckpointError,
    load_checkpoint,
    load_param_into_net,
    save_checkpoint,
)

__all__ = ["export", "load", "save_checkpoint", "load_checkpoint", "load_param_into_net",
           "CheckpointError", "Model", "GradAccumulationCell", "data_sink",
           "build_train_network", "LossScaleManager", "FixedLossScaleManager",
           "DynamicLossScaleManager", "ckpt_to_safetensors", "safetensors_to_ckpt"]
__all__ += metrics.__all__
__all__ += callback.__all__

# A MindSpore name kiln lacks: an AttributeError that says so (kiln.common._missing).
from kiln.common._missing import missing_attribute as _missing_attribute  # noqa: E402

__getattr__ = _missing_attribute("kiln.train", "mindspore.train")
