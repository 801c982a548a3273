"""mint.nn.functional's norms, losses and grid_sample (PyTorch's meanings), composed of kiln's
registry ops so their gradients follow from the ops' rules."""
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


def _pick(flat, ix, iy, width, height, weight):
    """weight * flat[n, c, iy * W + ix] with 0 for positions outside the input."""
    inside = ops.logical_and(ops.logical_and(ix >= 0, ix <= width - 1),
                             ops.logical_and(iy >= 0, iy <= height - 1))
    index = ops.cast(ops.clamp(iy, 0, height - 1) * width + ops.clamp(ix, 0, width - 1),
                     mstype.int64)
    n, c = flat.shape[:2]
    index = ops.broadcast_to(ops.expand_dims(index, 1), (n, c, index.shape[1]))
    values = ops.gather_elements(flat, 2, index)
    w = ops.where(inside, weight, ops.zeros_like(weight))
    return values * ops.expand_dims(w, 1)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):  # noqa: A002
    """Samples (N, C, H, W) at the (N, Ho, Wo, 2) grid of normalized (x, y) in [-1, 1]:
    mode 'bilinear' or 'nearest' (ties to even); padding_mode 'zeros', 'border' or
    'reflection'; align_corners (None means False) maps -1 / 1 to the corner pixels' centres."""
    who = "grid_sample"
    x, g = _float_input(who, input), _float_input(who, grid, "grid")
    if len(x.shape) != 4 or len(g.shape) != 4 or g.shape[-1] != 2 or g.shape[0] != x.shape[0]:
        raise ValueError(f"{who}: expected a 4-D input (N, C, H, W) and an (N, Ho, Wo, 2) grid, "
                         f"got {tuple(x.shape)} and {tuple(g.shape)}")
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"{who}: mode must be 'bilinear' or 'nearest', got {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"{who}: padding_mode must be 'zeros', 'border' or 'reflection', got "
                         f"{padding_mode!r}")
    n, c, h, w = x.shape
    ho, wo = g.shape[1:3]
    g = ops.cast(ops.reshape(g, (n, ho * wo, 2)), x.dtype)
    sx = _source(g[:, :, 0], w, padding_mode, bool(align_corners))
    sy = _source(g[:, :, 1], h, padding_mode, bool(align_corners))
    flat = ops.reshape(x, (n, c, h * w))
    if mode == "nearest":
        out = _pick(flat, ops.round(sx), ops.round(sy), w, h, ops.ones_like(sx))
    else:
        x0, y0 = ops.floor(sx), ops.floor(sy)
        fx, fy = sx - x0, sy - y0
        out = (_pick(flat, x0, y0, w, h, (1 - fx) * (1 - fy))
               + _pick(flat, x0 + 1, y0, w, h, fx * (1 - fy))
               + _pick(flat, x0, y0 + 1, w, h, (1 - fx) * fy)
               + _pick(flat, x0 + 1, y0 + 1, w, h, fx * fy))
    return ops.reshape(out, (n, c, ho, wo))
