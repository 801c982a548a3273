"""kiln.train.metrics -- the evaluation metrics, as mindspore.train.metrics. They are defined in
kiln.nn.metrics (kiln.nn exports them too, as MindSpore's mindspore.nn does, and kiln.nn may not
import kiln.train)."""
from kiln.nn.metrics import *  # noqa: F401,F403
from kiln.nn.metrics import __all__ as _all
from kiln.nn.metrics import get_metrics  # noqa: F401 - Model's lookup, kept out of __all__

__all__ = [name for name in _all if name != "get_metrics"]
