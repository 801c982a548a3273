"""Text of graph values in compiled code: f-strings, str.format, print and raise (LAX).

Python builds an f-string while compiling, when its values are known. A tensor the graph
computes has no value yet, so Python alone would write the compile-time placeholder's text, a
silent difference from PyNative. Instead the text is made when the graph runs (a run-time
interpreter node, lax.py) from the tensors' values, exactly as PyNative writes it; at STRICT
level that is an error naming the line.
"""

import builtins

from kiln.jit import lax
from kiln.jit.graph_tensor import CompileTimeValueError, GraphTensor, with_runtime_dims

_CONVERSIONS = {-1: None, 115: str, 114: repr, 97: ascii}


def _join(*parts):
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        value, conversion, spec = part
        convert = _CONVERSIONS.get(conversion)
        out.append(format(convert(value) if convert else value, spec))
    return "".join(out)


def _needs_runtime(what):
    if lax.is_lax():
        return True
    raise CompileTimeValueError(
        f"{what} with a tensor the graph computes: its text is only known when the graph runs "
        f"(STRICT syntax). Use print(...), or the LAX syntax level, or PyNative mode."
    )


def fstring(*parts):
    """An f-string: a str, or (graph values inside) the text made when the graph runs."""
    values = [p[0] for p in parts if not isinstance(p, str)]
    values += [p[2] for p in parts if not isinstance(p, str)]
    if not lax.uses_graph(values):
        return _join(*parts)
    _needs_runtime("an f-string")
    return lax.run_later(_join, parts, {}, "f-string", probe=False)


def str_format(template, *args, **kwargs):
    """"...".format(...) with the same rule as f-strings."""
    if not lax.uses_graph(list(args) + list(kwargs.values())):
        return template.format(*args, **kwargs)
    _needs_runtime("str.format")
    return lax.run_later(template.format, args, kwargs, "str.format", probe=False)


def print_at_runtime(args, sep, end):
    """print(...) of Python objects computed when the graph runs (with tensors among them)."""
    lax.run_later(lambda *a: builtins.print(*a, sep=sep, end=end, flush=True), args, {},
                  "print", output="none", probe=False)


def raise_at_runtime(exc_type, args):
    """raise E(...) whose arguments include values computed in Python when the graph runs."""

    def raise_now(*values):
        raise exc_type(*values)

    lax.run_later(raise_now, args, {}, f"raise {exc_type.__name__}", output="none", probe=False)


def value_builtin(fn, *args, **kwargs):
    """int(x), float(x), str(x) in compiled code: Python's for known values; for a value the
    graph computes, Python's when the graph runs (LAX), as PyNative gives it."""
    if fn in (builtins.int, builtins.float, builtins.str):
        args = with_runtime_dims(args)
    if fn not in (builtins.int, builtins.float, builtins.str) or not _unknown(args):
        return fn(*args, **kwargs)
    if not lax.is_lax():
        return fn(*args, **kwargs)  # the STRICT error (GraphTensor.__int__ and friends)
    return lax.run_later(fn, args, kwargs, f"{fn.__name__}()", probe=fn is not builtins.str)


def _unknown(values):
    return any(isinstance(v, lax.RuntimeObject)
               or isinstance(v, GraphTensor) and v.known is None for v in values)
