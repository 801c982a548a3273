"""kiln.Tensor -- the user-facing tensor; storage, views and operators live in C++ (_C)."""
import numpy as np

from kiln import _C
from kiln.common import dtype as mstype

__all__ = ["Tensor", "tensor"]


def _as_array(data, dtype):
    """A NumPy array kiln can share: supported dtype, non-negative strides, writeable."""
    if isinstance(data, np.ndarray):
        arr = data
    elif isinstance(data, np.generic):
        arr = np.asarray(data)
    else:
        if dtype is not None:
            mstype.check_ints_fit(data, dtype, "Tensor")
        arr = _array_from_python(data)
    if dtype is not None and dtype is not mstype.bfloat16:
        np_type = mstype.dtype_to_nptype(dtype)
        if arr.dtype != np_type:
            arr = arr.astype(np_type)
    mstype.to_dtype(arr.dtype)  # TypeError for dtypes kiln lacks
    if not arr.flags.writeable or any(s < 0 for s in arr.strides):
        arr = np.array(arr, copy=True)
    return arr


def _array_from_python(data):
    """Python scalars and nested sequences: floats become float32, ints int64 (as MindSpore)."""
    try:
        arr = np.array(data)
    except ValueError as e:
        raise ValueError(f"Tensor: input is a ragged nested sequence: {e}") from None
    if arr.dtype == object:
        raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__} "
                        f"holding non-numeric or ragged items")
    if arr.dtype == np.float64 and not _holds_numpy_float64(data):
        arr = arr.astype(np.float32)
    return arr


def _holds_numpy_float64(data):
    if isinstance(data, (np.ndarray, np.float64)):
        return data.dtype == np.float64
    if isinstance(data, (list, tuple)) and data:
        return _holds_numpy_float64(data[0])
    return False


