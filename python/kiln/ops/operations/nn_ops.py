"""MindSpore's activation, loss, padding and dropout primitive classes over kiln's functional ops
(same registry ops, same gradients): HSwish, HSigmoid, ReLU6, Elu, Softplus, Softsign, Mish, SeLU,
CeLU, PReLU, HShrink, SoftShrink, BiasAdd, SmoothL1Loss, BinaryCrossEntropy, BCEWithLogitsLoss,
KLDivLoss, NLLLoss (loss, total_weight), Pad (paddings per dimension), Dropout (output, 0/1 mask),
Dropout2D and Dropout3D (output, bool mask)."""
from kiln.ops import function as _ops
from kiln.ops._core import call
from kiln.ops.primitive import Primitive

__all__ = [
    "HSwish", "HSigmoid", "ReLU6", "Elu", "Softplus", "Softsign", "Mish", "SeLU", "CeLU", "PReLU",
    "HShrink", "SoftShrink", "BiasAdd", "SmoothL1Loss", "BinaryCrossEntropy",
    "BCEWithLogitsLoss", "KLDivLoss", "NLLLoss", "Pad", "Dropout", "Dropout2D", "Dropout3D",
]


def _unary(name, fn):
    def __call__(self, x):
        return fn(x)

    return type(name, (Primitive,), {"__call__": __call__, "__doc__": f"Primitive of ops.{name}."})


HSwish = _unary("HSwish", lambda x: _ops.hardswish(x))
HSigmoid = _unary("HSigmoid", lambda x: _ops.hardsigmoid(x))
ReLU6 = _unary("ReLU6", lambda x: _ops.relu6(x))
Softplus = _unary("Softplus", lambda x: _ops.softplus(x))
Softsign = _unary("Softsign", lambda x: _ops.softsign(x))
Mish = _unary("Mish", lambda x: _ops.mish(x))
SeLU = _unary("SeLU", lambda x: _ops.selu(x))


class Elu(Primitive):
    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = float(alpha)

    def __call__(self, x):
        return _ops.elu(x, self.alpha)


class CeLU(Elu):
    def __call__(self, x):
        return _ops.celu(x, self.alpha)


class PReLU(Primitive):
    def __call__(self, x, weight):
        return _ops.prelu(x, weight)


class HShrink(Primitive):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = float(lambd)

    def __call__(self, x):
        return _ops.hardshrink(x, self.lambd)


class SoftShrink(HShrink):
    def __call__(self, x):
        return _ops.softshrink(x, self.lambd)


class BiasAdd(Primitive):
    """input_x + bias along the channel axis (data_format "NCHW" or "NCDHW": axis 1; "NHWC":
    the last axis)."""

    def __init__(self, data_format="NCHW"):
        super().__init__()
        if data_format not in ("NCHW", "NHWC", "NCDHW"):
            raise ValueError(f"BiasAdd: data_format must be 'NCHW', 'NHWC' or 'NCDHW', got "
                             f"{data_format!r}")
        self.data_format = data_format

    def __call__(self, input_x, bias):
        if self.data_format == "NHWC":
            if input_x.dtype != bias.dtype:
                raise TypeError("For primitive[BiasAdd], the input type must be same.")
            return _ops.add(input_x, bias)
        return _ops.bias_add(input_x, bias)


class _Loss(Primitive):
    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in ("none", "mean", "sum"):
            raise ValueError(f"{type(self).__name__}: reduction must be 'none', 'mean' or 'sum', "
                             f"got {reduction!r}")
        self.reduction = reduction


class SmoothL1Loss(_Loss):
    def __init__(self, beta=1.0, reduction="none"):
        super().__init__(reduction)
        self.beta = float(beta)

    def __call__(self, logits, labels):
        return _ops.smooth_l1_loss(logits, labels, self.beta, self.reduction)


