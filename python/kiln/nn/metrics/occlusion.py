"""OcclusionSensitivity: how much a classifier's score for the label drops when a patch around
each position of the input is replaced by pad_val (a map of where the model looks)."""
import numpy as np

from kiln.common.tensor import Tensor
from kiln.nn.cell import Cell
from kiln.nn.metrics.metric import Metric, check_input_count, rearrange_inputs

__all__ = ["OcclusionSensitivity"]


def check_box(b_box, shape):
    """(low, high) corners of the bounding box [l0, h0, l1, h1, ...] over the non-batch axes
    (a negative low is 0, a negative high is the last index), or (None, None)."""
    if b_box is None:
        return None, None
    if len(b_box) != 2 * len(shape):
        raise ValueError(f"For 'OcclusionSensitivity', b_box must hold a low and a high bound "
                         f"per non-batch axis ({2 * len(shape)} values), but got {len(b_box)}.")
    low, high = np.array(b_box[::2]), np.array(b_box[1::2])
    low[low < 0] = 0
    high[high < 0] = shape[high < 0] - 1
    if np.any(high >= shape):
        raise ValueError(f"For 'OcclusionSensitivity', b_box's upper bounds must lie inside the "
                         f"input's shape {tuple(shape)}, but got {high.tolist()}.")
    if np.any(low > high):
        raise ValueError("For 'OcclusionSensitivity', b_box's lower bounds must not exceed its "
                         "upper bounds.")
    return low, high


class OcclusionSensitivity(Metric):
    """update(model, x, label) with one input x (1, ...): for each position of x (or of b_box)
    the patch [p - margin, p + margin) (clipped to x) is set to pad_val and the model's score
    of `label` recorded, n_batch occluded inputs per call. eval() returns the baseline score
    minus those scores, in the shape of x (or of the box), squeezed."""

    def __init__(self, pad_val=0.0, margin=2, n_batch=128, b_box=None):
        super().__init__()
        who = "OcclusionSensitivity"
        if not isinstance(pad_val, float):
            raise TypeError(f"For '{who}', 'pad_val' must be a float, but got "
                            f"{type(pad_val).__name__}.")
        if isinstance(margin, bool) or not isinstance(margin, int):
            raise TypeError(f"For '{who}', 'margin' must be an int, but got "
                            f"{type(margin).__name__}.")
        if isinstance(n_batch, bool) or not isinstance(n_batch, int) or n_batch < 1:
            raise TypeError(f"For '{who}', 'n_batch' must be a positive int, but got "
                            f"{n_batch!r}.")
        if b_box is not None and not isinstance(b_box, list):
            raise TypeError(f"For '{who}', 'b_box' must be a list or None, but got "
                            f"{type(b_box).__name__}.")
        self.pad_val, self.margin, self.n_batch, self.b_box = pad_val, margin, n_batch, b_box
        self.clear()

    def clear(self):
        self._baseline = 0
        self._sensitivity_im = 0
        self._is_update = False

    def _scores(self, model, images, label):
        out = model(Tensor(np.concatenate(images))).asnumpy()
        return out[:, label].reshape(-1)

    @rearrange_inputs
    def update(self, *inputs):
        who = "OcclusionSensitivity.update"
        check_input_count("OcclusionSensitivity", inputs, 3)
        model = inputs[0]
        if not isinstance(model, Cell):
            raise TypeError(f"For '{who}', the model (inputs[0]) must be an nn.Cell, but got "
                            f"{type(model).__name__}.")
        x = self._convert_data(inputs[1])
        label = inputs[2] if isinstance(inputs[2], int) else self._convert_data(inputs[2])
        if x.ndim < 2 or x.shape[0] != 1:
            raise RuntimeError(f"For '{who}', the input must be one sample (1, ...), but got "
                               f"shape {x.shape}.")
        if not isinstance(label, int):
            if label.size != 1:
                raise RuntimeError(f"For '{who}', the label must be one class, but got "
                                   f"{label.size} values.")
            label = int(label.reshape(-1)[0])
        shape = np.array(x.shape[1:])
        low, high = check_box(self.b_box, shape)
        self._baseline = float(model(Tensor(x)).asnumpy()[0, label])
        out_shape = tuple(shape if low is None else high - low + 1)
        scores, batch = [], []
        for i in range(int(np.prod(out_shape))):
            pos = np.array(np.unravel_index(i, out_shape))
            if low is not None:
                pos = pos + low
            # the window is [p - margin, p + margin), clipped to the input
            window = tuple(slice(max(0, p - self.margin), min(n, p + self.margin))
                           for p, n in zip(pos, shape))
            occluded = x.copy()
            occluded[(slice(None),) + window] = self.pad_val
            batch.append(occluded)
            if len(batch) == self.n_batch:
                scores.append(self._scores(model, batch, label))
                batch = []
        if batch:
            scores.append(self._scores(model, batch, label))
        self._sensitivity_im = np.concatenate(scores).reshape(out_shape)
        self._is_update = True

    def eval(self):
        if not self._is_update:
            raise RuntimeError("For 'OcclusionSensitivity', call update before eval.")
        return self._baseline - np.squeeze(self._sensitivity_im)
