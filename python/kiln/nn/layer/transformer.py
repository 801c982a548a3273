"""MultiheadAttention and the Transformer family (encoder/decoder layers and stacks) with
MindSpore 2.x's parameter names, initializers, mask rules and (seq, batch, embed) layout
(batch_first optional). Made of dense products, softmax, layer norm and dropout, so gradients
and Graph mode follow from those."""
import copy
import math

from kiln import ops
from kiln.common import dtype as mstype
from kiln.common.initializer import HeUniform, Uniform, XavierNormal, XavierUniform, initializer
from kiln.common.parameter import Parameter
from kiln.nn import _functional as F
from kiln.nn.cell import Cell
from kiln.nn.layer.activation import GELU, ReLU
from kiln.nn.layer.basic import Dense, Dropout, check_bool, check_int
from kiln.nn.layer.container import CellList
from kiln.nn.layer.normalization import LayerNorm
from kiln.ops.function.array import size_when_run

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer",
           "TransformerEncoder", "TransformerDecoder", "Transformer"]


def _linear(x, weight, bias):
    return F.dense(x, weight, bias)


def _rows(t, start, stop):
    """Rows [start, stop) of a weight (or entries of a bias)."""
    shape = tuple(t.shape)
    return F.slice_nd(t, (start,) + (0,) * (len(shape) - 1), (stop,) + shape[1:],
                      (1,) * len(shape))


def _fits(shape, want):
    """shape == want, where a dimension of any size (-1, in a graph) matches every size."""
    return len(shape) == len(want) and all(s == w or s < 0 or w < 0 for s, w in zip(shape, want))


def _mask_dtype_check(mask, name):
    if mask is not None and mask.dtype != mstype.bool_ and not mask.dtype.is_floating_point:
        raise ValueError(f"MultiheadAttention: {name} only supports bool and floating dtypes, "
                         f"got {mask.dtype}")


def _as_additive(mask, dtype):
    """A bool mask (True = not allowed) as 0 / -inf; a float mask as it is."""
    if mask.dtype == mstype.bool_:
        return ops.where(mask, float("-inf"), ops.zeros_like(mask, dtype=dtype))
    return mask


