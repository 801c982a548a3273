"""Elementwise ops against NumPy: every dtype, broadcasting, scalars, views and errors."""
import numpy as np
import pytest
from helpers import ALL_DTYPES, FLOAT_DTYPES, NUMERIC_DTYPES, assert_close, random_array, to_kiln
from scipy.special import erf, erfc

import kiln as ms
from kiln import ops

RNG = np.random.default_rng(0)
SHAPE_PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1, 3), (1, 5, 1)), ((), (2, 2)),
               ((0, 3), (1, 3)), ((1,), (5,))]


def kiln_values(arr, dtype):
    """The values kiln actually holds for arr in dtype (bfloat16 rounds)."""
    return to_kiln(arr, dtype).asnumpy()


def expected_dtype(name, dtype):
    if name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                "logical_and", "logical_or", "logical_xor"):
        return ms.bool_
    if name == "div" and not dtype.is_floating_point:
        return ms.float32
    return dtype


def _nonzero(arr):
    return np.where(arr == 0, np.ones_like(arr), arr)


BINARY = {
    "add": (ops.add, np.add, ALL_DTYPES),
    "sub": (ops.sub, np.subtract, NUMERIC_DTYPES),
    "mul": (ops.mul, np.multiply, ALL_DTYPES),
    "div": (ops.div, lambda a, b: np.true_divide(a, _nonzero(b)), NUMERIC_DTYPES),
    "floor_divide": (ops.floor_divide, lambda a, b: np.floor_divide(a, _nonzero(b)),
                     NUMERIC_DTYPES),
    "remainder": (ops.remainder, lambda a, b: np.remainder(a, _nonzero(b)), NUMERIC_DTYPES),
    "maximum": (ops.maximum, np.maximum, ALL_DTYPES),
    "minimum": (ops.minimum, np.minimum, ALL_DTYPES),
    "equal": (ops.equal, np.equal, ALL_DTYPES),
    "not_equal": (ops.not_equal, np.not_equal, ALL_DTYPES),
    "less": (ops.less, np.less, ALL_DTYPES),
    "less_equal": (ops.less_equal, np.less_equal, ALL_DTYPES),
    "greater": (ops.greater, np.greater, ALL_DTYPES),
    "greater_equal": (ops.greater_equal, np.greater_equal, ALL_DTYPES),
    "logical_and": (ops.logical_and, np.logical_and, ALL_DTYPES),
    "logical_or": (ops.logical_or, np.logical_or, ALL_DTYPES),
    "logical_xor": (ops.logical_xor, np.logical_xor, ALL_DTYPES),
}
NEEDS_NONZERO_RHS = {"div", "floor_divide", "remainder"}


def binary_cases():
    for name, (_, _, dtypes) in BINARY.items():
        for kdt, ndt in dtypes:
            yield pytest.param(name, kdt, ndt, id=f"{name}-{kdt}")


@pytest.mark.parametrize("name,kdt,ndt", list(binary_cases()))
@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
def test_binary_matches_numpy(name, kdt, ndt, shapes):
    fn, ref, _ = BINARY[name]
    a = random_array(shapes[0], ndt, RNG)
    b = random_array(shapes[1], ndt, RNG)
    if name in NEEDS_NONZERO_RHS:
        b = _nonzero(b)
    got = fn(to_kiln(a, kdt), to_kiln(b, kdt))
    av, bv = kiln_values(a, kdt), kiln_values(b, kdt)
    with np.errstate(all="ignore"):
        want = ref(av, bv)
    out_dtype = expected_dtype(name, kdt)
    if out_dtype is ms.float32 and not kdt.is_floating_point:
        want = want.astype(np.float32)
    assert_close(got, want, out_dtype)


@pytest.mark.parametrize("name", ["add", "mul", "sub", "maximum", "less", "div"])
@pytest.mark.parametrize("kdt,ndt", [(ms.float32, np.float32), (ms.int32, np.int32),
                                     (ms.float16, np.float16)])
