"""conv2d (every pad_mode), max_pool2d and avg_pool2d against NumPy reference implementations."""
import itertools

import numpy as np
import pytest
from helpers import FLOAT_DTYPES, INT_DTYPES, assert_close, non_contiguous, to_kiln

import kiln as ms
from kiln import ops

RNG = np.random.default_rng(1)


# ---- NumPy references

def conv2d_ref(x, w, bias=None, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """Direct convolution: one einsum per kernel tap over strided windows of the padded input."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), pads[:2], pads[2:]))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    oh = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for g in range(groups):
        xs, ws = x[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og].astype(np.float64)
        for i, j in itertools.product(range(kh), range(kw)):
            h0, w0 = i * dilation[0], j * dilation[1]
            patch = xs[:, :, h0:h0 + stride[0] * (oh - 1) + 1:stride[0],
                       w0:w0 + stride[1] * (ow - 1) + 1:stride[1]]
            out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out


def pool_out(size, k, s, p, d, ceil_mode):
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def max_pool_ref(x, k, s, p, d, ceil_mode):
    h, w = x.shape[-2:]
    oh = pool_out(h, k[0], s[0], p[0], d[0], ceil_mode)
    ow = pool_out(w, k[1], s[1], p[1], d[1], ceil_mode)
    planes = x.reshape(-1, h, w)
    y = np.zeros((planes.shape[0], oh, ow), x.dtype)
    idx = np.zeros((planes.shape[0], oh, ow), np.int64)
    for n, i, j in itertools.product(range(planes.shape[0]), range(oh), range(ow)):
        best, at = None, 0
        for a, b in itertools.product(range(k[0]), range(k[1])):
            r, c = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
            if 0 <= r < h and 0 <= c < w and (best is None or planes[n, r, c] > best
                                               or np.isnan(planes[n, r, c])):
                best, at = planes[n, r, c], r * w + c
        y[n, i, j], idx[n, i, j] = best, at
    shape = x.shape[:-2] + (oh, ow)
    return y.reshape(shape), idx.reshape(shape)


def avg_pool_ref(x, k, s, p, ceil_mode, count_include_pad, divisor_override):
    h, w = x.shape[-2:]
    oh = pool_out(h, k[0], s[0], p[0], 1, ceil_mode)
    ow = pool_out(w, k[1], s[1], p[1], 1, ceil_mode)
    planes = x.reshape(-1, h, w).astype(np.float64)
    y = np.zeros((planes.shape[0], oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        r0, c0 = i * s[0] - p[0], j * s[1] - p[1]
        r1, c1 = min(r0 + k[0], h + p[0]), min(c0 + k[1], w + p[1])
        padded = (r1 - r0) * (c1 - c0)
        r0, c0, r1, c1 = max(r0, 0), max(c0, 0), min(r1, h), min(c1, w)
        total = planes[:, r0:r1, c0:c1].sum(axis=(1, 2))
        div = divisor_override or (padded if count_include_pad else (r1 - r0) * (c1 - c0))
        y[:, i, j] = total / div
    return y.reshape(x.shape[:-2] + (oh, ow))


# ---- conv2d

CONV_CASES = [
    # (N, C, H, W), (O, C/g, kh, kw), stride, pads(t, b, l, r), dilation, groups, bias
    ((2, 3, 8, 8), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),
    ((1, 3, 9, 7), (5, 3, 3, 2), (2, 1), (0, 0, 0, 0), (1, 1), 1, False),
    ((2, 4, 10, 10), (6, 2, 3, 3), (1, 2), (1, 1, 2, 2), (1, 1), 2, True),
    ((1, 2, 11, 9), (3, 2, 3, 3), (2, 2), (1, 0, 0, 2), (2, 1), 1, True),
    ((2, 4, 6, 6), (4, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4, False),  # depthwise
    ((1, 1, 5, 5), (1, 1, 5, 5), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),   # kernel = input
    ((3, 2, 4, 4), (2, 2, 1, 1), (3, 3), (0, 0, 0, 0), (1, 1), 1, True),   # 1x1, big stride
]


@pytest.mark.parametrize("xs,ws,stride,pads,dilation,groups,has_bias", CONV_CASES)
def test_conv2d_pad_mode_pad(xs, ws, stride, pads, dilation, groups, has_bias):
    x, w = RNG.standard_normal(xs).astype(np.float32), RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32) if has_bias else None
    out = ops.conv2d(ms.Tensor(x), ms.Tensor(w), None if b is None else ms.Tensor(b), stride=stride,
                     pad_mode="pad", padding=pads, dilation=dilation, groups=groups)
    assert_close(out, conv2d_ref(x, w, b, stride, pads, dilation, groups).astype(np.float32),
                 ms.float32, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("size,kernel,stride,dilation", [(8, 3, 1, 1), (9, 3, 2, 1), (10, 4, 3, 1),
                                                          (7, 3, 2, 2), (5, 2, 1, 1), (6, 1, 4, 1)])
def test_conv2d_pad_mode_same(size, kernel, stride, dilation):
    x = RNG.standard_normal((2, 3, size, size + 1)).astype(np.float32)
    w = RNG.standard_normal((4, 3, kernel, kernel)).astype(np.float32)
    out = ops.conv2d(ms.Tensor(x), ms.Tensor(w), stride=stride, pad_mode="same", dilation=dilation)
    pads = []
    for n in (size, size + 1):
        want = -(-n // stride)
        need = max(0, (want - 1) * stride + (kernel - 1) * dilation + 1 - n)
        pads += [need // 2, need - need // 2]
    assert out.shape[2:] == (-(-size // stride), -(-(size + 1) // stride))
    ref = conv2d_ref(x, w, None, (stride,) * 2, pads, (dilation,) * 2)
    assert_close(out, ref.astype(np.float32), ms.float32, rtol=1e-4, atol=1e-4)


def test_conv2d_pad_mode_valid_and_padding_forms():
    x = RNG.standard_normal((1, 2, 7, 6)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    kx, kw = ms.Tensor(x), ms.Tensor(w)
    assert_close(ops.conv2d(kx, kw), conv2d_ref(x, w).astype(np.float32), ms.float32,
                 rtol=1e-4, atol=1e-4)
    for padding, pads in [(1, (1, 1, 1, 1)), ((2, 1), (2, 2, 1, 1)), ([0, 1, 2, 0], (0, 1, 2, 0))]:
        out = ops.conv2d(kx, kw, pad_mode="pad", padding=padding)
        assert_close(out, conv2d_ref(x, w, pads=pads).astype(np.float32), ms.float32,
                     rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=str)
def test_conv2d_float_dtypes(dtype, np_dtype):
    x = RNG.integers(-2, 3, (2, 2, 5, 5)).astype(np_dtype)
    w = RNG.integers(-2, 3, (3, 2, 2, 2)).astype(np_dtype)
    b = RNG.integers(-2, 3, (3,)).astype(np_dtype)
    out = ops.conv2d(to_kiln(x, dtype), to_kiln(w, dtype), to_kiln(b, dtype), pad_mode="pad",
                     padding=1)
    assert out.dtype == dtype
    assert_close(out, conv2d_ref(x, w, b, pads=(1, 1, 1, 1)).astype(np_dtype), dtype)


def test_conv2d_non_contiguous_input():
    x = RNG.standard_normal((1, 2, 5, 6)).astype(np.float32)
    w = RNG.standard_normal((2, 2, 3, 3)).astype(np.float32)
    out = ops.conv2d(non_contiguous(x, ms.float32), non_contiguous(w, ms.float32))
    assert_close(out, conv2d_ref(x, w).astype(np.float32), ms.float32, rtol=1e-4, atol=1e-4)


def test_conv2d_weight_kept_in_its_layout_follows_writes():
    # Where oneDNN runs a float32 convolution in its own weight layout, a weight that comes back
    # unchanged is kept in that layout from its second call on; a write to it must be seen.
    x = RNG.standard_normal((2, 16, 9, 9)).astype(np.float32)
    w = RNG.standard_normal((48, 16, 3, 3)).astype(np.float32)  # past the direct loops' channels
    weight = ms.Parameter(ms.Tensor(w) + 0, name="w")  # kiln-owned bytes (not a NumPy alias)
    kept = ms._C.packed_weight_stats()["hits"]
    for _ in range(3):
        assert_close(ops.conv2d(ms.Tensor(x), weight, pad_mode="pad", padding=1),
                     conv2d_ref(x, w, pads=(1, 1, 1, 1)).astype(np.float32), ms.float32,
                     rtol=1e-4, atol=1e-4)
    # oneDNN's AVX2 and AVX-512 kernels pick a blocked weight layout for this shape, so the
    # second and third calls read the kept copy.
    assert ms._C.packed_weight_stats()["hits"] > kept
    w2 = RNG.standard_normal(w.shape).astype(np.float32)
    ops.assign(weight, ms.Tensor(w2))
    for _ in range(2):
        assert_close(ops.conv2d(ms.Tensor(x), weight, pad_mode="pad", padding=1),
                     conv2d_ref(x, w2, pads=(1, 1, 1, 1)).astype(np.float32), ms.float32,
                     rtol=1e-4, atol=1e-4)


def test_a_written_weight_frees_its_kept_copy_at_the_write():
    # A weight trained after an evaluation is never read in the evaluation's layout again: its
    # kept copy must be freed when the weight is written, not held until a next use.
    x = ms.Tensor(RNG.standard_normal((1, 256, 8, 8)).astype(np.float32))
    w = RNG.standard_normal((256, 256, 3, 3)).astype(np.float32)
    weight = ms.Parameter(ms.Tensor(w) + 0, name="w")  # kiln-owned bytes (not a NumPy alias)
    kept = ms._C.packed_weight_stats()["hits"]
    for _ in range(3):
        ops.conv2d(x, weight, pad_mode="pad", padding=1).asnumpy()
    assert ms._C.packed_weight_stats()["hits"] > kept
    new_values = ms.Tensor(w * 2)
    before = ms._C.allocator_stats()["allocated_bytes"]
    ops.assign(weight, new_values)
    assert before - ms._C.allocator_stats()["allocated_bytes"] >= w.nbytes
    assert_close(ops.conv2d(x, weight, pad_mode="pad", padding=1),
                 conv2d_ref(x.asnumpy(), w * 2, pads=(1, 1, 1, 1)).astype(np.float32),
                 ms.float32, rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("dtype,np_dtype", INT_DTYPES, ids=str)
def test_conv2d_rejects_integers(dtype, np_dtype):
    x = to_kiln(np.ones((1, 1, 3, 3), np_dtype), dtype)
    w = to_kiln(np.ones((1, 1, 2, 2), np_dtype), dtype)
    with pytest.raises(TypeError, match="conv2d"):
        ops.conv2d(x, w)


def test_conv2d_validation_errors():
    x = ms.Tensor(np.ones((1, 4, 5, 5), np.float32))
    w = ms.Tensor(np.ones((2, 4, 3, 3), np.float32))
    with pytest.raises(ValueError, match=r"conv2d.*4-D"):
        ops.conv2d(ms.Tensor(np.ones((4, 5, 5), np.float32)), w)
    with pytest.raises(ValueError, match=r"conv2d.*groups"):
        ops.conv2d(x, ms.Tensor(np.ones((3, 2, 3, 3), np.float32)), groups=2)
    with pytest.raises(ValueError, match=r"conv2d.*input channels"):
        ops.conv2d(x, ms.Tensor(np.ones((2, 3, 3, 3), np.float32)))
    with pytest.raises(ValueError, match=r"conv2d.*larger than the padded input"):
        ops.conv2d(x, ms.Tensor(np.ones((2, 4, 6, 6), np.float32)))
    with pytest.raises(ValueError, match=r"conv2d.*bias"):
        ops.conv2d(x, w, ms.Tensor(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match=r"conv2d.*stride"):
        ops.conv2d(x, w, stride=0)
    with pytest.raises(ValueError, match=r"conv2d.*pad_mode"):
        ops.conv2d(x, w, pad_mode="full")
    with pytest.raises(ValueError, match=r"conv2d.*padding"):
        ops.conv2d(x, w, pad_mode="valid", padding=1)
    with pytest.raises(ValueError, match=r"conv2d.*padding"):
        ops.conv2d(x, w, pad_mode="pad", padding=-1)
    with pytest.raises(ValueError, match=r"conv2d.*groups"):
        ops.conv2d(x, w, groups=0)


# ---- pooling

MAX_CASES = [
    # kernel, stride, padding, dilation, ceil_mode
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (1, 1), True),
    ((2, 3), (1, 2), (1, 0), (1, 1), True),
    ((3, 2), (2, 1), (0, 1), (2, 1), False),
    ((2, 2), (3, 3), (0, 0), (1, 1), True),
]


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", MAX_CASES)
def test_max_pool2d(kernel, stride, padding, dilation, ceil_mode):
    x = RNG.standard_normal((2, 3, 7, 8)).astype(np.float32)
    y, idx = ops.max_pool2d(ms.Tensor(x), kernel, stride, padding, dilation, return_indices=True,
                            ceil_mode=ceil_mode)
    ry, ridx = max_pool_ref(x, kernel, stride, padding, dilation, ceil_mode)
    assert_close(y, ry, ms.float32)
    assert idx.dtype == ms.int64
    np.testing.assert_array_equal(idx.asnumpy(), ridx)


@pytest.mark.parametrize("stride,padding,ceil_mode", [(1, 0, False), (1, 1, False), (2, 0, True),
                                                      (2, 1, False), (2, 1, True)])
@pytest.mark.parametrize("dtype,np_dtype", [(ms.float32, np.float32), (ms.float64, np.float64)],
                         ids=str)
def test_max_pool2d_three_taps_every_width_ties_and_nan(stride, padding, ceil_mode, dtype,
                                                         np_dtype):
    # 3-wide windows take a fixed-shape loop inside the row and the general one at its edges:
    # every width the window fits (from 1 with padding: no inner window) to 13, repeated
    # values (the first of the largest wins) and NaN (the last NaN wins).
    for width in range(3 - 2 * padding, 14):
        x = RNG.integers(0, 4, (2, 2, 5, width)).astype(np_dtype)
        x[0, 0, 1, ::3] = np.nan
        k, s, p = (3, 3), (stride, stride), (padding, padding)
        y, idx = ops.max_pool2d(ms.Tensor(x), k, s, p, return_indices=True, ceil_mode=ceil_mode)
        ry, ridx = max_pool_ref(x, k, s, p, (1, 1), ceil_mode)
        np.testing.assert_array_equal(y.asnumpy(), ry)
        np.testing.assert_array_equal(idx.asnumpy(), ridx)


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES + INT_DTYPES, ids=str)
def test_max_pool2d_dtypes_and_3d_input(dtype, np_dtype):
    x = RNG.permutation(60).reshape(3, 4, 5).astype(np_dtype)
    y = ops.max_pool2d(to_kiln(x, dtype), 2)
    assert y.dtype == dtype
    assert_close(y, max_pool_ref(x, (2, 2), (2, 2), (0, 0), (1, 1), False)[0], dtype)


def test_max_pool2d_nan_and_default_stride():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = np.nan
    y, idx = ops.max_pool2d(ms.Tensor(x), 2, return_indices=True)
    assert np.isnan(y.asnumpy()[0, 0, 0, 0]) and idx.asnumpy()[0, 0, 0, 0] == 1
    assert y.shape == (1, 1, 2, 2) and y.asnumpy()[0, 0, 1, 1] == 15


def test_max_pool2d_non_contiguous():
    x = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)
    y = ops.max_pool2d(non_contiguous(x, ms.float32), 3, 2, 1)
    assert_close(y, max_pool_ref(x, (3, 3), (2, 2), (1, 1), (1, 1), False)[0], ms.float32)


AVG_CASES = [
    # kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ((2, 2), (2, 2), (0, 0), False, True, None),
    ((3, 3), (2, 2), (1, 1), False, True, None),
    ((3, 3), (2, 2), (1, 1), False, False, None),
    ((3, 3), (2, 2), (1, 1), True, True, None),
    ((3, 3), (2, 2), (1, 1), True, False, None),
    ((2, 3), (1, 2), (1, 1), True, True, 5),
    ((3, 2), (3, 3), (0, 1), True, False, None),
]


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad,divisor", AVG_CASES)
def test_avg_pool2d(kernel, stride, padding, ceil_mode, count_include_pad, divisor):
    x = RNG.standard_normal((2, 3, 7, 8)).astype(np.float32)
    y = ops.avg_pool2d(ms.Tensor(x), kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    ry = avg_pool_ref(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    assert_close(y, ry.astype(np.float32), ms.float32, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype,np_dtype", FLOAT_DTYPES, ids=str)
def test_avg_pool2d_float_dtypes(dtype, np_dtype):
    x = RNG.integers(-4, 5, (1, 2, 4, 6)).astype(np_dtype)
    y = ops.avg_pool2d(to_kiln(x, dtype), 2, 2)
    assert y.dtype == dtype
    ref = avg_pool_ref(x, (2, 2), (2, 2), (0, 0), False, True, None)
    assert_close(y, ref.astype(np_dtype), dtype)


def test_adaptive_avg_pool2d_divisible():
    x = RNG.standard_normal((1, 2, 6, 4)).astype(np.float32)
    y = ops.adaptive_avg_pool2d(ms.Tensor(x), (3, 2))
    assert_close(y, x.reshape(1, 2, 3, 2, 2, 2).mean(axis=(3, 5)), ms.float32, rtol=1e-5, atol=1e-6)
    # Sizes that do not divide the input: PyTorch's windows [floor(i*n/o), ceil((i+1)*n/o)).
    y = ops.adaptive_avg_pool2d(ms.Tensor(x), 4)
    ref = np.array([[x[..., (i * 6) // 4:-(-(i + 1) * 6 // 4), (j * 4) // 4:(j + 1)].mean((-2, -1))
                     for j in range(4)] for i in range(4)]).transpose(2, 3, 0, 1)
    assert_close(y, ref, ms.float32, rtol=1e-5, atol=1e-6)


def test_pool_validation_errors():
    x = ms.Tensor(np.ones((1, 1, 4, 4), np.float32))
    with pytest.raises(ValueError, match="max_pool2d.*padding"):
        ops.max_pool2d(x, 2, 1, padding=2)
    with pytest.raises(ValueError, match="max_pool2d.*larger than the padded input"):
        ops.max_pool2d(x, 5)
    with pytest.raises(ValueError, match="max_pool2d.*stride"):
        ops.max_pool2d(x, 2, stride=0)
    with pytest.raises(ValueError, match="max_pool2d.*3-D.*4-D"):
        ops.max_pool2d(ms.Tensor(np.ones((4, 4), np.float32)), 2)
    with pytest.raises(TypeError, match="max_pool2d.*bool"):
        ops.max_pool2d(ms.Tensor(np.ones((1, 1, 4, 4), np.bool_)), 2)
    with pytest.raises(TypeError, match="avg_pool2d.*floating"):
        ops.avg_pool2d(ms.Tensor(np.ones((1, 1, 4, 4), np.int32)), 2, 2)
    with pytest.raises(ValueError, match="avg_pool2d.*kernel_size"):
        ops.avg_pool2d(x, 0)
    with pytest.raises(ValueError, match="avg_pool2d.*divisor_override"):
        ops.avg_pool2d(x, 2, 2, divisor_override=0)
    with pytest.raises(TypeError, match="avg_pool2d.*kernel_size"):
        ops.avg_pool2d(x, "2")


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_pools_and_conv_match_reference_odd_sizes(ceil_mode):
    """The combination PyTorch users hit most (3x3, stride 2, padding 1, on odd and even sizes),
    checked against the NumPy references: values, indices, both count_include_pad, and a
    strided, padded, dilated conv2d."""
    x = RNG.standard_normal((2, 3, 9, 10)).astype(np.float32)
    y, idx = ops.max_pool2d(ms.Tensor(x), 3, 2, 1, return_indices=True, ceil_mode=ceil_mode)
    ry, ridx = max_pool_ref(x, (3, 3), (2, 2), (1, 1), (1, 1), ceil_mode)
    assert_close(y, ry, ms.float32)
    np.testing.assert_array_equal(idx.asnumpy(), ridx)
    for include in (False, True):
        a = ops.avg_pool2d(ms.Tensor(x), 3, 2, 1, ceil_mode=ceil_mode, count_include_pad=include)
        ra = avg_pool_ref(x, (3, 3), (2, 2), (1, 1), ceil_mode, include, None)
        assert_close(a, ra.astype(np.float32), ms.float32, rtol=1e-5, atol=1e-6)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    c = ops.conv2d(ms.Tensor(x), ms.Tensor(w), stride=2, pad_mode="pad", padding=1, dilation=2)
    rc = conv2d_ref(x, w, None, (2, 2), (1, 1, 1, 1), (2, 2))
    assert_close(c, rc.astype(np.float32), ms.float32, rtol=1e-4, atol=1e-4)


def test_avg_pool2d_negative_divisor_override():
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    y = ops.avg_pool2d(ms.Tensor(x), 2, 2, divisor_override=-2)
    assert_close(y, avg_pool_ref(x, (2, 2), (2, 2), (0, 0), False, True, -2).astype(np.float32),
                 ms.float32, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3, 28, 28), (1, 2, 7, 9), (1, 1, 34, 66),
                                   (64, 16, 10, 10), (3, 40, 9, 8), (5, 7, 2, 2)])
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64, np.int32, np.float16])
def test_max_pool2d_2x2_fast_path_matches_the_reference(shape, np_dtype):
    """The branch-free 2x2/stride-2 kernel: ties keep the first tap, NaN wins, -0.0 before
    +0.0 stays -0.0, odd sizes drop the last row/column; values and indices both. LeNet's
    64x16x10x10 spans several blocks of planes; 9 rows take the per-row pass."""
    x = RNG.integers(-3, 4, size=shape).astype(np_dtype)  # many ties
    if np.issubdtype(np_dtype, np.floating):
        flat = x.reshape(-1)
        flat[RNG.choice(flat.size, size=flat.size // 20, replace=False)] = np.nan
        flat[RNG.choice(flat.size, size=flat.size // 10, replace=False)] = -0.0
    y, idx = ops.max_pool2d(ms.Tensor(x), 2, 2, return_indices=True)
    want_y, want_idx = max_pool_ref(x, (2, 2), (2, 2), (0, 0), (1, 1), False)
    np.testing.assert_array_equal(idx.asnumpy(), want_idx)
    got = y.asnumpy()
    np.testing.assert_array_equal(got, want_y)  # NaN == NaN for assert_array_equal
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want_y))


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode",
                         [((3, 3), (2, 2), (1, 1), (1, 1), False),
                          ((3, 2), (1, 2), (1, 0), (2, 1), True),
                          ((2, 3), (3, 1), (0, 1), (1, 2), False),
                          ((3, 3), (2, 2), (1, 1), (1, 1), True)])
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64, np.int32, np.float16])
def test_max_pool2d_separable_path_keeps_the_tap_rule(kernel, stride, padding, dilation,
                                                      ceil_mode, np_dtype):
    """Any other window runs as a row pass then a column pass: ties still keep the first tap in
    row-major order, the last NaN still wins, -0.0 before +0.0 stays -0.0, padded and
    overhanging windows take only their taps inside the plane; values and indices both."""
    x = RNG.integers(-3, 4, size=(3, 4, 11, 13)).astype(np_dtype)  # many ties
    if np.issubdtype(np_dtype, np.floating):
        flat = x.reshape(-1)
        flat[RNG.choice(flat.size, size=flat.size // 20, replace=False)] = np.nan
        flat[RNG.choice(flat.size, size=flat.size // 10, replace=False)] = -0.0
    y, idx = ops.max_pool2d(ms.Tensor(x), kernel, stride, padding, dilation,
                            return_indices=True, ceil_mode=ceil_mode)
    want_y, want_idx = max_pool_ref(x, kernel, stride, padding, dilation, ceil_mode)
    np.testing.assert_array_equal(idx.asnumpy(), want_idx)
    got = y.asnumpy()
    np.testing.assert_array_equal(got, want_y)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want_y))


@pytest.mark.parametrize("groups,stride,pads,dilation",
                         [(1, (1, 1), (0, 0, 0, 0), (1, 1)), (2, (2, 1), (1, 2, 0, 1), (2, 1)),
                          (4, (1, 2), (2, 2, 2, 2), (1, 2))])
def test_conv2d_float64_keeps_double_precision_in_both_modes(groups, stride, pads, dilation):
    # Values whose products need more than float32's 24 bits: rounding through float32 (as
    # oneDNN, which has no float64 convolution, would) misses by ~1e-7; double loops by ~1e-15.
    x = 1 + RNG.random((2, 4, 7, 6)) * 1e-3
    w = 1 + RNG.random((4, 4 // groups, 3, 2)) * 1e-3
    b = RNG.random(4)
    want = conv2d_ref(x, w, b, stride, pads, dilation, groups)

    def conv(x, w, b):
        return ops.conv2d(x, w, b, stride=stride, pad_mode="pad", padding=pads,
                          dilation=dilation, groups=groups)

    for out in (conv(ms.Tensor(x), ms.Tensor(w), ms.Tensor(b)),
                ms.jit(conv)(ms.Tensor(x), ms.Tensor(w), ms.Tensor(b))):
        assert out.dtype == ms.float64
        np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-13, atol=0)


# Few channels at unit stride run kiln's direct loops (kernels/cpu/conv_direct.cc); the rest run
# oneDNN. Both sides of the choice, and the direct loops' edges: channel blocks of 8 with a
# short last block, flat position blocks of 32 that straddle rows, padding, dilation.
DIRECT_CONV_CASES = [
    # (N, C, H, W), (O, C, kh, kw), pads(t, b, l, r), dilation, bias
    ((64, 1, 32, 32), (6, 1, 5, 5), (0, 0, 0, 0), (1, 1), True),     # LeNet's first
    ((64, 6, 14, 14), (16, 6, 5, 5), (0, 0, 0, 0), (1, 1), True),    # LeNet's second
    ((3, 2, 9, 37), (13, 2, 3, 3), (1, 2, 0, 3), (1, 1), False),     # 8 + 5 channels, pads
    ((2, 3, 7, 8), (32, 3, 2, 3), (2, 0, 1, 1), (2, 2), True),       # 4 full blocks, dilation
    ((1, 16, 6, 5), (7, 16, 5, 5), (0, 0, 0, 0), (1, 1), True),      # 400 taps, kernel = rows
    ((5, 4, 1, 40), (3, 4, 1, 4), (0, 0, 2, 2), (1, 1), False),      # one row
    ((2, 3, 8, 8), (40, 3, 3, 3), (1, 1, 1, 1), (1, 1), True),       # too many: oneDNN
    ((2, 17, 8, 8), (8, 17, 5, 5), (0, 0, 0, 0), (1, 1), True),      # 425 taps: oneDNN
    # Large images run in bands of output rows (with the rows their taps reach below them).
    ((1, 1, 300, 400), (3, 1, 9, 9), (2, 3, 4, 1), (2, 1), True),     # 5 bands, the last short
    ((2, 3, 150, 700), (8, 3, 3, 3), (1, 1, 1, 1), (1, 1), False),    # 10 bands per image
    ((1, 2, 5, 20000), (4, 2, 3, 3), (0, 0, 1, 1), (1, 1), True),     # one row per band
]


@pytest.mark.parametrize("xs,ws,pads,dilation,has_bias", DIRECT_CONV_CASES)
@pytest.mark.parametrize("graph", [False, True], ids=["pynative", "graph"])
def test_conv2d_few_channels_match_the_reference(xs, ws, pads, dilation, has_bias, graph):
    x, w = RNG.standard_normal(xs).astype(np.float32), RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32) if has_bias else None

    def conv(x, w, b):
        return ops.conv2d(x, w, b, pad_mode="pad", padding=pads, dilation=dilation)

    fn = ms.jit(conv) if graph else conv
    out = fn(ms.Tensor(x), ms.Tensor(w), None if b is None else ms.Tensor(b))
    want = conv2d_ref(x, w, b, (1, 1), pads, dilation)
    assert out.shape == want.shape
    assert_close(out, want.astype(np.float32), ms.float32, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("graph", [False, True], ids=["pynative", "graph"])
def test_conv2d_input_gradient_over_bands_matches_float64(graph):
    # At unit stride the float32 input gradient is a direct convolution too, banded for large
    # images; the float64 one runs kiln's double-precision loops.
    x = RNG.standard_normal((2, 2, 200, 300))
    w = RNG.standard_normal((5, 2, 5, 3))
    g = RNG.standard_normal((2, 5, 198, 300))

    def loss(x, w, g):
        return (ops.conv2d(x, w, pad_mode="pad", padding=(1, 1, 1, 1)) * g).sum()

    grad = ms.grad(loss)
    fn = ms.jit(grad) if graph else grad
    got = fn(*(ms.Tensor(a.astype(np.float32)) for a in (x, w, g)))
    want = grad(ms.Tensor(x), ms.Tensor(w), ms.Tensor(g)).asnumpy()
    assert_close(got, want.astype(np.float32), ms.float32, rtol=1e-4, atol=1e-4)


def test_conv2d_few_channels_propagate_nan_and_inf_to_their_windows_only():
    x = np.zeros((1, 1, 6, 40), np.float32)
    x[0, 0, 2, 35], x[0, 0, 4, 3] = np.nan, np.inf
    w = np.ones((3, 1, 2, 2), np.float32)
    out = ops.conv2d(ms.Tensor(x), ms.Tensor(w)).asnumpy()
    want = conv2d_ref(x, w)  # NaN in the four windows over the NaN, inf in those over the inf
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(want))
    assert np.all(out[np.isfinite(want)] == 0)
