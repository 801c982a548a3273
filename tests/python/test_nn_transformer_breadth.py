"""MultiheadAttention and the Transformer layers vs a NumPy reference of MindSpore's formulas
(masks, bias_kv, zero attention, batch_first), finite-difference gradients, parameter names,
and PyNative vs GRAPH_MODE."""
import numpy as np
import pytest
from gradcheck import check_grad
from helpers import assert_close

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(21)


def np_mha(mha, q, k, v, kpm=None, mask=None, average=True):
    """(L, N, E) attention with the module's weights, MindSpore's rules."""
    e, h = mha.embed_dim, mha.num_heads
    hd = e // h
    w = mha.in_proj_weight.asnumpy().astype(np.float64)
    b = mha.in_proj_bias.asnumpy().astype(np.float64)
    qp, kp, vp = (x @ w[i * e:(i + 1) * e].T + b[i * e:(i + 1) * e]
                  for i, x in enumerate((q, k, v)))
    lq, n, _ = q.shape
    s = k.shape[0]

    def split(t, length):
        return t.reshape(length, n, h, hd).transpose(1, 2, 0, 3)

    scores = split(qp, lq) @ split(kp, s).transpose(0, 1, 3, 2) / np.sqrt(hd)
    add = np.zeros((n, h, lq, s))
    if mask is not None:
        add = add + (np.where(mask, -np.inf, 0.0) if mask.dtype == bool else mask)
    if kpm is not None:
        add = add + np.where(kpm, -np.inf, 0.0)[:, None, None, :]
    scores = scores + add
    attn = np.exp(scores - scores.max(-1, keepdims=True))
    attn /= attn.sum(-1, keepdims=True)
    out = (attn @ split(vp, s)).transpose(2, 0, 1, 3).reshape(lq, n, e)
    out = out @ mha.out_proj.weight.asnumpy().T + mha.out_proj.bias.asnumpy()
    return out, attn.mean(1) if average else attn


def _mha(**kw):
    ms.set_seed(1)
    return nn.MultiheadAttention(8, 2, **kw)


def test_parameter_names_and_shapes():
    mha = _mha()
    assert [(p.name, p.shape) for p in mha.trainable_params()] == [
        ("in_proj_weight", (24, 8)), ("in_proj_bias", (24,)), ("out_proj.weight", (8, 8)),
        ("out_proj.bias", (8,))]
    separate = nn.MultiheadAttention(8, 2, kdim=6, vdim=4, add_bias_kv=True)
    assert [p.name for p in separate.trainable_params()][:3] == [
        "q_proj_weight", "k_proj_weight", "v_proj_weight"]
    assert separate.bias_k.shape == (1, 1, 8)


@pytest.mark.parametrize("masks", ["none", "bool", "float", "padding", "both"])
def test_attention_matches_numpy(masks):
    mha = _mha()
    q, kv = RNG.standard_normal((5, 3, 8)), RNG.standard_normal((6, 3, 8))
    kpm = np.zeros((3, 6), bool)
    kpm[0, 4:] = True
    mask = {"bool": np.triu(np.ones((5, 6), bool), 2),
            "float": RNG.standard_normal((5, 6)).astype(np.float32),
            "both": np.triu(np.ones((5, 6), bool), 3)}.get(masks)
    use_kpm = masks in ("padding", "both")
    args = dict(key_padding_mask=Tensor(kpm) if use_kpm else None,
                attn_mask=None if mask is None else Tensor(mask))
    q32, kv32 = Tensor(q.astype(np.float32)), Tensor(kv.astype(np.float32))
    out, weights = mha(q32, kv32, kv32, **args)
    ref_out, ref_w = np_mha(mha, q, kv, kv, kpm if use_kpm else None, mask)
    assert_close(out, ref_out, ms.float32, rtol=1e-4, atol=1e-5)
    assert_close(weights, ref_w, ms.float32, rtol=1e-4, atol=1e-5)


def test_per_head_weights_batch_first_and_unbatched():
    mha = _mha()
    q = RNG.standard_normal((5, 2, 8))
    _, per_head = mha(Tensor(q.astype(np.float32)), Tensor(q.astype(np.float32)),
                      Tensor(q.astype(np.float32)), average_attn_weights=False)
    assert_close(per_head, np_mha(mha, q, q, q, average=False)[1], ms.float32, rtol=1e-4,
                 atol=1e-5)
    first = _mha(batch_first=True)
    xb = Tensor(q.transpose(1, 0, 2).astype(np.float32))
    out_b, _ = first(xb, xb, xb)
    assert_close(out_b, np_mha(first, q, q, q)[0].transpose(1, 0, 2), ms.float32, rtol=1e-4,
                 atol=1e-5)
    single = Tensor(q[:, 0].astype(np.float32))
    out1, w1 = mha(single, single, single)
    assert out1.shape == (5, 8) and w1.shape == (5, 5)
    (only,) = mha(single, single, single, need_weights=False)
    assert only.shape == (5, 8)


