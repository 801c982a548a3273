"""kiln.nn.wrap -- training wrappers."""
from kiln.nn.wrap.cell_wrapper import (  # noqa: F401
    MicroBatchInterleaved,
    TrainOneStepCell,
    WithEvalCell,
    WithLossCell,
)
from kiln.nn.wrap.grad_reducer import DistributedGradReducer  # noqa: F401
from kiln.nn.wrap.loss_scale import (  # noqa: F401
    DynamicLossScaleUpdateCell,
    FixedLossScaleUpdateCell,
    TrainOneStepWithLossScaleCell,
)

__all__ = ["DistributedGradReducer", "WithLossCell", "WithEvalCell", "TrainOneStepCell",
           "MicroBatchInterleaved",
           "DynamicLossScaleUpdateCell",
           "FixedLossScaleUpdateCell", "TrainOneStepWithLossScaleCell"]
