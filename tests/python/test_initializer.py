"""kiln.common.initializer: values and statistics of each initializer, names, seeding, defaults."""
import math

import numpy as np
import pytest

import kiln as ms
from kiln import nn
from kiln.common import initializer as init
from kiln.common.initializer import initializer


def test_constant_initializers():
    np.testing.assert_array_equal(initializer("zeros", (2, 3)).asnumpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(initializer("ones", [4]).asnumpy(), np.ones(4))
    np.testing.assert_array_equal(initializer(init.Constant(2.5), (2,)).asnumpy(), [2.5, 2.5])
    np.testing.assert_array_equal(initializer(3, (2,), ms.int32).asnumpy(), [3, 3])
    assert initializer(init.One(), (2,), ms.float16).dtype == ms.float16
    assert initializer("zeros", 3).shape == (3,)


def test_initializer_from_tensor_checks_shape():
    t = ms.Tensor(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(initializer(t, (4,)).asnumpy(), np.arange(4))
    with pytest.raises(ValueError, match=r"\(4,\)"):
        initializer(t, (5,))


def test_bad_names_and_types():
    with pytest.raises(ValueError, match="unknown initializer name"):
        initializer("nonsense", (2,))
    with pytest.raises(TypeError):
        initializer(object(), (2,))
    with pytest.raises(ValueError, match="negative"):
        initializer("zeros", (-1, 2))


@pytest.mark.parametrize("name,cls", [
    ("normal", init.Normal), ("uniform", init.Uniform), ("he_uniform", init.HeUniform),
    ("HeUniform", init.HeUniform), ("he_normal", init.HeNormal),
    ("xavier_uniform", init.XavierUniform), ("truncatedNormal", init.TruncatedNormal),
    ("truncated_normal", init.TruncatedNormal), ("zeros", init.Zero), ("ones", init.One),
])
def test_string_names(name, cls):
    assert isinstance(init._from_name(name), cls)


def test_uniform_range_and_mean():
    ms.set_seed(1)
    v = initializer(init.Uniform(0.5), (200, 100)).asnumpy()
    assert v.min() >= -0.5 and v.max() <= 0.5
    assert abs(v.mean()) < 0.01 and abs(v.std() - 0.5 / math.sqrt(3)) < 0.01


def test_normal_statistics():
    ms.set_seed(2)
    v = initializer(init.Normal(sigma=0.2, mean=1.0), (300, 100)).asnumpy()
    assert abs(v.mean() - 1.0) < 0.01 and abs(v.std() - 0.2) < 0.01


def test_he_and_xavier_bounds():
    ms.set_seed(3)
    shape = (64, 32, 3, 3)
    fan_in, fan_out = 32 * 9, 64 * 9
    v = initializer(init.HeUniform(), shape).asnumpy()   # leaky_relu slope 0: gain sqrt(2)
    bound = math.sqrt(2) * math.sqrt(3 / fan_in)
    assert v.max() <= bound and v.min() >= -bound and v.max() > 0.9 * bound
    v = initializer(init.HeNormal(mode="fan_out"), shape).asnumpy()
    assert abs(v.std() - math.sqrt(2 / fan_out)) < 0.05 * math.sqrt(2 / fan_out)
    v = initializer(init.XavierUniform(gain=2), (50, 30)).asnumpy()
    bound = 2 * math.sqrt(6 / 80)
    assert v.max() <= bound and v.min() >= -bound


def test_truncated_normal_stays_in_bounds():
    ms.set_seed(4)
    v = initializer(init.TruncatedNormal(sigma=1.0, a=-0.5, b=0.5), (100, 100)).asnumpy()
    assert v.min() >= -0.5 and v.max() <= 0.5


def test_initializer_fills_numpy_array():
    arr = np.zeros((3, 3), np.float32)
    init.Identity()(arr)
    np.testing.assert_array_equal(arr, np.eye(3))


def test_same_seed_same_values_different_seed_different_values():
    ms.set_seed(123)
    a = initializer("normal", (10, 10)).asnumpy().copy()
    b = initializer("normal", (10, 10)).asnumpy().copy()
    ms.set_seed(123)
    c = initializer("normal", (10, 10)).asnumpy()
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)  # successive draws differ
    ms.set_seed(124)
    assert not np.array_equal(a, initializer("normal", (10, 10)).asnumpy())


def test_set_seed_makes_networks_reproducible():
    def weights():
        net = nn.SequentialCell(nn.Dense(8, 4), nn.Conv2d(1, 2, 3))
        return [p.asnumpy().copy() for p in net.get_parameters()]

    ms.set_seed(7)
    first = weights()
    ms.set_seed(7)
    second = weights()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_dense_and_conv_default_init_bounds():
    ms.set_seed(0)
    dense = nn.Dense(100, 50)
    bound = 1 / math.sqrt(100)   # HeUniform(sqrt(5)) and Uniform(1/sqrt(in)) share it
    for p in (dense.weight, dense.bias):
        v = p.asnumpy()
        assert v.min() >= -bound and v.max() <= bound and v.max() > 0.8 * bound
    conv = nn.Conv2d(4, 8, 3, has_bias=True)
    bound = 1 / math.sqrt(4 * 9)
    for p in (conv.weight, conv.bias):
        v = p.asnumpy()
        assert v.min() >= -bound and v.max() <= bound


def test_tensor_with_init_argument():
    t = ms.Tensor(shape=(2, 3), dtype=ms.float32, init=init.One())
    np.testing.assert_array_equal(t.asnumpy(), np.ones((2, 3)))
