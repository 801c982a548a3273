"""ops.Print and its function form ops.print_ (printing in PyNative and when a graph runs), and
ops.HookBackward."""
import builtins

from kiln import _graph_state
from kiln.ops._core import is_tensor
from kiln.ops.primitive import Primitive

__all__ = ["Print", "HookBackward"]


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


def print_(*input_x):
    """Prints each input (a Tensor, str, bool, int or float) on its own line and returns None:
    ``ops.Print()(*input_x)`` as a function. In compiled code the graph prints when it runs,
    with the tensors' run-time values."""
    return Print()(*input_x)


def _template(value):
    """The run-time text of one input: `{}` is where the graph puts a tensor's values."""
    if is_tensor(value):
        return f"Tensor(shape={list(value.shape)}, dtype={value.dtype}, value=\n{{}})"
    return str(value).replace("{", "{{").replace("}", "}}")


class HookBackward(Primitive):
    """``HookBackward(hook_fn)(*tensors)`` returns the tensors unchanged; when a gradient is
    taken (PyNative), hook_fn(grads) gets the tuple of their gradients and may return new
    ones. In compiled code it passes the tensors through and the hook does not run (as in
    MindSpore's Graph mode); kiln logs a warning."""

    def __init__(self, hook_fn, cell_id=""):
        super().__init__("HookBackward")
        if not callable(hook_fn):
            raise TypeError(f"HookBackward: hook_fn must be a Python function, got "
                            f"{type(hook_fn).__name__}")
        self.hook_fn = hook_fn
        self.cell_id = cell_id

    def __call__(self, *inputs):
        if not inputs or not all(is_tensor(x) for x in inputs):
            raise TypeError("HookBackward: the inputs must be one or more Tensors")
        if _graph_state.compiling():
            from kiln import log  # noqa: PLC0415

            log.warning("HookBackward: the hook does not run in compiled code (Graph mode); "
                        "the inputs pass through unchanged")
            return inputs[0] if len(inputs) == 1 else inputs
        from kiln.ops import _backward_hooks  # noqa: PLC0415

        def backward(grads):
            return _backward_hooks.as_grads(self.hook_fn(tuple(grads)), grads, "HookBackward")

        out = _backward_hooks.cut(inputs, backward)
        return out[0] if len(out) == 1 else tuple(out)
