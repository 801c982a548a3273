"""Tensors from Python data: the NumPy arrays kiln can share, and tensors made from them.

Tensor(data) and the ops below the Tensor class (indices built from lists, initial values) make
tensors the same way; the ops get them from _C, as instances of the registered Tensor class.
"""
import numpy as np

from kiln import _C
from kiln.common import dtype as mstype


def as_array(data, dtype):
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


def tensor_of(data):
    """kiln.Tensor(data) for a NumPy array (shared when its layout allows), a NumPy scalar, a
    Python number or nested sequences, made without the Tensor class."""
    return _C.tensor_from_array(as_array(data, None))
