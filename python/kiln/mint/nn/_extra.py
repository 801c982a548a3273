"""mint.nn.functional's norms, losses and grid_sample (PyTorch's meanings), composed of kiln's
registry ops so their gradients follow from the ops' rules."""
import itertools
import math

from kiln import ops
from kiln.common import dtype as mstype
from kiln.ops._core import is_tensor

_REDUCTIONS = ("none", "mean", "sum")


def _float_input(who, x, name="input"):
    if not is_tensor(x):
        raise TypeError(f"{who}: {name} must be a Tensor, got {type(x).__name__}")
    if x.dtype not in mstype.float_type:
        raise TypeError(f"{who}: {name} must be a floating-point Tensor, got {x.dtype}")
    return x


def _axes(x, dim):
    if dim is None:
        return tuple(range(len(x.shape)))
    return (dim,) if isinstance(dim, int) else tuple(dim)


def vector_norm(x, p, dim, keepdim):
    """sum(|x| ** p) ** (1 / p) over dim (all axes for None); inf / -inf: the largest /
    smallest |x|; 0: the count of nonzeros."""
    axes = _axes(x, dim)
    if p == math.inf:
        return ops.amax(ops.abs(x), axes, keepdim)
    if p == -math.inf:
        return ops.amin(ops.abs(x), axes, keepdim)
    if p == 0:
        return ops.sum(ops.cast(ops.ne(x, 0), x.dtype), axes, keepdim)
    if p == 1:
        return ops.sum(ops.abs(x), axes, keepdim)
    if p == 2:
        return ops.sqrt(ops.sum(x * x, axes, keepdim))
    return ops.pow(ops.sum(ops.pow(ops.abs(x), p), axes, keepdim), 1.0 / p)


def norm(input, p="fro", dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """PyTorch's norm: p 'fro' (the 2-norm of all or `dim`'s elements), 'nuc' (the sum of
    singular values of the matrices over `dim`, the last two axes by default) or a number (the
    vector p-norm over `dim`, all elements when None)."""
    who = "norm"
    x = _float_input(who, input if dtype is None else ops.cast(input, dtype))
    if p == "fro":
        return vector_norm(x, 2, dim, keepdim)
    if p == "nuc":
        return ops.norm(x, "nuc", (-2, -1) if dim is None else dim, keepdim)
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise ValueError(f"{who}: p must be 'fro', 'nuc' or a number, got {p!r}")
    return vector_norm(x, float(p), dim, keepdim)


def normalize(input, p=2.0, dim=1, eps=1e-12):  # noqa: A002
    """input / max(||input||_p over dim, eps)."""
    x = _float_input("normalize", input)
    return x / ops.clamp(vector_norm(x, float(p), dim, True), eps, None)


def _reduce(who, loss, reduction, allowed=_REDUCTIONS):
    if reduction not in allowed:
        raise ValueError(f"{who}: reduction must be one of {allowed}, got {reduction!r}")
    if reduction == "sum":
        return ops.sum(loss)
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "batchmean":
        return ops.sum(loss) / (loss.shape[0] if loss.shape else 1)
    return loss


def kl_div(input, target, reduction="mean", log_target=False):  # noqa: A002
    """Pointwise target * (log(target) - input) (input: log-probabilities; target:
    probabilities, or log-probabilities when log_target), 0 where target is 0; reduction
    'none', 'sum', 'mean' (over all elements) or 'batchmean' (the sum over the batch size)."""
    who = "kl_div"
    x, t = _float_input(who, input), _float_input(who, target, "target")
    if log_target:
        loss = ops.exp(t) * (t - x)
    else:
        safe = ops.where(t > 0, t, ops.ones_like(t))
        loss = ops.where(t > 0, t * (ops.log(safe) - x), ops.zeros_like(t * x))
    return _reduce(who, loss, reduction, _REDUCTIONS + ("batchmean",))


def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) * ((size - 1) / 2)
    return ((coord + 1) * size - 1) / 2


