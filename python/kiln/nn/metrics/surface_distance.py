"""Distances between the surfaces (edge pixels) of two segmentation masks:
HausdorffDistance, MeanSurfaceDistance and RootMeanSquareDistance. Erosion and the distances
are computed here with NumPy (no SciPy at run time); the tests check them against SciPy."""
import numpy as np

from kiln.nn.metrics.metric import Metric, check_input_count, rearrange_inputs

__all__ = ["HausdorffDistance", "MeanSurfaceDistance", "RootMeanSquareDistance"]

DISTANCE_METRICS = ("euclidean", "chessboard", "taxicab")


def check_choice(value, choices, name, who):
    if not isinstance(value, str):
        raise TypeError(f"For '{who}', '{name}' must be a str, but got {type(value).__name__}.")
    if value not in choices:
        raise ValueError(f"For '{who}', '{name}' must be one of {choices}, but got {value!r}.")
    return value


def check_bool(value, name, who):
    if not isinstance(value, bool):
        raise TypeError(f"For '{who}', '{name}' must be a bool, but got {type(value).__name__}.")
    return value


def erode(mask):
    """Binary erosion by the cross (each pixel and its 2 * ndim face neighbours), outside the
    array counting as background: a pixel survives when it and all those neighbours are set."""
    out = mask.copy()
    for axis in range(mask.ndim):
        n = mask.shape[axis]
        if n < 2:
            return np.zeros_like(mask)  # both neighbours along this axis lie outside
        lower = [slice(None)] * mask.ndim
        upper = [slice(None)] * mask.ndim
        lower[axis], upper[axis] = slice(0, n - 1), slice(1, n)
        shifted_up = np.zeros_like(mask)
        shifted_up[tuple(lower)] = mask[tuple(upper)]  # neighbour at +1
        shifted_down = np.zeros_like(mask)
        shifted_down[tuple(upper)] = mask[tuple(lower)]  # neighbour at -1
        out &= shifted_up & shifted_down
    return out


def edges(mask):
    """The surface of a mask: its pixels that erosion removes."""
    return mask & ~erode(mask)


def surface_distances(from_edges, to_edges, metric, chunk=4096):
    """For each pixel of from_edges, the distance to the nearest pixel of to_edges (inf when
    to_edges is empty); an empty array when from_edges is empty."""
    sources = np.argwhere(from_edges)
    if sources.shape[0] == 0:
        return np.array([])
    targets = np.argwhere(to_edges)
    if targets.shape[0] == 0:
        return np.full(sources.shape[0], np.inf)
    # integer distances for the grid metrics (int32, as SciPy's chamfer transform gives them)
    nearest = np.empty(sources.shape[0], np.float64 if metric == "euclidean" else np.int32)
    for start in range(0, sources.shape[0], chunk):
        diff = np.abs(sources[start:start + chunk, None, :] - targets[None, :, :])
        if metric == "euclidean":
            dist = np.sqrt((diff.astype(np.float64) ** 2).sum(axis=-1))
        elif metric == "chessboard":
            dist = diff.max(axis=-1)
        else:
            dist = diff.sum(axis=-1)
        nearest[start:start + chunk] = dist.min(axis=1)
    return nearest


def label_masks(metric, inputs):
    """(y_pred == label, y == label) of update's (y_pred, y, label_idx), checked."""
    who = f"{type(metric).__name__}.update"
    check_input_count(type(metric).__name__, inputs, 3)
    y_pred, y = metric._convert_data(inputs[0]), metric._convert_data(inputs[1])
    label = inputs[2]
    if isinstance(label, bool) or not isinstance(label, (int, float)):
        # MindSpore raises TypeError here for RootMeanSquareDistance, ValueError for the others
        error = TypeError if isinstance(metric, RootMeanSquareDistance) else ValueError
        raise error(f"For '{who}', the label index (inputs[2]) must be an int or a float, "
                        f"but got {type(label).__name__}.")
    if y_pred.size == 0 or y_pred.shape != y.shape:
        raise ValueError(f"For '{who}', y_pred and y must be non-empty and of one shape, but "
                         f"got {y_pred.shape} and {y.shape}.")
    if not (np.any(y_pred == label) or np.any(y == label)):
        raise ValueError(f"For '{who}', the label index {label} occurs in neither y_pred nor "
                         f"y.")
    y_pred = y_pred if y_pred.dtype == bool else y_pred == label
    y = y if y.dtype == bool else y == label
    return y_pred, y


