"""kiln.dataset.transforms and kiln.dataset.vision against NumPy and OpenCV references."""
import cv2
import numpy as np
import pytest

import kiln as ms
import kiln.dataset as ds
from kiln.dataset import transforms, vision


@pytest.fixture(autouse=True)
def _seeded():
    seed = ds.config._state["seed"]
    ds.config.set_seed(0)
    yield
    ds.config._state["seed"] = seed


def _image(h=6, w=8, c=3):
    return (np.arange(h * w * c) % 251).astype(np.uint8).reshape(h, w, c)


def test_compose_typecast_onehot_fill_concatenate():
    f = transforms.Compose([lambda x: x + 1, transforms.TypeCast(ms.float32)])
    out = f(np.array([1, 2], np.int32))
    assert out.dtype == np.float32 and out.tolist() == [2.0, 3.0]
    assert transforms.TypeCast(np.int8)(np.array([1.7])).dtype == np.int8
    np.testing.assert_array_equal(transforms.OneHot(4)(np.array(2)), [0, 0, 1, 0])
    np.testing.assert_array_equal(transforms.OneHot(3)(np.array([0, 2])), [[1, 0, 0], [0, 0, 1]])
    smooth = transforms.OneHot(4, smoothing_rate=0.2)(np.array(1))
    np.testing.assert_allclose(smooth, [0.05, 0.85, 0.05, 0.05], rtol=1e-6)
    with pytest.raises(RuntimeError, match=r"labels must be in \[0, 3\)"):
        transforms.OneHot(3)(np.array(3))
    filled = transforms.Fill(7)(np.zeros((2, 2), np.int16))
    assert filled.dtype == np.int16 and filled.tolist() == [[7, 7], [7, 7]]
    cat = transforms.Concatenate(0, prepend=np.array([0]), append=np.array([9]))
    assert cat(np.array([1, 2])).tolist() == [0, 1, 2, 9]
    with pytest.raises(RuntimeError, match="1-D"):
        cat(np.zeros((2, 2)))
    with pytest.raises(TypeError):
        transforms.TypeCast("not a type")


