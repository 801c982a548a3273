"""kiln.experimental -- MindSpore's experimental namespace: `optim` (PyTorch-style optimizers
with parameter groups and lr_scheduler)."""
from kiln.experimental import optim  # noqa: F401

__all__ = ["optim"]
