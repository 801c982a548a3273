"""mint.nn's parameter-free Cells (pools, pads, activations, losses, resampling), each a small
Cell over kiln.mint.nn.functional with PyTorch's constructor arguments."""
from kiln import ops
from kiln.mint.nn import _conv_pool as C
from kiln.mint.nn import functional as F
from kiln.nn.cell import Cell


def _cell(name, fn, params, doc):
    """A Cell class whose __init__ takes `params` ((name, default) pairs; no default: required)
    and whose construct(*inputs) is fn(*inputs, *those values)."""
    names = [p[0] for p in params]

    def __init__(self, *args, **kwargs):
        Cell.__init__(self)
        if len(args) > len(names):
            raise TypeError(f"{name}() takes at most {len(names)} arguments, got {len(args)}")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names or key in values:
                raise TypeError(f"{name}() got an unexpected or repeated argument {key!r}")
            values[key] = value
        for p in params:
            if p[0] not in values:
                if len(p) == 1:
                    raise TypeError(f"{name}() missing the required argument {p[0]!r}")
                values[p[0]] = p[1]
        for key in names:
            setattr(self, key, values[key])
        self._check()

    def construct(self, *inputs):
        return fn(*inputs, *(getattr(self, key) for key in names))

    def extend_repr(self):
        return ", ".join(f"{key}={getattr(self, key)!r}" for key in names)

    return type(name, (Cell,), {"__init__": __init__, "construct": construct, "__doc__": doc,
                                "extend_repr": extend_repr, "_check": lambda self: None})


AdaptiveAvgPool1d = _cell("AdaptiveAvgPool1d", F.adaptive_avg_pool1d, [("output_size",)],
                          "Adaptive average pooling of (N, C, L) to output_size.")
AdaptiveAvgPool2d = _cell("AdaptiveAvgPool2d", F.adaptive_avg_pool2d, [("output_size",)],
                          "Adaptive average pooling of (N, C, H, W) to output_size.")
AdaptiveAvgPool3d = _cell("AdaptiveAvgPool3d", F.adaptive_avg_pool3d, [("output_size",)],
                          "Adaptive average pooling of (N, C, D, H, W) to output_size.")
AdaptiveMaxPool1d = _cell("AdaptiveMaxPool1d", F.adaptive_max_pool1d,
                          [("output_size",), ("return_indices", False)],
                          "Adaptive max pooling of (N, C, L); optionally the indices too.")
AdaptiveMaxPool2d = _cell("AdaptiveMaxPool2d", F.adaptive_max_pool2d,
                          [("output_size",), ("return_indices", False)],
                          "Adaptive max pooling of (N, C, H, W); optionally the indices too.")
AvgPool1d = _cell("AvgPool1d", F.avg_pool1d,
                  [("kernel_size",), ("stride", None), ("padding", 0), ("ceil_mode", False),
                   ("count_include_pad", True)], "Average pooling of (N, C, L).")
_AVG = [("kernel_size",), ("stride", None), ("padding", 0), ("ceil_mode", False),
        ("count_include_pad", True), ("divisor_override", None)]
AvgPool2d = _cell("AvgPool2d", F.avg_pool2d, _AVG, "Average pooling of (N, C, H, W).")
AvgPool3d = _cell("AvgPool3d", F.avg_pool3d, _AVG, "Average pooling of (N, C, D, H, W).")
MaxPool2d = _cell("MaxPool2d",  # the Cell's argument order differs from the function's
                  lambda x, k, s, p, d, ri, cm: F.max_pool2d(x, k, s, p, d, cm, ri),
                  [("kernel_size", 1), ("stride", None), ("padding", 0), ("dilation", 1),
                   ("return_indices", False), ("ceil_mode", False)],
                  "Max pooling of (N, C, H, W); optionally the int64 indices too.")


