"""kiln.nn layers: forward results against NumPy references, modes, argument checking."""
import math

import numpy as np
import pytest
from helpers import assert_close

import kiln as ms
from kiln import Tensor, nn

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ---- NumPy references ----

def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_pad(x, pads, value=0.0):
    t, b, l, r = pads
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=value)


def np_conv2d(x, w, bias, stride, pads, dilation=(1, 1)):
    x = np_pad(x, pads)
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    sh, sw = stride
    dh, dw = dilation
    ho = (h - (kh - 1) * dh - 1) // sh + 1
    wo = (wd - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, o, ho, wo), np.float64)
    for i in range(ho):
        for j in range(wo):
            rows = slice(i * sh, i * sh + (kh - 1) * dh + 1, dh)
            cols = slice(j * sw, j * sw + (kw - 1) * dw + 1, dw)
            patch = x[:, :, rows, cols]
            out[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out


def np_pool(x, k, s, pads, op, value=0.0):
    x = np_pad(x, pads, value)
    n, c, h, w = x.shape
    ho, wo = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    out = np.zeros((n, c, ho, wo))
    for i in range(ho):
        for j in range(wo):
            out[:, :, i, j] = op(x[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]],
                                 axis=(2, 3))
    return out


# ---- Dense / Flatten / activations ----

def test_dense_matches_numpy():
    d = nn.Dense(5, 3)
    assert d.weight.shape == (3, 5) and d.bias.shape == (3,)
    x = rand(4, 5)
    ref = x @ d.weight.asnumpy().T + d.bias.asnumpy()
    assert_close(d(Tensor(x)), ref, rtol=1e-5, atol=1e-5)


def test_dense_options_and_3d_input():
    w = rand(3, 5)
    d = nn.Dense(5, 3, weight_init=Tensor(w), has_bias=False, activation="relu")
    assert d.bias is None and [p.name for p in d.get_parameters()] == ["weight"]
    x = rand(2, 4, 5)
    assert_close(d(Tensor(x)), np.maximum(x @ w.T, 0), rtol=1e-5, atol=1e-5)


def test_dense_errors_name_layer_and_shapes():
    with pytest.raises(ValueError, match=r"Dense.*in_channels=5.*\(4, 6\)"):
        nn.Dense(5, 3)(Tensor(rand(4, 6)))
    with pytest.raises(TypeError, match="Dense: in_channels"):
        nn.Dense(5.0, 3)
    with pytest.raises(ValueError, match="Dense: out_channels"):
        nn.Dense(5, 0)
    with pytest.raises(ValueError, match=r"Dense: weight_init has shape \(5, 3\)"):
        nn.Dense(5, 3, weight_init=Tensor(rand(5, 3)))


def test_flatten():
    x = rand(2, 3, 4, 5)
    assert_close(nn.Flatten()(Tensor(x)), x.reshape(2, -1))
    assert_close(nn.Flatten(start_dim=2)(Tensor(x)), x.reshape(2, 3, 20))


@pytest.mark.parametrize("layer,ref", [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.GELU(),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.GELU(approximate=False),
     lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
    (nn.Softmax(), np_softmax),
    (nn.Softmax(axis=0), lambda x: np_softmax(x, 0)),
    (nn.LogSoftmax(), lambda x: np.log(np_softmax(x))),
])
def test_activations(layer, ref):
    x = rand(4, 6) * 3
    assert_close(layer(Tensor(x)), ref(x.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_softmax_is_stable_for_large_inputs():
    x = np.array([[1000.0, 1001.0, 1002.0]], np.float32)
    assert_close(nn.Softmax()(Tensor(x)), np_softmax(x.astype(np.float64)), rtol=1e-5)


# ---- Dropout ----

def test_dropout_is_identity_in_eval_mode():
    x = Tensor(rand(10, 10))
    d = nn.Dropout(p=0.5)
    assert d.training is False
    assert_close(d(x), x.asnumpy())


def test_dropout_in_training_mode():
    ms.set_seed(0)
    d = nn.Dropout(p=0.25).set_train()
    x = np.ones((200, 200), np.float32)
    y = d(Tensor(x)).asnumpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)


def test_dropout_seed_reproducibility():
    d = nn.Dropout(p=0.5).set_train()
    x = Tensor(np.ones((20, 20), np.float32))
    ms.set_seed(5)
    a = d(x).asnumpy().copy()
    ms.set_seed(5)
    b = d(x).asnumpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, d(x).asnumpy())


def test_dropout_arguments():
    assert nn.Dropout().p == 0.5
    assert nn.Dropout(0.8).p == pytest.approx(0.2)    # MindSpore's positional keep_prob
    assert nn.Dropout(p=0.1).p == 0.1
    with pytest.raises(ValueError, match="Dropout"):
        nn.Dropout(p=1.5)
    with pytest.raises(TypeError, match="Dropout"):
        nn.Dropout(p="a")
    no_drop = nn.Dropout(p=0.0).set_train()
    assert no_drop(Tensor(np.ones(3, np.float32))).asnumpy().tolist() == [1, 1, 1]


