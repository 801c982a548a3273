"""Activation layers: ReLU, GELU, Sigmoid, Tanh, Softmax, LogSoftmax (MindSpore names/defaults)."""
from kiln import ops
from kiln.nn import _functional as F
from kiln.nn.cell import Cell

__all__ = ["ReLU", "GELU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "get_activation"]


def _check_axis(axis, who):
    if isinstance(axis, bool) or not isinstance(axis, (int, tuple)):
        raise TypeError(f"{who}: axis must be an int, got {axis!r}")
    return axis


class ReLU(Cell):
    def construct(self, x):
        return ops.relu(x)


class GELU(Cell):
    """GELU; approximate=True (MindSpore's default) uses the tanh formula, False uses erf."""

    def __init__(self, approximate=True):
        super().__init__()
        if not isinstance(approximate, bool):
            raise TypeError(f"GELU: approximate must be a bool, got {approximate!r}")
        self.approximate = approximate

    def construct(self, x):
        return ops.gelu(x, "tanh" if self.approximate else "none")

    def extend_repr(self):
        return f"approximate={self.approximate}"


class Sigmoid(Cell):
    def construct(self, x):
        return ops.sigmoid(x)


class Tanh(Cell):
    def construct(self, x):
        return ops.tanh(x)


class Softmax(Cell):
    def __init__(self, axis=-1):
        super().__init__()
        self.axis = _check_axis(axis, "Softmax")

    def construct(self, x):
        return F.softmax(x, self.axis)

    def extend_repr(self):
        return f"axis={self.axis}"


class LogSoftmax(Cell):
    def __init__(self, axis=-1):
        super().__init__()
        self.axis = _check_axis(axis, "LogSoftmax")

    def construct(self, x):
        return F.log_softmax(x, self.axis)

    def extend_repr(self):
        return f"axis={self.axis}"


_ACTIVATIONS = {
    "relu": ReLU, "gelu": GELU, "sigmoid": Sigmoid, "tanh": Tanh, "softmax": Softmax,
    "logsoftmax": LogSoftmax,
}


def get_activation(name):
    """The activation Cell for a MindSpore activation name ('relu', 'gelu', ...); None -> None."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(f"get_activation: name must be a str, got {type(name).__name__}")
    key = name.lower()
    if key not in _ACTIVATIONS:
        raise KeyError(f"get_activation: unknown activation {name!r}; known: "
                       f"{sorted(_ACTIVATIONS)}")
    return _ACTIVATIONS[key]()
