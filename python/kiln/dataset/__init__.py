"""kiln.dataset: MindSpore's data pipeline (``import kiln.dataset as ds``), run by a C++ engine
of stages on threads joined by bounded queues (docs/dataset.md)."""
from kiln.dataset import config, transforms, vision  # noqa: F401
from kiln.dataset._dataset import BatchInfo, Dataset  # noqa: F401
from kiln.dataset._iterators import DictIterator, TupleIterator  # noqa: F401
from kiln.dataset._readers import (  # noqa: F401
    Cifar10Dataset,
    Cifar100Dataset,
    ImageFolderDataset,
    MnistDataset,
)
from kiln.dataset._sources import GeneratorDataset, NumpySlicesDataset  # noqa: F401
from kiln.dataset.samplers import (  # noqa: F401
    DistributedSampler,
    PKSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    SubsetSampler,
    WeightedRandomSampler,
)


def zip(datasets):  # noqa: A001 - MindSpore's name
    """Rows of several datasets side by side (ds.zip((a, b)))."""
    datasets = tuple(datasets)
    if len(datasets) < 2:
        raise ValueError("zip: give at least two datasets")
    return datasets[0].zip(datasets[1:])
