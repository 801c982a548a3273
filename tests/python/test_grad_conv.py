"""Gradients of conv2d, max_pool2d and avg_pool2d, and their backward ops.

conv2d runs in float32 on oneDNN whatever the input dtype, so its gradients are checked against
float64 NumPy reference gradients (the adjoint of test_conv's direct convolution) at float32
tolerances; a central difference with a large step is exact for a function linear in the
perturbed operand, which gives an independent check. The pools run natively in float64, so
they also go through gradcheck's tight finite differences.
"""
import itertools

import numpy as np
import pytest
from gradcheck import check_grad, numeric_grads
from helpers import assert_close
from test_conv import avg_pool_ref, conv2d_ref, max_pool_ref

import kiln as ms
from kiln import Tensor, ops
from kiln.ops._core import call

RNG = np.random.default_rng(7)
F32_TOL = dict(rtol=1e-4, atol=1e-4)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ---- NumPy reference gradients (float64)

def conv2d_grads_ref(x, w, dy, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """(dx, dw, dbias) of sum(conv2d(x, w, b) * dy): the adjoint of conv2d_ref, tap by tap."""
    x64 = np.pad(x.astype(np.float64), ((0, 0), (0, 0), pads[:2], pads[2:]))
    w64, dy = w.astype(np.float64), dy.astype(np.float64)
    dxp, dw = np.zeros_like(x64), np.zeros_like(w64)
    o, cg, kh, kw = w.shape
    og = o // groups
    oh, ow = dy.shape[2:]
    for g in range(groups):
        cs, os_ = slice(g * cg, (g + 1) * cg), slice(g * og, (g + 1) * og)
        for i, j in itertools.product(range(kh), range(kw)):
            h0, w0 = i * dilation[0], j * dilation[1]
            rows = slice(h0, h0 + stride[0] * (oh - 1) + 1, stride[0])
            cols = slice(w0, w0 + stride[1] * (ow - 1) + 1, stride[1])
            dxp[:, cs, rows, cols] += np.einsum("nohw,oc->nchw", dy[:, os_], w64[os_, :, i, j])
            dw[os_, :, i, j] = np.einsum("nchw,nohw->oc", x64[:, cs, rows, cols], dy[:, os_])
    h, wd = x.shape[2:]
    dx = dxp[:, :, pads[0]:pads[0] + h, pads[2]:pads[2] + wd]
    return dx, dw, dy.sum(axis=(0, 2, 3))


def max_pool_grad_ref(x, dy, *args):
    """dy scattered (summed) onto each window's maximum, found by test_conv's reference."""
    _, idx = max_pool_ref(x, *args)
    h, w = x.shape[-2:]
    dx = np.zeros((int(np.prod(x.shape[:-2])), h * w))
    flat_idx, flat_dy = idx.reshape(dx.shape[0], -1), dy.reshape(dx.shape[0], -1)
    for plane in range(dx.shape[0]):
        np.add.at(dx[plane], flat_idx[plane], flat_dy[plane])
    return dx.reshape(x.shape)


def avg_pool_grad_ref(x, dy, k, s, p, ceil_mode, count_include_pad, divisor_override):
    """The adjoint of avg_pool_ref: each output's dy / divisor spread over its window."""
    h, w = x.shape[-2:]
    oh, ow = dy.shape[-2:]
    planes = dy.reshape(-1, oh, ow).astype(np.float64)
    dx = np.zeros((planes.shape[0], h, w))
    for i, j in itertools.product(range(oh), range(ow)):
        r0, c0 = i * s[0] - p[0], j * s[1] - p[1]
        r1, c1 = min(r0 + k[0], h + p[0]), min(c0 + k[1], w + p[1])
        padded = (r1 - r0) * (c1 - c0)
        r0, c0, r1, c1 = max(r0, 0), max(c0, 0), min(r1, h), min(c1, w)
        div = divisor_override or (padded if count_include_pad else (r1 - r0) * (c1 - c0))
        if div:
            dx[:, r0:r1, c0:c1] += (planes[:, i, j] / div)[:, None, None]
    return dx.reshape(x.shape)


def test_references_are_adjoints():
    """<conv(x, w), dy> == <x, dx> == <w, dw>: the reference gradients themselves are right."""
    x, w = rand(2, 4, 7, 6).astype(np.float64), rand(6, 2, 3, 2).astype(np.float64)
    args = ((2, 1), (1, 0, 2, 1), (1, 2), 2)
    y = conv2d_ref(x, w, None, *args)
    dy = RNG.standard_normal(y.shape)
    dx, dw, _ = conv2d_grads_ref(x, w, dy, *args)
    np.testing.assert_allclose(np.sum(y * dy), np.sum(x * dx), rtol=1e-10)
    np.testing.assert_allclose(np.sum(y * dy), np.sum(w * dw), rtol=1e-10)
    pool_args = ((3, 3), (2, 2), (1, 1), True, False, None)
    xp = RNG.standard_normal((2, 7, 8))
    yp = avg_pool_ref(xp, *pool_args)
    dyp = RNG.standard_normal(yp.shape)
    np.testing.assert_allclose(np.sum(yp * dyp),
                               np.sum(xp * avg_pool_grad_ref(xp, dyp, *pool_args)), rtol=1e-10)


# ---- conv2d: every option against the reference gradients

CONV_CASES = [
    # (N, C, H, W), (O, C/g, kh, kw), stride, pads(t, b, l, r), dilation, groups, bias
    ((2, 3, 8, 8), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),
    ((1, 3, 9, 7), (5, 3, 3, 2), (2, 1), (0, 0, 0, 0), (1, 1), 1, False),
    # rows/cols no window reads
    ((2, 3, 8, 9), (4, 3, 3, 3), (2, 2), (0, 0, 0, 0), (1, 1), 1, True),
    ((2, 4, 10, 10), (6, 2, 3, 3), (1, 2), (1, 1, 2, 2), (1, 1), 2, True),
    ((1, 2, 11, 9), (3, 2, 3, 3), (2, 2), (1, 0, 0, 2), (2, 1), 1, True),  # asymmetric pads
    ((2, 4, 6, 6), (4, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4, False),  # depthwise
    ((2, 6, 9, 9), (9, 2, 2, 3), (3, 2), (2, 2, 1, 1), (2, 3), 3, True),   # everything at once
    ((1, 1, 5, 5), (1, 1, 5, 5), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),   # kernel = input
    ((3, 2, 4, 4), (2, 2, 1, 1), (3, 3), (0, 0, 0, 0), (1, 1), 1, True),   # 1x1, big stride
]


def conv_grads(x, w, b, dy, **kwargs):
    """kiln's (dx, dw[, db]) of sum(conv2d(x, w, b) * dy)."""
    args = (Tensor(x), Tensor(w)) + (() if b is None else (Tensor(b),))

    def fn(xx, ww, bb=None):
        return ops.mul(ops.conv2d(xx, ww, bb, **kwargs), Tensor(dy))

    return ms.grad(fn, tuple(range(len(args))))(*args)


@pytest.mark.parametrize("xs,ws,stride,pads,dilation,groups,has_bias", CONV_CASES)
def test_conv2d_grad_matches_reference(xs, ws, stride, pads, dilation, groups, has_bias):
    x, w = rand(*xs), rand(*ws)
    b = rand(ws[0]) if has_bias else None
    y = conv2d_ref(x, w, b, stride, pads, dilation, groups)
    dy = rand(*y.shape)
    grads = conv_grads(x, w, b, dy, stride=stride, pad_mode="pad", padding=pads, dilation=dilation,
                       groups=groups)
    want = conv2d_grads_ref(x, w, dy, stride, pads, dilation, groups)
    assert len(grads) == (3 if has_bias else 2)
    for got, ref in zip(grads, want):
        assert_close(got, ref.astype(np.float32), ms.float32, **F32_TOL)


# Shapes that oneDNN runs in its own layouts (channel blocks, channels-last), reordered to and
# from kiln's plain ones through reused scratch buffers: few input channels at a stride (the
# channels-last input of a network's first layer), channel counts that leave a block partly
# padded, a strided 1x1, grouped and depthwise.
LAYOUT_CASES = [
    ((2, 3, 30, 30), (16, 3, 7, 7), (2, 2), (3, 3, 3, 3), 1),
    ((2, 12, 10, 10), (20, 12, 3, 3), (1, 1), (1, 1, 1, 1), 1),
    ((2, 16, 9, 9), (32, 16, 1, 1), (2, 2), (0, 0, 0, 0), 1),
    ((2, 16, 8, 8), (16, 4, 3, 3), (1, 1), (1, 1, 1, 1), 4),
    ((2, 16, 8, 8), (16, 1, 3, 3), (2, 2), (1, 1, 1, 1), 16),
]


def check_conv_and_grads(xs, ws, mode, **kwargs):
    """conv2d and its three gradients on fresh operands against the references."""
    stride, pads, groups = kwargs["stride"], kwargs["padding"], kwargs["groups"]
    x, w, b = rand(*xs), rand(*ws), rand(ws[0])
    y = conv2d_ref(x, w, b, stride, pads, (1, 1), groups)
    dy = rand(*y.shape)

    def fn(xx, ww, bb):
        return ops.mul(ops.conv2d(xx, ww, bb, **kwargs), Tensor(dy))

    grad = ms.grad(fn, (0, 1, 2))
    if mode == "graph":
        grad = ms.jit(grad)
    grads = grad(Tensor(x), Tensor(w), Tensor(b))
    assert_close(ops.conv2d(Tensor(x), Tensor(w), Tensor(b), **kwargs), y.astype(np.float32),
                 ms.float32, **F32_TOL)
    want = conv2d_grads_ref(x, w, dy, stride, pads, (1, 1), groups)
    for got, ref in zip(grads, want):
        assert_close(got, ref.astype(np.float32), ms.float32, **F32_TOL)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("xs,ws,stride,pads,groups", LAYOUT_CASES)
def test_conv2d_in_onednn_layouts_matches_reference(xs, ws, stride, pads, groups, mode):
    for _ in range(2):  # the second call runs on scratch buffers the first one freed
        check_conv_and_grads(xs, ws, mode, stride=stride, pad_mode="pad", padding=pads,
                             groups=groups)


@pytest.mark.parametrize("size,kernel,stride,dilation", [(8, 3, 1, 1), (9, 3, 2, 1), (10, 4, 3, 1),
                                                          (7, 3, 2, 2), (6, 2, 1, 1)])
def test_conv2d_grad_pad_mode_same(size, kernel, stride, dilation):
    x, w, b = rand(2, 3, size, size + 1), rand(4, 3, kernel, kernel), rand(4)
    pads = []
    for n in (size, size + 1):  # TensorFlow's split, as test_conv checks the forward with
        out = -(-n // stride)
        need = max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - n)
        pads += [need // 2, need - need // 2]
    dy = rand(2, 4, -(-size // stride), -(-(size + 1) // stride))
    grads = conv_grads(x, w, b, dy, stride=stride, pad_mode="same", dilation=dilation)
    want = conv2d_grads_ref(x, w, dy, (stride,) * 2, pads, (dilation,) * 2)
    for got, ref in zip(grads, want):
        assert_close(got, ref.astype(np.float32), ms.float32, **F32_TOL)


def test_conv2d_grad_pad_mode_valid():
    x, w = rand(2, 2, 7, 6), rand(3, 2, 3, 3)
    dy = rand(2, 3, 5, 4)
    grads = conv_grads(x, w, None, dy, pad_mode="valid")
    for got, ref in zip(grads, conv2d_grads_ref(x, w, dy)):
        assert_close(got, ref.astype(np.float32), ms.float32, **F32_TOL)


@pytest.mark.parametrize("case", [0, 3, 4, 6])
def test_conv2d_grad_finite_differences(case):
    """Independent of the reference: conv2d is linear in each operand, so a central difference
    with a large step is exact up to float32 rounding."""
    xs, ws, stride, pads, dilation, groups, _ = CONV_CASES[case]
    x, w = rand(*xs, dtype=np.float64), rand(*ws, dtype=np.float64)
    b = rand(ws[0], dtype=np.float64)

    def fn(xx, ww, bb):
        return ops.conv2d(xx, ww, bb, stride=stride, pad_mode="pad", padding=pads,
                          dilation=dilation, groups=groups)

    weight = RNG.uniform(0.5, 1.5, size=fn(Tensor(x), Tensor(w), Tensor(b)).shape)
    analytic = ms.grad(lambda *a: ops.mul(fn(*a), Tensor(weight)), (0, 1, 2))(
        Tensor(x), Tensor(w), Tensor(b))
    numeric = numeric_grads(fn, [x, w, b], weight, eps=0.5)
    for got, want in zip(analytic, numeric):
        assert got.dtype == ms.float64
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype,np_dtype,tol", [(ms.float16, np.float16, 2e-2),
                                                (ms.bfloat16, np.float32, 1e-1),
                                                (ms.float64, np.float64, 1e-4)], ids=str)
def test_conv2d_grad_other_float_dtypes(dtype, np_dtype, tol):
    x = RNG.integers(-2, 3, (2, 2, 5, 5)).astype(np_dtype)
    w = RNG.integers(-2, 3, (3, 2, 2, 2)).astype(np_dtype)
    b = RNG.integers(-2, 3, (3,)).astype(np_dtype)
    grads = ms.grad(lambda xx, ww, bb: ops.conv2d(xx, ww, bb, pad_mode="pad", padding=1),
                    (0, 1, 2))(Tensor(x, dtype), Tensor(w, dtype), Tensor(b, dtype))
    dy = np.ones((2, 3, 6, 6))
    for got, ref in zip(grads, conv2d_grads_ref(x, w, dy, pads=(1, 1, 1, 1))):
        assert got.dtype == dtype
        np.testing.assert_allclose(got.asnumpy().astype(np.float64), ref, rtol=tol, atol=tol)


def test_conv2d_grad_only_what_is_asked_and_mixed_dtypes():
    x, w = rand(1, 2, 5, 5), rand(3, 2, 3, 3, dtype=np.float64)
    dy = np.ones((1, 3, 3, 3))
    dx = ms.grad(lambda xx: ops.conv2d(xx, Tensor(w)))(Tensor(x))
    assert dx.dtype == ms.float32
    assert_close(dx, conv2d_grads_ref(x, w, dy)[0].astype(np.float32), ms.float32, **F32_TOL)
    dw = ms.grad(lambda ww: ops.conv2d(Tensor(x), ww))(Tensor(w))
    assert dw.dtype == ms.float64
    np.testing.assert_allclose(dw.asnumpy(), conv2d_grads_ref(x, w, dy)[1], **F32_TOL)


def test_conv2d_grad_non_contiguous_operands():
    from helpers import non_contiguous
    x, w = rand(1, 2, 5, 6), rand(2, 2, 3, 3)
    dx, dw = ms.grad(lambda xx, ww: ops.conv2d(xx, ww), (0, 1))(
        non_contiguous(x, ms.float32), non_contiguous(w, ms.float32))
    want = conv2d_grads_ref(x, w, np.ones((1, 2, 3, 4)))
    assert_close(dx, want[0].astype(np.float32), ms.float32, **F32_TOL)
    assert_close(dw, want[1].astype(np.float32), ms.float32, **F32_TOL)


def test_conv2d_second_order():
    """Gradients of gradients run the backward ops' own rules (conv2d and the other backward op).
    With a squared output, dy = 2 conv(x, w) c depends on x and w too, so every branch of both
    rules runs; the first derivatives are quadratic in each operand, so a large-step central
    difference is exact up to rounding."""
    x, w = rand(1, 2, 6, 5, dtype=np.float64), rand(3, 2, 3, 2, dtype=np.float64)
    c = rand(1, 3, 3, 5, dtype=np.float64)
    d, e = rand(*x.shape, dtype=np.float64), rand(*w.shape, dtype=np.float64)
    kwargs = dict(stride=(2, 1), pad_mode="pad", padding=(1, 0, 0, 1))

    def first(xx, ww):  # (dx, dw) of <conv(x, w)^2, c>
        return ms.grad(lambda a, b: ops.mul(ops.square(ops.conv2d(a, b, **kwargs)), Tensor(c)),
                       (0, 1))(xx, ww)

    def projected(xx, ww):  # <dx, d> + <dw, e>
        dx, dw = first(xx, ww)
        return ops.add(ops.sum(ops.mul(dx, Tensor(d))), ops.sum(ops.mul(dw, Tensor(e))))

    got = ms.grad(projected, (0, 1))(Tensor(x), Tensor(w))
    num = numeric_grads(projected, [x, w], np.ones(()), eps=0.5)
    for g, n in zip(got, num):
        np.testing.assert_allclose(g.asnumpy(), n, rtol=2e-3, atol=2e-3)


# ---- the backward ops called directly

def test_conv2d_backward_ops_direct():
    x, w = rand(2, 4, 7, 7), rand(6, 2, 3, 3)
    attrs = ((2, 2), (1, 1, 1, 1), (1, 1), 2)
    dy = rand(2, 6, 4, 4)
    dx = call("conv2d_backward_input", (Tensor(dy), Tensor(w)), ((2, 4, 7, 7),) + attrs)
    dw = call("conv2d_backward_weight", (Tensor(dy), Tensor(x)), ((6, 2, 3, 3),) + attrs)
    want = conv2d_grads_ref(x, w, dy, *attrs)
    assert_close(dx, want[0].astype(np.float32), ms.float32, **F32_TOL)
    assert_close(dw, want[1].astype(np.float32), ms.float32, **F32_TOL)


def test_conv2d_backward_ops_validate():
    dy, w = Tensor(rand(1, 2, 3, 3)), Tensor(rand(2, 1, 3, 3))
    attrs = ((1, 1), (0, 0, 0, 0), (1, 1), 1)
    with pytest.raises(ValueError, match="conv2d_backward_input.*dy of shape"):
        call("conv2d_backward_input", (dy, w), ((1, 1, 6, 6),) + attrs)
    with pytest.raises(ValueError, match="conv2d_backward_input.*input_shape"):
        call("conv2d_backward_input", (dy, w), ((1, 1, 5),) + attrs)
    with pytest.raises(ValueError, match="conv2d_backward_weight.*input channels"):
        call("conv2d_backward_weight", (dy, Tensor(rand(1, 3, 5, 5))), ((2, 1, 3, 3),) + attrs)


def test_conv2d_grad_empty_batch():
    x, w, b = Tensor(np.zeros((0, 2, 5, 5), np.float32)), Tensor(rand(3, 2, 3, 3)), Tensor(rand(3))
    dx, dw, db = ms.grad(lambda xx, ww, bb: ops.conv2d(xx, ww, bb), (0, 1, 2))(x, w, b)
    assert dx.shape == (0, 2, 5, 5)
    np.testing.assert_array_equal(dw.asnumpy(), np.zeros((3, 2, 3, 3), np.float32))
    np.testing.assert_array_equal(db.asnumpy(), np.zeros(3, np.float32))


# ---- pooling

MAX_CASES = [
    # kernel, stride, padding, dilation, ceil_mode
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (1, 1), True),
    ((2, 3), (1, 2), (1, 0), (1, 1), True),   # overlapping windows: one input, many maxima
    ((3, 2), (2, 1), (0, 1), (2, 1), False),  # dilation
    ((2, 2), (3, 3), (0, 0), (1, 1), True),   # gaps between windows
]


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", MAX_CASES)
def test_max_pool2d_grad(kernel, stride, padding, dilation, ceil_mode):
    x = RNG.permutation(2 * 3 * 7 * 8).reshape(2, 3, 7, 8) / 10.0  # distinct: no ties
    def fn(a):
        return ops.max_pool2d(a, kernel, stride, padding, dilation, ceil_mode=ceil_mode)

    check_grad(fn, x)
    dy = rand(*fn(Tensor(x)).shape)
    for dtype in (np.float32, np.float64):
        got = ms.grad(lambda a, dtype=dtype: ops.mul(fn(a), Tensor(dy.astype(dtype))))(
            Tensor(x.astype(dtype)))
        ref = max_pool_grad_ref(x, dy, kernel, stride, padding, dilation, ceil_mode)
        assert got.dtype == Tensor(x.astype(dtype)).dtype
        np.testing.assert_allclose(got.asnumpy(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype,np_dtype", [(ms.float16, np.float16), (ms.bfloat16, np.float32)],
                         ids=str)
def test_max_pool2d_grad_half_and_3d_input(dtype, np_dtype):
    x = RNG.permutation(3 * 6 * 6).reshape(3, 6, 6).astype(np_dtype)
    got = ms.grad(lambda a: ops.max_pool2d(a, 3, 2, 1))(Tensor(x, dtype))
    assert got.dtype == dtype and got.shape == (3, 6, 6)
    ref = max_pool_grad_ref(x.astype(np.float64), np.ones((3, 3, 3)), (3, 3), (2, 2), (1, 1),
                            (1, 1), False)
    np.testing.assert_array_equal(got.asnumpy().astype(np.float64), ref)


def test_max_pool2d_grad_ignores_indices_output():
    x = Tensor(RNG.standard_normal((1, 2, 4, 4)))
    dx = ms.grad(lambda a: ops.max_pool2d(a, 2, return_indices=True)[0])(x)
    assert dx.asnumpy().sum() == 8  # one maximum per window, 2 planes x 4 windows


def test_max_pool2d_grad_op_rejects_bad_indices():
    dy, x = Tensor(np.ones((1, 1, 2, 2))), Tensor(np.ones((1, 1, 4, 4)))
    attrs = ((2, 2), (2, 2), (0, 0), (1, 1), False)
    ok = call("max_pool2d_grad", (dy, x, Tensor(np.array([[[[0, 3], [9, 15]]]], np.int64))), attrs)
    np.testing.assert_array_equal(ok.asnumpy().reshape(-1).nonzero()[0], [0, 3, 9, 15])
    with pytest.raises(IndexError, match="max_pool2d_grad: indices .* plane of 16 elements"):
        call("max_pool2d_grad", (dy, x, Tensor(np.array([[[[0, 3], [9, 16]]]], np.int64))), attrs)
    with pytest.raises(ValueError, match="max_pool2d_grad.*dy of shape"):
        call("max_pool2d_grad", (Tensor(np.ones((1, 1, 3, 2))), x,
                                 Tensor(np.zeros((1, 1, 2, 2), np.int64))), attrs)


def test_max_pool2d_second_order():
    """max_pool2d_grad's own rule (a gather at the indices) through a gradient of a gradient."""
    x = RNG.permutation(2 * 6 * 5).reshape(1, 2, 6, 5) / 7.0
    c = RNG.standard_normal((1, 2, 4, 3))

    def dx_of(a):  # d/dx <max_pool2d(x)^2, c>: the scatter's dy = 2 max_pool2d(x) c depends on x
        return ms.grad(lambda b: ops.mul(ops.square(ops.max_pool2d(b, 3, 2, 1, ceil_mode=True)),
                                         Tensor(c)))(a)

    check_grad(dx_of, x, rtol=1e-5, atol=1e-6)


AVG_CASES = [
    # kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ((2, 2), (2, 2), (0, 0), False, True, None),
    ((3, 3), (2, 2), (1, 1), False, True, None),
    ((3, 3), (2, 2), (1, 1), False, False, None),
    ((3, 3), (2, 2), (1, 1), True, True, None),
    ((3, 3), (2, 2), (1, 1), True, False, None),
    ((2, 3), (1, 2), (1, 1), True, True, 5),
    ((3, 2), (3, 3), (0, 1), True, False, None),
    ((3, 3), (1, 1), (1, 1), False, True, -4),
]


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad,divisor", AVG_CASES)
def test_avg_pool2d_grad(kernel, stride, padding, ceil_mode, count_include_pad, divisor):
    x = RNG.standard_normal((2, 3, 7, 8))
    def fn(a):
        return ops.avg_pool2d(a, kernel, stride, padding, ceil_mode, count_include_pad, divisor)

    check_grad(fn, x)
    dy = rand(*fn(Tensor(x)).shape)
    ref = avg_pool_grad_ref(x, dy, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    got = ms.grad(lambda a: ops.mul(fn(a), Tensor(dy)))(Tensor(x.astype(np.float32)))
    assert_close(got, ref.astype(np.float32), ms.float32, rtol=1e-5, atol=1e-6)


def test_avg_pool2d_grad_float16_and_second_order():
    x = RNG.integers(-4, 5, (2, 4, 6)).astype(np.float16)
    got = ms.grad(lambda a: ops.avg_pool2d(a, 2, 2))(Tensor(x))
    assert got.dtype == ms.float16
    np.testing.assert_array_equal(got.asnumpy(), np.full(x.shape, 0.25, np.float16))
    # avg_pool2d_grad's rule is avg_pool2d: check a gradient of a gradient numerically.
    xs, c = RNG.standard_normal((1, 1, 5, 5)), RNG.standard_normal((1, 1, 3, 3))

    def dx_of(a):  # d/dx <avg_pool2d(x)^2, c>
        return ms.grad(lambda b: ops.mul(ops.square(ops.avg_pool2d(b, 3, 2, 1, True, False)),
                                         Tensor(c)))(a)

    check_grad(dx_of, xs, rtol=1e-5, atol=1e-7)


# ---- a small conv net trains

def test_conv_net_gradients_reach_every_parameter():
    from kiln import nn

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, pad_mode="pad", padding=1, has_bias=True)
            self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
            self.avg = nn.AvgPool2d(kernel_size=2, stride=2)
            self.dense = nn.Dense(4 * 2 * 2, 3)

        def construct(self, x):
            x = self.avg(self.pool(ops.relu(self.conv(x))))
            return self.dense(ops.reshape(x, (x.shape[0], -1)))

    net = Net()
    x = Tensor(rand(2, 1, 8, 8))
    params = net.trainable_params()
    def loss_fn(a):
        return ops.sum(ops.square(net(a)))

    grads = ms.grad(loss_fn, None, params)(x)
    assert len(grads) == len(params) == 4
    for p, g in zip(params, grads):
        assert g.shape == p.shape and float(np.abs(g.asnumpy()).sum()) > 0, p.name


def test_conv2d_float64_gradients_match_central_differences_closely():
    # In float64 the adjoint ops run double loops too, so the gradient agrees with central
    # differences far below float32's resolution.
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 4, 5, 5)), rng.standard_normal((2, 2, 2, 3))
    weight = rng.standard_normal((1, 2, 3, 3))

    def conv(x, w):
        return ops.conv2d(x, w, stride=(2, 1), pad_mode="pad", padding=(1, 0, 0, 0), groups=2)

    def loss(x, w):
        return (conv(x, w) * Tensor(weight)).sum()

    want_dx, want_dw = numeric_grads(conv, [x.copy(), w.copy()], weight)
    grad = ms.grad(loss, grad_position=(0, 1))
    for dx, dw in (grad(Tensor(x), Tensor(w)), ms.jit(grad)(Tensor(x), Tensor(w))):
        assert dx.dtype == ms.float64 and dw.dtype == ms.float64
        np.testing.assert_allclose(dx.asnumpy(), want_dx, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(dw.asnumpy(), want_dw, rtol=1e-8, atol=1e-8)


# At unit stride the input gradient runs kiln's direct loops as the convolution of dy with the
# flipped, transposed weights (conv_direct.h) where the channels are few; padding beyond the
# kernel's reach, too many channels or taps, and strides run oneDNN.
DIRECT_GRAD_CASES = [
    # (N, C, H, W), (O, C, kh, kw), pads(t, b, l, r), dilation
    ((8, 6, 14, 14), (16, 6, 5, 5), (0, 0, 0, 0), (1, 1)),   # LeNet's second convolution
    ((2, 1, 28, 28), (6, 1, 5, 5), (2, 2, 2, 2), (1, 1)),    # LeNet's first (pad same)
    ((2, 3, 9, 11), (13, 3, 3, 2), (1, 2, 0, 1), (2, 1)),    # asymmetric, dilated, 8 + 5
    ((1, 2, 6, 6), (3, 2, 3, 3), (3, 0, 0, 3), (1, 1)),      # a pad past the reach: oneDNN
    ((2, 40, 5, 5), (4, 40, 3, 3), (1, 1, 1, 1), (1, 1)),    # 40 input channels: oneDNN
]


@pytest.mark.parametrize("xs,ws,pads,dilation", DIRECT_GRAD_CASES)
@pytest.mark.parametrize("graph", [False, True], ids=["pynative", "graph"])
def test_conv2d_grad_few_channels_matches_reference(xs, ws, pads, dilation, graph):
    x, w = rand(*xs), rand(*ws)
    y = conv2d_ref(x, w, None, (1, 1), pads, dilation)
    dy = rand(*y.shape)

    def loss(xx, ww):
        out = ops.conv2d(xx, ww, pad_mode="pad", padding=pads, dilation=dilation)
        return ops.mul(out, Tensor(dy))

    grad_fn = ms.grad(loss, (0, 1))
    dx, dw = (ms.jit(grad_fn) if graph else grad_fn)(Tensor(x), Tensor(w))
    want_dx, want_dw, _ = conv2d_grads_ref(x, w, dy, (1, 1), pads, dilation)
    assert_close(dx, want_dx.astype(np.float32), ms.float32, **F32_TOL)
    assert_close(dw, want_dw.astype(np.float32), ms.float32, **F32_TOL)


# Depthwise convolutions (groups == input channels) run kiln's own loops in float32: strides,
# dilations, asymmetric pads, a channel multiplier, rows that end partway through a vector, and a
# kernel of more taps than the loops hold in registers at once. Planes of up to 16 x 16 outputs
# whose channels come in eights run the blocked loops (eight channels to a vector), the rest the
# per-plane ones.
DEPTHWISE_CASES = [
    # (N, C, H, W), (O, 1, kh, kw), stride, pads(t, b, l, r), dilation
    ((2, 8, 14, 14), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),     # MobileNet's 3x3
    ((2, 8, 15, 37), (8, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),     # strided, ragged rows
    ((1, 4, 12, 19), (8, 1, 3, 5), (1, 3), (2, 0, 1, 3), (2, 1)),     # multiplier 2, dilated
    ((2, 3, 16, 16), (3, 1, 7, 7), (1, 1), (3, 3, 3, 3), (1, 1)),     # 49 taps (ConvNeXt's)
    ((1, 6, 9, 9), (6, 1, 3, 3), (3, 2), (0, 2, 0, 1), (1, 2)),       # rows no window reads
    ((2, 5, 7, 7), (5, 1, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),       # a 7x7 plane, no pad
    ((1, 3, 10, 40), (3, 1, 3, 3), (2, 2), (0, 1, 0, 1), (1, 1)),     # stride 2 from column 0
    ((1, 4, 8, 35), (4, 1, 3, 3), (1, 2), (1, 1, 2, 2), (1, 1)),      # rows swept as one
    ((2, 16, 9, 11), (16, 1, 7, 7), (1, 1), (3, 2, 3, 4), (1, 1)),    # blocked, 49 taps
    ((1, 8, 10, 12), (8, 1, 3, 3), (1, 1), (2, 2, 1, 0), (2, 2)),     # blocked, dilated
    ((2, 8, 12, 12), (8, 1, 3, 3), (1, 1), (3, 0, 0, 0), (1, 1)),     # blocked, pad past reach
    ((1, 24, 20, 20), (24, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),   # 8s, but a large plane
    ((1, 2, 5, 2003), (2, 1, 3, 3), (1, 1000), (0, 0, 0, 0), (1, 1)),  # a thousand phases
    ((1, 8, 5, 2003), (8, 1, 3, 3), (2, 1000), (1, 0, 0, 0), (1, 1)),  # the same, blocked
]


@pytest.mark.parametrize("xs,ws,stride,pads,dilation", DEPTHWISE_CASES)
@pytest.mark.parametrize("graph", [False, True], ids=["pynative", "graph"])
def test_conv2d_depthwise_matches_reference(xs, ws, stride, pads, dilation, graph):
    x, w, b = rand(*xs), rand(*ws), rand(ws[0])
    groups = xs[1]
    y = conv2d_ref(x, w, b, stride, pads, dilation, groups)
    dy = rand(*y.shape)
    kwargs = dict(stride=stride, pad_mode="pad", padding=pads, dilation=dilation, groups=groups)

    def loss(xx, ww, bb):
        return ops.mul(ops.conv2d(xx, ww, bb, **kwargs), Tensor(dy))

    conv = ms.jit(lambda xx, ww, bb: ops.conv2d(xx, ww, bb, **kwargs)) if graph else None
    out = (conv or (lambda *a: ops.conv2d(*a, **kwargs)))(Tensor(x), Tensor(w), Tensor(b))
    assert_close(out, y.astype(np.float32), ms.float32, **F32_TOL)
    grad_fn = ms.grad(loss, (0, 1, 2))
    grads = (ms.jit(grad_fn) if graph else grad_fn)(Tensor(x), Tensor(w), Tensor(b))
    for got, ref in zip(grads, conv2d_grads_ref(x, w, dy, stride, pads, dilation, groups)):
        assert_close(got, ref.astype(np.float32), ms.float32, **F32_TOL)


@pytest.mark.parametrize("channels", [2, 8], ids=["per-plane", "blocked"])
def test_conv2d_depthwise_gradients_keep_infinities_where_they_reach(channels):
    """An inf weight or input reaches only the gradients of the taps that meet it: the zero
    padding of a row must not turn into 0 * inf = nan elsewhere."""
    x, w = rand(1, channels, 6, 11), rand(channels, 1, 3, 3)
    x[0, 0, 2, 10] = np.inf  # the last column: tap column 0 never meets it without padding
    w[1, 0, 1, 2] = np.inf
    dy = rand(1, channels, 4, 9)
    dx, dw = ms.grad(lambda xx, ww: ops.mul(ops.conv2d(xx, ww, groups=channels), Tensor(dy)),
                     (0, 1))(Tensor(x), Tensor(w))
    want_dx, want_dw, _ = conv2d_grads_ref(x, w, dy, groups=channels)
    np.testing.assert_allclose(dx.asnumpy(), want_dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw.asnumpy(), want_dw, rtol=1e-4, atol=1e-4)
    assert np.isfinite(dw.asnumpy()[0, 0, :, 0]).all()
    assert np.isfinite(dx.asnumpy()[0, 1, :, :2]).all()  # columns the inf tap does not reach
