"""Losses of the API-breadth work vs NumPy references of MindSpore's formulas: reductions,
broadcasting, weights, dtypes, finite-difference gradients and both modes."""
import numpy as np
import pytest
from gradcheck import check_grad
from graph_check import assert_same_in_both_modes
from helpers import assert_close

import kiln as ms
from kiln import Tensor, nn, ops

RNG = np.random.default_rng(5)
REDUCE = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}


def probs(*shape):
    return RNG.uniform(0.05, 0.95, shape)


def np_softplus(x):
    return np.logaddexp(0.0, x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_and_bce_with_logits(reduction):
    x, y, w = probs(3, 4), RNG.integers(0, 2, (3, 4)).astype(np.float64), probs(3, 4)
    ref = -w * (y * np.log(x + 1e-12) + (1 - y) * np.log(1 - x + 1e-12))
    loss = nn.BCELoss(Tensor(w), reduction)(Tensor(x), Tensor(y))
    assert_close(loss, REDUCE[reduction](ref), ms.float64)
    logits, pos = RNG.normal(0, 3, (3, 4)), probs(4)
    ref = -w * (pos * y * -np_softplus(-logits) + (1 - y) * -np_softplus(logits))
    loss = nn.BCEWithLogitsLoss(reduction, Tensor(w), Tensor(pos))(Tensor(logits), Tensor(y))
    assert_close(loss, REDUCE[reduction](ref), ms.float64)


def test_bce_defaults_gradients_and_errors():
    x, y = probs(2, 3).astype(np.float32), probs(2, 3).astype(np.float32)
    got = nn.BCELoss()(Tensor(x), Tensor(y))                  # reduction 'mean' in 2.x
    assert got.shape == () and got.dtype == ms.float32
    check_grad(lambda a, b: ops.binary_cross_entropy(a, b, reduction="none"), probs(2, 3),
               probs(2, 3))
    check_grad(lambda a, b: ops.binary_cross_entropy_with_logits(a, b), RNG.normal(0, 2, (5,)),
               probs(5))
    big = ops.binary_cross_entropy_with_logits(Tensor(np.array([200.0, -200.0], np.float32)),
                                               Tensor(np.array([0.0, 1.0], np.float32)),
                                               reduction="none")
    assert_close(big, [200.0, 200.0], ms.float32)
    with pytest.raises(ValueError, match="binary_cross_entropy: logits and labels"):
        ops.binary_cross_entropy(Tensor(x), Tensor(y[:1]))
    with pytest.raises(TypeError, match="BCEWithLogitsLoss: weight can not be a Parameter"):
        nn.BCEWithLogitsLoss(weight=ms.Parameter(Tensor(x), name="w"))
    with pytest.raises(ValueError, match="BCELoss: reduction"):
        nn.BCELoss(reduction="avg")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_layer(reduction):
    logp = np.log(probs(4, 5))
    y = np.array([0, 4, -100, 2], np.int32)
    w = probs(5)
    keep = y != -100
    ys = np.where(keep, y, 0)
    per = -logp[np.arange(4), ys] * w[ys] * keep
    want = {"none": per, "sum": per.sum(), "mean": per.sum() / (w[ys] * keep).sum()}
    got = nn.NLLLoss(Tensor(w), reduction=reduction)(Tensor(logp), Tensor(y))
    assert_close(got, want[reduction], ms.float64)


def np_smooth_l1(d, beta):
    a = np.abs(d)
    return np.where(a < beta, 0.5 * a * a / beta, a - 0.5 * beta)


def np_huber(d, delta):
    a = np.abs(d)
    return np.where(a < delta, 0.5 * a * a, delta * (a - 0.5 * delta))


def test_smooth_l1_and_huber():
    x, y = RNG.normal(0, 2, (3, 4)), RNG.normal(0, 2, (3, 4))
    got = nn.SmoothL1Loss(beta=0.5)(Tensor(x), Tensor(y))      # reduction 'none' by default
    assert_close(got, np_smooth_l1(x - y, 0.5), ms.float64)
    assert_close(ops.smooth_l1_loss(Tensor(x), Tensor(y), 2.0, "sum"),
                 np_smooth_l1(x - y, 2.0).sum(), ms.float64)
    row = RNG.normal(0, 2, (4,))                                 # HuberLoss broadcasts
    assert_close(nn.HuberLoss(delta=0.7)(Tensor(x), Tensor(row)),
                 np_huber(x - row, 0.7).mean(), ms.float64)
    assert_close(nn.HuberLoss("none")(Tensor(x), Tensor(row)), np_huber(x - row, 1.0),
                 ms.float64)
    check_grad(lambda a, b: ops.huber_loss(a, b, "none", 0.5), x, y)
    check_grad(lambda a, b: ops.smooth_l1_loss(a, b, 0.8), x, y)
    with pytest.raises(ValueError, match="smooth_l1_loss: input and target must have the same"):
        ops.smooth_l1_loss(Tensor(x), Tensor(row))
    with pytest.raises(ValueError, match="SmoothL1Loss: beta"):
        nn.SmoothL1Loss(beta=0.0)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mae_rmse_mse_l1_broadcast(reduction):
    x, y = RNG.normal(0, 1, (3,)), RNG.normal(0, 1, (2, 3))
    assert_close(nn.MAELoss(reduction)(Tensor(x), Tensor(y)), REDUCE[reduction](np.abs(x - y)),
                 ms.float64)
    assert_close(nn.MSELoss(reduction)(Tensor(x), Tensor(y)), REDUCE[reduction]((x - y) ** 2),
                 ms.float64)
    assert_close(nn.L1Loss(reduction)(Tensor(x), Tensor(y)), REDUCE[reduction](np.abs(x - y)),
                 ms.float64)
    assert_close(nn.RMSELoss()(Tensor(x), Tensor(y)), np.sqrt(((x - y) ** 2).mean()),
                 ms.float64)
    with pytest.raises(ValueError, match=r"MAELoss.*\(3,\) and \(2, 2\)"):
        nn.MAELoss()(Tensor(x), Tensor(y[:, :2]))


def test_get_loss_weights_broadcast_and_16_bit_reduces_in_float32():
    class Weighted(nn.LossBase):
        def construct(self, logits, labels):
            return self.get_loss(ops.abs(logits - labels), Tensor(np.array([[1.0], [3.0]])))

    x, y = RNG.normal(0, 1, (2, 3)), RNG.normal(0, 1, (2, 3))
    want = (np.abs(x - y) * np.array([[1.0], [3.0]])).mean()
    assert_close(Weighted()(Tensor(x), Tensor(y)), want, ms.float64)
    assert Weighted().get_axis(Tensor(x)) == (0, 1)
    h = nn.MSELoss()(Tensor(np.full(4096, 3.0, np.float16)), Tensor(np.zeros(4096, np.float16)))
    assert h.dtype == ms.float16 and float(h.asnumpy()) == 9.0


@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
def test_kl_div(reduction):
    logits = np.log(probs(3, 4))
    labels = probs(3, 4)
    labels[0, 0] = 0.0
    terms = np.where(labels > 0, labels * np.log(np.where(labels > 0, labels, 1)), 0) - \
        labels * logits
    want = {"mean": terms.mean(), "sum": terms.sum(), "none": terms,
            "batchmean": terms.sum() / 3}[reduction]
    assert_close(nn.KLDivLoss(reduction)(Tensor(logits), Tensor(labels)), want, ms.float64)
    check_grad(lambda a, b: ops.kl_div(a, b, "none"), logits, probs(3, 4))


def test_margin_ranking_cosine_embedding_soft_margin():
    a, b = RNG.normal(0, 1, (5,)), RNG.normal(0, 1, (5,))
    t = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
    want = np.maximum(0, -t * (a - b) + 0.3)
    assert_close(nn.MarginRankingLoss(0.3, "none")(Tensor(a), Tensor(b), Tensor(t)), want,
                 ms.float64)
    assert_close(nn.MarginRankingLoss(0.3)(Tensor(a), Tensor(b), Tensor(t)), want.mean(),
                 ms.float64)
    x1, x2 = RNG.normal(0, 1, (4, 3)), RNG.normal(0, 1, (4, 3))
    label = np.array([1, -1, -1, 1], np.int32)
    cos = (x1 * x2).sum(1) / np.sqrt((x1 ** 2).sum(1) * (x2 ** 2).sum(1))
    per = np.where(label == 1, 1 - cos, np.maximum(cos - 0.1, 0))
    got = nn.CosineEmbeddingLoss(0.1, "none")(Tensor(x1), Tensor(x2), Tensor(label))
    assert_close(got, per, ms.float64)
    assert_close(nn.CosineEmbeddingLoss(0.1)(Tensor(x1), Tensor(x2), Tensor(label)),
                 per.mean(), ms.float64)
    check_grad(lambda p, q: ops.cosine_embedding_loss(p, q, Tensor(label), 0.1, "none"), x1, x2)
    assert_close(nn.SoftMarginLoss()(Tensor(a), Tensor(t)), np_softplus(-t * a).mean(),
                 ms.float64)
    with pytest.raises(ValueError, match="CosineEmbeddingLoss: margin"):
        nn.CosineEmbeddingLoss(2.0)


def np_focal(logits, labels, weight, gamma):
    n, c = logits.shape[:2]
    lg = logits.reshape(n, c, -1)
    lb = labels.reshape(n, labels.shape[1], -1)
    logp = lg - np.log(np.exp(lg).sum(1, keepdims=True))
    w = np.ones(c) if weight is None else weight
    if labels.shape[1] == 1:
        idx = lb[:, 0].astype(int) % c
        picked = np.take_along_axis(logp, idx[:, None], 1)[:, 0]
        p = np.exp(picked)
        return (-(1 - p) ** gamma * picked * w[idx]).mean(1)
    p = np.exp(logp)
    return (-(1 - p) ** gamma * lb * logp * w[None, :, None]).mean(-1)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_focal_loss(reduction):
    logits = RNG.normal(0, 1, (3, 4, 2))
    sparse = RNG.integers(0, 4, (3, 1, 2)).astype(np.int32)
    w = probs(4)
    got = nn.FocalLoss(Tensor(w), 2.0, reduction)(Tensor(logits), Tensor(sparse))
    assert_close(got, REDUCE[reduction](np_focal(logits, sparse, w, 2.0)), ms.float64)
    dense = np.eye(4)[RNG.integers(0, 4, (3, 2))].transpose(0, 2, 1).astype(np.float32)
    got = nn.FocalLoss(gamma=1.5, reduction=reduction)(Tensor(logits.astype(np.float32)),
                                                       Tensor(dense))
    assert_close(got, REDUCE[reduction](np_focal(logits, dense, None, 1.5)), ms.float32,
                 rtol=1e-5)
    two_d = RNG.normal(0, 1, (3, 4))
    labels = np.array([[1], [3], [0]], np.int32)
    assert_close(nn.FocalLoss()(Tensor(two_d), Tensor(labels)),
                 np_focal(two_d, labels, None, 2.0).mean(), ms.float64)


def test_dice_losses():
    x, y = probs(3, 2), RNG.integers(0, 2, (3, 2)).astype(np.float64)
    want = 1 - 2 * (x * y).sum() / ((x * x).sum() + (y * y).sum() + 1e-5)
    assert_close(nn.DiceLoss()(Tensor(x), Tensor(y)), want, ms.float64)
    check_grad(lambda a: nn.DiceLoss()(a, Tensor(y)), x)
    z = RNG.normal(0, 1, (3, 3))
    labels = np.eye(3)[[1, 0, 2]]
    soft = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    per_class = [1 - 2 * (soft[:, i] * labels[:, i]).sum() /
                 ((soft[:, i] ** 2).sum() + (labels[:, i] ** 2).sum() + 1e-5) for i in range(3)]
    got = nn.MultiClassDiceLoss()(Tensor(z), Tensor(labels))
    assert_close(got, np.mean(per_class), ms.float64)
    got = nn.MultiClassDiceLoss(ignore_indiex=1, activation=None)(Tensor(soft), Tensor(labels))
    assert_close(got, (per_class[0] + per_class[2]) / 3, ms.float64)


class _Net(nn.Cell):
    def __init__(self, loss):
        super().__init__()
        self.loss = loss

    def construct(self, *args):
        return self.loss(*args)


def _loss_cases():
    f = np.float32
    x, y = probs(3, 4).astype(f), probs(3, 4).astype(f)
    z = RNG.normal(0, 1, (3, 4)).astype(f)
    idx = np.array([1, 0, 3], np.int32)
    return [
        (nn.BCELoss(), (x, y)), (nn.BCEWithLogitsLoss(), (z, y)), (nn.NLLLoss(), (z, idx)),
        (nn.SmoothL1Loss(), (z, x)), (nn.HuberLoss(), (z, x)), (nn.MAELoss(), (z, x)),
        (nn.KLDivLoss("batchmean"), (z, y)), (nn.RMSELoss(), (z, x)),
        (nn.MarginRankingLoss(), (z[0], x[0], np.sign(z[1]))),
        (nn.CosineEmbeddingLoss(), (z, x, np.array([1, -1, 1], np.int32))),
        (nn.FocalLoss(), (z, idx.reshape(3, 1))), (nn.DiceLoss(), (x, y)),
    ]


@pytest.mark.parametrize("index", range(12))
def test_losses_in_graph_mode_match_pynative(index):
    loss, args = _loss_cases()[index]
    tensors = [Tensor(a) for a in args]
    eager = loss(*tensors)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        graph = _Net(loss)(*tensors)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert graph.dtype == eager.dtype and graph.shape == eager.shape
    assert_close(graph, eager.asnumpy(), eager.dtype, rtol=1e-5, atol=1e-6)


def test_functional_losses_compile_like_they_run():
    x, y = Tensor(probs(3, 4).astype(np.float32)), Tensor(probs(3, 4).astype(np.float32))

    def many(a, b):
        return (ops.binary_cross_entropy(a, b), ops.binary_cross_entropy_with_logits(a, b),
                ops.smooth_l1_loss(a, b), ops.huber_loss(a, b), ops.kl_div(a, b, "sum"),
                ops.soft_margin_loss(a, b))

    assert_same_in_both_modes(many, x, y)


# ---- hinge, Gaussian NLL, multi-label soft margin, multi-margin, triplet, Poisson NLL ----

def test_hinge_and_gaussian_nll():
    x, y = RNG.normal(0, 1, (4, 5)), np.sign(RNG.normal(0, 1, (4, 5)))
    want = np.where(y == 1, x, np.maximum(0, 0.5 - x))
    assert_close(nn.HingeEmbeddingLoss(0.5, "none")(Tensor(x), Tensor(y)), want, ms.float64)
    assert_close(nn.HingeEmbeddingLoss(0.5)(Tensor(x), Tensor(y)), want.mean(), ms.float64)
    var = RNG.uniform(0.1, 2, (4,))
    ref = 0.5 * (np.log(var[:, None]) + (x - y) ** 2 / var[:, None]) + 0.5 * np.log(2 * np.pi)
    got = nn.GaussianNLLLoss(full=True, reduction="none")(Tensor(x), Tensor(y), Tensor(var))
    assert_close(got, ref, ms.float64)
    check_grad(lambda a, v: ops.gaussian_nll_loss(a, Tensor(y), v, reduction="none"), x,
               RNG.uniform(0.1, 2, (4, 5)))


def test_multilabel_and_multi_margin():
    x = RNG.normal(0, 1, (4, 5))
    t = (RNG.uniform(0, 1, (4, 5)) > 0.5).astype(np.float64)
    w = RNG.uniform(0.5, 2, (5,))
    terms = -(t * -np_softplus(-x) + (1 - t) * -np_softplus(x)) * w
    got = nn.MultiLabelSoftMarginLoss(Tensor(w), "none")(Tensor(x), Tensor(t))
    assert_close(got, terms.mean(1), ms.float64)
    idx = np.array([1, 0, 4, 2], np.int64)
    hinge = np.maximum(0, 0.5 - x[np.arange(4), idx][:, None] + x) ** 2 * w[idx][:, None]
    hinge[np.arange(4), idx] = 0
    got = nn.MultiMarginLoss(2, 0.5, "none", Tensor(w))(Tensor(x), Tensor(idx))
    assert_close(got, hinge.sum(1) / 5, ms.float64)
    check_grad(lambda a: ops.multi_margin_loss(a, Tensor(idx), reduction="none"), x)
    with pytest.raises(ValueError, match="multi_margin_loss: p must be 1 or 2"):
        ops.multi_margin_loss(Tensor(x), Tensor(idx), p=3)


@pytest.mark.parametrize("p,swap", [(2, False), (1, True)])
def test_triplet_margin_loss(p, swap):
    a, pos, neg = (RNG.normal(0, 1, (4, 6)) for _ in range(3))

    def dist(u, v):
        return (np.abs(u - v + 1e-6) ** p).sum(-1) ** (1 / p)

    d_neg = np.minimum(dist(a, neg), dist(pos, neg)) if swap else dist(a, neg)
    want = np.maximum(dist(a, pos) - d_neg + 0.5, 0)
    got = nn.TripletMarginLoss(p, swap, reduction="none", margin=0.5)(Tensor(a), Tensor(pos),
                                                                     Tensor(neg))
    assert_close(got, want, ms.float64)
    check_grad(lambda u: ops.triplet_margin_loss(u, Tensor(pos), Tensor(neg), p=p,
                                                 reduction="none"), a)


def test_poisson_nll_loss():
    x = RNG.uniform(0.1, 3, (4, 5))
    counts = RNG.integers(0, 6, (4, 5)).astype(np.float64)
    assert_close(nn.PoissonNLLLoss()(Tensor(x), Tensor(counts)),
                 (np.exp(x) - counts * x).mean(), ms.float64)
    t = np.maximum(counts, 1e-8)
    stirling = np.where(counts > 1, t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t), 0)
    want = x - counts * np.log(x + 1e-8) + stirling
    got = nn.PoissonNLLLoss(False, True, reduction="none")(Tensor(x), Tensor(counts))
    assert_close(got, want, ms.float64)
    with pytest.raises(ValueError, match="PoissonNLLLoss: the inputs must be non-scalar"):
        nn.PoissonNLLLoss()(Tensor(1.0), Tensor(1.0))


