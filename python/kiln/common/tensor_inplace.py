"""In-place Tensor methods (add_, copy_, fill_, ...): the result is written into self.

Every method computes its result with kiln's ops and hands it to ``self._write_inplace``:
- PyNative: one registry ``assign`` into self's own memory, so views of self and the tensor self
  views see the write. Under ``grad`` the tape treats it as index assignment does: the values an
  earlier op's gradient rule reads are copied before they are overwritten
  (Tape::PreserveBeforeWrite) and later ops read the written tensor, so gradients stay correct
  instead of raising (docs/compatibility.md, "In-place Tensor methods").
- Graph mode (GraphTensor._write_inplace): ``self[...] = result``, with index assignment's
  meaning (kiln.jit.mutation): the graph makes the updated value and rebinds every name that
  held self; a graph input (an argument, a Parameter) is written back.
The result converts to self's dtype (``int_tensor.add_(1.5)`` stays integer) and must broadcast
to self's shape without growing it.
"""
import numpy as np

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common import tensor_methods as tm
from kiln.ops._core import call, is_tensor


def write_inplace(self, value, op="in-place"):
    """self's elements become `value` (broadcast to self's shape, converted to its dtype), in
    self's memory; returns self."""
    if not is_tensor(value):
        value = ops.full((), value, dtype=self.dtype)
    check_fits(self, value, op)
    if value.dtype != self.dtype:
        value = ops.cast(value, self.dtype)
    if value._shares_storage(self):
        value = value.copy()  # overlapping source and destination (x.copy_(x.T))
    call("assign", (self, ops.broadcast_to(value, tuple(self.shape))))
    return self


def check_fits(self, value, op):
    if not is_tensor(value):
        return
    shape, vshape = tuple(self.shape), tuple(value.shape)
    ok = len(vshape) <= len(shape) and all(
        v in (1, s) for v, s in zip(reversed(vshape), reversed(shape)))
    if not ok:
        raise ValueError(f"Tensor.{op}: the result of shape {vshape} cannot be written into the "
                         f"tensor of shape {shape} (it would have to change shape)")


def _unary_(name):
    def method(self):
        return self._write_inplace(getattr(ops, name)(self), f"{name}_")

    method.__name__ = f"{name}_"
    method.__doc__ = f"self = ops.{name}(self), in place; returns self."
    return method


def _binary_(name):
    def method(self, other):
        return self._write_inplace(getattr(ops, name)(self, other), f"{name}_")

    method.__name__ = f"{name}_"
    method.__doc__ = f"self = ops.{name}(self, other), in place; returns self."
    return method


def add_(self, other, *, alpha=1):
    return self._write_inplace(tm.add(self, other, alpha=alpha), "add_")


def sub_(self, other, *, alpha=1):
    return self._write_inplace(tm.sub(self, other, alpha=alpha), "sub_")


def div_(self, other, *, rounding_mode=None):
    return self._write_inplace(ops.div(self, other, rounding_mode=rounding_mode), "div_")


def copy_(self, src, non_blocking=False):
    """self's elements become src's (broadcast to self, converted to self's dtype)."""
    return self._write_inplace(src, "copy_")


def fill_(self, value):
    return self._write_inplace(value, "fill_")


def zero_(self):
    return self._write_inplace(0, "zero_")


def clamp_(self, min=None, max=None):  # noqa: A002 - MindSpore's argument names
    return self._write_inplace(ops.clamp(self, min, max), "clamp_")


def masked_fill_(self, mask, value):
    return self._write_inplace(tm.masked_fill(self, mask, value), "masked_fill_")


def fill_diagonal_(self, fill_value, wrap=False):
    """The main diagonal (of a 2-D tensor, or of an n-D one with equal sizes) becomes
    fill_value; with wrap, a tall matrix's diagonal restarts every ncols + 1 rows."""
    return self._write_inplace(fill_diagonal(self, fill_value, wrap), "fill_diagonal_")


