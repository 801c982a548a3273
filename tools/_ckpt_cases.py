"""The checkpoint interop cases: values of every dtype and small training runs, written once
against a framework module (kiln or mindspore) so both build the same cells and optimizers.

Used by tools/make_mindspore_ckpt_fixtures.py (MindSpore writes the committed fixtures),
tools/mindspore_ckpt_check.py (MindSpore loads kiln's files) and
tests/python/test_checkpoint_interop.py (kiln loads MindSpore's).
"""
import numpy as np

# name -> (NumPy dtype of the values, MindSpore/kiln dtype name); bfloat16 values are float32
# numbers that bfloat16 holds exactly.
DTYPES = {
    "bool": (np.bool_, "bool_"), "int8": (np.int8, "int8"), "uint8": (np.uint8, "uint8"),
    "int16": (np.int16, "int16"), "uint16": (np.uint16, "uint16"), "int32": (np.int32, "int32"),
    "uint32": (np.uint32, "uint32"), "int64": (np.int64, "int64"), "uint64": (np.uint64, "uint64"),
    "float16": (np.float16, "float16"), "bfloat16": (np.float32, "bfloat16"),
    "float32": (np.float32, "float32"), "float64": (np.float64, "float64"),
}
# Values appended with append_dict (MindSpore saves str, int, float and bool this way).
APPENDED = {"epoch_num": 7, "lr_now": 0.25, "note": "kiln ✓ MindSpore"}

OPTIMIZERS = {
    "momentum": lambda nn, p: nn.Momentum(p, 0.1, 0.9),
    "sgd": lambda nn, p: nn.SGD(p, 0.1, momentum=0.9),
    "adam": lambda nn, p: nn.Adam(p, 0.01),
    "adamweightdecay": lambda nn, p: nn.AdamWeightDecay(p, 0.01, weight_decay=0.01),
    "adamax": lambda nn, p: nn.AdaMax(p, 0.01),
    "adagrad": lambda nn, p: nn.Adagrad(p, learning_rate=0.05),
    "adadelta": lambda nn, p: nn.Adadelta(p, learning_rate=0.5),
    "rmsprop": lambda nn, p: nn.RMSProp(p, learning_rate=0.01, centered=True, momentum=0.5),
    "ftrl": lambda nn, p: nn.FTRL(p),
    "asgd": lambda nn, p: nn.ASGD(p, learning_rate=0.05),
    "rprop": lambda nn, p: nn.Rprop(p, learning_rate=0.05),
}
STEPS_BEFORE, STEPS_AFTER = 3, 2


def dtype_values():
    """name -> NumPy array: small values of each dtype, of different ranks (one scalar)."""
    rng = np.random.default_rng(7)
    out = {}
    for i, (name, (np_dtype, _)) in enumerate(DTYPES.items()):
        shape = [(2, 3), (5,), (), (2, 1, 2)][(i + 1) % 4]
        if np_dtype is np.bool_:
            arr = rng.integers(0, 2, shape).astype(bool)
        elif np.issubdtype(np_dtype, np.integer):
            info = np.iinfo(np_dtype)
            arr = rng.integers(info.min, info.max, shape, dtype=np_dtype, endpoint=True)
        else:
            arr = rng.standard_normal(shape).astype(np_dtype)
        if name == "bfloat16":  # keep 8 significant bits: exact in bfloat16
            arr = (np.asarray(arr).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
        out[name] = np.asarray(arr)
    return out


def dtype_parameters(ms):
    """name -> framework Parameter of dtype_values() (MindSpore saves a dict of Parameters)."""
    return {name: ms.Parameter(ms.Tensor(arr, getattr(ms, DTYPES[name][1])), name=name,
                               requires_grad=False)
            for name, arr in dtype_values().items()}


def train_net(ms, nn, optimizer):
    """A small two-layer network with fixed weights, its loss and `optimizer` in a
    TrainOneStepCell (the network checkpoints of Model and ModelCheckpoint save)."""

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Dense(4, 5)
            self.relu = nn.ReLU()
            self.fc2 = nn.Dense(5, 3)

        def construct(self, x):
            return self.fc2(self.relu(self.fc1(x)))

    net = Net()
    rng = np.random.default_rng(3)
    for _, p in net.parameters_and_names():
        p.set_data(ms.Tensor(rng.standard_normal(p.shape).astype(np.float32) * 0.5))
    opt = OPTIMIZERS[optimizer](nn, net.trainable_params())
    return nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)


def train_data():
    rng = np.random.default_rng(4)
    return (rng.standard_normal((8, 4)).astype(np.float32),
            rng.standard_normal((8, 3)).astype(np.float32))


def run_steps(ms, step, count):
    x, y = train_data()
    for _ in range(count):
        step(ms.Tensor(x), ms.Tensor(y))


def state_of(step):
    """name -> NumPy value of every parameter of a train cell (bfloat16 as float32)."""
    return {p.name: p.asnumpy() for _, p in step.parameters_and_names()}
