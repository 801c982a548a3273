"""kiln.nn.utils -- no_init_parameters (MindSpore's deferred parameter initialisation).

kiln materialises a Parameter's initial values when it is created, so deferring them saves no
memory; the context manager keeps MindSpore's observable flag (Parameter.init_param is False
inside it) and code written for it (construct under it, load a checkpoint, call
Cell.init_parameters_data()) runs unchanged with the same results."""
from contextlib import contextmanager

from kiln.common.parameter import Parameter

__all__ = ["no_init_parameters"]


@contextmanager
def no_init_parameters():
    """Parameter.init_param is False inside the block and True again after it."""
    Parameter.init_param = False
    try:
        yield
    finally:
        Parameter.init_param = True
