"""kiln.Tensor -- the user-facing tensor; storage, views and operators live in C++ (_C)."""
import numpy as np

from kiln import _C, _graph_state, ops
from kiln.common import _tensor_breadth, initializer, tensor_inplace, tensor_methods
from kiln.common import dtype as mstype
from kiln.common._arrays import as_array
from kiln.ops import _batching, _indexing
from kiln.ops._core import axes_attr, shape_attr

__all__ = ["Tensor", "tensor"]


_GraphValue = _graph_state.GraphValue
_new_tensor_base = _C.TensorBase.__new__

# Messages shared with graph values (kiln.jit.graph_tensor).
LEN_OF_0D = ("Not support len of a 0-D tensor. A 0-d tensor (shape ()) holds one value and has no "
             "length; its element count is x.size")
ITER_OF_0D = ("Cannot iterate over a scalar tensor. A 0-d tensor (shape ()) holds one value; read "
              "it with x.item(), or reshape it to (1,) to iterate")


def sequence_operand(value):
    """The operand of a tensor + or -: a list or tuple of numbers (nested as a tensor's rows)
    becomes a Tensor, as MindSpore does (so `[5, 6] + t` and `sum(t, [5, 6])` broadcast like
    NumPy); anything else is returned as is (a list holding tensors stays a list)."""
    if type(value) not in (list, tuple) or not _numbers_only(value):
        return value
    return Tensor(value)


def _numbers_only(seq):
    return all(_numbers_only(v) if type(v) in (list, tuple) else
               isinstance(v, (bool, int, float)) for v in seq)