def _reflect(coord, low, high):
    """coord reflected into [low, high] (as often as it takes)."""
    if high <= low:
        return ops.zeros_like(coord)
    span = high - low
    dist = ops.abs(coord - low)
    flips = ops.floor(dist / span)
    extra = dist - flips * span
    even = ops.equal(ops.remainder(flips, 2), 0)
    return ops.where(even, extra + low, span - extra + low)


def _source(coord, size, padding_mode, align_corners):
    x = _unnormalize(coord, size, align_corners)
    if padding_mode == "reflection":
        x = _reflect(x, 0.0, size - 1.0) if align_corners else _reflect(x, -0.5, size - 0.5)
    if padding_mode in ("border", "reflection"):
        x = ops.clamp(x, 0.0, size - 1.0)
    return x


def _pick(flat, index, sizes, weight):
    """weight * flat[n, c, flat position of index] (index: per spatial axis, (N, P) floats),
    0 for positions outside the input."""
    inside, position, stride = None, None, 1
    for i, size in zip(reversed(index), reversed(sizes)):
        ok = ops.logical_and(i >= 0, i <= size - 1)
        inside = ok if inside is None else ops.logical_and(inside, ok)
        term = ops.clamp(i, 0, size - 1) * stride
        position = term if position is None else position + term
        stride *= size
    position = ops.cast(position, mstype.int64)
    n, c = flat.shape[:2]
    position = ops.broadcast_to(ops.expand_dims(position, 1), (n, c, position.shape[1]))
    values = ops.gather_elements(flat, 2, position)
    w = ops.where(inside, weight, ops.zeros_like(weight))
    return values * ops.expand_dims(w, 1)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):  # noqa: A002
    """Samples (N, C, H, W) at the (N, Ho, Wo, 2) grid of normalized (x, y) in [-1, 1], or
    (N, C, D, H, W) at an (N, Do, Ho, Wo, 3) grid of (x, y, z): mode 'bilinear' (trilinear
    for 5-D) or 'nearest' (ties to even); padding_mode 'zeros', 'border' or 'reflection';
    align_corners (None means False) maps -1 / 1 to the corner pixels' centres."""
    who = "grid_sample"
    x, g = _float_input(who, input), _float_input(who, grid, "grid")
    k = len(x.shape) - 2
    if k not in (2, 3) or len(g.shape) != k + 2 or g.shape[-1] != k or g.shape[0] != x.shape[0]:
        raise ValueError(f"{who}: expected a 4-D input (N, C, H, W) with an (N, Ho, Wo, 2) grid "
                         f"or a 5-D input with an (N, Do, Ho, Wo, 3) grid, got "
                         f"{tuple(x.shape)} and {tuple(g.shape)}")
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"{who}: mode must be 'bilinear' or 'nearest', got {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"{who}: padding_mode must be 'zeros', 'border' or 'reflection', got "
                         f"{padding_mode!r}")
    n, c = x.shape[:2]
    sizes, out = tuple(x.shape[2:]), tuple(g.shape[1:-1])
    points = math.prod(out)
    g = ops.cast(ops.reshape(g, (n, points, k)), x.dtype)
    # grid component i addresses spatial axis k - 1 - i (x: width, y: height, z: depth)
    source = [_source(g[:, :, k - 1 - a], sizes[a], padding_mode, bool(align_corners))
              for a in range(k)]
    flat = ops.reshape(x, (n, c, math.prod(sizes)))
    if mode == "nearest":
        result = _pick(flat, [ops.round(v) for v in source], sizes, ops.ones_like(source[0]))
    else:
        low = [ops.floor(v) for v in source]
        frac = [v - f for v, f in zip(source, low)]
        result = None
        for corner in itertools.product((0, 1), repeat=k):
            weight = None
            for bit, f in zip(corner, frac):
                w = f if bit else 1 - f
                weight = w if weight is None else weight * w
            part = _pick(flat, [f + bit for f, bit in zip(low, corner)], sizes, weight)
            result = part if result is None else result + part
    return ops.reshape(result, (n, c) + out)
