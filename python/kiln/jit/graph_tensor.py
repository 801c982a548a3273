"""GraphTensor: a tensor-valued node of the graph being compiled, with kiln.Tensor's API."""

import os
import sys

from kiln._graph_state import GraphValue
from kiln.common import dtype as mstype
from kiln.common.tensor import (
    ITER_OF_0D,
    LEN_OF_0D,
    Tensor,
    one_element_message,
    sequence_operand,
)
from kiln.common.tensor_inplace import check_fits
from kiln.common.tensor_methods import PROPERTIES
from kiln.jit import lax
from kiln.jit.errors import KILN_DIR, is_kiln_frame
from kiln.jit.forbidden import method_of
from kiln.ops import _indexing
from kiln.ops._core import call

_CONVERTER_FILE = KILN_DIR + os.path.join("jit", "convert.py")


def _run_as_plain_python():
    """True when the user code calling an in-place method is a function running as plain Python
    on graph values (reached through a callable object or a function kept in a list), not
    through the converter, whose expressions are evaluated from convert.py: the
    names that function binds cannot be rebound to the updated value. A lambda is let through:
    its one expression hands the method's result on, and the converter rebinds its own names."""
    frame = sys._getframe(2)  # past this helper and _write_inplace
    while frame is not None and is_kiln_frame(frame):
        frame = frame.f_back  # the Tensor method and kiln's helpers
    if frame is None or frame.f_code.co_name == "<lambda>":
        return False
    caller = frame.f_back
    converted = caller is not None and caller.f_code.co_filename == _CONVERTER_FILE
    return not (converted and frame.f_code.co_name == "<module>")


class CompileTimeValueError(TypeError):
    """A tensor's value was needed while compiling, but it is only known when the graph runs."""


def _from_user_code():
    """True when the code reading a shape (two frames up: past the property) is not kiln's."""
    return not is_kiln_frame(sys._getframe(2))


def _dim_operator(name):
    def apply(self, *other):
        if is_kiln_frame(sys._getframe(1)):
            return getattr(int, name)(self, *other)  # kiln's own code: -1, "any size"
        return getattr(self.value(), name)(*other)

    apply.__name__ = name
    return apply


def _dim_as_int(name):
    def refuse(self):
        if is_kiln_frame(sys._getframe(1)):
            return getattr(int, name)(self)
        raise CompileTimeValueError(
            f"axis {self.axis} of this tensor was declared of any size (None), so its size is "
            f"known only when the graph runs, not as a Python int while compiling; compute with "
            f"it as a tensor (it is one in arithmetic, comparisons and ops.dyn_shape(x))"
        )

    refuse.__name__ = name
    return refuse


class DimOfAnySize(int):
    """`x.shape[i]` where the graph was compiled without knowing that size (a dimension declared
    None): to kiln's own code the -1 it always was, but in the user's arithmetic and comparisons
    the size the graph runs with (a 0-d int64 tensor from tensor_shape), and as a Python int
    (range, int(), an index) a CompileTimeValueError instead of a silent -1."""

    def __new__(cls, tensor, axis):
        dim = super().__new__(cls, -1)
        dim.tensor, dim.axis = tensor, axis
        return dim

    kiln_dim_of_any_size = True  # how ops (below jit) recognize one: reshape resolves it

    def value(self):
        return call("tensor_shape", (self.tensor,))[self.axis]

    __hash__ = int.__hash__


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__floordiv__", "__rfloordiv__", "__truediv__", "__rtruediv__", "__mod__",
              "__rmod__", "__pow__", "__rpow__", "__neg__", "__lt__", "__le__", "__gt__",
              "__ge__", "__eq__", "__ne__"):
    setattr(DimOfAnySize, _name, _dim_operator(_name))
for _name in ("__index__", "__int__", "__float__", "__bool__"):
    setattr(DimOfAnySize, _name, _dim_as_int(_name))


def with_runtime_dims(values):
    """values with each DimOfAnySize replaced by its size as the graph runs: for the converter's
    own builtins (range, int, float, str), which act for the user's code from kiln's."""
    return tuple(v.value() if isinstance(v, DimOfAnySize) else v for v in values)


