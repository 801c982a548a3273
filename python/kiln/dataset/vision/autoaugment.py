"""The vision transforms AutoAugment-style policies use: Invert, Equalize, AutoContrast,
RandomColor, RandomSharpness, RandomAffine and RandomSelectSubpolicy (RGB uint8 images)."""
import math
import numbers

import cv2
import numpy as np

from kiln.dataset import _random
from kiln.dataset.transforms.transforms import TensorOperation, _run
from kiln.dataset.vision import _image
from kiln.dataset.vision.utils import Inter, cv2_interpolation


def _uint8_image(img, who):
    img = _image.image(img, who)
    if img.dtype != np.uint8:
        raise RuntimeError(f"{who}: expected a uint8 image, got {img.dtype}")
    return img


def _degrees_range(degrees, who):
    if isinstance(degrees, numbers.Real) and not isinstance(degrees, bool):
        return (-float(degrees), float(degrees))
    lo, hi = (float(v) for v in degrees)
    if lo > hi:
        raise ValueError(f"{who}: range must be (min, max), got {degrees!r}")
    return (lo, hi)


def _channels(img):
    return [img] if img.ndim == 2 else [img[..., c] for c in range(img.shape[2])]


def _merge(channels, like):
    return channels[0] if like.ndim == 2 else np.stack(channels, axis=2)


class Invert(TensorOperation):
    """255 - value, every channel."""

    def _apply(self, img):
        return 255 - _uint8_image(img, "Invert")


class Equalize(TensorOperation):
    """Each channel's histogram equalized (OpenCV's equalizeHist)."""

    def _apply(self, img):
        img = _uint8_image(img, "Equalize")
        return _merge([cv2.equalizeHist(np.ascontiguousarray(c)) for c in _channels(img)], img)


class AutoContrast(TensorOperation):
    """Each channel stretched to [0, 255] after cutting `cutoff` percent of its darkest and
    lightest pixels (pixel values in `ignore` left out of the histogram)."""

    def __init__(self, cutoff=0.0, ignore=None):
        if not 0 <= float(cutoff) < 50:
            raise ValueError(f"AutoContrast: cutoff must be in [0, 50), got {cutoff!r}")
        ignore = [] if ignore is None else [ignore] if isinstance(ignore, int) else list(ignore)
        if not all(isinstance(v, (int, np.integer)) and 0 <= v <= 255 for v in ignore):
            raise ValueError(f"AutoContrast: ignore must be values in [0, 255], got {ignore!r}")
        self.cutoff, self.ignore = float(cutoff), ignore

    def _stretch(self, channel):
        hist = np.bincount(channel.reshape(-1), minlength=256).astype(np.int64)
        hist[self.ignore] = 0
        total = int(hist.sum())
        if total == 0:
            return channel
        cut = int(total * self.cutoff / 100)
        cumulative = np.cumsum(hist)
        lo = int(np.searchsorted(cumulative, cut, side="right"))
        hi = int(np.searchsorted(cumulative, total - cut, side="left"))
        if hi <= lo:
            return channel
        table = np.clip((np.arange(256) - lo) * (255.0 / (hi - lo)), 0, 255).astype(np.uint8)
        return table[channel]

    def _apply(self, img):
        img = _uint8_image(img, "AutoContrast")
        return _merge([self._stretch(c) for c in _channels(img)], img)


def _enhance(img, degenerate, factor):
    """PIL's ImageEnhance: degenerate + (img - degenerate) * factor, in uint8 range."""
    out = degenerate.astype(np.float32) + (img.astype(np.float32) - degenerate) * factor
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


class RandomColor(TensorOperation):
    """Colour saturation scaled by a random factor in `degrees` (0: grey, 1: unchanged)."""

    def __init__(self, degrees=(0.1, 1.9)):
        self.degrees = _degrees_range(degrees, "RandomColor")
        if self.degrees[0] < 0:
            raise ValueError(f"RandomColor: degrees must be >= 0, got {degrees!r}")

    def _apply(self, img):
        img = _uint8_image(img, "RandomColor")
        if img.ndim != 3 or img.shape[2] != 3:
            raise RuntimeError(f"RandomColor: expected an RGB image <H, W, 3>, got shape "
                               f"{img.shape}")
        gray = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)[..., None]
        return _enhance(img, gray, _random.generator().uniform(*self.degrees))


_SMOOTH = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13.0


class RandomSharpness(TensorOperation):
    """Sharpness scaled by a random factor in `degrees` (0: blurred, 1: unchanged); the
    border pixels keep their values, as in PIL."""

    def __init__(self, degrees=(0.1, 1.9)):
        self.degrees = _degrees_range(degrees, "RandomSharpness")
        if self.degrees[0] < 0:
            raise ValueError(f"RandomSharpness: degrees must be >= 0, got {degrees!r}")

    def _apply(self, img):
        img = _uint8_image(img, "RandomSharpness")
        smooth = cv2.filter2D(img.astype(np.float32), -1, _SMOOTH).reshape(img.shape)
        smooth[0], smooth[-1], smooth[:, 0], smooth[:, -1] = img[0], img[-1], img[:, 0], img[:, -1]
        return _enhance(img, smooth, _random.generator().uniform(*self.degrees))


