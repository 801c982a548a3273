"""Image helpers the vision transforms and the image readers share: decoding (OpenCV, which
links libjpeg-turbo and libpng) and checks on image arrays."""
import cv2
import numpy as np

# OpenCV 4.10+ decodes straight to RGB; before, it decodes to BGR and the channels are swapped.
_READ_FLAG = getattr(cv2, "IMREAD_COLOR_RGB", cv2.IMREAD_COLOR)


def decode(data, where="Decode"):
    """Encoded bytes (a 1-D uint8 array or bytes) as an RGB image, HWC uint8."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = np.frombuffer(data, dtype=np.uint8)
    data = np.asarray(data.asnumpy() if hasattr(data, "asnumpy") else data)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise TypeError(f"{where}: expected the encoded image as a 1-D uint8 array, got "
                        f"{data.dtype} of shape {data.shape}")
    image = cv2.imdecode(data, _READ_FLAG) if data.size else None
    if image is None:
        raise RuntimeError(f"{where}: the data is not an image OpenCV can decode (JPEG, PNG, "
                           f"BMP, TIFF, ...)")
    return image if _READ_FLAG != cv2.IMREAD_COLOR else cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def image(x, who, channels_last=True):
    """An HW or HWC image array, or RuntimeError naming the op and the shape."""
    x = np.asarray(x.asnumpy() if hasattr(x, "asnumpy") else x)
    if x.ndim not in (2, 3) or x.size == 0:
        raise RuntimeError(f"{who}: expected an image of shape <H, W> or <H, W, C>, got "
                           f"shape {x.shape}")
    return x


def size_pair(size, who):
    """(height, width) from an int or a sequence of 1 or 2 positive ints."""
    values = [size] if isinstance(size, (int, np.integer)) else list(size)
    if len(values) not in (1, 2) or not all(isinstance(v, (int, np.integer)) and v > 0
                                            for v in values):
        raise ValueError(f"{who}: size must be a positive int or (height, width), got {size!r}")
    return (int(values[0]), int(values[-1]))


def resize(x, height, width, interpolation):
    """cv2.resize keeping a channel axis of 1 (OpenCV drops it)."""
    if x.dtype == np.bool_ or x.dtype.itemsize == 8 and x.dtype.kind != "f":
        raise RuntimeError(f"Resize: unsupported image dtype {x.dtype}")
    out = cv2.resize(x, (width, height), interpolation=interpolation)
    return out[..., None] if x.ndim == 3 and out.ndim == 2 else out


def pad(x, left, top, right, bottom, fill, mode):
    widths = [(top, bottom), (left, right)] + [(0, 0)] * (x.ndim - 2)
    if mode != "constant":
        return np.pad(x, widths, mode=mode)
    if isinstance(fill, (tuple, list)):
        if x.ndim != 3 or len(fill) != x.shape[2]:
            raise RuntimeError(f"Pad: fill_value {fill} does not match the image's channels "
                               f"(shape {x.shape})")
        out = np.empty((x.shape[0] + top + bottom, x.shape[1] + left + right, x.shape[2]),
                       dtype=x.dtype)
        out[...] = np.asarray(fill, dtype=x.dtype)
        out[top:top + x.shape[0], left:left + x.shape[1]] = x
        return out
    return np.pad(x, widths, constant_values=fill)


def padding4(padding, who):
    """(left, top, right, bottom) from an int, (horizontal, vertical) or four values."""
    values = [padding] if isinstance(padding, (int, np.integer)) else list(padding)
    if len(values) not in (1, 2, 4) or not all(isinstance(v, (int, np.integer)) and v >= 0
                                               for v in values):
        raise ValueError(f"{who}: padding must be non-negative ints (1, 2 or 4 of them), got "
                         f"{padding!r}")
    if len(values) == 1:
        return (values[0],) * 4
    if len(values) == 2:
        return (values[0], values[1], values[0], values[1])
    return tuple(int(v) for v in values)
