"""kiln.ops -- functional ops (MindSpore 2.x names and signatures) and primitive classes."""
from kiln.ops import function
from kiln.ops.function import *  # noqa: F401,F403

__all__ = list(function.__all__)

from kiln.ops import composite, operations  # noqa: E402
from kiln.ops.composite import (  # noqa: E402,F401
    GradOperation,
    HyperMap,
    Map,
    MultitypeFuncGraph,
    grad,
    stop_gradient,
    value_and_grad,
)
from kiln.ops.operations import *  # noqa: E402,F401,F403
from kiln.ops.operations.debug_ops import print_  # noqa: E402,F401
from kiln.ops.primitive import (  # noqa: E402,F401
    PrimitiveWithCheck,
    PrimitiveWithInfer,
    constexpr,
    prim_attr_register,
)
from kiln.ops.vmap_api import vmap  # noqa: E402,F401

__all__ += operations.__all__ + composite.__all__ + ["constexpr", "prim_attr_register", "vmap",
            "print_"]

from kiln.common._missing import missing_attribute as _missing_attribute  # noqa: E402

__getattr__ = _missing_attribute("kiln.ops", "mindspore.ops")
