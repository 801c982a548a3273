"""Axes, counts, sizes and shapes must be ints: a float (or a bool) is a TypeError naming the op
in every public op, never silently truncated; tuples of the wrong length are a ValueError."""
import inspect

import numpy as np
import pytest
from int_cases_breadth import BREADTH_CASES, BREADTH_FLOAT_OK, BREADTH_SHOWN

import kiln as ms
from kiln import nn, ops

X = ms.Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
IMG = ms.Tensor(np.ones((1, 1, 4, 4), np.float32))
W = ms.Tensor(np.ones((1, 1, 2, 2), np.float32))
IDX = ms.Tensor(np.array([0, 1]))
LOGITS = ms.Tensor(np.ones((2, 3), np.float32))

# op -> {parameter: a call with value v for that parameter (and valid values for the rest)}.
# Each call succeeds for v = 1, so a float 1.0 that were truncated would pass unnoticed.
CASES = {
    "sum": {"dim": lambda v: ops.sum(X, (0, v))},
    "mean": {"axis": lambda v: ops.mean(X, v)},
    "prod": {"axis": lambda v: ops.prod(X, v)},
    "amax": {"axis": lambda v: ops.amax(X, v)},
    "amin": {"axis": lambda v: ops.amin(X, (v,))},
    "max": {"axis": lambda v: ops.max(X, v)},
    "min": {"axis": lambda v: ops.min(X, v)},
    "argmax": {"dim": lambda v: ops.argmax(X, v)},
    "argmin": {"axis": lambda v: ops.argmin(X, v)},
    "softmax": {"axis": lambda v: ops.softmax(X, v)},
    "log_softmax": {"axis": lambda v: ops.log_softmax(X, v)},
    "logsumexp": {"axis": lambda v: ops.logsumexp(X, v)},
    "reshape": {"shape": lambda v: ops.reshape(X, (v, 24))},
    "broadcast_to": {"shape": lambda v: ops.broadcast_to(X, (v, 2, 3, 4))},
    "transpose": {"input_perm": lambda v: ops.transpose(X, (0, v, 2))},
    "permute": {"axis": lambda v: ops.permute(X, (0, v, 2))},
    "tile": {"dims": lambda v: ops.tile(X, (v, 2))},
    "squeeze": {"axis": lambda v: ops.squeeze(ops.reshape(X, (2, 1, 12)), v)},
    "expand_dims": {"axis": lambda v: ops.expand_dims(X, v)},
    "unsqueeze": {"dim": lambda v: ops.unsqueeze(X, v)},
    "swapaxes": {"axis0": lambda v: ops.swapaxes(X, v, 2),
                 "axis1": lambda v: ops.swapaxes(X, 0, v)},
    "flatten": {"start_dim": lambda v: ops.flatten(X, start_dim=v),
                "end_dim": lambda v: ops.flatten(X, start_dim=0, end_dim=v)},
    "narrow": {"axis": lambda v: ops.narrow(X, v, 0, 2), "start": lambda v: ops.narrow(X, 1, v, 2),
               "length": lambda v: ops.narrow(X, 1, 0, v)},
    "concat": {"axis": lambda v: ops.concat([X, X], v)},
    "cat": {"axis": lambda v: ops.cat([X, X], v)},
    "stack": {"axis": lambda v: ops.stack([X, X], v)},
    "split": {"split_size_or_sections": lambda v: ops.split(X, v, 1),
              "axis": lambda v: ops.split(X, [1, 2], v)},
    "chunk": {"chunks": lambda v: ops.chunk(X, v, 1), "axis": lambda v: ops.chunk(X, 2, v)},
    "gather": {"axis": lambda v: ops.gather(X, IDX, v),
               "batch_dims": lambda v: ops.gather(X, ms.Tensor(np.zeros((2, 1), np.int64)), 1,
                                                  v)},
    "one_hot": {"depth": lambda v: ops.one_hot(IDX, v),
                "axis": lambda v: ops.one_hot(IDX, 2, axis=v)},
    "zeros": {"size": lambda v: ops.zeros((2, v)), "shape": lambda v: ops.zeros(shape=(2, v))},
    "ones": {"size": lambda v: ops.ones(v), "shape": lambda v: ops.ones(shape=v)},
    "full": {"size": lambda v: ops.full((v, 2), 0.5)},
    "fill": {"shape": lambda v: ops.fill(ms.float32, (v, 2), 0.5)},
    "rand": {"size": lambda v: ops.rand(2, v), "seed": lambda v: ops.rand(2, seed=v)},
    "randn": {"size": lambda v: ops.randn((v, 2)), "seed": lambda v: ops.randn(2, seed=v)},
    "standard_normal": {"shape": lambda v: ops.standard_normal((v,)),
                        "seed": lambda v: ops.standard_normal((2,), seed=v)},
    "uniform": {"shape": lambda v: ops.uniform((v,), ms.Tensor(0.0), ms.Tensor(1.0)),
                "seed": lambda v: ops.uniform((2,), ms.Tensor(0.0), ms.Tensor(1.0), seed=v)},
    "conv2d": {"stride": lambda v: ops.conv2d(IMG, W, stride=v),
               "padding": lambda v: ops.conv2d(IMG, W, pad_mode="pad", padding=(v, 1, 1, 1)),
               "dilation": lambda v: ops.conv2d(IMG, W, dilation=(v, 1)),
               "groups": lambda v: ops.conv2d(IMG, W, groups=v)},
    "max_pool2d": {"kernel_size": lambda v: ops.max_pool2d(IMG, (v, 2)),
                   "stride": lambda v: ops.max_pool2d(IMG, 2, (v, 1)),
                   "padding": lambda v: ops.max_pool2d(IMG, 2, padding=v),
                   "dilation": lambda v: ops.max_pool2d(IMG, 2, dilation=v)},
    "avg_pool2d": {"kernel_size": lambda v: ops.avg_pool2d(IMG, (2, v)),
                   "stride": lambda v: ops.avg_pool2d(IMG, 2, v),
                   "padding": lambda v: ops.avg_pool2d(IMG, 2, padding=(v, 0)),
                   "divisor_override": lambda v: ops.avg_pool2d(IMG, 2, divisor_override=v)},
    "adaptive_avg_pool2d": {"output_size": lambda v: ops.adaptive_avg_pool2d(IMG, (v, 2))},
    "layer_norm": {"normalized_shape": lambda v: ops.layer_norm(ops.expand_dims(X, -1), (4, v))},
    "dropout": {"seed": lambda v: ops.dropout(X, 0.5, seed=v)},
    "cross_entropy": {"ignore_index": lambda v: ops.cross_entropy(LOGITS, IDX, ignore_index=v)},
    "nll_loss": {"ignore_index": lambda v: ops.nll_loss(LOGITS, IDX, ignore_index=v)},
    "adaptive_avg_pool1d": {"output_size": lambda v: ops.adaptive_avg_pool1d(X, v)},
    "adaptive_max_pool2d": {"output_size": lambda v: ops.adaptive_max_pool2d(IMG, (v, 2))},
    "adaptive_avg_pool3d": {"output_size": lambda v: ops.adaptive_avg_pool3d(IMG, (v, 2, 2))},
    "avg_pool1d": {"kernel_size": lambda v: ops.avg_pool1d(X, v),
                   "stride": lambda v: ops.avg_pool1d(X, 2, v),
                   "padding": lambda v: ops.avg_pool1d(X, 3, 1, v)},
    "lp_pool1d": {"kernel_size": lambda v: ops.lp_pool1d(X, 2, v),
                  "stride": lambda v: ops.lp_pool1d(X, 2, 2, v)},
    "lp_pool2d": {"kernel_size": lambda v: ops.lp_pool2d(IMG, 2, (v, 2)),
                  "stride": lambda v: ops.lp_pool2d(IMG, 2, 2, (v, 1))},
    "interpolate": {"size": lambda v: ops.interpolate(X, size=(v,))},
    "pad": {"padding": lambda v: ops.pad(X, (v, 1))},
    "channel_shuffle": {"groups": lambda v: ops.channel_shuffle(X, v)},
    "glu": {"axis": lambda v: ops.glu(ops.concat([X, X], 1), v)},
    "softmin": {"axis": lambda v: ops.softmin(X, v)},
    "roll": {"dims": lambda v: ops.roll(X, 1, v)},
    "unfold": {"kernel_size": lambda v: ops.unfold(IMG, (v, 2)),
               "dilation": lambda v: ops.unfold(IMG, 2, dilation=v),
               "padding": lambda v: ops.unfold(IMG, 2, padding=v),
               "stride": lambda v: ops.unfold(IMG, 2, stride=v)},
}
CASES.update(BREADTH_CASES)
# The name the error message gives for an alias.
SHOWN = {"cat": "concat"} | BREADTH_SHOWN
INT_PARAMETERS = {
    "axis", "axes", "dim", "shape", "size", "dims", "input_perm", "axis0", "axis1", "start_dim",
    "end_dim", "start", "length", "split_size_or_sections", "chunks", "batch_dims", "depth",
    "seed", "stride", "padding", "dilation", "groups", "kernel_size", "divisor_override",
    "output_size", "normalized_shape", "ignore_index", "repeats", "k", "num", "count",
}
# Parameters with those names that legitimately take floats.
FLOAT_OK = {("arange", "start")} | BREADTH_FLOAT_OK
CALLS = [(op, name, fn) for op, params in CASES.items() for name, fn in params.items()]


