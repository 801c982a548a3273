"""Checked builtins for compiled code: max/min, enumerate, shifts and list/tuple methods give
Python's results, and for a mistake the exception MindSpore raises, with a message that names
the call, the argument and what it should be."""

import builtins
import operator

from kiln.jit.graph_tensor import is_tensor

_NUMBERS = (bool, int, float)


def _holds_tensor(value):
    if is_tensor(value):
        return True
    return type(value) in (list, tuple) and any(_holds_tensor(v) for v in value)


def _extremum(name, fn, args, kwargs):
    """max/min: a 0-d tensor cannot be iterated, an empty sequence has no extremum, and lists or
    tuples of tensors cannot be ordered while compiling (MindSpore refuses them too)."""
    if len(args) == 1:
        items = args[0]
        if is_tensor(items) and items.ndim == 0:
            raise TypeError(f"{name}() of one 0-d tensor: Cannot iterate over a scalar tensor. "
                            f"Give {name}() several values, or reduce a tensor with ops.{name}")
        if type(items) in (list, tuple) and not items and "default" not in kwargs:
            raise ValueError(f"{name}() arg is an empty sequence: there is nothing to compare "
                             f"(give default= for that case)")
        nested = type(items) in (list, tuple) and any(
            type(v) in (list, tuple) and _holds_tensor(v) for v in items)
        if nested:  # (with two or more arguments, comparing them is PyNative's comparison)
            raise TypeError(f"{name}() over lists or tuples that hold tensors: compiled code "
                            f"cannot support tensor in list or tuple nested now (it would order "
                            f"them by comparing tensors element by element); apply {name}() "
                            f"to the tensors themselves, or use ops.maximum/ops.minimum")
    return fn(*args, **kwargs)


def checked_max(*args, **kwargs):
    return _extremum("max", builtins.max, args, kwargs)


def checked_min(*args, **kwargs):
    return _extremum("min", builtins.min, args, kwargs)


def checked_enumerate(iterable, start=0):
    """enumerate: the sequence must be iterable and `start` an int, as in Python and MindSpore."""
    if not is_tensor(iterable):  # a tensor explains its own iteration errors (0-d)
        try:
            iterable = iter(iterable)
        except TypeError:
            raise TypeError(f"For 'enumerate', the 'first input' should be tuple or list or "
                            f"tensor, but got {type(iterable)}: the value {iterable!r} cannot "
                            f"be iterated") from None
    if not isinstance(start, int):
        raise TypeError(f"For 'enumerate', the 'start' should be a const int number, but got "
                        f"{start!r}. It counts the items, so it must be a Python int")
    return enumerate(iterable, start)


def _shift(symbol, fn, a, b):
    """<< and >> of two Python numbers: integers only, and a count that is not negative."""
    if type(a) in _NUMBERS and type(b) in _NUMBERS:
        if type(a) is float or type(b) is float:
            raise TypeError(f"{a!r} {symbol} {b!r}: the shift operators need integers; only "
                            f"integer types are supported, but got {type(a).__name__} and "
                            f"{type(b).__name__}")
        if b < 0:
            raise ValueError(f"{a!r} {symbol} {b!r}: the shift count must be a non-negative "
                             f"integer, got {b}")
    return fn(a, b)


def left_shift(a, b):
    return _shift("<<", operator.lshift, a, b)


def right_shift(a, b):
    return _shift(">>", operator.rshift, a, b)


def call_method(obj, name, *args, **kwargs):
    """obj.name(*args, **kwargs), with list.pop/insert's index checked first and a value that
    list/tuple.index does not find named (other objects' methods are called as they are)."""
    kind = type(obj)
    if kind is list and name == "pop":  # an outside list may change when the graph runs
        from kiln import _graph_state  # noqa: PLC0415

        converter = _graph_state.converter()
        if converter is not None:
            return converter.list_method(obj, name, *args, **kwargs)
    check_list_call(obj, name, args)
    try:
        return getattr(obj, name)(*args, **kwargs)
    except ValueError as e:
        if name != "index" or kind not in (list, tuple) or "not in" not in str(e):
            raise
        where = f" between positions {args[1:3]}" if len(args) > 1 else ""
        raise ValueError(f"{kind.__name__}.index({args[0]!r}): {args[0]!r} is not in the "
                         f"{kind.__name__} {obj!r}{where}") from None


def check_list_call(obj, name, args):
    """list.pop/insert's index: an int (TypeError), and for pop one in range (IndexError)."""
    if type(obj) is list and name == "pop":
        _check_index(obj, name, args[0] if args else -1)
    if type(obj) is list and name == "insert" and args:
        _check_index(obj, name, args[0])


def _check_index(seq, name, index):
    if not isinstance(index, int) and not hasattr(type(index), "__index__"):
        shown = f"FP32Imm type value: {index!r}" if type(index) is float else (
            f"{type(index).__name__} value: {index!r}")
        raise TypeError(f"list.{name}() index: Integer argument expected, but got {shown} "
                        f"(the index must be an int)")
    if name == "pop" and isinstance(index, int) and not -len(seq) <= index < len(seq):
        what = ("an empty list" if not seq else
                f"a list of {len(seq)} items (valid: {-len(seq)} to {len(seq) - 1})")
        raise IndexError(f"list.pop({index}): The pop index out of range for {what}")