class MultiheadAttention(Cell):
    """softmax(q k^T / sqrt(head_dim) + mask) v over num_heads heads, then out_proj.

    Parameters as MindSpore's: in_proj_weight (3E, E) and in_proj_bias (3E,) when kdim and vdim
    equal embed_dim, else q/k/v_proj_weight; out_proj a Dense; bias_k/bias_v with
    add_bias_kv. Inputs are (L, N, E) ((N, L, E) with batch_first) or unbatched (L, E);
    attn_mask is (L, S) or (N * num_heads, L, S), key_padding_mask (N, S), each bool (True =
    masked) or float (added). Returns (output, weights averaged over heads unless
    average_attn_weights=False), or (output,) with need_weights=False."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, has_bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False,
                 dtype=mstype.float32):
        super().__init__()
        self.embed_dim = check_int(embed_dim, "MultiheadAttention", "embed_dim")
        self.num_heads = check_int(num_heads, "MultiheadAttention", "num_heads")
        self.kdim = embed_dim if kdim is None else check_int(kdim, "MultiheadAttention", "kdim")
        self.vdim = embed_dim if vdim is None else check_int(vdim, "MultiheadAttention", "vdim")
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by "
                             f"num_heads ({num_heads})")
        self.dropout = float(dropout)
        self.batch_first = check_bool(batch_first, "MultiheadAttention", "batch_first")
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        e = embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(initializer(XavierUniform(), (3 * e, e), dtype),
                                            "in_proj_weight")
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = Parameter(initializer(XavierUniform(), (e, e), dtype),
                                           "q_proj_weight")
            self.k_proj_weight = Parameter(initializer(XavierUniform(), (e, self.kdim), dtype),
                                           "k_proj_weight")
            self.v_proj_weight = Parameter(initializer(XavierUniform(), (e, self.vdim), dtype),
                                           "v_proj_weight")
            self.in_proj_weight = None
        self.in_proj_bias = Parameter(initializer("zeros", (3 * e,), dtype), "in_proj_bias") \
            if has_bias else None
        self.out_proj = Dense(e, e, has_bias=has_bias, weight_init=HeUniform(math.sqrt(5)),
                              dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(initializer(XavierNormal(), (1, 1, e), dtype), "bias_k")
            self.bias_v = Parameter(initializer(XavierNormal(), (1, 1, e), dtype), "bias_v")
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = check_bool(add_zero_attn, "MultiheadAttention", "add_zero_attn")

    def _project(self, query, key, value):
        e = self.embed_dim
        b = self.in_proj_bias
        biases = (None,) * 3 if b is None else tuple(_rows(b, i * e, (i + 1) * e)
                                                     for i in range(3))
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            weights = tuple(_rows(w, i * e, (i + 1) * e) for i in range(3))
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        return tuple(_linear(x, w, bb) for x, w, bb in zip((query, key, value), weights,
                                                            biases))

    def construct(self, query, key, value, key_padding_mask=None, need_weights=True,
                  attn_mask=None, average_attn_weights=True):
        batched = len(query.shape) == 3
        if len(query.shape) not in (2, 3) or len(key.shape) != len(query.shape) or \
                len(value.shape) != len(query.shape):
            raise ValueError(f"MultiheadAttention: query, key and value must all be 3-D "
                             f"(batched) or 2-D, got shapes {tuple(query.shape)}, "
                             f"{tuple(key.shape)} and {tuple(value.shape)}")
        _mask_dtype_check(key_padding_mask, "key_padding_mask")
        if self.batch_first and batched:
            query, key, value = (ops.swapaxes(t, 0, 1) for t in (query, key, value))
        out, weights = self._attention(query, key, value, key_padding_mask, attn_mask,
                                       average_attn_weights, batched)
        if self.batch_first and batched:
            out = ops.swapaxes(out, 0, 1)
        return (out, weights) if need_weights else (out,)

    def _attention(self, query, key, value, key_padding_mask, attn_mask, average, batched):
        if not batched:
            query, key, value = (ops.expand_dims(t, 1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = ops.expand_dims(key_padding_mask, 0)
        tgt_len, bsz, embed = query.shape
        if embed != self.embed_dim:
            raise ValueError(f"MultiheadAttention: the query's embedding size must be "
                             f"embed_dim={self.embed_dim}, got {embed}")
        heads, hd = self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value)
        attn_mask = self._prepare_mask(attn_mask, query, key.shape[0], bsz)
        if self.bias_k is not None:
            rows = (1, size_when_run(k, 1), self.embed_dim)
            k = ops.concat((k, ops.broadcast_to(self.bias_k, rows)), 0)
            v = ops.concat((v, ops.broadcast_to(self.bias_v, rows)), 0)
            attn_mask = None if attn_mask is None else ops.pad(attn_mask, (0, 1))
            key_padding_mask = None if key_padding_mask is None else ops.pad(key_padding_mask,
                                                                             (0, 1))
        # (length, batch, embed) -> (batch, heads, length, head_dim). Batch and heads stay apart
        # (never batch * heads) so that a graph compiled for sizes it does not know reshapes
        # by the sizes it runs with (size_when_run).
        q, k, v = (ops.transpose(F.reshape(t, (size_when_run(t, 0), size_when_run(t, 1), heads,
                                               hd)), (1, 2, 0, 3)) for t in (q, k, v))
        if self.add_zero_attn:
            zeros = ops.zeros((size_when_run(k, 0), heads, 1, hd), k.dtype)
            k, v = ops.concat((k, zeros), 2), ops.concat((v, zeros), 2)
            attn_mask = None if attn_mask is None else ops.pad(attn_mask, (0, 1))
            key_padding_mask = None if key_padding_mask is None else ops.pad(key_padding_mask,
                                                                             (0, 1))
        attn_mask = self._merge_padding(attn_mask, key_padding_mask, bsz, k.shape[2])
        scale = math.sqrt(math.sqrt(hd))  # MindSpore divides q and k by hd ** 0.25 each
        scores = ops.matmul(q / scale, ops.swapaxes(k, -2, -1) / scale)
        if attn_mask is not None:
            scores = scores + _as_additive(attn_mask, q.dtype)
        attn = ops.softmax(scores, -1)
        if self.dropout > 0 and self.training:
            attn = ops.dropout(attn, self.dropout, True)
        out = ops.transpose(ops.matmul(attn, v), (2, 0, 1, 3))  # (tgt, batch, heads, head_dim)
        out = F.reshape(out, (size_when_run(query, 0), size_when_run(query, 1), self.embed_dim))
        out = _linear(out, self.out_proj.weight, self.out_proj.bias)
        weights = attn
        if average:
            weights = ops.sum(weights, 1) / heads
        if not batched:
            out, weights = ops.squeeze(out, 1), ops.squeeze(weights, 0)
        return out, weights

    def _prepare_mask(self, attn_mask, query, src_len, bsz):
        """attn_mask as (1, 1, tgt, src) or (batch, heads, tgt, src)."""
        if attn_mask is None:
            return None
        if attn_mask.dtype == mstype.uint8:
            attn_mask = ops.cast(attn_mask, mstype.bool_)
        _mask_dtype_check(attn_mask, "attn_mask")
        shape, tgt_len = tuple(attn_mask.shape), query.shape[0]
        if len(shape) == 2:
            if not _fits(shape, (tgt_len, src_len)):
                raise ValueError(f"MultiheadAttention: a 2-D attn_mask must have shape "
                                 f"{(tgt_len, src_len)}, got {shape}")
            return ops.expand_dims(ops.expand_dims(attn_mask, 0), 0)
        if not _fits(shape, (bsz * self.num_heads if bsz >= 0 else -1, tgt_len, src_len)):
            raise ValueError(f"MultiheadAttention: a 3-D attn_mask must have shape "
                             f"{(bsz * self.num_heads, tgt_len, src_len)}, got {shape}")
        return F.reshape(attn_mask, (size_when_run(query, 1), self.num_heads,
                                     size_when_run(attn_mask, 1), size_when_run(attn_mask, 2)))

    def _merge_padding(self, attn_mask, key_padding_mask, bsz, src_len):
        """The masks merged, broadcastable to (batch, heads, tgt, src)."""
        if key_padding_mask is None:
            return attn_mask
        if not _fits(tuple(key_padding_mask.shape), (bsz, src_len)):
            raise ValueError(f"MultiheadAttention: key_padding_mask must have shape "
                             f"{(bsz, src_len)}, got {tuple(key_padding_mask.shape)}")
        kpm = ops.expand_dims(ops.expand_dims(key_padding_mask, 1), 1)  # (batch, 1, 1, src)
        if attn_mask is None:
            return kpm
        if attn_mask.dtype == mstype.bool_ and kpm.dtype == mstype.bool_:
            return ops.logical_or(attn_mask, kpm)
        # MindSpore adds the two masks; a bool one counts as 0 / 1 there.
        return ops.cast(attn_mask, mstype.float32) + ops.cast(kpm, mstype.float32) \
            if attn_mask.dtype == mstype.bool_ else attn_mask + ops.cast(kpm, attn_mask.dtype)


def _activation(activation):
    if isinstance(activation, str):
        if activation not in ("relu", "gelu"):
            raise ValueError(f"Transformer: activation must be 'relu' or 'gelu', got "
                             f"{activation!r}")
        return ops.relu if activation == "relu" else ops.gelu
    if isinstance(activation, Cell):
        if not isinstance(activation, (ReLU, GELU)):
            raise ValueError(f"Transformer: an activation Cell must be nn.ReLU or nn.GELU, got "
                             f"{type(activation).__name__}")
        return activation
    if callable(activation) and activation in (ops.relu, ops.gelu):
        return activation
    raise ValueError(f"Transformer: activation must be 'relu', 'gelu', nn.ReLU, nn.GELU, "
                     f"ops.relu or ops.gelu, got {activation!r}")


class _FeedForward(Cell):
    """The layers' dense1 -> activation -> dropout -> dense2 with MindSpore's initializers."""

    def _init_feed_forward(self, d_model, dim_feedforward, dropout, activation, dtype):
        self.dense1 = Dense(d_model, dim_feedforward, weight_init=HeUniform(math.sqrt(5)),
                            bias_init=Uniform(1 / math.sqrt(d_model)), dtype=dtype)
        self.dropout = Dropout(p=dropout)
        self.dense2 = Dense(dim_feedforward, d_model, weight_init=HeUniform(math.sqrt(5)),
                            bias_init=Uniform(1 / math.sqrt(dim_feedforward)), dtype=dtype)
        self.activation1 = activation  # as given, for copying the layer
        self.activation = _activation(activation)

    def _ff_block(self, x):
        return self.dense2(self.dropout(self.activation(self.dense1(x))))


class TransformerEncoderLayer(_FeedForward):
    """Self-attention and feed-forward blocks with residuals; LayerNorm after each block, or
    before with norm_first."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, dtype=mstype.float32):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, dtype=dtype)
        self._init_feed_forward(d_model, dim_feedforward, dropout, activation, dtype)
        self.norm1 = LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype)
        self.norm2 = LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype)
        self.dropout1 = Dropout(p=dropout)
        self.dropout2 = Dropout(p=dropout)
        self.d_model, self.nhead, self.dim_feedforward = d_model, nhead, dim_feedforward
        self.dropout_num, self.layernorm_eps = dropout, layer_norm_eps
        self.batch_first, self.norm_first, self.dtype = batch_first, norm_first, dtype

    def construct(self, src, src_mask=None, src_key_padding_mask=None):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask)
            return x + self.dropout2(self._ff_block(self.norm2(x)))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask))
        return self.norm2(x + self.dropout2(self._ff_block(x)))

    def _sa_block(self, x, attn_mask, key_padding_mask):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False)[0]
        return self.dropout1(x)


