"""kiln.common -- dtypes, Tensor and initializers, as in mindspore.common.

This package's modules sit in two layers (dtype and mutable below kiln.ops, Tensor and
Parameter above it), so this __init__ imports only the lower ones; kiln/__init__.py adds Tensor,
Parameter and ParameterTuple to its names for `from kiln.common import Tensor`.
"""
from kiln.common.mutable import mutable  # noqa: F401 - the function, as MindSpore's package has
