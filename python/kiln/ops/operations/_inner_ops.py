"""kiln.ops.operations._inner_ops -- MindSpore's internal primitives that kiln's ops can back.

MindSpore keeps primitives here that are not part of its public API; the ones kiln provides run
through the same registry ops as the public functional forms.
"""
from kiln import _C
from kiln.ops import function as _ops
from kiln.ops._core import is_tensor
from kiln.ops.primitive import Primitive

__all__ = ["DynamicBroadcastTo"]


class DynamicBroadcastTo(Primitive):
    """Broadcasts x to a shape given as a call argument (a tuple, or a 1-D integer tensor in
    PyNative), unlike BroadcastTo, whose shape is fixed when the primitive is made."""

    def __call__(self, x, shape):
        if isinstance(shape, _C.TensorBase):
            shape = tuple(int(v) for v in shape.asnumpy().reshape(-1))
        elif is_tensor(shape):
            raise TypeError(f"{self.name}: in Graph mode the shape must be a tuple of ints known "
                            f"at compile time, got a tensor computed by the graph")
        return _ops.broadcast_to(x, tuple(shape))
