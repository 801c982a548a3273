"""kiln.experimental.optim -- PyTorch-style optimizers (MindSpore's experimental.optim): SGD,
Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax over parameter groups, and lr_scheduler."""
from kiln.experimental.optim import lr_scheduler  # noqa: F401
from kiln.experimental.optim.adaptive import Adadelta, Adagrad, Adamax, RMSprop  # noqa: F401
from kiln.experimental.optim.optimizer import SGD, Adam, AdamW, Optimizer  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "lr_scheduler"]
