"""mint.nn.functional's convolutions, pools, fold, grid_sample, norms and in-place activations
against NumPy references, by finite differences, and the same through ms.jit."""
import math

import numpy as np
import pytest
from gradcheck import check_grad, numeric_grads
from graph_check import assert_same_in_both_modes

import kiln as ms
from kiln import Tensor
from kiln.mint.nn import functional as F

RNG = np.random.default_rng(11)


def r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def np_conv(x, w, b, stride, pads, dilation, groups):
    """N-d cross-correlation of (N, C, *S) with (O, C / groups, *K); pads per axis (lo, hi)."""
    nd = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + list(pads))
    k = w.shape[2:]
    out = [(x.shape[2 + i] - dilation[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    cin, cout = w.shape[1], w.shape[0] // groups
    y = np.zeros((x.shape[0], w.shape[0], *out))
    for g in range(groups):
        xs, ws = x[:, g * cin:(g + 1) * cin], w[g * cout:(g + 1) * cout]
        for off in np.ndindex(*k):
            sl = tuple(slice(off[i] * dilation[i], off[i] * dilation[i] +
                             (out[i] - 1) * stride[i] + 1, stride[i]) for i in range(nd))
            y[:, g * cout:(g + 1) * cout] += np.einsum("nc...,oc->no...", xs[(..., *sl)],
                                                       ws[(..., *off)])
    return y if b is None else y + b.reshape((1, -1) + (1,) * nd)


def np_conv_transpose2d(x, w, b, stride, pad, out_pad, groups, dilation):
    n, cin, h, wd = x.shape
    kh, kw = w.shape[2:]
    cout = w.shape[1]
    size = [(s - 1) * st - 2 * p + d * (k - 1) + o + 1 for s, st, p, d, k, o in
            zip((h, wd), stride, pad, dilation, (kh, kw), out_pad)]
    full = np.zeros((n, cout * groups, size[0] + 2 * pad[0], size[1] + 2 * pad[1]))
    per = cin // groups
    for i, j, a, c in np.ndindex(h, wd, kh, kw):
        row, col = i * stride[0] + a * dilation[0], j * stride[1] + c * dilation[1]
        if row < full.shape[2] and col < full.shape[3]:
            for g in range(groups):
                full[:, g * cout:(g + 1) * cout, row, col] += np.einsum(
                    "nc,co->no", x[:, g * per:(g + 1) * per, i, j], w[g * per:(g + 1) * per, :,
                                                                      a, c])
    y = full[:, :, pad[0]:pad[0] + size[0], pad[1]:pad[1] + size[1]]
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def np_fold(x, size, kernel, dilation, pad, stride):
    n, ck, _ = x.shape
    c = ck // (kernel[0] * kernel[1])
    counts = [(s + 2 * p - d * (k - 1) - 1) // st + 1 for s, p, d, k, st in
              zip(size, pad, dilation, kernel, stride)]
    x = x.reshape(n, c, kernel[0], kernel[1], counts[0], counts[1])
    out = np.zeros((n, c, size[0] + 2 * pad[0], size[1] + 2 * pad[1]))
    for a, b, i, j in np.ndindex(kernel[0], kernel[1], counts[0], counts[1]):
        out[:, :, i * stride[0] + a * dilation[0], j * stride[1] + b * dilation[1]] += \
            x[:, :, a, b, i, j]
    return out[:, :, pad[0]:pad[0] + size[0], pad[1]:pad[1] + size[1]]


def np_grid_sample_bilinear_zeros(x, grid, align_corners):
    n, c, h, w = x.shape
    out = np.zeros((n, c) + grid.shape[1:3])
    for b, i, j in np.ndindex(n, *grid.shape[1:3]):
        gx, gy = grid[b, i, j]
        if align_corners:
            sx, sy = (gx + 1) / 2 * (w - 1), (gy + 1) / 2 * (h - 1)
        else:
            sx, sy = ((gx + 1) * w - 1) / 2, ((gy + 1) * h - 1) / 2
        x0, y0 = math.floor(sx), math.floor(sy)
        for yy, xx in ((y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1)):
            wgt = (1 - abs(sx - xx)) * (1 - abs(sy - yy))
            if 0 <= yy < h and 0 <= xx < w:
                out[b, :, i, j] += wgt * x[b, :, yy, xx]
    return out


def np_avg_pool(x, k, s, p, include_pad):
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p)] * nd)
    ones = np.pad(np.ones(x.shape[2:]), [(p, p)] * nd)
    out = [(xp.shape[2 + i] - k) // s + 1 for i in range(nd)]
    total, count = np.zeros(x.shape[:2] + tuple(out)), np.zeros(tuple(out))
    for off in np.ndindex(*(k,) * nd):
        sl = tuple(slice(o, o + (m - 1) * s + 1, s) for o, m in zip(off, out))
        total += xp[(..., *sl)]
        count += ones[sl]
    return total / (k ** nd if include_pad else count)


X3, X4, X5 = r(2, 4, 9), r(2, 4, 7, 6), r(2, 4, 5, 6, 5)
W3, W4, W5 = r(6, 2, 3), r(6, 2, 3, 2), r(6, 4, 2, 3, 2)
B6 = r(6)
GRID = RNG.uniform(-1.2, 1.2, (2, 3, 5, 2)).astype(np.float32)

# (id, kiln call, numpy reference, inputs)
CASES = [
    ("conv1d", lambda x, w, b: F.conv1d(x, w, b, 2, 1, 2, 2),
     lambda x, w, b: np_conv(x, w, b, (2,), [(1, 1)], (2,), 2), (X3, W3, B6)),
    ("conv1d_same", lambda x, w: F.conv1d(x, w, None, 1, "same", 1, 2),
     lambda x, w: np_conv(x, w, None, (1,), [(1, 1)], (1,), 2), (X3, W3)),
    ("conv2d", lambda x, w, b: F.conv2d(x, w, b, (1, 2), (2, 1), (2, 1), 2),
     lambda x, w, b: np_conv(x, w, b, (1, 2), [(2, 2), (1, 1)], (2, 1), 2), (X4, W4, B6)),
    ("conv2d_same", lambda x, w: F.conv2d(x, w, None, 1, "same", 2, 2),
     lambda x, w: np_conv(x, w, None, (1, 1), [(2, 2), (1, 1)], (2, 2), 2), (X4, W4)),
    ("conv2d_unbatched", lambda x, w: F.conv2d(x, w, None, 1, "valid", 1, 2),
     lambda x, w: np_conv(x[None], w, None, (1, 1), [(0, 0)] * 2, (1, 1), 2)[0], (X4[0], W4)),
    ("conv3d", lambda x, w, b: F.conv3d(x, w, b, (1, 2, 1), 1),
     lambda x, w, b: np_conv(x, w, b, (1, 2, 1), [(1, 1)] * 3, (1, 1, 1), 1), (X5, W5, B6)),
    ("conv_transpose2d", lambda x, w, b: F.conv_transpose2d(x, w, b, 2, 1, 1, 1, 1),
     lambda x, w, b: np_conv_transpose2d(x, w, b, (2, 2), (1, 1), (1, 1), 1, (1, 1)),
     (X4, r(4, 3, 3, 2), r(3))),
    ("conv_transpose2d_groups", lambda x, w: F.conv_transpose2d(x, w, None, (2, 1), (1, 0),
                                                                (1, 0), 2, 1),
     lambda x, w: np_conv_transpose2d(x, w, None, (2, 1), (1, 0), (1, 0), 2, (1, 1)),
     (X4, r(4, 2, 3, 3))),
    ("avg_pool1d_stride_none", lambda x: F.avg_pool1d(x, 3),
     lambda x: np_avg_pool(x, 3, 3, 0, True), (X3,)),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, 1, False, False),
     lambda x: np_avg_pool(x, 3, 2, 1, False), (X4,)),
    ("avg_pool3d", lambda x: F.avg_pool3d(x, 2, None, 1),
     lambda x: np_avg_pool(x, 2, 2, 1, True), (X5,)),
    ("avg_pool3d_exclude_pad", lambda x: F.avg_pool3d(x, 2, 1, 1, False, False),
     lambda x: np_avg_pool(x, 2, 1, 1, False), (X5,)),
    ("fold", lambda x: F.fold(x, (4, 5), (2, 3), 1, 1, (2, 1)),
     lambda x: np_fold(x, (4, 5), (2, 3), (1, 1), (1, 1), (2, 1)), (r(2, 12, 15),)),
    ("fold_dilated_strided", lambda x: F.fold(x, (5, 5), 2, 2, 0, 2),
     lambda x: np_fold(x, (5, 5), (2, 2), (2, 2), (0, 0), (2, 2)), (r(2, 8, 4),)),
    ("grid_sample", lambda x, g: F.grid_sample(x, g),
     lambda x, g: np_grid_sample_bilinear_zeros(x, g, False), (X4, GRID)),
    ("grid_sample_align", lambda x, g: F.grid_sample(x, g, "bilinear", "zeros", True),
     lambda x, g: np_grid_sample_bilinear_zeros(x, g, True), (X4, GRID)),
    ("kl_div_mean", lambda x, t: F.kl_div(x, t),
     lambda x, t: np.mean(t * (np.log(t) - x)), (r(3, 4), np.abs(r(3, 4)) + 0.1)),
    ("kl_div_batchmean", lambda x, t: F.kl_div(x, t, "batchmean"),
     lambda x, t: np.sum(t * (np.log(t) - x)) / 3, (r(3, 4), np.abs(r(3, 4)) + 0.1)),
    ("kl_div_log_target", lambda x, t: F.kl_div(x, t, "none", True),
     lambda x, t: np.exp(t) * (t - x), (r(3, 4), r(3, 4))),
    ("kl_div_zero_target", lambda x, t: F.kl_div(x, t, "sum"),
     lambda x, t: np.sum(np.where(t > 0, t * (np.log(np.where(t > 0, t, 1)) - x), 0)),
     (r(3, 4), np.maximum(r(3, 4), 0))),
    ("normalize", lambda x: F.normalize(x), lambda x: x / np.linalg.norm(x, axis=1,
                                                                        keepdims=True), (X3,)),
    ("normalize_p1", lambda x: F.normalize(x, 1, -1),
     lambda x: x / np.abs(x).sum(-1, keepdims=True), (X3,)),
    ("norm_fro", lambda x: F.norm_ext(x), lambda x: np.sqrt((x * x).sum()), (X3,)),
    ("norm_p3_dim", lambda x: F.norm_ext(x, 3, 1, True),
     lambda x: (np.abs(x) ** 3).sum(1, keepdims=True) ** (1 / 3), (X3,)),
    ("norm_inf", lambda x: F.norm_ext(x, float("inf"), 0), lambda x: np.abs(x).max(0), (X3,)),
    ("norm_0", lambda x: F.norm_ext(x, 0), lambda x: np.float32(np.count_nonzero(x)),
     (np.array([[0, 1, 2], [0, 0, 3]], np.float32),)),
    ("flatten_default_start_0", lambda x: F.flatten(x), lambda x: x.reshape(-1), (X4,)),
    ("flatten_1_2", lambda x: F.flatten(x, 1, 2), lambda x: x.reshape(2, 28, 6), (X4,)),
    ("hardtanh_op", lambda x: F.hardtanh_op(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5),
     (X3,)),
    ("threshold_op", lambda x: F.threshold_op(x, 0.1, 20.0),
     lambda x: np.where(x > 0.1, x, 20.0), (X3,)),
    ("elu_ext", lambda x: F.elu_ext(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)),
     (X3,)),
    ("silu_func", lambda x: F.silu_func(x), lambda x: x / (1 + np.exp(-x)), (X3,)),
    ("adaptive_avg_pool3d_ext", lambda x: F.adaptive_avg_pool3d_ext(x, 1),
     lambda x: x.mean((2, 3, 4), keepdims=True), (X5,)),
    ("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 3),
     lambda x: x.reshape(2, 4, 3, 3).max(-1), (X3,)),
    ("adaptive_max_pool1d_indices", lambda x: F.adaptive_max_pool1d(x, 3, True)[1],
     lambda x: x.reshape(2, 4, 3, 3).argmax(-1) + np.arange(3) * 3, (X3,)),
    ("max_pool2d_stride_none", lambda x: F.max_pool2d(x, 2),
     lambda x: x[:, :, :6].reshape(2, 4, 3, 2, 3, 2).max((3, 5)), (X4,)),
]


