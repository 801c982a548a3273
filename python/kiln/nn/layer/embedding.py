"""Embedding and EmbeddingLookup: a (vocab_size, embedding_size) table looked up by integer ids
(MindSpore's names)."""
import numpy as np

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.initializer import initializer
from kiln.common.parameter import Parameter
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.nn.layer.basic import check_bool, check_int
from kiln.ops import _core
from kiln.ops.function.array import one_hot_checked

__all__ = ["Embedding", "EmbeddingLookup"]


class Embedding(Cell):
    """Maps ids of any shape to vectors: output shape ids.shape + (embedding_size,).

    embedding_table defaults to 'normal' (N(0, 0.01^2)); a padding_idx row starts at zero.
    use_one_hot=True computes one_hot(ids) @ table instead of a gather.
    """

    def __init__(self, vocab_size, embedding_size, use_one_hot=False, embedding_table="normal",
                 dtype=mstype.int32, padding_idx=None):
        super().__init__()
        self.vocab_size = check_int(vocab_size, "Embedding", "vocab_size")
        self.embedding_size = check_int(embedding_size, "Embedding", "embedding_size")
        self.use_one_hot = check_bool(use_one_hot, "Embedding", "use_one_hot")
        self.dtype = mstype.to_dtype(dtype)
        if self.dtype not in mstype.int_type + mstype.uint_type:
            raise TypeError(f"Embedding: dtype (of the ids) must be an integer type, "
                            f"got {self.dtype}")
        if padding_idx is not None:
            padding_idx = check_int(padding_idx, "Embedding", "padding_idx", minimum=-2**31)
            if not -self.vocab_size <= padding_idx < self.vocab_size:
                raise ValueError(f"Embedding: padding_idx must be in [-{self.vocab_size}, "
                                 f"{self.vocab_size}), got {padding_idx}")
            padding_idx %= self.vocab_size
        self.padding_idx = padding_idx
        table = initializer(embedding_table, (self.vocab_size, self.embedding_size))
        if padding_idx is not None:
            values = np.array(table.asnumpy())
            values[padding_idx] = 0
            table = values
        self.embedding_table = Parameter(table, name="embedding_table")

    def construct(self, ids):
        if ids.dtype not in mstype.int_type + mstype.uint_type:
            raise TypeError(f"Embedding: ids must be an integer tensor, got {ids.dtype} "
                            f"with shape {tuple(ids.shape)}")
        # Rows for ids of any shape, without flattening it: a graph compiled for dimensions of
        # any size could not reshape back to two or more of them.
        if self.use_one_hot:
            hot = one_hot_checked(ids, self.vocab_size, 1.0, 0.0, -1, "Embedding: id")
            return F.matmul(F.cast(hot, self.embedding_table.dtype), self.embedding_table)
        return _core.call("gather", (self.embedding_table, ids), (0, 0))

    def extend_repr(self):
        return (f"vocab_size={self.vocab_size}, embedding_size={self.embedding_size}, "
                f"use_one_hot={self.use_one_hot}, embedding_table={self.embedding_table.name}, "
                f"dtype={self.dtype}, padding_idx={self.padding_idx}")


class EmbeddingLookup(Cell):
    """Rows of embedding_table (Parameter 'embedding_table', 'normal' init) for ids of any
    shape. With target='CPU' (MindSpore's default) an id outside [0, vocab_size) gives a row of
    zeros, as MindSpore's EmbeddingLookup op; with 'DEVICE' it is an IndexError. max_norm
    rescales each looked-up vector to a norm of at most max_norm. The distributed arguments
    (slice_mode, manual_shapes) are accepted and have no effect on one device."""

    def __init__(self, vocab_size, embedding_size, param_init="normal", target="CPU",
                 slice_mode="batch_slice", manual_shapes=None, max_norm=None, sparse=True,
                 dtype=mstype.float32):
        super().__init__()
        who = "EmbeddingLookup"
        self.vocab_size = check_int(vocab_size, who, "vocab_size")
        self.embedding_size = check_int(embedding_size, who, "embedding_size")
        self.sparse = check_bool(sparse, who, "sparse")
        if target not in ("CPU", "DEVICE"):
            raise ValueError(f"{who}: target must be 'CPU' or 'DEVICE', got {target!r}")
        if not sparse and target == "CPU":
            raise ValueError(f"{who}: sparse must be True when target is 'CPU'")
        self.target = target
        self.slice_mode, self.manual_shapes = slice_mode, manual_shapes
        if max_norm is not None:
            if isinstance(max_norm, bool) or not isinstance(max_norm, float) or max_norm <= 0:
                raise ValueError(f"{who}: max_norm must be a positive float, got {max_norm!r}")
        self.max_norm = max_norm
        self.embedding_table = Parameter(
            initializer(param_init, (self.vocab_size, self.embedding_size), dtype),
            name="embedding_table")

    def construct(self, indices):
        if indices.dtype.is_floating_point or indices.dtype == mstype.bool_:
            raise TypeError(f"EmbeddingLookup: indices must be integers, got {indices.dtype}")
        if self.target == "CPU":
            inside = ops.logical_and(indices >= 0, indices < self.vocab_size)
            safe = ops.where(inside, indices, 0)
            out = ops.gather(self.embedding_table, safe, 0)
            out = ops.where(ops.expand_dims(inside, -1), out, 0.0)
        else:
            hot = one_hot_checked(indices, self.vocab_size, 1, 0, -1, "EmbeddingLookup: id")
            out = ops.gather(self.embedding_table, ops.argmax(hot, -1), 0)
        if self.max_norm is not None:
            norm = ops.sqrt(F.rsum(out * out, -1, True))
            out = out * (self.max_norm / ops.maximum(norm, self.max_norm))
        return out

    def extend_repr(self):
        return f"vocab_size={self.vocab_size}, embedding_size={self.embedding_size}"