def test_every_public_op_with_an_int_parameter_is_covered():
    missing = []
    for op in ops.__all__:
        fn = getattr(ops, op)
        if not inspect.isfunction(fn):
            continue
        for name in inspect.signature(fn).parameters:
            if name in INT_PARAMETERS and (op, name) not in FLOAT_OK \
                    and name not in CASES.get(op, {}):
                missing.append(f"{op}({name})")
    assert missing == [], "add these to CASES: " + ", ".join(missing)


@pytest.mark.parametrize("op,name,fn", CALLS, ids=[f"{op}-{name}" for op, name, _ in CALLS])
def test_ints_are_accepted(op, name, fn):
    fn(1)
    fn(np.int64(1))


@pytest.mark.parametrize("bad", [1.0, np.float32(1.0), True], ids=["float", "np.float32", "bool"])
@pytest.mark.parametrize("op,name,fn", CALLS, ids=[f"{op}-{name}" for op, name, _ in CALLS])
def test_floats_and_bools_are_type_errors_naming_the_op(op, name, fn, bad):
    with pytest.raises(TypeError, match=rf"^{SHOWN.get(op, op)}: {name}"):
        fn(bad)


def test_tensor_methods_and_primitives_check_too():
    with pytest.raises(TypeError, match="sum: dim"):
        X.sum(1.0)
    with pytest.raises(TypeError, match="reshape: shape"):
        X.reshape(2.0, 12)
    with pytest.raises(TypeError, match="squeeze: axis"):
        X.squeeze(0.0)
    with pytest.raises(TypeError, match="sum: dim"):
        ops.ReduceSum()(X, 1.0)
    with pytest.raises(TypeError, match="zeros: size"):
        ops.zeros(ms.Tensor(np.array([2.0, 3.5])))


