"""mint.nn's Cells (convolutions, normalization, pools, pads, activations, losses, resampling)
against NumPy, by finite differences, eagerly and compiled."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, mint
from kiln.mint import nn

RNG = np.random.default_rng(23)


def r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


X3, X4, X5 = r(2, 4, 9), r(2, 4, 7, 6), r(2, 4, 5, 6, 5)


def sigmoid(a):
    return 1 / (1 + np.exp(-a))


def np_conv2d(x, w, b, stride=(1, 1)):
    """Valid cross-correlation of (N, C, H, W) with (O, C, kh, kw)."""
    kh, kw = w.shape[2:]
    oh, ow = (x.shape[2] - kh) // stride[0] + 1, (x.shape[3] - kw) // stride[1] + 1
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i, j in np.ndindex(kh, kw):
        patch = x[:, :, i:i + (oh - 1) * stride[0] + 1:stride[0],
                  j:j + (ow - 1) * stride[1] + 1:stride[1]]
        y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return y + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("mode,np_mode", [("reflect", "reflect"), ("replicate", "edge"),
                                          ("circular", "wrap"), ("zeros", "constant")])
def test_conv2d_padding_modes(mode, np_mode):
    conv = nn.Conv2d(4, 6, (3, 2), (2, 1), (1, 2), padding_mode=mode)
    assert conv.weight.shape == (6, 4, 3, 2) and conv.bias.shape == (6,)
    want = np_conv2d(np.pad(X4, ((0, 0), (0, 0), (1, 1), (2, 2)), mode=np_mode),
                     conv.weight.asnumpy(), conv.bias.asnumpy(), (2, 1))
    got = assert_same_in_both_modes(lambda x: conv(x), Tensor(X4), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-4, atol=1e-4)


def test_conv1d_conv3d_and_transpose_shapes_and_init():
    c1 = nn.Conv1d(4, 6, 3, padding="same", bias=False)
    assert c1.bias is None and c1(Tensor(X3)).shape == (2, 6, 9)
    c3 = nn.Conv3d(4, 2, 2, stride=(1, 2, 1), padding=1, groups=2)
    assert c3.weight.shape == (2, 2, 2, 2, 2) and c3(Tensor(X5)).shape == (2, 2, 6, 4, 6)
    bound = 1 / np.sqrt(2 * 8)  # PyTorch's kaiming_uniform(a=sqrt(5)) bound for fan_in 16
    assert np.abs(c3.weight.asnumpy()).max() <= bound + 1e-6
    ct = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    assert ct.weight.shape == (4, 3, 3, 3) and ct(Tensor(X4)).shape == (2, 6, 14, 12)
    assert ct(Tensor(X4), output_size=(13, 11)).shape == (2, 6, 13, 11)


def test_conv_gradient_by_finite_differences():
    conv = nn.Conv1d(2, 3, 3, padding=1, padding_mode="reflect")
    w = conv.weight.asnumpy()

    def fn(x):
        return conv(x)

    # conv runs in float32: the input gradient of this linear map, checked by a big step
    x = r(1, 2, 5)
    grad = ms.grad(lambda t: (conv(t) * Tensor(np.arange(15, dtype=np.float32).reshape(
        1, 3, 5))).sum())(Tensor(x)).asnumpy()
    eps, numeric = 0.5, np.zeros_like(x)
    weight = np.arange(15, dtype=np.float64).reshape(1, 3, 5)
    for i in np.ndindex(*x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        numeric[i] = ((fn(Tensor(hi)).asnumpy() - fn(Tensor(lo)).asnumpy()) * weight).sum() / (
            2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-3, atol=1e-3)
    assert w.shape == (3, 2, 3)


@pytest.mark.parametrize("cls,x", [(nn.BatchNorm1d, X3), (nn.BatchNorm2d, X4),
                                   (nn.BatchNorm3d, X5)])
def test_batch_norm_training_updates_running_stats(cls, x):
    bn = cls(4, momentum=0.2)
    bn.set_train(True)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    out = bn(Tensor(x)).asnumpy()
    mean, var = x.mean(axes), x.var(axes)
    np.testing.assert_allclose(out, (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) +
                                                                        1e-5), atol=1e-4)
    count = x.size / x.shape[1]
    np.testing.assert_allclose(bn.running_mean.asnumpy(), 0.2 * mean, atol=1e-5)
    np.testing.assert_allclose(bn.running_var.asnumpy(), 0.8 + 0.2 * var * count / (count - 1),
                               atol=1e-5)
    assert int(bn.num_batches_tracked.asnumpy()) == 1
    bn.set_train(False)
    ev = bn(Tensor(x)).asnumpy()
    np.testing.assert_allclose(ev, (x - bn.running_mean.asnumpy().reshape(shape)) / np.sqrt(
        bn.running_var.asnumpy().reshape(shape) + 1e-5), atol=1e-4)
    with pytest.raises(ValueError, match="expected"):
        bn(Tensor(r(3)))


def test_batch_norm_cumulative_average_and_untracked():
    bn = nn.BatchNorm2d(4, momentum=None)
    bn.set_train(True)
    bn(Tensor(X4))
    bn(Tensor(X4 * 2))
    # factors 1 then 1/2: (m1 + m2) / 2 with m2 = 2 * m1
    np.testing.assert_allclose(bn.running_mean.asnumpy(), 1.5 * X4.mean((0, 2, 3)), atol=1e-5)
    compiled = nn.BatchNorm2d(4, momentum=None)  # the factor is read when the graph runs
    compiled.set_train(True)
    step = ms.jit(lambda t: compiled(t))
    step(Tensor(X4))
    out = step(Tensor(X4 * 2))
    np.testing.assert_allclose(compiled.running_mean.asnumpy(), bn.running_mean.asnumpy(),
                               atol=1e-5)
    np.testing.assert_allclose(compiled.running_var.asnumpy(), bn.running_var.asnumpy(),
                               atol=1e-5)
    assert int(compiled.num_batches_tracked.asnumpy()) == 2
    m2, v2 = (2 * X4).mean((0, 2, 3), keepdims=True), (2 * X4).var((0, 2, 3), keepdims=True)
    np.testing.assert_allclose(out.asnumpy(), (2 * X4 - m2) / np.sqrt(v2 + 1e-5), atol=1e-4)
    plain = nn.BatchNorm2d(4, affine=False, track_running_stats=False)
    assert plain.weight is None and plain.running_mean is None
    plain.set_train(False)  # no running statistics: batch statistics even in evaluation
    got = plain(Tensor(X4)).asnumpy()
    m, v = X4.mean((0, 2, 3), keepdims=True), X4.var((0, 2, 3), keepdims=True)
    np.testing.assert_allclose(got, (X4 - m) / np.sqrt(v + 1e-5), atol=1e-4)


def test_sync_batch_norm_single_process_is_batch_norm():
    sync, bn = nn.SyncBatchNorm(4), nn.BatchNorm2d(4)
    assert sync.world_size == 1
    for cell in (sync, bn):
        cell.set_train(True)
    np.testing.assert_allclose(sync(Tensor(X4)).asnumpy(), bn(Tensor(X4)).asnumpy(), atol=1e-6)
    np.testing.assert_allclose(sync.running_var.asnumpy(), bn.running_var.asnumpy(), atol=1e-6)


def test_group_norm_embedding_prelu():
    gn = nn.GroupNorm(2, 4)
    g = X4.reshape(2, 2, -1)
    want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    got = assert_same_in_both_modes(lambda x: gn(x), Tensor(X4), atol=1e-5)
    np.testing.assert_allclose(got.asnumpy(), want.reshape(X4.shape), atol=1e-4)
    emb = nn.Embedding(5, 3, padding_idx=-1)
    assert emb.padding_idx == 4 and not emb.weight.asnumpy()[4].any()
    idx = np.array([[1, 4], [0, 1]], np.int64)
    np.testing.assert_allclose(emb(Tensor(idx)).asnumpy(), emb.weight.asnumpy()[idx])
    prelu = nn.PReLU(4, 0.1)
    np.testing.assert_allclose(prelu(Tensor(X4)).asnumpy(), np.where(X4 > 0, X4, 0.1 * X4),
                               rtol=1e-6)


PAD_CASES = [
    (nn.ZeroPad1d((1, 2)), X3, lambda a: np.pad(a, ((0, 0), (0, 0), (1, 2)))),
    (nn.ZeroPad2d(1), X4, lambda a: np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))),
    (nn.ZeroPad3d((1, 0, 2, 1, 0, 1)), X5,
     lambda a: np.pad(a, ((0, 0), (0, 0), (0, 1), (2, 1), (1, 0)))),
    (nn.ConstantPad1d(2, 3.5), X3,
     lambda a: np.pad(a, ((0, 0), (0, 0), (2, 2)), constant_values=3.5)),
    (nn.ConstantPad2d((1, 2, 0, 1), -1.0), X4,
     lambda a: np.pad(a, ((0, 0), (0, 0), (0, 1), (1, 2)), constant_values=-1.0)),
    (nn.ConstantPad3d(1, 2.0), X5, lambda a: np.pad(a, [(0, 0)] * 2 + [(1, 1)] * 3,
                                                    constant_values=2.0)),
    (nn.ReflectionPad1d((2, 1)), X3, lambda a: np.pad(a, ((0, 0), (0, 0), (2, 1)), "reflect")),
    (nn.ReflectionPad2d(2), X4, lambda a: np.pad(a, [(0, 0)] * 2 + [(2, 2)] * 2, "reflect")),
    (nn.ReflectionPad3d(1), X5, lambda a: np.pad(a, [(0, 0)] * 2 + [(1, 1)] * 3, "reflect")),
    (nn.ReplicationPad1d(3), X3, lambda a: np.pad(a, ((0, 0), (0, 0), (3, 3)), "edge")),
    (nn.ReplicationPad2d((1, 2, 3, 0)), X4,
     lambda a: np.pad(a, ((0, 0), (0, 0), (3, 0), (1, 2)), "edge")),
    (nn.ReplicationPad3d(2), X5, lambda a: np.pad(a, [(0, 0)] * 2 + [(2, 2)] * 3, "edge")),
]


@pytest.mark.parametrize("cell,x,ref", PAD_CASES, ids=[type(c[0]).__name__ for c in PAD_CASES])
def test_padding_cells(cell, x, ref):
    got = assert_same_in_both_modes(lambda t: cell(t), Tensor(x))
    np.testing.assert_array_equal(got.asnumpy(), ref(x))


SIMPLE_CASES = [
    (nn.GLU(1), X4, lambda a: a[:, :2] * sigmoid(a[:, 2:])),
    (nn.Hardshrink(0.3), X4, lambda a: np.where(np.abs(a) > 0.3, a, 0)),
    (nn.Softshrink(0.3), X4, lambda a: np.where(a > 0.3, a - 0.3, np.where(a < -0.3, a + 0.3,
                                                                           0))),
    (nn.Hardsigmoid(), X4, lambda a: np.clip(a / 6 + 0.5, 0, 1)),
    (nn.LogSigmoid(), X4, lambda a: np.log(sigmoid(a))),
    (nn.SELU(), X4, lambda a: 1.0507009873554805 * np.where(
        a > 0, a, 1.6732632423543772 * np.expm1(a))),
    (nn.Hardtanh(-0.5, 0.7), X4, lambda a: np.clip(a, -0.5, 0.7)),
    (nn.ReLU6(), X4 * 5, lambda a: np.clip(a, 0, 6)),
    (nn.Threshold(0.2, -3.0), X4, lambda a: np.where(a > 0.2, a, -3.0)),
    (nn.PixelShuffle(2), X4, lambda a: a.reshape(2, 1, 2, 2, 7, 6).transpose(
        0, 1, 4, 2, 5, 3).reshape(2, 1, 14, 12)),
    (nn.AvgPool1d(3, 2, 1), X3, None),
    (nn.AvgPool2d(2), X4, lambda a: a[:, :, :6].reshape(2, 4, 3, 2, 3, 2).mean((3, 5))),
    (nn.AvgPool3d(5), X5, lambda a: a[:, :, :, :5].mean((2, 3, 4), keepdims=True)),
    (nn.MaxPool2d(2), X4, lambda a: a[:, :, :6].reshape(2, 4, 3, 2, 3, 2).max((3, 5))),
    (nn.AdaptiveAvgPool1d(3), X3, lambda a: a.reshape(2, 4, 3, 3).mean(-1)),
    (nn.AdaptiveAvgPool2d(1), X4, lambda a: a.mean((2, 3), keepdims=True)),
    (nn.AdaptiveAvgPool3d(1), X5, lambda a: a.mean((2, 3, 4), keepdims=True)),
    (nn.AdaptiveMaxPool1d(3), X3, lambda a: a.reshape(2, 4, 3, 3).max(-1)),
    (nn.AdaptiveMaxPool2d(1), X4, lambda a: a.max((2, 3), keepdims=True)),
    (nn.Unfold(2, stride=2), X4[:, :, :6], lambda a: a.reshape(2, 4, 3, 2, 3, 2).transpose(
        0, 1, 3, 5, 2, 4).reshape(2, 16, 9)),
    (nn.Fold((6, 6), 2, stride=2), X4[:, :, :6].reshape(2, 4, 3, 2, 3, 2).transpose(
        0, 1, 3, 5, 2, 4).reshape(2, 16, 9), lambda a: X4[:, :, :6]),
    (nn.UpsamplingNearest2d(scale_factor=2), X4, lambda a: a.repeat(2, 2).repeat(2, 3)),
    (nn.Upsample(size=(14, 12)), X4, lambda a: a.repeat(2, 2).repeat(2, 3)),
    (nn.UpsamplingBilinear2d((13, 11)), X4, None),
]


@pytest.mark.parametrize("cell,x,ref", SIMPLE_CASES,
                         ids=[type(c[0]).__name__ for c in SIMPLE_CASES])
def test_simple_cells(cell, x, ref):
    got = assert_same_in_both_modes(lambda t: cell(t), Tensor(x), rtol=1e-5, atol=1e-5)
    if ref is not None:
        np.testing.assert_allclose(got.asnumpy(), ref(x), rtol=1e-5, atol=1e-5)


def test_bilinear_upsampling_aligns_corners_and_avg_pool1d_pads():
    up = nn.UpsamplingBilinear2d(scale_factor=2)(Tensor(X4)).asnumpy()
    np.testing.assert_allclose(up[..., 0, 0], X4[..., 0, 0], rtol=1e-6)
    np.testing.assert_allclose(up[..., -1, -1], X4[..., -1, -1], rtol=1e-6)
    pooled = nn.AvgPool1d(3, 2, 1)(Tensor(X3)).asnumpy()
    padded = np.pad(X3, ((0, 0), (0, 0), (1, 1)))
    np.testing.assert_allclose(pooled, np.stack([padded[..., i:i + 3].mean(-1)
                                                 for i in range(0, 9, 2)], -1), atol=1e-6)


def test_max_pool_indices_and_unpool():
    values, idx = nn.MaxPool2d(2, return_indices=True)(Tensor(X4))
    assert idx.dtype == ms.int64
    back = nn.MaxUnpool2d(2)(values, idx, (7, 6)).asnumpy()
    blocks = X4[:, :, :6].reshape(2, 4, 3, 2, 3, 2)
    assert np.count_nonzero(back) == values.size
    np.testing.assert_allclose(np.sort(back[back != 0]), np.sort(blocks.max((3, 5)).ravel()))


LOSS_CASES = [
    (nn.BCELoss(), (sigmoid(X3), (X3 > 0).astype(np.float32)),
     lambda p, t: np.mean(-(t * np.log(p) + (1 - t) * np.log(1 - p)))),
    (nn.BCELoss(Tensor(np.linspace(0.5, 2, 9).astype(np.float32)), "sum"),
     (sigmoid(X3), (X3 > 0).astype(np.float32)),
     lambda p, t: np.sum(-np.linspace(0.5, 2, 9) * (t * np.log(p) + (1 - t) * np.log(1 - p)))),
    (nn.KLDivLoss("batchmean"), (X3, np.abs(X3) + 0.1),
     lambda x, t: np.sum(t * (np.log(t) - x)) / 2),
    (nn.KLDivLoss("sum", True), (X3, X3[::-1].copy()),
     lambda x, t: np.sum(np.exp(t) * (t - x))),
    (nn.SoftMarginLoss(), (X3, np.sign(X3[::-1]).copy()),
     lambda x, t: np.mean(np.log1p(np.exp(-t * x)))),
]


@pytest.mark.parametrize("cell,inputs,ref", LOSS_CASES,
                         ids=[f"{type(c[0]).__name__}{i}" for i, c in enumerate(LOSS_CASES)])
def test_losses(cell, inputs, ref):
    got = assert_same_in_both_modes(lambda a, b: cell(a, b), *(Tensor(a) for a in inputs),
                                    rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.asnumpy(), ref(*inputs), rtol=1e-5, atol=1e-5)
    check_grad(lambda a: cell(a, Tensor(inputs[1].astype(np.float64))), inputs[0], rtol=1e-4,
               atol=1e-6)


def test_cosine_embedding_loss():
    a, b, y = r(3, 5), r(3, 5), np.array([1.0, -1.0, 1.0], np.float32)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    want = np.where(y > 0, 1 - cos, np.maximum(0, cos - 0.1)).mean()
    got = nn.CosineEmbeddingLoss(0.1)(Tensor(a), Tensor(b), Tensor(y))
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5)


def test_dropout2d_and_graph_mode_cells():
    drop = nn.Dropout2d(0.5)
    drop.set_train(False)
    assert drop(Tensor(X4)) is not None and np.array_equal(drop(Tensor(X4)).asnumpy(), X4)
    drop.set_train(True)
    out = drop(Tensor(X4)).asnumpy()
    kept = np.abs(out).reshape(8, -1).sum(1) > 0
    np.testing.assert_allclose(out.reshape(8, -1)[kept], 2 * X4.reshape(8, -1)[kept], rtol=1e-6)

    class Net(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 3, 3, padding=1, padding_mode="reflect")
            self.bn = nn.BatchNorm2d(3)
            self.pool = nn.AdaptiveAvgPool2d(1)

        def construct(self, x):
            return mint.flatten(self.pool(self.bn(self.conv(x))), 1)

    net = Net()
    net.set_train(False)
    eager = net(Tensor(X4)).asnumpy()
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        compiled = net(Tensor(X4)).asnumpy()
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(4, 4, 3, padding_mode="mirror")
    with pytest.raises(TypeError, match="AvgPool2d"):
        nn.AvgPool2d()
    with pytest.raises(ValueError, match="num_groups"):
        nn.GroupNorm(3, 4)
