"""Smoke test of the main demo (examples/demo.py): its models learn the digits data quickly."""
import importlib.util
import os

import numpy as np

import kiln as ms

DEMO = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "demo.py")


def load_demo():
    spec = importlib.util.spec_from_file_location("kiln_demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_data_split():
    demo = load_demo()
    (x_train, y_train), (x_test, y_test) = demo.load_digits_split(seed=0)
    assert x_train.shape[1:] == (1, 8, 8) and x_train.dtype == np.float32
    assert len(y_train) + len(y_test) == 1797 and len(y_test) == 359
    assert abs(float(x_train.mean())) < 1e-4


def test_demo_models_learn(capsys):
    demo = load_demo()
    ms.set_seed(0)
    data = demo.load_digits_split(seed=0)
    threads = ms.get_num_threads()
    ms.set_num_threads(1)  # as the demo runs: the models are too small to split across threads
    try:
        for graph in (False, True):
            for model in (demo.MLP(), demo.LeNet()):
                acc, _ = demo.train(type(model).__name__, model, data, epochs=3, batch_size=32,
                                    learning_rate=3e-3, seed=0, graph=graph)
                assert acc > 0.9
    finally:
        ms.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "test accuracy" in out and "ms per training step" in out