class BinaryCrossEntropy(_Loss):
    def __call__(self, logits, labels, weight=None):
        return _ops.binary_cross_entropy(logits, labels, weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __call__(self, logits, label, weight=None, pos_weight=None):
        return _ops.binary_cross_entropy_with_logits(logits, label, weight, pos_weight,
                                                     self.reduction)


class KLDivLoss(_Loss):
    def __call__(self, logits, labels):
        return _ops.kl_div(logits, labels, self.reduction)


class NLLLoss(_Loss):
    """(loss, total_weight): total_weight is the sum of weight[target] over the targets that are
    not ignore_index."""

    def __init__(self, reduction="mean", ignore_index=-100):
        super().__init__(reduction)
        self.ignore_index = int(ignore_index)

    def __call__(self, logits, labels, weight):
        loss = _ops.nll_loss(logits, labels, weight, self.ignore_index, self.reduction)
        kept = _ops.not_equal(labels, self.ignore_index)
        safe = _ops.where(kept, labels, _ops.zeros_like(labels))
        picked = _ops.gather(weight, safe, 0)
        total = _ops.sum(_ops.where(kept, picked, _ops.zeros_like(picked)))
        return loss, total


class Pad(Primitive):
    """Zero padding given ((before, after), ...) for every dimension."""

    def __init__(self, paddings):
        super().__init__()
        if not isinstance(paddings, (tuple, list)) or not all(
                isinstance(p, (tuple, list)) and len(p) == 2 for p in paddings):
            raise TypeError(f"Pad: paddings must be a tuple of (before, after) pairs, got "
                            f"{paddings!r}")
        self.paddings = tuple((int(a), int(b)) for a, b in paddings)

    def __call__(self, x):
        if len(self.paddings) != len(x.shape):
            raise ValueError(f"Pad: paddings has {len(self.paddings)} pairs for a rank-"
                             f"{len(x.shape)} input")
        flat = tuple(v for pair in reversed(self.paddings) for v in pair)
        return _ops.pad(x, flat)


def _keep(keep_prob, who):
    if isinstance(keep_prob, bool) or not isinstance(keep_prob, (int, float)) or not (
            0 < keep_prob <= 1):
        raise ValueError(f"For '{who}', the 'keep_prob' must be in (0, 1], but got "
                         f"{keep_prob!r}.")
    return float(keep_prob)


class Dropout(Primitive):
    """(x * mask / keep_prob, mask): mask holds 0/1 in x's dtype."""

    def __init__(self, keep_prob=0.5, Seed0=0, Seed1=0):  # noqa: N803 (MindSpore's names)
        super().__init__()
        self.keep_prob = _keep(keep_prob, "Dropout")
        self.seed0, self.seed1 = Seed0, Seed1

    def __call__(self, x):
        y, scale = call("dropout", (x,), (1.0 - self.keep_prob, None))
        return y, _ops.cast(_ops.not_equal(scale, 0), x.dtype)


class Dropout2D(Primitive):
    """(output, mask): whole channels of an (N, C, H, W) input are zeroed with probability
    1 - keep_prob, the rest scaled by 1 / keep_prob; mask is bool of the input's shape."""

    _rank = 4

    def __init__(self, keep_prob=0.5):
        super().__init__()
        self.keep_prob = _keep(keep_prob, type(self).__name__)

    def __call__(self, x):
        shape = tuple(x.shape)
        if len(shape) != self._rank:
            raise ValueError(f"For '{type(self).__name__}', the input must be {self._rank}-D, "
                             f"got shape {shape}")
        ones = _ops.ones(shape[:2] + (1,) * (len(shape) - 2), x.dtype)
        _, scale = call("dropout", (ones,), (1.0 - self.keep_prob, None))
        mask = _ops.broadcast_to(_ops.not_equal(scale, 0), shape)
        return _ops.mul(x, scale), mask


class Dropout3D(Dropout2D):
    _rank = 5




# ---- second batch: thin primitives over the layers' functional forms ----

Expm1 = _unary("Expm1", lambda x: _ops.expm1(x))
Log1p = _unary("Log1p", lambda x: _ops.log1p(x))


class _Diagonal(Primitive):
    def __init__(self, diagonal=0):
        super().__init__()
        self.diagonal = int(diagonal)


class Tril(_Diagonal):
    def __call__(self, x):
        return _ops.tril(x, self.diagonal)


class Triu(_Diagonal):
    def __call__(self, x):
        return _ops.triu(x, self.diagonal)


class Roll(Primitive):
    def __init__(self, shifts, dims=None):
        super().__init__()
        self.shifts, self.dims = shifts, dims

    def __call__(self, x):
        return _ops.roll(x, self.shifts, self.dims)


class GLU(Primitive):
    def __init__(self, axis=-1):
        super().__init__()
        self.axis = int(axis)

    def __call__(self, x):
        return _ops.glu(x, self.axis)


class ChannelShuffle(Primitive):
    def __init__(self, group):
        super().__init__()
        self.group = group

    def __call__(self, x):
        return _ops.channel_shuffle(x, self.group)


class AdaptiveAvgPool2D(Primitive):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def __call__(self, x):
        return _ops.adaptive_avg_pool2d(x, self.output_size)


class AdaptiveMaxPool2D(AdaptiveAvgPool2D):
    """(output, argmax): argmax int64, flat h * W + w within each plane."""

    def __call__(self, x):
        return _ops.adaptive_max_pool2d(x, self.output_size, True)


class Dense(Primitive):
    """input @ weight.T + bias."""

    def __call__(self, x, w, b=None):
        return _ops.dense(x, w, b)


class SoftMarginLoss(_Loss):
    def __call__(self, x, target):
        return _ops.soft_margin_loss(x, target, self.reduction)


class MultiMarginLoss(_Loss):
    def __init__(self, p=1, margin=1.0, reduction="mean"):
        super().__init__(reduction)
        self.p, self.margin = p, margin

    def __call__(self, x, target, weight=None):
        return _ops.multi_margin_loss(x, target, self.p, self.margin, weight, self.reduction)


class TripletMarginLoss(_Loss):
    """(x, positive, negative, margin): margin is the fourth input, as in MindSpore."""

    def __init__(self, p=2, swap=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction)
        self.p, self.swap, self.eps = p, swap, eps

    def __call__(self, x, positive, negative, margin):
        margin = float(margin.asnumpy()) if hasattr(margin, "asnumpy") else float(margin)
        return _ops.triplet_margin_loss(x, positive, negative, margin, self.p, self.eps,
                                        self.swap, self.reduction)


class SoftmaxCrossEntropyWithLogits(Primitive):
    """(loss, backprop) for (N, C) logits and (N, C) label probabilities: loss[n] =
    -sum_c labels * log_softmax(logits), backprop = softmax(logits) - labels."""

    def __call__(self, logits, labels):
        loss = _ops.neg(_ops.sum(_ops.mul(labels, _ops.log_softmax(logits, -1)), -1))
        return loss, _ops.sub(_ops.softmax(logits, -1), labels)


class SparseSoftmaxCrossEntropyWithLogits(Primitive):
    """The mean over the batch of -log_softmax(logits)[n, labels[n]]; with is_grad=True its
    gradient with respect to the logits, (softmax - one_hot(labels)) / N."""

    def __init__(self, is_grad=False):
        super().__init__()
        self.is_grad = bool(is_grad)

    def __call__(self, logits, labels):
        depth = logits.shape[-1]
        onehot = _ops.one_hot(labels, depth, _ops.ones((), logits.dtype),
                              _ops.zeros((), logits.dtype))
        if self.is_grad:
            return _ops.div(_ops.sub(_ops.softmax(logits, -1), onehot), logits.shape[0])
        return _ops.mean(_ops.neg(_ops.sum(_ops.mul(onehot, _ops.log_softmax(logits, -1)),
                                           -1)))


class SigmoidCrossEntropyWithLogits(Primitive):
    """Elementwise -(y * log(sigmoid(x)) + (1 - y) * log(1 - sigmoid(x)))."""

    def __call__(self, logits, labels):
        return _ops.binary_cross_entropy_with_logits(logits, labels, None, None, "none")


class L2Loss(Primitive):
    """sum(x^2) / 2, a scalar."""

    def __call__(self, x):
        return _ops.div(_ops.sum(_ops.mul(x, x)), 2)


class L2Normalize(Primitive):
    """x / sqrt(max(sum(x^2, axis), epsilon))."""

    def __init__(self, axis=0, epsilon=1e-4):
        super().__init__()
        self.axis, self.epsilon = axis, float(epsilon)

    def __call__(self, x):
        axis = self.axis[0] if isinstance(self.axis, (tuple, list)) else self.axis
        square = _ops.sum(_ops.mul(x, x), axis, True)
        return _ops.div(x, _ops.sqrt(_ops.maximum(square, self.epsilon)))


def _hw(value, who, name):
    """An int, an (h, w) pair or MindSpore's 4-tuple (1, 1, h, w) as (h, w)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    value = tuple(value)
    if len(value) == 4:
        value = value[2:]
    if len(value) != 2:
        raise ValueError(f"For '{who}', the '{name}' must be an int or a tuple of 2 or 4 ints, "
                         f"got {value!r}")
    return value


class Conv2D(Primitive):
    """2-D convolution of an (N, C, H, W) input with an (out_channel, C / group, kh, kw)
    weight; pad_mode 'valid', 'same' or 'pad' (pad an int or (top, bottom, left, right))."""

    def __init__(self, out_channel, kernel_size, mode=1, pad_mode="valid", pad=0, stride=1,
                 dilation=1, group=1, data_format="NCHW"):
        super().__init__()
        if data_format != "NCHW":
            raise ValueError(f"Conv2D: only data_format='NCHW' is supported, got {data_format!r}")
        self.pad_mode = pad_mode.lower()
        if self.pad_mode not in ("valid", "same", "pad"):
            raise ValueError(f"For 'Conv2D', the 'pad_mode' must be 'valid', 'same' or 'pad', got "
                             f"{pad_mode!r}")
        self.out_channel, self.group = int(out_channel), int(group)
        self.kernel_size = _hw(kernel_size, "Conv2D", "kernel_size")
        self.stride = _hw(stride, "Conv2D", "stride")
        self.dilation = _hw(dilation, "Conv2D", "dilation")
        self.pad = pad if isinstance(pad, int) else tuple(pad)

    def __call__(self, x, weight):
        if tuple(weight.shape[0:1] + weight.shape[2:]) != (self.out_channel,) + self.kernel_size:
            raise ValueError(f"For 'Conv2D', the weight's shape {tuple(weight.shape)} does not "
                             f"match out_channel={self.out_channel} and kernel_size="
                             f"{self.kernel_size}")
        return _ops.conv2d(x, weight, None, self.stride, self.pad_mode,
                           self.pad if self.pad_mode == "pad" else 0, self.dilation, self.group)


class _Pool(Primitive):
    def __init__(self, kernel_size=1, strides=1, pad_mode="valid", data_format="NCHW"):
        super().__init__()
        if data_format != "NCHW":
            raise ValueError(f"{type(self).__name__}: only data_format='NCHW' is supported")
        self.pad_mode = pad_mode.lower()
        if self.pad_mode not in ("valid", "same"):
            raise ValueError(f"For '{type(self).__name__}', the 'pad_mode' must be 'valid' or "
                             f"'same', got {pad_mode!r}")
        self.kernel_size = _hw(kernel_size, type(self).__name__, "kernel_size")
        self.strides = _hw(strides, type(self).__name__, "strides")

    def _same_pads(self, x):
        """TensorFlow's 'same' padding (t, b, l, r): the output size is ceil(size / stride)."""
        pads = []
        for size, k, s in zip(x.shape[2:], self.kernel_size, self.strides):
            total = max((-(-size // s) - 1) * s + k - size, 0)
            pads.append((total // 2, total - total // 2))
        (t, b), (l_, r) = pads
        return (l_, r, t, b)                                  # ops.pad order: last axis first

    def _check(self, x):
        if len(x.shape) != 4:
            raise ValueError(f"For '{type(self).__name__}', the input must be (N, C, H, W), got "
                             f"shape {tuple(x.shape)}")


class MaxPool(_Pool):
    """Maximum over kernel_size windows of an (N, C, H, W) input; 'same' padding never wins."""

    def __call__(self, x):
        self._check(x)
        if self.pad_mode == "same":
            x = _ops.pad(x, self._same_pads(x), value=float("-inf"))
        return _ops.max_pool2d(x, self.kernel_size, self.strides)


class AvgPool(_Pool):
    """Mean over kernel_size windows; with 'same' the padding is not counted."""

    def __call__(self, x):
        self._check(x)
        if self.pad_mode == "valid":
            return _ops.avg_pool2d(x, self.kernel_size, self.strides)
        pads = self._same_pads(x)
        total = _ops.avg_pool2d(_ops.pad(x, pads), self.kernel_size, self.strides)
        ones = _ops.ones((1, 1) + tuple(x.shape[2:]), x.dtype)
        share = _ops.avg_pool2d(_ops.pad(ones, pads), self.kernel_size, self.strides)
        return _ops.div(total, share)


class ApplyMomentum(Primitive):
    """accumulation = accumulation * momentum + gradient; variable -= learning_rate *
    accumulation (use_nesterov: variable -= learning_rate * (gradient + momentum *
    accumulation)); both updated in place, variable returned. gradient_scale is accepted and
    not applied, as MindSpore 2.10's CPU kernel does."""

    def __init__(self, use_nesterov=False, use_locking=False, gradient_scale=1.0):
        super().__init__()
        self.use_nesterov, self.use_locking = bool(use_nesterov), bool(use_locking)
        self.gradient_scale = float(gradient_scale)

    def __call__(self, variable, accumulation, learning_rate, gradient, momentum):
        accum = _ops.add(_ops.mul(accumulation, momentum), gradient)
        _ops.assign(accumulation, accum)
        step = _ops.add(gradient, _ops.mul(accum, momentum)) if self.use_nesterov else accum
        _ops.assign(variable, _ops.sub(variable, _ops.mul(step, learning_rate)))
        return variable


Sign = _unary("Sign", lambda x: _ops.sign(x))

__all__ += ["Conv2D", "MaxPool", "AvgPool", "ApplyMomentum", "Sign"]
__all__ += ["Expm1", "Log1p", "Tril", "Triu", "Roll", "GLU", "ChannelShuffle",
            "AdaptiveAvgPool2D", "AdaptiveMaxPool2D", "Dense", "SoftMarginLoss",
            "MultiMarginLoss", "TripletMarginLoss", "SoftmaxCrossEntropyWithLogits",
            "SparseSoftmaxCrossEntropyWithLogits", "SigmoidCrossEntropyWithLogits", "L2Loss",
            "L2Normalize"]
