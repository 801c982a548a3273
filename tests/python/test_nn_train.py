"""Training with kiln.nn: the value_and_grad idiom, TrainOneStepCell, gradients vs NumPy."""
import numpy as np
import pytest

import kiln as ms
from kiln import Tensor, nn

RNG = np.random.default_rng(3)


def blobs(n=64, features=4, classes=3):
    """A linearly separable classification set."""
    centers = RNG.standard_normal((classes, features)) * 4
    labels = RNG.integers(0, classes, n)
    data = centers[labels] + RNG.standard_normal((n, features)) * 0.5
    return Tensor(data.astype(np.float32)), Tensor(labels.astype(np.int32))


class MLP(nn.Cell):
    def __init__(self, features=4, classes=3):
        super().__init__()
        self.body = nn.SequentialCell(nn.Dense(features, 16), nn.ReLU(), nn.Dense(16, classes))

    def construct(self, x):
        return self.body(x)


def test_value_and_grad_training_idiom():
    ms.set_seed(0)
    data, label = blobs()
    model = MLP()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.SGD(model.trainable_params(), learning_rate=0.1, momentum=0.9)

    def forward_fn(data, label):
        logits = model(data)
        return loss_fn(logits, label), logits

    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)
    weight = model.body[0].weight
    ptr = weight._data_ptr
    model.set_train()
    losses = []
    for _ in range(30):
        (loss, _), grads = grad_fn(data, label)
        assert len(grads) == len(optimizer.parameters)
        optimizer(grads)
        losses.append(float(loss.asnumpy()))
    assert model.body[0].weight is weight and weight._data_ptr == ptr
    assert losses[-1] < 0.3 * losses[0]


def test_train_one_step_cell():
    ms.set_seed(1)
    data, label = blobs()
    net = MLP()
    opt = nn.Adam(net.trainable_params(), learning_rate=0.05)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()), opt)
    train.set_train()
    first = float(train(data, label).asnumpy())
    for _ in range(30):
        last = float(train(data, label).asnumpy())
    assert last < 0.3 * first
    # wrappers do not prefix names
    assert [p.name for p in train.network.trainable_params()][0] == "body.0.weight"


def test_sens_scales_the_update():
    def step(sens):
        ms.set_seed(2)
        net = nn.Dense(3, 1)
        before = net.weight.asnumpy().copy()
        opt = nn.SGD(net.trainable_params(), learning_rate=0.1)
        train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt, sens=sens)
        x = Tensor(np.ones((4, 3), np.float32))
        train(x, Tensor(np.zeros((4, 1), np.float32)))
        return net.weight.asnumpy() - before

    np.testing.assert_allclose(step(2.0), 2 * step(1.0), rtol=1e-5, atol=1e-7)


def test_dense_mse_gradients_match_numpy():
    net = nn.Dense(3, 2)
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    y = RNG.standard_normal((5, 2)).astype(np.float32)
    loss_fn = nn.MSELoss()
    grad_fn = ms.value_and_grad(lambda a, b: loss_fn(net(a), b), None, net.trainable_params())
    loss, (gw, gb) = grad_fn(Tensor(x), Tensor(y))
    w, b = net.weight.asnumpy().astype(np.float64), net.bias.asnumpy().astype(np.float64)
    diff = x @ w.T + b - y
    np.testing.assert_allclose(float(loss.asnumpy()), (diff ** 2).mean(), rtol=1e-5)
    d_out = 2 * diff / diff.size
    np.testing.assert_allclose(gw.asnumpy(), d_out.T @ x, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(gb.asnumpy(), d_out.sum(0), rtol=1e-4, atol=1e-6)


def test_seed_network_training_step_momentum():
    ms.set_seed(3)
    net = nn.SequentialCell(nn.Flatten(), nn.Dense(28 * 28, 64), nn.ReLU(), nn.Dense(64, 10))
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    x = Tensor(RNG.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = Tensor(RNG.integers(0, 10, 64).astype(np.int32))
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt).set_train()
    losses = [float(train(x, y).asnumpy()) for _ in range(10)]
    assert losses[-1] < losses[0]
    assert int(opt.global_step.asnumpy()[0]) == 10


def test_conv_batchnorm_dropout_net_trains():
    ms.set_seed(4)
    net = nn.SequentialCell(
        nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Dropout(p=0.1), nn.Dense(4 * 4 * 4, 2))
    x = Tensor(RNG.standard_normal((16, 1, 8, 8)).astype(np.float32))
    y = Tensor((RNG.random(16) > 0.5).astype(np.int32))
    opt = nn.Adam(net.trainable_params(), learning_rate=0.01)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.CrossEntropyLoss()), opt).set_train()
    mean_before = net[1].moving_mean.asnumpy().copy()
    losses = [float(train(x, y).asnumpy()) for _ in range(15)]
    assert losses[-1] < losses[0]
    assert not np.array_equal(net[1].moving_mean.asnumpy(), mean_before)
    assert len(opt.parameters) == 5  # conv w (no bias by default), bn gamma/beta, dense w/b


def test_train_one_step_cell_argument_errors():
    net = nn.Dense(2, 2)
    with pytest.raises(TypeError, match="optimizer"):
        nn.TrainOneStepCell(net, "sgd")
    with pytest.raises(TypeError, match="network"):
        nn.TrainOneStepCell(lambda x: x, nn.SGD(net.trainable_params()))
