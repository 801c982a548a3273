"""Errors that point at the user's code: the file/line banner, and re-raising at a line."""

import os

# kiln's package directory, with its separator: a file under it is kiln's, not the user's
KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_kiln_frame(frame):
    """The frame runs kiln's own code (a user file beside the package does not count)."""
    return frame.f_code.co_filename.startswith(KILN_DIR)


def where(source, lineno):
    return f'File "{source.filename}", line {lineno}\n    {source.line_text(lineno)}\n'


class GraphZeroDivisionError(ZeroDivisionError, ValueError):
    """Division by zero while compiling: Python's ZeroDivisionError and, as in MindSpore's Graph
    mode, a ValueError (either except clause catches it)."""


def at_line(error, source, lineno):
    """The same kind of exception, with the user's file, line and source text appended."""
    if type(error) is ZeroDivisionError:
        error = GraphZeroDivisionError(f"The divisor could not be zero ({error})")
    message = f"{_explained(error) or error}\n  at {where(source, lineno).rstrip()}"
    try:
        new = type(error)(message)
    except Exception:  # noqa: BLE001 - exception types with unusual constructors
        new = RuntimeError(message)
    return new


# A Python constant as the graph types it (MindSpore's names for the same values).
_CONSTANT_KINDS = {bool: "Bool", int: "Int", float: "Float", str: "String"}


def _explained(error):
    """A missing attribute of a Python constant or of a namedtuple, named in the graph's type
    words with what the value is; None for other errors (their own text stands)."""
    obj, name = getattr(error, "obj", None), getattr(error, "name", None)
    if type(error) is not AttributeError or name is None:
        return None
    kind = type(obj)
    if kind in _CONSTANT_KINDS:
        return (f"'{_CONSTANT_KINDS[kind]}' object has no attribute '{name}': the Python "
                f"{kind.__name__} {obj!r} is a constant of the graph")
    if isinstance(obj, tuple) and hasattr(kind, "_fields"):
        fields = ", ".join(kind._fields) or "none"
        return (f"'NamedTuple' object has no attribute '{name}': {obj!r} is a {kind.__name__} "
                f"namedtuple, whose fields are {fields}")
    return None


def explain_one_branch_name(error, frame):
    """A NameError for a name a tensor-dependent if assigned in only one branch, saying so."""
    name = getattr(error, "name", None) if type(error) is NameError else None
    if name not in frame.one_branch:
        return error
    return NameError(
        f"name {name!r} is assigned in only one branch of the tensor-"
        f"dependent if at line {frame.one_branch[name]}, so it may be "
        f"undefined here; "
        f"assign it before the if or in both branches"
    )
