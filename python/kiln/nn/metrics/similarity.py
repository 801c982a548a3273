"""CosineSimilarity (pairwise similarity of rows), Perplexity (exp of the mean negative log
probability of the labels) and BleuScore (n-gram overlap of translations with references)."""
import math
from collections import Counter

import numpy as np

from kiln.nn.metrics.metric import Metric, check_input_count, rearrange_inputs
from kiln.nn.metrics.surface_distance import check_bool, check_choice

__all__ = ["CosineSimilarity", "Perplexity", "BleuScore"]


class CosineSimilarity(Metric):
    """update(x) with x (N, D): the N x N matrix of row dot products ('dot') or cosines
    ('cosine'); eval() zeroes its diagonal when zero_diagonal, then returns it ('none') or its
    row sums or means. As in MindSpore, eval uses the last update."""

    def __init__(self, similarity="cosine", reduction="none", zero_diagonal=True):
        super().__init__()
        who = "CosineSimilarity"
        self.similarity = check_choice(similarity, ("dot", "cosine"), "similarity", who)
        self.reduction = check_choice(reduction, ("none", "sum", "mean"), "reduction", who)
        self.zero_diagonal = check_bool(zero_diagonal, "zero_diagonal", who)
        self.clear()

    def clear(self):
        self.sqr_mtx_res = 0
        self._is_update = False

    @rearrange_inputs
    def update(self, *inputs):
        check_input_count("CosineSimilarity", inputs, 1)
        x = self._convert_data(inputs[0])
        if x.ndim != 2:
            raise ValueError(f"For 'CosineSimilarity.update', the input must be 2-D (N, D), "
                             f"but got shape {x.shape}.")
        if self.similarity == "cosine":
            x = x / np.linalg.norm(x, ord=2, axis=1, keepdims=True)
        self.sqr_mtx_res = x @ x.T
        self._is_update = True

    def eval(self):
        if not self._is_update:
            raise RuntimeError("For 'CosineSimilarity', call update before eval.")
        result = np.array(self.sqr_mtx_res, copy=True)  # eval twice gives the same result
        if self.zero_diagonal:
            np.fill_diagonal(result, 0)
        if self.reduction == "mean":
            return result.mean(axis=-1)
        if self.reduction == "sum":
            return result.sum(axis=-1)
        return result


class Perplexity(Metric):
    """update(probabilities (..., C), labels (...)): accumulates -log p(label) (p floored at
    1e-10) over every position whose label is not ignore_label; eval() is exp of their mean."""

    def __init__(self, ignore_label=None):
        super().__init__()
        if ignore_label is not None and (isinstance(ignore_label, bool)
                                         or not isinstance(ignore_label, int)):
            raise TypeError(f"For 'Perplexity', 'ignore_label' must be an int or None, but got "
                            f"{type(ignore_label).__name__}.")
        self.ignore_label = ignore_label
        self.clear()

    def clear(self):
        self._sum_metric = 0.0
        self._num_inst = 0

    @rearrange_inputs
    def update(self, *inputs):
        check_input_count("Perplexity", inputs, 2)
        pred, label = self._convert_data(inputs[0]), self._convert_data(inputs[1])
        if pred.ndim == 0 or label.size * pred.shape[-1] != pred.size:
            raise RuntimeError(f"For 'Perplexity.update', the labels must have one value per "
                               f"row of probabilities, but got probabilities {pred.shape} and "
                               f"labels {label.shape}.")
        label = label.reshape(-1)
        rows = pred.reshape(-1, pred.shape[-1])
        chosen = rows[np.arange(label.size), label.astype(np.int64)]
        keep = np.ones(label.size, bool) if self.ignore_label is None else \
            label != self.ignore_label
        self._sum_metric -= float(np.sum(np.log(np.maximum(1e-10, chosen[keep]))))
        self._num_inst += int(keep.sum())

    def eval(self):
        if self._num_inst == 0:
            raise RuntimeError("'Perplexity' can not be calculated: no samples were seen. Call "
                               "update before eval.")
        return math.exp(self._sum_metric / self._num_inst)


def ngram_counts(tokens, n_gram):
    """Counts of every 1..n_gram-gram of a token list, keyed by tuple."""
    counts = Counter()
    for n in range(1, n_gram + 1):
        for i in range(len(tokens) - n + 1):
            counts[tuple(tokens[i:i + n])] += 1
    return counts


class BleuScore(Metric):
    """update(candidates, references): candidates a list of token lists, references a list
    (one per candidate) of lists of token lists. eval() is the corpus BLEU: the geometric mean
    of the clipped n-gram precisions (n = 1..n_gram; add-one smoothed when `smooth`) times the
    brevity penalty (candidate length against the closest reference length)."""

    def __init__(self, n_gram=4, smooth=False):
        super().__init__()
        if isinstance(n_gram, bool) or not isinstance(n_gram, int):
            raise TypeError(f"For 'BleuScore', 'n_gram' must be an int, but got "
                            f"{type(n_gram).__name__}.")
        if not 1 <= n_gram <= 4:
            raise ValueError(f"For 'BleuScore', 'n_gram' must be in [1, 4], but got {n_gram}.")
        self.n_gram = n_gram
        self.smooth = check_bool(smooth, "smooth", "BleuScore")
        self.clear()

    def clear(self):
        self._numerator = np.zeros(self.n_gram)
        self._denominator = np.zeros(self.n_gram)
        self._c = 0.0
        self._r = 0.0
        self._is_update = False

    @rearrange_inputs
    def update(self, *inputs):
        check_input_count("BleuScore", inputs, 2)
        candidates, references = inputs
        if len(candidates) != len(references):
            raise ValueError(f"For 'BleuScore.update', there must be one list of references "
                             f"per candidate, but got {len(candidates)} candidates and "
                             f"{len(references)} reference lists.")
        for candidate, refs in zip(candidates, references):
            self._c += len(candidate)
            ref_lengths = [len(ref) for ref in refs]
            # the reference length closest to the candidate's (the first of equals)
            self._r += min(ref_lengths, key=lambda length: abs(len(candidate) - length))
            counts = ngram_counts(candidate, self.n_gram)
            best = Counter()
            for ref in refs:
                best |= ngram_counts(ref, self.n_gram)
            for gram, count in (counts & best).items():
                self._numerator[len(gram) - 1] += count
            for gram, count in counts.items():
                self._denominator[len(gram) - 1] += count
        self._is_update = True

    def eval(self):
        if not self._is_update:
            raise RuntimeError("For 'BleuScore', call update before eval.")
        if min(self._numerator) == 0.0:
            return np.array(0.0)
        if self.smooth:
            precisions = (self._numerator + 1.0) / (self._denominator + 1.0)
        else:
            precisions = self._numerator / self._denominator
        geometric_mean = np.exp(np.sum(np.log(precisions) / self.n_gram))
        brevity = np.array(1.0) if self._c > self._r else np.exp(1 - np.array(self._r) /
                                                                 np.array(self._c))
        return brevity * geometric_mean