class Tensor(_C.TensorBase):
    """A multi-dimensional array on the CPU.

    ``Tensor(input_data, dtype=None)`` takes a NumPy array (copied, as MindSpore copies it:
    ``Tensor.from_numpy`` shares the array's memory instead), a nested list or tuple, a Python
    scalar or another Tensor (whose storage it shares).
    """

    def __new__(cls, input_data=None, dtype=None, *args, **kwargs):
        if isinstance(input_data, _GraphValue) and cls is Tensor:
            # Tensor(x) of a value a graph computes, while compiling: that value as a graph
            # tensor (a Python object computed when the graph runs converts, LAX)
            return _graph_state.converter().tensor_of_graph_value(input_data, dtype)
        return _new_tensor_base(cls)

    def __init__(self, input_data=None, dtype=None, shape=None, init=None, const_arg=False):
        dtype = None if dtype is None else mstype.to_dtype(dtype)
        declared = None
        if input_data is None:
            if shape is None:
                raise ValueError("Tensor: give input_data, or shape and dtype (with init)")
            declared = _dynamic_shape(shape) if init is None else None
            if declared is not None:  # a placeholder: what export and set_inputs accept
                input_data = np.zeros([max(d, 0) for d in declared], _placeholder_nptype(dtype))
            else:
                input_data = _initial_values(shape, dtype, init)
        if isinstance(input_data, _C.TensorBase):
            source = input_data if dtype is None else ops.cast(input_data, dtype)
        elif dtype is mstype.bfloat16:  # NumPy has no bfloat16: convert through float32
            source = ops.cast(Tensor(as_array(input_data, mstype.float32)), dtype)
        else:
            source = as_array(input_data, dtype)
            if isinstance(input_data, np.ndarray) and np.may_share_memory(source, input_data):
                # The user's array may be refilled or written later (a reused batch buffer, the
                # array a weight was built from): the tensor keeps the values it was given, in
                # memory kiln owns.
                source = _C.tensor_from_array(source)._clone()
        _C.TensorBase.__init__(self, source)  # a Tensor's storage is shared
        if declared is not None:
            self._declared_shape = declared

    # ---- + and - with a list or tuple of numbers (MindSpore converts it to a tensor) ----
    # `t + [5, 6]` and `[5, 6] - t`: the C++ operators convert a list of numbers themselves
    # (bindings/convert.h SequenceOperand), so the common operands pay nothing for it.

    # ---- metadata ----
    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return mstype.from_enum(self._dtype)

    @property
    def itemsize(self):
        return _C.itemsize(self._dtype)

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def strides(self):
        """Strides in bytes, as NumPy reports them."""
        return tuple(s * self.itemsize for s in self._strides)

    @property
    def T(self):
        return self.transpose()

    # ---- NumPy exchange ----
    @staticmethod
    def from_numpy(array):
        """A tensor sharing the array's memory (copied first only when its strides are negative
        or it is read-only); the dtype is the array's."""
        if not isinstance(array, np.ndarray):
            raise TypeError(f"Tensor.from_numpy: expected a numpy.ndarray, got "
                            f"{type(array).__name__}")
        tensor = _new_tensor_base(Tensor)
        _C.TensorBase.__init__(tensor, as_array(array, None))
        return tensor

    def asnumpy(self):
        """A NumPy array sharing this tensor's memory (bfloat16 is converted to float32)."""
        if self._dtype == mstype.bfloat16._enum:
            return self.astype(mstype.float32)._numpy()
        return self._numpy()

    def _read_numpy(self):
        """A read-only NumPy view for kiln's own reads (printing, item(), saving): unlike
        asnumpy() it does not mark the memory as written from outside, which would stop compiled
        graphs from caching packed copies of it."""
        if self._dtype == mstype.bfloat16._enum:
            return self.astype(mstype.float32)._numpy(False)
        return self._numpy(False)

    def __array__(self, dtype=None, copy=None):
        arr = self.asnumpy()
        if dtype is not None and arr.dtype != dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def item(self, index=None):
        arr = self._read_numpy()
        if index is not None:
            return arr.item(index)
        if arr.size != 1:
            raise ValueError(one_element_message("item", self.shape))
        return arr.item()

    def tolist(self):
        return self._read_numpy().tolist()

    def numpy(self):
        return self.asnumpy()

    def __bool__(self):
        if self.size != 1:
            raise ValueError(one_element_message("bool", self.shape))
        return bool(self._read_numpy().item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype not in mstype.int_type + mstype.uint_type:
            raise TypeError(f"only integer tensors can be used as an index, got {self.dtype}")
        return int(self.item())

    def __len__(self):
        if self.ndim == 0:
            raise TypeError(LEN_OF_0D)
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError(ITER_OF_0D)
        for i in range(self.shape[0]):
            yield self[i]

    def __round__(self, ndigits=None):
        """round(tensor): a tensor rounded half to even, as MindSpore returns it."""
        return ops.round(self, decimals=0 if ndigits is None else ndigits)

    def __contains__(self, value):
        """`value in tensor` as NumPy has it: whether any element equals value (a 0-d bool
        tensor in compiled code, decided when the graph runs)."""
        return (self == value).any()

    def __repr__(self):
        body = np.array2string(self._read_numpy(), separator=", ", threshold=1000)
        return f"Tensor(shape={list(self.shape)}, dtype={self.dtype}, value=\n{body})"

    def __str__(self):
        return str(self._read_numpy())

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self.item(), spec)
        return format(str(self), spec)

    def __copy__(self):
        return Tensor(self._clone())

    def __deepcopy__(self, memo):
        return Tensor(self._clone())

    def __reduce__(self):
        return (Tensor, (self._read_numpy().copy(), self.dtype))

    # ---- methods that are ops ----
    def astype(self, dtype, copy=True):
        return ops.cast(self, dtype)

    def to(self, dtype):
        return ops.cast(self, dtype)

    def float(self):
        return ops.cast(self, mstype.float32)

    def int(self):
        return ops.cast(self, mstype.int32)

    def long(self):
        return ops.cast(self, mstype.int64)

    def bool(self):
        return ops.cast(self, mstype.bool_)

    def exp(self):
        return ops.exp(self)

    def log(self):
        return ops.log(self)

    def sqrt(self):
        return ops.sqrt(self)

    def reciprocal(self):
        return ops.reciprocal(self)

    def abs(self):
        return ops.abs(self)

    def sigmoid(self):
        return ops.sigmoid(self)

    def tanh(self):
        return ops.tanh(self)

    def relu(self):
        return ops.relu(self)

    def bitwise_and(self, other):
        return ops.bitwise_and(self, other)

    def bitwise_or(self, other):
        return ops.bitwise_or(self, other)

    def bitwise_xor(self, other):
        return ops.bitwise_xor(self, other)

    def bitwise_left_shift(self, other):
        return ops.bitwise_left_shift(self, other)

    def bitwise_right_shift(self, other):
        return ops.bitwise_right_shift(self, other)

    def clamp(self, min=None, max=None):  # noqa: A002 - MindSpore's argument names
        return ops.clamp(self, min, max)

    # ---- reductions (MindSpore Tensor signatures) ----
    def sum(self, axis=None, dtype=None, keepdims=False, initial=None):  # noqa: A003
        out = ops.sum(self, axis, keepdims, dtype=dtype)
        return out if initial is None else out + initial

    def mean(self, axis=None, keep_dims=False):
        return ops.mean(self, axis, keep_dims)

    def prod(self, axis=None, keep_dims=False):
        return ops.prod(self, axis, keep_dims)

    def max(self, axis=None, keepdims=False, *, initial=None, where=True, return_indices=False):  # noqa: A003
        if return_indices:
            return ops.max(self, axis, keepdims)
        out = ops.amax(self, axis, keepdims)
        return out if initial is None else ops.maximum(out, initial)

    def min(self, axis=None, keepdims=False, *, initial=None, where=True, return_indices=False):  # noqa: A003
        if return_indices:
            return ops.min(self, axis, keepdims)
        out = ops.amin(self, axis, keepdims)
        return out if initial is None else ops.minimum(out, initial)

    def argmax(self, axis=None, keepdims=False):
        return ops.argmax(self, axis, keepdims)

    def argmin(self, axis=None, keepdims=False):
        return ops.argmin(self, axis, keepdims)

    def any(self, axis=None, keep_dims=False):  # noqa: A003
        _check_axes(axis, "Tensor.any")  # a float axis names this method, not amax
        return ops.amax(ops.cast(self, mstype.bool_), axis, keep_dims)

    def all(self, axis=None, keep_dims=False):  # noqa: A003
        _check_axes(axis, "Tensor.all")
        return ops.amin(ops.cast(self, mstype.bool_), axis, keep_dims)

    def softmax(self, axis=-1):
        return ops.softmax(self, axis)

    def matmul(self, other):
        return ops.matmul(self, other)

    # ---- shape (views where the layout allows) ----
    def reshape(self, *shape):
        return ops.reshape(self, _varargs_shape(shape))

    def view(self, *shape):
        return ops.reshape(self, _varargs_shape(shape))

    def transpose(self, *axes):
        axes = _varargs_shape(axes) if axes else tuple(range(self.ndim - 1, -1, -1))
        return ops.transpose(self, axes)

    def permute(self, *axes):
        return ops.transpose(self, _varargs_shape(axes))

    def swapaxes(self, axis0, axis1):
        return ops.swapaxes(self, axis0, axis1)

    def flatten(self, order="C", *, start_dim=0, end_dim=-1):
        return ops.flatten(self, order, start_dim=start_dim, end_dim=end_dim)

    def squeeze(self, axis=None):
        return ops.squeeze(self, axis)

    def expand_dims(self, axis):
        return ops.expand_dims(self, axis)

    def unsqueeze(self, dim):
        return ops.expand_dims(self, dim)

    def broadcast_to(self, shape):
        return ops.broadcast_to(self, shape)

    def expand_as(self, other):
        return ops.expand_as(self, other)

    def copy(self):
        return Tensor(self._clone())

    def init_data(self, slice_index=None, shape=None, opt_shard_group=None):
        """The tensor's data as a Tensor (MindSpore's delayed initialisation; kiln's tensors,
        initializer()'s included, hold their values from the start)."""
        return Tensor(self)

    def clone(self):
        return Tensor(self._clone())

    def __getitem__(self, index):
        return _indexing.getitem(self, index)

    def __setitem__(self, index, value):
        _indexing.setitem(self, index, value)


