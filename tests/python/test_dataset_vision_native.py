"""The engine's native vision ops (a map whose ops from Decode on are kiln's vision ops): the same
results as the Python transforms and NumPy, seeds, fallbacks, bad files and shutdown."""
import gc
import os

import cv2
import numpy as np
import pytest

import kiln.dataset as ds
from kiln.dataset import vision

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def _smooth(rng, h, w):
    """A smooth colour field (JPEG keeps it close to what was written)."""
    small = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


def _write(folder, images, ext=".jpg", params=(cv2.IMWRITE_JPEG_QUALITY, 90)):
    os.makedirs(folder / "a", exist_ok=True)
    for i, img in enumerate(images):
        cv2.imwrite(str(folder / "a" / f"{i:03d}{ext}"), img[..., ::-1], list(params))
    return str(folder)


@pytest.fixture
def jpegs(tmp_path):
    rng = np.random.default_rng(0)
    sizes = [(48, 64), (64, 48), (40, 40), (33, 71), (64, 64), (57, 30)]
    return _write(tmp_path, [_smooth(rng, h, w) for h, w in sizes])


def _column(folder, ops, workers=2, shuffle=False, **kw):
    data = ds.ImageFolderDataset(folder, shuffle=shuffle, num_parallel_workers=workers, **kw)
    data = data.map(ops, input_columns="image", num_parallel_workers=workers)
    return [r[0] for r in data.create_tuple_iterator(output_numpy=True, num_epochs=1)]


def _files(folder):
    return [os.path.join(folder, "a", f) for f in sorted(os.listdir(os.path.join(folder, "a")))]


def _python_decode(path):
    return vision.Decode()(np.fromfile(path, dtype=np.uint8))


def test_decode_matches_the_python_decoder(jpegs):
    native = _column(jpegs, [vision.Decode()])
    for image, path in zip(native, _files(jpegs)):
        reference = _python_decode(path)
        assert image.dtype == np.uint8 and image.shape == reference.shape
        assert np.abs(image.astype(int) - reference).max() <= 2


def test_flip_normalize_hwc2chw_match_numpy(jpegs):
    decoded = _column(jpegs, [vision.Decode()])
    ops = [vision.Decode(), vision.RandomHorizontalFlip(1.0), vision.RandomVerticalFlip(1.0),
           vision.Normalize(MEAN, STD), vision.HWC2CHW()]
    for image, out in zip(decoded, _column(jpegs, ops)):
        want = ((image[::-1, ::-1].astype(np.float32) - np.float32(MEAN)) / np.float32(STD))
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, want.transpose(2, 0, 1), rtol=1e-6, atol=1e-6)
    hwc = _column(jpegs, ops[:-1])  # Normalize last: HWC float32
    np.testing.assert_allclose(hwc[0], ((decoded[0][::-1, ::-1] - np.float32(MEAN))
                                        / np.float32(STD)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", [
    vision.Resize((20, 30)), vision.Resize(24), vision.Resize(24, vision.Inter.NEAREST),
    vision.CenterCrop(32), vision.CenterCrop((50, 80)), vision.Rescale(1 / 255, -0.5),
    vision.HWC2CHW(), vision.RandomResizedCrop(40, scale=(1, 1), ratio=(1, 1)),
])
def test_each_op_matches_the_python_transform(jpegs, op):
    decoded = _column(jpegs, [vision.Decode()])
    for image, out in zip(decoded, _column(jpegs, [vision.Decode(), op])):
        want = op(image)
        assert out.shape == want.shape and out.dtype == want.dtype, type(op).__name__
        tol = 1e-5 if out.dtype == np.float32 else 1
        np.testing.assert_allclose(out.astype(np.float64), want, atol=tol)


def test_fused_crops_take_a_window_of_the_whole_image(jpegs):
    """Decode + RandomCrop decodes only the window: it is a window of the full decode."""
    decoded = _column(jpegs, [vision.Decode()])
    crops = _column(jpegs, [vision.Decode(), vision.RandomCrop((24, 20))])
    for image, crop in zip(decoded, crops):
        h, w = image.shape[:2]
        best = min(np.abs(image[t:t + 24, s:s + 20].astype(int) - crop).max()
                   for t in range(h - 23) for s in range(w - 19))
        assert best <= 2
    centre = _column(jpegs, [vision.Decode(), vision.CenterCrop(16)])
    for image, crop in zip(decoded, centre):
        t, s = (image.shape[0] - 16) // 2, (image.shape[1] - 16) // 2
        assert np.abs(image[t:t + 16, s:s + 16].astype(int) - crop).max() <= 2


