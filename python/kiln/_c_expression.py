"""kiln._c_expression -- the name of MindSpore's C++ extension module, for code that imports it.

MindSpore code (its test helpers, and libraries that check for a raw C++ tensor) writes
``isinstance(x, mindspore._c_expression.TensorPy)``. In MindSpore that class is the C++ base of
``Tensor`` and ``Parameter``; in kiln the same role is played by ``kiln._C.TensorBase``, so
``TensorPy`` names it and the check means the same. MindSpore's other C++ entry points (its
graph executor, type objects, IR printers) have no kiln counterpart and are not offered.
"""
from kiln import _C

TensorPy = _C.TensorBase

__all__ = ["TensorPy"]