class _SurfaceMetric(Metric):
    """Shared state: the edges of the last update's masks."""

    def clear(self):
        self._y_pred_edges = 0
        self._y_edges = 0
        self._is_update = False

    def _check_updated(self):
        if not self._is_update:
            raise RuntimeError(f"For '{type(self).__name__}', call update before eval.")

    def _distances(self, from_edges, to_edges):
        return surface_distances(from_edges, to_edges, self.distance_metric)


class HausdorffDistance(_SurfaceMetric):
    """The largest (or the `percentile`-th) distance from a surface pixel of one mask to the
    nearest surface pixel of the other; both directions unless `directed`. update(y_pred, y,
    label_idx) selects the masks `== label_idx`; eval uses the last update. With `crop`, the
    masks are first cut to the bounding box of their union and squeezed, as in MindSpore."""

    def __init__(self, distance_metric="euclidean", percentile=None, directed=False, crop=True):
        super().__init__()
        who = "HausdorffDistance"
        self.distance_metric = check_choice(distance_metric, DISTANCE_METRICS,
                                            "distance_metric", who)
        if percentile is not None and not isinstance(percentile, float):
            raise TypeError(f"For '{who}', 'percentile' must be a float or None, but got "
                            f"{type(percentile).__name__}.")
        self.percentile = percentile
        self.directed = check_bool(directed, "directed", who)
        self.crop = check_bool(crop, "crop", who)
        self.clear()

    @rearrange_inputs
    def update(self, *inputs):
        y_pred, y = label_masks(self, inputs)
        if self.crop:
            union = y_pred | y
            if not union.any():
                self._y_pred_edges, self._y_edges = np.zeros_like(y_pred), np.zeros_like(y)
                self._is_update = True
                return
            where = np.nonzero(union)
            box = tuple(slice(int(w.min()), int(w.max()) + 1) for w in where)
            y_pred, y = np.squeeze(y_pred[box]), np.squeeze(y[box])
        self._y_pred_edges, self._y_edges = edges(y_pred), edges(y)
        self._is_update = True

    def _one_way(self, from_edges, to_edges):
        dist = self._distances(from_edges, to_edges)
        if dist.shape == (0,):
            return np.inf
        if not self.percentile:
            return dist.max()
        if not 0 <= self.percentile <= 100:
            raise ValueError(f"For 'HausdorffDistance', 'percentile' must be in [0, 100], but "
                             f"got {self.percentile}.")
        return np.percentile(dist, self.percentile)

    def eval(self):
        self._check_updated()
        forward = self._one_way(self._y_pred_edges, self._y_edges)
        if self.directed:
            return forward
        return max(forward, self._one_way(self._y_edges, self._y_pred_edges))


class _MeanDistances(_SurfaceMetric):
    """MeanSurfaceDistance and RootMeanSquareDistance: update(y_pred, y, label_idx) keeps the
    edges of the masks `== label_idx`; eval averages the surface distances of the last update
    (from y_pred's surface; with `symmetric`, both ways)."""

    def __init__(self, symmetric=False, distance_metric="euclidean"):
        super().__init__()
        who = type(self).__name__
        self.distance_metric = check_choice(distance_metric, DISTANCE_METRICS,
                                            "distance_metric", who)
        self.symmetric = check_bool(symmetric, "symmetric", who)
        self.clear()

    @rearrange_inputs
    def update(self, *inputs):
        y_pred, y = label_masks(self, inputs)
        self._y_pred_edges, self._y_edges = edges(y_pred), edges(y)
        self._is_update = True


class MeanSurfaceDistance(_MeanDistances):
    """The mean surface distance (symmetric: the mean of the two directions' means)."""

    def eval(self):
        self._check_updated()
        forward = self._distances(self._y_pred_edges, self._y_edges)
        if forward.shape == (0,):
            return np.inf
        if not self.symmetric:
            return forward.mean()
        backward = self._distances(self._y_edges, self._y_pred_edges)
        if backward.shape == (0,):
            return np.inf
        return np.mean((forward.mean(), backward.mean()))


class RootMeanSquareDistance(_MeanDistances):
    """The mean squared surface distance; symmetric: the root of the mean of the two
    directions' mean squares (MindSpore's definition: only the symmetric form takes the
    root)."""

    def eval(self):
        self._check_updated()
        forward = self._distances(self._y_pred_edges, self._y_edges)
        if forward.shape == (0,):
            return np.inf
        if not self.symmetric:
            return (forward ** 2).mean()
        backward = self._distances(self._y_edges, self._y_pred_edges)
        if backward.shape == (0,):
            return np.inf
        return np.sqrt(np.mean(((forward ** 2).mean(), (backward ** 2).mean())))