class GraphTensor(GraphValue):
    """Stands for a tensor while a function is compiled: ops on it add nodes to the graph.

    Its dtype and shape are known (from the registry's inference); its values are not, so
    ``bool(t)``, ``t.item()`` and ``t.asnumpy()`` raise CompileTimeValueError.
    """

    __slots__ = ("handle", "_dtype", "_shape", "known", "__weakref__")

    def __init__(self, handle, dtype_enum, shape):
        self.handle = handle
        self._dtype = dtype_enum
        self._shape = tuple(shape)
        self.known = None  # the value, for a constant computed while compiling (emitter._fold)

    @property
    def shape(self):
        if self._shape and min(self._shape) < 0 and _from_user_code():
            return tuple(DimOfAnySize(self, i) if d < 0 else d for i, d in enumerate(self._shape))
        return self._shape

    @property
    def dtype(self):
        return mstype.from_enum(self._dtype)

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def size(self):
        if self._shape and min(self._shape) < 0 and _from_user_code():
            # A dimension of any size: the count the graph runs with (a 0-d int64 tensor).
            return call("reduce_prod", (call("tensor_shape", (self,)),), (None, False))
        n = 1
        for d in self._shape:
            n *= d
        return n

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def strides(self):
        """Byte strides of the row-major layout of this shape (a graph value has no storage of
        its own yet; MindSpore's Graph mode answers the same)."""
        out, step = [], self.itemsize
        for d in reversed(self._shape):
            out.append(step)
            step *= d
        return tuple(reversed(out))

    @property
    def itemsize(self):
        return self.dtype.itemsize

    # Methods that change a tensor in place from Python: in a graph they would act once, while
    # compiling (kiln.jit.forbidden).
    def assign_value(self, value):
        raise method_of(self._kind(), "assign_value")

    def set_const_arg(self, const_arg=True):
        raise method_of(self._kind(), "set_const_arg")

    def set_data(self, data, slice_shape=False):
        if self._kind() != "Parameter":
            raise AttributeError("'Tensor' object has no attribute 'set_data'")
        raise method_of("Parameter", "set_data")

    def _write_inplace(self, value, op="in-place"):
        """An in-place method (x.add_(y)) in a graph: x[...] = result, with index assignment's
        meaning (kiln.jit.mutation); returns the updated value, which names of x now hold."""
        from kiln import _graph_state  # noqa: PLC0415

        if _run_as_plain_python():
            raise TypeError(
                f"{op}: compiled code reached this in-place method through a callable that runs "
                "as plain Python while compiling (a callable object, a function taken from a "
                "list or dict, a functools.partial of either), where the names bound "
                "to the tensor cannot be updated, so the write would be lost. Call the function "
                "by its name, or use the out-of-place form (x = x.add(y))"
            )
        check_fits(self, value, op)
        return _graph_state.converter().write_inplace(self, value)

    def _kind(self):
        from kiln import _graph_state  # noqa: PLC0415
        from kiln.common.parameter import Parameter  # noqa: PLC0415

        source = _graph_state.emitter().source_of(self)
        return "Parameter" if isinstance(source, Parameter) else "Tensor"

    def __getattr__(self, name):  # only for names Tensor lacks: the error names Tensor
        raise AttributeError(f"'Tensor' object has no attribute {name!r}")

    def __repr__(self):
        return f"GraphTensor(shape={list(self._shape)}, dtype={self.dtype})"

    def _no_value(self, what):
        raise CompileTimeValueError(
            f"{what} needs the value of a tensor of shape {self._shape}, which is only known when "
            f"the compiled graph runs. Use tensor operations instead (ops.where for a choice, "
            f"a tensor condition in if/while), or run this code in PyNative mode."
        )

    def _one_element(self, what):
        """A tensor of several elements has no single value, in either mode: PyNative's
        ValueError (MindSpore's too), decided from the shape while compiling."""
        if self.size != 1 and -1 not in self._shape:
            raise ValueError(one_element_message(what, self._shape))

    def __bool__(self):
        if self.known is not None:
            return bool(self.known)
        self._one_element("bool")
        self._no_value("using a tensor as a Python bool")

    def asnumpy(self):
        if self.known is not None:
            return self.known.asnumpy()
        if lax.is_lax():  # a NumPy array when the graph runs
            return lax.as_array(self)
        self._no_value("asnumpy()")

    def item(self, index=None):
        if self.known is not None:
            return self.known.item() if index is None else self.known.item(index)
        if index is None:
            self._one_element("item")
        if lax.is_lax():
            return lax.run_later(lambda t: t.item(index), (self,), {}, "Tensor.item()")
        self._no_value("item()")

    def tolist(self):
        if self.known is not None:
            return self.known.tolist()
        if lax.is_lax():
            return lax.run_later(lambda t: t.tolist(), (self,), {}, "Tensor.tolist()")
        self._no_value("tolist()")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy on a graph tensor (also `np.float32(2) * t`, which NumPy reaches first): as in
        PyNative, NumPy computes it, on the tensor's value when the graph runs (LAX)."""
        if lax.is_lax():
            return lax.RuntimeObject.__array_ufunc__(self, ufunc, method, *inputs, **kwargs)
        self._no_value(f"numpy.{ufunc.__name__}")

    def __array_function__(self, func, types_, args, kwargs):
        if lax.is_lax():
            return lax.RuntimeObject.__array_function__(self, func, types_, args, kwargs)
        self._no_value(f"numpy.{func.__name__}")

    def __float__(self):
        if self.known is not None:
            return float(self.known)
        self._one_element("float")
        self._no_value("float()")

    def __int__(self):
        if self.known is not None:
            return int(self.known)
        self._one_element("int")
        self._no_value("int()")

    def __index__(self):
        if self.known is not None:
            return self.known.__index__()
        self._no_value("using a tensor as an index")

    def __array__(self, dtype=None, copy=None):
        if self.known is not None:
            array = self.known.asnumpy()
            return array if dtype is None else array.astype(dtype)
        self._no_value("converting to a NumPy array")

    def __len__(self):
        if not self._shape:
            raise TypeError(LEN_OF_0D)
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError(ITER_OF_0D)
        for i in range(len(self)):
            yield self[i]

    def _shares_storage(self, other):
        # Unknown until run time; kernels that write (assign) handle overlap themselves.
        return False

    __hash__ = object.__hash__