def test_binary_on_non_contiguous_views(name, kdt, ndt):
    from helpers import non_contiguous

    fn, ref, _ = BINARY[name]
    a, b = random_array((3, 4), ndt, RNG), _nonzero(random_array((3, 4), ndt, RNG))
    got = fn(non_contiguous(a, kdt), non_contiguous(b, kdt))
    with np.errstate(all="ignore"):
        want = ref(a, b)
    out_dtype = expected_dtype(name, kdt)
    assert_close(got, want.astype(np.float32) if out_dtype is ms.float32 and
                 not kdt.is_floating_point else want, out_dtype)


def test_integer_division_by_zero_gives_zero_not_a_crash():
    a = ms.Tensor(np.array([7, -7, 0], np.int32))
    z = ms.Tensor(np.zeros(3, np.int32))
    assert (a // z).asnumpy().tolist() == [0, 0, 0]
    assert (a % z).asnumpy().tolist() == [0, 0, 0]
    assert ops.floor_divide(ms.Tensor([np.iinfo(np.int64).min]), -1).dtype == ms.int64


def test_python_semantics_for_floor_division_and_modulo():
    a = np.array([7, -7, 7, -7], np.int64)
    b = np.array([2, 2, -2, -2], np.int64)
    ka, kb = ms.Tensor(a), ms.Tensor(b)
    assert (ka // kb).asnumpy().tolist() == [x // y for x, y in zip(a.tolist(), b.tolist())]
    assert (ka % kb).asnumpy().tolist() == [x % y for x, y in zip(a.tolist(), b.tolist())]
    fa, fb = ms.Tensor(a.astype(np.float32)), ms.Tensor(b.astype(np.float32))
    np.testing.assert_array_equal((fa % fb).asnumpy(), np.remainder(a, b).astype(np.float32))


def test_float32_remainder_and_floor_division_are_exact_at_the_edges():
    # float32 remainders come from a double-precision quotient while it is below 2^29, and from
    # libm's fmod above; both are exact, so they equal NumPy's bit for bit (its float32 loops
    # use fmodf), including quotients that round up to the next integer.
    rng = np.random.default_rng(7)
    b = (rng.uniform(0.5, 3, 50_000) * rng.choice([-1, 1], 50_000)).astype(np.float32)
    k = rng.integers(-(2 ** 31), 2 ** 31, 50_000).astype(np.float32)
    near = (k * b).astype(np.float32)  # quotients at and next to integers, up to 2^31
    a = np.concatenate([near, np.nextafter(near, np.float32(np.inf)),
                        rng.standard_normal(50_000).astype(np.float32) * 1e3,
                        np.float32([1e-40, -1e-40, 3e38, -3e38, np.inf, -np.inf, np.nan, 0.0,
                                    -0.0, 5.0, -5.0, 1e-45])])
    b = np.resize(b, a.shape)
    assert a.dtype == b.dtype == np.float32
    b[-12:] = np.float32([3e-41, 7e-41, 1e-30, -7.0, 2.0, 2.0, 1.0, -3.0, 3.0, np.inf, -np.inf,
                          -1e-45])
    ka, kb = ms.Tensor(a), ms.Tensor(b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((ka % kb).asnumpy(), np.remainder(a, b))
        np.testing.assert_array_equal((ka // kb).asnumpy(), np.floor_divide(a, b))
        np.testing.assert_array_equal(ops.fmod(ka, kb).asnumpy(), np.fmod(a, b))


def test_fmod_of_integers_and_its_gradient_in_both_modes():
    a, b = np.array([7, -7, 7, -7, 5, 0], np.int32), np.array([2, 2, -2, -2, 0, 3], np.int32)
    np.testing.assert_array_equal(ops.fmod(ms.Tensor(a), ms.Tensor(b)).asnumpy(),
                                  [1, -1, 1, -1, 0, 0])  # a's sign; by zero 0, as //
    x = np.array([5.5, -5.5, 2.25, -0.75], np.float64)
    y = np.array([2.0, 1.5, -0.5, 0.5], np.float64)

    def f(u, v):
        return (ops.fmod(u, v) * ms.Tensor(np.arange(1.0, 5.0))).sum()

    grad = ms.grad(f, grad_position=(0, 1))
    for dx, dy in (grad(ms.Tensor(x), ms.Tensor(y)), ms.jit(grad)(ms.Tensor(x), ms.Tensor(y))):
        np.testing.assert_allclose(dx.asnumpy(), np.arange(1.0, 5.0))
        np.testing.assert_allclose(dy.asnumpy(), -np.arange(1.0, 5.0) * np.trunc(x / y))


@pytest.mark.parametrize("kdt,ndt", FLOAT_DTYPES)
def test_pow_floats(kdt, ndt):
    a = np.abs(random_array((3, 4), ndt, RNG)) + 0.5
    b = random_array((3, 4), ndt, RNG, -2, 2)
    want = np.power(kiln_values(a, kdt).astype(np.float64), kiln_values(b, kdt).astype(np.float64))
    assert_close(ops.pow(to_kiln(a, kdt), to_kiln(b, kdt)), want, kdt)


POW_SPECIALS = np.array([-np.inf, -2.5, -1.0, -0.0, 0.0, 1e-30, 0.3, 1.0, 7.0, 3e19, np.inf,
                         np.nan], np.float64)


@pytest.mark.parametrize("kdt,ndt", FLOAT_DTYPES)
@pytest.mark.parametrize("exponent", [2, 2.0, -1, 0.5, 1, 0, 3, 4, -2, -0.5, 2.5, -3])
def test_pow_by_one_exponent_agrees_with_pow(kdt, ndt, exponent):
    # 2, -1, 0.5, 1, 0, 3, 4, -2 and -0.5 take cheaper forms; 2.5 and -3 pow itself. C's pow, as
    # kiln's is, gives +0 and +inf for -0 and -inf at 0.5 (NumPy's sqrt shortcut gives -0 and NaN).
    with np.errstate(all="ignore"):  # 3e19 overflows float16
        x = np.concatenate([POW_SPECIALS, random_array((40,), np.float64, RNG, -3, 3)]).astype(ndt)
        x = kiln_values(x, kdt).astype(np.float64)
        want = np.power(x, exponent).astype(ndt).astype(np.float64)  # rounded as kiln rounds
    if exponent == 0.5:
        want[np.isneginf(x)] = np.inf
        want[x == 0] = 0.0
    for step in (1, 2):  # contiguous, and a strided view
        result = to_kiln(x, kdt)[::step] ** exponent
        assert_close(result, want[::step], kdt)
        got, zero = result.asnumpy().astype(np.float64), want[::step] == 0
        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[::step][zero]))


def test_pow_by_one_exponent_in_graph_mode_with_gradient():
    x = ms.Tensor(np.array([[-1.5, 0.25, 2.0], [3.0, -0.5, 1.0]], np.float32))

    def f(v):
        return (v ** 2 + v ** -1 + v ** 1).sum()

    grad = ms.value_and_grad(f)
    loss, dx = grad(x)
    loss_graph, dx_graph = ms.jit(grad)(x)
    v = x.asnumpy().astype(np.float64)
    np.testing.assert_allclose(loss.asnumpy(), (v ** 2 + 1 / v + v).sum(), rtol=1e-6)
    np.testing.assert_allclose(dx.asnumpy(), 2 * v - 1 / v ** 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(loss_graph.asnumpy(), loss.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(dx_graph.asnumpy(), dx.asnumpy(), rtol=1e-6)


@pytest.mark.parametrize("kdt,ndt", [(ms.int32, np.int32), (ms.int64, np.int64),
                                     (ms.uint8, np.uint8), (ms.uint16, np.uint16),
                                     (ms.uint32, np.uint32), (ms.uint64, np.uint64)])
def test_pow_integers(kdt, ndt):
    a = random_array((10,), ndt, RNG, 0, 5)
    b = random_array((10,), ndt, RNG, 0, 3)
    assert_close(to_kiln(a, kdt) ** to_kiln(b, kdt), np.power(a, b), kdt)


def test_scalar_operands_are_weakly_typed():
    i = ms.Tensor(np.array([1, 2, 3], np.int32))
    assert (i + 1).dtype == ms.int32
    assert (i + 1.5).dtype == ms.float32
    assert (i / 2).dtype == ms.float32
    h = ms.Tensor(np.array([1, 2], np.float16))
    assert (h * 2.0).dtype == ms.float16
    b = ms.Tensor(np.array([True, False]))
    assert (b + 1).dtype == ms.int64
    assert_close(2 - i, 2 - np.array([1, 2, 3]), ms.int32)
    assert_close(10 / ms.Tensor([4.0]), np.array([2.5], np.float32), ms.float32)
    assert_close(2 ** ms.Tensor([1.0, 3.0]), np.array([2.0, 8.0]), ms.float32)
    d = ms.Tensor(np.array([0.1], np.float64))
    assert_close(d + 0.2, np.array([0.1]) + 0.2, ms.float64)


@pytest.mark.parametrize("a,b,want", [
    (ms.uint8, ms.int8, ms.int16), (ms.int32, ms.float16, ms.float16),
    (ms.float16, ms.bfloat16, ms.float32), (ms.bool_, ms.uint8, ms.uint8),
    (ms.int64, ms.float32, ms.float32), (ms.float32, ms.float64, ms.float64),
    (ms.uint8, ms.int64, ms.int64), (ms.int8, ms.int16, ms.int16),
    (ms.uint8, ms.uint16, ms.uint16), (ms.uint16, ms.int16, ms.int32),
    (ms.uint32, ms.int32, ms.int64), (ms.uint64, ms.int64, ms.float64),
    (ms.uint64, ms.float16, ms.float16), (ms.bool_, ms.uint64, ms.uint64),
])
def test_tensor_type_promotion(a, b, want):
    x = ms.Tensor(np.ones(2), a)
    y = ms.Tensor(np.ones(2), b)
    assert (x + y).dtype == want
    assert ms.dtype.promote_types(a, b) == want


UNARY = {
    "neg": (ops.neg, np.negative, NUMERIC_DTYPES),
    "abs": (ops.abs, np.abs, ALL_DTYPES),
    "exp": (ops.exp, np.exp, ALL_DTYPES),
    "log": (ops.log, lambda x: np.log(np.abs(x) + 0.5), FLOAT_DTYPES),
    "sqrt": (ops.sqrt, lambda x: np.sqrt(np.abs(x)), FLOAT_DTYPES),
    "rsqrt": (ops.rsqrt, lambda x: 1 / np.sqrt(np.abs(x) + 0.5), FLOAT_DTYPES),
    "sin": (ops.sin, np.sin, ALL_DTYPES),
    "cos": (ops.cos, np.cos, ALL_DTYPES),
    "tanh": (ops.tanh, np.tanh, ALL_DTYPES),
    "sigmoid": (ops.sigmoid, lambda x: 1 / (1 + np.exp(-x)), ALL_DTYPES),
    "silu": (ops.silu, lambda x: x / (1 + np.exp(-x)), FLOAT_DTYPES),
    "gelu": (ops.gelu, lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2))), FLOAT_DTYPES),
    "relu": (ops.relu, lambda x: np.maximum(x, 0), NUMERIC_DTYPES),
    "square": (ops.square, np.square, NUMERIC_DTYPES),
    "sign": (ops.sign, np.sign, NUMERIC_DTYPES),
    "floor": (ops.floor, np.floor, NUMERIC_DTYPES),
    "round": (ops.round, np.round, NUMERIC_DTYPES),
    "logical_not": (ops.logical_not, np.logical_not, ALL_DTYPES),
}
# Inputs these ops need transformed to stay in their domain (the reference applies the same).
DOMAIN = {"log": lambda x: np.abs(x) + 0.5, "sqrt": np.abs, "rsqrt": lambda x: np.abs(x) + 0.5}


def unary_cases():
    for name, (_, _, dtypes) in UNARY.items():
        for kdt, ndt in dtypes:
            yield pytest.param(name, kdt, ndt, id=f"{name}-{kdt}")


@pytest.mark.parametrize("name,kdt,ndt", list(unary_cases()))
@pytest.mark.parametrize("shape", [(), (7,), (2, 3, 4), (0, 2)], ids=str)
def test_unary_matches_numpy(name, kdt, ndt, shape):
    fn, ref, _ = UNARY[name]
    x = random_array(shape, ndt, RNG)
    xv = kiln_values(x, kdt)
    if name in DOMAIN:
        x = DOMAIN[name](x).astype(ndt)
        xv = kiln_values(x, kdt)
        want = {"log": np.log, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v)}[name](
            xv.astype(np.float64))
    else:
        promotes = name in ("exp", "sin", "cos", "tanh", "sigmoid") and not kdt.is_floating_point
        with np.errstate(all="ignore"):
            want = ref(xv.astype(np.float64) if kdt.is_floating_point or promotes else xv)
    got = fn(to_kiln(x, kdt))
    promotes = name in ("exp", "sin", "cos", "tanh", "sigmoid") and not kdt.is_floating_point
    out_dtype = ms.bool_ if name == "logical_not" else (ms.float32 if promotes else kdt)
    if out_dtype.is_floating_point:
        want = np.asarray(want, np.float64)
    else:
        want = np.asarray(want).astype(got.asnumpy().dtype)
    assert_close(got, want, out_dtype)


@pytest.mark.parametrize("kdt,ndt", FLOAT_DTYPES)
def test_round_halves_to_even_with_signs_and_specials(kdt, ndt):
    ties = np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, -0.4, 0.4, -0.0, 0.0,
                     2.0 ** 23 + 1, -(2.0 ** 23) - 1, 1e30, np.inf, -np.inf, np.nan])
    xv = kiln_values(ties.astype(ndt), kdt).astype(np.float64)
    want = np.round(xv)

    def rounded(v):
        return ops.round(v)

    x = to_kiln(ties.astype(ndt), kdt)
    for got in (rounded(x), ms.jit(rounded)(x)):
        got = got.asnumpy().astype(np.float64)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # -0.4 rounds to -0


