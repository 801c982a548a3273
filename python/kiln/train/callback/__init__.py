"""kiln.train.callback -- MindSpore's training callbacks (mindspore.train.callback), plus kiln's
ProgressBar and LossPlot."""
from kiln.train.callback._callback import (  # noqa: F401
    Callback,
    CallbackManager,
    InternalCallbackParam,
    RunContext,
)
from kiln.train.callback._checkpoint import CheckpointConfig, ModelCheckpoint  # noqa: F401
from kiln.train.callback._monitors import History, LambdaCallback, LossMonitor, TimeMonitor
from kiln.train.callback._on_request_exit import OnRequestExit  # noqa: F401
from kiln.train.callback._plateau import EarlyStopping, ReduceLROnPlateau  # noqa: F401
from kiln.train.callback._progress import LossPlot, ProgressBar  # noqa: F401

# MindSpore's private names, which some user code imports.
_CallbackManager, _InternalCallbackParam = CallbackManager, InternalCallbackParam

__all__ = ["Callback", "RunContext", "LossMonitor", "TimeMonitor", "History", "LambdaCallback",
           "ModelCheckpoint", "CheckpointConfig", "EarlyStopping", "ReduceLROnPlateau",
           "ProgressBar", "LossPlot", "OnRequestExit"]

# A MindSpore name kiln lacks: an AttributeError that says so (kiln.common._missing).
from kiln.common._missing import missing_attribute as _missing_attribute  # noqa: E402

__getattr__ = _missing_attribute("kiln.train.callback", "mindspore.train.callback")
