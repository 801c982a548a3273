"""Readers of dataset files: MNIST (idx), CIFAR-10/100 (binary batches) and image folders.
Headers and sizes are checked before anything is allocated; rows are read from memory maps."""
import os

import numpy as np

from kiln import _C
from kiln.dataset._sources import MappableDataset
from kiln.dataset.vision._image import decode


def _check_dir(path, who):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{who}: dataset_dir must be a path, got {type(path).__name__}")
    if not os.path.isdir(path):
        raise ValueError(f"{who}: the folder {os.fspath(path)!r} does not exist or is not a "
                         f"folder")
    return os.fspath(path)


def _usage(usage, choices, who):
    usage = "all" if usage is None else usage
    if usage not in choices:
        raise ValueError(f"{who}: usage must be one of {choices}, got {usage!r}")
    return usage


def _records(path, record_size, who):
    """The records of a file of fixed-size records, memory-mapped."""
    size = os.path.getsize(path)
    if size == 0 or size % record_size:
        raise RuntimeError(f"{who}: {path}: {size} bytes is not a whole number of "
                           f"{record_size}-byte records")
    return np.memmap(path, dtype=np.uint8, mode="r").reshape(-1, record_size)


# ---- MNIST ----

_IDX_MAGIC = {"images": 0x00000803, "labels": 0x00000801}


def _read_idx(path, kind):
    """An idx file's items (images: N x rows x cols, labels: N), memory-mapped, after checking
    the magic number and that the header's sizes match the file's."""
    dims = 3 if kind == "images" else 1
    header = 4 + 4 * dims
    with open(path, "rb") as f:
        head = f.read(header)
    if len(head) < header:
        raise RuntimeError(f"MnistDataset: {path}: the file is shorter than its idx header")
    magic = int.from_bytes(head[:4], "big")
    if magic != _IDX_MAGIC[kind]:
        raise RuntimeError(f"MnistDataset: {path}: wrong magic number {magic:#010x} for an idx "
                           f"{kind} file (expected {_IDX_MAGIC[kind]:#010x})")
    shape = tuple(int.from_bytes(head[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    expected = header + int(np.prod(shape, dtype=np.uint64))
    actual = os.path.getsize(path)
    if actual != expected:
        raise RuntimeError(f"MnistDataset: {path}: the header says {shape} ({expected} bytes) "
                           f"but the file has {actual} bytes")
    if shape[0] == 0:
        return np.zeros(shape, dtype=np.uint8)
    # Copy-on-write: rows handed out as tensors may be written to, never the file.
    return np.memmap(path, dtype=np.uint8, mode="c", offset=header, shape=shape)


class MnistDataset(MappableDataset):
    """MNIST from its idx files: columns image (28, 28, 1) uint8 and label uint32."""

    _FILES = {"train": "train", "test": "t10k"}

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
        root = _check_dir(dataset_dir, "MnistDataset")
        usage = _usage(usage, ["train", "test", "all"], "MnistDataset")
        images, labels = [], []
        for part in (["train", "test"] if usage == "all" else [usage]):
            prefix = os.path.join(root, self._FILES[part])
            image_path, label_path = prefix + "-images-idx3-ubyte", prefix + "-labels-idx1-ubyte"
            for path in (image_path, label_path):
                if not os.path.isfile(path) and usage != "all":
                    raise RuntimeError(f"MnistDataset: {path} is missing")
            if not os.path.isfile(image_path):
                continue
            im, lb = _read_idx(image_path, "images"), _read_idx(label_path, "labels")
            if len(im) != len(lb):
                raise RuntimeError(f"MnistDataset: {image_path} has {len(im)} images but "
                                   f"{label_path} has {len(lb)} labels")
            images.append(im)
            labels.append(lb)
        if not images:
            raise RuntimeError(f"MnistDataset: no MNIST idx files in {root}")
        self._images, self._labels, self._tensors = images, labels, None
        self._offsets = np.cumsum([0] + [len(lb) for lb in labels])
        super().__init__(num_samples, num_parallel_workers, shuffle, sampler, num_shards,
                         shard_id)

    def _columns(self):
        return ["image", "label"]

    def _length(self):
        return int(self._offsets[-1])

    def _read(self, index):
        part = int(np.searchsorted(self._offsets, index, side="right")) - 1
        i = index - int(self._offsets[part])
        return (np.array(self._images[part][i])[..., None],
                np.array(self._labels[part][i], dtype=np.uint32))

    def _column_values(self, name):
        if name == "label":
            return np.concatenate([np.asarray(lb) for lb in self._labels])
        return super()._column_values(name)

    def _tensor_columns(self):
        """One file pair: the images straight from the memory map (rows are views of it, read
        by the engine without Python), the labels widened to uint32."""
        if len(self._images) != 1 or not len(self._labels[0]):
            return None
        if self._tensors is None:
            images = self._images[0]
            self._tensors = [_C.tensor_from_array(images.reshape(images.shape + (1,))),
                             _C.tensor_from_array(np.asarray(self._labels[0], np.uint32))]
        return self._tensors


# ---- CIFAR ----

class _CifarDataset(MappableDataset):
    _LABELS = 1

    def __init__(self, dataset_dir, usage, num_samples, num_parallel_workers, shuffle, sampler,
                 num_shards, shard_id):
        who = type(self).__name__
        root = _check_dir(dataset_dir, who)
        usage = _usage(usage, ["train", "test", "all"], who)
        record = self._LABELS + 3072
        files = []
        for part in (["train", "test"] if usage == "all" else [usage]):
            for name in self._FILES[part]:
                path = os.path.join(root, name)
                if os.path.isfile(path):
                    files.append(path)
                elif usage != "all":
                    raise RuntimeError(f"{who}: {path} is missing")
        if not files:
            raise RuntimeError(f"{who}: no CIFAR binary files in {root}")
        self._batches = [_records(path, record, who) for path in files]
        self._offsets = np.cumsum([0] + [len(b) for b in self._batches])
        super().__init__(num_samples, num_parallel_workers, shuffle, sampler, num_shards,
                         shard_id)

    def _length(self):
        return int(self._offsets[-1])

    def _column_values(self, name):
        columns = self.get_col_names()
        if name in columns[1:]:  # a label: one byte of each record
            return np.concatenate([b[:, columns.index(name) - 1] for b in self._batches])
        return super()._column_values(name)

    def _read(self, index):
        part = int(np.searchsorted(self._offsets, index, side="right")) - 1
        record = self._batches[part][index - int(self._offsets[part])]
        image = np.array(record[self._LABELS:]).reshape(3, 32, 32).transpose(1, 2, 0)
        labels = tuple(np.array(record[i], dtype=np.uint32) for i in range(self._LABELS))
        return (np.ascontiguousarray(image),) + labels


class Cifar10Dataset(_CifarDataset):
    """CIFAR-10's binary batches: columns image (32, 32, 3) uint8 and label uint32."""

    _FILES = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)],
              "test": ["test_batch.bin"]}

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
        super().__init__(dataset_dir, usage, num_samples, num_parallel_workers, shuffle, sampler,
                         num_shards, shard_id)

    def _columns(self):
        return ["image", "label"]