def test_more_losses_compile_like_they_run():
    x = Tensor(RNG.normal(0, 1, (4, 5)).astype(np.float32))
    y = Tensor(np.sign(RNG.normal(0, 1, (4, 5))).astype(np.float32))
    idx = Tensor(np.array([1, 0, 4, 2], np.int64))

    def many(a, b, i):
        return (ops.hinge_embedding_loss(a, b), ops.multi_margin_loss(a, i),
                ops.multilabel_soft_margin_loss(a, (b + 1) / 2),
                ops.triplet_margin_loss(a, b, a * 0.5), ops.gaussian_nll_loss(a, b, a * a + 1))

    assert_same_in_both_modes(many, x, y, idx)


# ---- CTC ----

def _collapse(path, blank):
    out, prev = [], None
    for p in path:
        if p != prev and p != blank:
            out.append(p)
        prev = p
    return out


def np_ctc(lp, target, blank=0):
    """-log of the summed probability of every path of length T collapsing to target."""
    import itertools  # noqa: PLC0415
    steps, classes = lp.shape
    total = 0.0
    for path in itertools.product(range(classes), repeat=steps):
        if _collapse(path, blank) == list(target):
            total += np.exp(sum(lp[t, c] for t, c in enumerate(path)))
    return -np.log(total) if total > 0 else np.inf


