"""Samplers: which rows of a random-access source each epoch reads, and in which order."""
import numbers

import numpy as np

from kiln.dataset import config


def _check_count(name, value, low=0, allow_none=True):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name}: {value} must be >= {low}")


class Sampler:
    """A user sampler: subclass and define ``__iter__`` yielding row indices (MindSpore's
    ``mindspore.dataset.Sampler``). ``self.dataset_size`` is the source's length."""

    def __init__(self, num_samples=None):
        _check_count("num_samples", num_samples)
        self.num_samples = num_samples
        self.dataset_size = 0

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def get_num_samples(self):
        return self.num_samples

    def _limit(self, count):
        return count if not self.num_samples else min(count, self.num_samples)

    def _indices(self, n, seed, epoch):
        """The indices of epoch `epoch` over a source of `n` rows."""
        self.dataset_size = n
        indices = np.fromiter((int(i) for i in iter(self)), dtype=np.int64)
        return indices[: self._limit(len(indices))]

    def _count(self, n):
        return len(self._indices(n, 0, 0))

    def _bind(self, dataset):
        """Called with the source it samples, before its first use (PKSampler reads labels)."""


class SequentialSampler(Sampler):
    def __init__(self, start_index=None, num_samples=None):
        super().__init__(num_samples)
        _check_count("start_index", start_index)
        self.start_index = start_index or 0

    def _indices(self, n, seed, epoch):
        if n and self.start_index >= n:
            raise ValueError(f"SequentialSampler: start_index {self.start_index} is past the "
                             f"source's {n} rows")
        return np.arange(self.start_index, self.start_index + self._count(n), dtype=np.int64)

    def _count(self, n):
        return self._limit(max(0, n - self.start_index))


