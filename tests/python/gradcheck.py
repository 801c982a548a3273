"""Finite-difference checks of kiln's gradients (float64, central differences)."""
import numpy as np

import kiln as ms


def numeric_grads(fn, arrays, weight, eps=1e-6):
    """d/d(arrays) of sum(fn(*arrays) * weight) by central differences."""
    grads = []
    for a in arrays:
        g = np.zeros_like(a)
        flat = a.reshape(-1)
        for j in range(flat.size):
            saved = flat[j]
            flat[j] = saved + eps
            hi = _scalar(fn, arrays, weight)
            flat[j] = saved - eps
            lo = _scalar(fn, arrays, weight)
            flat[j] = saved
            g.reshape(-1)[j] = (hi - lo) / (2 * eps)
        grads.append(g)
    return grads


def _scalar(fn, arrays, weight):
    out = fn(*[ms.Tensor(a.copy()) for a in arrays])
    return float(np.sum(out.asnumpy().astype(np.float64) * weight))


def check_grad(fn, *arrays, rtol=1e-5, atol=1e-7, seed=0):
    """Asserts kiln's gradient of fn at float64 `arrays` matches finite differences.

    The output is projected on a fixed random weight so every output element contributes
    with a different coefficient (a plain sum can hide a transposed gradient).
    """
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    out = fn(*[ms.Tensor(a) for a in arrays])
    weight = np.random.default_rng(seed).uniform(0.5, 1.5, size=out.shape)
    positions = tuple(range(len(arrays)))

    def projected(*xs):
        return ms.ops.mul(fn(*xs), ms.Tensor(weight))

    analytic = ms.grad(projected, positions)(*[ms.Tensor(a) for a in arrays])
    numeric = numeric_grads(fn, arrays, weight)
    for k, (got, want) in enumerate(zip(analytic, numeric)):
        assert got.shape == want.shape, f"input {k}: gradient shape {got.shape} != {want.shape}"
        np.testing.assert_allclose(got.asnumpy(), want, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {k}")
