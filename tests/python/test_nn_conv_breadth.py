"""Linear, Conv1d, Conv2dTranspose and Conv1dTranspose vs NumPy references (direct and
scatter-add convolution), MindSpore's output sizes, finite-difference gradients, Graph mode."""
import numpy as np
import pytest
from gradcheck import numeric_grads
from helpers import assert_close

import kiln as ms
from kiln import Tensor, nn

RNG = np.random.default_rng(9)


def np_conv1d(x, w, stride, pad, dilation, groups=1):
    """x (N, C, L), w (O, C / groups, 1, k)."""
    n, c, length = x.shape
    o, cg, _, k = w.shape
    x = np.pad(x, ((0, 0), (0, 0), pad))
    out_len = (x.shape[2] - (k - 1) * dilation - 1) // stride + 1
    y = np.zeros((n, o, out_len))
    og = o // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for t in range(out_len):
            window = xs[:, :, t * stride:t * stride + (k - 1) * dilation + 1:dilation]
            y[:, g * og:(g + 1) * og, t] = np.einsum("ncj,ocj->no", window,
                                                     w[g * og:(g + 1) * og, :, 0])
    return y


def np_conv_transpose2d(x, w, stride, pads, dilation, out_hw, groups=1):
    """Scatter-add form: every input pixel adds w * x at stride * position - padding."""
    n, cin, h, wd = x.shape
    _, og, kh, kw = w.shape
    top, _, left, _ = pads
    y = np.zeros((n, og * groups) + tuple(out_hw))
    ig = cin // groups
    for g in range(groups):
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for b in range(kw):
                        r = i * stride[0] - top + a * dilation[0]
                        s = j * stride[1] - left + b * dilation[1]
                        if 0 <= r < out_hw[0] and 0 <= s < out_hw[1]:
                            y[:, g * og:(g + 1) * og, r, s] += np.einsum(
                                "nc,co->no", x[:, g * ig:(g + 1) * ig, i, j],
                                w[g * ig:(g + 1) * ig, :, a, b])
    return y


def test_linear_matches_dense_rule():
    layer = nn.Linear(4, 3)
    assert [p.name for p in layer.trainable_params()] == ["weight", "bias"]
    x = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    ref = x @ layer.weight.asnumpy().T + layer.bias.asnumpy()
    assert_close(layer(Tensor(x)), ref, ms.float32, rtol=1e-5)
    assert nn.Linear(4, 3, bias=False).bias is None
    bound = 1 / np.sqrt(4)
    assert np.abs(layer.weight.asnumpy()).max() <= bound
    with pytest.raises(TypeError, match="Linear: bias"):
        nn.Linear(4, 3, bias=1)


@pytest.mark.parametrize("pad_mode,padding,stride,dilation", [
    ("same", 0, 1, 1), ("valid", 0, 2, 1), ("pad", 2, 1, 2), ("same", 0, 3, 1)])