def test_random_resized_crop_whole_image_equals_a_resize(jpegs):
    """scale (1, 1) and the image's own ratio: the window is the whole image."""
    decoded = _column(jpegs, [vision.Decode()])
    square = [i for i, image in enumerate(decoded) if image.shape[0] == image.shape[1]]
    op = vision.RandomResizedCrop((40, 40), scale=(1, 1), ratio=(1, 1))  # no DCT scaling
    out = _column(jpegs, [vision.Decode(), op])
    for i in square:
        want = cv2.resize(decoded[i], (40, 40), interpolation=cv2.INTER_LINEAR)
        assert np.abs(out[i].astype(int) - want).max() <= 1


def test_dct_scaling_of_a_large_window_stays_close(tmp_path):
    rng = np.random.default_rng(1)
    folder = _write(tmp_path, [_smooth(rng, 512, 512)])
    op = vision.RandomResizedCrop(64, scale=(1, 1), ratio=(1, 1))  # 512 >= 8 x 64: 1/8 scale
    out = _column(folder, [vision.Decode(), op], workers=1)[0]
    full = _python_decode(_files(folder)[0])
    want = cv2.resize(full, (64, 64), interpolation=cv2.INTER_AREA)
    assert out.shape == (64, 64, 3)
    assert np.abs(out.astype(int) - want).mean() < 2.0


def _epoch(folder, seed, workers):
    ds.config.set_seed(seed)
    ops = [vision.Decode(), vision.RandomResizedCrop(24), vision.RandomHorizontalFlip(),
           vision.Normalize(MEAN, STD), vision.HWC2CHW()]
    data = ds.ImageFolderDataset(folder, shuffle=True, num_parallel_workers=workers)
    data = data.map(ops, input_columns="image", num_parallel_workers=workers).batch(4)
    return [(b[0].copy(), b[1].copy())
            for b in data.create_tuple_iterator(output_numpy=True, num_epochs=1)]


def test_same_seed_same_batches_for_any_worker_count(jpegs):
    one, two, again = _epoch(jpegs, 7, 1), _epoch(jpegs, 7, 2), _epoch(jpegs, 7, 2)
    assert len(one) == 2 and one[0][0].shape == (4, 3, 24, 24)
    for a, b, c in zip(one, two, again):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[0], c[0])
        np.testing.assert_array_equal(a[1], b[1])
    other = _epoch(jpegs, 8, 2)
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(one, other))


def test_random_flip_flips_about_half_the_rows(tmp_path):
    rng = np.random.default_rng(2)
    folder = _write(tmp_path, [_smooth(rng, 16, 16) for _ in range(200)])
    plain = _column(folder, [vision.Decode()])
    flipped = _column(folder, [vision.Decode(), vision.RandomHorizontalFlip(0.5)])
    count = sum(not np.array_equal(a, b) for a, b in zip(plain, flipped))
    assert all(np.array_equal(b, a) or np.array_equal(b, a[:, ::-1])
               for a, b in zip(plain, flipped))
    assert 70 <= count <= 130


def test_python_ops_in_the_chain_run_in_their_own_stage(jpegs):
    """A Python callable after the native ops (and before Normalize): mixed chains work."""
    ops = [vision.Decode(), vision.CenterCrop(20), lambda img: img[:, :, ::-1],
           vision.Normalize(MEAN, STD), vision.HWC2CHW()]
    decoded = _column(jpegs, [vision.Decode(), vision.CenterCrop(20)])
    for image, out in zip(decoded, _column(jpegs, ops)):
        want = (image[:, :, ::-1].astype(np.float32) - np.float32(MEAN)) / np.float32(STD)
        np.testing.assert_allclose(out, want.transpose(2, 0, 1), rtol=1e-6, atol=1e-6)


def test_png_rows_fall_back_to_the_python_decoder(tmp_path):
    rng = np.random.default_rng(3)
    images = [_smooth(rng, 20, 24) for _ in range(3)]
    folder = _write(tmp_path, images, ext=".png", params=())
    out = _column(folder, [vision.Decode(), vision.HWC2CHW()])
    for image, got in zip(images, out):
        np.testing.assert_array_equal(got, image.transpose(2, 0, 1))


def _corrupt(folder, name, data):
    with open(os.path.join(folder, "a", name), "wb") as f:
        f.write(data)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "header_only", "empty_scan"])
