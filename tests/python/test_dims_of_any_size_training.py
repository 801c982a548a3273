"""Training steps compiled once for inputs of any batch and length (input_signature with None),
checked against the same step in PyNative for several sizes: the loss and every parameter and
optimizer state after the update."""
import numpy as np
import pytest

import kiln as ms
from kiln import nn, ops

IDS = (ms.Tensor(shape=[None, None], dtype=ms.int32), ms.Tensor(shape=[None], dtype=ms.int32))
TOKEN_SIZES = [(4, 7), (3, 5), (6, 9)]


class TextNet(nn.Cell):
    """Embedding, a sequence layer, layer norm and a classifier over the mean of the sequence."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.emb = nn.Embedding(50, 16)
        self.seq = {
            "lstm": lambda: nn.LSTM(16, 16, batch_first=True),
            "gru": lambda: nn.GRU(16, 16, batch_first=True, bidirectional=True),
            "encoder": lambda: nn.TransformerEncoderLayer(16, 2, 32, batch_first=True,
                                                          dropout=0.0),
            "attention": lambda: nn.MultiheadAttention(16, 2, batch_first=True),
            "conv1d": lambda: nn.Conv1d(16, 16, 3, pad_mode="same"),
        }[kind]()
        width = 32 if kind == "gru" else 16
        self.norm = nn.LayerNorm((width,))
        self.out = nn.Dense(width, 5)

    def construct(self, ids):
        h = self.emb(ids)
        if self.kind in ("lstm", "gru"):
            h, _ = self.seq(h)
        elif self.kind == "conv1d":
            h = self.seq(h.transpose(0, 2, 1)).transpose(0, 2, 1)
        elif self.kind == "attention":
            h, _ = self.seq(h, h, h)
        else:
            h = self.seq(h)
        return self.out(self.norm(h).mean(axis=1))


class ImageNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, pad_mode="same")
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2, 2)
        self.c2 = nn.Conv2d(8, 8, 3, pad_mode="valid")
        self.fc = nn.Dense(8, 4)

    def construct(self, x):
        h = ops.relu(self.c2(self.pool(ops.relu(self.bn(self.c1(x))))))
        return self.fc(h.mean(axis=(2, 3)))


def _step_of(net, optimizer):
    loss_fn = nn.CrossEntropyLoss()

    def forward(x, y):
        return loss_fn(net(x), y)

    grad_fn = ms.value_and_grad(forward, None, optimizer.parameters)

    def step(x, y):
        loss, grads = grad_fn(x, y)
        optimizer(grads)
        return loss

    return step


def _check_against_pynative(net, optimizer, signature, batches):
    step = _step_of(net, optimizer)
    compiled = ms.jit(step, input_signature=signature)
    state = list({id(p): p for p in list(net.get_parameters()) +
                  list(optimizer.get_parameters())}.values())
    before = ms.get_jit_stats()["compiles"]
    for x, y in batches:
        start = [p.asnumpy().copy() for p in state]
        eager_loss = step(x, y).asnumpy()
        eager_state = [p.asnumpy().copy() for p in state]
        for p, value in zip(state, start):
            p.set_data(ms.Tensor(value))
        np.testing.assert_allclose(compiled(x, y).asnumpy(), eager_loss, rtol=1e-5)
        for p, want in zip(state, eager_state):
            np.testing.assert_allclose(p.asnumpy(), want, rtol=1e-4, atol=1e-6, err_msg=p.name)
    assert ms.get_jit_stats()["compiles"] - before == 1  # one graph for every size


@pytest.mark.parametrize("kind", ["lstm", "gru", "encoder", "attention", "conv1d"])
def test_a_text_model_trains_on_batches_of_any_size_and_length(kind):
    ms.set_seed(0)
    net = TextNet(kind)
    optimizer = nn.Adam(net.trainable_params(), 0.01)
    rng = np.random.default_rng(0)
    batches = [(ms.Tensor(rng.integers(0, 50, (b, t)).astype(np.int32)),
                ms.Tensor(rng.integers(0, 5, b).astype(np.int32))) for b, t in TOKEN_SIZES]
    _check_against_pynative(net, optimizer, IDS, batches)


@pytest.mark.parametrize("signature,sizes", [
    ([None, 3, 12, 12], [(4, 3, 12, 12), (2, 3, 12, 12)]),
    ([None, 3, None, None], [(4, 3, 12, 12), (2, 3, 10, 14)]),
], ids=["any batch", "any batch and image size"])
def test_a_convolutional_model_trains_on_batches_of_any_size(signature, sizes):
    ms.set_seed(0)
    net = ImageNet()
    optimizer = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    rng = np.random.default_rng(0)
    batches = [(ms.Tensor(rng.standard_normal(s).astype(np.float32)),
                ms.Tensor(rng.integers(0, 4, s[0]).astype(np.int32))) for s in sizes]
    _check_against_pynative(net, optimizer, (ms.Tensor(shape=signature, dtype=ms.float32),
                                             ms.Tensor(shape=[None], dtype=ms.int32)), batches)


def masked_attention(x, pad):
    attention = _ATTENTION[0]
    out, weights = attention(x, x, x, key_padding_mask=pad)
    return out.sum() + weights.sum()


_ATTENTION = []


def test_attention_with_a_padding_mask_over_any_batch_and_length():
    # A key padding mask of the batch's runtime shape broadcasts over heads and queries.
    ms.set_seed(0)
    _ATTENTION[:] = [nn.MultiheadAttention(8, 2, batch_first=True)]
    fn = ms.jit(masked_attention, input_signature=(
        ms.Tensor(shape=[None, None, 8], dtype=ms.float32),
        ms.Tensor(shape=[None, None], dtype=ms.bool_)))
    rng = np.random.default_rng(1)
    for b, t in [(2, 5), (3, 4)]:
        x = ms.Tensor(rng.standard_normal((b, t, 8)).astype(np.float32))
        pad = np.zeros((b, t), bool)
        pad[0, -2:] = True
        want = masked_attention(x, ms.Tensor(pad)).asnumpy()
        np.testing.assert_allclose(fn(x, ms.Tensor(pad)).asnumpy(), want, rtol=1e-5)


_LOSS = []


def loss_of_batch(x, t):
    name, loss = _LOSS
    if name == "KLDivLoss":
        return loss(ops.log_softmax(x, 1), ops.softmax(t, 1))
    return loss(x, t)


@pytest.mark.parametrize("name,make", [
    ("MSELoss", nn.MSELoss), ("L1Loss", nn.L1Loss),
    ("KLDivLoss", lambda: nn.KLDivLoss(reduction="batchmean")),
])
def test_losses_over_a_batch_of_any_size_and_their_gradients(name, make):
    # Before: MSELoss/L1Loss refused (-1, 5) against (-1, 5) as not broadcastable, and
    # 'batchmean' divided by the placeholder's batch size -1 (a silent wrong loss).
    _LOSS[:] = [name, make()]
    signature = (ms.Tensor(shape=[None, 5], dtype=ms.float32),) * 2
    step = ms.value_and_grad(loss_of_batch)
    compiled = ms.jit(step, input_signature=signature)
    rng = np.random.default_rng(0)
    for b in (3, 6):
        x, t = (ms.Tensor(rng.standard_normal((b, 5)).astype(np.float32)) for _ in range(2))
        (want_loss, want_grad), (loss, grad) = step(x, t), compiled(x, t)
        np.testing.assert_allclose(loss.asnumpy(), want_loss.asnumpy(), rtol=1e-5)
        np.testing.assert_allclose(grad.asnumpy(), want_grad.asnumpy(), rtol=1e-5, atol=1e-7)


_CELL = []


def squared_sum_through_cell(x):
    return (_CELL[0](x) ** 2).sum()


@pytest.mark.parametrize("make,sizes", [
    (lambda: nn.GroupNorm(2, 4), [(2, 4, 5, 6), (3, 4, 3, 3)]),
    (lambda: nn.PixelShuffle(2), [(2, 8, 3, 3), (1, 8, 2, 4)]),
    (lambda: nn.AdaptiveAvgPool2d((1, 1)), [(2, 4, 6, 6), (1, 4, 8, 5)]),
    (lambda: nn.AdaptiveMaxPool2d((1, 1)), [(2, 4, 6, 6), (1, 4, 8, 5)]),
    (lambda: nn.Conv2d(4, 4, 3, stride=1, pad_mode="same"), [(2, 4, 6, 6), (1, 4, 8, 5)]),
    (lambda: nn.Conv2dTranspose(4, 3, 2, stride=2, has_bias=True), [(2, 4, 3, 3), (5, 4, 3, 3)]),
], ids=["GroupNorm", "PixelShuffle", "AdaptiveAvgPool2d 1x1", "AdaptiveMaxPool2d 1x1",
        "Conv2d same", "Conv2dTranspose"])
def test_image_layers_over_any_batch_and_image_size(make, sizes):
    ms.set_seed(0)
    _CELL[:] = [make()]
    params = _CELL[0].trainable_params()
    step = ms.value_and_grad(squared_sum_through_cell, None if params else 0,
                             params if params else None)
    # Conv2dTranspose's output size comes from the input's: only its batch is of any size.
    spatial = sizes[0][2:] if len({s[2:] for s in sizes}) == 1 else (None, None)
    compiled = ms.jit(step, input_signature=(ms.Tensor(shape=[None, sizes[0][1], *spatial],
                                                       dtype=ms.float32),))
    rng = np.random.default_rng(0)
    for s in sizes:
        x = ms.Tensor(rng.standard_normal(s).astype(np.float32))
        (want_loss, want_grads), (loss, grads) = step(x), compiled(x)
        np.testing.assert_allclose(loss.asnumpy(), want_loss.asnumpy(), rtol=1e-5)
        if not isinstance(grads, tuple):  # the gradient of x alone (no parameters)
            grads, want_grads = (grads,), (want_grads,)
        for got, want in zip(grads, want_grads):
            np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-4, atol=1e-5)


def strided_same_conv(x):
    return _CELL[0](x)


def test_same_padding_with_a_stride_over_any_image_size_says_so():
    # Its padding depends on the size (before: computed from -1, a silent wrong output).
    _CELL[:] = [nn.Conv2d(3, 4, 3, stride=2, pad_mode="same")]
    fn = ms.jit(strided_same_conv, input_signature=(ms.Tensor(shape=[None, 3, None, None],
                                                              dtype=ms.float32),))
    with pytest.raises(ValueError, match="pad_mode 'same' with stride 2"):
        fn(ms.Tensor(np.ones((1, 3, 8, 8), np.float32)))
