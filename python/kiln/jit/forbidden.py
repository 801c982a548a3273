"""APIs compiled code may not call: they act on Python-side state when called, which in a graph
would happen once, while compiling, instead of on every run (MindSpore refuses the same ones).

Reading settings (`get_context`, `log.get_level`) stays allowed, a deliberate difference from
MindSpore, which refuses those too: the value is a compile-time constant, guarded, so changing
the setting recompiles (docs/compatibility.md).
"""

import functools
import sys
import types

from kiln import _graph_state
from kiln.jit.scope import Scope

# Modules whose every function and class is refused, but for the readers named get_*.
_MODULES = ("kiln.common.initializer", "kiln.log", "kiln.context")


def api_name(kind, module, qualname):
    """How an error names a kiln API: by the MindSpore name the program's code mirrors
    (`mindspore.nn.cell.Cell.get_parameters`), with kiln's own module path after it."""
    kiln_name = f"{module}.{qualname}"
    if module == "kiln" or module.startswith("kiln."):
        return f"the {kind} 'mindspore{kiln_name[len('kiln'):]}' ({kiln_name} in kiln)"
    return f"the {kind} '{kiln_name}'"


def message(what):
    return (f"Failed to compile in GRAPH_MODE because {what} is not supported in compiled code "
            f"('construct' or a @jit function): it works on Python-side state, which a graph "
            f"would touch once, while compiling, not on every run. Call it outside the "
            f"compiled function, in PyNative code.")


# Classes compiled code may not instantiate, with MindSpore's exception type and why.
_CLASSES = {
    "kiln.common.parameter.Parameter": (
        ValueError, "a Parameter made by a graph would be made once, while compiling, and shared "
        "by every run; create it in __init__ and read it as self.<name>"),
}


def refused_in_compiled_code(method):
    """Marks a method compiled code may not call (MindSpore refuses the same ones): a call that
    compiled user code makes raises RuntimeError; kiln's own code, which runs as plain Python
    while compiling, may still call it."""
    what = api_name("method or function", method.__module__, method.__qualname__)

    @functools.wraps(method)
    def checked(*args, **kwargs):
        # user code being compiled runs its expressions with a Scope as globals (jit/scope.py)
        if _graph_state.compiling() and isinstance(sys._getframe(1).f_globals, Scope):
            raise RuntimeError(message(what))
        return method(*args, **kwargs)

    return checked


class ForbiddenCall:
    """Stands for a refused function or class read by compiled code: calling it raises.
    `target` is what it stands for (isinstance sees through it)."""

    def __init__(self, target, what, error=RuntimeError, why=None):
        self.target, self._what, self._error, self._why = target, what, error, why
        self.__name__ = getattr(target, "__name__", "function")

    def __call__(self, *args, **kwargs):
        if self._why is not None:
            raise self._error(f"{self._what} cannot be called in compiled code ('construct' or a "
                              f"@jit function): {self._why}")
        raise self._error(message(self._what))


class SettingRead:
    """A reader of settings (get_context, log.get_level) called by compiled code: its answer is
    a constant of the graph, guarded (kiln.jit.guards) so that a changed setting recompiles."""

    def __init__(self, reader, guards):
        self._reader, self._guards = reader, guards
        self.__name__ = reader.__name__

    def __call__(self, *args, **kwargs):
        reader = self._reader
        value = reader(*args, **kwargs)
        call_text = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
        self._guards.record(f"{reader.__module__}.{reader.__name__}({call_text})",
                            lambda: reader(*args, **kwargs), value)
        return value


def refused(value, guards):
    """What compiled code sees for `value`: a ForbiddenCall for a refused API, a SettingRead for
    a reader of settings, a proxy for a kiln module (its attributes are checked in turn), else
    None (the value as it is)."""
    if isinstance(value, types.ModuleType):
        name = value.__name__
        is_kiln = name == "kiln" or name.startswith("kiln.")
        return KilnModule(value, guards) if is_kiln else None
    if isinstance(value, type):
        refusal = _CLASSES.get(f"{value.__module__}.{value.__qualname__}")
        if refusal is not None:
            return ForbiddenCall(value, api_name("class", value.__module__, value.__qualname__),
                                 *refusal)
    if not callable(value) or getattr(value, "__module__", None) not in _MODULES:
        return None
    if value.__module__ != "kiln.common.initializer" and value.__name__.startswith("get_"):
        return SettingRead(value, guards)
    kind = "class" if isinstance(value, type) else "method or function"
    return ForbiddenCall(value, api_name(kind, value.__module__, value.__qualname__))


class KilnModule:
    """A kiln module as compiled code sees it: attribute reads go through refused()."""

    def __init__(self, module, guards):
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_guards", guards)

    def __getattr__(self, name):
        value = getattr(self._module, name)
        seen = refused(value, self._guards)
        return value if seen is None else seen

    def __setattr__(self, name, value):
        setattr(self._module, name, value)

    def __repr__(self):
        return repr(self._module)


def method_of(kind, name):
    """RuntimeError for a refused method of a graph value (`kind`: Tensor or Parameter)."""
    return RuntimeError(message(f"the '{kind}' object's method '{name}'"))
