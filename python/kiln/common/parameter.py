"""kiln.Parameter and ParameterTuple -- named tensors that Cells register and optimizers update."""
import itertools
import numbers

import numpy as np

from kiln import _C, ops
from kiln.common import dtype as mstype
from kiln.common.initializer import Initializer, initializer
from kiln.common.tensor import Tensor
from kiln.ops import _core

__all__ = ["Parameter", "ParameterTuple", "PARAMETER_NAME_DEFAULT"]

# An unnamed Parameter gets a fresh "Parameter#<n>" (MindSpore 2.x), so two unnamed ones can share
# a ParameterTuple; the Cell attribute it is assigned to replaces such a generated name.
PARAMETER_NAME_DEFAULT = "Parameter"
_GENERATED_PREFIX = PARAMETER_NAME_DEFAULT + "#"
_generated_count = itertools.count()


def _generated_name():
    return f"{_GENERATED_PREFIX}{next(_generated_count)}"


def is_generated_name(name):
    """True for a name kiln made up for an unnamed Parameter."""
    return isinstance(name, str) and name.startswith(_GENERATED_PREFIX)


def _source_tensor(default_input, owner):
    """A kiln Tensor holding the initial value of a Parameter (initializers are materialised)."""
    if isinstance(default_input, Initializer):
        return default_input.init_data()
    if hasattr(default_input, "init_data") and not isinstance(default_input, _C.TensorBase):
        return default_input.init_data()
    if isinstance(default_input, _C.TensorBase):
        return default_input  # shared, as in MindSpore
    if isinstance(default_input, np.ndarray):  # copied: the parameter owns its memory
        return Tensor(Tensor(default_input)._clone())
    if isinstance(default_input, bool):
        return Tensor(np.array(default_input))
    if isinstance(default_input, numbers.Integral):
        # MindSpore keeps a Python int parameter as int32, a float as float32.
        return Tensor(np.array(default_input, dtype=np.int32))
    if isinstance(default_input, numbers.Real):
        return Tensor(np.array(default_input, dtype=np.float32))
    if isinstance(default_input, (list, tuple)):
        return Tensor(default_input)
    raise TypeError(f"{owner}: default_input must be a Tensor, numpy.ndarray, number, list or "
                    f"Initializer, got {type(default_input).__name__}")


def _copy_into(variable, value):
    """Copies value into variable in place (same object, same storage).

    Uses ops.assign (the registry's in-place `assign` op) so that the update goes through the
    engine: autodiff and compiled graphs see the same TensorImpl change, and bfloat16 storage
    (which asnumpy() cannot alias) is handled.
    """
    if not _core.is_tensor(value):  # graph values (while compiling) are tensors too
        value = Tensor(np.asarray(value), variable.dtype)
    if value.dtype != variable.dtype:
        value = ops.cast(value, variable.dtype)
    ops.assign(variable, value)
    return variable