class RandomSampler(Sampler):
    """A new permutation each epoch (or draws with replacement)."""

    def __init__(self, replacement=False, num_samples=None):
        super().__init__(num_samples)
        if not isinstance(replacement, bool):
            raise TypeError("RandomSampler: replacement must be a bool")
        self.replacement = replacement

    def _indices(self, n, seed, epoch):
        rng = np.random.default_rng([seed, epoch])
        if self.replacement:
            return rng.integers(0, n, size=self._count(n), dtype=np.int64)
        return rng.permutation(n)[: self._count(n)].astype(np.int64)

    def _count(self, n):
        if self.replacement and self.num_samples:
            return self.num_samples  # draws with replacement may outnumber the rows
        return self._limit(n)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probabilities proportional to `weights` (index i with
    weight i), with or without replacement, anew each epoch."""

    def __init__(self, weights, num_samples=None, replacement=True):
        super().__init__(num_samples)
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.size == 0 or np.any(w < 0) or not np.isfinite(w).all() or w.sum() <= 0:
            raise ValueError(f"WeightedRandomSampler: weights must be non-negative, finite and "
                             f"not all zero, got {list(weights)!r}")
        if not isinstance(replacement, bool):
            raise TypeError("WeightedRandomSampler: replacement must be a bool")
        if not replacement and num_samples and num_samples > np.count_nonzero(w):
            raise ValueError(f"WeightedRandomSampler: {num_samples} samples without replacement "
                             f"need as many non-zero weights, got {np.count_nonzero(w)}")
        self.weights, self.replacement = w, replacement

    def _indices(self, n, seed, epoch):
        _check_in_range(type(self).__name__, np.arange(len(self.weights)), n)
        rng = np.random.default_rng([seed, epoch])
        return rng.choice(len(self.weights), size=self._count(n), replace=self.replacement,
                          p=self.weights / self.weights.sum()).astype(np.int64)

    def _count(self, n):
        return self.num_samples or len(self.weights)


class PKSampler(Sampler):
    """`num_val` rows of each class (the values of `class_column`, in ascending order, or in a
    random order each epoch with `shuffle`); a class with fewer rows repeats them."""

    def __init__(self, num_val, num_class=None, shuffle=False, class_column="label",
                 num_samples=None):
        super().__init__(num_samples)
        _check_count("num_val", num_val, low=1, allow_none=False)
        if num_class is not None:
            raise NotImplementedError("PKSampler: num_class is not supported (as in MindSpore)")
        if not isinstance(shuffle, bool):
            raise TypeError("PKSampler: shuffle must be a bool")
        if not isinstance(class_column, str):
            raise TypeError("PKSampler: class_column must be a column name")
        self.num_val, self.shuffle, self.class_column = int(num_val), shuffle, class_column
        self._dataset, self._by_class = None, None

    def _bind(self, dataset):
        self._dataset, self._by_class = dataset, None

    def _classes(self):
        if self._by_class is None:
            if self._dataset is None:
                raise RuntimeError("PKSampler: used before it was given to a dataset")
            labels = np.asarray(self._dataset._column_values(self.class_column)).reshape(-1)
            self._by_class = {int(c): np.flatnonzero(labels == c) for c in np.unique(labels)}
        return self._by_class

    def _indices(self, n, seed, epoch):
        by_class = self._classes()
        rng = np.random.default_rng([seed, epoch])
        classes = sorted(by_class)
        if self.shuffle:
            classes = [classes[i] for i in rng.permutation(len(classes))]
        picked = []
        for c in classes:
            rows = by_class[c] if not self.shuffle else rng.permutation(by_class[c])
            picked.extend(rows[np.arange(self.num_val) % len(rows)])
        return np.asarray(picked, dtype=np.int64)[: self._limit(len(picked))]

    def _count(self, n):
        return self._limit(len(self._classes()) * self.num_val)


class SubsetSampler(Sampler):
    """The given indices, in their order."""

    def __init__(self, indices, num_samples=None):
        super().__init__(num_samples)
        self.indices = _as_indices(type(self).__name__, indices)

    def _indices(self, n, seed, epoch):
        _check_in_range(type(self).__name__, self.indices, n)
        return self.indices[: self._count(n)]

    def _count(self, n):
        return self._limit(len(self.indices))


class SubsetRandomSampler(SubsetSampler):
    """The given indices in a new random order each epoch."""

    def _indices(self, n, seed, epoch):
        _check_in_range(type(self).__name__, self.indices, n)
        order = np.random.default_rng([seed, epoch]).permutation(len(self.indices))
        return self.indices[order][: self._count(n)]


class DistributedSampler(Sampler):
    """Shard `shard_id` of `num_shards`: every shard gets ceil(n / num_shards) rows (wrapping
    around to pad), and together they cover the source. The shuffle is seeded by the config
    seed and the epoch only, so every process draws the same permutation and the shards stay
    disjoint."""

    def __init__(self, num_shards, shard_id, shuffle=True, num_samples=None, offset=-1):
        super().__init__(num_samples)
        _check_count("num_shards", num_shards, low=1, allow_none=False)
        _check_count("shard_id", shard_id, allow_none=False)
        if shard_id >= num_shards:
            raise ValueError(f"DistributedSampler: shard_id {shard_id} must be < num_shards "
                             f"{num_shards}")
        if not isinstance(shuffle, bool):
            raise TypeError("DistributedSampler: shuffle must be a bool")
        self.num_shards, self.shard_id, self.shuffle, self.offset = (num_shards, shard_id,
                                                                      shuffle, offset)

    def _indices(self, n, seed, epoch):
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        per_shard = -(-n // self.num_shards)
        positions = (np.arange(per_shard) * self.num_shards + self.shard_id) % n
        if self.shuffle:
            positions = np.random.default_rng([config.get_seed(), epoch]).permutation(n)[positions]
        return positions[: self._count(n)].astype(np.int64)

    def _count(self, n):
        return self._limit(-(-n // self.num_shards) if n else 0)


def _as_indices(name, indices):
    if isinstance(indices, (str, bytes)) or not hasattr(indices, "__len__"):
        raise TypeError(f"{name}: indices must be a list or array of ints")
    array = np.asarray(indices)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name}: indices must be ints, got {array.dtype}")
    return array.astype(np.int64).reshape(-1)


def _check_in_range(name, indices, n):
    bad = indices[(indices < 0) | (indices >= n)]
    if bad.size:
        raise IndexError(f"{name}: index {int(bad[0])} is out of range for a source of {n} rows")


def select_sampler(num_samples, shuffle, sampler, num_shards, shard_id, who):
    """The sampler a random-access source uses, from MindSpore's argument rules."""
    if sampler is not None:
        if shuffle is not None or num_shards is not None:
            raise RuntimeError(f"{who}: sampler cannot be given with shuffle or num_shards")
        if isinstance(sampler, Sampler):
            return sampler
        if hasattr(sampler, "__len__") and not isinstance(sampler, (str, bytes)):
            return SubsetSampler(sampler, num_samples)
        raise TypeError(f"{who}: sampler must be a Sampler or a list of indices, got "
                        f"{type(sampler).__name__}")
    if (num_shards is None) != (shard_id is None):
        raise RuntimeError(f"{who}: num_shards and shard_id must be given together")
    if shuffle is not None and not isinstance(shuffle, bool):
        raise TypeError(f"{who}: shuffle must be a bool")
    shuffle = True if shuffle is None else shuffle
    if num_shards is not None:
        return DistributedSampler(num_shards, shard_id, shuffle, num_samples)
    return RandomSampler(num_samples=num_samples) if shuffle else SequentialSampler(
        num_samples=num_samples)
