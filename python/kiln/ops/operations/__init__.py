"""kiln.ops.operations (imported as ``P``) -- MindSpore's primitive classes over the functional ops.

A primitive is configured once (``ops.MatMul(transpose_b=True)``) and called on tensors; each
call goes to the same registry op the functional form uses.
"""
from kiln.ops import _core
from kiln.ops import function as _ops
from kiln.ops.operations.comm_ops import *  # noqa: F401,F403
from kiln.ops.operations.comm_ops import __all__ as _comm_ops_all
from kiln.ops.operations.custom_ops import Custom  # noqa: F401
from kiln.ops.operations.debug_ops import HookBackward, Print  # noqa: F401
from kiln.ops.operations.math_ops import *  # noqa: F401,F403
from kiln.ops.operations.math_ops import __all__ as _math_ops_all
from kiln.ops.operations.nn_ops import *  # noqa: F401,F403
from kiln.ops.operations.nn_ops import __all__ as _nn_ops_all
from kiln.ops.primitive import Primitive, PrimitiveWithCheck, PrimitiveWithInfer

__all__ = [
    "Primitive", "PrimitiveWithInfer", "PrimitiveWithCheck", "Add", "Sub", "Mul", "Div",
    "RealDiv", "Pow", "Neg", "Abs", "Exp", "Log", "Sqrt", "Rsqrt", "Reciprocal", "Sin", "Cos",
    "Tanh",
    "Sigmoid", "ReLU", "GeLU", "SiLU", "Square",
    "Maximum", "Minimum", "Equal", "Less", "Greater", "Select", "Cast", "MatMul",
    "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Invert", "LeftShift", "RightShift",
    "BatchMatMul", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "Softmax",
    "LogSoftmax", "Reshape", "Transpose", "ExpandDims", "Squeeze", "Concat", "Stack",
    "Gather", "OneHot", "ZerosLike", "OnesLike", "Argmax", "Flatten", "Depend", "AddN", "Split",
] + _nn_ops_all + _comm_ops_all + _math_ops_all + ["Print", "HookBackward", "Custom"]


def _elementwise(name, fn_name):
    def call(self, *args):
        return getattr(_ops, fn_name)(*args)

    return type(name, (Primitive,), {"__call__": call, "__doc__": f"Primitive of ops.{fn_name}."})


Add = _elementwise("Add", "add")
Sub = _elementwise("Sub", "sub")
Mul = _elementwise("Mul", "mul")
Div = _elementwise("Div", "div")
RealDiv = _elementwise("RealDiv", "div")
Pow = _elementwise("Pow", "pow")
Neg = _elementwise("Neg", "neg")
Abs = _elementwise("Abs", "abs")
Exp = _elementwise("Exp", "exp")
Log = _elementwise("Log", "log")
Sqrt = _elementwise("Sqrt", "sqrt")
Rsqrt = _elementwise("Rsqrt", "rsqrt")
Reciprocal = _elementwise("Reciprocal", "reciprocal")
Sin = _elementwise("Sin", "sin")
Cos = _elementwise("Cos", "cos")
Tanh = _elementwise("Tanh", "tanh")
Sigmoid = _elementwise("Sigmoid", "sigmoid")
ReLU = _elementwise("ReLU", "relu")
SiLU = _elementwise("SiLU", "silu")
Square = _elementwise("Square", "square")
Maximum = _elementwise("Maximum", "maximum")
Minimum = _elementwise("Minimum", "minimum")
Equal = _elementwise("Equal", "equal")
Less = _elementwise("Less", "less")
Greater = _elementwise("Greater", "greater")
BitwiseAnd = _elementwise("BitwiseAnd", "bitwise_and")
BitwiseOr = _elementwise("BitwiseOr", "bitwise_or")
BitwiseXor = _elementwise("BitwiseXor", "bitwise_xor")
Invert = _elementwise("Invert", "invert")
LeftShift = _elementwise("LeftShift", "bitwise_left_shift")
RightShift = _elementwise("RightShift", "bitwise_right_shift")
Select = _elementwise("Select", "where")
Cast = _elementwise("Cast", "cast")
Reshape = _elementwise("Reshape", "reshape")
Transpose = _elementwise("Transpose", "transpose")
ExpandDims = _elementwise("ExpandDims", "expand_dims")
ZerosLike = _elementwise("ZerosLike", "zeros_like")
OnesLike = _elementwise("OnesLike", "ones_like")
Depend = _elementwise("Depend", "depend")
AddN = _elementwise("AddN", "addn")


class GeLU(Primitive):
    """MindSpore's GeLU primitive computes the tanh approximation (ops.gelu's default is the
    exact erf form)."""

    def __init__(self, approximate="tanh"):
        super().__init__()
        self.approximate = approximate

    def __call__(self, x):
        return _ops.gelu(x, self.approximate)


