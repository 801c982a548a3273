"""kiln.train.metrics.metric -- the module path MindSpore code imports Metric from."""
from kiln.nn.metrics.metric import EvaluationBase, Metric, rearrange_inputs  # noqa: F401

__all__ = ["Metric", "rearrange_inputs", "EvaluationBase"]
