"""Enums of kiln.dataset.vision: interpolation and border modes (MindSpore's names)."""
from enum import Enum

import cv2


class Inter(Enum):
    NEAREST = 0
    ANTIALIAS = 1
    BILINEAR = LINEAR = 2
    BICUBIC = CUBIC = 3
    AREA = 4
    PILCUBIC = 5


class Border(str, Enum):
    CONSTANT = "constant"
    EDGE = "edge"
    REFLECT = "reflect"
    SYMMETRIC = "symmetric"


class ImageReadMode(Enum):
    UNCHANGED = 0
    GRAYSCALE = 1
    COLOR = 2


_CV2_INTER = {
    Inter.NEAREST: cv2.INTER_NEAREST,
    Inter.ANTIALIAS: cv2.INTER_AREA,
    Inter.BILINEAR: cv2.INTER_LINEAR,
    Inter.BICUBIC: cv2.INTER_CUBIC,
    Inter.AREA: cv2.INTER_AREA,
    Inter.PILCUBIC: cv2.INTER_CUBIC,
}


def cv2_interpolation(inter, who):
    if inter not in _CV2_INTER:
        raise TypeError(f"{who}: interpolation must be a vision.Inter, got {inter!r}")
    return _CV2_INTER[inter]


def check_border(mode, who):
    if not isinstance(mode, Border):
        raise TypeError(f"{who}: padding_mode must be a vision.Border, got {mode!r}")
    return mode.value