@pytest.mark.parametrize("make", [
    lambda: nn.Dense(3.0, 2), lambda: nn.Conv2d(1, 2, 3.0), lambda: nn.Conv2d(1, 2, 3, stride=True),
    lambda: nn.Conv2d(1, 2, 3, pad_mode="pad", padding=(1.0, 1)), lambda: nn.MaxPool2d(2.0),
    lambda: nn.AvgPool2d(2, (1, 1.0)), lambda: nn.Flatten(1.0), lambda: nn.Embedding(4.0, 2),
    lambda: nn.LayerNorm((4.0,)), lambda: nn.ExponentialDecayLR(0.1, 0.9, 2.5),
    lambda: nn.CosineDecayLR(0.0, 0.1, 10.0), lambda: nn.PolynomialDecayLR(0.1, 0.0, 3.5, 1.0),
    lambda: nn.WarmUpLR(0.1, 5.0),
], ids=["Dense", "Conv2d-kernel", "Conv2d-stride", "Conv2d-padding", "MaxPool2d", "AvgPool2d",
        "Flatten", "Embedding", "LayerNorm", "ExponentialDecayLR", "CosineDecayLR",
        "PolynomialDecayLR", "WarmUpLR"])
def test_layers_reject_float_sizes(make):
    with pytest.raises(TypeError):
        make()


