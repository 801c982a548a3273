"""kiln.ops.primitive -- the Primitive base classes, prim_attr_register, constexpr and _primexpr.

kiln's own primitive classes (ops.operations) call registry ops through the functional API. A
user-defined primitive (MindSpore's idiom: a subclass whose ``__init__`` is decorated with
``prim_attr_register``) keeps its attributes here; it computes through ``check_elim`` or
``infer_value`` (PrimitiveWithInfer), since kiln has no kernel registry keyed by primitive name.
"""
import functools
import inspect

from kiln import _graph_state, log
from kiln.common.mutable import _MUTABLE_TYPES
from kiln.ops._core import is_tensor

__all__ = ["Primitive", "PrimitiveWithInfer", "PrimitiveWithCheck", "prim_attr_register",
           "constexpr"]

# attributes that are bookkeeping, not the primitive's configuration (left out of repr)
_NOT_SHOWN = ("name", "attrs", "init_attrs", "instance_name", "input_names", "output_names")


class Primitive:
    """Base of the primitive classes: a name, attributes (``attrs``), and a call."""

    def __init__(self, name=None):
        name = name or type(self).__name__
        if not isinstance(name, str):
            raise TypeError(f"Primitive: name must be a str, got {type(name).__name__}")
        self.name = name
        self.attrs = {}
        self.init_attrs = {"name": name}

    def add_prim_attr(self, name, value):
        """Sets attribute `name` (readable as ``prim.name`` and in ``prim.attrs``)."""
        self.__dict__[name] = value
        self.attrs[name] = value
        return self

    def del_prim_attr(self, name):
        if name in self.__dict__ and name in self.attrs:
            del self.__dict__[name]
            del self.attrs[name]
        return self

    def set_prim_instance_name(self, instance_name):
        self.instance_name = instance_name
        return self

    def init_prim_io_names(self, inputs, outputs):
        self.add_prim_attr("input_names", inputs)
        self.add_prim_attr("output_names", outputs)

    def set_device(self, device_target):
        return self.add_prim_attr("primitive_target", device_target)

    def check_elim(self, *args):
        """(True, result) when the call's result is known without a kernel; a subclass says."""
        return (False, None)

    def __call__(self, *args):
        eliminated, output = self.check_elim(*args)
        if eliminated:
            return output
        raise NotImplementedError(
            f"{self.name}: kiln has no kernel registered under this primitive's name; a "
            f"user-defined primitive computes through check_elim, infer_value "
            f"(PrimitiveWithInfer) or its own __call__"
        )

    def __repr__(self):
        shown = {k: v for k, v in vars(self).items() if k not in _NOT_SHOWN}
        attrs = ", ".join(f"{k}={v!r}" for k, v in shown.items())
        return f"Prim[{self.name}]" + (f"<{attrs}>" if attrs else "")


def _is_variable(value):
    """True when a value is only known when the graph runs: a graph value, a mutable() value,
    or a container holding one."""
    if isinstance(value, _MUTABLE_TYPES):
        return True
    if isinstance(value, (tuple, list)):
        return any(_is_variable(v) for v in value)
    if isinstance(value, dict):
        return any(_is_variable(v) for v in value.values())
    return is_tensor(value) and _graph_state.compiling()


def _known_part(value):
    """What compile time knows of a value (MindSpore's constexpr inputs): each run-time value
    becomes None, inside tuples, lists and dicts too; a mutable() container is None throughout."""
    if isinstance(value, (list, tuple)) and isinstance(value, _MUTABLE_TYPES):
        return [None] * len(value) if isinstance(value, list) else (None,) * len(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_known_part(v) for v in value)
    if isinstance(value, dict):
        return {k: _known_part(v) for k, v in value.items()}
    return None if _is_variable(value) else value


class PrimitiveWithInfer(Primitive):
    """A primitive with Python inference: infer_shape, infer_dtype and infer_value.

    Called on values known now (every call in PyNative; constants while compiling), the result
    is infer_value's when it gives one, as MindSpore folds such calls at compile time."""

    def infer_shape(self, *args):
        return None

    def infer_dtype(self, *args):
        return None

    def infer_value(self, *args):
        return None

    def __call__(self, *args):
        eliminated, output = self.check_elim(*args)
        if eliminated:
            return output
        if not any(_is_variable(a) for a in args):
            value = self.infer_value(*args)
            if value is not None:
                return value
        return super().__call__(*args)


class PrimitiveWithCheck(Primitive):
    """A primitive with Python checks (check_shape, check_dtype) before it runs."""

    def check_shape(self, *args):
        return None

    def check_dtype(self, *args):
        return None


def prim_attr_register(fn):
    """Decorates a primitive's ``__init__``: initialises the primitive with its class name and
    records every argument of ``__init__`` (defaults included) as an attribute, then runs it."""

    @functools.wraps(fn)
    def init(self, *args, **kwargs):
        Primitive.__init__(self, getattr(type(self), "substitute_name", type(self).__name__))
        bound = inspect.signature(fn).bind(self, *args, **kwargs)
        bound.apply_defaults()
        del self.init_attrs["name"]
        for name, value in list(bound.arguments.items())[1:]:
            self.add_prim_attr(name, value)
            self.init_attrs[name] = value
        fn(self, *args, **kwargs)

    init.decorated_func = fn
    return init


def _compile_time_op(fn, name, reuse_result, on_variable):
    """The primitive class of a constexpr/_primexpr function."""

    class CompileOp(PrimitiveWithInfer):
        def __init__(self):
            super().__init__(name or fn.__name__)
            self.fn = fn
            self.add_prim_attr("constexpr_prim", True)
            if not reuse_result:
                self.add_prim_attr("forbid_reuse_result", True)

        def infer_value(self, *args):
            return fn(*args)

        def __call__(self, *args, **kwargs):
            if _graph_state.compiling() and (
                any(_is_variable(a) for a in args) or any(_is_variable(v) for v in kwargs.values())
            ):
                return on_variable(self, args, kwargs)
            return fn(*args, **kwargs)  # PyNative, or constants while compiling: folded

    CompileOp.__name__ = CompileOp.__qualname__ = name or fn.__name__
    return CompileOp


def _constexpr_on_variable(op, args, kwargs, check):
    if check:
        log.warning(f'The "{op.name}" is a constexpr function. The input arguments must be all '
                    f"constant value.")
    args = [_known_part(a) for a in args]
    kwargs = {k: _known_part(v) for k, v in kwargs.items()}
    return op.fn(*args, **kwargs)


def _primexpr_on_variable(op, args, kwargs):
    converter = _graph_state.converter()
    return converter.call_function(op.fn, args, kwargs)  # compiled from source into the graph


def constexpr(fn=None, get_instance=True, name=None, reuse_result=True, check=True):
    """Marks a function evaluated at compile time on constant inputs (its result is a constant
    of the graph). Run-time values reach it as None (inside tuples, lists and dicts too), and with
    check such a call logs a warning, as in MindSpore."""

    def deco(fn):
        on_variable = functools.partial(_constexpr_on_variable, check=check)
        op_class = _compile_time_op(fn, name, reuse_result, on_variable)
        return op_class() if get_instance else op_class

    return deco(fn) if fn is not None else deco


def _primexpr(fn=None, get_instance=True, name=None, reuse_result=True):
    """Like constexpr, but a call on run-time values compiles the function into the graph."""

    def deco(fn):
        op_class = _compile_time_op(fn, name, reuse_result, _primexpr_on_variable)
        return op_class() if get_instance else op_class

    return deco(fn) if fn is not None else deco