class Parameter(Tensor):
    """A Tensor with a name that a Cell registers and optimizers update in place.

    ``Parameter(default_input, name=None, requires_grad=True)``: default_input is a Tensor,
    a NumPy array, a number or an Initializer (materialised now). A Tensor input shares its
    storage, as in MindSpore.
    """

    init_param = True  # False inside nn.no_init_parameters(), as in MindSpore

    def __init__(self, default_input, name=None, requires_grad=True, layerwise_parallel=False,
                 parallel_optimizer=True):
        source = _source_tensor(default_input, "Parameter")
        _C.TensorBase.__init__(self, source)
        self._param_name = None
        self.name = name
        self.requires_grad = requires_grad
        self.layerwise_parallel = layerwise_parallel
        self.parallel_optimizer = parallel_optimizer
        self.is_init = True
        self.init_mode = None
        self.inited_param = None

    # ---- identity ----
    @property
    def name(self):
        return self._param_name

    @name.setter
    def name(self, value):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"Parameter.name must be a str or None, got {type(value).__name__}")
        value = value.strip() if value is not None else ""
        self._param_name = value or _generated_name()  # None or blank: a fresh name

    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        if not isinstance(value, bool):
            raise TypeError(f"Parameter '{self.name}': requires_grad must be a bool, "
                            f"got {type(value).__name__}")
        self._requires_grad = value

    @property
    def data(self):
        """MindSpore's `param.data` is the parameter itself."""
        return self

    # Parameters hash and compare by identity in containers; `==` stays elementwise.
    __hash__ = Tensor.__hash__

    # ---- updates ----
    def set_data(self, data, slice_shape=False):
        """Copies data into this parameter in place and returns self.

        The shape must match (a one-element value broadcasts); the dtype is converted.
        """
        src = _source_tensor(data, f"Parameter '{self.name}'.set_data")
        if tuple(src.shape) != tuple(self.shape):
            if src.size == 1:
                src = ops.broadcast_to(ops.reshape(src, ()), self.shape)
            else:
                raise ValueError(f"Parameter '{self.name}'.set_data: shape {tuple(src.shape)} "
                                 f"does not match the parameter's shape {tuple(self.shape)}")
        return _copy_into(self, src)

    def assign_value(self, value):
        return self.set_data(value)

    def init_data(self, layout=None, set_sliced=False):
        return self

    def clone(self, init="same"):
        """A new Parameter with copied data (or `init` values), the same name and flags."""
        if init == "same":
            data = Tensor(self._clone())
        else:
            data = initializer(init, self.shape, self.dtype)
        return Parameter(data, name=self.name, requires_grad=self.requires_grad,
                         layerwise_parallel=self.layerwise_parallel,
                         parallel_optimizer=self.parallel_optimizer)

    def value(self):
        return Tensor(self)

    # ---- printing / copying ----
    def __repr__(self):
        body = np.array2string(self._read_numpy(), separator=", ", threshold=1000)
        return (f"Parameter (name={self.name}, shape={self.shape}, dtype={self.dtype}, "
                f"requires_grad={self.requires_grad}, value=\n{body})")

    def __str__(self):
        return self.__repr__()

    def __copy__(self):
        return self.clone()

    def __deepcopy__(self, memo):
        return self.clone()

    def __reduce__(self):
        return (_rebuild_parameter, (self._read_numpy().copy(), str(self.dtype), self.name,
                                     self.requires_grad))


def _rebuild_parameter(array, dtype_name, name, requires_grad):
    return Parameter(Tensor(array, mstype.to_dtype(dtype_name)), name, requires_grad)


class ParameterTuple(tuple):
    """A tuple of Parameters (checked on construction); `clone` makes optimizer state."""

    def __new__(cls, iterable):
        items = tuple(iterable)
        ids, names = set(), set()
        for item in items:
            if not isinstance(item, Parameter):
                raise TypeError(f"ParameterTuple: every item must be a Parameter, got "
                                f"{type(item).__name__}")
            if id(item) in ids:
                continue  # the same object twice is allowed (tied weights), as in MindSpore
            if item.name in names:
                # Distinct parameters with one name would collide in checkpoints and optimizers.
                raise ValueError(f"ParameterTuple: two different parameters are named "
                                 f"'{item.name}' (its name '{item.name}' already exists); give "
                                 f"each parameter a unique name")
            ids.add(id(item))
            names.add(item.name)
        return super().__new__(cls, items)

    def clone(self, prefix, init="same"):
        """New Parameters named `prefix.<name>`, with copied data or `init` values."""
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"ParameterTuple.clone: prefix must be a non-empty str, "
                             f"got {prefix!r}")
        out = []
        for p in self:
            q = p.clone(init)
            q.name = f"{prefix}.{p.name}"
            out.append(q)
        return ParameterTuple(out)

    def __repr__(self):
        return "ParameterTuple(" + ", ".join(p.name for p in self) + ")"
