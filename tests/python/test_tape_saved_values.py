"""PyNative's tape keeps only the values gradient rules read (OpDef::grad_reads), so a
training step's forward holds less memory; the gradients stay exact."""
import numpy as np

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(11)
N = 1 << 20  # 4 MiB of float32 per value


def allocated():
    return ms._C.allocator_stats()["allocated_bytes"]


def forward_growth(fn, x):
    """Bytes held at the end of fn's forward under ms.grad, over those held before it, and
    the gradient."""
    seen = []

    def traced(t):
        before = allocated()
        out = fn(t)
        seen.append(allocated() - before)
        return out

    grad = ms.grad(traced)(x)
    return seen[0], grad


def test_a_chain_of_adds_and_relus_keeps_only_the_relus_outputs():
    # add's rule reads nothing and relu's reads its output: 8 values, not 16, stay alive
    def chain(t):
        for _ in range(8):
            t = ops.relu(t + 0.25)
        return ops.sum(t)

    x = RNG.standard_normal(N).astype(np.float32)
    held, grad = forward_growth(chain, Tensor(x))
    assert held <= 9 * x.nbytes, held / x.nbytes
    want = np.ones_like(x)
    y = x
    for _ in range(8):
        want = want * (y + 0.25 > 0)
        y = np.maximum(y + 0.25, 0)
    np.testing.assert_array_equal(grad.asnumpy(), want)


def test_a_product_with_a_constant_does_not_keep_the_other_factor():
    # mul reads a factor only for the other's gradient; reshape and transpose read shapes
    def chain(t):
        for _ in range(6):
            t = ops.transpose(ops.reshape(t * 1.5, (1024, 1024)), (1, 0)).reshape(-1) * 0.5
        return ops.sum(t)

    x = RNG.standard_normal(N).astype(np.float32)
    held, grad = forward_growth(chain, Tensor(x))
    assert held <= 4 * x.nbytes, held / x.nbytes
    np.testing.assert_allclose(grad.asnumpy(), np.full_like(x, 0.75**6), rtol=1e-6)


def test_a_dense_relu_network_holds_less_and_matches_its_graph_mode_gradients():
    net = nn.SequentialCell(nn.Dense(256, 512), nn.ReLU(), nn.Dense(512, 512), nn.ReLU(),
                            nn.Dense(512, 10))
    loss_fn = nn.CrossEntropyLoss()
    x = Tensor(RNG.standard_normal((512, 256)).astype(np.float32))
    y = Tensor(RNG.integers(0, 10, size=512))
    seen = []

    def loss(x, y):
        before = allocated()
        logits = net(x)
        seen.append(allocated() - before)
        return loss_fn(logits, y)

    grad_fn = ms.value_and_grad(loss, None, net.trainable_params())
    _, eager = grad_fn(x, y)
    # the two relu outputs and the logits; the products' and bias adds' outputs are freed
    activation = 512 * 512 * 4
    assert seen[0] <= 2 * activation + 512 * 10 * 4 + (64 << 10), seen[0] / activation
    _, compiled = ms.jit(ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None,
                                           net.trainable_params()))(x, y)
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-4, atol=1e-6)


def test_second_derivatives_still_see_the_values_they_need():
    # the outer tape records the inner sweep's ops with their own declarations
    x = Tensor(RNG.standard_normal(64))
    first = ms.grad(lambda t: ops.sum(ops.exp(t) * ops.sin(t)))
    second = ms.grad(lambda t: ops.sum(first(t)))(x).asnumpy()
    v = x.asnumpy()
    np.testing.assert_allclose(second, 2 * np.exp(v) * np.cos(v), rtol=1e-10)


def test_indexing_and_gather_keep_only_their_indices():
    idx = RNG.integers(0, N, size=1000)

    def pick(t):
        total = ops.sum((t * 2.0)[Tensor(idx)])  # advanced indexing: (t * 2) is not kept
        return total + ops.sum(ops.gather(t * 3.0, Tensor(idx), 0))

    x = RNG.standard_normal(N).astype(np.float32)
    held, grad = forward_growth(pick, Tensor(x))
    assert held <= x.nbytes // 2, held / x.nbytes
    want = np.zeros_like(x)
    np.add.at(want, idx, 5.0)
    np.testing.assert_allclose(grad.asnumpy(), want)