def _log_softmax(x):
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_loss_matches_enumerated_alignments(reduction):
    lp = _log_softmax(RNG.normal(0, 1, (5, 3, 3)))
    targets = np.array([[1, 2], [2, 2], [1, 0]], np.int64)
    in_len, tgt_len = np.array([5, 5, 3], np.int64), np.array([2, 2, 1], np.int64)
    per = np.array([np_ctc(lp[:in_len[b], b], targets[b, :tgt_len[b]]) for b in range(3)])
    loss, log_alpha = ops.ctc_loss(Tensor(lp), Tensor(targets), Tensor(in_len), Tensor(tgt_len),
                                   reduction=reduction)
    want = {"none": per, "sum": per.sum(), "mean": (per / np.maximum(tgt_len, 1)).mean()}
    assert_close(loss, want[reduction], ms.float64, rtol=1e-9)
    assert log_alpha.shape == (3, 5, 5)
    assert np.isneginf(log_alpha.asnumpy()[2, 3:]).all()        # past input length 3


def test_ctc_gradient_infinity_and_cell():
    lp = _log_softmax(RNG.normal(0, 1, (4, 2, 3)))
    targets = Tensor(np.array([[1, 2], [1, 1]], np.int64))
    lens, tlens = Tensor(np.array([4, 3], np.int64)), Tensor(np.array([2, 2], np.int64))
    check_grad(lambda x: ops.ctc_loss(x, targets, lens, tlens, reduction="none")[0], lp)
    # [1, 1] needs a blank between the repeats: 3 frames are enough, 2 are not.
    short = Tensor(np.array([4, 2], np.int64))
    loss, _ = ops.ctc_loss(Tensor(lp), targets, short, tlens, reduction="none")
    assert np.isinf(loss.asnumpy()[1]) and np.isfinite(loss.asnumpy()[0])
    zeroed, _ = ops.ctc_loss(Tensor(lp), targets, short, tlens, reduction="none",
                             zero_infinity=True)
    assert zeroed.asnumpy()[1] == 0.0
    cell = nn.CTCLoss(blank=0, reduction="sum")
    assert_close(cell(Tensor(lp), targets, lens, tlens),
                 ops.ctc_loss(Tensor(lp), targets, lens, tlens, reduction="sum")[0].asnumpy(),
                 ms.float64)
    single = nn.CTCLoss(reduction="none")(Tensor(lp[:, 0]), Tensor(np.array([1, 2], np.int64)),
                                          Tensor(np.array([4], np.int64)),
                                          Tensor(np.array([2], np.int64)))
    assert_close(single, np_ctc(lp[:, 0], [1, 2]), ms.float64, rtol=1e-9)
    with pytest.raises(ValueError, match="ctc_loss: blank must be an int in \\[0, 3\\)"):
        ops.ctc_loss(Tensor(lp), targets, lens, tlens, blank=3)


def test_ctc_in_graph_mode():
    lp = Tensor(_log_softmax(RNG.normal(0, 1, (6, 2, 4))).astype(np.float32))
    targets = Tensor(np.array([[1, 3, 2], [2, 2, 0]], np.int32))
    lens, tlens = Tensor(np.array([6, 5], np.int32)), Tensor(np.array([3, 2], np.int32))
    eager = nn.CTCLoss()(lp, targets, lens, tlens)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        graph = _Net(nn.CTCLoss())(lp, targets, lens, tlens)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert_close(graph, eager.asnumpy(), ms.float32, rtol=1e-5)