def test_a_damaged_jpeg_raises_naming_the_op_and_row(jpegs, damage):
    data = open(_files(jpegs)[2], "rb").read()
    bad = {"truncated": data[: len(data) * 2 // 3],
           "garbage": data[:200] + bytes(range(256)) * 4,
           "header_only": data[:20],
           "empty_scan": b"\xff\xd8\xff\xd9"}[damage]
    _corrupt(jpegs, "002.jpg", bad)
    ops = [vision.Decode(), vision.RandomResizedCrop(16), vision.HWC2CHW()]
    with pytest.raises(RuntimeError, match=r"map\(Decode, RandomResizedCrop, HWC2CHW\) row 2 "
                                           r"of epoch 0.*Decode: cannot decode the JPEG"):
        _column(jpegs, ops)


def test_not_an_image_and_a_too_small_image_raise(jpegs):
    _corrupt(jpegs, "001.jpg", b"hello, not an image")
    with pytest.raises(RuntimeError, match=r"row 1 of epoch 0.*Decode: the data is not an image"):
        _column(jpegs, [vision.Decode(), vision.HWC2CHW()])
    os.remove(os.path.join(jpegs, "a", "001.jpg"))
    with pytest.raises(RuntimeError, match=r"RandomCrop: crop size \(60, 60\) is larger than "
                                           r"the image"):
        _column(jpegs, [vision.Decode(), vision.RandomCrop(60)])


def test_break_out_of_a_native_pipeline_stops_its_threads(jpegs):
    before = len(os.listdir("/proc/self/task"))
    data = ds.ImageFolderDataset(jpegs, shuffle=True, num_parallel_workers=2)
    data = data.map([vision.Decode(), vision.RandomResizedCrop(8), vision.HWC2CHW()],
                    input_columns="image", num_parallel_workers=2).repeat(1000).batch(2)
    for i, _ in enumerate(data.create_tuple_iterator(output_numpy=True)):
        if i == 3:
            break
    gc.collect()
    assert len(os.listdir("/proc/self/task")) == before


def test_grayscale_and_progressive_jpegs_decode_like_python(tmp_path):
    rng = np.random.default_rng(4)
    gray = _smooth(rng, 30, 41)[..., 0]
    os.makedirs(tmp_path / "a")
    cv2.imwrite(str(tmp_path / "a" / "0.jpg"), gray)
    cv2.imwrite(str(tmp_path / "a" / "1.jpg"), _smooth(rng, 50, 37),
                [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])
    ops = [vision.Decode(), vision.RandomCrop((20, 30))]
    for path, out in zip(_files(str(tmp_path)), _column(str(tmp_path), [vision.Decode()])):
        reference = _python_decode(path)
        assert out.shape == reference.shape and out.shape[2] == 3
        assert np.abs(out.astype(int) - reference).max() <= 2
    assert [c.shape for c in _column(str(tmp_path), ops)] == [(20, 30, 3)] * 2


def _batches(folder, ops, size, workers=2, epochs=1):
    ds.config.set_seed(11)
    data = ds.ImageFolderDataset(folder, shuffle=False, num_parallel_workers=workers)
    data = data.map(ops, input_columns="image", num_parallel_workers=workers).batch(size)
    it = data.create_tuple_iterator(output_numpy=True, num_epochs=epochs)
    return [[b[0].copy() for b in it] for _ in range(epochs)]


def test_a_batch_after_native_ops_holds_the_rows_the_map_made(tmp_path):
    """The map writes its rows straight into the batch's buffer: the batches are the rows the
    map alone yields, stacked, also for a shorter last batch and with a PNG row (written
    elsewhere) inside a batch, over several epochs."""
    rng = np.random.default_rng(5)
    images = [_smooth(rng, 40 + i, 50) for i in range(7)]
    folder = _write(tmp_path, images)
    cv2.imwrite(str(tmp_path / "a" / "003b.png"), images[3][..., ::-1])
    ops = [vision.Decode(), vision.CenterCrop(24), vision.RandomHorizontalFlip(1.0),
           vision.Normalize(MEAN, STD), vision.HWC2CHW()]
    ds.config.set_seed(11)
    rows = _column(folder, ops)
    assert len(rows) == 8
    for epoch in _batches(folder, ops, 3, epochs=3):
        assert [b.shape[0] for b in epoch] == [3, 3, 2]
        np.testing.assert_array_equal(np.concatenate(epoch), np.stack(rows))


def test_a_python_source_of_jpeg_bytes_runs_the_native_ops(jpegs):
    """A GeneratorDataset's NumPy uint8 arrays of file bytes are copied to a tensor and decoded
    natively: the results are the ImageFolderDataset's, and a damaged file gets the native
    decoder's message."""
    files = _files(jpegs)
    ops = [vision.Decode(), vision.CenterCrop(24), vision.RandomHorizontalFlip(1.0),
           vision.Normalize(MEAN, STD), vision.HWC2CHW()]
    want = _column(jpegs, ops)

    def rows():
        for path in files:
            yield (np.fromfile(path, dtype=np.uint8),)

    data = ds.GeneratorDataset(rows, ["image"], shuffle=False)
    data = data.map(ops, input_columns="image", num_parallel_workers=2)
    got = [r[0] for r in data.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    _corrupt(jpegs, "001.jpg", open(files[1], "rb").read()[:300])
    data = ds.GeneratorDataset(rows, ["image"], shuffle=False)
    data = data.map(ops, input_columns="image")
    with pytest.raises(RuntimeError, match=r"row 1 of epoch 0.*Decode: cannot decode the JPEG"):
        list(data.create_tuple_iterator(output_numpy=True, num_epochs=1))
