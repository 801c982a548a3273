"""Vision transforms on HWC image arrays (MindSpore's mindspore.dataset.vision): OpenCV does the
decoding, resizing and rotation; NumPy the rest. Random ones draw from the row's generator.

Called directly (eager), they run here. Inside ``map``, a run of them starting at Decode is run
by the engine's native ops (csrc/dataset/vision_ops.cc) when each has a ``_native()`` form:
(op name, ints, reals), or None for settings only the Python version handles."""
import math
import numbers

import cv2
import numpy as np

from kiln.dataset import _random
from kiln.dataset.transforms.transforms import TensorOperation, _np_dtype
from kiln.dataset.vision import _image
from kiln.dataset.vision.utils import Border, Inter, check_border, cv2_interpolation

# Interpolations the engine's native ops run (OpenCV's codes); others stay in Python.
_NATIVE_INTER = (cv2.INTER_NEAREST, cv2.INTER_LINEAR, cv2.INTER_CUBIC, cv2.INTER_AREA)


def _prob(prob, who):
    if isinstance(prob, bool) or not isinstance(prob, numbers.Real) or not 0 <= prob <= 1:
        raise ValueError(f"{who}: prob must be in [0, 1], got {prob!r}")
    return float(prob)


class Decode(TensorOperation):
    """Encoded JPEG/PNG/BMP/TIFF bytes as an RGB image (HWC uint8)."""

    def __init__(self, to_pil=False):
        if to_pil:
            raise NotImplementedError("Decode: kiln decodes to NumPy arrays; to_pil=True "
                                      "(PIL images) is not supported")

    def _apply(self, data):
        return _image.decode(data)

    def _native(self):
        return ("Decode", [], [])


class Resize(TensorOperation):
    """To (height, width); an int resizes the shorter side to it, keeping the aspect ratio."""

    def __init__(self, size, interpolation=Inter.LINEAR):
        self.size = size
        self.pair = _image.size_pair(size, "Resize")
        self.keep_ratio = isinstance(size, (int, np.integer)) or len(list(size)) == 1
        self.interpolation = cv2_interpolation(interpolation, "Resize")

    def _apply(self, img):
        img = _image.image(img, "Resize")
        h, w = img.shape[:2]
        if self.keep_ratio:
            s = self.pair[0]
            height, width = (s, int(w * s / h)) if h <= w else (int(h * s / w), s)
        else:
            height, width = self.pair
        return _image.resize(img, height, width, self.interpolation)

    def _native(self):
        if self.interpolation not in _NATIVE_INTER:
            return None
        return ("Resize", [*self.pair, int(self.keep_ratio), self.interpolation], [])


class Rescale(TensorOperation):
    """image * rescale + shift, as float32."""

    def __init__(self, rescale, shift):
        self.rescale, self.shift = float(rescale), float(shift)

    def _apply(self, img):
        img = _image.image(img, "Rescale").astype(np.float32)
        return (img * np.float32(self.rescale) + np.float32(self.shift)).astype(np.float32)

    def _native(self):
        return ("Rescale", [], [self.rescale, self.shift])


class Normalize(TensorOperation):
    """(image - mean) / std per channel, as float32; `is_hwc` says where channels are."""

    def __init__(self, mean, std, is_hwc=True):
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1)
        self.std = np.asarray(std, dtype=np.float32).reshape(-1)
        if self.mean.size != self.std.size or self.mean.size == 0:
            raise ValueError(f"Normalize: mean {list(mean)} and std {list(std)} must have the "
                             f"same, non-zero length")
        if np.any(self.std <= 0):
            raise ValueError(f"Normalize: std must be positive, got {list(std)}")
        self.is_hwc = bool(is_hwc)

    def _apply(self, img):
        img = _image.image(img, "Normalize")
        channels = img.shape[-1 if self.is_hwc else 0] if img.ndim == 3 else 1
        if self.mean.size not in (1, channels):
            raise RuntimeError(f"Normalize: {self.mean.size} means for an image of {channels} "
                               f"channels (shape {img.shape})")
        shape = [1] * img.ndim
        if img.ndim == 3:
            shape[-1 if self.is_hwc else 0] = self.mean.size
        # Two passes into one float32 array (NumPy releases the GIL in each).
        out = np.subtract(img, self.mean.reshape(shape), dtype=np.float32)
        return np.divide(out, self.std.reshape(shape), out=out)

    def _native(self):
        if not self.is_hwc or self.mean.size > 4:
            return None
        return ("Normalize", [], [*map(float, self.mean), *map(float, self.std)])


class HWC2CHW(TensorOperation):
    """<H, W, C> to <C, H, W>; an <H, W> image becomes <1, H, W>."""

    def _apply(self, img):
        img = _image.image(img, "HWC2CHW")
        return np.ascontiguousarray(img[None] if img.ndim == 2 else img.transpose(2, 0, 1))

    def _native(self):
        return ("HWC2CHW", [], [])


