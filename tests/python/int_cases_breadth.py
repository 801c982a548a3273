"""Int-argument cases of the functional ops added for API breadth (merged into
test_int_arguments.CASES): each call succeeds for v = 1."""
import numpy as np

import kiln as ms
from kiln import ops

X = ms.Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
V = ms.Tensor(np.arange(4, dtype=np.float32))
SQ = ms.Tensor(np.eye(3, dtype=np.float32))
IMG1 = ms.Tensor(np.ones((1, 2, 6), np.float32))
I2 = ms.Tensor(np.array([[0, 1], [1, 0]]))
P = ms.Tensor(np.array([0.5, 0.5], np.float32))
T0, T1 = ms.Tensor(0.0), ms.Tensor(1.0)

BREADTH_CASES = {
    "adaptive_max_pool1d": {"output_size": lambda v: ops.adaptive_max_pool1d(X, v)},
    "all": {"axis": lambda v: ops.all(X, v)}, "any": {"axis": lambda v: ops.any(X, (0, v))},
    "aminmax": {"axis": lambda v: ops.aminmax(X, axis=v)},
    "argsort": {"axis": lambda v: ops.argsort(X, v)},
    "batch_dot": {"axes": lambda v: ops.batch_dot(X, X, (v, 1))},
    "bernoulli": {"seed": lambda v: ops.bernoulli(X, 0.5, v)},
    "conv1d": {"stride": lambda v: ops.conv1d(IMG1, IMG1[:, :, :2], stride=v),
               "padding": lambda v: ops.conv1d(IMG1, IMG1[:, :, :2], None, 1, "pad", v),
               "dilation": lambda v: ops.conv1d(IMG1, IMG1[:, :, :2], dilation=v),
               "groups": lambda v: ops.conv1d(IMG1, IMG1[:, :, :2], groups=v)},
    "cosine_similarity": {"dim": lambda v: ops.cosine_similarity(X, X, v)},
    "count_nonzero": {"axis": lambda v: ops.count_nonzero(X, v)},
    "cross": {"dim": lambda v: ops.cross(X[:, :, :3], X[:, :, :3], v)},
    "cummax": {"axis": lambda v: ops.cummax(X, v)}, "cummin": {"axis": lambda v: ops.cummin(X, v)},
    "cumprod": {"dim": lambda v: ops.cumprod(X, v)}, "cumsum": {"axis": lambda v: ops.cumsum(X, v)},
    "diff": {"axis": lambda v: ops.diff(X, 1, v)}, "diff_ext": {"dim": lambda v: ops.diff_ext(
        X, 1, v)},
    "expand": {"size": lambda v: ops.expand(X[:1], (v, 3, 4))},
    "flip": {"dims": lambda v: ops.flip(X, (v,))},
    "gather_d": {"dim": lambda v: ops.gather_d(X[0, :2, :2], v, I2)},
    "gather_elements": {"dim": lambda v: ops.gather_elements(X[0, :2, :2], v, I2)},
    "gumbel_softmax": {"dim": lambda v: ops.gumbel_softmax(X, dim=v)},
    "index_fill": {"axis": lambda v: ops.index_fill(X, v, I2[0], 0.0)},
    "index_select": {"axis": lambda v: ops.index_select(X, v, I2[0])},
    "intopk": {"k": lambda v: ops.intopk(X[0], ms.Tensor(np.array([0, 1, 2], np.int32)), v)},
    "laplace": {"shape": lambda v: ops.laplace((v, 2), T0, T1),
                "seed": lambda v: ops.laplace((2,), T0, T1, v)},
    "linspace": {"steps": lambda v: ops.linspace(0, 1, v)},
    "logcumsumexp": {"axis": lambda v: ops.logcumsumexp(X, v)},
    "max_unpool1d": {"kernel_size": lambda v: ops.max_unpool1d(IMG1, IMG1.astype(ms.int64), v),
                     "stride": lambda v: ops.max_unpool1d(IMG1, IMG1.astype(ms.int64), 1, v),
                     "padding": lambda v: ops.max_unpool1d(IMG1, IMG1.astype(ms.int64), 3, 1, v),
                     "output_size": lambda v: ops.max_unpool1d(IMG1, IMG1.astype(ms.int64), 1,
                                                               output_size=(v,))},
    "max_unpool2d": {"kernel_size": lambda v: ops.max_unpool2d(X[None], X[None].astype(ms.int64),
                                                              (v, 1)),
                     "stride": lambda v: ops.max_unpool2d(X[None], X[None].astype(ms.int64), 1,
                                                         (v, 1)),
                     "padding": lambda v: ops.max_unpool2d(X[None], X[None].astype(ms.int64), 3,
                                                          1, (v, 1)),
                     "output_size": lambda v: ops.max_unpool2d(X[None], X[None].astype(ms.int64),
                                                              1, output_size=(v, 4))},
    "matrix_norm": {"dim": lambda v: ops.matrix_norm(X, dim=(v, 2))},
    "median": {"axis": lambda v: ops.median(X, v)},
    "multinomial": {"seed": lambda v: ops.multinomial(P, 2, seed=v)},
    "nanmean": {"axis": lambda v: ops.nanmean(X, v)},
    "nanmedian": {"axis": lambda v: ops.nanmedian(X, v)},
    "nanquantile": {"axis": lambda v: ops.nanquantile(X, 0.5, v)},
    "nansum": {"axis": lambda v: ops.nansum(X, v)},
    "norm": {"dim": lambda v: ops.norm(X, dim=v)},
    "normal": {"shape": lambda v: ops.normal((v,), T0, T1),
               "seed": lambda v: ops.normal((2,), T0, T1, v)},
    "quantile": {"axis": lambda v: ops.quantile(X, 0.5, v)},
    "rand_like": {"seed": lambda v: ops.rand_like(X, v)},
    "randint": {"size": lambda v: ops.randint(0, 3, (v, 2)),
                "seed": lambda v: ops.randint(0, 3, (2,), v)},
    "randint_like": {"seed": lambda v: ops.randint_like(I2, 0, 3, v)},
    "randn_like": {"seed": lambda v: ops.randn_like(X, v)},
    "random_categorical": {"seed": lambda v: ops.random_categorical(X[0], 2, v)},
    "randperm": {"seed": lambda v: ops.randperm(3, v)},
    "renorm": {"axis": lambda v: ops.renorm(X, 2, v, 1.0)},
    "repeat_elements": {"axis": lambda v: ops.repeat_elements(X, 2, v)},
    "repeat_interleave": {"repeats": lambda v: ops.repeat_interleave(X, v, 1),
                          "axis": lambda v: ops.repeat_interleave(X, 2, v)},
    "reverse": {"axis": lambda v: ops.reverse(X, (v,))},
    "rot90": {"k": lambda v: ops.rot90(X, v, (0, 1)), "dims": lambda v: ops.rot90(X, 1, (0, v))},
    "scatter": {"axis": lambda v: ops.scatter(X[0, :2, :2], v, I2, X[0, :2, :2])},
    "scatter_nd": {"shape": lambda v: ops.scatter_nd(I2[:, :1] * 0, X[0, :2], (v, 4))},
    "select_scatter": {"axis": lambda v: ops.select_scatter(X, X[:, 0], v, 0)},
    "shuffle": {"seed": lambda v: ops.shuffle(X, v)},
    "slice": {"size": lambda v: ops.slice(X, (0, 0, 0), (v, 2, 2))},
    "slice_scatter": {"axis": lambda v: ops.slice_scatter(X, X[:, :1], v, 0, 1),
                      "start": lambda v: ops.slice_scatter(X, X[:, :1], 1, v, 2)},
    "sort": {"axis": lambda v: ops.sort(X, v)},
    "standard_laplace": {"shape": lambda v: ops.standard_laplace((v,)),
                         "seed": lambda v: ops.standard_laplace((2,), v)},
    "std": {"axis": lambda v: ops.std(X, v)}, "std_mean": {"axis": lambda v: ops.std_mean(X, v)},
    "swiglu": {"dim": lambda v: ops.swiglu(X.reshape(2, 4, 3), v)},
    "tensor_dot": {"axes": lambda v: ops.tensor_dot(X, X.transpose(2, 0, 1), v)},
    "tensor_scatter_elements": {"axis": lambda v: ops.tensor_scatter_elements(
        X[0, :2, :2], I2, X[0, :2, :2], v)},
    "tensor_split": {"axis": lambda v: ops.tensor_split(X, 2, v)},
    "top_k": {"k": lambda v: ops.top_k(X, v)},
    "topk": {"k": lambda v: ops.topk(X, v), "dim": lambda v: ops.topk(X, 1, v)},
    "trapz": {"dim": lambda v: ops.trapz(X, dim=v)},
    "unbind": {"dim": lambda v: ops.unbind(X, v)},
    "unique_consecutive": {"dim": None},
    "unstack": {"axis": lambda v: ops.unstack(X, v)},
    "upsample": {"size": lambda v: ops.upsample(X, size=(v,))},
    "var": {"axis": lambda v: ops.var(X, v)}, "var_mean": {"axis": lambda v: ops.var_mean(X, v)},
    "vecdot": {"axis": lambda v: ops.vecdot(X, X, axis=v)},
    "vector_norm": {"axis": lambda v: ops.vector_norm(X, 2, v)},
}
del BREADTH_CASES["unique_consecutive"]  # dim other than None is refused (ValueError)
# Parameters of these ops that legitimately take floats (or tensors): numeric bounds.
BREADTH_FLOAT_OK = {("linspace", "start"), ("logspace", "start"), ("range", "start"),
                    ("unique_consecutive", "dim")}
# The name the error message gives for an alias.
BREADTH_SHOWN = {"upsample": "interpolate"}