def test_conv1d(pad_mode, padding, stride, dilation):
    layer = nn.Conv1d(4, 6, 3, stride, pad_mode, padding, dilation, group=2, has_bias=True)
    assert layer.weight.shape == (6, 2, 1, 3)
    x = RNG.standard_normal((2, 4, 9))
    w = layer.weight.asnumpy().astype(np.float64)
    if pad_mode == "same":
        out = -(-9 // stride)
        need = max((out - 1) * stride + (3 - 1) * dilation + 1 - 9, 0)
        pads = (need // 2, need - need // 2)
    else:
        pads = (padding, padding)
    ref = np_conv1d(x, w, stride, pads, dilation, 2) + layer.bias.asnumpy()[None, :, None]
    assert_close(layer(Tensor(x.astype(np.float32))), ref, ms.float32, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", [
    dict(kernel_size=3, stride=2, pad_mode="same"),
    dict(kernel_size=3, stride=2, pad_mode="valid", has_bias=True),
    dict(kernel_size=1, stride=2, pad_mode="valid"),
    dict(kernel_size=(3, 2), stride=(2, 1), pad_mode="pad", padding=(1, 0, 1, 1)),
    dict(kernel_size=3, stride=1, pad_mode="same", dilation=2, group=2),
], ids=["same", "valid", "valid-k1", "pad", "dilation-groups"])
def test_conv2d_transpose(case):
    layer = nn.Conv2dTranspose(4, 6, **case)
    x = RNG.standard_normal((2, 4, 3, 4))
    w = layer.weight.asnumpy().astype(np.float64)
    k = layer.kernel_size
    s, d = layer.stride, layer.dilation
    spans = [k[i] + (k[i] - 1) * (d[i] - 1) for i in range(2)]
    mode = case["pad_mode"]
    if mode == "same":
        out = (3 * s[0], 4 * s[1])
        pads = []
        for size, span, st in zip(out, spans, s):
            need = max((-(-size // st) - 1) * st + span - size, 0)
            pads += [need // 2, need - need // 2]
    elif mode == "valid":
        out = tuple(n * st + max(span - st, 0) for n, span, st in zip((3, 4), spans, s))
        pads = [0, 0, 0, 0]
    else:
        p = case["padding"]
        out = (3 * s[0] - p[0] - p[1] + spans[0] - s[0], 4 * s[1] - p[2] - p[3] + spans[1] - s[1])
        pads = list(p)
    ref = np_conv_transpose2d(x, w, s, pads, d, out, layer.group)
    if layer.has_bias:
        ref = ref + layer.bias.asnumpy()[None, :, None, None]
    got = layer(Tensor(x.astype(np.float32)))
    assert got.shape == ref.shape
    assert_close(got, ref, ms.float32, rtol=1e-4, atol=1e-5)


def test_output_padding_appends_zeros_after_the_bias():
    layer = nn.Conv2dTranspose(2, 3, 3, 2, "pad", 1, output_padding=1, has_bias=True)
    x = Tensor(RNG.standard_normal((1, 2, 3, 3)).astype(np.float32))
    y = layer(x).asnumpy()
    assert y.shape == (1, 3, 6, 6)
    np.testing.assert_array_equal(y[:, :, -1, :], 0)
    np.testing.assert_array_equal(y[:, :, :, -1], 0)
    with pytest.raises(ValueError, match="output_padding needs pad_mode='pad'"):
        nn.Conv2dTranspose(2, 3, 3, 2, output_padding=1)


def _check_linear_grad(fn, x):
    """The layers are linear in x and compute in float32 (oneDNN), so a central difference
    with a large step is exact up to float32 rounding (as test_grad_conv does)."""
    out = fn(Tensor(x))
    weight = RNG.uniform(0.5, 1.5, out.shape)
    got = ms.grad(lambda t: (fn(t) * Tensor(weight.astype(np.float32))).sum())(Tensor(x))
    want = numeric_grads(fn, [x.astype(np.float32)], weight, eps=0.5)[0]
    assert_close(got, want, ms.float32, rtol=1e-4, atol=1e-4)


def test_conv1d_transpose_and_gradients():
    layer = nn.Conv1dTranspose(3, 2, 3, 2, has_bias=True)
    assert layer.weight.shape == (3, 2, 1, 3)
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    assert layer(Tensor(x)).shape == (2, 2, 8)
    _check_linear_grad(layer, x)
    _check_linear_grad(nn.Conv1d(3, 2, 3, 2, "pad", 1, has_bias=True), x)
    _check_linear_grad(nn.Conv2dTranspose(3, 2, 3, 2, "pad", 1, output_padding=1),
                       RNG.standard_normal((1, 3, 3, 3)).astype(np.float32))
    w_grad = ms.grad(lambda t: layer(t).sum(), grad_position=None,
                     weights=layer.trainable_params())(Tensor(x))
    assert w_grad[0].shape == (3, 2, 1, 3) and np.isfinite(w_grad[0].asnumpy()).all()


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.up = nn.Conv2dTranspose(2, 3, 2, 2)
        self.conv = nn.Conv1d(3, 2, 3)
        self.fc = nn.Linear(8, 4)

    def construct(self, x):
        y = self.up(x)                       # (N, 3, 8, 8)
        y = self.conv(y.reshape(y.shape[0], 3, -1))
        return self.fc(y.reshape(y.shape[0], -1, 8))


def test_graph_mode_matches_pynative():
    net = _Net()
    x = Tensor(RNG.standard_normal((2, 2, 4, 4)).astype(np.float32))
    eager = net(x)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        graph = net(x)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert_close(graph, eager.asnumpy(), ms.float32, rtol=1e-5, atol=1e-6)


def np_conv3d(x, w, stride, pads, dilation, groups=1):
    x = np.pad(x, ((0, 0), (0, 0), pads[0:2], pads[2:4], pads[4:6]))
    n, c, d, h, wd = x.shape
    o, cg, kd, kh, kw = w.shape
    outs = [(size - dl * (k - 1) - 1) // s + 1
            for size, k, s, dl in zip((d, h, wd), (kd, kh, kw), stride, dilation)]
    y = np.zeros((n, o) + tuple(outs))
    og = o // groups
    for g in range(groups):
        for a in range(kd):
            for b in range(kh):
                for e in range(kw):
                    patch = x[:, g * cg:(g + 1) * cg,
                              a * dilation[0]:a * dilation[0] + (outs[0] - 1) * stride[0] + 1:
                              stride[0],
                              b * dilation[1]:b * dilation[1] + (outs[1] - 1) * stride[1] + 1:
                              stride[1],
                              e * dilation[2]:e * dilation[2] + (outs[2] - 1) * stride[2] + 1:
                              stride[2]]
                    y[:, g * og:(g + 1) * og] += np.einsum(
                        "ncdhw,oc->nodhw", patch, w[g * og:(g + 1) * og, :, a, b, e])
    return y


@pytest.mark.parametrize("case,pads", [
    (dict(kernel_size=(3, 2, 3), stride=2, pad_mode="valid", has_bias=True), (0,) * 6),
    (dict(kernel_size=3, pad_mode="pad", padding=(1, 0, 2, 1, 0, 1), dilation=(2, 1, 1)),
     (1, 0, 2, 1, 0, 1)),
    (dict(kernel_size=3, group=2), (1, 1, 1, 1, 1, 1)),
], ids=["valid-stride", "pad-dilation", "same-groups"])
def test_conv3d(case, pads):
    layer = nn.Conv3d(4, 6, **case)
    x = RNG.standard_normal((2, 4, 5, 6, 5))
    w = layer.weight.asnumpy().astype(np.float64)
    ref = np_conv3d(x, w, layer.stride, pads, layer.dilation, layer.group)
    if layer.has_bias:
        ref = ref + layer.bias.asnumpy()[None, :, None, None, None]
    assert_close(layer(Tensor(x.astype(np.float32))), ref, ms.float32, rtol=1e-4, atol=1e-4)


def test_conv3d_gradient_and_graph_mode():
    layer = nn.Conv3d(2, 3, 2, 1, "pad", 1, has_bias=True)
    x = RNG.standard_normal((1, 2, 3, 3, 3)).astype(np.float32)
    _check_linear_grad(layer, x)
    eager = layer(Tensor(x))
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        graph = layer(Tensor(x))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert_close(graph, eager.asnumpy(), ms.float32, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="Conv3d: padding must be 0 unless pad_mode is 'pad'"):
        nn.Conv3d(2, 3, 2, padding=1)


def np_conv_transpose3d_full(x, w, stride, dilation):
    """The uncropped transposed convolution: each input voxel adds x * w at stride * position
    + dilation * kernel offset."""
    n, cin, d, h, wd = x.shape
    _, cout, kd, kh, kw = w.shape
    full = [(s - 1) * st + dl * (k - 1) + 1 for s, st, dl, k in
            zip((d, h, wd), stride, dilation, (kd, kh, kw))]
    y = np.zeros((n, cout) + tuple(full))
    for a in range(kd):
        for b in range(kh):
            for e in range(kw):
                contrib = np.einsum("ncdhw,co->nodhw", x, w[:, :, a, b, e])
                y[:, :, a * dilation[0]:a * dilation[0] + (d - 1) * stride[0] + 1:stride[0],
                  b * dilation[1]:b * dilation[1] + (h - 1) * stride[1] + 1:stride[1],
                  e * dilation[2]:e * dilation[2] + (wd - 1) * stride[2] + 1:stride[2]] += contrib
    return y


def test_conv3d_transpose_pad_mode_matches_the_scatter_reference():
    layer = nn.Conv3dTranspose(4, 6, (3, 2, 3), (2, 1, 2), "pad", (1, 0, 1, 1, 0, 1),
                               output_padding=(1, 0, 1), has_bias=True)
    x = RNG.standard_normal((2, 4, 3, 4, 3))
    full = np_conv_transpose3d_full(x, layer.weight.asnumpy().astype(np.float64),
                                    layer.stride, layer.dilation)
    full = np.pad(full, ((0, 0), (0, 0), (0, 1), (0, 0), (0, 1)))   # room for output_padding
    ref = full[:, :, 1:1 + (7 - 1 + 1), 1:1 + (5 - 2), 0:0 + (7 - 1 + 1)]
    ref = ref + layer.bias.asnumpy()[None, :, None, None, None]
    got = layer(Tensor(x.astype(np.float32)))
    assert got.shape == ref.shape == (2, 6, 7, 3, 7)
    assert_close(got, ref, ms.float32, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pad_mode,size", [("same", (6, 8, 6)), ("valid", (7, 9, 7))])
def test_conv3d_transpose_same_and_valid_sizes(pad_mode, size):
    layer = nn.Conv3dTranspose(2, 3, 3, 2, pad_mode)
    x = RNG.standard_normal((1, 2, 3, 4, 3)).astype(np.float32)
    full = np_conv_transpose3d_full(x.astype(np.float64), layer.weight.asnumpy(), (2, 2, 2),
                                    (1, 1, 1))                       # (7, 9, 7)
    if pad_mode == "same":
        ref = full[:, :, 0:6, 0:8, 0:6]                              # one extra, after
    else:
        ref = full
    got = layer(Tensor(x))
    assert got.shape[2:] == size
    assert_close(got, ref, ms.float32, rtol=1e-4, atol=1e-4)
    _check_linear_grad(layer, x)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        graph = layer(Tensor(x))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert_close(graph, got.asnumpy(), ms.float32, rtol=1e-5, atol=1e-6)
