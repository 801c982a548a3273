"""kiln.nn -- Cell, layers, losses, optimizers, learning-rate schedules and training wrappers."""
from kiln.nn import learning_rate_schedule  # noqa: F401
from kiln.nn.cell import Cell  # noqa: F401
from kiln.nn.graph_cell import GraphCell  # noqa: F401
from kiln.nn.layer.activation import (  # noqa: F401
    GELU,
    LogSoftmax,
    ReLU,
    Sigmoid,
    Softmax,
    Tanh,
    get_activation,
)
from kiln.nn.layer.basic import Dense, Dropout, Flatten, Identity  # noqa: F401
from kiln.nn.layer.container import CellList, SequentialCell  # noqa: F401
from kiln.nn.layer.conv import Conv2d  # noqa: F401
from kiln.nn.layer.embedding import Embedding  # noqa: F401
from kiln.nn.layer.normalization import BatchNorm1d, BatchNorm2d, LayerNorm  # noqa: F401
from kiln.nn.layer.pooling import AvgPool2d, MaxPool2d  # noqa: F401
from kiln.nn.learning_rate_schedule import (  # noqa: F401
    CosineDecayLR,
    ExponentialDecayLR,
    InverseDecayLR,
    LearningRateSchedule,
    NaturalExpDecayLR,
    PolynomialDecayLR,
    WarmUpLR,
    cosine_decay_lr,
    exponential_decay_lr,
    piecewise_constant_lr,
    warmup_lr,
)
from kiln.nn.loss import (  # noqa: F401
    CrossEntropyLoss,
    L1Loss,
    LossBase,
    MSELoss,
    SoftmaxCrossEntropyWithLogits,
)
from kiln.nn.optim import SGD, Adam, AdamW, AdamWeightDecay, Momentum, Optimizer  # noqa: F401
from kiln.nn.wrap import TrainOneStepCell, WithEvalCell, WithLossCell  # noqa: F401

__all__ = [
    "Cell", "GraphCell", "Dense", "Flatten", "Dropout", "Identity", "ReLU", "GELU", "Sigmoid",
    "Tanh", "Softmax", "LogSoftmax", "get_activation", "Conv2d", "MaxPool2d", "AvgPool2d",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Embedding", "SequentialCell", "CellList",
    "MSELoss", "L1Loss", "CrossEntropyLoss", "SoftmaxCrossEntropyWithLogits", "LossBase",
    "Optimizer", "SGD", "Momentum", "Adam", "AdamW", "AdamWeightDecay",
    "LearningRateSchedule", "ExponentialDecayLR", "NaturalExpDecayLR", "InverseDecayLR",
    "CosineDecayLR", "PolynomialDecayLR", "WarmUpLR", "piecewise_constant_lr",
    "exponential_decay_lr", "cosine_decay_lr", "warmup_lr",
    "WithLossCell", "WithEvalCell", "TrainOneStepCell",
]
