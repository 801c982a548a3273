"""kiln.train -- checkpoints (kiln.train.serialization) and metrics, as mindspore.train."""
from kiln.train import metrics  # noqa: F401
from kiln.train.metrics import *  # noqa: F401,F403
from kiln.train.model_export import export, load  # noqa: F401
from kiln.train.serialization import (  # noqa: F401
    CheckpointError,
    load_checkpoint,
    load_param_into_net,
    save_checkpoint,
)

__all__ = ["export", "load", "save_checkpoint", "load_checkpoint", "load_param_into_net",
           "CheckpointError"]
__all__ += metrics.__all__