def test_round_over_long_strided_runs_decimals_and_gradient():
    x = RNG.uniform(-1000, 1000, 100_003).astype(np.float32)
    x[::7] = np.floor(x[::7]) + 0.5  # ties
    np.testing.assert_array_equal(ops.round(ms.Tensor(x)[::3]).asnumpy(), np.round(x[::3]))
    y = np.array([1.234, -5.678, 0.125], np.float64)
    got = ops.round(ms.Tensor(y), decimals=2).asnumpy()
    np.testing.assert_allclose(got, np.round(y * 100) / 100, rtol=1e-15)

    def f(v):
        return (ops.round(v) * v).sum()

    v = ms.Tensor(np.array([0.4, 1.5, -2.6], np.float32))
    for grad in (ms.grad(f), ms.jit(ms.grad(f))):  # round's own gradient is zero
        np.testing.assert_array_equal(grad(v).asnumpy(), np.round(v.asnumpy()))
    with pytest.raises(TypeError, match="round"):
        ops.round(ms.Tensor(np.array([True])), decimals=1.5)


def test_gelu_tanh_approximation():
    x = np.linspace(-4, 4, 33, dtype=np.float32)
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    assert_close(ops.gelu(ms.Tensor(x), approximate="tanh"), want, ms.float32)
    with pytest.raises(ValueError, match="gelu"):
        ops.gelu(ms.Tensor(x), approximate="fast")


