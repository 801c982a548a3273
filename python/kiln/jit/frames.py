"""Interpreter state: a call's Frame, and the signals that carry return, break, continue, raise."""


class ReturnSignal(Exception):
    """A return statement ran; carries its value out to the function or region being run."""

    def __init__(self, value):
        self.value = value


class BreakSignal(Exception):
    """break in a loop decided at compile time."""


class ContinueSignal(Exception):
    """continue in a loop decided at compile time."""


class TensorExit(Exception):
    """break/continue reached under a tensor condition inside a compile-time loop."""


class RaisedSignal(Exception):
    """A raise statement was emitted; the rest of the block is unreachable."""


class Frame:
    """The locals of one function call being interpreted, and where in its control flow it is."""

    def __init__(self, source, fn_globals, closure, local_values, closure_cells=None):
        self.source = source
        self.locals = dict(local_values)
        self.fn_globals = fn_globals
        self.closure = closure
        self.closure_cells = closure_cells or {}  # name -> the function's closure cell
        self.region_depth = 0  # > 0 inside a tensor-dependent region
        self.loop_depth = 0  # region_depth where the innermost compile-time loop started
        self.one_branch = {}  # name -> line of the tensor-dependent if that set it in one branch


def region_frame(frame):
    """A frame for a graph region nested in `frame`: it starts from a copy of the locals."""
    inner = Frame(frame.source, frame.fn_globals, frame.closure, frame.locals, frame.closure_cells)
    inner.region_depth = frame.region_depth + 1
    inner.loop_depth = frame.loop_depth
    inner.one_branch = dict(frame.one_branch)
    return inner
