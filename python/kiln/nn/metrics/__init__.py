"""Evaluation metrics (MindSpore's mindspore.train.metrics): Metric and its subclasses, and the
name lookup Model uses (`names`, `get_metric_fn`, `get_metrics`). They live in kiln.nn so that
both kiln.nn and kiln.train (the layer above) can export them."""
from kiln.nn.metrics.accuracy import Accuracy
from kiln.nn.metrics.confusion_matrix import ConfusionMatrix, ConfusionMatrixMetric
from kiln.nn.metrics.dice import Dice
from kiln.nn.metrics.error import MAE, MSE, Loss
from kiln.nn.metrics.metric import Metric, rearrange_inputs
from kiln.nn.metrics.occlusion import OcclusionSensitivity
from kiln.nn.metrics.precision_recall import F1, Fbeta, Precision, Recall
from kiln.nn.metrics.roc import ROC, auc
from kiln.nn.metrics.similarity import BleuScore, CosineSimilarity, Perplexity
from kiln.nn.metrics.surface_distance import (
    HausdorffDistance,
    MeanSurfaceDistance,
    RootMeanSquareDistance,
)
from kiln.nn.metrics.topk import (
    Top1CategoricalAccuracy,
    Top5CategoricalAccuracy,
    TopKCategoricalAccuracy,
)

__all__ = ["names", "get_metric_fn", "get_metrics", "Metric", "rearrange_inputs", "Accuracy",
           "Precision", "Recall", "Fbeta", "F1", "MAE", "MSE", "Loss", "Dice", "ROC", "auc",
           "TopKCategoricalAccuracy", "Top1CategoricalAccuracy", "Top5CategoricalAccuracy",
           "ConfusionMatrix", "ConfusionMatrixMetric", "HausdorffDistance",
           "MeanSurfaceDistance", "RootMeanSquareDistance", "CosineSimilarity", "Perplexity",
           "BleuScore", "OcclusionSensitivity"]

# The names Model's `metrics={"accuracy", ...}` and get_metric_fn accept.
_FACTORY = {
    "accuracy": Accuracy,
    "acc": Accuracy,
    "precision": Precision,
    "recall": Recall,
    "F1": F1,
    "dice": Dice,
    "roc": ROC,
    "auc": auc,
    "topk": TopKCategoricalAccuracy,
    "top_1_accuracy": Top1CategoricalAccuracy,
    "top_5_accuracy": Top5CategoricalAccuracy,
    "mae": MAE,
    "mse": MSE,
    "loss": Loss,
    "confusion_matrix": ConfusionMatrix,
    "confusion_matrix_metric": ConfusionMatrixMetric,
    "hausdorff_distance": HausdorffDistance,
    "mean_surface_distance": MeanSurfaceDistance,
    "root_mean_square_distance": RootMeanSquareDistance,
    "cosine_similarity": CosineSimilarity,
    "perplexity": Perplexity,
    "bleu_score": BleuScore,
    "occlusion_sensitivity": OcclusionSensitivity,
}


def names():
    """The names get_metric_fn (and Model's `metrics={"name", ...}`) accepts, sorted."""
    return sorted(_FACTORY)


def get_metric_fn(name, *args, **kwargs):
    """A new metric of the given name (see names()), made with args and kwargs."""
    if name not in _FACTORY:
        raise KeyError(f"For 'get_metric_fn', unsupported metric {name!r}; supported: "
                       f"{names()}.")
    return _FACTORY[name](*args, **kwargs)


def get_metrics(metrics):
    """Model's `metrics` argument as {name: Metric}: None stays None, a dict of str -> Metric is
    returned as is, a set of names becomes one new metric per name."""
    if metrics is None:
        return None
    if isinstance(metrics, dict):
        for name, metric in metrics.items():
            if not isinstance(name, str) or not isinstance(metric, Metric):
                raise TypeError(f"For 'get_metrics', a dict of metrics must map str to Metric, "
                                f"but got key {type(name)} and value {type(metric)}.")
        return metrics
    if isinstance(metrics, set):
        return {name: get_metric_fn(name) for name in metrics}
    raise TypeError(f"For 'get_metrics', 'metrics' must be None, a dict or a set, but got "
                    f"{type(metrics)}.")
