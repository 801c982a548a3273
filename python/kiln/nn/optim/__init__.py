"""kiln.nn.optim -- optimizers (MindSpore's names and update rules)."""
from kiln.nn.optim.adam import Adam, AdamW, AdamWeightDecay  # noqa: F401
from kiln.nn.optim.adaptive import (  # noqa: F401
    Adadelta,
    Adagrad,
    AdaMax,
    ProximalAdagrad,
    RMSProp,
)
from kiln.nn.optim.lars import LARS  # noqa: F401
from kiln.nn.optim.online import ASGD, FTRL, Lamb, Rprop  # noqa: F401
from kiln.nn.optim.optimizer import Optimizer  # noqa: F401
from kiln.nn.optim.sgd import SGD, Momentum  # noqa: F401

__all__ = ["Optimizer", "SGD", "Momentum", "Adam", "AdamW", "AdamWeightDecay", "RMSProp",
           "Adagrad", "ProximalAdagrad", "Adadelta", "AdaMax", "Lamb", "FTRL", "ASGD", "Rprop",
           "LARS"]
