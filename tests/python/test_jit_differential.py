"""Random programs compiled against PyNative: elementwise, reduction, indexing and dtype-mixing
expressions (values and dtypes), and gradients of float expressions, straight-line and through
a tensor `while` loop. Each program is written to a file (compiled code needs its source),
compiled, called twice (the second call must agree with the first: nothing a run writes may
leak into the next), and compared with PyNative on the same inputs. Seeded: the same programs
every run."""

import importlib.util
import random

import numpy as np
import pytest

import kiln as ms
from kiln import Tensor

UNARY = ["(-{})", "ops.abs({})", "ops.exp(ops.clamp({}, -5, 5))", "ops.tanh({})", "ops.relu({})",
         "ops.sigmoid({})", "ops.floor({})", "{}.astype(ms.int32)", "{}.astype(ms.float32)",
         "({} > 0)", "ops.sqrt(ops.abs({}))", "ops.square({})", "({} * 1)", "({} + 0)",
         "({} / 1)", "{}.astype(ms.float16)", "ops.logical_not({} > 0)",
         "{}.sum(axis=-1, keepdims=True)", "{}.mean(axis=0)", "{}.max(axis=-1)", "{}.T",
         "{}.reshape(-1)", "{}[..., :2]", "{}[::-1]", "ops.cumsum({}, 0)", "ops.round({})",
         "({} ** 2)", "ops.sign({})", "ops.clamp({}, -1.0, 1.0)",
         "ops.softmax({}.astype(ms.float32), -1)", "({} // 2)", "({} % 3)"]
BINARY = ["({} + {})", "({} - {})", "({} * {})", "({} / ({} * 0 + 2))", "ops.maximum({}, {})",
          "ops.minimum({}, {})", "ops.where({} > 0, {}, 0)", "({} > {})", "({} == {})",
          "(2 * {} - {})"]
GRAD_UNARY = ["(-{})", "ops.tanh({})", "ops.sigmoid({})", "ops.relu({})",
              "ops.exp(ops.clamp({}, -3, 3))", "{}.sum(axis=-1, keepdims=True)", "{}.T",
              "{}[..., 1:]", "{}[::-1]", "ops.cumsum({}, 0)", "ops.square({})",
              "ops.softmax({}, -1)", "ops.gather({}, ms.Tensor([0, 2, 0], ms.int32), 0)",
              "{}.max(axis=0, keepdims=True)", "ops.clamp({}, -1.0, 1.0)",
              "ops.log(ops.abs({}) + 1)", "({} ** 3)", "ops.sin({})",
              "ops.where({} > 0.5, {} * 2, {})", "ops.stop_gradient({}) * {}"]
GRAD_BINARY = ["({} + {})", "({} - {})", "({} * {})", "ops.maximum({}, {})",
               "({} / (ops.abs({}) + 1))", "ops.matmul({}, {}.T)"]


def _expression(rnd, depth, names, unary, binary):
    if depth == 0 or rnd.random() < 0.25:
        return rnd.choice(names)
    if rnd.random() < 0.6:
        form = rnd.choice(unary)
        arg = _expression(rnd, depth - 1, names, unary, binary)
        return "(" + form.format(*[arg] * form.count("{}")) + ")"
    form = rnd.choice(binary)
    a = _expression(rnd, depth - 1, names, unary, binary)
    b = _expression(rnd, depth - 1, names, unary, binary)
    return "(" + form.format(a, *[b] * (form.count("{}") - 1)) + ")"


def _load(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text("import kiln as ms\nfrom kiln import ops\n" + body)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


def _operand(rnd, rng):
    shape = rnd.choice([(3, 4), (4,), (1, 4), (3, 1)])
    kind = rnd.choice(["f32", "f32", "i32", "bool", "f16"])
    a = rng.standard_normal(shape) * 3
    return Tensor({"f32": a.astype(np.float32), "f16": a.astype(np.float16),
                   "i32": np.round(a).astype(np.int32), "bool": a > 0}[kind])


@pytest.mark.parametrize("seed", range(8))
def test_random_expressions_match_pynative(tmp_path, seed):
    compared = 0
    for k in range(12):
        rnd = random.Random(seed * 1000 + k)
        rng = np.random.default_rng(seed * 1000 + k)
        expr = _expression(rnd, 4, ["a", "b"], UNARY, BINARY)
        f = _load(tmp_path, f"expr_{seed}_{k}", f"def f(a, b):\n    return {expr}\n")
        args = [_operand(rnd, rng), _operand(rnd, rng)]
        try:
            want = f(*args)
        except (TypeError, ValueError, RuntimeError):
            continue  # an invalid program (shapes, dtypes): PyNative refuses it too
        compiled = ms.jit(f)
        first, second = compiled(*args), compiled(*args)
        assert first.dtype == want.dtype, expr
        np.testing.assert_allclose(first.asnumpy().astype(np.float64),
                                   want.asnumpy().astype(np.float64), rtol=2e-3, atol=2e-3,
                                   err_msg=expr)
        np.testing.assert_array_equal(second.asnumpy(), first.asnumpy(), err_msg=expr)
        compared += 1
    assert compared >= 6


@pytest.mark.parametrize("seed", range(6))
def test_random_gradients_match_pynative(tmp_path, seed):
    compared = 0
    for k in range(8):
        rnd = random.Random(50_000 + seed * 1000 + k)
        rng = np.random.default_rng(50_000 + seed * 1000 + k)
        expr = _expression(rnd, 4, ["a", "b", "w"], GRAD_UNARY, GRAD_BINARY)
        if k % 2:
            body = (f"    r = a * 0\n    t = ms.Tensor(0, ms.int32)\n    while t < 3:\n"
                    f"        a = ops.tanh({expr}) + r * 0.5\n        r = r + a\n"
                    f"        t = t + 1\n")
        else:
            body = f"    r = {expr}\n"
        source = f"def f(a, b, w):\n{body}    return (r * r).sum()\n"
        f = _load(tmp_path, f"grad_{seed}_{k}", source)
        args = [Tensor(rng.standard_normal((3, 3)).astype(np.float32)) for _ in range(3)]
        grad = ms.grad(f, (0, 1, 2))
        try:
            want = [g.asnumpy() for g in grad(*args)]
        except (TypeError, ValueError, RuntimeError):
            continue
        compiled = ms.jit(grad)
        for _ in range(2):
            for got, ref in zip(compiled(*args), want):
                np.testing.assert_allclose(got.asnumpy(), ref, rtol=1e-3, atol=1e-3, err_msg=expr)
        compared += 1
    assert compared >= 4