class Tensor(_C.TensorBase):
    """A multi-dimensional array on the CPU.

    ``Tensor(input_data, dtype=None)`` takes a NumPy array (shared, not copied, when its layout
    allows), a nested list or tuple, a Python scalar or another Tensor.
    """

    def __init__(self, input_data=None, dtype=None, shape=None, init=None, const_arg=False):
        dtype = None if dtype is None else mstype.to_dtype(dtype)
        if input_data is None:
            if shape is None:
                raise ValueError("Tensor: give input_data, or shape and dtype (with init)")
            input_data = _initial_values(shape, dtype, init)
        if isinstance(input_data, _C.TensorBase):
            source = input_data if dtype is None else _ops().cast(input_data, dtype)
        elif dtype is mstype.bfloat16:  # NumPy has no bfloat16: convert through float32
            source = _ops().cast(Tensor(_as_array(input_data, mstype.float32)), dtype)
        else:
            source = _as_array(input_data, dtype)
        _C.TensorBase.__init__(self, source)  # a Tensor shares storage; an array is shared too

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
        return Tensor(array)

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
            raise ValueError(f"item: only one-element tensors can be converted to a Python "
                             f"scalar, this one has shape {self.shape}")
        return arr.item()

    def tolist(self):
        return self._read_numpy().tolist()

    def numpy(self):
        return self.asnumpy()

    def __bool__(self):
        if self.size != 1:
            raise ValueError(f"The truth value of a tensor of shape {self.shape} is ambiguous; "
                             f"use .any() or .all()")
        return bool(self._read_numpy().item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype not in mstype.int_type + (mstype.uint8,):
            raise TypeError(f"only integer tensors can be used as an index, got {self.dtype}")
        return int(self.item())

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self.shape[0]):
            yield self[i]

    def __round__(self, ndigits=None):
        """round(tensor): a tensor rounded half to even, as MindSpore returns it."""
        return _ops().round(self, decimals=0 if ndigits is None else ndigits)

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
        return _ops().cast(self, dtype)

    def to(self, dtype):
        return _ops().cast(self, dtype)

    def float(self):
        return _ops().cast(self, mstype.float32)

    def int(self):
        return _ops().cast(self, mstype.int32)

    def long(self):
        return _ops().cast(self, mstype.int64)

    def bool(self):
        return _ops().cast(self, mstype.bool_)

    def exp(self):
        return _ops().exp(self)

    def log(self):
        return _ops().log(self)

    def sqrt(self):
        return _ops().sqrt(self)

    def abs(self):
        return _ops().abs(self)

    def sigmoid(self):
        return _ops().sigmoid(self)

    def tanh(self):
        return _ops().tanh(self)

    def relu(self):
        return _ops().relu(self)

    def bitwise_and(self, other):
        return _ops().bitwise_and(self, other)

    def bitwise_or(self, other):
        return _ops().bitwise_or(self, other)

    def bitwise_xor(self, other):
        return _ops().bitwise_xor(self, other)

    def bitwise_left_shift(self, other):
        return _ops().bitwise_left_shift(self, other)

    def bitwise_right_shift(self, other):
        return _ops().bitwise_right_shift(self, other)

    def clamp(self, min=None, max=None):  # noqa: A002 - MindSpore's argument names
        return _ops().clamp(self, min, max)

    # ---- reductions (MindSpore Tensor signatures) ----
    def sum(self, axis=None, dtype=None, keepdims=False, initial=None):  # noqa: A003
        out = _ops().sum(self, axis, keepdims, dtype=dtype)
        return out if initial is None else out + initial

    def mean(self, axis=None, keep_dims=False):
        return _ops().mean(self, axis, keep_dims)

    def prod(self, axis=None, keep_dims=False):
        return _ops().prod(self, axis, keep_dims)

    def max(self, axis=None, keepdims=False, *, initial=None, where=True, return_indices=False):  # noqa: A003
        if return_indices:
            return _ops().max(self, axis, keepdims)
        out = _ops().amax(self, axis, keepdims)
        return out if initial is None else _ops().maximum(out, initial)

    def min(self, axis=None, keepdims=False, *, initial=None, where=True, return_indices=False):  # noqa: A003
        if return_indices:
            return _ops().min(self, axis, keepdims)
        out = _ops().amin(self, axis, keepdims)
        return out if initial is None else _ops().minimum(out, initial)

    def argmax(self, axis=None, keepdims=False):
        return _ops().argmax(self, axis, keepdims)

    def argmin(self, axis=None, keepdims=False):
        return _ops().argmin(self, axis, keepdims)

    def any(self, axis=None, keep_dims=False):  # noqa: A003
        _check_axes(axis, "Tensor.any")  # a float axis names this method, not amax
        return _ops().amax(_ops().cast(self, mstype.bool_), axis, keep_dims)

    def all(self, axis=None, keep_dims=False):  # noqa: A003
        _check_axes(axis, "Tensor.all")
        return _ops().amin(_ops().cast(self, mstype.bool_), axis, keep_dims)

    def softmax(self, axis=-1):
        return _ops().softmax(self, axis)

    def matmul(self, other):
        return _ops().matmul(self, other)

    # ---- shape (views where the layout allows) ----
    def reshape(self, *shape):
        return _ops().reshape(self, _varargs_shape(shape))

    def view(self, *shape):
        return _ops().reshape(self, _varargs_shape(shape))

    def transpose(self, *axes):
        axes = _varargs_shape(axes) if axes else tuple(range(self.ndim - 1, -1, -1))
        return _ops().transpose(self, axes)

    def permute(self, *axes):
        return _ops().transpose(self, _varargs_shape(axes))

    def swapaxes(self, axis0, axis1):
        return _ops().swapaxes(self, axis0, axis1)

    def flatten(self, order="C", *, start_dim=0, end_dim=-1):
        return _ops().flatten(self, order, start_dim=start_dim, end_dim=end_dim)

    def squeeze(self, axis=None):
        return _ops().squeeze(self, axis)

    def expand_dims(self, axis):
        return _ops().expand_dims(self, axis)

    def unsqueeze(self, dim):
        return _ops().expand_dims(self, dim)

    def broadcast_to(self, shape):
        return _ops().broadcast_to(self, shape)

    def expand_as(self, other):
        return _ops().broadcast_to(self, other.shape)

    def copy(self):
        return Tensor(self._clone())

    def clone(self):
        return Tensor(self._clone())

    def __getitem__(self, index):
        from kiln.common import _indexing  # noqa: PLC0415 - _indexing imports kiln.ops

        return _indexing.getitem(self, index)

    def __setitem__(self, index, value):
        from kiln.common import _indexing  # noqa: PLC0415

        _indexing.setitem(self, index, value)


def _check_axes(axis, op):
    from kiln.ops._core import axes_attr  # noqa: PLC0415 - ops imports Tensor

    axes_attr(axis, op)


def _varargs_shape(args):
    """reshape(2, 3) and reshape((2, 3)) alike."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def tensor(input_data=None, dtype=None, shape=None, init=None, const_arg=False):
    """Same as ``Tensor(...)``."""
    return Tensor(input_data, dtype, shape, init, const_arg)


def _initial_values(shape, dtype, init):
    from kiln.common import initializer  # noqa: PLC0415 - initializers import Tensor
    from kiln.ops._core import shape_attr  # noqa: PLC0415 - ops imports Tensor

    shape = shape_attr(shape, "Tensor")  # TypeError for float or bool dims, never truncation
    return initializer.initializer(init, shape, dtype or mstype.float32).init_data()


_OPS = None


def _ops():
    global _OPS
    if _OPS is None:
        import kiln.ops as ops  # noqa: PLC0415 - kiln.ops imports this module

        _OPS = ops
    return _OPS


_C._set_tensor_class(Tensor)
