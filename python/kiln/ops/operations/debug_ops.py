"""ops.Print: prints its inputs, each on its own line, in PyNative and when a graph runs."""
import builtins

from kiln import _graph_state
from kiln.ops._core import is_tensor
from kiln.ops.primitive import Primitive

__all__ = ["Print"]


class Print(Primitive):
    """``ops.Print()(*inputs)`` prints every input on its own line (a tensor as its repr) and
    returns None. In compiled code the graph prints when it runs, with the tensors' run-time
    values, in the order the graph computes them."""

    def __init__(self):
        super().__init__("Print")

    def __call__(self, *inputs):
        for value in inputs:
            if not (is_tensor(value) or isinstance(value, (str, bool, int, float))):
                raise TypeError(f"Print: inputs must be Tensors, str, bool, int or float, got "
                                f"{type(value).__name__}")
        if _graph_state.compiling():
            values = [v for v in inputs if is_tensor(v)]
            _graph_state.emitter().print_("\n".join(_template(v) for v in inputs), values)
            return None
        for value in inputs:
            builtins.print(repr(value) if is_tensor(value) else value, flush=True)
        return None


def _template(value):
    """The run-time text of one input: `{}` is where the graph puts a tensor's values."""
    if is_tensor(value):
        return f"Tensor(shape={list(value.shape)}, dtype={value.dtype}, value=\n{{}})"
    return str(value).replace("{", "{{").replace("}", "}}")
