"""Quantiles and histograms, conv1d/conv3d through conv2d, space/batch reshuffles, sequence
reversal, intopk, and MindSpore's second names of existing functions (*_ext, accumulate_n,
soft_shrink, tensor_muls, fills, upsample, ...)."""
import numpy as np

from kiln.common import dtype as mstype
from kiln.common._arrays import tensor_of
from kiln.ops._core import call, dtype_attr, int_arg, is_tensor
from kiln.ops.function.array import _axis, reshape, transpose

__all__ = [
    "quantile", "nanquantile", "nanmedian", "histc", "intopk", "random_categorical",
    "reverse_sequence", "batch_to_space_nd", "space_to_batch_nd", "conv1d", "batch_dot",
    "accumulate_n", "deepcopy", "fills", "tensor_muls", "soft_shrink", "scalar_to_tensor",
    "tuple_to_array", "dyn_shape", "diff_ext", "float_power_ext", "isnan_ext", "einsum_ext",
    "baddbmm_ext", "upsample",
]


def _tensor(op, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def _quantile(op, input, q, axis, keepdims, ignore_nan):  # noqa: A002
    """Linear interpolation between the sorted values (NumPy's default method)."""
    from kiln.ops.function.reduce_ext import sort  # noqa: PLC0415
    x = _tensor(op, input)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: input must be a float Tensor, got {x.dtype}")
    qs = np.asarray(q.asnumpy() if is_tensor(q) else q, np.float64)
    if qs.ndim > 1 or ((qs < 0) | (qs > 1)).any():
        raise ValueError(f"{op}: q must be a number or a 1-D sequence in [0, 1], got {q!r}")
    if axis is None:
        x, a = reshape(x, (-1,)), 0
    else:
        a = _axis(axis, len(x.shape), op)
    values = sort(x, a)[0]  # NaN sorts last
    n = x.shape[a]
    nan = call("not_equal", (x, x))
    count = call("reduce_sum", (call("cast", (call("logical_not", (nan,)),),
                                     (dtype_attr(x.dtype),)),), ((a,), True, None))
    if not ignore_nan:  # any NaN makes the quantile NaN
        full = call("add", (call("mul", (count, 0.0)), float(n)))  # n, in x's dtype
        count = call("where", (call("reduce_max", (nan,), ((a,), True)), float("nan"), full))
    outs = []
    for qv in np.atleast_1d(qs):
        pos = call("mul", (call("sub", (count, 1.0)), float(qv)))
        low = call("floor", (pos,))
        frac = call("sub", (pos, low))
        lo_i = call("cast", (call("maximum", (low, 0.0)),), (dtype_attr(mstype.int64),))
        hi_i = call("minimum", (call("add", (lo_i, 1)), n - 1))
        from kiln.ops.function.selection import gather_elements  # noqa: PLC0415
        v_lo = gather_elements(values, a, _fit(lo_i, values, a))
        v_hi = gather_elements(values, a, _fit(hi_i, values, a))
        out = call("add", (v_lo, call("mul", (call("sub", (v_hi, v_lo)), frac))))
        empty = call("less", (count, 1.0))
        out = call("where", (call("logical_or", (empty, call("not_equal", (count, count)))),
                             float("nan"), out))
        outs.append(out if keepdims else call("squeeze", (out,), ((a,),)))
    if qs.ndim == 0:
        return outs[0]
    from kiln.ops.function.array import stack  # noqa: PLC0415
    return stack(outs, 0)


def _fit(index, values, axis):
    """index (size 1 along axis) broadcast to values' other dims, for gather_elements."""
    shape = list(values.shape)
    shape[axis] = 1
    return call("broadcast_to", (index,), (tuple(shape),))


def quantile(input, q, axis=None, keepdims=False):  # noqa: A002
    """The q-th quantiles along axis (None: all elements); NaN where a slice holds NaN."""
    return _quantile("quantile", input, q, axis, keepdims, False)


def nanquantile(input, q, axis=None, keepdims=False):  # noqa: A002
    """quantile ignoring NaN (NaN only where a slice is all NaN)."""
    return _quantile("nanquantile", input, q, axis, keepdims, True)


def nanmedian(input, axis=-1, keepdims=False):  # noqa: A002
    """(the lower median of the non-NaN values along axis, its int64 index)."""
    from kiln.ops.function.reduce_ext import argsort  # noqa: PLC0415
    from kiln.ops.function.selection import gather_elements  # noqa: PLC0415
    x = _tensor("nanmedian", input)
    a = _axis(axis, len(x.shape), "nanmedian") if x.shape else 0
    if not x.shape:
        return x, call("cast", (call("mul", (x, 0)),), (dtype_attr(mstype.int64),))
    order = call("cast", (argsort(x, a),), (dtype_attr(mstype.int64),))
    kept = call("reduce_sum", (call("equal", (x, x)),), ((a,), True, dtype_attr(mstype.int64)))
    mid = call("floor_div", (call("maximum", (call("sub", (kept, 1)), 0)), 2))
    idx = gather_elements(order, a, mid)
    val = gather_elements(x, a, idx)
    if not keepdims:
        val, idx = call("squeeze", (val,), ((a,),)), call("squeeze", (idx,), ((a,),))
    return val, idx


def histc(input, bins=100, min=0.0, max=0.0):  # noqa: A001,A002
    """Counts of input's elements in `bins` equal bins over [min, max] (both 0: the data's
    range); elements outside are ignored. Same dtype as input."""
    x = reshape(_tensor("histc", input), (-1,))
    bins = int_arg(bins, "histc", "bins")
    if bins <= 0:
        raise ValueError(f"histc: bins must be positive, got {bins}")
    xf = x if x.dtype.is_floating_point else call("cast", (x,), (dtype_attr(mstype.float32),))
    lo, hi = float(min), float(max)
    if lo == hi == 0.0:
        lo_t, hi_t = call("reduce_min", (xf,), (None, False)), call("reduce_max", (xf,),
                                                                    (None, False))
    else:
        if lo > hi:
            raise ValueError(f"histc: max ({hi}) must not be less than min ({lo})")
        lo_t, hi_t = lo, hi
    width = call("sub", (hi_t, lo_t))
    width = call("where", (call("equal", (width, 0.0)), 1.0, width)) if is_tensor(width) else \
        (width or 1.0)
    pos = call("floor", (call("mul", (call("div", (call("sub", (xf, lo_t)), width)), bins)),))
    pos = call("minimum", (pos, float(bins - 1)))  # the top edge counts in the last bin
    inside = call("logical_and", (call("greater_equal", (xf, lo_t)),
                                  call("less_equal", (xf, hi_t))))
    pos = call("where", (inside, pos, -1.0))
    ids = call("cast", (pos,), (dtype_attr(mstype.int64),))
    hot = call("one_hot", (ids,), (bins, -1, 1, 0, dtype_attr(mstype.int64), ""))
    counts = call("reduce_sum", (hot,), ((0,), False, None))
    return call("cast", (counts,), (dtype_attr(x.dtype),))


def intopk(x1, x2, k):
    """Whether each row's target class x2[i] is among the k largest of x1[i] (ties count in)."""
    from kiln.ops.function.selection import gather_elements  # noqa: PLC0415
    _tensor("intopk", x1, "x1")
    target = gather_elements(x1, 1, reshape(x2, (-1, 1)))
    larger = call("reduce_sum", (call("greater", (x1, target)),), ((1,), False,
                                                                   dtype_attr(mstype.int64)))
    return call("less", (larger, int_arg(k, "intopk", "k")))


def random_categorical(logits, num_sample, seed=0, dtype=mstype.int64):
    """num_sample class draws per row of logits (softmax probabilities)."""
    from kiln.ops.function.random_ext import multinomial  # noqa: PLC0415
    seed = int_arg(seed, "random_categorical", "seed")
    probs = call("softmax", (_tensor("random_categorical", logits, "logits"),), (-1,))
    out = multinomial(probs, num_sample, True, seed or None)
    return call("cast", (out,), (dtype_attr(dtype),))


def reverse_sequence(x, seq_lengths, seq_dim, batch_dim=0):
    """Each batch entry b reversed in its first seq_lengths[b] steps along seq_dim."""
    _tensor("reverse_sequence", x, "x")
    s = _axis(seq_dim, len(x.shape), "reverse_sequence", "seq_dim")
    b = _axis(batch_dim, len(x.shape), "reverse_sequence", "batch_dim")
    n = x.shape[s]
    lens = reshape(call("cast", (seq_lengths,), (dtype_attr(mstype.int64),)), (-1,))
    shape = [1] * len(x.shape)
    shape[b] = x.shape[b]
    lens = reshape(lens, tuple(shape))
    steps_shape = [1] * len(x.shape)
    steps_shape[s] = n
    t = tensor_of(np.arange(n, dtype=np.int64).reshape(steps_shape))
    src = call("where", (call("less", (t, lens)), call("sub", (call("sub", (lens, 1)), t)), t))
    from kiln.ops.function.selection import gather_elements  # noqa: PLC0415
    full = call("broadcast_to", (src,), (tuple(x.shape),))
    return gather_elements(x, s, full)


def space_to_batch_nd(input_x, block_size, paddings):
    """Zero-pads the last len(paddings) (spatial) dims of (N, C, *spatial), then moves each
    block offset into the batch: output batch (offset * N + n)."""
    x = _tensor("space_to_batch_nd", input_x, "input_x")
    m = len(paddings)
    blocks = [int(block_size)] * m if isinstance(block_size, int) else list(block_size)
    from kiln.ops.function.spatial import pad  # noqa: PLC0415
    flat_pad = tuple(int(v) for p in reversed(paddings) for v in p)
    x = pad(x, flat_pad) if any(flat_pad) else x
    lead, sp = list(x.shape[:-m]), list(x.shape[-m:])
    if any(d % b for d, b in zip(sp, blocks)):
        raise ValueError(f"space_to_batch_nd: padded spatial shape {tuple(sp)} is not a "
                         f"multiple of block_size {tuple(blocks)}")
    k = len(lead)
    y = reshape(x, tuple(lead) + tuple(d for i in range(m) for d in (sp[i] // blocks[i],
                                                                      blocks[i])))
    perm = [k + 2 * i + 1 for i in range(m)] + list(range(k)) + [k + 2 * i for i in range(m)]
    y = transpose(y, tuple(perm))
    return reshape(y, (int(np.prod(blocks)) * lead[0],) + tuple(lead[1:])
                   + tuple(sp[i] // blocks[i] for i in range(m)))


def batch_to_space_nd(input_x, block_shape, crops):
    """The inverse of space_to_batch_nd: batch blocks back into the spatial dims, cropped."""
    x = _tensor("batch_to_space_nd", input_x, "input_x")
    m = len(crops)
    blocks = [int(block_shape)] * m if isinstance(block_shape, int) else list(block_shape)
    prod = int(np.prod(blocks))
    if x.shape[0] % prod:
        raise ValueError(f"batch_to_space_nd: batch {x.shape[0]} is not a multiple of "
                         f"{prod} blocks")
    lead, sp = [x.shape[0] // prod] + list(x.shape[1:-m]), list(x.shape[-m:])
    k = len(lead)
    y = reshape(x, tuple(blocks) + tuple(lead) + tuple(sp))
    perm = list(range(m, m + k)) + [d for i in range(m) for d in (m + k + i, i)]
    y = reshape(transpose(y, tuple(perm)), tuple(lead) + tuple(sp[i] * blocks[i]
                                                                for i in range(m)))
    index = (slice(None),) * k + tuple(slice(int(c[0]), y.shape[k + i] - int(c[1]))
                                       for i, c in enumerate(crops))
    from kiln.ops import _indexing  # noqa: PLC0415
    return _indexing.getitem(y, index)


def conv1d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0,  # noqa: A002
           dilation=1, groups=1):
    """1-D convolution (N, C, L) as a 2-D one over (N, C, 1, L)."""
    from kiln.ops.function.nn import conv2d  # noqa: PLC0415
    x, w = _tensor("conv1d", input), _tensor("conv1d", weight, "weight")
    stride, dilation = (int_arg(_first(v), "conv1d", n) for v, n in ((stride, "stride"),
                                                                       (dilation, "dilation")))
    groups = int_arg(groups, "conv1d", "groups")
    pad = int_arg(_first(padding), "conv1d", "padding")
    pad2 = (0, 0, pad, pad)
    out = conv2d(call("expand_dims", (x,), (2,)), call("expand_dims", (w,), (2,)), None,
                 (1, stride), pad_mode, pad2 if pad_mode == "pad" else 0, (1, dilation), groups)
    out = call("squeeze", (out,), ((2,),))
    if bias is not None:
        out = call("add", (out, reshape(bias, (1, -1, 1))))
    return out


def _first(v):
    return v[0] if isinstance(v, (tuple, list)) else v


def batch_dot(x1, x2, axes=None):
    """Per-batch dot products summing x1's axes[0] with x2's axes[1] (default: x1's last with
    x2's last for 2-D, x2's second-to-last otherwise)."""
    a, b = _tensor("batch_dot", x1, "x1"), _tensor("batch_dot", x2, "x2")
    if axes is None:
        axes = (len(a.shape) - 1, len(b.shape) - 1 if len(b.shape) == 2 else len(b.shape) - 2)
    elif not isinstance(axes, (tuple, list)):
        axes = (int_arg(axes, "batch_dot", "axes"),) * 2
    ax1 = _axis(axes[0], len(a.shape), "batch_dot", "axes")
    ax2 = _axis(axes[1], len(b.shape), "batch_dot", "axes")
    if ax1 == 0 or ax2 == 0:
        raise ValueError("batch_dot: axes must not include the batch axis 0")
    a2 = transpose(a, tuple(i for i in range(len(a.shape)) if i != ax1) + (ax1,))
    b2 = transpose(b, (0, ax2) + tuple(i for i in range(1, len(b.shape)) if i != ax2))
    bs, k = a.shape[0], a.shape[ax1]
    left = reshape(a2, (bs, -1, k))
    right = reshape(b2, (bs, k, -1))
    out = call("matmul", (left, right))
    shape = tuple(a2.shape[1:-1]) + tuple(b2.shape[2:])
    out = reshape(out, (bs,) + shape)
    return call("expand_dims", (out,), (1,)) if not shape else out


def accumulate_n(x):
    """The sum of a list of tensors (addn)."""
    from kiln.ops.function.elementwise import addn  # noqa: PLC0415
    return addn(x)


def deepcopy(input_x):
    """A new tensor holding input_x's values."""
    x = _tensor("deepcopy", input_x, "input_x")
    return call("cast", (x,), (dtype_attr(x.dtype),))  # a copy, never a view


def fills(x, value):
    """A tensor like x filled with value."""
    from kiln.ops.function.array import full_like  # noqa: PLC0415
    return full_like(_tensor("fills", x, "x"), value)


def tensor_muls(input, other):  # noqa: A002
    return call("mul", (input, other))


def soft_shrink(input, lambd=0.5):  # noqa: A002
    from kiln.ops.function.activation import softshrink  # noqa: PLC0415
    return softshrink(input, lambd)


def scalar_to_tensor(input_x, dtype=mstype.float32):
    """A 0-d tensor of dtype holding the number input_x."""
    if isinstance(input_x, bool) or not isinstance(input_x, (int, float)):
        raise TypeError(f"scalar_to_tensor: input_x must be an int or float, got "
                        f"{type(input_x).__name__}")
    return call("cast", (tensor_of(np.asarray(input_x, np.float64)),), (dtype_attr(dtype),))


def tuple_to_array(input_x):
    """A 1-D tensor of a tuple of numbers (int32 for ints, float32 for floats: MindSpore's)."""
    if not isinstance(input_x, (tuple, list)) or not input_x:
        raise TypeError("tuple_to_array: input_x must be a non-empty tuple of numbers")
    floats = any(isinstance(v, float) for v in input_x)
    return tensor_of(np.asarray(input_x, np.float32 if floats else np.int32))


def dyn_shape(input_x):
    """The shape as an int64 tensor: in a graph compiled for dimensions of any size (declared
    None), the shape the graph runs with (the tensor_shape op)."""
    return call("tensor_shape", (_tensor("dyn_shape", input_x, "input_x"),))


def diff_ext(input, n=1, dim=-1, prepend=None, append=None):  # noqa: A002
    from kiln.ops.function.reduce_ext import diff  # noqa: PLC0415
    return diff(input, n, int_arg(dim, "diff_ext", "dim"), prepend, append)


def float_power_ext(input, exponent):  # noqa: A002
    from kiln.ops.function.math_ext import float_power  # noqa: PLC0415
    return float_power(input, exponent)


def isnan_ext(tensor):
    return call("not_equal", (tensor, tensor))


def einsum_ext(equation, *operands):
    from kiln.ops.function.misc_ext import einsum  # noqa: PLC0415
    return einsum(equation, *operands)


def baddbmm_ext(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    from kiln.ops.function.linalg_ext import baddbmm  # noqa: PLC0415
    return baddbmm(input, batch1, batch2, beta, alpha)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002
             recompute_scale_factor=None):
    """ops.interpolate under its other name."""
    from kiln.ops.function.spatial import interpolate  # noqa: PLC0415
    return interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor)