def _check_axes(axis, op):
    axes_attr(axis, op)


def _varargs_shape(args):
    """reshape(2, 3) and reshape((2, 3)) alike."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def tensor(input_data=None, dtype=None, shape=None, init=None, const_arg=False):
    """Same as ``Tensor(...)``."""
    return Tensor(input_data, dtype, shape, init, const_arg)


def _dynamic_shape(shape):
    """`shape` with None as -1 when it has a dimension of unknown size (None or -1), else None.
    ``Tensor(shape=[None, 64], dtype=...)`` declares an input of any batch size for export (and
    holds no data: its storage is empty)."""
    if not isinstance(shape, (list, tuple)) or not any(d is None or d == -1 for d in shape):
        return None
    dims = tuple(-1 if d is None else d for d in shape)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d < -1:
            raise TypeError(f"Tensor: shape {tuple(shape)} needs sizes, None or -1, got {d!r}")
    return dims


def _placeholder_nptype(dtype):
    dtype = dtype or mstype.float32
    return np.float32 if dtype is mstype.bfloat16 else mstype.dtype_to_nptype(dtype)


def _initial_values(shape, dtype, init):
    shape = shape_attr(shape, "Tensor")  # TypeError for float or bool dims, never truncation
    return initializer.initializer(init, shape, dtype or mstype.float32).init_data()


tensor_methods.install(Tensor)
tensor_inplace.install(Tensor)
_tensor_breadth.install(Tensor)  # after the two above: their methods stay
_batching.install_methods(Tensor)  # values inside ops.vmap have Tensor's methods
_C._set_tensor_class(Tensor)


def one_element_message(what, shape):
    """Why a tensor of `shape` (not one element) has no single value, for `what` (bool, int,
    float, item), in both modes, in NumPy's and PyTorch's words, which MindSpore uses too."""
    if what == "bool":
        return (f"The truth value of an array with more than one element is ambiguous: only a "
                f"tensor of one element can be converted to bool, but this one has shape "
                f"{tuple(shape)}; use .any() or .all()")
    return (f"Only one element tensors can be converted to Python scalars ({what}() of a tensor "
            f"of shape {tuple(shape)})")