@pytest.mark.parametrize("name,fn,ref,inputs", CASES, ids=[c[0] for c in CASES])
def test_against_numpy_in_both_modes(name, fn, ref, inputs):
    got = assert_same_in_both_modes(fn, *(Tensor(a) for a in inputs), rtol=1e-4, atol=1e-5)
    want = np.asarray(ref(*inputs))
    assert got.shape == want.shape
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-4, atol=1e-4)
    expected = ms.int64 if name.endswith("indices") else ms.float32
    assert got.dtype == expected


GRAD_CASES = [
    ("conv1d", lambda x, w, b: F.conv1d(x, w, b, 2, 1, 2, 2), (r(1, 4, 7), W3, B6)),
    ("conv2d_same", lambda x, w: F.conv2d(x, w, None, 1, "same", 1, 2), (r(1, 4, 4, 3), W4)),
    ("conv3d", lambda x, w, b: F.conv3d(x, w, b, 1, (1, 0, 1)),
     (r(1, 4, 3, 4, 3), r(2, 4, 2, 2, 2), r(2))),
    ("conv_transpose2d", lambda x, w, b: F.conv_transpose2d(x, w, b, 2, 1, 1),
     (r(1, 4, 3, 3), r(4, 2, 3, 2), r(2))),
    ("avg_pool3d", lambda x: F.avg_pool3d(x, 2, 1, 1, False, False), (r(1, 2, 3, 3, 3),)),
    ("fold", lambda x: F.fold(x, (4, 5), (2, 3), 1, 1, (2, 1)), (r(1, 12, 15),)),
    ("grid_sample_bilinear", lambda x, g: F.grid_sample(x, g, "bilinear", "zeros", False),
     (r(1, 2, 4, 3), RNG.uniform(-0.9, 0.9, (1, 2, 3, 2)))),
    ("grid_sample_reflection", lambda x, g: F.grid_sample(x, g, "bilinear", "reflection", True),
     (r(1, 2, 4, 3), RNG.uniform(-2.1, 2.1, (1, 2, 3, 2)))),
    ("kl_div", lambda x, t: F.kl_div(x, t, "batchmean"), (r(3, 4), np.abs(r(3, 4)) + 0.1)),
    ("normalize", lambda x: F.normalize(x, 2.0, 1), (r(2, 3, 4),)),
    ("norm_p3", lambda x: F.norm_ext(x, 3, 1), (r(2, 3, 4),)),
]


