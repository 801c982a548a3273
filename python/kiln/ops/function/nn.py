"""Neural-network functional ops: conv2d (MindSpore pad_mode semantics), 2-D pooling and
apply_momentum (adaptive pooling lives in spatial.py)."""

from kiln.ops._core import call, int_arg, pair_attr, shape_attr

__all__ = [
    "apply_momentum", "conv2d", "max_pool2d", "avg_pool2d"]


def _pair(value, name, op, allow_zero=False):
    """An int or a 2-sequence of ints -> (a, b); positive (or non-negative) ints only."""
    pair = pair_attr(value, op, name)
    low = 0 if allow_zero else 1
    if min(pair) < low:
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{op}: {name} must be {kind}, got {value!r}")
    return pair


def _padding4(padding, op):
    """conv2d "pad" padding: int, (h, w) or (top, bottom, left, right) -> 4-tuple."""
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        pads = shape_attr(padding, op, "padding")
        if min(pads) < 0:
            raise ValueError(f"{op}: padding must be non-negative, got {padding!r}")
        return pads
    h, w = _pair(padding, "padding", op, allow_zero=True)
    return (h, h, w, w)


def _spatial(x, op, name="input"):
    shape = getattr(x, "shape", None)
    if shape is None:
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    if len(shape) < 2:
        raise ValueError(f"{op}: {name} must be at least 2-D, got shape {tuple(shape)}")
    return shape[-2], shape[-1]


def _same_padding(size, kernel, stride, dilation):
    """TensorFlow's "same": output ceil(size / stride); the odd pixel of padding goes after."""
    if size < 0 and stride > 1:  # the padding depends on the size there
        raise ValueError(f"pad_mode 'same' with stride {stride} pads by the spatial size, which a "
                         f"graph compiled for dimensions of any size learns only when it runs; "
                         f"declare that size, or use pad_mode 'pad' or 'valid'")
    out = -(-size // stride)
    needed = max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - size)
    return needed // 2, needed - needed // 2


def conv2d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0, dilation=1,  # noqa: A002
           groups=1):
    """2-D convolution over NCHW input with an (C_out, C_in / groups, kH, kW) weight.

    pad_mode: "valid" (no padding), "same" (output size ceil(in / stride), padding split
    top/left-first like TensorFlow), or "pad" (explicit `padding`: an int, (h, w) or
    (top, bottom, left, right)). padding must be 0 unless pad_mode is "pad".
    """
    op = "conv2d"
    stride = _pair(stride, "stride", op)
    dilation = _pair(dilation, "dilation", op)
    groups = int_arg(groups, op, "groups")
    if groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    if not isinstance(pad_mode, str) or pad_mode.lower() not in ("valid", "same", "pad"):
        raise ValueError(f"{op}: pad_mode must be 'valid', 'same' or 'pad', got {pad_mode!r}")
    pad_mode = pad_mode.lower()
    pads = _padding4(padding, op)
    if pad_mode != "pad" and any(pads):
        raise ValueError(f"{op}: padding must be 0 when pad_mode is '{pad_mode}', got {padding!r}"
                         " (use pad_mode='pad')")
    if pad_mode == "same":
        h, w = _spatial(input, op)
        kh, kw = _spatial(weight, op, "weight")
        top, bottom = _same_padding(h, kh, stride[0], dilation[0])
        left, right = _same_padding(w, kw, stride[1], dilation[1])
        pads = (top, bottom, left, right)
    return call("conv2d", (input, weight, bias), (stride, pads, dilation, groups))


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
               ceil_mode=False):
    """2-D max pooling over (N, C, H, W) or (C, H, W); with return_indices also returns each
    maximum's flat index h * W + w within its plane (int64)."""
    op = "max_pool2d"
    kernel = _pair(kernel_size, "kernel_size", op)
    stride = kernel if stride is None else _pair(stride, "stride", op)
    padding = _pair(padding, "padding", op, allow_zero=True)
    dilation = _pair(dilation, "dilation", op)
    y, indices = call("max_pool2d", (x,), (kernel, stride, padding, dilation, bool(ceil_mode)))
    return (y, indices) if return_indices else y


def avg_pool2d(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-D average pooling over (N, C, H, W) or (C, H, W) floating-point input."""
    op = "avg_pool2d"
    kernel = _pair(kernel_size, "kernel_size", op)
    stride = _pair(stride, "stride", op)
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        top, bottom, left, right = _padding4(padding, op)
        if top != bottom or left != right:
            raise ValueError(f"{op}: padding must be symmetric (top == bottom, left == right), "
                             f"got {padding!r}")
        padding = (top, left)
    padding = _pair(padding, "padding", op, allow_zero=True)
    if divisor_override is not None:
        divisor_override = int_arg(divisor_override, op, "divisor_override")
        if divisor_override == 0:
            raise ValueError(f"{op}: divisor_override must be None or a nonzero int, got 0")
    return call("avg_pool2d", (input_x,), (kernel, stride, padding, bool(ceil_mode),
                                           bool(count_include_pad), divisor_override))


def apply_momentum(variable, accumulation, learning_rate, gradient, momentum, use_nesterov=False):
    """In place: accumulation = momentum * accumulation + gradient, then variable -= learning_rate
    * (gradient + momentum * accumulation if use_nesterov else accumulation), in one pass
    (MindSpore's ApplyMomentum). Returns variable."""
    return call("apply_momentum", (variable, accumulation, learning_rate, gradient, momentum),
                (bool(use_nesterov),))
