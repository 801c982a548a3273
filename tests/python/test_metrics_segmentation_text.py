"""The surface-distance metrics (against SciPy's erosion and distance transforms), and
CosineSimilarity, Perplexity, BleuScore and OcclusionSensitivity against reference
computations written here."""
import math
from collections import Counter

import numpy as np
import pytest
from scipy import ndimage

import kiln as ms
from kiln import Tensor, nn, train

RNG = np.random.default_rng(44)


def scipy_surface(a, b, metric):
    """Distances from each surface pixel of a to the nearest surface pixel of b, by SciPy."""
    ea, eb = ndimage.binary_erosion(a) ^ a, ndimage.binary_erosion(b) ^ b
    if not ea.any():
        return np.array([])
    if not eb.any():
        return np.full(int(ea.sum()), np.inf)
    if metric == "euclidean":
        dist = ndimage.distance_transform_edt(~eb)
    else:
        dist = ndimage.distance_transform_cdt(~eb, metric=metric)
    return dist[ea]


def blobs(shape):
    a, b = np.zeros(shape, int), np.zeros(shape, int)
    a[tuple(slice(1, s - 3) for s in shape)] = 1
    b[tuple(slice(2, s - 1) for s in shape)] = 1
    return a, b


CASES = [blobs((12, 12)), blobs((6, 7, 5)), tuple(RNG.integers(0, 3, (2, 9, 9)))]


