"""Tensor methods written with kiln's ops (MindSpore 2.10's signatures), installed on Tensor."""
import builtins

from kiln import ops
from kiln.common import dtype as mstype
from kiln.ops import _indexing
from kiln.ops._core import call, int_arg, is_runtime_size, is_tensor


def _unary(name):
    def method(self):
        return getattr(ops, name)(self)

    method.__name__ = name
    method.__doc__ = f"Same as ``ops.{name}(self)``."
    return method


def _binary(name):
    def method(self, other):
        return getattr(ops, name)(self, other)

    method.__name__ = name
    method.__doc__ = f"Same as ``ops.{name}(self, other)``."
    return method


UNARY = ("absolute", "cos", "expm1", "floor", "invert", "log1p", "logical_not", "neg",
         "negative", "rsqrt", "sign", "sin", "square")
BINARY = ("bmm", "equal", "floor_divide", "fmod", "ge", "greater", "greater_equal", "gt", "le",
          "less", "less_equal", "logical_and", "logical_or", "logical_xor", "lt", "masked_select",
          "maximum", "minimum", "mm", "mul", "multiply", "ne", "not_equal", "pow", "remainder")


# ---- ops whose method signature differs from the function ----
def add(self, other, *, alpha=1):
    """self + alpha * other."""
    return ops.add(self, other if alpha == 1 else ops.mul(other, alpha))


def sub(self, other, *, alpha=1):
    """self - alpha * other."""
    return ops.sub(self, other if alpha == 1 else ops.mul(other, alpha))


def subtract(self, other, *, alpha=1):
    return sub(self, other, alpha=alpha)


def div(self, other, *, rounding_mode=None):
    return ops.div(self, other, rounding_mode=rounding_mode)


def divide(self, other, *, rounding_mode=None):
    return ops.div(self, other, rounding_mode=rounding_mode)


def true_divide(self, other):
    return ops.div(self, other)


def amax(self, axis=None, keepdims=False, *, initial=None, where=None):
    return ops.amax(self, axis, keepdims, initial=initial, where=where)


def amin(self, axis=None, keepdims=False, *, initial=None, where=None):
    return ops.amin(self, axis, keepdims, initial=initial, where=where)


def clip(self, min=None, max=None):  # noqa: A002 - MindSpore's argument names
    return ops.clip(self, min, max)


def hardshrink(self, lambd=0.5):
    return ops.hardshrink(self, lambd)


def logsumexp(self, dim, keepdim=False):
    return ops.logsumexp(self, dim, keepdim)


def nonzero(self, *, as_tuple=False):
    return ops.nonzero(self, as_tuple)


def round(self, decimals=0):  # noqa: A001
    return ops.round(self, decimals=decimals)


def roll(self, shifts, dims=None):
    return ops.roll(self, shifts, dims)


def tril(self, diagonal=0):
    return ops.tril(self, diagonal)


def triu(self, diagonal=0):
    return ops.triu(self, diagonal)


def narrow(self, dim, start, length):
    return ops.narrow(self, dim, start, length)


def unfold(self, kernel_size, dilation=1, padding=0, stride=1):
    return ops.unfold(self, kernel_size, dilation, padding, stride)


def where(self, condition, y):
    """self where condition holds, else y."""
    return ops.where(condition, self, y)


def chunk(self, chunks, dim=0, *, axis=None):
    """Views of equal size along dim (``axis=`` is MindSpore's older keyword)."""
    return ops.chunk(self, chunks, dim if axis is None else axis)


def split(self, split_size, dim=0, *, axis=None, split_size_or_sections=None):
    sizes = split_size if split_size_or_sections is None else split_size_or_sections
    return ops.split(self, sizes, dim if axis is None else axis)


def tile(self, dims=None, *, reps=None):
    return ops.tile(self, dims if reps is None else reps)


def repeat(self, *repeats):
    """PyTorch's repeat: the tensor tiled `repeats[i]` times along each axis; leading entries
    beyond self's rank add axes."""
    repeats = _sizes(repeats)
    if len(repeats) < self.ndim:
        raise ValueError(f"Tensor.repeat: repeats {repeats} has fewer entries than the tensor "
                         f"has dimensions ({self.ndim})")
    return ops.tile(self, repeats)


def fill(self, value):
    """A tensor of self's shape and dtype holding value (a number or a 0-d tensor)."""
    if is_tensor(value):
        return ops.broadcast_to(ops.cast(value, self.dtype), self.shape)
    return ops.full_like(self, value)