# convolutions run in float32 whatever the input dtype (oneDNN) and are linear in each operand,
# so a central difference with a large step is exact there: checked at float32 tolerances
_LINEAR_F32 = ("conv1d", "conv2d_same", "conv3d", "conv_transpose2d")


@pytest.mark.parametrize("name,fn,inputs", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradient_by_finite_differences(name, fn, inputs):
    if name not in _LINEAR_F32:
        check_grad(fn, *inputs, rtol=1e-4, atol=1e-6)
        return
    arrays = [np.array(a, np.float32) for a in inputs]
    weight = RNG.uniform(0.5, 1.5, fn(*(Tensor(a) for a in arrays)).shape)

    def projected(*xs):
        return ms.ops.mul(fn(*xs), Tensor(weight.astype(np.float32)))

    analytic = ms.grad(projected, tuple(range(len(arrays))))(*(Tensor(a) for a in arrays))
    numeric = numeric_grads(fn, [a.astype(np.float64) for a in arrays], weight, eps=0.5)
    for got, want in zip(analytic, numeric):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-3, atol=1e-3)


def test_in_place_activations_write_the_input():
    for fn, ref in ((lambda t: F.relu_(t), lambda a: np.maximum(a, 0)),
                    (lambda t: F.sigmoid_(t), lambda a: 1 / (1 + np.exp(-a))),
                    (lambda t: F.elu_(t, 0.5), lambda a: np.where(a > 0, a, 0.5 * np.expm1(a))),
                    (lambda t: F.inplace_elu(t), lambda a: np.where(a > 0, a, np.expm1(a))),
                    (lambda t: F.inplace_silu(t), lambda a: a / (1 + np.exp(-a))),
                    (lambda t: F.hardtanh_(t), lambda a: np.clip(a, -1, 1)),
                    (lambda t: F.threshold_(t, 0.2, 9.0), lambda a: np.where(a > 0.2, a, 9.0))):
        t = Tensor(X3.copy())
        out = fn(t)
        assert out is t
        np.testing.assert_allclose(t.asnumpy(), ref(X3), rtol=1e-5, atol=1e-6)


