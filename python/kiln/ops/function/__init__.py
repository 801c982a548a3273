"""Functional ops, one module per op family; this package (and kiln.ops) re-exports them all."""
from kiln.ops.function import (
    activation,
    array,
    clipping,
    creation_ext,
    ctc,
    elementwise,
    helpers,
    linalg,
    linalg_decomp,
    linalg_ext,
    linalg_solve,
    loss,
    math_ext,
    matrix,
    misc_ext,
    nn,
    nn_ext,
    normalization,
    random_ext,
    reduce,
    reduce_ext,
    scatter_ops,
    selection,
    shape_ext,
    spatial,
    special,
    stats_ext,
)
from kiln.ops.function.activation import *  # noqa: F401,F403
from kiln.ops.function.array import *  # noqa: F401,F403
from kiln.ops.function.clipping import *  # noqa: F401,F403
from kiln.ops.function.creation_ext import *  # noqa: F401,F403
from kiln.ops.function.ctc import *  # noqa: F401,F403
from kiln.ops.function.elementwise import *  # noqa: F401,F403
from kiln.ops.function.helpers import *  # noqa: F401,F403
from kiln.ops.function.linalg import *  # noqa: F401,F403
from kiln.ops.function.linalg_decomp import *  # noqa: F401,F403
from kiln.ops.function.linalg_ext import *  # noqa: F401,F403
from kiln.ops.function.linalg_solve import *  # noqa: F401,F403
from kiln.ops.function.loss import *  # noqa: F401,F403
from kiln.ops.function.math_ext import *  # noqa: F401,F403
from kiln.ops.function.matrix import *  # noqa: F401,F403
from kiln.ops.function.misc_ext import *  # noqa: F401,F403
from kiln.ops.function.nn import *  # noqa: F401,F403
from kiln.ops.function.nn_ext import *  # noqa: F401,F403
from kiln.ops.function.normalization import *  # noqa: F401,F403
from kiln.ops.function.random_ext import *  # noqa: F401,F403
from kiln.ops.function.reduce import *  # noqa: F401,F403
from kiln.ops.function.reduce_ext import *  # noqa: F401,F403
from kiln.ops.function.scatter_ops import *  # noqa: F401,F403
from kiln.ops.function.selection import *  # noqa: F401,F403
from kiln.ops.function.shape_ext import *  # noqa: F401,F403
from kiln.ops.function.spatial import *  # noqa: F401,F403
from kiln.ops.function.special import *  # noqa: F401,F403
from kiln.ops.function.stats_ext import *  # noqa: F401,F403

__all__ = sorted({name for module in (activation, array, clipping, ctc, elementwise, helpers,
                                      linalg, loss, matrix, nn, normalization, reduce, spatial,
                                      creation_ext, linalg_decomp, linalg_ext, linalg_solve,
                                      math_ext, nn_ext, reduce_ext, special,
                                      misc_ext, random_ext, scatter_ops, selection,
                                      shape_ext, stats_ext)
                  for name in module.__all__})