@pytest.mark.parametrize("kdt,ndt", ALL_DTYPES)
@pytest.mark.parametrize("target", [d for d, _ in ALL_DTYPES], ids=str)
def test_cast_between_every_pair(kdt, ndt, target):
    x = random_array((2, 5), ndt, RNG, 0, 100)
    got = ops.cast(to_kiln(x, kdt), target)
    assert got.dtype == target
    src = kiln_values(x, kdt)
    if target is ms.bfloat16:
        want = ms.Tensor(src.astype(np.float32), ms.bfloat16).asnumpy()
        np.testing.assert_array_equal(got.asnumpy(), want)
    else:
        np.testing.assert_array_equal(got.asnumpy(), src.astype(ms.dtype.dtype_to_nptype(target)))


def _truncate_and_wrap(x, np_target):
    """kiln's float -> integer rule: truncate toward zero into int64, wrap to the target's width;
    NaN, infinities and values beyond int64 give 0."""
    x = x.astype(np.float64)
    ok = np.isfinite(x) & (x >= -2.0 ** 63) & (x < 2.0 ** 63)
    return np.where(ok, np.trunc(np.where(ok, x, 0)), 0).astype(np.int64).astype(np_target)


@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("target", [ms.int8, ms.int16, ms.int32, ms.uint8, ms.uint16, ms.uint32])
@pytest.mark.parametrize("outside", [False, True])
def test_float_to_integer_casts_over_long_runs(src, target, outside):
    # A run with every value in [-2^31, 2^31) converts through int32 in one vector pass; one
    # value outside (or NaN) sends the run through the general rule.
    x = (RNG.standard_normal(3001) * 1000).astype(src)
    x[::7] = -x[::7] - 0.5
    if outside:
        x[1500] = {np.float16: np.inf, np.float32: 3e9, np.float64: -5e12}[src]
        x[2999] = np.nan
    got = ops.cast(ms.Tensor(x), target).asnumpy()
    np.testing.assert_array_equal(got, _truncate_and_wrap(x, ms.dtype.dtype_to_nptype(target)))