def test_grid_sample_nearest_border_and_reflection_stay_inside():
    x = Tensor(X4)
    far = Tensor(np.full((2, 1, 1, 2), 5.0, np.float32))
    near = F.grid_sample(x, far, "nearest", "border").asnumpy()
    np.testing.assert_allclose(near[:, :, 0, 0], X4[:, :, -1, -1])
    refl = F.grid_sample(x, Tensor(np.full((2, 1, 1, 2), 3.0, np.float32)), "nearest",
                         "reflection", True).asnumpy()  # 3 reflects to -1: the first pixel
    np.testing.assert_allclose(refl[:, :, 0, 0], X4[:, :, 0, 0])


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="conv2d: padding='same'"):
        F.conv2d(Tensor(X4), Tensor(W4), None, 2, "same", 1, 2)
    with pytest.raises(ValueError, match="conv2d: expected a 3-D or 4-D"):
        F.conv2d(Tensor(r(4, 9)), Tensor(W4))
    with pytest.raises(ValueError, match="fold: input"):
        F.fold(Tensor(r(2, 12, 11)), (4, 5), (2, 3), 1, 1, (2, 1))
    with pytest.raises(ValueError, match="grid_sample: mode"):
        F.grid_sample(Tensor(X4), Tensor(GRID), "bicubic")
    with pytest.raises(ValueError, match="kl_div: reduction"):
        F.kl_div(Tensor(X3), Tensor(X3), "avg")
    with pytest.raises(ValueError, match="conv_transpose2d: output_padding"):
        F.conv_transpose2d(Tensor(X4), Tensor(r(4, 2, 3, 3)), None, 1, 0, 1)


