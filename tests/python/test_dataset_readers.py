"""MnistDataset, Cifar10/100Dataset and ImageFolderDataset over files the tests write, and
their answers to damaged files."""
import os

import cv2
import numpy as np
import pytest

import kiln.dataset as ds


def _rows(dataset):
    return list(dataset.create_tuple_iterator(output_numpy=True, num_epochs=1))


def _write_idx(path, magic, array):
    with open(path, "wb") as f:
        f.write(magic.to_bytes(4, "big"))
        for dim in array.shape:
            f.write(int(dim).to_bytes(4, "big"))
        f.write(array.astype(np.uint8).tobytes())


@pytest.fixture
def mnist_dir(tmp_path):
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 5), ("t10k", 3)):
        _write_idx(tmp_path / f"{prefix}-images-idx3-ubyte", 0x803,
                   rng.integers(0, 256, (n, 28, 28)))
        _write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte", 0x801, np.arange(n) % 10)
    return tmp_path


def test_mnist_reads_images_and_labels(mnist_dir):
    train = ds.MnistDataset(str(mnist_dir), usage="train", shuffle=False)
    rows = _rows(train)
    assert train.get_col_names() == ["image", "label"] and train.get_dataset_size() == 5
    assert rows[0][0].shape == (28, 28, 1) and rows[0][0].dtype == np.uint8
    assert [int(r[1]) for r in rows] == [0, 1, 2, 3, 4] and rows[0][1].dtype == np.uint32
    raw = np.fromfile(mnist_dir / "train-images-idx3-ubyte", np.uint8)[16:].reshape(5, 28, 28)
    np.testing.assert_array_equal(rows[3][0][..., 0], raw[3])
    every = ds.MnistDataset(str(mnist_dir), shuffle=False)  # usage all: both file pairs
    assert every.get_dataset_size() == 8
    assert [int(r[1]) for r in _rows(every)] == [0, 1, 2, 3, 4, 0, 1, 2]
    batched = _rows(ds.MnistDataset(str(mnist_dir), usage="train", shuffle=False).batch(2))
    np.testing.assert_array_equal(batched[1][0][..., 0], raw[2:4])  # batched by the source
    assert ds.MnistDataset(str(mnist_dir), usage="test", num_samples=2).get_dataset_size() == 2


def test_mnist_rejects_wrong_magic_and_sizes(mnist_dir):
    path = mnist_dir / "train-images-idx3-ubyte"
    data = bytearray(path.read_bytes())
    data[3] = 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match=r"train-images-idx3-ubyte: wrong magic number"):
        ds.MnistDataset(str(mnist_dir), usage="train")
    data[3] = 0x03
    data[4:8] = (10**9).to_bytes(4, "big")  # a header claiming a billion images
    path.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="the header says"):
        ds.MnistDataset(str(mnist_dir), usage="train")
    path.write_bytes(bytes(data[:10]))
    with pytest.raises(RuntimeError, match="shorter than its idx header"):
        ds.MnistDataset(str(mnist_dir), usage="train")
    with pytest.raises(ValueError, match="does not exist"):
        ds.MnistDataset(str(mnist_dir / "nowhere"))
    with pytest.raises(ValueError, match="usage"):
        ds.MnistDataset(str(mnist_dir), usage="valid")


def test_mnist_label_count_must_match(mnist_dir):
    _write_idx(mnist_dir / "t10k-labels-idx1-ubyte", 0x801, np.arange(2))
    with pytest.raises(RuntimeError, match="3 images but .* 2 labels"):
        ds.MnistDataset(str(mnist_dir), usage="test")


def _cifar_records(n, labels, seed):
    rng = np.random.default_rng(seed)
    heads = rng.integers(0, 10, (n, labels)).astype(np.uint8)
    images = rng.integers(0, 256, (n, 3, 32, 32)).astype(np.uint8)
    return heads, images, np.concatenate([heads, images.reshape(n, -1)], axis=1)