def fill_diagonal(self, fill_value, wrap=False):
    """A copy of self with its main diagonal set to fill_value (see fill_diagonal_)."""
    mask = _diagonal_mask(tuple(self.shape), wrap)
    return ops.select(mask, ops.full_like(self, fill_value), self)


def _diagonal_mask(shape, wrap):

    if len(shape) < 2 or (len(shape) > 2 and len(set(shape)) != 1):
        raise ValueError(f"fill_diagonal_: the tensor must be 2-D, or n-D with all dimensions "
                         f"equal, got shape {shape}")
    flat = np.zeros(int(np.prod(shape)), np.bool_)
    step = 1 + int(np.sum(np.cumprod(shape[:0:-1])))  # the flat distance between diagonal items
    end = flat.size if wrap or len(shape) > 2 else min(shape[0], shape[1]) * shape[1]
    flat[:end:step] = True
    return ops.cast(ops.reshape(_const(flat), shape), mstype.bool_)


def _const(array):
    from kiln.common._arrays import tensor_of  # noqa: PLC0415

    return tensor_of(array)


def index_put_(self, indices, values, accumulate=False):
    """self[indices] = values (or += with accumulate, repeated indices adding up), in place."""
    return self._write_inplace(index_put(self, indices, values, accumulate), "index_put_")


def index_put(self, indices, values, accumulate=False):
    """A copy of self with self[indices] = values (+= with accumulate); indices is a tuple of
    integer (or one bool) tensors, as PyTorch's index_put."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put: indices must be a tuple or list of tensors, got "
                        f"{type(indices).__name__}")
    out = ops.mul(self, 1)  # a copy: self is written only by index_put_
    idx = _coordinates(indices)
    values = ops.cast(values, self.dtype)
    return call("index_put", (out, values) + idx, (tuple(range(len(idx))), bool(accumulate)))


def _coordinates(indices):
    """Integer index tensors, one per indexed dim: a bool mask stands for the coordinates of its
    True elements (one tensor per dim it covers), as in PyTorch. One op for both modes and both
    accumulate settings: item assignment inside this library function would not compile."""
    out = []
    for index in indices:
        index = index if is_tensor(index) else _const(np.asarray(index))
        if index.dtype == mstype.bool_:
            out.extend(ops.nonzero(index, as_tuple=True))
        else:
            out.append(ops.cast(index, mstype.int64))
    return tuple(out)


def uniform_(self, from_=0, to=1, *, generator=None):
    return self._write_inplace(tm.uniform(self, from_, to), "uniform_")


def normal_(self, mean=0, std=1, *, generator=None):
    samples = ops.randn(*self.shape, dtype=tm._float_of(self.dtype))
    return self._write_inplace(samples * std + mean, "normal_")


def exponential_(self, lambd=1, *, generator=None):
    """Samples of the exponential distribution with rate lambd (inverse transform of uniform
    samples in [0, 1): -log(1 - u) / lambd)."""
    u = ops.rand(*self.shape, dtype=tm._float_of(self.dtype))
    return self._write_inplace(ops.neg(ops.log(1 - u)) / lambd, "exponential_")


def requires_grad_(self, requires_grad=True):
    """Sets whether a Parameter takes part in gradients; returns self."""
    if hasattr(self, "requires_grad"):
        self.requires_grad = requires_grad
    return self


UNARY_ = ("exp", "log", "floor", "sigmoid", "tanh", "sign", "abs", "neg", "sqrt", "relu")
BINARY_ = ("mul", "floor_divide", "remainder", "fmod", "pow")


def install(cls):
    cls._write_inplace = write_inplace
    for name in UNARY_:
        setattr(cls, f"{name}_", _unary_(name))
    for name in BINARY_:
        setattr(cls, f"{name}_", _binary_(name))
    for f in (add_, sub_, div_, copy_, fill_, zero_, clamp_, masked_fill_, fill_diagonal_,
              fill_diagonal, index_put_, index_put, uniform_, normal_, exponential_,
              requires_grad_):
        setattr(cls, f.__name__, f)