def test_float32_to_float16_casts_over_long_runs():
    # F16C's conversion where the CPU has it: rounding, overflow, subnormals, signs, NaN.
    specials = np.array([65504, 65519.99, 65520, -70000, 1e-5, 6e-8, 2e-8, 3e-8, -0.0, np.inf,
                         -np.inf, np.nan, 1 + 2 ** -11, 1 + 3 * 2 ** -11], np.float32)
    x = np.concatenate([specials, (RNG.standard_normal(1003) * 300).astype(np.float32)])
    got = ops.cast(ms.Tensor(x), ms.float16).asnumpy()
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(ops.cast(ms.Tensor(x)[::3], ms.float16).asnumpy(), want[::3])


def test_clamp_scalars_and_tensors():
    x = np.linspace(-3, 3, 13, dtype=np.float32)
    assert_close(ops.clamp(ms.Tensor(x), -1, 2), np.clip(x, -1, 2), ms.float32)
    assert_close(ops.clamp(ms.Tensor(x), min=0.5), np.maximum(x, 0.5), ms.float32)
    lo = np.full(13, -0.5, np.float32)
    assert_close(ops.clamp(ms.Tensor(x), ms.Tensor(lo), 1.0), np.clip(x, lo, 1.0), ms.float32)
    i = ms.Tensor(np.arange(-3, 4, dtype=np.int32))
    assert ops.clamp(i, 0, 2).dtype == ms.int32
    assert ops.clamp(i, 0.5, 2).dtype == ms.float32
    with pytest.raises(ValueError):
        ops.clamp(ms.Tensor(x))


