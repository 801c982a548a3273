"""kiln.nn.wrap -- training wrappers."""
from kiln.nn.wrap.cell_wrapper import TrainOneStepCell, WithEvalCell, WithLossCell  # noqa: F401

__all__ = ["WithLossCell", "WithEvalCell", "TrainOneStepCell"]