class TransformerDecoderLayer(_FeedForward):
    """Self-attention, attention over the encoder's memory and feed-forward blocks."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, dtype=mstype.float32):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                 batch_first=batch_first, dtype=dtype)
        self._init_feed_forward(d_model, dim_feedforward, dropout, activation, dtype)
        self.norm1 = LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype)
        self.norm2 = LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype)
        self.norm3 = LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype)
        self.dropout1 = Dropout(p=dropout)
        self.dropout2 = Dropout(p=dropout)
        self.dropout3 = Dropout(p=dropout)
        self.d_model, self.nhead, self.dim_feedforward = d_model, nhead, dim_feedforward
        self.dropout_num, self.layernorm_eps = dropout, layer_norm_eps
        self.batch_first, self.norm_first, self.dtype = batch_first, norm_first, dtype

    def construct(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                  memory_key_padding_mask=None):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask)
            return x + self.dropout3(self._ff_block(self.norm3(x)))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask))
        return self.norm3(x + self.dropout3(self._ff_block(x)))

    def _sa_block(self, x, attn_mask, key_padding_mask):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, need_weights=False)[0]
        return self.dropout2(x)


def _copies(layer, num_layers, who):
    check_int(num_layers, who, "num_layers")
    return CellList([copy.deepcopy(layer) for _ in range(num_layers)])


class TransformerEncoder(Cell):
    """num_layers copies of encoder_layer (independent parameters), then `norm` if given."""

    def __init__(self, encoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _copies(encoder_layer, num_layers, "TransformerEncoder")
        self.num_layers = num_layers
        self.norm = norm

    def construct(self, src, src_mask=None, src_key_padding_mask=None):
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=src_mask, src_key_padding_mask=src_key_padding_mask)
        return output if self.norm is None else self.norm(output)


class TransformerDecoder(Cell):
    """num_layers copies of decoder_layer (independent parameters), then `norm` if given."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _copies(decoder_layer, num_layers, "TransformerDecoder")
        self.num_layers = num_layers
        self.norm = norm

    def construct(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                  memory_key_padding_mask=None):
        output = tgt
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask)
        return output if self.norm is None else self.norm(output)


class Transformer(Cell):
    """Encoder and decoder stacks with final LayerNorms; every parameter of rank > 1 is
    re-initialized XavierUniform, as in MindSpore."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 dtype=mstype.float32):
        super().__init__()
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                batch_first, norm_first, dtype)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(*args), num_encoder_layers,
            LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(*args), num_decoder_layers,
            LayerNorm((d_model,), epsilon=layer_norm_eps, dtype=dtype))
        for _, p in self.parameters_and_names():
            if len(p.shape) > 1:
                p.set_data(initializer("xavier_uniform", p.shape, p.dtype))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def construct(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                  src_key_padding_mask=None, tgt_key_padding_mask=None,
                  memory_key_padding_mask=None):
        axis = 0 if self.batch_first else 1
        if len(src.shape) == 3 and src.shape[axis] != tgt.shape[axis]:
            raise ValueError("Transformer: src and tgt must have the same batch size, got "
                             f"{src.shape[axis]} and {tgt.shape[axis]}")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ValueError(f"Transformer: src and tgt must have d_model={self.d_model} "
                             f"features, got {src.shape[-1]} and {tgt.shape[-1]}")
        memory = self.encoder(src, src_mask=src_mask, src_key_padding_mask=src_key_padding_mask)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask)

