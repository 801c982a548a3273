"""Padding, interpolation, 1-D/adaptive pooling, pixel shuffle, unfold, dropout2d, GroupNorm
and InstanceNorm vs NumPy references: values, gradients by finite differences, both modes."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes
from helpers import assert_close

import kiln as ms
from kiln import nn, ops

RNG = np.random.default_rng(11)


def rand(*shape):
    return RNG.standard_normal(shape)


def in_graph_mode(layer, *args):
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        return layer(*args)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


# ---- pad ----

@pytest.mark.parametrize("mode,np_mode", [("constant", "constant"), ("reflect", "reflect"),
                                          ("replicate", "edge"), ("circular", "wrap")])
def test_pad_modes_match_numpy(mode, np_mode):
    x = rand(2, 3, 4, 5)
    got = ops.pad(ms.Tensor(x), (2, 1, 0, 3), mode)
    ref = np.pad(x, ((0, 0), (0, 0), (0, 3), (2, 1)), mode=np_mode)
    assert_close(got, ref, ms.float64)
    check_grad(lambda t: ops.pad(t, (2, 1, 1, 0), mode), rand(1, 2, 3, 4))


def test_pad_value_negative_crop_and_errors():
    x = rand(3, 4)
    assert_close(ops.pad(ms.Tensor(x), (1, 1), value=2.5),
                 np.pad(x, ((0, 0), (1, 1)), constant_values=2.5), ms.float64)
    assert_close(ops.pad(ms.Tensor(x), (-1, 2, 1, -2)),
                 np.pad(x[:-2, 1:], ((1, 0), (0, 2))), ms.float64)
    with pytest.raises(ValueError, match="pad: padding must hold an even number"):
        ops.pad(ms.Tensor(x), (1, 2, 3))
    with pytest.raises(ValueError, match="pad: reflect padding"):
        ops.pad(ms.Tensor(x), (4, 0), "reflect")
    with pytest.raises(ValueError, match="pad: mode"):
        ops.pad(ms.Tensor(x), (1, 1), "mirror")


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_pad_layers(mode):
    x = rand(2, 3, 4, 5).astype(np.float32)
    run = (lambda layer, t: layer(t)) if mode == "pynative" else in_graph_mode
    cases = [
        (nn.ZeroPad2d((1, 2, 3, 0)), np.pad(x, ((0, 0), (0, 0), (3, 0), (1, 2)))),
        (nn.ZeroPad2d(1), np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))),
        (nn.ConstantPad1d((2, 0), 0.5), np.pad(x, ((0, 0),) * 3 + ((2, 0),),
                                               constant_values=0.5)),
        (nn.ReflectionPad2d((1, 1, 2, 2)), np.pad(x, ((0, 0), (0, 0), (2, 2), (1, 1)),
                                                  "reflect")),
        (nn.ReplicationPad1d(2), np.pad(x, ((0, 0),) * 3 + ((2, 2),), "edge")),
        (nn.Pad(((0, 0), (1, 0), (2, 1), (0, 3)), "SYMMETRIC"),
         np.pad(x, ((0, 0), (1, 0), (2, 1), (0, 3)), "symmetric")),
        (nn.Pad(((0, 0), (0, 0), (1, 1), (2, 2)), "REFLECT"),
         np.pad(x, ((0, 0), (0, 0), (1, 1), (2, 2)), "reflect")),
        (nn.Pad(((1, 1), (0, 0), (0, 0), (0, 0))), np.pad(x, ((1, 1), (0, 0), (0, 0), (0, 0)))),
    ]
    for layer, ref in cases:
        assert_close(run(layer, ms.Tensor(x)), ref, ms.float32)
    with pytest.raises(ValueError, match="Pad: paddings has 2 pairs"):
        nn.Pad(((1, 1), (1, 1)))(ms.Tensor(x))
    with pytest.raises(ValueError, match="Pad: mode"):
        nn.Pad(((1, 1),), "EDGE")


# ---- interpolate / Upsample ----

def np_linear_axis(x, axis, out, align_corners, scale=None):
    n = x.shape[axis]
    dst = np.arange(out, dtype=np.float64)
    if align_corners:
        src = dst * ((n - 1) / (out - 1)) if out > 1 else dst * 0
    else:
        s = n / out if scale is None else 1 / scale
        src = np.maximum((dst + 0.5) * s - 0.5, 0)
    lo = np.minimum(np.floor(src).astype(int), n - 1)
    hi = np.minimum(lo + 1, n - 1)
    lam = (src - lo).reshape([-1 if a == axis else 1 for a in range(x.ndim)])
    return np.take(x, lo, axis) * (1 - lam) + np.take(x, hi, axis) * lam


@pytest.mark.parametrize("align_corners", [False, True])
def test_bilinear_matches_the_reference_rule(align_corners):
    x = rand(2, 3, 4, 5)
    got = ops.interpolate(ms.Tensor(x), size=(7, 3), mode="bilinear",
                          align_corners=align_corners)
    ref = np_linear_axis(np_linear_axis(x, 2, 7, align_corners), 3, 3, align_corners)
    assert_close(got, ref, ms.float64)
    check_grad(lambda t: ops.interpolate(t, size=(5, 2), mode="bilinear",
                                         align_corners=align_corners), rand(1, 1, 3, 4))


LERP_DTYPES = [(ms.float16, np.float16, 2e-3), (ms.bfloat16, np.float32, 2e-2),
               (ms.float32, np.float32, 1e-6), (ms.float64, np.float64, 1e-12)]


@pytest.mark.parametrize("dtype,np_dtype,tol", LERP_DTYPES, ids=str)
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_lerp_gather_matches_numpy(axis, dtype, np_dtype, tol):
    # The linear modes' step along one axis, as one op: repeated and equal positions included.
    x = rand(4, 5, 6)
    n = x.shape[axis]
    lo = np.array([0, 1, n - 1, 2, 2])
    hi = np.minimum(lo + 1, n - 1)
    w = np.array([0.0, 0.25, 0.5, 1.0, 0.75])
    from kiln.ops._core import call
    got = call("lerp_gather", (ms.Tensor(x.astype(np_dtype), dtype), ms.Tensor(lo),
                               ms.Tensor(hi), ms.Tensor(w, dtype)), (axis,))
    shape = [1] * 3
    shape[axis] = -1
    xq = x.astype(np_dtype).astype(np.float64)
    want = np.take(xq, lo, axis) + (np.take(xq, hi, axis) - np.take(xq, lo, axis)) * \
        w.reshape(shape)
    assert got.dtype == dtype
    np.testing.assert_allclose(got.asnumpy().astype(np.float64), want, rtol=tol, atol=tol)


def test_lerp_gather_gradient_and_errors():
    from kiln.ops._core import call
    lo, hi = ms.Tensor(np.array([0, 0, 2, 1])), ms.Tensor(np.array([1, 0, 2, 2]))
    w = ms.Tensor(np.array([0.3, 0.5, 0.9, 0.1]))
    for axis in (0, 1, 2):
        x = rand(3, 3, 3)
        check_grad(lambda t, a=axis: call("lerp_gather", (t, lo, hi, w), (a,)), x)
    bad = ms.Tensor(np.array([0, 3, 1, 1]))
    with pytest.raises(IndexError, match=r"lerp_gather: hi\[1\] = 3 is out of range \[0, 3\)"):
        call("lerp_gather", (ms.Tensor(rand(3, 3)), lo, bad, w), (0,))
    with pytest.raises(ValueError, match="lerp_gather: lo, hi and weight must be 1-D"):
        call("lerp_gather", (ms.Tensor(rand(3, 3)), lo, hi, ms.Tensor(np.ones(3))), (0,))


@pytest.mark.parametrize("mode,shape,size", [("linear", (2, 3, 9), (4,)),
                                             ("bilinear", (2, 3, 9, 8), (4, 13)),
                                             ("trilinear", (1, 2, 5, 4, 3), (3, 7, 2))])
def test_linear_modes_in_both_modes(mode, shape, size):
    def fn(t):
        return ops.interpolate(t, size=size, mode=mode, align_corners=False) * 2

    def loss(t):
        y = fn(t)
        return ops.sum(y * y)

    x = ms.Tensor(rand(*shape).astype(np.float32))
    assert_same_in_both_modes(fn, x)
    assert_same_in_both_modes(ms.grad(loss), x)


def test_nearest_linear_and_area():
    x = rand(2, 3, 6)
    near = ops.interpolate(ms.Tensor(x), scale_factor=1.5, mode="nearest")
    assert_close(near, x[..., np.floor(np.arange(9) / 1.5).astype(int)], ms.float64)
    lin = ops.interpolate(ms.Tensor(x), size=4, mode="linear")
    assert_close(lin, np_linear_axis(x, 2, 4, False), ms.float64)
    area = ops.interpolate(ms.Tensor(x), size=3, mode="area")
    assert_close(area, x.reshape(2, 3, 3, 2).mean(-1), ms.float64)
    with pytest.raises(ValueError, match="interpolate: exactly one of size and scale_factor"):
        ops.interpolate(ms.Tensor(x), size=3, scale_factor=2.0)
    with pytest.raises(ValueError, match="interpolate: mode 'bilinear' needs a 4-D"):
        ops.interpolate(ms.Tensor(x), size=3, mode="bilinear")


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_upsample_layer(mode):
    x = rand(1, 2, 3, 4).astype(np.float32)
    layer = nn.Upsample(scale_factor=2.0, mode="nearest")
    got = layer(ms.Tensor(x)) if mode == "pynative" else in_graph_mode(layer, ms.Tensor(x))
    assert_close(got, x.repeat(2, axis=2).repeat(2, axis=3), ms.float32)
    layer = nn.Upsample(size=(5, 5), mode="bilinear", align_corners=True)
    got = layer(ms.Tensor(x)) if mode == "pynative" else in_graph_mode(layer, ms.Tensor(x))
    ref = np_linear_axis(np_linear_axis(x.astype(np.float64), 2, 5, True), 3, 5, True)
    assert_close(got, ref, ms.float32, rtol=1e-5, atol=1e-6)


# ---- pooling ----

def np_adaptive_avg(x, out, axis):
    n = x.shape[axis]
    parts = [np.take(x, range(i * n // out, -(-(i + 1) * n // out)), axis).mean(axis,
                                                                                keepdims=True)
             for i in range(out)]
    return np.concatenate(parts, axis)


def test_adaptive_avg_pools_for_any_size():
    x = rand(2, 3, 7, 5)
    assert_close(ops.adaptive_avg_pool2d(ms.Tensor(x), (3, 4)),
                 np_adaptive_avg(np_adaptive_avg(x, 3, 2), 4, 3), ms.float64)
    assert_close(ops.adaptive_avg_pool2d(ms.Tensor(x), (None, 2)),
                 np_adaptive_avg(x, 2, 3), ms.float64)
    y = rand(2, 3, 7)
    assert_close(ops.adaptive_avg_pool1d(ms.Tensor(y), 3), np_adaptive_avg(y, 3, 2), ms.float64)
    check_grad(lambda t: ops.adaptive_avg_pool2d(t, (2, 3)), rand(1, 2, 5, 4))


def test_adaptive_max_pool2d():
    x = rand(2, 3, 7, 5)
    h = [(i * 7 // 3, -(-(i + 1) * 7 // 3)) for i in range(3)]
    w = [(j * 5 // 2, -(-(j + 1) * 5 // 2)) for j in range(2)]
    ref = np.stack([np.stack([x[..., a:b, c:d].max((-2, -1)) for c, d in w], -1)
                    for a, b in h], -2)
    assert_close(ops.adaptive_max_pool2d(ms.Tensor(x), (3, 2)), ref, ms.float64)
    check_grad(lambda t: ops.adaptive_max_pool2d(t, 2), rand(1, 1, 4, 5))
    assert_close(in_graph_mode(nn.AdaptiveMaxPool2d((3, 2)), ms.Tensor(x)), ref, ms.float64)
    y, idx = ops.adaptive_max_pool2d(ms.Tensor(x), (3, 2), True)
    assert idx.dtype == ms.int64 and idx.shape == (2, 3, 3, 2)
    picked = np.take_along_axis(x.reshape(2, 3, -1), idx.asnumpy().reshape(2, 3, -1), 2)
    np.testing.assert_array_equal(picked.reshape(y.shape), y.asnumpy())
    _, idx3 = nn.AdaptiveMaxPool2d((3, 2), True)(ms.Tensor(x[0]))
    np.testing.assert_array_equal(idx3.asnumpy(), idx.asnumpy()[0])


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_pool1d_layers(mode):
    x = rand(2, 3, 9).astype(np.float32)
    run = (lambda layer, t: layer(t)) if mode == "pynative" else in_graph_mode
    win = np.lib.stride_tricks.sliding_window_view(x, 3, axis=-1)[..., ::2, :]
    assert_close(run(nn.MaxPool1d(3, 2), ms.Tensor(x)), win.max(-1), ms.float32)
    assert_close(run(nn.AvgPool1d(3, 2), ms.Tensor(x)), win.mean(-1), ms.float32, rtol=1e-5)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(padded, 3, axis=-1)
    assert_close(run(nn.AvgPool1d(3, 1, pad_mode="pad", padding=1), ms.Tensor(x)),
                 win.mean(-1), ms.float32, rtol=1e-5)
    assert_close(run(nn.AdaptiveAvgPool1d(4), ms.Tensor(x)), np_adaptive_avg(x, 4, 2),
                 ms.float32, rtol=1e-5)
    assert_close(run(nn.AdaptiveAvgPool2d(2), ms.Tensor(x[None])),
                 np_adaptive_avg(np_adaptive_avg(x[None], 2, 2), 2, 3), ms.float32, rtol=1e-5)
    assert run(nn.MaxPool1d(2, 2), ms.Tensor(x[0])).shape == (3, 4)


def test_max_pool1d_indices_and_avg_pool1d_function():
    x = rand(1, 2, 6)
    y, idx = nn.MaxPool1d(2, 2, return_indices=True)(ms.Tensor(x))
    np.testing.assert_array_equal(np.take_along_axis(x, idx.asnumpy(), -1), y.asnumpy())
    got = ops.avg_pool1d(ms.Tensor(x), 2, 2)
    assert_close(got, x.reshape(1, 2, 3, 2).mean(-1), ms.float64)
    check_grad(lambda t: ops.avg_pool1d(t, 3, 1), rand(1, 2, 5))


# ---- rearrangements ----

def test_pixel_shuffle_round_trip():
    x = rand(2, 8, 3, 4)
    y = ops.pixel_shuffle(ms.Tensor(x), 2)
    ref = x.reshape(2, 2, 2, 2, 3, 4).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 6, 8)
    assert_close(y, ref, ms.float64)
    assert_close(ops.pixel_unshuffle(y, 2), x, ms.float64)
    assert_close(in_graph_mode(nn.PixelShuffle(2), ms.Tensor(x)), ref, ms.float64)
    with pytest.raises(ValueError, match="pixel_shuffle"):
        ops.pixel_shuffle(ms.Tensor(rand(1, 3, 2, 2)), 2)


def np_patches(x, k, s, d, p):
    n, c, h, w = x.shape
    x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    oh = (h + 2 * p - (k - 1) * d - 1) // s + 1
    ow = (w + 2 * p - (k - 1) * d - 1) // s + 1
    out = np.zeros((n, c, k, k, oh, ow))
    for i in range(k):
        for j in range(k):
            out[:, :, i, j] = x[:, :, i * d:i * d + (oh - 1) * s + 1:s,
                                j * d:j * d + (ow - 1) * s + 1:s]
    return out


def test_unfold_function_and_layer():
    x = rand(2, 3, 6, 5)
    ref = np_patches(x, 2, 2, 1, 1)
    got = ops.unfold(ms.Tensor(x), 2, padding=1, stride=2)
    assert_close(got, ref.reshape(2, 3 * 4, -1), ms.float64)
    check_grad(lambda t: ops.unfold(t, 2, dilation=2), rand(1, 2, 5, 5))
    layer = nn.Unfold([1, 2, 2, 1], [1, 1, 1, 1], [1, 2, 2, 1])
    ref = np_patches(x, 2, 1, 2, 0)          # (n, c, kh, kw, oh, ow)
    tf_order = ref.transpose(0, 2, 3, 1, 4, 5).reshape(2, 4 * 3, *ref.shape[-2:])
    assert_close(layer(ms.Tensor(x)), tf_order, ms.float64)
    assert_close(in_graph_mode(layer, ms.Tensor(x)), tf_order, ms.float64)
    same = nn.Unfold([1, 3, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1], "same")(ms.Tensor(x))
    assert same.shape == (2, 27, 3, 3)


def test_dropout2d_zeroes_whole_channels():
    ms.set_seed(3)
    x = np.ones((4, 16, 3, 3), np.float32)
    y = ops.dropout2d(ms.Tensor(x), 0.5).asnumpy()
    per_channel = y.reshape(4, 16, -1)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
    assert 0 < (per_channel[..., 0] == 0).mean() < 1
    layer = nn.Dropout2d(0.5)
    layer.set_train(False)
    assert_close(layer(ms.Tensor(x)), x, ms.float32)
    with pytest.raises(ValueError, match="dropout2d: input must be 4-D"):
        ops.dropout2d(ms.Tensor(x[0]))


# ---- normalization ----

def np_group_norm(x, groups, eps=1e-5):
    n = x.shape[0]
    g = x.reshape(n, groups, -1)
    y = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)
    return y.reshape(x.shape)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_group_and_instance_norm(mode):
    x = rand(2, 6, 3, 4).astype(np.float32)
    run = (lambda layer, t: layer(t)) if mode == "pynative" else in_graph_mode
    gn = nn.GroupNorm(3, 6)
    assert [p.name for p in gn.trainable_params()] == ["gamma", "beta"]
    assert_close(run(gn, ms.Tensor(x)), np_group_norm(x.astype(np.float64), 3), ms.float32,
                 rtol=1e-4, atol=1e-5)
    inorm = nn.InstanceNorm2d(6, affine=True, gamma_init="ones")
    assert_close(run(inorm, ms.Tensor(x)), np_group_norm(x.astype(np.float64), 6), ms.float32,
                 rtol=1e-4, atol=1e-5)
    assert sorted(p.name for p in inorm.get_parameters()) == ["beta", "gamma", "mean",
                                                              "variance"]


def test_group_norm_function_gradient_and_errors():
    w, b = rand(4), rand(4)
    check_grad(lambda t, g, h: ops.group_norm(t, 2, g, h), rand(2, 4, 3), w, b, rtol=1e-4,
               atol=1e-6)
    with pytest.raises(ValueError, match="GroupNorm: num_channels"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match="group_norm"):
        ops.group_norm(ms.Tensor(rand(2, 5, 3)), 2)


def test_instance_norm_updates_running_statistics_in_training():
    x = rand(3, 2, 4, 4).astype(np.float32)
    layer = nn.InstanceNorm2d(2)
    layer.set_train(True)
    layer(ms.Tensor(x))
    means = x.reshape(3, 2, -1).mean(-1).mean(0)
    variances = x.reshape(3, 2, -1).var(-1, ddof=1).mean(0)
    assert_close(layer.moving_mean, 0.1 * means, ms.float32, rtol=1e-5, atol=1e-6)
    assert_close(layer.moving_variance, 0.9 + 0.1 * variances, ms.float32, rtol=1e-5)


def test_spatial_ops_compile_like_they_run():
    x = ms.Tensor(rand(1, 4, 5, 6).astype(np.float32))

    def many(t):
        return (ops.pad(t, (1, 2, 0, 1), "reflect"), ops.interpolate(t, size=(7, 3),
                                                                      mode="bilinear"),
                ops.adaptive_avg_pool2d(t, (2, 4)), ops.pixel_shuffle(t, 2),
                ops.unfold(t, 2), ops.group_norm(t, 2))

    assert_same_in_both_modes(many, x)


# ---- small layers: channel dropout 1d/3d, shuffles, unflatten, BatchNorm3d, pads 3d ----

def test_channel_dropout_1d_and_3d():
    ms.set_seed(4)
    x = np.ones((4, 8, 5), np.float32)
    y = ops.dropout1d(ms.Tensor(x), 0.5).asnumpy()
    assert np.all((y == 0).all(-1) | (y == 2).all(-1)) and 0 < (y[..., 0] == 0).mean() < 1
    unbatched = ops.dropout1d(ms.Tensor(x[0]), 0.5).asnumpy()
    assert np.all((unbatched == 0).all(-1) | (unbatched == 2).all(-1))
    v = ops.dropout3d(ms.Tensor(np.ones((2, 6, 2, 2, 2), np.float32)), 0.5).asnumpy()
    flat = v.reshape(2, 6, -1)
    assert np.all((flat == 0).all(-1) | (flat == 2).all(-1))
    layer = nn.Dropout3d(0.5)
    layer.set_train(False)
    assert layer(ms.Tensor(v)) is not None and nn.Dropout1d(0.0)(ms.Tensor(x)).shape == x.shape
    with pytest.raises(ValueError, match="dropout3d: input must be 5-D"):
        ops.dropout3d(ms.Tensor(x))


def test_channel_shuffle_unflatten_and_pads_3d():
    x = rand(2, 6, 4, 5)
    ref = x.reshape(2, 3, 2, 4, 5).transpose(0, 2, 1, 3, 4).reshape(2, 6, 4, 5)
    assert_close(nn.ChannelShuffle(3)(ms.Tensor(x)), ref, ms.float64)
    assert_close(in_graph_mode(nn.ChannelShuffle(2), ms.Tensor(x)),
                 x.reshape(2, 2, 3, 4, 5).transpose(0, 2, 1, 3, 4).reshape(2, 6, 4, 5),
                 ms.float64)
    assert nn.Unflatten(1, (2, 3))(ms.Tensor(x)).shape == (2, 2, 3, 4, 5)
    assert nn.Unflatten(-1, [5, 1])(ms.Tensor(x)).shape == (2, 6, 4, 5, 1)
    v = rand(1, 2, 3, 4, 5)
    assert_close(nn.ReflectionPad3d((1, 2, 1, 0, 2, 1))(ms.Tensor(v)),
                 np.pad(v, ((0, 0), (0, 0), (2, 1), (1, 0), (1, 2)), "reflect"), ms.float64)
    assert_close(nn.ReplicationPad3d(1)(ms.Tensor(v)),
                 np.pad(v, ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)), "edge"), ms.float64)


def test_batch_norm_3d_and_adaptive_max_pool_1d():
    v = rand(2, 3, 4, 5, 6).astype(np.float32)
    bn = nn.BatchNorm3d(3)
    assert [p.name for p in bn.trainable_params()] == ["bn2d.gamma", "bn2d.beta"]
    assert_close(bn(ms.Tensor(v)), v / np.sqrt(1 + 1e-5), ms.float32)   # eval: moving stats
    bn.set_train(True)
    flat = v.transpose(1, 0, 2, 3, 4).reshape(3, -1).astype(np.float64)
    ref = (v - flat.mean(1)[None, :, None, None, None]) / np.sqrt(
        flat.var(1)[None, :, None, None, None] + 1e-5)
    assert_close(bn(ms.Tensor(v)), ref, ms.float32, rtol=1e-4, atol=1e-4)
    x = rand(2, 3, 12)
    assert_close(nn.AdaptiveMaxPool1d(4)(ms.Tensor(x)), x.reshape(2, 3, 4, 3).max(-1),
                 ms.float64)
    with pytest.raises(ValueError, match="divisible by output_size=5"):
        nn.AdaptiveMaxPool1d(5)(ms.Tensor(x))


def test_embedding_lookup():
    layer = nn.EmbeddingLookup(10, 4)
    assert [p.name for p in layer.trainable_params()] == ["embedding_table"]
    table = layer.embedding_table.asnumpy()
    ids = np.array([[1, 0, 9], [3, 12, -1]], np.int32)
    want = np.where(((ids >= 0) & (ids < 10))[..., None], table[np.clip(ids, 0, 9)], 0)
    assert_close(layer(ms.Tensor(ids)), want, ms.float32)           # out of range: zeros
    assert_close(in_graph_mode(layer, ms.Tensor(ids)), want, ms.float32)
    clipped = nn.EmbeddingLookup(10, 4, max_norm=0.01)
    clipped.embedding_table.set_data(ms.Tensor(table * 10))
    rows = table[[1, 0, 9]] * 10
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    assert_close(clipped(ms.Tensor(ids[0])), rows * 0.01 / np.maximum(norms, 0.01), ms.float32,
                 rtol=1e-5)
    device = nn.EmbeddingLookup(10, 4, target="DEVICE", sparse=False)
    with pytest.raises(IndexError, match="EmbeddingLookup: id"):
        device(ms.Tensor(ids))
    with pytest.raises(ValueError, match="sparse must be True"):
        nn.EmbeddingLookup(10, 4, sparse=False)


def test_adaptive_avg_pool3d():
    x = rand(2, 3, 5, 7, 6)
    ref = np_adaptive_avg(np_adaptive_avg(np_adaptive_avg(x, 2, 2), 3, 3), 4, 4)
    assert_close(nn.AdaptiveAvgPool3d((2, 3, 4))(ms.Tensor(x)), ref, ms.float64)
    assert_close(ops.adaptive_avg_pool3d(ms.Tensor(x[0]), (None, 3, 2)),
                 np_adaptive_avg(np_adaptive_avg(x[0], 3, 2), 2, 3), ms.float64)
    assert_close(in_graph_mode(nn.AdaptiveAvgPool3d(2), ms.Tensor(x)),
                 np_adaptive_avg(np_adaptive_avg(np_adaptive_avg(x, 2, 2), 2, 3), 2, 4),
                 ms.float64)
    check_grad(lambda t: ops.adaptive_avg_pool3d(t, (2, 1, 2)), rand(1, 1, 3, 2, 3))


def np_pool3d(x, k, s, pad, reduce, fill, ceil=False):
    """Direct windows over x padded by `pad` on each side with `fill` (PyTorch's ceil rule)."""
    padded = np.pad(x, ((0, 0), (0, 0)) + ((pad, pad),) * 3, constant_values=fill)
    outs = []
    for n in x.shape[2:]:
        free = n + 2 * pad - k
        size = (-(-free // s) if ceil else free // s) + 1
        if ceil and (size - 1) * s >= n + pad:
            size -= 1
        outs.append(size)
    y = np.zeros(x.shape[:2] + tuple(outs))
    for i in range(outs[0]):
        for j in range(outs[1]):
            for m in range(outs[2]):
                win = padded[:, :, i * s:i * s + k, j * s:j * s + k, m * s:m * s + k]
                y[:, :, i, j, m] = reduce(win)
    return y


def test_pool3d_layers():
    x = rand(2, 3, 7, 6, 5)
    assert_close(nn.MaxPool3d(3, 2, "pad", 1)(ms.Tensor(x)),
                 np_pool3d(x, 3, 2, 1, lambda w: w.max((2, 3, 4)), -np.inf), ms.float64)
    assert_close(nn.MaxPool3d(3, 2, "pad", 1, ceil_mode=True)(ms.Tensor(x)),
                 np_pool3d(x, 3, 2, 1, lambda w: w.max((2, 3, 4)), -np.inf, ceil=True),
                 ms.float64)
    assert_close(nn.AvgPool3d(3, 2, "pad", 1)(ms.Tensor(x)),
                 np_pool3d(x, 3, 2, 1, lambda w: w.mean((2, 3, 4)), 0.0), ms.float64)
    ones = np.ones_like(x)
    count = np_pool3d(ones, 3, 2, 1, lambda w: w.sum((2, 3, 4)), 0.0)
    assert_close(nn.AvgPool3d(3, 2, "pad", 1, count_include_pad=False)(ms.Tensor(x)),
                 np_pool3d(x, 3, 2, 1, lambda w: w.sum((2, 3, 4)), 0.0) / count, ms.float64)
    assert_close(nn.AvgPool3d(2, 2, divisor_override=3)(ms.Tensor(x)),
                 np_pool3d(x, 2, 2, 0, lambda w: w.sum((2, 3, 4)) / 3, 0.0), ms.float64)
    y, idx = nn.MaxPool3d(2, 2, "pad", 0, return_indices=True)(ms.Tensor(x))
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, idx.asnumpy().reshape(2, 3, -1), 2),
                                  y.asnumpy().reshape(2, 3, -1))
    assert idx.dtype == ms.int64
    check_grad(lambda t: nn.AvgPool3d(2, 1, "pad", 1, count_include_pad=False)(t),
               rand(1, 1, 2, 3, 2))
    check_grad(lambda t: nn.MaxPool3d(2, 1)(t), rand(1, 1, 3, 3, 2))
    assert_close(in_graph_mode(nn.MaxPool3d(3, 2, "same"), ms.Tensor(x)),
                 nn.MaxPool3d(3, 2, "same")(ms.Tensor(x)).asnumpy(), ms.float64)
    with pytest.raises(ValueError, match="pad_mode must be 'pad' when dilation"):
        nn.MaxPool3d(2, return_indices=True)


def np_lp_pool(x, p, kernel, stride, ceil_mode=False):
    """(sum of x^p over each window) ^ (1 / p) over the last len(kernel) axes; ceil_mode windows
    that run past the end are averaged over their valid part and scaled by the full window."""
    nd = len(kernel)
    sizes = x.shape[-nd:]
    outs = []
    for size, k, s in zip(sizes, kernel, stride):
        n = -(-(size - k) // s) + 1 if ceil_mode else (size - k) // s + 1
        if ceil_mode and (n - 1) * s >= size:
            n -= 1
        outs.append(n)
    out = np.zeros(x.shape[:-nd] + tuple(outs))
    for idx in np.ndindex(*outs):
        sl = tuple(slice(i * s, min(i * s + k, size))
                   for i, s, k, size in zip(idx, stride, kernel, sizes))
        win = x[(Ellipsis,) + sl] ** p
        out[(Ellipsis,) + idx] = win.mean(tuple(range(-nd, 0))) * np.prod(kernel)
    return out ** (1.0 / p)


@pytest.mark.parametrize("p,kernel,stride,ceil", [(2, 2, None, False), (3.0, (3, 2), (2, 1), False),
                                                   (1, 3, 2, True)])
def test_lp_pool2d(p, kernel, stride, ceil):
    x = RNG.uniform(0.1, 2.0, (2, 3, 7, 6))
    k2 = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    s2 = k2 if stride is None else (stride if isinstance(stride, tuple) else (stride, stride))
    got = ops.lp_pool2d(ms.Tensor(x), p, kernel, stride, ceil)
    np.testing.assert_allclose(got.asnumpy(), np_lp_pool(x, p, k2, s2, ceil), rtol=1e-10)
    layer = nn.LPPool2d(p, kernel, stride, ceil)
    assert_same_in_both_modes(lambda t: layer(t), ms.Tensor(x.astype(np.float32)))
    check_grad(lambda t: ops.lp_pool2d(t, p, kernel, stride, ceil), x[:1, :1])


def test_lp_pool1d_and_errors():
    x = RNG.uniform(0.1, 2.0, (2, 3, 7))
    got = nn.LPPool1d(1.5, 2)(ms.Tensor(x))
    np.testing.assert_allclose(got.asnumpy(), np_lp_pool(x, 1.5, (2,), (2,)), rtol=1e-10)
    got = ops.lp_pool1d(ms.Tensor(x[0]), 2, 3, 2, True)           # (C, L)
    np.testing.assert_allclose(got.asnumpy(), np_lp_pool(x[0], 2, (3,), (2,), True), rtol=1e-10)
    check_grad(lambda t: ops.lp_pool1d(t, 2, 3, 2), x[:1])
    with pytest.raises(ValueError, match="can not be 0"):
        ops.lp_pool1d(ms.Tensor(x), 0, 2)
    with pytest.raises(TypeError, match="norm_type"):
        ops.lp_pool2d(ms.Tensor(x[None]), "2", 2)


def test_pool1d_ceil_mode_with_padding():
    """Padding only along the length (a height-1 plane) is symmetric per axis, so ceil_mode
    works (MindSpore 2.10's docstring example)."""
    x = np.arange(2 * 8, dtype=np.float32).reshape(1, 2, 8)
    got = nn.AvgPool1d(4, stride=1, ceil_mode=True, pad_mode="pad", padding=2)(ms.Tensor(x))
    padded = np.pad(x, ((0, 0), (0, 0), (2, 2)))
    want = np.stack([padded[..., i:i + 4].mean(-1) for i in range(9)], -1)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)
    got = nn.MaxPool1d(4, stride=1, ceil_mode=True, pad_mode="pad", padding=2)(ms.Tensor(x))
    padded = np.pad(x, ((0, 0), (0, 0), (2, 2)), constant_values=-np.inf)
    want = np.stack([padded[..., i:i + 4].max(-1) for i in range(9)], -1)
    np.testing.assert_array_equal(got.asnumpy(), want)
