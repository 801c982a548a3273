"""Team runs: on a busy machine a compiled graph's nodes run on whichever of kiln's threads has a
core (runtime/dataflow.h). Each test forces the contended state, runs the same graph as a team
and in order, and compares: in-place writes through views, optimizer updates, the random
generator's order, buffers reused after the last reader, and errors."""
import contextlib

import numpy as np
import pytest
from helpers import jit_train_step

import kiln as ms
from kiln import Tensor, nn, ops


@contextlib.contextmanager
def contended(team):
    """The contended state on 2 threads, with team runs on or off."""
    threads = ms.get_num_threads()
    ms.set_num_threads(2)
    ms._C.set_contention_override(1)
    ms._C.set_team_runs(team)
    try:
        yield
    finally:
        ms._C.set_team_runs(True)
        ms._C.set_contention_override(-1)
        ms.set_num_threads(threads)


def both_ways(run):
    """run() in order and as a team, each under the contended state; returns both results and
    how many teams the second ran."""
    with contended(team=False):
        in_order = run()
    before = ms._C.contended_pool_stats()["teams"]
    with contended(team=True):
        as_team = run()
    return in_order, as_team, ms._C.contended_pool_stats()["teams"] - before


class Mlp(nn.Cell):
    def __init__(self):
        super().__init__()
        self.body = nn.SequentialCell(nn.Dense(96, 256), nn.ReLU(), nn.Dense(256, 256), nn.ReLU(),
                                      nn.Dense(256, 10))

    def construct(self, x):
        return self.body(x)


def train(steps=8):
    ms.set_seed(0)
    net = Mlp()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    step = jit_train_step(net, opt, nn.CrossEntropyLoss())
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((128, 96)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, size=128))
    losses = [float(step(x, y).asnumpy()) for _ in range(steps)]
    return losses, [p.asnumpy() for p in net.trainable_params()]


def test_a_training_step_as_a_team_matches_the_run_in_order():
    (losses, weights), (team_losses, team_weights), teams = both_ways(train)
    assert teams == 8  # one per call
    assert losses[-1] < losses[0]
    np.testing.assert_array_equal(team_losses, losses)
    for w, tw in zip(weights, team_weights):
        np.testing.assert_array_equal(tw, w)


def writes_through_views(p, x):
    before = p * 1.0  # reads p before the writes below
    ops.assign(p, p + x)
    row = p[1]  # a view of the written parameter
    p[0] = row * 2.0  # written through an index, reading the view
    after = p + 0.0
    return before, row * 1.0, after


def test_reads_and_writes_of_one_parameter_keep_their_order():
    def run():
        p = ms.Parameter(Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)), name="p")
        x = Tensor(np.full((3, 4), 0.5, np.float32))
        step = ms.jit(writes_through_views)
        outs = [[t.asnumpy() for t in step(p, x)] for _ in range(3)]
        return outs, p.asnumpy()

    (outs, final), (team_outs, team_final), teams = both_ways(run)
    assert teams == 3
    for got, want in zip(team_outs, outs):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(team_final, final)
    start = np.arange(12, dtype=np.float32).reshape(3, 4)  # the first call, by hand
    np.testing.assert_array_equal(outs[0][0], start)
    np.testing.assert_array_equal(outs[0][1], start[1] + 0.5)


def shared_then_dying(x):
    t = x + 1.0
    u = ops.exp(t * 0.001)  # reads t, may run beside v
    v = t - 1.0  # t's last reader in program order: may take t's buffer only once u is done
    w = ops.sqrt(ops.abs(t)) * 2.0
    return u + w, v


def test_a_buffer_is_reused_only_after_every_reader_finished():
    x_np = np.random.default_rng(4).standard_normal((512, 1024)).astype(np.float32)

    def run():
        step = ms.jit(shared_then_dying, jit_level="O0")  # no fusion: every node its own buffer
        return [[t.asnumpy() for t in step(Tensor(x_np))] for _ in range(5)]

    in_order, as_team, teams = both_ways(run)
    assert teams == 5
    t = x_np + 1.0
    want = np.exp(t * 0.001) + np.sqrt(np.abs(t)) * 2.0
    for got in as_team + in_order:
        np.testing.assert_allclose(got[0], want, rtol=1e-5)
        np.testing.assert_allclose(got[1], x_np, rtol=1e-6, atol=1e-6)


def two_dropouts(x):
    a = ops.dropout(x, p=0.5, training=True)
    b = ops.dropout(x * 2.0, p=0.5, training=True)
    return a, b


def test_random_draws_keep_their_order():
    x = Tensor(np.ones((64, 256), np.float32))

    def run():
        ms.set_seed(7)
        step = ms.jit(two_dropouts)
        return [[t.asnumpy() for t in step(x)] for _ in range(3)]

    in_order, as_team, teams = both_ways(run)
    assert teams == 3
    for got, want in zip(as_team, in_order):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    assert not np.array_equal(in_order[0][0], in_order[0][1] / 2.0)  # two different masks


def bad_label_loss(logits, labels, other):
    side = ops.exp(other).sum()  # independent work a team runs beside the failing node
    return nn.CrossEntropyLoss()(logits, labels) + side


def test_an_error_in_a_team_names_the_op_and_the_line_and_the_next_call_works():
    logits = Tensor(np.zeros((4, 10), np.float32))
    other = Tensor(np.ones((256, 256), np.float32))
    good, bad = Tensor(np.array([1, 2, 3, 4])), Tensor(np.array([1, 2, 30, 4]))
    messages = []
    for team in (False, True):
        step = ms.jit(bad_label_loss)
        with contended(team):
            step(logits, good, other)
            with pytest.raises(IndexError) as info:
                step(logits, bad, other)
            messages.append(str(info.value))
            assert np.isfinite(step(logits, good, other).asnumpy())
    assert messages[1] == messages[0]
    assert "CrossEntropyLoss: label" in messages[0] and "test_team_runs.py" in messages[0]


def test_team_runs_only_on_a_contended_machine():
    x = Tensor(np.ones((64, 64), np.float32))
    step = ms.jit(lambda a: ops.exp(a) + ops.sin(a))
    before = ms._C.contended_pool_stats()["teams"]
    ms._C.set_contention_override(0)
    try:
        step(x)
        step(x)
    finally:
        ms._C.set_contention_override(-1)
    assert ms._C.contended_pool_stats()["teams"] == before
