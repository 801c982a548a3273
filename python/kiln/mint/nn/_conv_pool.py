"""mint.nn.functional's convolutions, pools and fold (PyTorch's argument names and defaults:
`padding` an int, a tuple or 'same'/'valid', `stride=None` meaning the kernel size), composed
of kiln's registry ops so their gradients follow from the ops' rules."""
from kiln import ops
from kiln.nn import _functional as F
from kiln.ops import _core
from kiln.ops._core import int_arg, is_tensor, shape_attr


def _tuple(value, n, who, name, minimum=0):
    items = shape_attr(value, who, name)
    items = items * n if len(items) == 1 else items
    if len(items) != n or min(items) < minimum:
        raise ValueError(f"{who}: {name} must be an int or {n} ints >= {minimum}, got {value!r}")
    return items


def _check_input(who, x, ranks):
    if not is_tensor(x):
        raise TypeError(f"{who}: input must be a Tensor, got {type(x).__name__}")
    if len(x.shape) not in ranks:
        raise ValueError(f"{who}: expected a {' or '.join(f'{r}-D' for r in ranks)} input, got "
                         f"shape {tuple(x.shape)}")


def _conv_pads(who, padding, kernel, stride, dilation):
    """(before, after) per spatial axis; 'same' splits d * (k - 1) with the odd one after."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding != "same":
            raise ValueError(f"{who}: padding must be 'same', 'valid', an int or a tuple, got "
                             f"{padding!r}")
        if any(s != 1 for s in stride):
            raise ValueError(f"{who}: padding='same' is not supported for strided "
                             f"convolutions, got stride {stride}")
        return tuple((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
                     for k, d in zip(kernel, dilation))
    return tuple((p, p) for p in _tuple(padding, n, who, "padding"))


def _batched(who, x, rank):
    """x with a batch axis (unbatched inputs are one-sample batches) and whether one was added."""
    _check_input(who, x, (rank - 1, rank))
    if len(x.shape) == rank - 1:
        return ops.expand_dims(x, 0), True
    return x, False


def _unbatch(y, added):
    return ops.squeeze(y, 0) if added else y


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """2-D convolution of (N, C_in, H, W) or (C_in, H, W) with a (C_out, C_in / groups, kh, kw)
    weight."""
    who = "conv2d"
    x, added = _batched(who, input, 4)
    kernel = tuple(weight.shape[2:])
    stride = _tuple(stride, 2, who, "stride", 1)
    dilation = _tuple(dilation, 2, who, "dilation", 1)
    (t, b), (left, r) = _conv_pads(who, padding, kernel, stride, dilation)
    y = ops.conv2d(x, weight, bias, stride, "pad", (t, b, left, r), dilation, groups)
    return _unbatch(y, added)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """1-D convolution of (N, C_in, L) or (C_in, L): conv2d over a height-1 plane."""
    who = "conv1d"
    x, added = _batched(who, input, 3)
    if len(weight.shape) != 3:
        raise ValueError(f"{who}: weight must be 3-D (C_out, C_in / groups, k), got shape "
                         f"{tuple(weight.shape)}")
    stride = _tuple(stride, 1, who, "stride", 1)
    dilation = _tuple(dilation, 1, who, "dilation", 1)
    pad = padding if isinstance(padding, str) else _tuple(padding, 1, who, "padding")
    pads = _conv_pads(who, pad, tuple(weight.shape[2:]), stride, dilation)[0]
    y = ops.conv2d(ops.expand_dims(x, 2), ops.expand_dims(weight, 2), bias, (1,) + stride,
                   "pad", (0, 0) + pads, (1,) + dilation, groups)
    return _unbatch(ops.squeeze(y, 2), added)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """3-D convolution of (N, C_in, D, H, W) or (C_in, D, H, W)."""
    from kiln.nn.layer.conv3d import conv3d_taps  # noqa: PLC0415

    who = "conv3d"
    x, added = _batched(who, input, 5)
    stride = _tuple(stride, 3, who, "stride", 1)
    dilation = _tuple(dilation, 3, who, "dilation", 1)
    pads = _conv_pads(who, padding, tuple(weight.shape[2:]), stride, dilation)
    if x.shape[1] != weight.shape[1] * groups:
        raise ValueError(f"{who}: input has {x.shape[1]} channels, weight {tuple(weight.shape)} "
                         f"with groups={groups} expects {weight.shape[1] * groups}")
    y = conv3d_taps(x, ops.cast(weight, x.dtype), stride, sum(pads, ()), dilation, groups)
    if bias is not None:
        y = y + F.reshape(ops.cast(bias, y.dtype), (1, -1, 1, 1, 1))
    return _unbatch(y, added)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,  # noqa: A002
                     groups=1, dilation=1):
    """Transposed 2-D convolution (the adjoint of conv2d) with a (C_in, C_out / groups, kh, kw)
    weight: H_out = (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1."""
    who = "conv_transpose2d"
    x, added = _batched(who, input, 4)
    stride = _tuple(stride, 2, who, "stride", 1)
    dilation = _tuple(dilation, 2, who, "dilation", 1)
    pads = _tuple(padding, 2, who, "padding")
    extra = _tuple(output_padding, 2, who, "output_padding")
    groups = int_arg(groups, who, "groups")
    if any(o >= max(s, d) for o, s, d in zip(extra, stride, dilation)):
        raise ValueError(f"{who}: output_padding must be smaller than stride or dilation, got "
                         f"{output_padding}")
    if x.shape[1] != weight.shape[0]:
        raise ValueError(f"{who}: input has {x.shape[1]} channels, weight {tuple(weight.shape)} "
                         f"expects {weight.shape[0]}")
    sizes = tuple((n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, s, p, d, k, o in
                  zip(x.shape[2:], stride, pads, dilation, weight.shape[2:], extra))
    if min(sizes) < 1:
        raise ValueError(f"{who}: the output size {sizes} is empty for input {tuple(x.shape)}")
    attrs = ((x.shape[0], weight.shape[1] * groups) + sizes, stride,
             (pads[0], pads[0], pads[1], pads[1]), dilation, groups)
    y = _core.call("conv2d_backward_input", (x, ops.cast(weight, x.dtype)), attrs)
    if bias is not None:
        y = y + F.reshape(ops.cast(bias, y.dtype), (1, -1, 1, 1))
    return _unbatch(y, added)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True):
    stride = kernel_size if stride is None else stride
    return ops.avg_pool1d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    stride = kernel_size if stride is None else stride
    return ops.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                          divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """Mean over 3-D windows of (N, C, D, H, W) or (C, D, H, W)."""
    from kiln.nn.layer.pool3d import AvgPool3d  # noqa: PLC0415

    _check_input("avg_pool3d", input, (4, 5))
    stride = kernel_size if stride is None else stride
    return AvgPool3d(kernel_size, stride, "pad", padding, ceil_mode, count_include_pad,
                     divisor_override)(input)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    return ops.max_pool2d(input, kernel_size, stride, padding, dilation, return_indices,
                          ceil_mode)


def adaptive_max_pool1d(input, output_size, return_indices=False):  # noqa: A002
    """Maximum of (N, C, L) or (C, L) over output_size windows; with return_indices also each
    maximum's index along L (int64)."""
    _check_input("adaptive_max_pool1d", input, (2, 3))
    size = int_arg(output_size, "adaptive_max_pool1d", "output_size")
    axis = len(input.shape) - 1
    out = ops.adaptive_max_pool2d(ops.expand_dims(input, axis), (1, size), return_indices)
    if return_indices:
        return ops.squeeze(out[0], axis), ops.squeeze(out[1], axis)
    return ops.squeeze(out, axis)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """Sums the sliding blocks (N, C * kh * kw, L) or (C * kh * kw, L) back into (N, C, H, W)
    (the adjoint of unfold): block (i, j) of every window is added at its input position."""
    who = "fold"
    x, added = _batched(who, input, 3)
    size = _tuple(output_size, 2, who, "output_size", 1)
    (kh, kw) = _tuple(kernel_size, 2, who, "kernel_size", 1)
    dil = _tuple(dilation, 2, who, "dilation", 1)
    pad = _tuple(padding, 2, who, "padding")
    step = _tuple(stride, 2, who, "stride", 1)
    counts = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n, p, d, k, s in
                   zip(size, pad, dil, (kh, kw), step))
    n, ck, blocks = x.shape
    if ck % (kh * kw) or min(counts) < 1 or blocks != counts[0] * counts[1]:
        raise ValueError(f"{who}: input {tuple(input.shape)} does not hold C * {kh * kw} rows "
                         f"of {counts[0]} * {counts[1]} blocks for output_size {size}")
    c = ck // (kh * kw)
    x = F.reshape(x, (n, c, kh, kw) + counts)
    canvas = tuple(s + 2 * p for s, p in zip(size, pad))
    total = None
    for i in range(kh):
        for j in range(kw):
            part = _spread(x[:, :, i, j], step, counts)
            spans = tuple(part.shape[2:])
            at = (i * dil[0], j * dil[1])
            part = ops.pad(part, (at[1], canvas[1] - at[1] - spans[1],
                                  at[0], canvas[0] - at[0] - spans[0]))
            total = part if total is None else total + part
    out = ops.pad(total, (-pad[1], -pad[1], -pad[0], -pad[0]))
    return _unbatch(out, added)


def _spread(block, step, counts):
    """(N, C, Lh, Lw) with stride - 1 zeros between neighbours along both axes."""
    n, c = block.shape[:2]
    if step == (1, 1):
        return block
    grid = F.reshape(block, (n, c, counts[0], 1, counts[1], 1))
    grid = ops.pad(grid, (0, step[1] - 1, 0, 0, 0, step[0] - 1))
    grid = F.reshape(grid, (n, c, counts[0] * step[0], counts[1] * step[1]))
    return grid[:, :, :(counts[0] - 1) * step[0] + 1, :(counts[1] - 1) * step[1] + 1]
