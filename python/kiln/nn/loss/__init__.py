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
    DiceLoss,
    FocalLoss,
    HuberLoss,
    KLDivLoss,
    MAELoss,
    MarginRankingLoss,
    MultiClassDiceLoss,
    NLLLoss,
    RMSELoss,
    SmoothL1Loss,
    SoftMarginLoss,
)

__all__ = ["LossBase", "MSELoss", "L1Loss", "CrossEntropyLoss", "SoftmaxCrossEntropyWithLogits",
           "BCELoss", "BCEWithLogitsLoss", "NLLLoss", "SmoothL1Loss", "HuberLoss", "MAELoss",
           "RMSELoss", "KLDivLoss", "CosineEmbeddingLoss", "MarginRankingLoss", "SoftMarginLoss",
           "FocalLoss", "DiceLoss", "MultiClassDiceLoss"]