@pytest.mark.parametrize("kdt,ndt", ALL_DTYPES)
def test_where_broadcasts(kdt, ndt):
    cond = RNG.random((3, 1)) > 0.5
    x = random_array((3, 4), ndt, RNG)
    y = random_array((4,), ndt, RNG)
    got = ops.where(ms.Tensor(cond), to_kiln(x, kdt), to_kiln(y, kdt))
    assert_close(got, np.where(cond, kiln_values(x, kdt), kiln_values(y, kdt)), kdt)


# Every mix of full and broadcast operands along the inner run (the kernel's vectorized paths
# and its strided loop), a non-contiguous branch, and a mask that is not bool.
WHERE_SHAPES = [((2, 3, 5), (2, 3, 5), (2, 3, 5)), ((2, 3, 1), (2, 3, 5), (2, 3, 5)),
                ((2, 3, 5), (1, 1, 1), (2, 3, 5)), ((2, 3, 5), (2, 3, 5), ()),
                ((2, 3, 5), (2, 1, 1), (1,)), ((2, 1, 1), (3, 5), (1,)),
                ((2, 1, 1), (1,), (2, 3, 5)), ((1,), (1,), (1,))]


@pytest.mark.parametrize("cshape,xshape,yshape", WHERE_SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8])
def test_where_every_broadcast_mix(cshape, xshape, yshape, dtype):
    cond = RNG.random(cshape) > 0.5
    x = (RNG.standard_normal(xshape) * 10).astype(dtype)
    y = (RNG.standard_normal(yshape) * 10).astype(dtype)
    got = ops.where(ms.Tensor(cond), ms.Tensor(x), ms.Tensor(y))
    np.testing.assert_array_equal(got.asnumpy(), np.where(cond, x, y))
    wide = (RNG.standard_normal((5, 3, 2)) * 10).astype(dtype)  # transposed: strided
    if xshape == (2, 3, 5):
        got = ops.where(ms.Tensor(cond), ms.Tensor(wide).transpose(2, 1, 0), ms.Tensor(y))
        np.testing.assert_array_equal(got.asnumpy(), np.where(cond, wide.transpose(2, 1, 0), y))
    ints = RNG.integers(-2, 3, size=cshape).astype(np.int32)  # nonzero is true
    got = ops.where(ms.Tensor(ints), ms.Tensor(x), ms.Tensor(y))
    np.testing.assert_array_equal(got.asnumpy(), np.where(ints != 0, x, y))


