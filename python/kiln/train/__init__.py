"""kiln.train -- checkpoints (kiln.train.serialization) and mixed precision (kiln.train.amp),
as mindspore.train."""
from kiln.train import amp  # noqa: F401
from kiln.train.amp import build_train_network  # noqa: F401
from kiln.train.loss_scale_manager import (  # noqa: F401
    DynamicLossScaleManager,
    FixedLossScaleManager,
    LossScaleManager,
)
from kiln.train.model_export import export, load  # noqa: F401
from kiln.train.serialization import (  # noqa: F401
    CheckpointError,
    load_checkpoint,
    load_param_into_net,
    save_checkpoint,
)

__all__ = ["export", "load", "save_checkpoint", "load_checkpoint", "load_param_into_net",
           "CheckpointError", "build_train_network", "LossScaleManager",
           "FixedLossScaleManager", "DynamicLossScaleManager"]