def sum_over_float_axis(x):
    return ops.sum(x, 1.0)


def reshape_to_float_shape(x):
    return ops.reshape(x, (2.0, 12))


def one_hot_float_depth(x):
    return ops.one_hot(x, 3.0)


@pytest.mark.parametrize("fn,arg,op", [(sum_over_float_axis, X, "sum"),
                                       (reshape_to_float_shape, X, "reshape"),
                                       (one_hot_float_depth, IDX, "one_hot")])
def test_graph_mode_raises_the_same_type_error(fn, arg, op):
    with pytest.raises(TypeError, match=op):
        ms.jit(fn)(arg)


# ---- tuples of the wrong length, negative sizes ----

@pytest.mark.parametrize("call", [
    lambda: ops.adaptive_avg_pool2d(IMG, (2, 2, 2)), lambda: ops.adaptive_avg_pool2d(IMG, (2,)),
    lambda: ops.adaptive_avg_pool2d(IMG, (-1, 2)), lambda: ops.adaptive_avg_pool2d(IMG, 0),
    lambda: ops.max_pool2d(IMG, (2, 2, 2)), lambda: ops.max_pool2d(IMG, 2, padding=-1),
    lambda: ops.avg_pool2d(IMG, 2, (1, 1, 1)), lambda: ops.avg_pool2d(IMG, (-2, 2)),
    lambda: ops.conv2d(IMG, W, stride=(1, 1, 1)), lambda: ops.conv2d(IMG, W, dilation=()),
    lambda: ops.conv2d(IMG, W, pad_mode="pad", padding=(1, 1, 1)),
    lambda: ops.conv2d(IMG, W, pad_mode="pad", padding=(1, -1)),
    lambda: nn.MaxPool2d((2, 2, 2)), lambda: nn.AvgPool2d(2, stride=(1,)),
    lambda: nn.Conv2d(1, 2, (3, 3, 3)),
    lambda: nn.Conv2d(1, 2, 3, pad_mode="pad", padding=(1,) * 3),
    lambda: nn.Conv2d(1, 2, 3, pad_mode="pad", padding=-1),
], ids=["adaptive-3", "adaptive-1", "adaptive-neg", "adaptive-0", "max-kernel-3", "max-pad-neg",
        "avg-stride-3", "avg-kernel-neg", "conv-stride-3", "conv-dilation-0", "conv-pad-3",
        "conv-pad-neg", "MaxPool2d-3", "AvgPool2d-1", "Conv2d-kernel-3", "Conv2d-pad-3",
        "Conv2d-pad-neg"])
def test_wrong_length_and_negative_sizes_are_value_errors(call):
    with pytest.raises(ValueError):
        call()


def test_adaptive_avg_pool2d_none_keeps_the_input_size():
    out = ops.adaptive_avg_pool2d(IMG, (None, 2))
    assert out.shape == (1, 1, 4, 2)
