"""Dataset.split: disjoint parts of a dataset, at random or in order."""
import numbers

import numpy as np

from kiln.dataset import config
from kiln.dataset.samplers import SubsetRandomSampler


def _split_sizes(sizes, n):
    if not isinstance(sizes, (list, tuple)) or not sizes:
        raise TypeError("split: sizes must be a non-empty list of ints or of floats")
    if all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in sizes):
        if any(s < 1 for s in sizes) or sum(sizes) != n:
            raise ValueError(f"split: sizes {list(sizes)} must be >= 1 and add up to the "
                             f"dataset's {n} rows")
        return [int(s) for s in sizes]
    if all(isinstance(s, float) for s in sizes):
        if any(not 0 < s <= 1 for s in sizes) or abs(sum(sizes) - 1) > 1e-6:
            raise ValueError(f"split: fractions {list(sizes)} must be in (0, 1] and add to 1")
        counts = [int(round(s * n)) for s in sizes]
        counts[0] += n - sum(counts)  # rounding's difference goes to the first part
        if any(c < 1 for c in counts):
            raise ValueError(f"split: fractions {list(sizes)} of {n} rows leave a part empty")
        return counts
    raise TypeError("split: sizes must be all ints or all floats")


def split(dataset, sizes, randomize=True):
    """randomize: each part is a random subset of a random-access source, read in a new random
    order each epoch; otherwise consecutive runs of rows (skip and take)."""
    if randomize:
        source = dataset._mappable_source()
        if source is not dataset:
            raise RuntimeError("split: randomize=True needs a random-access source dataset "
                               "(split before map, batch and the other operations), or use "
                               "randomize=False")
        n = source._length()
        counts = _split_sizes(sizes, n)
        order = np.random.default_rng(config._pipeline_seed()).permutation(n)
        bounds = np.cumsum([0] + counts)
        return [source._with_sampler(SubsetRandomSampler(order[a:b]))
                for a, b in zip(bounds[:-1], bounds[1:])]
    counts = _split_sizes(sizes, dataset.get_dataset_size())
    parts, offset = [], 0
    for count in counts:
        parts.append(dataset.skip(offset).take(count))
        offset += count
    return parts