# ---- Conv2d ----

@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=3),                                     # pad_mode same (default)
    dict(kernel_size=3, stride=2),
    dict(kernel_size=(2, 3), stride=(2, 1), pad_mode="same"),
    dict(kernel_size=5, pad_mode="valid"),
    dict(kernel_size=3, pad_mode="pad", padding=1),
    dict(kernel_size=3, pad_mode="pad", padding=(1, 0, 2, 1)),
    dict(kernel_size=3, dilation=2, pad_mode="valid"),
    dict(kernel_size=3, has_bias=True),
])
def test_conv2d_matches_numpy(kwargs):
    conv = nn.Conv2d(3, 4, **kwargs)
    x = rand(2, 3, 9, 8)
    k = conv.kernel_size
    s = conv.stride
    d = conv.dilation
    if conv.pad_mode == "same":
        def same(size, kk, ss, dd):
            out = -(-size // ss)
            total = max((out - 1) * ss + (kk - 1) * dd + 1 - size, 0)
            return total // 2, total - total // 2
        pads = same(9, k[0], s[0], d[0]) + same(8, k[1], s[1], d[1])
    elif conv.pad_mode == "valid":
        pads = (0, 0, 0, 0)
    else:
        pads = conv.padding
    bias = conv.bias.asnumpy() if conv.bias is not None else None
    ref = np_conv2d(x, conv.weight.asnumpy(), bias, s, pads, d)
    y = conv(Tensor(x))
    if conv.pad_mode == "same":
        assert y.shape[2:] == (math.ceil(9 / s[0]), math.ceil(8 / s[1]))
    assert_close(y, ref, rtol=1e-4, atol=1e-4)


def test_conv2d_defaults_and_errors():
    conv = nn.Conv2d(1, 6, 5)
    assert conv.pad_mode == "same" and conv.has_bias is False and conv.bias is None
    assert conv.weight.shape == (6, 1, 5, 5)
    with pytest.raises(ValueError, match=r"Conv2d.*\(N, 1, H, W\).*\(2, 3, 8, 8\)"):
        conv(Tensor(rand(2, 3, 8, 8)))
    with pytest.raises(ValueError, match="Conv2d: padding must be 0"):
        nn.Conv2d(1, 2, 3, padding=1)
    with pytest.raises(ValueError, match="Conv2d: pad_mode"):
        nn.Conv2d(1, 2, 3, pad_mode="full")
    with pytest.raises(ValueError, match="Conv2d: kernel_size must be an int or a tuple of 2"):
        nn.Conv2d(1, 2, (3, 3, 3))
    with pytest.raises(TypeError, match="Conv2d: kernel_size"):
        nn.Conv2d(1, 2, (3, 3.0))


# ---- pooling ----

def test_max_pool2d():
    x = rand(2, 3, 8, 7)
    assert_close(nn.MaxPool2d(kernel_size=2, stride=2)(Tensor(x)),
                 np_pool(x, (2, 2), (2, 2), (0, 0, 0, 0), np.max))
    assert_close(nn.MaxPool2d(3, 1)(Tensor(x)), np_pool(x, (3, 3), (1, 1), (0, 0, 0, 0), np.max))
    # "same": output ceil(H / stride); padding never wins the max
    y = nn.MaxPool2d(kernel_size=2, stride=2, pad_mode="same")(Tensor(-np.abs(x) - 1))
    assert y.shape == (2, 3, 4, 4)
    assert_close(y, np_pool(-np.abs(x) - 1, (2, 2), (2, 2), (0, 0, 0, 1), np.max, -np.inf))


def test_avg_pool2d():
    x = rand(2, 3, 8, 8)
    assert_close(nn.AvgPool2d(kernel_size=2, stride=2)(Tensor(x)),
                 np_pool(x, (2, 2), (2, 2), (0, 0, 0, 0), np.mean), rtol=1e-5, atol=1e-6)
    y = nn.AvgPool2d(kernel_size=3, stride=1, pad_mode="pad", padding=1)(Tensor(x))
    assert_close(y, np_pool(x, (3, 3), (1, 1), (1, 1, 1, 1), np.mean), rtol=1e-5, atol=1e-6)


def test_avg_pool2d_same_excludes_padding():
    x = np.ones((1, 1, 3, 3), np.float32)
    y = nn.AvgPool2d(kernel_size=2, stride=2, pad_mode="same")(Tensor(x))
    assert_close(y, np.ones((1, 1, 2, 2)))


def test_pool_defaults_and_3d_input():
    p = nn.MaxPool2d()
    assert p.kernel_size == (1, 1) and p.stride == (1, 1) and p.pad_mode == "valid"
    x = rand(3, 4, 4)
    assert nn.MaxPool2d(2, 2)(Tensor(x)).shape == (3, 2, 2)
    with pytest.raises(ValueError, match="MaxPool2d.*shape"):
        nn.MaxPool2d(2, 2)(Tensor(rand(4, 4)))


# ---- normalisation ----

def test_batch_norm2d_train_and_eval():
    bn = nn.BatchNorm2d(3)
    assert [p.name for p in bn.get_parameters()] == ["moving_mean", "moving_variance",
                                                     "gamma", "beta"]
    x = rand(4, 3, 5, 5) * 2 + 1
    # eval mode (the default): moving statistics (0, 1), nothing updated
    assert_close(bn(Tensor(x)), x / np.sqrt(1 + 1e-5), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(bn.moving_mean.asnumpy(), np.zeros(3))
    bn.set_train()
    y = bn(Tensor(x))
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    ref = (x - mean.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-5)
    assert_close(y, ref, rtol=1e-4, atol=1e-4)
    n = 4 * 5 * 5
    assert_close(bn.moving_mean, 0.1 * mean, rtol=1e-5, atol=1e-6)
    assert_close(bn.moving_variance, 0.9 + 0.1 * var * n / (n - 1), rtol=1e-5, atol=1e-6)
    bn.set_train(False)
    mm, mv = bn.moving_mean.asnumpy(), bn.moving_variance.asnumpy()
    ref = (x - mm.reshape(1, 3, 1, 1)) / np.sqrt(mv.reshape(1, 3, 1, 1) + 1e-5)
    assert_close(bn(Tensor(x)), ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(bn.moving_mean.asnumpy(), mm)


def test_batch_norm1d_with_affine_params():
    bn = nn.BatchNorm1d(4, gamma_init="normal", beta_init="normal", use_batch_statistics=True)
    x = rand(8, 4)
    g, b = bn.gamma.asnumpy(), bn.beta.asnumpy()
    ref = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5) * g + b
    assert_close(bn(Tensor(x)), ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"BatchNorm1d.*4 channels.*\(8, 5\)"):
        bn(Tensor(rand(8, 5)))


def test_layer_norm():
    ln = nn.LayerNorm((6,), gamma_init="normal", beta_init="normal")
    x = rand(3, 4, 6)
    g, b = ln.gamma.asnumpy(), ln.beta.asnumpy()
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-7) * g + b
    assert_close(ln(Tensor(x)), ref, rtol=1e-4, atol=1e-4)
    ln2 = nn.LayerNorm((4, 6), begin_norm_axis=1, begin_params_axis=1)
    ref = (x - x.mean((1, 2), keepdims=True)) / np.sqrt(x.var((1, 2), keepdims=True) + 1e-7)
    assert_close(ln2(Tensor(x)), ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"LayerNorm.*\(6,\).*\(3, 5\)"):
        ln(Tensor(rand(3, 5)))


# ---- Embedding ----

def test_embedding():
    emb = nn.Embedding(10, 4)
    assert emb.embedding_table.shape == (10, 4)
    ids = np.array([[1, 2, 3], [9, 0, 1]], np.int32)
    table = emb.embedding_table.asnumpy()
    assert_close(emb(Tensor(ids)), table[ids])
    hot = nn.Embedding(10, 4, use_one_hot=True, embedding_table=Tensor(table))
    assert_close(hot(Tensor(ids)), table[ids], rtol=1e-6)
    padded = nn.Embedding(5, 2, padding_idx=0)
    np.testing.assert_array_equal(padded.embedding_table.asnumpy()[0], [0, 0])
    with pytest.raises(TypeError, match="Embedding: ids must be an integer"):
        emb(Tensor(rand(2, 3)))


@pytest.mark.parametrize("pad_mode", ["valid", "same"])
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_max_pool2d_return_indices_point_into_the_input(pad_mode, mode):
    """Each index is h * W + w of the maximum in the unpadded input plane, also when "same"
    pads asymmetrically (7 wide, stride 2: one column on the right only)."""
    import kiln as ms  # noqa: PLC0415

    x = rand(2, 3, 8, 7)
    pool = nn.MaxPool2d(kernel_size=2, stride=2, pad_mode=pad_mode, return_indices=True)
    if mode == "graph":
        ms.set_context(mode=ms.GRAPH_MODE)
    try:
        y, idx = pool(Tensor(x))
        y3, idx3 = pool(Tensor(x[0]))  # (C, H, W): no batch axis in either output
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    planes = x.reshape(6, -1)
    picked = np.take_along_axis(planes, idx.asnumpy().reshape(6, -1), axis=1)
    np.testing.assert_array_equal(picked.reshape(y.shape), y.asnumpy())
    assert idx.asnumpy().min() >= 0 and idx.asnumpy().max() < 8 * 7
    assert y3.shape == y.shape[1:] and idx3.shape == idx.shape[1:]
    np.testing.assert_array_equal(idx3.asnumpy(), idx.asnumpy()[0])
    with pytest.raises(TypeError, match="return_indices"):
        nn.MaxPool2d(2, return_indices=1)