def test_bias_kv_and_zero_attention_extend_the_keys():
    mha = _mha(add_bias_kv=True, add_zero_attn=True)
    x = Tensor(RNG.standard_normal((4, 2, 8)).astype(np.float32))
    _, weights = mha(x, x, x, key_padding_mask=Tensor(np.zeros((2, 4), bool)))
    assert weights.shape == (2, 4, 6)                 # 4 keys + bias_k + a zero key
    np.testing.assert_allclose(weights.asnumpy().sum(-1), 1.0, rtol=1e-5)


def test_attention_gradients_by_finite_differences():
    mha = nn.MultiheadAttention(4, 2, dtype=ms.float64)
    mha.out_proj.weight.set_data(Tensor(RNG.standard_normal((4, 4))))
    mask = Tensor(np.triu(np.ones((3, 3), bool), 1))
    check_grad(lambda t: mha(t, t, t, attn_mask=mask)[0], RNG.standard_normal((3, 2, 4)),
               rtol=1e-4, atol=1e-6)


def test_argument_errors():
    with pytest.raises(ValueError, match="embed_dim \\(8\\) must be divisible by num_heads"):
        nn.MultiheadAttention(8, 3)
    mha = _mha()
    x = Tensor(np.zeros((5, 3, 8), np.float32))
    with pytest.raises(ValueError, match="2-D attn_mask must have shape \\(5, 5\\)"):
        mha(x, x, x, attn_mask=Tensor(np.zeros((5, 4), bool)))
    with pytest.raises(ValueError, match="key_padding_mask must have shape \\(3, 5\\)"):
        mha(x, x, x, key_padding_mask=Tensor(np.zeros((3, 4), bool)))
    with pytest.raises(ValueError, match="activation"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


def np_layer_norm(x, eps=1e-5):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_numpy(norm_first):
    ms.set_seed(2)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first)
    x = RNG.standard_normal((5, 3, 8))

    def ff(t):
        d1, d2 = layer.dense1, layer.dense2
        hidden = np.maximum(t @ d1.weight.asnumpy().T + d1.bias.asnumpy(), 0)
        return hidden @ d2.weight.asnumpy().T + d2.bias.asnumpy()

    def sa(t):
        return np_mha(layer.self_attn, t, t, t)[0]

    if norm_first:
        y = x + sa(np_layer_norm(x))
        ref = y + ff(np_layer_norm(y))
    else:
        y = np_layer_norm(x + sa(x))
        ref = np_layer_norm(y + ff(y))
    assert_close(layer(Tensor(x.astype(np.float32))), ref, ms.float32, rtol=1e-4, atol=1e-4)


def test_stacks_copy_layers_with_independent_parameters():
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    enc = nn.TransformerEncoder(layer, 3, nn.LayerNorm((8,)))
    names = [p.name for p in enc.trainable_params()]
    assert names[0] == "layers.0.self_attn.in_proj_weight" and len(set(names)) == len(names)
    assert enc.layers[0].dense1.weight is not enc.layers[1].dense1.weight
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16), 2)
    assert "layers.1.multihead_attn.in_proj_bias" in [p.name for p in dec.trainable_params()]


class _Model(nn.Cell):
    def __init__(self):
        super().__init__()
        self.net = nn.Transformer(8, 2, 2, 1, 16, dropout=0.0)

    def construct(self, src, tgt, mask):
        return self.net(src, tgt, tgt_mask=mask)


def test_transformer_in_graph_mode_matches_pynative_and_trains():
    ms.set_seed(3)
    model = _Model()
    src = Tensor(RNG.standard_normal((6, 2, 8)).astype(np.float32))
    tgt = Tensor(RNG.standard_normal((4, 2, 8)).astype(np.float32))
    mask = Tensor(np.triu(np.ones((4, 4), bool), 1))
    eager = model(src, tgt, mask)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        graph = model(src, tgt, mask)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert_close(graph, eager.asnumpy(), ms.float32, rtol=1e-4, atol=1e-5)
    opt = nn.Adam(model.trainable_params(), 0.01)
    grad_fn = ms.value_and_grad(lambda a, b, m: ops.mean(model(a, b, m) ** 2), None,
                                opt.parameters)
    first, grads = grad_fn(src, tgt, mask)
    opt(grads)
    for _ in range(5):
        loss, grads = grad_fn(src, tgt, mask)
        opt(grads)
    assert float(loss.asnumpy()) < float(first.asnumpy())