def test_random_apply_and_choice_are_seeded_per_row():
    data = ds.NumpySlicesDataset(np.zeros(200, np.int64), ["x"], shuffle=False)
    applied = data.map(transforms.RandomApply([lambda x: x + 1], prob=0.3))
    values = [int(r[0]) for r in applied.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    assert 30 < sum(values) < 90
    again = [int(r[0]) for r in applied.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    assert values == again
    chosen = data.map(transforms.RandomChoice([lambda x: x + 1, lambda x: x + 2]))
    got = {int(r[0]) for r in chosen.create_tuple_iterator(output_numpy=True, num_epochs=1)}
    assert got == {1, 2}


def test_decode_and_its_errors():
    img = _image(16, 16)
    ok, png = cv2.imencode(".png", cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    np.testing.assert_array_equal(vision.Decode()(png.reshape(-1)), img)  # lossless, RGB order
    with pytest.raises(RuntimeError, match="not an image"):
        vision.Decode()(np.frombuffer(b"\xff\xd8\xff garbage", np.uint8))
    with pytest.raises(TypeError, match="1-D uint8"):
        vision.Decode()(np.zeros((2, 2), np.uint8))


def test_resize_rescale_normalize_hwc2chw_totensor():
    img = _image(6, 8)
    out = vision.Resize((3, 4))(img)
    np.testing.assert_array_equal(out, cv2.resize(img, (4, 3), interpolation=cv2.INTER_LINEAR))
    assert vision.Resize(3)(img).shape == (3, 4, 3)  # the shorter side to 3
    assert vision.Resize(4)(img[..., :1]).shape == (4, 5, 1)
    np.testing.assert_allclose(vision.Rescale(1 / 255, -0.5)(img),
                               img / 255.0 - 0.5, rtol=1e-5, atol=1e-6)
    mean, std = [10.0, 20.0, 30.0], [2.0, 4.0, 5.0]
    np.testing.assert_allclose(vision.Normalize(mean, std)(img), (img - np.array(mean)) /
                               np.array(std), rtol=1e-5)
    chw = vision.HWC2CHW()(img)
    assert chw.shape == (3, 6, 8) and np.array_equal(chw[1], img[..., 1])
    t = vision.ToTensor()(img)
    assert t.dtype == np.float32 and t.shape == (3, 6, 8)
    np.testing.assert_allclose(t, img.transpose(2, 0, 1) / 255.0, rtol=1e-6)
    with pytest.raises(RuntimeError, match=r"Normalize: 3 means for an image of 1 channels"):
        vision.Normalize(mean, std)(img[..., :1])
    with pytest.raises(RuntimeError, match=r"Resize: expected an image.*got shape \(5,\)"):
        vision.Resize(3)(np.zeros(5, np.uint8))


def test_crops_pads_and_flips():
    img = _image(6, 8)
    np.testing.assert_array_equal(vision.CenterCrop((2, 4))(img), img[2:4, 2:6])
    assert vision.CenterCrop(10)(img).shape == (10, 10, 3)
    padded = vision.Pad((1, 2), fill_value=9)(img)
    assert padded.shape == (10, 10, 3) and padded[0, 0, 0] == 9
    np.testing.assert_array_equal(vision.Pad(1, padding_mode=vision.Border.EDGE)(img),
                                  np.pad(img, [(1, 1), (1, 1), (0, 0)], mode="edge"))
    crop = vision.RandomCrop(4)(img)
    windows = [img[i:i + 4, j:j + 4] for i in range(3) for j in range(5)]
    assert any(np.array_equal(crop, w) for w in windows)
    with pytest.raises(RuntimeError, match="larger than the image"):
        vision.RandomCrop(10)(img)
    assert vision.RandomCrop(10, pad_if_needed=True)(img).shape == (10, 10, 3)
    np.testing.assert_array_equal(vision.RandomHorizontalFlip(1.0)(img), img[:, ::-1])
    np.testing.assert_array_equal(vision.RandomVerticalFlip(1.0)(img), img[::-1])
    np.testing.assert_array_equal(vision.RandomVerticalFlip(0.0)(img), img)
    rrc = vision.RandomResizedCrop(5)(_image(40, 30))
    assert rrc.shape == (5, 5, 3) and rrc.dtype == np.uint8


def test_rotation_and_grayscale():
    img = np.zeros((5, 5), np.uint8)
    img[0, 2] = 255  # a dot above the centre
    quarter = vision.RandomRotation((90, 90))(img)
    assert quarter[2, 0] == 255  # counter-clockwise: the top goes left
    assert vision.RandomRotation((90, 90), expand=True)(_image(4, 6)).shape == (6, 4, 3)
    rgb = _image(4, 4)
    gray = vision.Grayscale()(rgb)
    expect = np.round(rgb @ np.array([0.299, 0.587, 0.114]))
    assert gray.shape == (4, 4) and np.abs(gray.astype(int) - expect).max() <= 1
    assert vision.Grayscale(3)(rgb).shape == (4, 4, 3)
    with pytest.raises(RuntimeError, match="RGB image"):
        vision.Grayscale()(rgb[..., :1])


def test_vision_in_a_pipeline_reproducible_for_any_worker_count():
    images = np.stack([_image(12, 12) + i for i in range(12)])

    def run(workers):
        ds.config.set_seed(99)
        data = ds.NumpySlicesDataset(images, ["image"], shuffle=False)
        data = data.map([vision.RandomResizedCrop(8), vision.RandomHorizontalFlip(),
                         vision.Normalize([0.0] * 3, [255.0] * 3), vision.HWC2CHW()],
                        num_parallel_workers=workers)
        return [r[0] for r in data.batch(4).create_tuple_iterator(output_numpy=True,
                                                                  num_epochs=1)]

    one, three = run(1), run(3)
    assert [b.shape for b in one] == [(4, 3, 8, 8)] * 3
    for a, b in zip(one, three):
        np.testing.assert_array_equal(a, b)


def test_a_transform_given_the_wrong_shape_names_op_and_row():
    data = ds.NumpySlicesDataset(np.zeros((4, 3), np.uint8), ["image"], shuffle=False)
    with pytest.raises(RuntimeError, match=r"map\(HWC2CHW\) row 0 of epoch 0, in HWC2CHW"):
        list(data.map(vision.HWC2CHW()).create_tuple_iterator(num_epochs=1))


def test_random_color_adjust_and_posterize():
    img = (np.arange(8 * 8 * 3) * 5 % 256).astype(np.uint8).reshape(8, 8, 3)
    assert np.array_equal(vision.RandomColorAdjust()(img), img)  # factors of 1, no hue shift
    dark = vision.RandomColorAdjust(brightness=(0.5, 0.5))(img)
    np.testing.assert_allclose(dark, img * 0.5, atol=1)
    gray = vision.RandomColorAdjust(saturation=(0.0, 0.0))(img)
    assert np.abs(gray.astype(int) - gray[..., :1]).max() <= 1  # channels equal
    flat = vision.RandomColorAdjust(contrast=(0.0, 0.0))(img)
    assert flat.max() - flat.min() <= 1
    shifted = vision.RandomColorAdjust(hue=(0.5, 0.5))(img)
    assert shifted.shape == img.shape and not np.array_equal(shifted, img)
    with pytest.raises(ValueError):
        vision.RandomColorAdjust(hue=0.7)
    np.testing.assert_array_equal(vision.RandomPosterize(2)(img), img & 0xC0)
    with pytest.raises(RuntimeError, match="uint8"):
        vision.RandomPosterize(2)(img.astype(np.float32))


def test_weighted_random_sampler():
    weights = [0.8, 0.5, 0, 0, 0, 0, 0, 0, 0, 0]
    data = ds.NumpySlicesDataset(np.arange(10), ["x"],
                                 sampler=ds.WeightedRandomSampler(weights, num_samples=60))
    got = [int(r[0]) for r in data.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    assert len(got) == 60 and set(got) == {0, 1} and got.count(0) > got.count(1)
    assert data.get_dataset_size() == 60
    with pytest.raises(ValueError):
        ds.WeightedRandomSampler([0, 0])


def test_random_solarize():
    img = np.arange(256, dtype=np.uint8).reshape(16, 16, 1)
    np.testing.assert_array_equal(vision.RandomSolarize((0, 0))(img),
                                  np.where(img == 0, 255, img))
    out = vision.RandomSolarize((100, 200))(img)
    changed = out != img
    assert changed.any() and img[changed].min() >= 100 and img[changed].max() <= 200
    np.testing.assert_array_equal(out[changed], 255 - img[changed])
    with pytest.raises(ValueError):
        vision.RandomSolarize((10, 300))


def test_invert_equalize_autocontrast():
    img = (np.arange(8 * 8 * 3) * 3 % 200 + 20).astype(np.uint8).reshape(8, 8, 3)
    np.testing.assert_array_equal(vision.Invert()(img), 255 - img)
    eq = vision.Equalize()(img)
    for c in range(3):
        np.testing.assert_array_equal(eq[..., c], cv2.equalizeHist(np.ascontiguousarray(
            img[..., c])))
    stretched = vision.AutoContrast()(img)
    for c in range(3):
        lo, hi = int(img[..., c].min()), int(img[..., c].max())
        want = np.clip((img[..., c].astype(float) - lo) * 255.0 / (hi - lo), 0, 255)
        np.testing.assert_array_equal(stretched[..., c], want.astype(np.uint8))
    flat = np.full((4, 4, 3), 7, np.uint8)
    np.testing.assert_array_equal(vision.AutoContrast()(flat), flat)
    with pytest.raises(RuntimeError, match="uint8"):
        vision.Invert()(img.astype(np.float32))


def test_random_color_sharpness_affine_and_subpolicy():
    img = (np.arange(10 * 12 * 3) * 7 % 256).astype(np.uint8).reshape(10, 12, 3)
    np.testing.assert_array_equal(vision.RandomColor((1, 1))(img), img)
    gray = vision.RandomColor((0, 0))(img)
    assert np.abs(gray.astype(int) - gray[..., :1]).max() == 0
    np.testing.assert_array_equal(vision.RandomSharpness((1, 1))(img), img)
    blurred = vision.RandomSharpness((0, 0))(img)
    np.testing.assert_array_equal(blurred[0], img[0])  # borders kept
    assert not np.array_equal(blurred, img)
    np.testing.assert_array_equal(vision.RandomAffine(0)(img), img)  # the identity
    shifted = vision.RandomAffine(0, translate=(0.25, 0.25))(img)  # 3 pixels right
    np.testing.assert_array_equal(shifted[:, 3:], img[:, :-3])
    assert (shifted[:, :3] == 0).all()
    dot = np.zeros((5, 5), np.uint8)
    dot[0, 2] = 255
    assert vision.RandomAffine((90, 90))(dot)[2, 0] == 255  # counter-clockwise
    assert vision.RandomAffine(0, shear=(20, 20))(img).shape == img.shape
    policy = vision.RandomSelectSubpolicy([[(vision.Invert(), 1.0)],
                                           [(vision.RandomVerticalFlip(1.0), 1.0)]])
    outs = {policy(img).tobytes() for _ in range(20)}
    assert outs == {(255 - img).tobytes(), img[::-1].tobytes()}
    with pytest.raises(ValueError):
        vision.RandomSelectSubpolicy([[(vision.Invert(), 1.5)]])


def test_center_crop_offsets_and_padding_as_mindspore():
    """Offsets round down; padding puts the odd pixel on the top and left (MindSpore 2.10)."""
    img = np.arange(37 * 53, dtype=np.float32).reshape(37, 53, 1)
    out = vision.CenterCrop((18, 20))(img)
    assert out[0, 0, 0] == 9 * 53 + 16
    small = np.ones((37, 53, 3), np.uint8)
    big = vision.CenterCrop(60)(small)
    assert big.shape == (60, 60, 3)
    rows, cols = np.nonzero(big[..., 0])
    assert (rows.min(), cols.min()) == (12, 4)  # 23 rows of padding: 12 above, 11 below