def test_cifar10(tmp_path):
    expected = []
    for i in range(1, 6):
        heads, images, records = _cifar_records(2, 1, i)
        (tmp_path / f"data_batch_{i}.bin").write_bytes(records.tobytes())
        expected += list(zip(heads[:, 0], images))
    (tmp_path / "test_batch.bin").write_bytes(_cifar_records(3, 1, 9)[2].tobytes())
    train = ds.Cifar10Dataset(str(tmp_path), usage="train", shuffle=False)
    rows = _rows(train)
    assert len(rows) == 10 and train.get_col_names() == ["image", "label"]
    for (image, label), (want_label, want_image) in zip(rows, expected):
        assert image.shape == (32, 32, 3) and int(label) == want_label
        np.testing.assert_array_equal(image, want_image.transpose(1, 2, 0))
    assert ds.Cifar10Dataset(str(tmp_path)).get_dataset_size() == 13
    (tmp_path / "test_batch.bin").write_bytes(b"\x00" * 3000)
    with pytest.raises(RuntimeError, match=r"test_batch.bin: 3000 bytes is not a whole number"):
        ds.Cifar10Dataset(str(tmp_path), usage="test")


def test_cifar100(tmp_path):
    heads, images, records = _cifar_records(4, 2, 1)
    (tmp_path / "train.bin").write_bytes(records.tobytes())
    data = ds.Cifar100Dataset(str(tmp_path), usage="train", shuffle=False)
    assert data.get_col_names() == ["image", "coarse_label", "fine_label"]
    rows = _rows(data)
    assert [(int(r[1]), int(r[2])) for r in rows] == [tuple(h) for h in heads.tolist()]
    with pytest.raises(RuntimeError, match="test.bin is missing"):
        ds.Cifar100Dataset(str(tmp_path), usage="test")


@pytest.fixture
def image_dir(tmp_path):
    rng = np.random.default_rng(0)
    for cls in ["cat", "dog"]:
        os.makedirs(tmp_path / cls)
        for i in range(3):
            img = rng.integers(0, 256, (10 + i, 12, 3)).astype(np.uint8)
            cv2.imwrite(str(tmp_path / cls / f"{i}.png"), img)
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    return tmp_path


def test_image_folder(image_dir):
    data = ds.ImageFolderDataset(str(image_dir), extensions=[".png"], shuffle=False)
    assert data.get_dataset_size() == 6 and data.get_class_indexing() == {"cat": 0, "dog": 1}
    rows = _rows(data)
    assert [int(r[1]) for r in rows] == [0, 0, 0, 1, 1, 1]
    assert rows[0][0].ndim == 1 and rows[1][1].dtype == np.int32  # raw bytes until decoded
    decoded = _rows(data.map(ds.vision.Decode(), input_columns="image"))
    bgr = cv2.imread(str(image_dir / "cat" / "1.png"))
    np.testing.assert_array_equal(decoded[1][0], bgr[..., ::-1])
    direct = _rows(ds.ImageFolderDataset(str(image_dir), extensions=[".png"], decode=True,
                                         shuffle=False))
    assert direct[4][0].shape == (11, 12, 3)
    custom = ds.ImageFolderDataset(str(image_dir), extensions=[".png"],
                                   class_indexing={"dog": 5})
    assert {int(r[1]) for r in _rows(custom)} == {5}


