"""Sparse tensors (COOTensor, CSRTensor, RowTensor), as in mindspore.common.sparse_tensor.

Each holds its index and value tensors (no separate sparse kernels): the properties, ``to_dense``,
``to_tuple``, ``astype``, ``abs`` and the COO/CSR conversions work in both modes, since they are
built from ordinary ops (a Graph-mode construction holds graph values and its methods add
nodes). ``to_dense`` costs O(nnz x dense size) (a one-hot of each entry's flat position, summed;
duplicate entries add up, as MindSpore's scatter does). MindSpore's sparse arithmetic (``mv``,
``mm``, ``add``, ``coalesce``, ``sum``, ...) is not offered: calling it is Python's
AttributeError. docs/compatibility.md lists this.
"""
from kiln.common import dtype as mstype
from kiln.ops import function as F
from kiln.ops._core import is_tensor

__all__ = ["COOTensor", "CSRTensor", "RowTensor", "RowTensorInner"]

_INDEX_DTYPES = (mstype.int16, mstype.int32, mstype.int64)


def _check_tensor(cls, name, value, ndim=None):
    if not is_tensor(value):
        raise TypeError(f"{cls}: {name} must be a Tensor, got {type(value).__name__}")
    if ndim is not None and value.ndim != ndim:
        raise ValueError(f"{cls}: {name} must be a {ndim}-D Tensor, got shape {value.shape}")


def _check_index(cls, name, value, ndim):
    _check_tensor(cls, name, value, ndim)
    if value.dtype not in _INDEX_DTYPES:
        raise TypeError(f"{cls}: {name} must be int16, int32 or int64, got {value.dtype}")


def _check_shape(cls, shape, min_rank=1):
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise TypeError(f"{cls}: shape must be a tuple of positive ints, got {shape!r}")
    if len(shape) < min_rank:
        raise ValueError(f"{cls}: shape must have at least {min_rank} dimensions, got {shape}")
    return tuple(shape)


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _scatter_dense(flat, values, shape):
    """Dense tensor of `shape` with values[k] added at flat position flat[k] (1-D values)."""
    is_bool = values.dtype == mstype.bool_
    data = F.cast(values, mstype.int32) if is_bool else values
    hits = F.cast(F.one_hot(flat, _numel(shape), 1, 0), data.dtype)  # (nnz, size)
    dense = F.sum(hits * F.expand_dims(data, 1), 0, dtype=data.dtype)
    dense = F.reshape(dense, shape)
    return F.not_equal(dense, 0) if is_bool else dense


class _SparseBase:
    """What every sparse tensor has: values, a dense shape and their derived properties."""

    @property
    def values(self):
        return self._values

    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return self._values.dtype

    @property
    def size(self):
        return self._values.size

    @property
    def itemsize(self):
        return self._values.itemsize

    @property
    def ndim(self):
        return len(self._shape)

    def __repr__(self):
        parts = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields)
        return f"{type(self).__name__}({parts}, shape={self._shape})"


class COOTensor(_SparseBase):
    """A sparse tensor in coordinate form: indices (N, ndim) ints, values (N,), a dense shape."""

    _fields = ("indices", "values")

    def __init__(self, indices=None, values=None, shape=None, coo_tensor=None):
        if coo_tensor is not None:
            if not isinstance(coo_tensor, COOTensor):
                raise TypeError(f"COOTensor: coo_tensor must be a COOTensor, got "
                                f"{type(coo_tensor).__name__}")
            indices, values, shape = coo_tensor.indices, coo_tensor.values, coo_tensor.shape
        _check_index("COOTensor", "indices", indices, 2)
        _check_tensor("COOTensor", "values", values, 1)
        shape = _check_shape("COOTensor", shape)
        if indices.shape[0] != values.shape[0]:
            raise ValueError(f"COOTensor: indices has {indices.shape[0]} rows but values has "
                             f"{values.shape[0]} elements")
        if indices.shape[1] != len(shape):
            raise ValueError(f"COOTensor: indices has {indices.shape[1]} columns but shape "
                             f"{shape} has {len(shape)} dimensions")
        self._indices, self._values, self._shape = indices, values, shape

    @property
    def indices(self):
        return self._indices

    def to_dense(self):
        columns = F.cast(self._indices, mstype.int64)
        flat = columns[:, 0] * 0
        for d in range(len(self._shape)):  # row-major position of each entry
            flat = flat + columns[:, d] * _numel(self._shape[d + 1:])
        return _scatter_dense(flat, self._values, self._shape)

    def to_tuple(self):
        return self._indices, self._values, self._shape

    def astype(self, dtype):
        return COOTensor(self._indices, F.cast(self._values, dtype), self._shape)

    def abs(self):
        return COOTensor(self._indices, F.abs(self._values), self._shape)

    def to_csr(self):
        """The CSR form of a 2-D COOTensor whose entries are sorted by row (MindSpore's
        requirement too)."""
        if len(self._shape) != 2:
            raise ValueError(f"COOTensor.to_csr: only a 2-D COOTensor converts, got shape "
                             f"{self._shape}")
        rows = F.cast(F.one_hot(self._indices[:, 0], self._shape[0], 1, 0), mstype.int64)
        counts = F.sum(rows, 0)
        starts = F.sum(F.expand_dims(counts, 0) * _lower_triangle(self._shape[0]), 1)
        indptr = F.cast(F.concat((F.zeros((1,), mstype.int64), starts)), self._indices.dtype)
        return CSRTensor(indptr, self._indices[:, 1], self._values, self._shape)


