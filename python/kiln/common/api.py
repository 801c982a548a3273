"""kiln.common.api -- where MindSpore code imports jit, jit_class and the Cell graph executor."""
import inspect

from kiln import _graph_state
from kiln.jit.api import cell_jit_function, jit
from kiln.nn.cell import Cell

__all__ = ["jit", "jit_class"]


def jit_class(cls):
    """Marks a user-defined class whose instances compiled code uses (their attributes and
    methods), as MindSpore's jit_class; TypeError for anything but a class, or for a Cell."""
    if not inspect.isclass(cls):
        raise TypeError(f"jit_class: the decorator can only be used on a class, got {cls!r}")
    if issubclass(cls, Cell):
        raise TypeError(f"jit_class: the decorator is for user-defined classes and cannot be "
                        f"used on an nn.Cell: {cls.__qualname__}")
    cls.__ms_class__ = True
    return cls


class _CellGraphExecutor:
    """MindSpore's _cell_graph_executor: compile a Cell's construct for some inputs without
    running it, then run the compiled graph."""

    def __init__(self):
        self._phases = set()

    def compile(self, obj, *args, phase="predict", do_convert=True, jit_config_dict=None,
                **kwargs):
        """Compiles obj.construct for these arguments (whatever the context's mode) and keeps it
        in the Cell's compile cache. Returns (phase, True if it compiled now, False if a
        compiled graph was already there)."""
        if not isinstance(obj, Cell):
            raise TypeError(f"_cell_graph_executor.compile: expected an nn.Cell, got "
                            f"{type(obj).__name__}")
        if _graph_state.compiling():
            raise RuntimeError("_cell_graph_executor.compile cannot be called while a graph is "
                               "being compiled")
        if jit_config_dict is not None:
            obj.set_jit_config(jit_config_dict)
        jitted = cell_jit_function(obj)
        before = len(jitted.variants())
        jitted.compiled_for(obj, args, kwargs)
        key = f"{phase}.{type(obj).__name__}.{id(obj)}"
        self._phases.add(key)
        return key, len(jitted.variants()) > before

    def has_compiled(self, phase="predict"):
        return phase in self._phases

    def __call__(self, obj, *args, phase="predict", **kwargs):
        """Runs obj's compiled construct on args (compiling it first if needed)."""
        return cell_jit_function(obj).call_bound(obj, *args, **kwargs)


_cell_graph_executor = _CellGraphExecutor()