WT = r(4, 2, 2, 2)
DTYPE_CASES = [
    ("conv2d", lambda x: F.conv2d(x[:, :, 0], ms.ops.cast(Tensor(W4), x.dtype), None, 1, 1,
                                  1, 2)),
    ("conv3d", lambda x: F.conv3d(x[:, :, :3], ms.ops.cast(Tensor(W5[:2]), x.dtype))),
    ("conv_transpose2d", lambda x: F.conv_transpose2d(
        x[:, :, 0], ms.ops.cast(Tensor(WT), x.dtype), None, 2)),
    ("avg_pool3d", lambda x: F.avg_pool3d(x[:, :, :4], 2)),
    ("fold", lambda x: F.fold(ms.ops.reshape(x[:, :, :4, :4, :4], (2, 16, 16)), (5, 5), 2)),
    ("grid_sample", lambda x: F.grid_sample(x[:, :, 0], ms.ops.cast(Tensor(GRID), x.dtype))),
    ("normalize", lambda x: F.normalize(x)),
    ("norm", lambda x: F.norm_ext(x, 3, 1)),
    ("kl_div", lambda x: F.kl_div(x, ms.ops.abs(x), "none")),
]


@pytest.mark.parametrize("dtype,tol", [(ms.float16, 2e-2), (ms.float64, 1e-5)])
@pytest.mark.parametrize("name,fn", DTYPE_CASES, ids=[c[0] for c in DTYPE_CASES])
def test_other_float_dtypes_keep_their_dtype(name, fn, dtype, tol):
    x = ms.ops.cast(Tensor(X5 * 0.5), dtype)
    got = fn(x)
    assert got.dtype == dtype
    want = fn(Tensor(X5 * 0.5)).asnumpy()
    np.testing.assert_allclose(got.asnumpy().astype(np.float64), want, rtol=tol, atol=tol)


def test_losses_and_normalize_broadcast():
    x, t = r(3, 4), np.abs(r(4)) + 0.1
    got = F.kl_div(Tensor(x), Tensor(t), "none").asnumpy()
    np.testing.assert_allclose(got, t * (np.log(t) - x), rtol=1e-5)
    with pytest.raises(ValueError):
        F.kl_div(Tensor(x), Tensor(np.abs(r(3))), "none")


def np_grid_sample_trilinear_zeros(x, grid):
    """align_corners=False trilinear sampling of (N, C, D, H, W) at (N, Do, Ho, Wo, 3)."""
    n, c = x.shape[:2]
    sizes = x.shape[2:]
    out = np.zeros((n, c) + grid.shape[1:4])
    for b, i, j, k in np.ndindex(n, *grid.shape[1:4]):
        src = [((grid[b, i, j, k, 2 - a] + 1) * sizes[a] - 1) / 2 for a in range(3)]
        low = [math.floor(v) for v in src]
        for corner in np.ndindex(2, 2, 2):
            at = [lo + bit for lo, bit in zip(low, corner)]
            wgt = np.prod([1 - abs(v - p) for v, p in zip(src, at)])
            if all(0 <= p < s for p, s in zip(at, sizes)):
                out[b, :, i, j, k] += wgt * x[(b, slice(None), *at)]
    return out


def test_grid_sample_volumetric():
    grid = RNG.uniform(-1.2, 1.2, (2, 3, 2, 4, 3)).astype(np.float32)
    got = assert_same_in_both_modes(lambda x, g: F.grid_sample(x, g), Tensor(X5), Tensor(grid),
                                    rtol=1e-5, atol=1e-5)
    assert got.shape == (2, 4, 3, 2, 4)
    np.testing.assert_allclose(got.asnumpy(), np_grid_sample_trilinear_zeros(X5, grid),
                               rtol=1e-4, atol=1e-5)
    check_grad(lambda x, g: F.grid_sample(x, g, "bilinear", "border", True),
               r(1, 2, 3, 2, 3), RNG.uniform(-0.9, 0.9, (1, 2, 1, 2, 3)), rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="grid_sample: expected"):
        F.grid_sample(Tensor(X5), Tensor(GRID))