class ToTensor(TensorOperation):
    """A HWC image in [0, 255] as CHW values in [0, 1] of `output_type`."""

    def __init__(self, output_type=np.float32):
        self.output_type = _np_dtype(output_type, "ToTensor")

    def _apply(self, img):
        img = _image.image(img, "ToTensor")
        chw = img[None] if img.ndim == 2 else img.transpose(2, 0, 1)
        return np.ascontiguousarray(chw / 255.0, dtype=self.output_type)


def _crop(img, top, left, height, width):
    return img[top:top + height, left:left + width]


class CenterCrop(TensorOperation):
    """The central (height, width) region (offsets rounded down); a smaller image is
    zero-padded around first (the odd pixel on the top and left), as MindSpore does."""

    def __init__(self, size):
        self.height, self.width = _image.size_pair(size, "CenterCrop")

    def _apply(self, img):
        img = _image.image(img, "CenterCrop")
        h, w = img.shape[:2]
        ph, pw = max(0, self.height - h), max(0, self.width - w)
        if ph or pw:
            img = _image.pad(img, pw - pw // 2, ph - ph // 2, pw // 2, ph // 2, 0, "constant")
            h, w = img.shape[:2]
        top, left = (h - self.height) // 2, (w - self.width) // 2
        return _crop(img, top, left, self.height, self.width)

    def _native(self):
        return ("CenterCrop", [self.height, self.width], [])


class Pad(TensorOperation):
    """Borders of (left, top, right, bottom) pixels: fill_value or a Border mode."""

    def __init__(self, padding, fill_value=0, padding_mode=Border.CONSTANT):
        self.padding = _image.padding4(padding, "Pad")
        self.fill_value = fill_value
        self.mode = check_border(padding_mode, "Pad")

    def _apply(self, img):
        img = _image.image(img, "Pad")
        return _image.pad(img, *self.padding, self.fill_value, self.mode)


class RandomCrop(TensorOperation):
    """A random (height, width) region, after optional padding."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill_value=0,
                 padding_mode=Border.CONSTANT):
        self.height, self.width = _image.size_pair(size, "RandomCrop")
        self.padding = None if padding is None else _image.padding4(padding, "RandomCrop")
        self.pad_if_needed, self.fill_value = bool(pad_if_needed), fill_value
        self.mode = check_border(padding_mode, "RandomCrop")

    def _apply(self, img):
        img = _image.image(img, "RandomCrop")
        if self.padding is not None:
            img = _image.pad(img, *self.padding, self.fill_value, self.mode)
        h, w = img.shape[:2]
        if self.pad_if_needed and (h < self.height or w < self.width):
            ph, pw = max(0, self.height - h), max(0, self.width - w)
            img = _image.pad(img, pw, ph, pw, ph, self.fill_value, self.mode)
            h, w = img.shape[:2]
        if h < self.height or w < self.width:
            raise RuntimeError(f"RandomCrop: crop size ({self.height}, {self.width}) is larger "
                               f"than the image ({h}, {w}); set pad_if_needed=True")
        rng = _random.generator()
        top = int(rng.integers(0, h - self.height + 1))
        left = int(rng.integers(0, w - self.width + 1))
        return _crop(img, top, left, self.height, self.width)

    def _native(self):
        if self.padding is not None or self.pad_if_needed:
            return None
        return ("RandomCrop", [self.height, self.width], [])


class RandomResizedCrop(TensorOperation):
    """A random region of `scale` of the area and `ratio` of aspect, resized to `size`; after
    `max_attempts` failed draws, the central region of the nearest allowed aspect."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=Inter.BILINEAR, max_attempts=10):
        self.height, self.width = _image.size_pair(size, "RandomResizedCrop")
        self.scale, self.ratio = tuple(map(float, scale)), tuple(map(float, ratio))
        if len(self.scale) != 2 or not 0 <= self.scale[0] <= self.scale[1]:
            raise ValueError(f"RandomResizedCrop: scale must be (min, max) with "
                             f"0 <= min <= max, got {scale!r}")
        if len(self.ratio) != 2 or not 0 < self.ratio[0] <= self.ratio[1]:
            raise ValueError(f"RandomResizedCrop: ratio must be (min, max) with "
                             f"0 < min <= max, got {ratio!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"RandomResizedCrop: max_attempts must be an int >= 1, got "
                             f"{max_attempts!r}")
        self.interpolation = cv2_interpolation(interpolation, "RandomResizedCrop")
        self.max_attempts = max_attempts

    def _region(self, h, w):
        rng, area = _random.generator(), h * w
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(self.max_attempts):
            target = area * rng.uniform(*self.scale)
            aspect = math.exp(rng.uniform(*log_ratio))
            cw = int(round(math.sqrt(target * aspect)))
            ch = int(round(math.sqrt(target / aspect)))
            if 0 < cw <= w and 0 < ch <= h:
                return int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1)), ch, cw
        in_ratio = w / h
        if in_ratio < self.ratio[0]:
            cw, ch = w, int(round(w / self.ratio[0]))
        elif in_ratio > self.ratio[1]:
            ch, cw = h, int(round(h * self.ratio[1]))
        else:
            cw, ch = w, h
        return (h - ch) // 2, (w - cw) // 2, ch, cw

    def _apply(self, img):
        img = _image.image(img, "RandomResizedCrop")
        top, left, ch, cw = self._region(*img.shape[:2])
        crop = img[top:top + ch, left:left + cw]
        return _image.resize(crop, self.height, self.width, self.interpolation)

    def _native(self):
        if self.interpolation not in _NATIVE_INTER:
            return None
        return ("RandomResizedCrop", [self.height, self.width, self.max_attempts,
                                      self.interpolation], [*self.scale, *self.ratio])