def _binary(name, swap=False):
    def method(self, other):
        if isinstance(other, DimOfAnySize):  # `t + x.shape[0]`: the size the graph runs with
            other = other.value()
        if name in ("add", "sub"):  # a list of numbers converts, as in PyNative
            other = sequence_operand(other)
        if not isinstance(other, (GraphTensor, Tensor, bool, int, float)):
            return NotImplemented
        return call(name, (other, self) if swap else (self, other))

    method.__name__ = f"__{'r' if swap else ''}{name}__"
    return method


def _install_operators():
    pairs = {
        "add": "add",
        "sub": "sub",
        "mul": "mul",
        "truediv": "div",
        "floordiv": "floor_div",
        "mod": "mod",
        "pow": "pow",
        "matmul": "matmul",
        # &, |, ^, <<, >> (and ~ below) as in PyNative: bitwise on integers, logical on bools.
        "and": "bitwise_and",
        "or": "bitwise_or",
        "xor": "bitwise_xor",
        "lshift": "bitwise_left_shift",
        "rshift": "bitwise_right_shift",
    }
    for dunder, op in pairs.items():
        setattr(GraphTensor, f"__{dunder}__", _binary(op))
        setattr(GraphTensor, f"__r{dunder}__", _binary(op, swap=True))
    for dunder, op in {
        "eq": "equal",
        "ne": "not_equal",
        "lt": "less",
        "le": "less_equal",
        "gt": "greater",
        "ge": "greater_equal",
    }.items():
        setattr(GraphTensor, f"__{dunder}__", _binary(op))

    GraphTensor.__neg__ = lambda self: call("neg", (self,))
    GraphTensor.__abs__ = lambda self: call("abs", (self,))

    GraphTensor.__invert__ = lambda self: call("bitwise_not", (self,))

    def getitem(self, index):
        return _indexing.getitem(self, index)

    GraphTensor.__getitem__ = getitem

    # Tensor's Python-level methods are written with ops, so they work on graph values as is.
    skip = set(vars(GraphTensor)) | {
        "__init__",
        "__new__",
        "__setitem__",
        "__repr__",
        "__str__",
        "__format__",
        "__reduce__",
        "__copy__",
        "__deepcopy__",
        "__dict__",
        "__module__",
        "__doc__",
        "__weakref__",
        "__slots__",
        "tolist",
        "numpy",
        "copy",
        "clone",
        "init_data",
    }
    for name, value in vars(Tensor).items():
        if (
            name not in skip
            and callable(value)
            and not isinstance(value, (staticmethod, classmethod))
        ):
            setattr(GraphTensor, name, value)
    GraphTensor.T = property(lambda self: self.transpose())
    for name in PROPERTIES:  # the properties of kiln.common.tensor_methods
        setattr(GraphTensor, name, getattr(Tensor, name))


_install_operators()


def is_tensor(value):
    """True for eager tensors and graph values alike."""
    return isinstance(value, (Tensor, GraphTensor))
