"""Gradient clipping by norm: clip_by_global_norm (a tuple scaled by one global L2 norm) and
clip_by_norm (a tensor or tuple scaled so their joint p-norm is at most max_norm). Both are
compositions of elementwise ops and reductions, so they run eagerly and compile alike."""
import numbers

from kiln import _C
from kiln.common import dtype as mstype
from kiln.ops._core import is_tensor
from kiln.ops.function import elementwise as _ew
from kiln.ops.function import reduce as _r

__all__ = ["clip_by_global_norm", "clip_by_norm"]

_FLOATS = (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64)


def _tensors(x, op):
    """x as a list of floating tensors, and whether x was a single tensor."""
    single = is_tensor(x)
    items = [x] if single else x
    if not single and not isinstance(x, (tuple, list)):
        raise TypeError(f"{op}: x must be a Tensor or a tuple/list of Tensors, got "
                        f"{type(x).__name__}")
    if not items:
        raise ValueError(f"{op}: x must hold at least one Tensor, got an empty sequence")
    for i, t in enumerate(items):
        if not is_tensor(t):
            raise TypeError(f"{op}: x[{i}] must be a Tensor, got {type(t).__name__}")
        if t.dtype not in _FLOATS:
            raise TypeError(f"{op}: x[{i}] must be a floating tensor, got {t.dtype}")
    return list(items), single


def _positive_number(value, name, op):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a float or an int, got {type(value).__name__}")
    if not value > 0:
        raise ValueError(f"For '{op}', the argument '{name}' must > 0.0, but got {value}.")
    return float(value)


def _compute_dtype(items):
    """float64 when any input is float64, else float32 (16-bit inputs are widened for the
    norm, as MindSpore computes it in float32)."""
    return mstype.float64 if any(t.dtype == mstype.float64 for t in items) else mstype.float32


def clip_by_global_norm(x, clip_norm=1.0, use_norm=None):
    """Scale every tensor of x by clip_norm / max(global_norm, clip_norm), where global_norm is
    the L2 norm of all of x's elements together; tensors keep their dtypes and shapes, and the
    result is a tuple (a single Tensor gives a Tensor)."""
    op = "clip_by_global_norm"
    if use_norm is not None:
        raise ValueError(f"{op}: use_norm only supports None (as in MindSpore), got {use_norm!r}")
    clip_norm = _positive_number(clip_norm, "clip_norm", op)
    items, single = _tensors(x, op)
    wide = _compute_dtype(items)
    square_sum = _ew.addn([_r.sum(_ew.square(_ew.cast(t, wide))) for t in items])
    global_norm = _ew.maximum(_ew.sqrt(square_sum), clip_norm)
    scale = _ew.div(clip_norm, global_norm)
    out = tuple(_ew.cast(_ew.mul(_ew.cast(t, wide), scale), t.dtype) for t in items)
    return out[0] if single else out


def _p_norm_sum(t, p, wide):
    """sum |t|^p of one tensor (for the joint p-norm), in dtype `wide`."""
    a = _ew.abs(_ew.cast(t, wide))
    return _r.sum(_ew.square(a)) if p == 2.0 else _r.sum(_ew.pow(a, p))


def clip_by_norm(x, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale x (a Tensor, or a tuple/list of them) by max_norm / (total_norm + 1e-6) when that
    is below 1, where total_norm is the norm_type-norm of all elements together (inf: the
    largest magnitude). Returns a Tensor for a Tensor, else a tuple."""
    op = "clip_by_norm"
    max_norm = _positive_number(max_norm, "max_norm", op)
    if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real) or \
            not norm_type > 0:
        raise ValueError(f"{op}: norm_type must be a positive number or inf, got {norm_type!r}")
    norm_type = float(norm_type)
    items, single = _tensors(x, op)
    wide = _compute_dtype(items)
    if norm_type == float("inf"):
        per_tensor = [_r.amax(_ew.abs(_ew.cast(t, wide))) for t in items]
        total = per_tensor[0]
        for value in per_tensor[1:]:
            total = _ew.maximum(total, value)
    else:
        total = _ew.pow(_ew.addn([_p_norm_sum(t, norm_type, wide) for t in items]),
                        1.0 / norm_type)
    if error_if_nonfinite:
        _check_finite(total, norm_type, op)
    # MindSpore scales only when coef < 1 (a NaN norm leaves x as it is); a select instead of
    # a branch on the tensor's value, so that it compiles
    coef = _ew.div(max_norm, _ew.add(total, 1e-6))
    coef = _ew.where(_ew.less(coef, 1.0), coef, 1.0)
    out = tuple(_ew.cast(_ew.mul(_ew.cast(t, wide), coef), t.dtype) for t in items)
    return out[0] if single else out


def _check_finite(total, norm_type, op):
    """The nonfinite check needs the norm's value: eagerly it raises RuntimeError; inside
    compiled code there is no value yet, so asking for it is refused clearly."""
    if not isinstance(total, _C.TensorBase):
        raise RuntimeError(f"{op}: error_if_nonfinite=True needs the norm's value, which "
                           f"compiled code does not have; call it in PyNative mode or pass "
                           f"error_if_nonfinite=False")
    value = float(total.item())
    if value != value or value in (float("inf"), float("-inf")):
        raise RuntimeError(f"For clip_by_norm, the total norm of order {norm_type} from input "
                           f"is non-finite.")