def fills(self, value):
    return fill(self, value)


def masked_fill(self, mask, value):
    """value where mask (broadcast to self) holds, else self; value converts to self's dtype."""
    if not is_tensor(value):
        value = ops.full_like(self, value, dtype=self.dtype) if self.ndim else ops.cast(
            _scalar_tensor(value, self.dtype), self.dtype)
    return ops.select(ops.broadcast_to(mask, self.shape), ops.cast(value, self.dtype), self)


def gather(self, *args, **kwargs):
    """Two forms, as in MindSpore: ``gather(dim, index)`` (PyTorch's, elements along dim) and
    ``gather(input_indices, axis, batch_dims=0)`` (ops.gather, whole slices)."""
    if "dim" in kwargs or "index" in kwargs or (args and not is_tensor(args[0])):
        return gather_elements(self, *args, **kwargs)
    return ops.gather(self, *args, **kwargs)


def gather_elements(self, dim, index):
    """out[i][j][k] = self[index[i][j][k]][j][k] for dim 0 (and so on): advanced indexing with
    `index` along dim and the positions of each element along the other axes."""
    dim = _axis(dim, self.ndim, "gather")
    if index.ndim != self.ndim:
        raise ValueError(f"gather: index has {index.ndim} dimensions, input {self.ndim}")
    keys = []
    for axis, size in enumerate(index.shape):
        if axis == dim:
            keys.append(ops.cast(index, mstype.int64))
            continue
        shape = [1] * index.ndim
        shape[axis] = size
        keys.append(ops.reshape(call("arange", (), (0, size, 1)), tuple(shape)))
    return _indexing.getitem(self, tuple(keys))


def select(self, *args, **kwargs):
    """``select(dim, index)``: the slice at `index` along `dim` (a view); ``select(condition,
    y)``: self where condition holds, else y."""
    first = args[0] if args else kwargs.get("dim", kwargs.get("condition"))
    if "condition" in kwargs or is_tensor(first):
        cond = kwargs.pop("condition", None) if "condition" in kwargs else args[0]
        y = kwargs["y"] if "y" in kwargs else args[1]
        return ops.select(cond, self, y)
    dim = kwargs["dim"] if "dim" in kwargs else args[0]
    index = kwargs["index"] if "index" in kwargs else args[1]
    dim = _axis(dim, self.ndim, "select")
    return _indexing.getitem(self, (slice(None),) * dim + (int_arg(index, "select", "index"),))


def uniform(self, from_=0.0, to=1.0, generator=None):
    """A new tensor of self's shape and dtype with samples in [from_, to)."""
    samples = ops.rand(*self.shape, dtype=_float_of(self.dtype))
    return ops.cast(samples * (to - from_) + from_, self.dtype)


def argmax_with_value(self, axis=0, keep_dims=False):
    """(largest values, their int64 indices) along axis."""
    return ops.max(self, axis, keep_dims)


def argmin_with_value(self, axis=0, keep_dims=False):
    return ops.min(self, axis, keep_dims)


def soft_shrink(self, lambd=0.5):
    return ops.softshrink(self, lambd)


def eq(self, other):
    return ops.equal(self, other)


def bitwise_not(self):
    return ops.invert(self)


def positive(self):
    return self


# kiln has no complex dtypes: a real tensor is its own conjugate, with a zero imaginary part
def conj(self):
    return self


def real(self):
    return self


def imag(self):
    return ops.zeros_like(self)


def adjoint(self):
    return mT(self)


def H(self):  # noqa: N802 - MindSpore's name
    """The conjugate transpose of a matrix (the transpose, for real tensors)."""
    if self.ndim != 2:
        raise ValueError(f"Tensor.H: the tensor must be 2-D, got {self.ndim} dimensions")
    return self.transpose()


def mH(self):  # noqa: N802 - MindSpore's name
    return mT(self)


# ---- shape and layout ----
def resize(self, *new_shape):
    """NumPy's ndarray.resize as a new tensor: the elements in order, cut short or followed
    by zeros, in `new_shape`."""
    shape = _sizes(new_shape)
    n = 1
    for d in shape:
        n *= d
    flat = ops.reshape(self, (-1,))
    if n <= self.size:
        flat = flat[:n]
    else:
        flat = ops.cat((flat, ops.zeros((n - self.size,), self.dtype)))
    return ops.reshape(flat, shape)