class MatMul(Primitive):
    """2-D matrix product with optional transposes: ``MatMul(transpose_a, transpose_b)(a, b)``."""

    def __init__(self, transpose_a=False, transpose_b=False):
        super().__init__()
        self.transpose_a, self.transpose_b = bool(transpose_a), bool(transpose_b)

    def __call__(self, a, b):
        if a.ndim != 2 or b.ndim != 2:
            raise ValueError(f"MatMul: expected 2-D inputs, got shapes {a.shape} and {b.shape}")
        if self.transpose_a:
            a = _ops.transpose(a, (1, 0))
        if self.transpose_b:
            b = _ops.transpose(b, (1, 0))
        return _ops.matmul(a, b)


class BatchMatMul(MatMul):
    """Batched matrix product; transposes apply to the last two axes."""

    def __call__(self, a, b):
        if self.transpose_a:
            a = _ops.swapaxes(a, -1, -2)
        if self.transpose_b:
            b = _ops.swapaxes(b, -1, -2)
        return _ops.matmul(a, b)


class _Reduce(Primitive):
    _fn = None

    def __init__(self, keep_dims=False):
        super().__init__()
        if not isinstance(keep_dims, bool):
            raise TypeError(f"{type(self).__name__}: keep_dims must be a bool, got {keep_dims!r}")
        self.keep_dims = keep_dims

    def __call__(self, x, axis=()):
        axis = None if axis == () else axis
        return type(self)._fn(x, axis, self.keep_dims)


class ReduceSum(_Reduce):
    """Keeps the input's dtype, as MindSpore's primitive does (ops.sum widens integers to int64):
    integer sums wrap on overflow, and a bool sum is True where any element is."""

    _fn = staticmethod(lambda x, axis, keep: _ops.sum(x, axis, keep, dtype=x.dtype))


class ReduceMean(_Reduce):
    _fn = staticmethod(lambda x, axis, keep: _ops.mean(x, axis, keep))


class ReduceMax(_Reduce):
    _fn = staticmethod(lambda x, axis, keep: _ops.amax(x, axis, keep))


class ReduceMin(_Reduce):
    _fn = staticmethod(lambda x, axis, keep: _ops.amin(x, axis, keep))


class Softmax(Primitive):
    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def __call__(self, x):
        return _ops.softmax(x, self.axis)


class LogSoftmax(Softmax):
    def __call__(self, x):
        return _ops.log_softmax(x, self.axis)


class Squeeze(Primitive):
    def __init__(self, axis=()):
        super().__init__()
        self.axis = axis

    def __call__(self, x):
        return _ops.squeeze(x, None if self.axis == () else self.axis)


class Concat(Primitive):
    def __init__(self, axis=0):
        super().__init__()
        self.axis = axis

    def __call__(self, tensors):
        return _ops.concat(tensors, self.axis)


class Stack(Concat):
    def __call__(self, tensors):
        return _ops.stack(tensors, self.axis)


class Split(Primitive):
    """``Split(axis=0, output_num=1)(x)``: `output_num` equal parts of x along axis, as a tuple;
    the axis's size must be a multiple of output_num."""

    def __init__(self, axis=0, output_num=1):
        super().__init__()
        self.axis = _core.int_arg(axis, "Split", "axis")
        self.output_num = _core.int_arg(output_num, "Split", "output_num")
        if self.output_num <= 0:
            raise ValueError(f"Split: output_num must be positive, got {self.output_num}")

    def __call__(self, x):
        if not _core.is_tensor(x):
            raise TypeError(f"Split: x must be a Tensor, got {type(x).__name__}")
        if not -x.ndim <= self.axis < x.ndim:
            raise ValueError(f"Split: axis {self.axis} is out of range for shape {tuple(x.shape)}")
        size = x.shape[self.axis]
        if size % self.output_num:
            raise ValueError(f"Split: axis {self.axis} of shape {tuple(x.shape)} has size {size}, "
                             f"not a multiple of output_num {self.output_num}")
        if size == 0:
            return (x,) * self.output_num
        return _ops.split(x, size // self.output_num, self.axis)


class Gather(Primitive):
    def __init__(self, batch_dims=0):
        super().__init__()
        self.batch_dims = batch_dims

    def __call__(self, params, indices, axis):
        return _ops.gather(params, indices, axis, self.batch_dims)


class OneHot(Primitive):
    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def __call__(self, indices, depth, on_value, off_value):
        return _ops.one_hot(indices, depth, on_value, off_value, self.axis)


class Argmax(Primitive):
    def __init__(self, axis=-1, output_type=None):
        super().__init__()
        self.axis, self.output_type = axis, output_type

    def __call__(self, x):
        out = _ops.argmax(x, self.axis)
        return out if self.output_type is None else _ops.cast(out, self.output_type)


class Flatten(Primitive):
    def __call__(self, x):
        return _ops.flatten(x)
