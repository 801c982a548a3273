"""MaxPool3d and AvgPool3d (MindSpore's arguments: pad_mode 'valid'/'same'/'pad', ceil_mode,
dilation and return_indices for max, count_include_pad and divisor_override for average) over
(N, C, D, H, W) or (C, D, H, W): the kd * kh * kw strided views of the padded input, reduced."""
import numpy as np

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.tensor import Tensor
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.nn.layer.basic import check_bool
from kiln.ops._core import shape_attr
from kiln.ops.function.spatial import pad_constant_axis

__all__ = ["MaxPool3d", "AvgPool3d"]


def _constant(array):
    return Tensor(np.asarray(array))


def _triple(value, who, name, minimum):
    items = shape_attr(value, who, name)
    items = items * 3 if len(items) == 1 else items
    if len(items) != 3 or min(items) < minimum:
        raise ValueError(f"{who}: {name} must be an int or 3 ints >= {minimum}, got {value!r}")
    return items


def _geometry(pad_mode, sizes, kernel, stride, dilation, padding, ceil_mode):
    """Per axis: (pad before, output size, pad after reaching the last window, real end)."""
    out = []
    for n, k, s, d, p in zip(sizes, kernel, stride, dilation, padding):
        span = d * (k - 1) + 1
        if pad_mode == "same":
            size = -(-n // s)
            total = max((size - 1) * s + span - n, 0)
            before, limit = total // 2, n + total
        else:
            before = p if pad_mode == "pad" else 0
            limit = n + 2 * before
            free = limit - span
            size = (-(-free // s) if ceil_mode else free // s) + 1
            if ceil_mode and (size - 1) * s >= n + before:
                size -= 1  # the last window would start in the padding after the input
        if size < 1:
            raise ValueError(f"the pooling window ({k}, dilation {d}) does not fit the input "
                             f"size {n} with padding {before}")
        after = max((size - 1) * s + span - n - before, 0)
        out.append((before, size, after, limit))
    return out


def _views(x, geometry, kernel, stride, dilation, fill):
    """The padded input's kd * kh * kw views of shape (N, C, Do, Ho, Wo), kernel-major."""
    for axis, (before, _, after, _) in zip((2, 3, 4), geometry):
        x = pad_constant_axis(x, axis, before, after, fill)
    n, c = x.shape[:2]
    outs = [g[1] for g in geometry]
    views = []
    for a in range(kernel[0]):
        for b in range(kernel[1]):
            for e in range(kernel[2]):
                start = (0, 0, a * dilation[0], b * dilation[1], e * dilation[2])
                stop = (n, c) + tuple(s0 + (o - 1) * st + 1 for s0, o, st in
                                      zip(start[2:], outs, stride))
                views.append(F.slice_nd(x, start, stop, (1, 1) + tuple(stride)))
    return views


class _Pool3d(Cell):
    def __init__(self, who, kernel_size, stride, pad_mode, padding, ceil_mode):
        super().__init__()
        self.kernel_size = _triple(kernel_size, who, "kernel_size", 1)
        self.stride = _triple(stride, who, "stride", 1)
        if not isinstance(pad_mode, str) or pad_mode.lower() not in ("valid", "same", "pad"):
            raise ValueError(f"{who}: pad_mode must be 'valid', 'same' or 'pad', got "
                             f"{pad_mode!r}")
        self.pad_mode = pad_mode.lower()
        self.padding = _triple(padding, who, "padding", 0)
        if self.pad_mode != "pad" and any(self.padding):
            raise ValueError(f"{who}: padding must be 0 unless pad_mode is 'pad', got "
                             f"{padding!r}")
        self.ceil_mode = check_bool(bool(ceil_mode), who, "ceil_mode")

    def _batched(self, x, who):
        if len(x.shape) not in (4, 5):
            raise ValueError(f"{who}: expected an (N, C, D, H, W) or (C, D, H, W) input, got "
                             f"shape {tuple(x.shape)}")
        return (ops.expand_dims(x, 0), True) if len(x.shape) == 4 else (x, False)


class MaxPool3d(_Pool3d):
    """Maximum over 3-D windows; padding never wins. With return_indices also each
    maximum's flat index d * H * W + h * W + w in its input volume (int64)."""

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, dilation=1,
                 return_indices=False, ceil_mode=False):
        super().__init__("MaxPool3d", kernel_size, stride, pad_mode, padding, ceil_mode)
        self.dilation = _triple(dilation, "MaxPool3d", "dilation", 1)
        self.return_indices = check_bool(return_indices, "MaxPool3d", "return_indices")
        if (self.return_indices or self.dilation != (1, 1, 1)) and self.pad_mode != "pad":
            raise ValueError(f"For MaxPool3d, the pad_mode must be 'pad' when dilation is not 1 "
                             f"or return_indices is True, but got pad_mode:{pad_mode}.")
        if self.ceil_mode and self.pad_mode != "pad":
            raise ValueError("For MaxPool3d, when the 'pad_mode' is 'same' or 'valid', the "
                             "'ceil_mode' only supports False.")

    def construct(self, x):
        x, added = self._batched(x, "MaxPool3d")
        geometry = _geometry(self.pad_mode, x.shape[2:], self.kernel_size, self.stride,
                             self.dilation, self.padding, self.ceil_mode)
        views = _views(x, geometry, self.kernel_size, self.stride, self.dilation,
                       float("-inf"))
        stacked = ops.stack(views, 0)
        out = F.rmax(stacked, 0)
        if not self.return_indices:
            return ops.squeeze(out, 0) if added else out
        indices = self._indices(ops.argmax(stacked, 0), geometry, x.shape[2:])
        if added:
            return ops.squeeze(out, 0), ops.squeeze(indices, 0)
        return out, indices

    def _indices(self, which, geometry, sizes):
        """Kernel offsets (argmax over the views) as flat input indices."""
        kd, kh, kw = self.kernel_size
        offsets = np.array([(a, b, e) for a in range(kd) for b in range(kh) for e in range(kw)])
        flat = 0
        for axis, (before, size, _, _) in enumerate(geometry):
            table = _constant((offsets[:, axis] * self.dilation[axis]).astype(np.int64))
            base = np.arange(size) * self.stride[axis] - before
            shape = [1, 1, 1, 1, 1]
            shape[2 + axis] = size
            coordinate = ops.gather(table, which, 0) + _constant(base.reshape(shape).astype(
                np.int64))
            flat = flat * sizes[axis] + coordinate
        return ops.cast(flat, mstype.int64)


class AvgPool3d(_Pool3d):
    """Mean over 3-D windows: the divisor is divisor_override, or the window's size within the
    padded input (count_include_pad) or its real elements only."""

    def __init__(self, kernel_size=1, stride=1, pad_mode="valid", padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__("AvgPool3d", kernel_size, stride, pad_mode, padding, ceil_mode)
        self.count_include_pad = check_bool(count_include_pad, "AvgPool3d", "count_include_pad")
        if divisor_override is not None and (isinstance(divisor_override, bool) or not
                                             isinstance(divisor_override, int) or
                                             divisor_override == 0):
            raise ValueError(f"AvgPool3d: divisor_override must be a nonzero int or None, got "
                             f"{divisor_override!r}")
        self.divisor_override = divisor_override

    def construct(self, x):
        x, added = self._batched(x, "AvgPool3d")
        dilation = (1, 1, 1)
        geometry = _geometry(self.pad_mode, x.shape[2:], self.kernel_size, self.stride,
                             dilation, self.padding, self.ceil_mode)
        total = None
        for v in _views(x, geometry, self.kernel_size, self.stride, dilation, 0.0):
            total = v if total is None else total + v
        if self.divisor_override:
            out = total / float(self.divisor_override)
        else:
            out = total / self._counts(x, geometry)
        return ops.squeeze(out, 0) if added else out

    def _counts(self, x, geometry):
        """Elements each window divides by: real ones, plus explicit padding when
        count_include_pad (never the overhang ceil_mode adds after the padding)."""
        counted = []
        for n, (before, _, after, limit) in zip(x.shape[2:], geometry):
            marks = np.zeros(before + n + after)
            if self.count_include_pad and self.pad_mode != "valid":
                marks[:limit] = 1
            else:
                marks[before:before + n] = 1
            counted.append(marks)
        grid = counted[0][:, None, None] * counted[1][None, :, None] * counted[2][None, None, :]
        ones = ops.cast(_constant(grid.reshape((1, 1) + grid.shape).astype(np.float32)),
                        x.dtype)
        no_pad = [(0, g[1], 0, g[3]) for g in geometry]
        total = None
        for v in _views(ones, no_pad, self.kernel_size, self.stride, (1, 1, 1), 0.0):
            total = v if total is None else total + v
        return total