def reverse(self, axis):
    return flip(self, axis)


def fliplr(self):
    if self.ndim < 2:
        raise ValueError("Tensor.fliplr: the tensor must have at least 2 dimensions")
    return flip(self, 1)


def flipud(self):
    if self.ndim < 1:
        raise ValueError("Tensor.flipud: the tensor must have at least 1 dimension")
    return flip(self, 0)



def ravel(self):
    return ops.reshape(self, (-1,))


def flip(self, dims):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    index = [slice(None)] * self.ndim
    for d in dims:
        index[_axis(d, self.ndim, "flip")] = slice(None, None, -1)
    return _indexing.getitem(self, tuple(index))


def t(self):
    """The transpose of a tensor of at most 2 dimensions."""
    if self.ndim > 2:
        raise ValueError(f"Tensor.t: the tensor must have at most 2 dimensions, got {self.ndim}")
    return self.transpose() if self.ndim == 2 else self


def mT(self):  # noqa: N802 - MindSpore's name
    """The last two axes swapped."""
    if self.ndim < 2:
        raise ValueError(f"Tensor.mT: the tensor must have at least 2 dimensions, got {self.ndim}")
    return ops.swapaxes(self, -1, -2)


def moveaxis(self, source, destination):
    src = _axes(source, self.ndim, "moveaxis")
    dst = _axes(destination, self.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} differ in "
                         f"length")
    order = [a for a in range(self.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return ops.transpose(self, tuple(order))


def movedim(self, source, destination):
    return moveaxis(self, source, destination)


def swapdims(self, dim0, dim1):
    return ops.swapaxes(self, dim0, dim1)


def reshape_as(self, other):
    return ops.reshape(self, tuple(other.shape))


def view_as(self, other):
    return ops.reshape(self, tuple(other.shape))


def expand(self, *size):
    """Broadcast to `size` (-1 keeps a dimension)."""
    return ops.broadcast_to(self, _sizes(size, runtime=True))


def sum_to_size(self, *size):
    """The sum over the axes that `size` broadcasts along, so the result has shape `size`."""
    size = _sizes(size)
    lead = self.ndim - len(size)
    if lead < 0:
        raise ValueError(f"sum_to_size: size {size} has more dimensions than the tensor "
                         f"{tuple(self.shape)}")
    out = ops.sum(self, tuple(range(lead))) if lead else self
    axes = tuple(a for a, n in enumerate(size) if n == 1 and out.shape[a] != 1)
    for a, n in enumerate(size):
        if n not in (1, out.shape[a]):
            raise ValueError(f"sum_to_size: size {size} is not expandable to "
                             f"{tuple(self.shape)}")
    return ops.sum(out, axes, True) if axes else out


# ---- new tensors like self ----
def new_zeros(self, size, dtype=None):
    return ops.zeros(_sizes((size,), runtime=True), dtype or self.dtype)


def new_ones(self, size, dtype=None):
    return ops.ones(_sizes((size,), runtime=True), dtype or self.dtype)


def new_full(self, size, fill_value, *, dtype=None):
    return ops.full(_sizes((size,), runtime=True), fill_value, dtype=dtype or self.dtype)


def new_empty(self, size, *, dtype=None, device=None):
    """A tensor of `size` (kiln fills it with zeros: its memory is never left uninitialised)."""
    return ops.zeros(_sizes((size,), runtime=True), dtype or self.dtype)


# ---- dtype ----
def _to(dtype):
    def method(self):
        return ops.cast(self, dtype)

    method.__doc__ = f"The tensor as {dtype}."
    return method


def type(self, dtype=None):  # noqa: A001
    """Without dtype: the dtype's name (``'Float32'``); with one: the tensor cast to it."""
    if dtype is None:
        return str(self.dtype)
    return ops.cast(self, dtype)


def type_as(self, other):
    return ops.cast(self, other.dtype)


def is_floating_point(self):
    return self.dtype.is_floating_point


def is_signed(self):
    return self.dtype in mstype.int_type or self.dtype.is_floating_point


def is_complex(self):
    return False  # kiln has no complex dtypes


# ---- metadata ----
def numel(self):
    return ops.numel(self)


def dim(self):
    return self.ndim


def stride(self, dim=None):
    """Strides in elements (PyTorch's and MindSpore's unit, unlike .strides in bytes)."""
    strides = _element_strides(self)
    return strides if dim is None else strides[_axis(dim, self.ndim, "stride")]


def storage_offset(self):
    return int(getattr(self, "_offset", 0))


def data_ptr(self):
    return int(self._data_ptr)


def element_size(self):
    return self.itemsize


def _element_strides(self):
    if hasattr(self, "_strides"):  # an eager tensor: its own layout
        return tuple(self._strides)
    return tuple(s // self.itemsize for s in self.strides)


# ---- device and storage (kiln runs on the CPU; data is always initialised and synced) ----
def device(self):
    return "CPU"


def has_init(self):
    return False


def init_flag(self):
    return False


def virtual_flag(self):
    return False


def data(self):
    """A new Tensor sharing this tensor's memory."""
    return self.view(self.shape)


def value(self):
    return self


def move_to(self, to, blocking=True):
    """A copy on device `to`: kiln has only the CPU."""
    if to != "CPU":
        raise ValueError(f"Tensor.move_to: kiln runs on the CPU only, got to={to!r}")
    return self.copy()


def is_pinned(self):
    return False


def is_shared(self):
    return False


def data_sync(self, wait=True):
    """Nothing to wait for: kiln's PyNative ops have finished when they return."""


def flush_from_cache(self):
    """Nothing to flush: kiln keeps no device cache."""


def wait_pipeline(self):
    """Nothing to wait for (see data_sync)."""


def get_bytes(self):
    """The elements' bytes in row-major order."""
    return self.asnumpy().tobytes()


# ---- gradient hooks ----
class _TensorHookHandle:
    """What Tensor.register_hook returns: remove() stops the hook."""

    def __init__(self, hook):
        self.hook = hook

    def remove(self):
        self.hook = None


def register_hook(self, hook):
    """hook(grad) runs on this tensor's gradient when a PyNative gradient is taken (of a grad
    argument or weight: its whole gradient; of a tensor the function computed: the gradient of
    its uses after this call) and may return a new gradient. Returns a handle with remove()."""
    if not callable(hook):
        raise TypeError(f"Tensor.register_hook: hook must be a Python function, got "
                        f"{builtins.type(hook).__name__}")
    from kiln.ops import _backward_hooks  # noqa: PLC0415

    handle = _TensorHookHandle(hook)

    def run(grad):
        return None if handle.hook is None else handle.hook(grad)

    if not _backward_hooks.hook_source(self, run):
        _backward_hooks.hook_tensor(
            self, lambda grads: _backward_hooks.as_grads(run(grads[0]), grads, "register_hook"))
    return handle


# ---- helpers ----
def _sizes(args, runtime=False):
    """f(2, 3), f((2, 3)) and f([2, 3]) alike. With `runtime`, a size a graph reads off a
    dimension of any size (x.shape[0] there) stays itself: the op takes its value as it runs."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    return tuple(a if runtime and is_runtime_size(a)
                 else int_arg(a, "size", "size") for a in args)


def _axis(axis, ndim, op):
    axis = int_arg(axis, op, "dim")
    if not -builtins.max(ndim, 1) <= axis < builtins.max(ndim, 1):
        raise ValueError(f"{op}: dim {axis} is out of range for a tensor of {ndim} dimensions")
    return axis % builtins.max(ndim, 1)


def _axes(axes, ndim, op):
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    out = tuple(_axis(a, ndim, op) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated dim in {axes}")
    return out


def _float_of(dtype):
    return dtype if dtype.is_floating_point else mstype.float32


def _scalar_tensor(value, dtype):
    return ops.full((), value, dtype=dtype)


PROPERTIES = ("mT", "H", "mH", "device", "has_init", "init_flag", "virtual_flag", "data")


def install(cls):
    """Puts these methods on Tensor (GraphTensor copies them from there)."""
    for name in UNARY:
        setattr(cls, name, _unary(name))
    for name in BINARY:
        setattr(cls, name, _binary(name))
    for name, dtype in (("double", mstype.float64), ("half", mstype.float16),
                        ("short", mstype.int16), ("byte", mstype.uint8),
                        ("bfloat16", mstype.bfloat16)):
        setattr(cls, name, _to(dtype))
    cls.nelement = numel
    cls.ndimension = dim
    for name, value in list(globals().items()):
        if name.startswith("_") or name in ("install", "builtins", "ops", "mstype", "call",
                                            "int_arg", "is_tensor"):
            continue
        if callable(value) and getattr(value, "__module__", None) == __name__:
            setattr(cls, name, property(value) if name in PROPERTIES else value)
