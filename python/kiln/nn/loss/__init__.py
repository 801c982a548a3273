"""kiln.nn.loss -- loss cells."""
from kiln.nn.loss.loss import (  # noqa: F401
    CrossEntropyLoss,
    L1Loss,
    LossBase,
    MSELoss,
    SoftmaxCrossEntropyWithLogits,
)
from kiln.nn.loss.losses import (  # noqa: F401
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CTCLoss,
    DiceLoss,
    FocalLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    MAELoss,
    MarginRankingLoss,
    MultiClassDiceLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss,
    PoissonNLLLoss,
    RMSELoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
)

__all__ = ["LossBase", "MSELoss", "L1Loss", "CrossEntropyLoss", "SoftmaxCrossEntropyWithLogits",
           "BCELoss", "BCEWithLogitsLoss", "NLLLoss", "SmoothL1Loss", "HuberLoss", "MAELoss",
           "RMSELoss", "KLDivLoss", "CosineEmbeddingLoss", "MarginRankingLoss", "SoftMarginLoss",
           "FocalLoss", "DiceLoss", "MultiClassDiceLoss", "HingeEmbeddingLoss", "GaussianNLLLoss",
           "MultiLabelSoftMarginLoss", "MultiMarginLoss", "TripletMarginLoss", "PoissonNLLLoss",
           "CTCLoss"]
