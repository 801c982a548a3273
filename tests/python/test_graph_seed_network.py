"""The seed network runs unchanged in all five ways (SPEC §4) and agrees with PyNative."""

import pathlib
import sys

import numpy as np
import pytest

import kiln as ms

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
import five_ways  # noqa: E402


@pytest.fixture(autouse=True)
def _reset():
    yield
    ms.reset_context()


def test_five_ways_agree():
    x = ms.Tensor(np.random.default_rng(0).standard_normal((64, 1, 28, 28)).astype(np.float32))
    results = five_ways.five_ways(x)
    reference = results["1. PYNATIVE_MODE"].asnumpy()
    assert reference.shape == (64, 10)
    for way, logits in results.items():
        assert logits.shape == (64, 10), way
        np.testing.assert_allclose(logits.asnumpy(), reference, rtol=1e-5, atol=1e-5, err_msg=way)


def test_the_undecorated_function_still_runs_eagerly():
    x = ms.Tensor(np.ones((2, 1, 28, 28), np.float32))
    before = ms.get_jit_stats()["compiles"]
    assert five_ways.run(x).shape == (2, 10)
    assert ms.get_jit_stats()["compiles"] == before


def test_graph_mode_caches_the_compiled_network():
    net = five_ways.build()
    x = ms.Tensor(np.ones((8, 1, 28, 28), np.float32))
    ms.set_context(mode=ms.GRAPH_MODE)
    net(x)
    s = ms.get_jit_stats()
    net(x)
    net(x)
    s2 = ms.get_jit_stats()
    assert s2["compiles"] == s["compiles"] and s2["cache_hits"] == s["cache_hits"] + 2
