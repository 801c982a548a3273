"""kiln.common.dtype -- the element types (imported as ``mstype`` by MindSpore code)."""
import builtins

import numpy as np

from kiln import _C

__all__ = [
    "Type", "bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "float16", "bfloat16", "float32", "float64", "float_", "double", "half", "int_",
    "number_type", "float_type", "int_type", "uint_type", "dtype_to_nptype", "pytype_to_dtype",
    "to_dtype", "tuple_", "list_",
    "dtype_to_pytype",
]


# MindSpore's spelling where capitalize() differs: UInt8, BFloat16.
_DISPLAY_NAMES = {"uint8": "UInt8", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64",
                  "bfloat16": "BFloat16"}


class Type:
    """One kiln dtype; compare with ``==`` and use as ``dtype=`` anywhere."""

    __slots__ = ("_enum", "_name")

    def __init__(self, enum, name):
        self._enum = enum
        self._name = name

    @property
    def itemsize(self):
        return _C.itemsize(self._enum)

    @property
    def is_floating_point(self):
        return self in float_type

    def __repr__(self):
        return _DISPLAY_NAMES.get(self._name) or self._name.capitalize()

    __str__ = __repr__

    def __reduce__(self):
        return (to_dtype, (self._name,))


class _SequenceType:
    """The type of a Python tuple or list (MindSpore's ``mstype.tuple_``/``list_``): compared
    with ``==`` and mapped to and from the Python type; not a tensor element type."""

    __slots__ = ("_name", "pytype")

    def __init__(self, name, pytype):
        self._name, self.pytype = name, pytype

    def __repr__(self):
        return self._name

    __str__ = __repr__


tuple_ = _SequenceType("Tuple", tuple)
list_ = _SequenceType("List", list)
_SEQUENCE_TYPES = {tuple: tuple_, list: list_}

_BY_ENUM = {}


def _make(name):
    enum = getattr(_C.DType, name)
    t = Type(enum, name)
    _BY_ENUM[enum] = t
    return t


bool_ = _make("bool")
uint8 = _make("uint8")
uint16 = _make("uint16")
uint32 = _make("uint32")
uint64 = _make("uint64")
int8 = _make("int8")
int16 = _make("int16")
int32 = _make("int32")
int64 = _make("int64")
float16 = _make("float16")
bfloat16 = _make("bfloat16")
float32 = _make("float32")
float64 = _make("float64")
float_ = float32
double = float64
half = float16
int_ = int64
globals()["bool"] = bool_  # MindSpore's alias; the module uses builtins.bool for Python's bool

number_type = (uint8, uint16, uint32, uint64, int8, int16, int32, int64, float16, bfloat16,
               float32, float64)
float_type = (float16, bfloat16, float32, float64)
int_type = (int8, int16, int32, int64)
uint_type = (uint8, uint16, uint32, uint64)

_TO_NUMPY = {
    bool_: np.bool_, uint8: np.uint8, uint16: np.uint16, uint32: np.uint32, uint64: np.uint64,
    int8: np.int8, int16: np.int16, int32: np.int32, int64: np.int64, float16: np.float16,
    float32: np.float32, float64: np.float64,
}
_FROM_NUMPY = {np.dtype(v): k for k, v in _TO_NUMPY.items()}
_BY_NAME = {t._name: t for t in _BY_ENUM.values()}
_BY_NAME.update(
    {"bool_": bool_, "float": float32, "double": float64, "half": float16, "int": int64}
)


def from_enum(enum):
    return _BY_ENUM[enum]


def to_dtype(value):
    """A kiln dtype from a kiln dtype, a NumPy dtype or type, a name, or a Python type."""
    if isinstance(value, Type):
        return value
    if isinstance(value, _SequenceType):
        raise TypeError(f"{value} is a sequence type, not a tensor dtype")
    if value is builtins.bool:
        return bool_
    if value is int:
        return int64
    if value is float:
        return float32
    if isinstance(value, str):
        if value in _BY_NAME:
            return _BY_NAME[value]
        raise TypeError(f"unknown dtype {value!r}")
    try:
        npdt = np.dtype(value)
    except TypeError:
        raise TypeError(f"expected a kiln dtype, got {value!r}") from None
    if npdt in _FROM_NUMPY:
        return _FROM_NUMPY[npdt]
    if npdt.name == "bfloat16":  # ml_dtypes' bfloat16
        return bfloat16
    raise TypeError(f"NumPy dtype {npdt} has no kiln equivalent; supported: "
                    + ", ".join(t._name for t in _BY_ENUM.values()))


def dtype_to_nptype(dtype):
    """The NumPy type of a kiln dtype (bfloat16 has none: TypeError)."""
    dtype = to_dtype(dtype)
    if dtype not in _TO_NUMPY:
        raise TypeError(f"{dtype} has no NumPy equivalent")
    return _TO_NUMPY[dtype]


def pytype_to_dtype(obj):
    """The kiln type of a Python type: tuple and list give tuple_ and list_."""
    if obj in _SEQUENCE_TYPES:
        return _SEQUENCE_TYPES[obj]
    return to_dtype(obj)


def dtype_to_pytype(type_):
    """The Python type of a kiln type: bool, int or float for a dtype; tuple or list for
    tuple_ or list_."""
    if isinstance(type_, _SequenceType):
        return type_.pytype
    type_ = to_dtype(type_)
    if type_ is bool_:
        return builtins.bool
    return float if type_ in float_type else int


def promote_types(a, b):
    """The dtype two tensors of dtypes a and b combine to (docs/type_promotion.md)."""
    return from_enum(_C.promote_types(to_dtype(a)._enum, to_dtype(b)._enum))


def check_int_fits(value, dtype, op):
    """OverflowError naming `op` when the Python int `value` does not fit the integer `dtype`
    (NumPy 2's rule: a Python int never wraps silently into a narrower tensor)."""
    if isinstance(value, builtins.bool) or not isinstance(value, int):
        return
    dtype = to_dtype(dtype)
    if dtype not in _TO_NUMPY or not np.issubdtype(_TO_NUMPY[dtype], np.integer):
        return
    info = np.iinfo(_TO_NUMPY[dtype])
    if not info.min <= value <= info.max:
        # dtype's name, as NumPy's message and the engine's (not its display name, "Int8")
        raise OverflowError(f"{op}: Python integer {value} out of bounds for {dtype._name}")


def check_ints_fit(data, dtype, op):
    """check_int_fits for every Python int in a nested list/tuple (a Tensor's input data)."""
    if isinstance(data, (list, tuple)):
        for item in data:
            check_ints_fit(item, dtype, op)
    else:
        check_int_fits(data, dtype, op)