class RandomHorizontalFlip(TensorOperation):
    def __init__(self, prob=0.5):
        self.prob = _prob(prob, "RandomHorizontalFlip")

    def _apply(self, img):
        img = _image.image(img, "RandomHorizontalFlip")
        return np.ascontiguousarray(img[:, ::-1]) if _random.generator().random() < self.prob \
            else img

    def _native(self):
        return ("RandomHorizontalFlip", [], [self.prob])


class RandomVerticalFlip(TensorOperation):
    def __init__(self, prob=0.5):
        self.prob = _prob(prob, "RandomVerticalFlip")

    def _apply(self, img):
        img = _image.image(img, "RandomVerticalFlip")
        return np.ascontiguousarray(img[::-1]) if _random.generator().random() < self.prob \
            else img

    def _native(self):
        return ("RandomVerticalFlip", [], [self.prob])


class RandomRotation(TensorOperation):
    """Rotated counter-clockwise by a random angle in `degrees` (d: [-d, d]) about `center`
    (default the middle); `expand` grows the output to hold the whole rotated image."""

    def __init__(self, degrees, resample=Inter.NEAREST, expand=False, center=None,
                 fill_value=0):
        if isinstance(degrees, numbers.Real):
            if degrees < 0:
                raise ValueError(f"RandomRotation: degrees must be >= 0, got {degrees}")
            degrees = (-float(degrees), float(degrees))
        degrees = tuple(map(float, degrees))
        if len(degrees) != 2 or degrees[0] > degrees[1]:
            raise ValueError(f"RandomRotation: degrees must be (min, max), got {degrees!r}")
        self.degrees, self.expand, self.center = degrees, bool(expand), center
        self.interpolation = cv2_interpolation(resample, "RandomRotation")
        self.fill_value = fill_value

    def _apply(self, img):
        img = _image.image(img, "RandomRotation")
        h, w = img.shape[:2]
        angle = float(_random.generator().uniform(*self.degrees))
        cx, cy = ((w - 1) / 2.0, (h - 1) / 2.0) if self.center is None else self.center
        matrix = cv2.getRotationMatrix2D((cx, cy), angle, 1.0)
        out_w, out_h = w, h
        if self.expand:
            cos, sin = abs(matrix[0, 0]), abs(matrix[0, 1])
            out_w, out_h = int(round(h * sin + w * cos)), int(round(h * cos + w * sin))
            matrix[0, 2] += (out_w - w) / 2.0
            matrix[1, 2] += (out_h - h) / 2.0
        fill = self.fill_value
        border = tuple(fill) if isinstance(fill, (tuple, list)) else (fill,) * 4
        out = cv2.warpAffine(img, matrix, (out_w, out_h), flags=self.interpolation,
                             borderMode=cv2.BORDER_CONSTANT, borderValue=border)
        return out[..., None] if img.ndim == 3 and out.ndim == 2 else out


class Grayscale(TensorOperation):
    """An RGB image as luminance (0.299 R + 0.587 G + 0.114 B): <H, W> for one output channel,
    the value repeated in three for num_output_channels=3."""

    def __init__(self, num_output_channels=1):
        if num_output_channels not in (1, 3):
            raise ValueError(f"Grayscale: num_output_channels must be 1 or 3, got "
                             f"{num_output_channels!r}")
        self.num_output_channels = num_output_channels

    def _apply(self, img):
        img = _image.image(img, "Grayscale")
        if img.ndim != 3 or img.shape[2] != 3:
            raise RuntimeError(f"Grayscale: expected an RGB image <H, W, 3>, got shape "
                               f"{img.shape}")
        gray = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
        return gray if self.num_output_channels == 1 else np.repeat(gray[..., None], 3, axis=2)


