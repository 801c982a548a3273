"""kiln.common.mutable -- mutable(), as MindSpore code imports it (defined in kiln.jit.api)."""
from kiln.jit.api import mutable

__all__ = ["mutable"]