def _pair_ranges(value, who, name, count_hint):
    """(x range, y range) from 2 values (x only) or 4 (x, then y); None: no change."""
    if value is None:
        return (0.0, 0.0), (0.0, 0.0)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return (-float(value), float(value)), (0.0, 0.0)
    values = [float(v) for v in value]
    if len(values) == 2:
        return tuple(values), (0.0, 0.0)
    if len(values) == 4:
        return tuple(values[:2]), tuple(values[2:])
    raise ValueError(f"{who}: {name} must be a number, 2 or 4 values ({count_hint}), got "
                     f"{value!r}")


class RandomAffine(TensorOperation):
    """A random affine map about the image centre: rotation (counter-clockwise) in
    `degrees`, translation in fractions of the width and height, `scale`, and shear in
    degrees along x (and y); pixels from outside are `fill_value`."""

    def __init__(self, degrees, translate=None, scale=None, shear=None,
                 resample=Inter.NEAREST, fill_value=0):
        self.degrees = _degrees_range(degrees, "RandomAffine")
        self.translate = _pair_ranges(translate, "RandomAffine", "translate",
                                      "min_dx, max_dx[, min_dy, max_dy]")
        if any(abs(v) > 1 for r in self.translate for v in r):
            raise ValueError(f"RandomAffine: translate fractions must be within [-1, 1], got "
                             f"{translate!r}")
        self.scale = (1.0, 1.0) if scale is None else tuple(float(v) for v in scale)
        if len(self.scale) != 2 or not 0 < self.scale[0] <= self.scale[1]:
            raise ValueError(f"RandomAffine: scale must be (min, max) > 0, got {scale!r}")
        self.shear = _pair_ranges(shear, "RandomAffine", "shear",
                                  "min_x, max_x[, min_y, max_y]")
        self.interpolation = cv2_interpolation(resample, "RandomAffine")
        self.fill_value = fill_value

    def _matrix(self, h, w):
        rng = _random.generator()
        angle = math.radians(rng.uniform(*self.degrees))
        tx, ty = rng.uniform(*self.translate[0]) * w, rng.uniform(*self.translate[1]) * h
        s = rng.uniform(*self.scale)
        shx = math.tan(math.radians(rng.uniform(*self.shear[0])))
        shy = math.tan(math.radians(rng.uniform(*self.shear[1])))
        # Counter-clockwise on screen (y points down): the rotation's sine changes sign.
        rotation = np.array([[math.cos(angle), math.sin(angle)],
                             [-math.sin(angle), math.cos(angle)]])
        linear = rotation @ np.array([[1.0, shx], [shy, 1.0]]) * s
        center = np.array([(w - 1) / 2.0, (h - 1) / 2.0])
        offset = center + np.array([tx, ty]) - linear @ center
        return np.hstack([linear, offset[:, None]])

    def _apply(self, img):
        img = _image.image(img, "RandomAffine")
        h, w = img.shape[:2]
        fill = self.fill_value
        border = tuple(fill) if isinstance(fill, (tuple, list)) else (fill,) * 4
        out = cv2.warpAffine(img, self._matrix(h, w), (w, h), flags=self.interpolation,
                             borderMode=cv2.BORDER_CONSTANT, borderValue=border)
        return out[..., None] if img.ndim == 3 and out.ndim == 2 else out


class RandomSelectSubpolicy(TensorOperation):
    """One sub-policy chosen at random; each of its (transform, probability) pairs applied in
    order with its probability."""

    def __init__(self, policy):
        if not isinstance(policy, (list, tuple)) or not policy:
            raise TypeError("RandomSelectSubpolicy: policy must be a non-empty list of "
                            "sub-policies")
        for sub in policy:
            if not isinstance(sub, (list, tuple)) or not sub:
                raise TypeError("RandomSelectSubpolicy: each sub-policy must be a non-empty "
                                "list of (transform, probability)")
            for pair in sub:
                if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                        or not callable(pair[0]) or not 0 <= float(pair[1]) <= 1):
                    raise ValueError(f"RandomSelectSubpolicy: {pair!r} is not a (transform, "
                                     f"probability in [0, 1]) pair")
        self.policy = [list(sub) for sub in policy]

    def _apply(self, *args):
        rng = _random.generator()
        sub = self.policy[int(rng.integers(len(self.policy)))]
        for transform, prob in sub:
            if rng.random() < prob:
                out = _run([transform], args)
                args = out if isinstance(out, tuple) else (out,)
        return args[0] if len(args) == 1 else args