@pytest.mark.parametrize("shape_b", [(1000,), (1,), ()])
def test_logical_ops_and_bool_casts_over_long_runs(shape_b):
    # The contiguous loops read and write bools as bytes (kernels/cpu/convert.h).
    a = RNG.random(1000) > 0.5
    b = RNG.random(shape_b) > 0.5
    ka, kb = ms.Tensor(a), ms.Tensor(b)
    for fn, ref in ((ops.logical_and, np.logical_and), (ops.logical_or, np.logical_or),
                    (ops.logical_xor, np.logical_xor), (ops.equal, np.equal)):
        got = fn(ka, kb)
        assert got.dtype == ms.bool_
        np.testing.assert_array_equal(got.asnumpy(), ref(a, b))
    np.testing.assert_array_equal(ops.logical_not(ka).asnumpy(), ~a)
    for dtype, np_dtype in ((ms.float32, np.float32), (ms.float16, np.float16),
                            (ms.int32, np.int32), (ms.uint8, np.uint8)):
        np.testing.assert_array_equal(ops.cast(ka, dtype).asnumpy(), a.astype(np_dtype))
    x = RNG.standard_normal(1000).astype(np.float32)
    x[::7] = 0.0
    np.testing.assert_array_equal(ops.cast(ms.Tensor(x), ms.bool_).asnumpy(), x != 0)
    np.testing.assert_array_equal((ms.Tensor(x) > 0.1).asnumpy(), x > 0.1)
    strided = ms.Tensor(np.stack([a, ~a], 1))[:, 1]  # every other byte
    np.testing.assert_array_equal(ops.logical_and(strided, ka).asnumpy(), ~a & a)


