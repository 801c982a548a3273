"""kiln.train -- checkpoints (kiln.train.serialization), as mindspore.train."""
from kiln.train._ckpt_convert import ckpt_to_safetensors, safetensors_to_ckpt  # noqa: F401
from kiln.train.model_export import export, load  # noqa: F401
from kiln.train.serialization import (  # noqa: F401
    CheckpointError,
    load_checkpoint,
    load_param_into_net,
    save_checkpoint,
)

__all__ = ["export", "load", "save_checkpoint", "load_checkpoint", "load_param_into_net",
           "CheckpointError"]
__all__ += ["ckpt_to_safetensors", "safetensors_to_ckpt"]