def test_a_corrupt_image_names_its_file(image_dir):
    (image_dir / "cat" / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    data = ds.ImageFolderDataset(str(image_dir), extensions=[".png"], decode=True,
                                 shuffle=False, num_parallel_workers=2)
    with pytest.raises(RuntimeError, match=r"reading index 1: .*cat/1.png: the data is not an "
                                           r"image"):
        _rows(data)
    undecoded = ds.ImageFolderDataset(str(image_dir), extensions=[".png"], shuffle=False)
    with pytest.raises(RuntimeError, match=r"map\(Decode\) row 1 of epoch 0, in Decode"):
        _rows(undecoded.map(ds.vision.Decode(), input_columns="image"))


def test_mindspore_quick_start_pipeline_runs_unchanged(tmp_path):
    """The data part of MindSpore's quick start, with only the import line changed."""
    import kiln as mindspore  # noqa: PLC0415 - the one changed line
    from kiln.dataset import MnistDataset, transforms, vision  # noqa: PLC0415

    rng = np.random.default_rng(1)
    train_dir = tmp_path / "MNIST_Data" / "train"
    os.makedirs(train_dir)
    _write_idx(train_dir / "train-images-idx3-ubyte", 0x803, rng.integers(0, 256, (10, 28, 28)))
    _write_idx(train_dir / "train-labels-idx1-ubyte", 0x801, np.arange(10) % 10)
    train_dataset = MnistDataset(str(train_dir))

    def datapipe(dataset, batch_size):
        image_transforms = [
            vision.Rescale(1.0 / 255.0, 0),
            vision.Normalize(mean=(0.1307,), std=(0.3081,)),
            vision.HWC2CHW(),
        ]
        label_transform = transforms.TypeCast(mindspore.int32)
        dataset = dataset.map(image_transforms, "image")
        dataset = dataset.map(label_transform, "label")
        dataset = dataset.batch(batch_size)
        return dataset

    train_dataset = datapipe(train_dataset, 4)
    shapes = []
    for image, label in train_dataset.create_tuple_iterator():
        shapes.append((image.shape, image.dtype, label.shape, label.dtype))
    assert shapes[0] == ((4, 1, 28, 28), mindspore.float32, (4,), mindspore.int32)
    assert [s[0][0] for s in shapes] == [4, 4, 2]
    for data in train_dataset.create_dict_iterator():
        assert set(data) == {"image", "label"}
    assert train_dataset.get_dataset_size() == 3


def test_damaged_files_raise_python_errors_only(tmp_path):
    """Random damage to idx, CIFAR and image files: a Python exception or rows, never a
    crash or a hang (a small in-test fuzz of the readers)."""
    rng = np.random.default_rng(5)
    _write_idx(tmp_path / "train-images-idx3-ubyte", 0x803, rng.integers(0, 256, (3, 28, 28)))
    _write_idx(tmp_path / "train-labels-idx1-ubyte", 0x801, np.arange(3))
    (tmp_path / "test.bin").write_bytes(_cifar_records(3, 2, 0)[2].tobytes())
    os.makedirs(tmp_path / "img" / "c")
    ok, png = cv2.imencode(".png", rng.integers(0, 256, (8, 8, 3)).astype(np.uint8))
    originals = {p: p.read_bytes() for p in (tmp_path / "train-images-idx3-ubyte",
                                               tmp_path / "train-labels-idx1-ubyte",
                                               tmp_path / "test.bin")}
    originals[tmp_path / "img" / "c" / "x.png"] = png.tobytes()
    readers = [lambda: ds.MnistDataset(str(tmp_path), usage="train"),
               lambda: ds.Cifar100Dataset(str(tmp_path), usage="test"),
               lambda: ds.ImageFolderDataset(str(tmp_path / "img"), decode=True)]
    outcomes = set()
    for _ in range(60):
        for path, data in originals.items():
            damaged = bytearray(data)
            for _ in range(int(rng.integers(1, 6))):
                damaged[int(rng.integers(0, len(damaged)))] = int(rng.integers(0, 256))
            if rng.random() < 0.3:
                damaged = damaged[:int(rng.integers(0, len(damaged)))]
            path.write_bytes(bytes(damaged))
        for make in readers:
            try:
                _rows(make())
                outcomes.add("rows")
            except (RuntimeError, ValueError) as exc:
                outcomes.add(type(exc).__name__)
    assert "RuntimeError" in outcomes