def _factor_range(value, who, name, center=1.0, low=0.0):
    """A range of factors from one number x ([center - x, center + x], clipped at `low`) or
    from (min, max)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{who}: {name} must be >= 0, got {value}")
        return (max(low, center - value), center + value)
    lo, hi = (float(v) for v in value)
    if not low <= lo <= hi:
        raise ValueError(f"{who}: {name} must be (min, max) with {low} <= min <= max, got "
                         f"{value!r}")
    return (lo, hi)


def _blend(img, other, factor):
    """img * factor + other * (1 - factor), in uint8 range (PIL's ImageEnhance)."""
    out = other + (img.astype(np.float32) - other) * factor
    return np.clip(out, 0, 255) if img.dtype == np.uint8 else out


class RandomColorAdjust(TensorOperation):
    """Random brightness, contrast and saturation factors and a hue shift (in turns of the hue
    circle, within [-0.5, 0.5]) applied to an RGB image, in that order."""

    def __init__(self, brightness=(1, 1), contrast=(1, 1), saturation=(1, 1), hue=(0, 0)):
        who = "RandomColorAdjust"
        self.brightness = _factor_range(brightness, who, "brightness")
        self.contrast = _factor_range(contrast, who, "contrast")
        self.saturation = _factor_range(saturation, who, "saturation")
        self.hue = _factor_range(hue, who, "hue", center=0.0, low=-0.5)
        if self.hue[1] > 0.5:
            raise ValueError(f"{who}: hue must be within [-0.5, 0.5], got {hue!r}")

    def _apply(self, img):
        img = _image.image(img, "RandomColorAdjust")
        if img.ndim != 3 or img.shape[2] != 3:
            raise RuntimeError(f"RandomColorAdjust: expected an RGB image <H, W, 3>, got shape "
                               f"{img.shape}")
        rng, dtype = _random.generator(), img.dtype
        out = img.astype(np.float32)
        out = _blend(out, 0.0, rng.uniform(*self.brightness))
        gray = cv2.cvtColor(np.clip(out, 0, 255).astype(np.uint8), cv2.COLOR_RGB2GRAY)
        out = _blend(out, float(gray.mean()), rng.uniform(*self.contrast))
        gray = cv2.cvtColor(np.clip(out, 0, 255).astype(np.uint8), cv2.COLOR_RGB2GRAY)
        out = _blend(out, gray[..., None].astype(np.float32), rng.uniform(*self.saturation))
        shift = rng.uniform(*self.hue)
        out = np.clip(out, 0, 255).astype(np.uint8) if dtype == np.uint8 else out
        if shift:
            hsv = cv2.cvtColor(out.astype(np.uint8), cv2.COLOR_RGB2HSV_FULL)
            hsv[..., 0] = (hsv[..., 0].astype(np.int32) + int(round(shift * 256))) % 256
            out = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB_FULL)
        return out.astype(dtype)


class RandomPosterize(TensorOperation):
    """Each channel reduced to a random number of bits in `bits` (uint8 images)."""

    def __init__(self, bits=(8, 8)):
        lo, hi = (bits, bits) if isinstance(bits, int) else tuple(bits)
        if not 1 <= lo <= hi <= 8:
            raise ValueError(f"RandomPosterize: bits must be within [1, 8], got {bits!r}")
        self.bits = (int(lo), int(hi))

    def _apply(self, img):
        img = _image.image(img, "RandomPosterize")
        if img.dtype != np.uint8:
            raise RuntimeError(f"RandomPosterize: expected a uint8 image, got {img.dtype}")
        bits = int(_random.generator().integers(self.bits[0], self.bits[1] + 1))
        return img & np.uint8((0xFF << (8 - bits)) & 0xFF)


class RandomSolarize(TensorOperation):
    """Pixels whose value lies within a random [low, high] drawn from `threshold` (two
    values: the range of both ends) are inverted (255 - value); uint8 images."""

    def __init__(self, threshold=(0, 255)):
        lo, hi = (float(v) for v in threshold)
        if not 0 <= lo <= hi <= 255:
            raise ValueError(f"RandomSolarize: threshold must be (min, max) within [0, 255], "
                             f"got {threshold!r}")
        self.threshold = (int(lo), int(hi))

    def _apply(self, img):
        img = _image.image(img, "RandomSolarize")
        if img.dtype != np.uint8:
            raise RuntimeError(f"RandomSolarize: expected a uint8 image, got {img.dtype}")
        rng = _random.generator()
        a, b = sorted(int(rng.integers(self.threshold[0], self.threshold[1] + 1)) for _ in "ab")
        inside = (img >= a) & (img <= b)
        return np.where(inside, 255 - img, img).astype(np.uint8)
