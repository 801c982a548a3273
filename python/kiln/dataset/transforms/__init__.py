"""kiln.dataset.transforms: general transforms (MindSpore's mindspore.dataset.transforms)."""
from kiln.dataset.transforms.transforms import (  # noqa: F401
    Compose,
    Concatenate,
    Fill,
    OneHot,
    RandomApply,
    RandomChoice,
    TypeCast,
)
