"""kiln.nn -- Cell, layers, losses, optimizers, learning-rate schedules and training wrappers."""
from kiln.nn import dynamic_lr, learning_rate_schedule, utils  # noqa: F401
from kiln.nn.cell import Cell  # noqa: F401
from kiln.nn.dynamic_lr import (  # noqa: F401
    cosine_decay_lr,
    exponential_decay_lr,
    inverse_decay_lr,
    natural_exp_decay_lr,
    piecewise_constant_lr,
    polynomial_decay_lr,
    warmup_lr,
)
from kiln.nn.graph_cell import GraphCell  # noqa: F401
from kiln.nn.layer.activation import (  # noqa: F401
    CELU,
    ELU,
    GELU,
    GLU,
    Hardtanh,
    HShrink,
    HSigmoid,
    HSwish,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    RReLU,
    SeLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    SoftShrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
    get_activation,
)
from kiln.nn.layer.basic import Dense, Dropout, Flatten, Identity, Linear, Unflatten  # noqa: F401
from kiln.nn.layer.container import CellDict, CellList, SequentialCell  # noqa: F401
from kiln.nn.layer.conv import Conv1d, Conv2d  # noqa: F401
from kiln.nn.layer.conv3d import Conv3d, Conv3dTranspose  # noqa: F401
from kiln.nn.layer.conv_transpose import Conv1dTranspose, Conv2dTranspose  # noqa: F401
from kiln.nn.layer.embedding import Embedding, EmbeddingLookup  # noqa: F401
from kiln.nn.layer.image import (  # noqa: F401
    ChannelShuffle,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    PixelShuffle,
    PixelUnshuffle,
    Unfold,
    Upsample,
)
from kiln.nn.layer.math_cells import (  # noqa: F401
    ClipByNorm,
    ImageGradients,
    L1Regularizer,
    MatMul,
    Moments,
    Norm,
    OneHot,
    ReduceLogSumExp,
    Roll,
    Tril,
    Triu,
)
from kiln.nn.layer.normalization import (  # noqa: F401
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LayerNorm,
)
from kiln.nn.layer.padding import (  # noqa: F401
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    Pad,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad2d,
)
from kiln.nn.layer.pool3d import AvgPool3d, MaxPool3d  # noqa: F401
from kiln.nn.layer.pooling import (  # noqa: F401
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    LPPool1d,
    LPPool2d,
    MaxPool1d,
    MaxPool2d,
)
from kiln.nn.layer.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: F401
from kiln.nn.layer.transformer import (  # noqa: F401
    MultiheadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from kiln.nn.learning_rate_schedule import (  # noqa: F401
    CosineDecayLR,
    ExponentialDecayLR,
    InverseDecayLR,
    LearningRateSchedule,
    NaturalExpDecayLR,
    PolynomialDecayLR,
    WarmUpLR,
)
from kiln.nn.loss import (  # noqa: F401
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    CTCLoss,
    DiceLoss,
    FocalLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    LossBase,
    MAELoss,
    MarginRankingLoss,
    MSELoss,
    MultiClassDiceLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss,
    PoissonNLLLoss,
    RMSELoss,
    SmoothL1Loss,
    SoftMarginLoss,
    SoftmaxCrossEntropyWithLogits,
    TripletMarginLoss,
)
from kiln.nn.optim import (  # noqa: F401
    ASGD,
    FTRL,
    LARS,
    SGD,
    Adadelta,
    Adagrad,
    Adam,
    AdaMax,
    AdamW,
    AdamWeightDecay,
    Lamb,
    Momentum,
    Optimizer,
    ProximalAdagrad,
    RMSProp,
    Rprop,
)
from kiln.nn.utils import no_init_parameters  # noqa: F401
from kiln.nn.wrap import (  # noqa: F401
    DistributedGradReducer,
    DynamicLossScaleUpdateCell,
    FixedLossScaleUpdateCell,
    MicroBatchInterleaved,
    TrainOneStepCell,
    TrainOneStepWithLossScaleCell,
    WithEvalCell,
    WithLossCell,
)

__all__ = [
    "Cell", "GraphCell", "Dense", "Flatten", "Dropout", "Identity", "ReLU", "GELU", "Sigmoid",
    "Tanh", "Softmax", "LogSoftmax", "get_activation", "Conv2d", "MaxPool2d", "AvgPool2d",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Embedding", "SequentialCell", "CellList",
    "CellDict",
    "MSELoss", "L1Loss", "CrossEntropyLoss", "SoftmaxCrossEntropyWithLogits", "LossBase",
    "Optimizer", "SGD", "Momentum", "Adam", "AdamW", "AdamWeightDecay",
    "LearningRateSchedule", "ExponentialDecayLR", "NaturalExpDecayLR", "InverseDecayLR",
    "CosineDecayLR", "PolynomialDecayLR", "WarmUpLR", "piecewise_constant_lr",
    "exponential_decay_lr", "cosine_decay_lr", "warmup_lr",
    "WithLossCell", "WithEvalCell", "TrainOneStepCell", "DistributedGradReducer",
    "MicroBatchInterleaved",
    # activations, padding, pooling, image and normalization layers of the API-breadth work
    "ReLU6", "LeakyReLU", "SiLU", "PReLU", "ELU", "CELU", "SeLU", "HSwish", "HSigmoid",
    "Hardtanh", "Mish", "Softsign", "LogSigmoid",
    "Pad", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
    "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
    "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
    "Upsample", "PixelShuffle", "PixelUnshuffle", "Unfold", "Dropout2d",
    "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "BCELoss", "BCEWithLogitsLoss", "NLLLoss", "SmoothL1Loss", "HuberLoss", "MAELoss",
    "RMSELoss", "KLDivLoss", "CosineEmbeddingLoss", "MarginRankingLoss", "SoftMarginLoss",
    "FocalLoss", "DiceLoss", "MultiClassDiceLoss",
    "RMSProp", "Adagrad", "ProximalAdagrad", "Adadelta", "AdaMax", "Lamb", "FTRL", "ASGD",
    "Rprop", "LARS",
    "natural_exp_decay_lr", "inverse_decay_lr", "polynomial_decay_lr",
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer",
    "TransformerEncoder", "TransformerDecoder", "Transformer",
    "Linear", "Conv1d", "Conv2dTranspose", "Conv1dTranspose",
    "RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU",
    "Softmin", "Softmax2d", "Tanhshrink", "SoftShrink", "HShrink", "Threshold", "GLU", "RReLU",
    "HingeEmbeddingLoss", "GaussianNLLLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss",
    "TripletMarginLoss", "PoissonNLLLoss",
    "Dropout1d", "Dropout3d", "ChannelShuffle", "Unflatten", "BatchNorm3d", "AdaptiveMaxPool1d",
    "ReflectionPad3d", "ReplicationPad3d", "EmbeddingLookup", "CTCLoss", "Conv3d",
    "AdaptiveAvgPool3d", "OneHot", "Tril", "Triu", "Roll", "Moments", "MatMul", "Norm",
    "ClipByNorm",
    "ReduceLogSumExp", "L1Regularizer", "ImageGradients", "DynamicLossScaleUpdateCell",
    "FixedLossScaleUpdateCell", "TrainOneStepWithLossScaleCell", "MaxPool3d", "AvgPool3d",
    "Conv3dTranspose", "no_init_parameters", "LPPool1d", "LPPool2d",
]

# Metrics, as mindspore.nn re-exports mindspore.train.metrics (defined here: kiln.nn.metrics).
from kiln.nn import metrics  # noqa: E402
from kiln.nn.metrics import *  # noqa: E402,F401,F403

__all__ += metrics.__all__

from kiln.common._missing import missing_attribute as _missing_attribute  # noqa: E402

__getattr__ = _missing_attribute("kiln.nn", "mindspore.nn")
