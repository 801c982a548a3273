"""kiln.dataset.vision: image transforms (MindSpore's mindspore.dataset.vision)."""
from kiln.dataset.vision.autoaugment import (  # noqa: F401
    AutoContrast,
    Equalize,
    Invert,
    RandomAffine,
    RandomColor,
    RandomSelectSubpolicy,
    RandomSharpness,
)
from kiln.dataset.vision.transforms import (  # noqa: F401
    HWC2CHW,
    CenterCrop,
    Decode,
    Grayscale,
    Normalize,
    Pad,
    RandomColorAdjust,
    RandomCrop,
    RandomHorizontalFlip,
    RandomPosterize,
    RandomResizedCrop,
    RandomRotation,
    RandomSolarize,
    RandomVerticalFlip,
    Rescale,
    Resize,
    ToTensor,
)
from kiln.dataset.vision.utils import Border, ImageReadMode, Inter  # noqa: F401