def test_operators_on_bools():
    a = ms.Tensor(np.array([True, True, False]))
    b = ms.Tensor(np.array([True, False, False]))
    assert (~a).asnumpy().tolist() == [False, False, True]
    assert (a & b).asnumpy().tolist() == [True, False, False]
    assert (a | b).asnumpy().tolist() == [True, True, False]
    assert (a ^ b).asnumpy().tolist() == [False, True, False]
    assert (~ms.Tensor([1, 2])).asnumpy().tolist() == [-2, -3]  # bitwise on integers (NumPy)
    with pytest.raises(TypeError, match="bitwise_not"):
        ~ms.Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="neg"):
        _ = -a


def test_nan_propagates_through_maximum_and_minimum():
    a = ms.Tensor(np.array([np.nan, 1.0, 2.0], np.float32))
    b = ms.Tensor(np.array([0.0, np.nan, 1.0], np.float32))
    np.testing.assert_array_equal(np.isnan(ops.maximum(a, b).asnumpy()), [True, True, False])
    np.testing.assert_array_equal(np.isnan(ops.minimum(a, b).asnumpy()), [True, True, False])


@pytest.mark.parametrize("fn", [ops.add, ops.mul, ops.maximum, ops.equal], ids=lambda f: f.__name__)
def test_shape_mismatch_names_op_and_shapes(fn):
    with pytest.raises(ValueError) as info:
        fn(ms.Tensor(np.ones((2, 3))), ms.Tensor(np.ones((4,))))
    msg = str(info.value)
    assert fn.__name__ in msg and "(2, 3)" in msg and "(4,)" in msg


def test_bad_operand_types():
    with pytest.raises(TypeError, match="add"):
        ops.add(ms.Tensor([1.0]), "x")
    with pytest.raises(TypeError, match="sub"):
        ms.Tensor([True]) - ms.Tensor([False])
    assert ms.Tensor([1.0]).__add__("x") is NotImplemented


def test_large_tensors_use_the_parallel_path():
    x = RNG.standard_normal((513, 1024)).astype(np.float32)
    y = RNG.standard_normal((1024,)).astype(np.float32)
    assert_close(ms.Tensor(x) * ms.Tensor(y) + 1, x * y + 1, ms.float32)
    assert_close(ops.exp(ms.Tensor(x)), np.exp(x), ms.float32)


def test_gelu_float32_is_accurate_on_both_tails():
    """float32 GELU (and its gradient) computes 1 + erf without cancellation, so the negative
    tail keeps its relative accuracy (0.5 * x * erfc(-x / sqrt 2) in float64 is the reference)."""
    x = np.linspace(-12, 12, 48001).astype(np.float32)
    got = ops.gelu(ms.Tensor(x)).asnumpy().astype(np.float64)
    xd = x.astype(np.float64)
    want = 0.5 * xd * erfc(-xd / np.sqrt(2))
    tiny = np.abs(want) < 1e-30  # below float32's normal range
    np.testing.assert_allclose(got[~tiny], want[~tiny], rtol=2e-5, atol=0)
    grad = ms.ops.grad(lambda t: ops.gelu(t).sum())(ms.Tensor(x)).asnumpy()
    want_grad = 0.5 * erfc(-xd / np.sqrt(2)) + xd * np.exp(-0.5 * xd**2) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(grad, want_grad, rtol=0, atol=3e-7)
    special = ops.gelu(ms.Tensor(np.array([np.nan, np.inf, -np.inf, 0.0], np.float32)))
    out = special.asnumpy()
    assert np.isnan(out[0]) and out[1] == np.inf and out[3] == 0.0