class MaxUnpool2d(Cell):
    """The inverse of MaxPool2d: values placed at their indices, zeros elsewhere."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def construct(self, input, indices, output_size=None):  # noqa: A002
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


Fold = _cell("Fold", F.fold, [("output_size",), ("kernel_size",), ("dilation", 1),
                              ("padding", 0), ("stride", 1)],
             "Sums sliding blocks back into (N, C, H, W).")
Unfold = _cell("Unfold", F.unfold, [("kernel_size",), ("dilation", 1), ("padding", 0),
                                    ("stride", 1)],
               "The sliding blocks of (N, C, H, W) as (N, C * kh * kw, L).")
PixelShuffle = _cell("PixelShuffle", F.pixel_shuffle, [("upscale_factor",)],
                     "Rearranges (N, C * r * r, H, W) into (N, C, H * r, W * r).")

# ---- activations ----
GLU = _cell("GLU", F.glu, [("dim", -1)], "a * sigmoid(b) of input's halves along dim.")
Hardshrink = _cell("Hardshrink", F.hardshrink, [("lambd", 0.5)], "x where |x| > lambd, else 0.")
Softshrink = _cell("Softshrink", F.softshrink, [("lambd", 0.5)],
                   "x - lambd, x + lambd or 0 (|x| <= lambd).")
Hardsigmoid = _cell("Hardsigmoid", F.hardsigmoid, [], "relu6(x + 3) / 6.")
LogSigmoid = _cell("LogSigmoid", F.logsigmoid, [], "log(sigmoid(x)).")
SELU = _cell("SELU", F.selu, [], "The scaled exponential linear unit.")
Hardtanh = _cell("Hardtanh", F.hardtanh, [("min_val", -1.0), ("max_val", 1.0),
                                          ("inplace", False)], "x clipped to [min_val, max_val].")
ReLU6 = _cell("ReLU6", F.relu6, [("inplace", False)], "min(max(x, 0), 6).")
Threshold = _cell("Threshold", F.threshold, [("threshold",), ("value",), ("inplace", False)],
                  "x where x > threshold, else value.")


class Dropout2d(Cell):
    """Zeroes whole channels with probability p in training; the identity in evaluation."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout2d: p must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def construct(self, input):  # noqa: A002
        if not self.training or self.p == 0:
            return input
        return F.dropout2d(input, self.p, True, self.inplace)


# ---- losses ----
BCELoss = _cell("BCELoss", lambda x, t, w, r: F.binary_cross_entropy(x, t, w, r),
                [("weight", None), ("reduction", "mean")], "Binary cross entropy of probabilities.")
CosineEmbeddingLoss = _cell("CosineEmbeddingLoss", F.cosine_embedding_loss,
                            [("margin", 0.0), ("reduction", "mean")],
                            "1 - cos(x1, x2) for target 1, max(0, cos - margin) for -1.")
KLDivLoss = _cell("KLDivLoss", F.kl_div, [("reduction", "mean"), ("log_target", False)],
                  "Kullback-Leibler divergence of log-probabilities to a target.")
SoftMarginLoss = _cell("SoftMarginLoss", F.soft_margin_loss, [("reduction", "mean")],
                       "log(1 + exp(-target * input)), reduced.")

# ---- resampling ----
Upsample = _cell("Upsample", F.interpolate,
                 [("size", None), ("scale_factor", None), ("mode", "nearest"),
                  ("align_corners", None), ("recompute_scale_factor", None)],
                 "Resizes (N, C, ...) to size or by scale_factor.")
UpsamplingNearest2d = _cell(
    "UpsamplingNearest2d", lambda x, size, scale: F.interpolate(x, size, scale, "nearest"),
    [("size", None), ("scale_factor", None)], "Nearest-neighbour 2-D resizing.")
UpsamplingBilinear2d = _cell(
    "UpsamplingBilinear2d",
    lambda x, size, scale: F.interpolate(x, size, scale, "bilinear", True),
    [("size", None), ("scale_factor", None)], "Bilinear 2-D resizing with align_corners=True.")


# ---- padding: (N, C, ...) padded on the last 1, 2 or 3 axes ----
def _pad_cell(name, dims, mode, params):
    def run(x, padding, value=0.0):
        amounts = C._tuple(padding, 2 * dims, name, "padding", -(1 << 62))
        if len(x.shape) < dims:
            raise ValueError(f"{name}: expected an input of at least {dims} dimensions, got "
                             f"shape {tuple(x.shape)}")
        return ops.pad(x, amounts, mode, value if mode == "constant" else None)

    doc = f"Pads the last {dims} axes ({mode}); padding an int or {2 * dims} ints."
    return _cell(name, run, params, doc)


_P, _PV = [("padding",)], [("padding",), ("value",)]
ZeroPad1d, ZeroPad2d, ZeroPad3d = (_pad_cell(f"ZeroPad{d}d", d, "constant", _P)
                                   for d in (1, 2, 3))
ConstantPad1d, ConstantPad2d, ConstantPad3d = (
    _pad_cell(f"ConstantPad{d}d", d, "constant", _PV) for d in (1, 2, 3))
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = (
    _pad_cell(f"ReflectionPad{d}d", d, "reflect", _P) for d in (1, 2, 3))
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = (
    _pad_cell(f"ReplicationPad{d}d", d, "replicate", _P) for d in (1, 2, 3))

__all__ = [n for n, v in list(globals().items()) if isinstance(v, type) and issubclass(v, Cell)
           and v is not Cell]
