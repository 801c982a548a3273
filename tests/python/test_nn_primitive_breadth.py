"""Activation, loss, padding and dropout primitive classes (ops.HSwish, ops.NLLLoss, ops.Pad,
ops.Dropout2D, ...), ops.bias_add and nn.no_init_parameters against NumPy references of
MindSpore 2.10's results, by finite differences and in both modes."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(21)
X = np.linspace(-3, 3, 12).reshape(2, 6)


def np_softplus(x):
    return np.logaddexp(0.0, x)


UNARY = {
    "HSwish": (lambda: ops.HSwish(), lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "HSigmoid": (lambda: ops.HSigmoid(), lambda x: np.clip(x + 3, 0, 6) / 6),
    "ReLU6": (lambda: ops.ReLU6(), lambda x: np.clip(x, 0, 6)),
    "Elu": (lambda: ops.Elu(alpha=1.0), lambda x: np.where(x > 0, x, np.expm1(x))),
    "CeLU": (lambda: ops.CeLU(alpha=2.0), lambda x: np.where(x > 0, x, 2 * np.expm1(x / 2))),
    "Softplus": (lambda: ops.Softplus(), np_softplus),
    "Softsign": (lambda: ops.Softsign(), lambda x: x / (1 + np.abs(x))),
    "Mish": (lambda: ops.Mish(), lambda x: x * np.tanh(np_softplus(x))),
    "SeLU": (lambda: ops.SeLU(), lambda x: 1.0507009873554805 * np.where(
        x > 0, x, 1.6732632423543772 * np.expm1(x))),
    "HShrink": (lambda: ops.HShrink(lambd=0.6), lambda x: np.where(np.abs(x) > 0.6, x, 0)),
    "SoftShrink": (lambda: ops.SoftShrink(lambd=0.6),
                   lambda x: np.where(np.abs(x) > 0.6, x - 0.6 * np.sign(x), 0)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_primitives(name):
    make, ref = UNARY[name]
    prim = make()
    got = prim(Tensor(X.astype(np.float32)))
    assert got.dtype == ms.float32
    np.testing.assert_allclose(got.asnumpy(), ref(X), rtol=1e-5, atol=1e-6)
    assert_same_in_both_modes(lambda t: prim(t), Tensor(X.astype(np.float32)))
    if name not in ("HShrink", "ReLU6"):
        check_grad(lambda t: prim(t), X + 0.05)


def test_prelu_and_bias_add():
    x, w = X.reshape(2, 6, 1), np.linspace(0.1, 0.6, 6)
    got = ops.PReLU()(Tensor(x), Tensor(w))
    np.testing.assert_allclose(got.asnumpy(), np.where(x > 0, x, w[:, None] * x), rtol=1e-6)
    x3, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal(3)
    np.testing.assert_allclose(ops.bias_add(Tensor(x3), Tensor(b)).asnumpy(),
                               x3 + b[:, None], rtol=1e-12)
    np.testing.assert_allclose(ops.BiasAdd(data_format="NHWC")(Tensor(x3), Tensor(
        b[:2].repeat(2))).asnumpy(), x3 + b[:2].repeat(2), rtol=1e-12)
    ints = ops.bias_add(Tensor(np.ones((2, 3), np.int32)), Tensor(np.ones(3, np.int32)))
    assert ints.dtype == ms.int32 and (ints.asnumpy() == 2).all()
    check_grad(lambda a, c: ops.bias_add(a, c), x3, b)
    assert_same_in_both_modes(lambda a, c: ops.BiasAdd()(a, c), Tensor(x3), Tensor(b))
    with pytest.raises(ValueError, match="rank of input_x must be in"):
        ops.bias_add(Tensor(b), Tensor(b))
    with pytest.raises(TypeError, match="input type must be same"):
        ops.bias_add(Tensor(x3.astype(np.float32)), Tensor(b))
    with pytest.raises(ValueError, match="BiasAdd"):
        ops.bias_add(Tensor(x3), Tensor(np.ones(4)))


def test_loss_primitives():
    x, y = X.astype(np.float32), np.linspace(0.1, 0.9, 12).reshape(2, 6).astype(np.float32)
    w6 = np.linspace(0.5, 2, 6).astype(np.float32)
    d = np.abs(x - y)
    smooth = np.where(d < 0.5, 0.5 * d * d / 0.5, d - 0.25)
    np.testing.assert_allclose(ops.SmoothL1Loss(beta=0.5, reduction="mean")(
        Tensor(x), Tensor(y)).asnumpy(), smooth.mean(), rtol=1e-5)
    assert ops.SmoothL1Loss()(Tensor(x), Tensor(y)).shape == (2, 6)       # 'none' by default
    t = np.full((2, 6), 0.3, np.float32)
    bce = -w6 * (t * np.log(y + 1e-12) + (1 - t) * np.log(1 - y + 1e-12))
    np.testing.assert_allclose(ops.BinaryCrossEntropy(reduction="none")(
        Tensor(y), Tensor(t), Tensor(w6)).asnumpy(), bce, rtol=1e-5)   # weight broadcasts
    with pytest.raises(ValueError, match="does not broadcast"):
        ops.BinaryCrossEntropy()(Tensor(y), Tensor(t), Tensor(np.ones((3, 1, 6), np.float32)))
    pos = np.full(6, 2.0, np.float32)
    bce_l = -w6 * (pos * y * -np_softplus(-x) + (1 - y) * -np_softplus(x))
    np.testing.assert_allclose(ops.BCEWithLogitsLoss(reduction="sum")(
        Tensor(x), Tensor(y), Tensor(w6), Tensor(pos)).asnumpy(), bce_l.sum(), rtol=1e-5)
    kl = y * (np.log(y) - x)
    np.testing.assert_allclose(ops.KLDivLoss(reduction="sum")(Tensor(x), Tensor(y)).asnumpy(),
                               kl.sum(), rtol=1e-5)


@pytest.mark.parametrize("reduction,ignore", [("mean", -100), ("sum", 3), ("none", -100)])
def test_nll_loss_primitive_returns_total_weight(reduction, ignore):
    x, t = X.astype(np.float32), np.array([1, 3], np.int32)
    w = np.linspace(0.5, 2, 6).astype(np.float32)
    kept = t != ignore
    each = np.where(kept, -w[t] * x[np.arange(2), t], 0)
    total = (w[t] * kept).sum()
    want = {"mean": each.sum() / total, "sum": each.sum(), "none": each}[reduction]
    loss, total_weight = ops.NLLLoss(reduction, ignore)(Tensor(x), Tensor(t), Tensor(w))
    np.testing.assert_allclose(loss.asnumpy(), want, rtol=1e-5)
    assert total_weight.shape == () and total_weight.dtype == ms.float32
    np.testing.assert_allclose(total_weight.asnumpy(), total, rtol=1e-6)
    assert_same_in_both_modes(lambda a, b, c: ops.NLLLoss(reduction, ignore)(a, b, c),
                              Tensor(x), Tensor(t), Tensor(w))


def test_pad_primitive():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    got = ops.Pad(((1, 0), (0, 2)))(Tensor(x))
    np.testing.assert_array_equal(got.asnumpy(), np.pad(x, ((1, 0), (0, 2))))
    check_grad(lambda a: ops.Pad(((0, 1), (2, 0)))(a), x.astype(np.float64))
    with pytest.raises(ValueError, match="pairs for a rank-2"):
        ops.Pad(((1, 1),))(Tensor(x))


@pytest.mark.parametrize("cls,shape", [(ops.Dropout2D, (4, 8, 3, 2)),
                                       (ops.Dropout3D, (4, 8, 1, 3, 2))])
def test_channel_dropout_primitives(cls, shape):
    x = np.ones(shape, np.float32)
    y, mask = cls(keep_prob=0.5)(Tensor(x))
    y, mask = y.asnumpy(), mask.asnumpy()
    assert mask.dtype == np.bool_ and mask.shape == shape
    flat_mask = mask.reshape(shape[0], shape[1], -1)
    assert (flat_mask == flat_mask[..., :1]).all()                      # whole channels
    np.testing.assert_array_equal(y, np.where(mask, 2.0, 0.0))
    assert 0 < mask.mean() < 1
    y1, m1 = cls(keep_prob=1.0)(Tensor(x))
    assert m1.asnumpy().all() and (y1.asnumpy() == 1).all()
    with pytest.raises(ValueError, match="keep_prob"):
        cls(keep_prob=0.0)


def test_dropout_primitive_mask_is_zero_one_in_the_input_dtype():
    x = np.full((50, 40), 3.0, np.float16)
    y, mask = ops.Dropout(keep_prob=0.8)(Tensor(x))
    assert mask.dtype == ms.float16 and set(np.unique(mask.asnumpy())) <= {0.0, 1.0}
    np.testing.assert_allclose(y.asnumpy(), mask.asnumpy() * 3.0 / 0.8, rtol=1e-3)
    assert 0.7 < mask.asnumpy().astype(np.float32).mean() < 0.9


def test_no_init_parameters():
    with nn.no_init_parameters():
        assert ms.Parameter.init_param is False
        net = nn.Dense(3, 2)
    assert ms.Parameter.init_param is True
    before = {p.name: p.asnumpy().copy() for p in net.get_parameters()}
    replaced = net.init_parameters_data()
    assert set(replaced) == set(net.get_parameters())
    assert all(k is v for k, v in replaced.items())
    for p in net.get_parameters():
        np.testing.assert_array_equal(p.asnumpy(), before[p.name])
    from kiln.nn.utils import no_init_parameters
    assert no_init_parameters is nn.no_init_parameters


def np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_cross_entropy_primitives():
    logits = RNG.standard_normal((3, 4))
    labels = np.array([1, 2, 0], np.int32)
    onehot = np.eye(4)[labels]
    loss, backprop = ops.SoftmaxCrossEntropyWithLogits()(Tensor(logits), Tensor(onehot))
    np.testing.assert_allclose(loss.asnumpy(), -(onehot * np_log_softmax(logits)).sum(-1),
                               rtol=1e-10)
    np.testing.assert_allclose(backprop.asnumpy(), np.exp(np_log_softmax(logits)) - onehot,
                               rtol=1e-10, atol=1e-12)
    sparse = ops.SparseSoftmaxCrossEntropyWithLogits()(Tensor(logits), Tensor(labels))
    assert sparse.shape == ()
    np.testing.assert_allclose(sparse.asnumpy(), -np_log_softmax(logits)[range(3), labels].mean(),
                               rtol=1e-10)
    grad = ops.SparseSoftmaxCrossEntropyWithLogits(is_grad=True)(Tensor(logits), Tensor(labels))
    np.testing.assert_allclose(grad.asnumpy(), (np.exp(np_log_softmax(logits)) - onehot) / 3,
                               rtol=1e-10, atol=1e-12)
    check_grad(lambda a: ops.SparseSoftmaxCrossEntropyWithLogits()(a, Tensor(labels)), logits)
    sig = ops.SigmoidCrossEntropyWithLogits()(Tensor(logits), Tensor(onehot))
    np.testing.assert_allclose(sig.asnumpy(), onehot * np_softplus(-logits) +
                               (1 - onehot) * np_softplus(logits), rtol=1e-10)
    assert_same_in_both_modes(lambda a, b: ops.SoftmaxCrossEntropyWithLogits()(a, b),
                              Tensor(logits.astype(np.float32)), Tensor(onehot.astype(np.float32)))


def test_l2_primitives():
    x = RNG.standard_normal((3, 4))
    np.testing.assert_allclose(ops.L2Loss()(Tensor(x)).asnumpy(), (x * x).sum() / 2, rtol=1e-12)
    for axis, eps, scale in ((0, 1e-4, 1.0), (1, 1e-4, 1e-3), (-1, 1e-2, 1.0)):
        got = ops.L2Normalize(axis=axis, epsilon=eps)(Tensor(x * scale))
        want = x * scale / np.sqrt(np.maximum((x * x * scale * scale).sum(axis, keepdims=True),
                                              eps))
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-10)
    check_grad(lambda a: ops.L2Normalize(axis=1)(a), x)


def test_layer_shaped_primitives():
    x = RNG.standard_normal((1, 4, 5, 5)).astype(np.float32)
    y, argmax = ops.AdaptiveMaxPool2D((2, 2))(Tensor(x))
    assert y.shape == (1, 4, 2, 2) and argmax.dtype == ms.int64
    np.testing.assert_allclose(y.asnumpy()[0, :, 0, 0], x[0, :, :3, :3].max((1, 2)), rtol=1e-6)
    np.testing.assert_allclose(ops.AdaptiveAvgPool2D((1, 1))(Tensor(x)).asnumpy()[..., 0, 0],
                               x.mean((2, 3)), rtol=1e-5)
    shuffled = ops.ChannelShuffle(group=2)(Tensor(x)).asnumpy()
    np.testing.assert_array_equal(shuffled, x[:, [0, 2, 1, 3]])
    sq = RNG.standard_normal((4, 4))
    np.testing.assert_array_equal(ops.Tril(diagonal=1)(Tensor(sq)).asnumpy(), np.tril(sq, 1))
    np.testing.assert_array_equal(ops.Triu(diagonal=-1)(Tensor(sq)).asnumpy(), np.triu(sq, -1))
    np.testing.assert_array_equal(ops.Roll((1, -2), (0, 1))(Tensor(sq)).asnumpy(),
                                  np.roll(sq, (1, -2), (0, 1)))
    a, b = np.split(sq, 2, -1)
    np.testing.assert_allclose(ops.GLU()(Tensor(sq)).asnumpy(), a / (1 + np.exp(-b)), rtol=1e-10)
    w, bias = RNG.standard_normal((2, 4)), RNG.standard_normal(2)
    np.testing.assert_allclose(ops.Dense()(Tensor(sq), Tensor(w), Tensor(bias)).asnumpy(),
                               sq @ w.T + bias, rtol=1e-10)
    np.testing.assert_allclose(ops.Expm1()(Tensor(sq)).asnumpy(), np.expm1(sq), rtol=1e-12)
    np.testing.assert_allclose(ops.Log1p()(Tensor(np.abs(sq))).asnumpy(), np.log1p(np.abs(sq)),
                               rtol=1e-12)


def test_margin_loss_primitives():
    x = RNG.standard_normal((3, 4))
    t = np.array([1, 2, 0], np.int64)
    w = np.array([1.0, 2.0, 3.0, 4.0])
    margins = np.maximum(0, 0.5 - x[range(3), t][:, None] + x) ** 2
    margins[range(3), t] = 0
    want = (w[t][:, None] * margins).sum(1) / 4
    got = ops.MultiMarginLoss(p=2, margin=0.5, reduction="none")(Tensor(x), Tensor(t), Tensor(w))
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-10)
    y = np.sign(RNG.standard_normal((3, 4)))
    np.testing.assert_allclose(ops.SoftMarginLoss()(Tensor(x), Tensor(y)).asnumpy(),
                               np.log1p(np.exp(-y * x)).mean(), rtol=1e-10)
    p, n = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    d_ap = np.linalg.norm(x - p + 1e-6, axis=1)
    d_an = np.linalg.norm(x - n + 1e-6, axis=1)
    got = ops.TripletMarginLoss()(Tensor(x), Tensor(p), Tensor(n), Tensor(1.0))
    np.testing.assert_allclose(got.asnumpy(), np.maximum(d_ap - d_an + 1.0, 0).mean(),
                               rtol=1e-10)


def np_conv2d(x, w, stride, pads, dilation, groups):
    x = np.pad(x, ((0, 0), (0, 0), pads[:2], pads[2:]))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    eh, ew = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    oh, ow = (h - eh) // stride[0] + 1, (wd - ew) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for oc in range(g * o // groups, (g + 1) * o // groups):
            for i in range(oh):
                for j in range(ow):
                    patch = xs[:, :, i * stride[0]:i * stride[0] + eh:dilation[0],
                               j * stride[1]:j * stride[1] + ew:dilation[1]]
                    out[:, oc, i, j] = (patch * w[oc]).sum((1, 2, 3))
    return out


def _same_pads(size, k, s):
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


@pytest.mark.parametrize("kw,pads,stride,dilation,groups", [
    (dict(pad_mode="valid"), (0, 0, 0, 0), (1, 1), (1, 1), 1),
    (dict(pad_mode="pad", pad=(1, 0, 2, 1), stride=(1, 1, 2, 1), dilation=(1, 2)),
     (1, 0, 2, 1), (2, 1), (1, 2), 1),
    (dict(pad_mode="pad", pad=1, group=2), (1, 1, 1, 1), (1, 1), (1, 1), 2),
    (dict(pad_mode="same", stride=2), _same_pads(7, 3, 2) + _same_pads(6, 3, 2), (2, 2), (1, 1),
     1),
])
def test_conv2d_primitive(kw, pads, stride, dilation, groups):
    x = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = RNG.standard_normal((6, 4 // groups, 3, 3)).astype(np.float32)
    prim = ops.Conv2D(out_channel=6, kernel_size=3, **kw)
    got = prim(Tensor(x), Tensor(w))
    assert got.dtype == ms.float32
    np.testing.assert_allclose(got.asnumpy(), np_conv2d(x, w, stride, pads, dilation, groups),
                               rtol=1e-4, atol=1e-5)
    assert_same_in_both_modes(lambda a, b: prim(a, b), Tensor(x), Tensor(w), rtol=1e-4,
                              atol=1e-5)


def test_pool_primitives():
    x = RNG.standard_normal((2, 3, 7, 6))
    got = ops.MaxPool(kernel_size=2, strides=2)(Tensor(x)).asnumpy()
    np.testing.assert_array_equal(got, x[:, :, :6].reshape(2, 3, 3, 2, 3, 2).max((3, 5)))
    got = ops.AvgPool(kernel_size=2, strides=2)(Tensor(x)).asnumpy()
    np.testing.assert_allclose(got, x[:, :, :6].reshape(2, 3, 3, 2, 3, 2).mean((3, 5)),
                               rtol=1e-12)
    top, bottom = _same_pads(7, 3, 2)
    left, right = _same_pads(6, 3, 2)
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=np.nan)
    windows = np.stack([padded[:, :, i * 2:i * 2 + 3, j * 2:j * 2 + 3]
                        for i in range(4) for j in range(3)], 2)
    got = ops.MaxPool(kernel_size=3, strides=2, pad_mode="SAME")(Tensor(x)).asnumpy()
    np.testing.assert_array_equal(got, np.nanmax(windows, (3, 4)).reshape(2, 3, 4, 3))
    got = ops.AvgPool(kernel_size=3, strides=2, pad_mode="same")(Tensor(x)).asnumpy()
    np.testing.assert_allclose(got, np.nanmean(windows, (3, 4)).reshape(2, 3, 4, 3), rtol=1e-12)
    check_grad(lambda a: ops.AvgPool(3, 2, "same")(a), x[:1, :1])
    assert_same_in_both_modes(lambda a: ops.MaxPool(3, 2, "same")(a),
                              Tensor(x.astype(np.float32)))
    with pytest.raises(ValueError, match="pad_mode"):
        ops.MaxPool(2, 2, "pad")


def test_gelu_primitive_is_the_tanh_form_and_append_returns_none():
    x = np.linspace(-4, 4, 9)
    tanh_form = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(ops.GeLU()(Tensor(x)).asnumpy(), tanh_form, rtol=1e-10)
    cells = nn.CellList()
    assert cells.append(nn.ReLU()) is None and nn.SequentialCell().append(nn.ReLU()) is None
    assert cells.extend([nn.ReLU()]) is cells and len(cells) == 2


class _MyMomentum(nn.Optimizer):
    """MindSpore's documented custom-optimizer pattern."""

    def __init__(self, params, learning_rate, momentum=0.9, weight_decay=0.0, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self.moments = self.parameters.clone(prefix="moments", init="zeros")
        self.momentum = momentum
        self.opt = ops.ApplyMomentum()

    def construct(self, gradients):
        lr = self.get_lr()
        gradients = self.decay_weight(gradients)
        gradients = self.gradients_centralization(gradients)
        gradients = self.scale_grad(gradients)
        for param, mom, grad in zip(self.parameters, self.moments, gradients):
            self.opt(param, mom, lr, grad, self.momentum)
        return True


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_custom_optimizer_with_apply_momentum(mode):
    w0 = RNG.standard_normal((3, 2)).astype(np.float32)
    grads = [RNG.standard_normal((3, 2)).astype(np.float32) for _ in range(3)]
    w = ms.Parameter(Tensor(w0.copy()), name="w")
    opt = _MyMomentum([w], 0.1, 0.9, weight_decay=0.01, loss_scale=4.0)
    step = opt if mode == "pynative" else ms.jit(lambda g: opt(g))
    for g in grads:
        step((Tensor(g * 4.0),))
    want, acc = w0.astype(np.float64), 0.0
    for g in grads:
        acc = acc * 0.9 + (g + 0.01 * want)
        want = want - 0.1 * acc
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(opt.moments[0].asnumpy(), acc, rtol=1e-5, atol=1e-6)
    assert opt.target == "CPU" and opt.unique is True
    np.testing.assert_array_equal(ops.Sign()(Tensor(np.array([-2.0, 0.0, 3.0]))).asnumpy(),
                                  [-1.0, 0.0, 1.0])