@pytest.mark.parametrize("metric", ["euclidean", "chessboard", "taxicab"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_surface_distances_against_scipy(metric, case):
    a, b = CASES[case]
    ma, mb = a == 1, b == 1
    forward, backward = scipy_surface(ma, mb, metric), scipy_surface(mb, ma, metric)
    hd = train.HausdorffDistance(metric, crop=False)
    assert hd(Tensor(a.astype(np.int32)), b, 1) == pytest.approx(max(forward.max(),
                                                                     backward.max()))
    assert train.HausdorffDistance(metric, directed=True, crop=False)(a, b, 1) == \
        pytest.approx(forward.max())
    assert train.HausdorffDistance(metric, 80.0, crop=False)(a, b, 1) == pytest.approx(
        max(np.percentile(forward, 80), np.percentile(backward, 80)))
    assert train.MeanSurfaceDistance(False, metric)(a, b, 1) == pytest.approx(forward.mean())
    assert train.MeanSurfaceDistance(True, metric)(a, b, 1) == pytest.approx(
        (forward.mean() + backward.mean()) / 2)
    assert train.RootMeanSquareDistance(False, metric)(a, b, 1) == pytest.approx(
        (forward ** 2).mean())
    assert train.RootMeanSquareDistance(True, metric)(a.tolist(), b, 1) == pytest.approx(
        np.sqrt(((forward ** 2).mean() + (backward ** 2).mean()) / 2))
    if metric != "euclidean":
        assert np.asarray(hd.eval()).dtype == np.int32  # as SciPy's chamfer distances


def test_hausdorff_crop_squeezes_a_one_row_union():
    # both masks in one row: cropped to that row and squeezed, the masks are 1-D, and only
    # their ends are surface pixels
    a, b = np.zeros((5, 8), int), np.zeros((5, 8), int)
    a[2, 1:6], b[2, 3:8] = 1, 1
    assert train.HausdorffDistance()(a, b, 1) == 2.0  # ends 1,5 vs 3,7
    assert train.HausdorffDistance(crop=False)(a, b, 1) == 2.0  # every pixel is surface
    assert train.HausdorffDistance(directed=True, crop=False)(b, a, 1) == 2.0


def test_surface_metrics_edge_cases_and_errors():
    a, b = blobs((8, 8))
    empty = np.zeros((8, 8), int)
    assert train.HausdorffDistance()(a, empty, 1) == np.inf
    assert train.MeanSurfaceDistance()(empty, a, 1) == np.inf
    assert train.HausdorffDistance()(a == 1, b == 1, 1) > 0  # boolean masks are used as given
    for cls in (train.HausdorffDistance, train.MeanSurfaceDistance,
                train.RootMeanSquareDistance):
        with pytest.raises(RuntimeError, match="update"):
            cls().eval()
        with pytest.raises(ValueError, match="label index 7"):
            cls()(a, b, 7)
        with pytest.raises(ValueError, match="one shape"):
            cls()(a, b[:4], 1)
        with pytest.raises(ValueError, match="distance_metric"):
            cls(distance_metric="cosine")
        with pytest.raises(ValueError, match="3 inputs"):
            cls()(a, b)
    with pytest.raises(ValueError, match="label index"):
        train.HausdorffDistance()(a, b, "1")
    with pytest.raises(TypeError, match="label index"):
        train.RootMeanSquareDistance()(a, b, "1")
    with pytest.raises(TypeError, match="percentile"):
        train.HausdorffDistance(percentile=5)
    with pytest.raises(ValueError, match="percentile"):
        train.HausdorffDistance(percentile=150.0)(a, b, 1)
    with pytest.raises(TypeError, match="symmetric"):
        train.MeanSurfaceDistance(symmetric=1)


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_cosine_similarity(similarity, reduction):
    x = RNG.normal(0, 1, (5, 3))
    rows = x / np.sqrt((x ** 2).sum(1, keepdims=True)) if similarity == "cosine" else x
    full = np.array([[rows[i] @ rows[j] for j in range(5)] for i in range(5)])
    for zero_diagonal in (True, False):
        want = full - np.diag(np.diag(full)) if zero_diagonal else full
        want = {"none": want, "sum": want.sum(-1), "mean": want.mean(-1)}[reduction]
        m = train.CosineSimilarity(similarity, reduction, zero_diagonal)
        m.update(Tensor(x))
        np.testing.assert_allclose(m.eval(), want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(m.eval(), want, rtol=1e-12, atol=1e-12)  # eval is pure
    with pytest.raises(ValueError, match="similarity"):
        train.CosineSimilarity("l2")
    with pytest.raises(RuntimeError):
        train.CosineSimilarity().eval()
    with pytest.raises(ValueError, match="2-D"):
        train.CosineSimilarity()(np.ones(3))


def test_perplexity():
    p = RNG.dirichlet(np.ones(4), size=6)
    y = RNG.integers(0, 4, 6)
    y[0] = 2
    logp = np.log(p[np.arange(6), y])
    m = train.Perplexity()
    m.update(Tensor(p), y)
    m.update(p[:2], y[:2])
    assert m.eval() == pytest.approx(math.exp(-(logp.sum() + logp[:2].sum()) / 8))
    keep = y != 2
    assert train.Perplexity(ignore_label=2)(p, y) == pytest.approx(
        math.exp(-logp[keep].mean()))
    seq = p.reshape(2, 3, 4)
    assert train.Perplexity()(seq, y.reshape(2, 3)) == pytest.approx(math.exp(-logp.mean()))
    with pytest.raises(RuntimeError, match="one value per row"):
        train.Perplexity()(p, y[:3])
    with pytest.raises(TypeError, match="ignore_label"):
        train.Perplexity(ignore_label=1.0)
    with pytest.raises(RuntimeError):
        train.Perplexity().eval()


def reference_bleu(candidates, references, n_gram, smooth):
    """Corpus BLEU written out: clipped n-gram matches, precisions, brevity penalty."""
    matches, totals, c, r = [0] * n_gram, [0] * n_gram, 0, 0
    for cand, refs in zip(candidates, references):
        c += len(cand)
        r += sorted((abs(len(ref) - len(cand)), i, len(ref)) for i, ref in
                    enumerate(refs))[0][2]
        for n in range(1, n_gram + 1):
            grams = Counter(tuple(cand[i:i + n]) for i in range(len(cand) - n + 1))
            most = Counter()
            for ref in refs:
                for g, k in Counter(tuple(ref[i:i + n]) for i in
                                    range(len(ref) - n + 1)).items():
                    most[g] = max(most[g], k)
            matches[n - 1] += sum(min(k, most[g]) for g, k in grams.items())
            totals[n - 1] += sum(grams.values())
    if min(matches) == 0:
        return 0.0
    add = 1.0 if smooth else 0.0
    precisions = [(m + add) / (t + add) for m, t in zip(matches, totals)]
    penalty = 1.0 if c > r else math.exp(1 - r / c)
    return penalty * math.exp(sum(math.log(p) for p in precisions) / n_gram)


def test_bleu_score():
    cands = [["the", "cat", "sat", "on", "the", "mat"],
             ["a", "dog", "ran", "in", "the", "park", "today"]]
    refs = [[["the", "cat", "is", "on", "the", "mat"],
             ["there", "is", "a", "cat", "on", "the", "mat"]],
            [["a", "dog", "ran", "in", "the", "park"],
             ["the", "dog", "was", "running", "in", "a", "park", "today"]]]
    for n in (1, 2, 3, 4):
        for smooth in (False, True):
            m = train.BleuScore(n, smooth)
            m.update(cands[:1], refs[:1])
            m.update(cands[1:], refs[1:])
            assert float(m.eval()) == pytest.approx(reference_bleu(cands, refs, n, smooth))
    short = train.BleuScore(2)([["the", "cat"]], [[["the", "cat", "sat", "down"]]])
    assert float(short) == pytest.approx(math.exp(1 - 4 / 2))  # brevity penalty only
    assert float(train.BleuScore()([["x", "y"]], [[["a", "b"]]])) == 0.0
    with pytest.raises(ValueError, match="n_gram"):
        train.BleuScore(5)
    with pytest.raises(ValueError, match="one list of references"):
        train.BleuScore()(cands, refs[:1])
    with pytest.raises(RuntimeError):
        train.BleuScore().eval()


class Linear(nn.Cell):
    def __init__(self, w):
        super().__init__()
        self.w = ms.Parameter(Tensor(w))

    def construct(self, x):
        return ms.ops.matmul(x.reshape(x.shape[0], -1), self.w)


def test_occlusion_sensitivity_against_a_loop():
    w = RNG.normal(0, 1, (1 * 5 * 4, 3)).astype(np.float32)
    x = RNG.normal(0, 1, (1, 1, 5, 4)).astype(np.float32)
    net, label, margin = Linear(w), 2, 1
    base = (x.reshape(1, -1) @ w)[0, label]
    want = np.zeros((1, 5, 4))
    for idx in np.ndindex(1, 5, 4):
        occluded = x.copy()
        window = tuple(slice(max(0, p - margin), min(n, p + margin))
                       for p, n in zip(idx, (1, 5, 4)))
        occluded[(slice(None),) + window] = 0.5
        want[idx] = base - (occluded.reshape(1, -1) @ w)[0, label]
    m = train.OcclusionSensitivity(pad_val=0.5, margin=margin, n_batch=7)
    m.update(net, Tensor(x), np.array(label))
    np.testing.assert_allclose(m.eval(), want[0], rtol=1e-4, atol=1e-5)
    boxed = train.OcclusionSensitivity(0.5, margin, b_box=[0, 0, 1, 3, -1, 2])(net, x, label)
    np.testing.assert_allclose(boxed, want[0, 1:4, 0:3], rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match="Cell"):
        train.OcclusionSensitivity()(lambda v: v, x, label)
    with pytest.raises(RuntimeError, match="one sample"):
        train.OcclusionSensitivity()(net, np.concatenate([x, x]), label)
    with pytest.raises(ValueError, match="b_box"):
        train.OcclusionSensitivity(b_box=[0, 1])(net, x, label)
    with pytest.raises(TypeError, match="pad_val"):
        train.OcclusionSensitivity(pad_val=0)
    with pytest.raises(RuntimeError):
        train.OcclusionSensitivity().eval()