class Cifar100Dataset(_CifarDataset):
    """CIFAR-100's binary files: columns image, coarse_label and fine_label (uint32)."""

    _LABELS = 2
    _FILES = {"train": ["train.bin"], "test": ["test.bin"]}

    def __init__(self, dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
        super().__init__(dataset_dir, usage, num_samples, num_parallel_workers, shuffle, sampler,
                         num_shards, shard_id)

    def _columns(self):
        return ["image", "coarse_label", "fine_label"]


# ---- Image folders ----

class ImageFolderDataset(MappableDataset):
    """One class per sub-folder (sorted names, or `class_indexing`): columns image (the file's
    bytes, or with decode=True the RGB image) and label int32."""

    def __init__(self, dataset_dir, num_samples=None, num_parallel_workers=None, shuffle=None,
                 sampler=None, extensions=None, class_indexing=None, decode=False,
                 num_shards=None, shard_id=None, cache=None, decrypt=None):
        root = _check_dir(dataset_dir, "ImageFolderDataset")
        folders = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        if class_indexing is None:
            class_indexing = {name: i for i, name in enumerate(folders)}
        elif not isinstance(class_indexing, dict):
            raise TypeError("ImageFolderDataset: class_indexing must be a dict {folder: label}")
        exts = None if extensions is None else {e.lower() for e in extensions}
        self._files = []
        for folder in folders:
            if folder not in class_indexing:
                continue
            for name in sorted(os.listdir(os.path.join(root, folder))):
                path = os.path.join(root, folder, name)
                if os.path.isfile(path) and (exts is None or
                                             os.path.splitext(name)[1].lower() in exts):
                    self._files.append((path, int(class_indexing[folder])))
        self.class_indexing, self.decode = dict(class_indexing), bool(decode)
        super().__init__(num_samples, num_parallel_workers, shuffle, sampler, num_shards,
                         shard_id)

    _tensor_rows = True

    def _columns(self):
        return ["image", "label"]

    def _length(self):
        return len(self._files)

    def get_class_indexing(self):
        return dict(self.class_indexing)

    def _read(self, index):
        path, label = self._files[index]
        data = np.fromfile(path, dtype=np.uint8)
        image = decode(data, f"ImageFolderDataset: {path}") if self.decode else data
        return image, np.array(label, dtype=np.int32)
