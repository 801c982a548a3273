"""kiln.amp: which cells and primitives each amp level runs in bfloat16/float16, outputs against
float32 within the low-precision tolerance, float32 master weights and gradients through the
casts, build_train_network, the loss-scale managers and scalers, all_finite -- in PyNative and
GRAPH_MODE."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, amp, nn, ops

MODES = ["pynative", "graph"]
LOW = [ms.bfloat16, ms.float16]
# 1 + 2**-10 is exact in float32 and float16 but rounds to 1 in bfloat16 (8 significant bits);
# 1 + 2**-12 rounds to 1 in both 16-bit types. Sums of it show whether a product ran in low
# precision or in float32.
FINE = np.float32(1 + 2 ** -12)


def _mode(mode):
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)


class Mlp(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(16, 32, weight_init="ones", bias_init="zeros")
        self.ln = nn.LayerNorm((32,), begin_norm_axis=-1, begin_params_axis=-1)
        self.fc2 = nn.Dense(32, 4)

    def construct(self, x):
        return self.fc2(ops.relu(self.ln(self.fc1(x))))


class PrimNet(nn.Cell):
    """A construct calling a white-listed primitive held as an attribute (O1 casts around it)."""

    def __init__(self):
        super().__init__()
        self.matmul = ops.MatMul()
        self.w = ms.Parameter(Tensor(np.ones((16, 2), np.float32)), name="w")

    def construct(self, x):
        return self.matmul(x, self.w)


def _x(batch=4):
    return Tensor(np.full((batch, 16), FINE, np.float32))


def _net(seed=0):
    ms.set_seed(seed)
    return Mlp()


# ---- Cell.to_float ----

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", LOW)
def test_to_float_computes_in_low_precision_with_float32_parameters(mode, dtype):
    _mode(mode)
    dense = nn.Dense(16, 2, weight_init="ones", bias_init="zeros").to_float(dtype)
    y = dense(_x())
    assert y.dtype == dtype
    # The input rounds to 1 in the 16-bit type: the product sums 16 ones, not 16 * FINE.
    np.testing.assert_array_equal(y.asnumpy().astype(np.float32), np.full((4, 2), 16.0))
    assert dense.weight.dtype == ms.float32 and dense.bias.dtype == ms.float32
    assert dense.weight.__class__ is ms.Parameter  # read outside construct: the Parameter


def test_to_float_flags_recursive_and_rejects_other_types():
    net = _net().to_float(ms.bfloat16)
    for cell in (net, net.fc1, net.ln, net.fc2):
        assert cell.bf16 and not cell.fp16 and not cell.fp32
    net.ln.to_float(ms.float32)
    assert net.ln.fp32 and net.fc1.bf16
    with pytest.raises(ValueError, match="dst_type"):
        nn.Dense(2, 2).to_float(ms.int32)
    with pytest.raises(ValueError, match="dst_type"):
        nn.Dense(2, 2).to_float(ms.float64)


@pytest.mark.parametrize("mode", MODES)
def test_gradients_flow_through_the_casts_to_float32_parameters(mode):
    _mode(mode)
    x = Tensor(np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32))
    grads = {}
    for name, dtype in (("f32", None), ("bf16", ms.bfloat16)):
        net = _net()
        if dtype is not None:
            net.to_float(dtype)
        fn = ms.value_and_grad(lambda v, n=net: n(v).astype(ms.float32).sum(), None,
                               net.trainable_params())
        _, grads[name] = fn(x)
    for g32, g16 in zip(grads["f32"], grads["bf16"], strict=True):
        assert g16.dtype == ms.float32
        a, b = g32.asnumpy(), g16.asnumpy()
        assert np.abs(a - b).max() <= 3e-2 * (np.abs(a).max() + 1e-3)


# ---- amp levels ----

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
def test_levels_close_to_float32(mode, dtype, level):
    _mode(mode)
    x = Tensor(np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32))
    want = _net()(x).asnumpy()
    net = amp.auto_mixed_precision(_net(), level, dtype=dtype)
    got = net(x)
    assert got.dtype == ms.float32  # O1 casts the listed cells' outputs back; O2/O3 the net's
    np.testing.assert_allclose(got.asnumpy(), want, rtol=5e-2, atol=5e-2 * np.abs(want).max())


def test_level_o0_returns_the_network_unchanged():
    net = _net()
    assert amp.auto_mixed_precision(net, "O0", ms.bfloat16) is net
    assert "_amp_dtype" not in net.fc1.__dict__


def _low(cell):
    return cell.__dict__.get("_amp_dtype")


def test_level_o1_marks_only_the_white_list():
    net = amp.auto_mixed_precision(_net(), "O1", dtype=ms.bfloat16)
    assert _low(net.fc1) == ms.bfloat16 and _low(net.fc2) == ms.bfloat16
    assert net.fc1._amp_output_dtype == ms.float32
    assert _low(net.ln) is None and _low(net) is None
    assert net._amp_level == "O1"


def test_level_o2_keeps_the_black_list_in_float32():
    net = amp.auto_mixed_precision(_net(), "O2", dtype=ms.bfloat16)
    inner = net._backbone
    assert _low(inner) == ms.bfloat16 and _low(inner.fc1) == ms.bfloat16
    assert _low(inner.ln) == ms.float32 and inner.ln._amp_output_dtype == ms.bfloat16
    # The parameters keep their names and float32 (the wrapper adds no prefix).
    names = [p.name for p in net.trainable_params()]
    assert names == [p.name for p in _net().trainable_params()]
    assert all(p.dtype == ms.float32 for p in net.trainable_params())


def test_level_o3_runs_everything_low():
    net = amp.auto_mixed_precision(_net(), "O3", dtype=ms.float16)
    assert all(_low(c) == ms.float16 for _, c in net._backbone.cells_and_names())


@pytest.mark.parametrize("mode", MODES)
def test_level_o1_casts_around_a_white_listed_primitive(mode):
    _mode(mode)
    net = PrimNet()
    assert net(_x()).asnumpy()[0, 0] == pytest.approx(16 * float(FINE), rel=1e-7)
    net = amp.auto_mixed_precision(PrimNet(), "O1", dtype=ms.bfloat16)
    y = net(_x())
    assert y.dtype == ms.float32
    np.testing.assert_array_equal(y.asnumpy(), np.full((4, 2), 16.0, np.float32))


def test_level_and_dtype_errors():
    with pytest.raises(ValueError, match="O5"):
        amp.auto_mixed_precision(_net(), "O5")
    with pytest.raises(ValueError, match="dtype"):
        amp.auto_mixed_precision(_net(), "O2", dtype=ms.float32)
    with pytest.raises(TypeError, match="Cell"):
        amp.auto_mixed_precision(lambda x: x, "O1")


# ---- custom lists ----

def test_white_and_black_lists_are_copies():
    white = amp.get_white_list()
    assert nn.Dense in white and nn.Conv2d in white and ops.MatMul in white
    white.append(nn.Flatten)
    assert nn.Flatten not in amp.get_white_list()
    assert amp.get_black_list() == [nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm]


@pytest.mark.parametrize("mode", MODES)
def test_custom_mixed_precision(mode):
    _mode(mode)
    net = amp.custom_mixed_precision(_net(), white_list=[nn.LayerNorm], dtype=ms.bfloat16)
    assert _low(net.ln) == ms.bfloat16 and _low(net.fc1) is None
    assert net(_x()).dtype == ms.float32
    net = amp.custom_mixed_precision(_net(), black_list=[nn.Dense], dtype=ms.bfloat16)
    assert _low(net._backbone.fc1) == ms.float32 and _low(net._backbone.ln) == ms.bfloat16
    assert net(_x()).dtype == ms.float32


def test_custom_mixed_precision_errors():
    with pytest.raises(ValueError, match="one of white_list and black_list"):
        amp.custom_mixed_precision(_net())
    with pytest.raises(ValueError, match="same time"):
        amp.custom_mixed_precision(_net(), white_list=[nn.Dense], black_list=[nn.LayerNorm])
    with pytest.raises(TypeError, match="should be list"):
        amp.custom_mixed_precision(_net(), white_list=(nn.Dense,))
    with pytest.raises(TypeError, match="should be a class"):
        amp.custom_mixed_precision(_net(), white_list=[nn.Dense(2, 2)])
    with pytest.raises(TypeError, match="'Cell'"):
        amp.custom_mixed_precision(_net(), black_list=[ops.MatMul])
    with pytest.raises(ValueError, match="dtype"):
        amp.custom_mixed_precision(_net(), white_list=[nn.Dense], dtype=ms.int8)


class LeNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="valid")
        self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid")
        self.pool = nn.MaxPool2d(2, 2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(16 * 5 * 5, 32)
        self.fc2 = nn.Dense(32, 10)

    def construct(self, x):
        x = self.pool(ops.relu(self.conv1(x)))
        x = self.pool(ops.relu(self.conv2(x)))
        return self.fc2(ops.relu(self.fc1(self.flatten(x))))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", ["O1", "O3"])
def test_lenet_convolutions_in_bfloat16(mode, level):
    """Conv2d, its two gradients, pooling and Dense in bf16: the loss and every gradient close
    to float32. Rounding to bf16 at each layer adds up towards the first ones: PyTorch's CPU
    autocast differs from its float32 by 13% (relative norm) in this first conv's weight
    gradient; a wrong kernel would be off by 100%."""
    _mode(mode)
    rng = np.random.default_rng(2)
    x = Tensor(rng.standard_normal((8, 1, 32, 32)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, 8).astype(np.int32))
    results = []
    for low in (False, True):
        ms.set_seed(5)
        net = LeNet()
        if low:
            net = amp.auto_mixed_precision(net, level, dtype=ms.bfloat16)
            assert net.__dict__.get("_amp_level") == level
        loss_fn = nn.CrossEntropyLoss()
        fn = ms.value_and_grad(lambda a, b, n=net, f=loss_fn: f(n(a).astype(ms.float32), b),
                               None, net.trainable_params())
        results.append(fn(x, y))
    (loss32, grads32), (loss16, grads16) = results
    assert abs(float(loss16.asnumpy()) - float(loss32.asnumpy())) < 2e-2
    for g32, g16 in zip(grads32, grads16, strict=True):
        assert g16.dtype == ms.float32 and g16.shape == g32.shape
        a, b = g32.asnumpy().ravel(), g16.asnumpy().ravel()
        assert np.linalg.norm(a - b) <= 0.25 * np.linalg.norm(a)
    a, b = grads32[-2].asnumpy(), grads16[-2].asnumpy()  # the last layer's: one rounding away
    assert np.linalg.norm(a - b) <= 2e-2 * np.linalg.norm(a)


def _bf16_round(values):
    """NumPy float32 -> the nearest bfloat16 (ties to even), as float32."""
    u = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32) << 16
    out = rounded.view(np.float32)
    return np.where(np.isnan(values), np.float32(np.nan), out)


@pytest.mark.parametrize("mode", MODES)
def test_bf16_elementwise_kernels_round_the_float32_result_once(mode):
    """The activations and arithmetic of the networks above, on bf16 tensors longer than the
    kernels' 256-element chunks, with infinities and NaNs: each result is the float32 function
    of the bf16 inputs, rounded once to bf16."""
    _mode(mode)
    rng = np.random.default_rng(4)
    x = _bf16_round(rng.standard_normal(1000).astype(np.float32) * 3)
    y = _bf16_round(rng.standard_normal(1000).astype(np.float32) * 3)
    x[[5, 300, 777]] = [np.inf, -np.inf, np.nan]
    xt, yt = Tensor(x).astype(ms.bfloat16), Tensor(y).astype(ms.bfloat16)
    erf = np.vectorize(__import__("math").erf)
    cases = [
        (lambda a, b: ops.relu(a), lambda a, b: np.maximum(a, 0)),
        (lambda a, b: a * b, lambda a, b: a * b),
        (lambda a, b: a + 0.5, lambda a, b: a + np.float32(0.5)),
        (lambda a, b: ops.exp(a / 8), lambda a, b: np.exp(a / 8)),
        (lambda a, b: ops.gelu(b, approximate="none"),
         lambda a, b: 0.5 * b * (1 + erf(b / np.sqrt(2)))),
    ]
    for kiln_fn, np_fn in cases:
        fn = ms.jit(kiln_fn) if mode == "graph" else kiln_fn
        got = fn(xt, yt)
        assert got.dtype == ms.bfloat16
        with np.errstate(invalid="ignore", over="ignore"):
            want = _bf16_round(np_fn(x.astype(np.float64), y.astype(np.float64)))
        got = got.astype(ms.float32).asnumpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        finite = np.isfinite(want)
        np.testing.assert_array_equal(got[~finite & ~np.isnan(want)],
                                      want[~finite & ~np.isnan(want)])
        # Within one bf16 unit (the float32 function itself may differ in its last bits; its
        # GELU loses relative precision far in the negative tail, where it is below 1e-6).
        np.testing.assert_allclose(got[finite], want[finite], rtol=2 ** -8, atol=1e-6)