def _lower_triangle(n):
    """(n, n) int64 with ones on and below the diagonal: row i sums counts[0..i]."""
    r = F.arange(n)
    return F.cast(F.less_equal(F.expand_dims(r, 0), F.expand_dims(r, 1)), mstype.int64)


class CSRTensor(_SparseBase):
    """A 2-D sparse tensor in compressed-row form: indptr (rows+1,), indices (N,) column ids,
    values (N,), a dense shape."""

    _fields = ("indptr", "indices", "values")

    def __init__(self, indptr=None, indices=None, values=None, shape=None, csr_tensor=None):
        if csr_tensor is not None:
            if not isinstance(csr_tensor, CSRTensor):
                raise TypeError(f"CSRTensor: csr_tensor must be a CSRTensor, got "
                                f"{type(csr_tensor).__name__}")
            indptr, indices = csr_tensor.indptr, csr_tensor.indices
            values, shape = csr_tensor.values, csr_tensor.shape
        _check_index("CSRTensor", "indptr", indptr, 1)
        _check_index("CSRTensor", "indices", indices, 1)
        _check_tensor("CSRTensor", "values", values, 1)
        shape = _check_shape("CSRTensor", shape, min_rank=2)
        if len(shape) != 2:
            raise ValueError(f"CSRTensor: kiln's CSRTensor is 2-D, got shape {shape}")
        if indptr.dtype != indices.dtype:
            raise TypeError(f"CSRTensor: indptr ({indptr.dtype}) and indices "
                            f"({indices.dtype}) must have one dtype")
        if indptr.shape[0] != shape[0] + 1:
            raise ValueError(f"CSRTensor: indptr must have shape[0] + 1 = {shape[0] + 1} "
                             f"elements, got {indptr.shape[0]}")
        if indices.shape[0] != values.shape[0]:
            raise ValueError(f"CSRTensor: indices has {indices.shape[0]} elements but values has "
                             f"{values.shape[0]}")
        self._indptr, self._indices, self._values, self._shape = indptr, indices, values, shape

    @property
    def indptr(self):
        return self._indptr

    @property
    def indices(self):
        return self._indices

    def _rows(self):
        """The row of each stored entry: how many row ends (indptr[1:]) lie at or before it."""
        k = F.arange(self._indices.shape[0])
        ends = F.cast(self._indptr[1:], mstype.int64)
        return F.sum(F.cast(F.less_equal(F.expand_dims(ends, 0), F.expand_dims(k, 1)),
                            mstype.int64), 1)

    def to_dense(self):
        flat = self._rows() * self._shape[1] + F.cast(self._indices, mstype.int64)
        return _scatter_dense(flat, self._values, self._shape)

    def to_coo(self):
        rows = F.cast(self._rows(), self._indices.dtype)
        return COOTensor(F.stack((rows, self._indices), 1), self._values, self._shape)

    def to_tuple(self):
        return self._indptr, self._indices, self._values, self._shape

    def astype(self, dtype):
        return CSRTensor(self._indptr, self._indices, F.cast(self._values, dtype), self._shape)

    def abs(self):
        return CSRTensor(self._indptr, self._indices, F.abs(self._values), self._shape)


class RowTensorInner(_SparseBase):
    """A tensor whose rows `indices` (1-D) hold `values` (one slice of the dense shape per
    index) and whose other rows are zero: MindSpore's gradient of a gather."""

    _fields = ("indices", "values")

    def __init__(self, indices=None, values=None, shape=None, row_tensor=None):
        if row_tensor is not None:
            if not isinstance(row_tensor, RowTensorInner):
                raise TypeError(f"RowTensor: row_tensor must be a RowTensor, got "
                                f"{type(row_tensor).__name__}")
            indices, values, shape = row_tensor.indices, row_tensor.values, row_tensor.dense_shape
        _check_index("RowTensor", "indices", indices, 1)
        _check_tensor("RowTensor", "values", values)
        shape = _check_shape("RowTensor", shape)
        if tuple(values.shape) != (indices.shape[0],) + shape[1:]:
            raise ValueError(f"RowTensor: values must have shape {(indices.shape[0],) + shape[1:]}"
                             f" (one row of the dense shape {shape} per index), got "
                             f"{values.shape}")
        self._indices, self._values, self._shape = indices, values, shape

    @property
    def indices(self):
        return self._indices

    @property
    def dense_shape(self):
        return self._shape

    @property
    def size(self):
        return self._values.size

    def to_dense(self):
        row = _numel(self._shape[1:])
        flat_rows = F.cast(self._indices, mstype.int64) * row
        flat = F.reshape(F.expand_dims(flat_rows, 1) + F.expand_dims(F.arange(row), 0), (-1,))
        return _scatter_dense(flat, F.reshape(self._values, (-1,)), self._shape)


class RowTensor(RowTensorInner):
    """MindSpore's public name, whose third argument is `dense_shape`."""

    def __init__(self, indices=None, values=None, dense_shape=None, row_tensor=None):
        super().__init__(indices, values, dense_shape, row_tensor)
