"""Automatic mixed precision (mindspore.amp's network side): amp levels O0-O3, custom white and
black lists, and build_train_network. kiln marks cells instead of rewriting construct's source:
a marked cell casts its floating inputs and the Parameters it reads to the low-precision type
(Cell.to_float) and, where the level asks, casts what it returns (kiln/jit/cell_interface.py)."""
from kiln import log as logger
from kiln import nn, ops
from kiln.common import dtype as mstype
from kiln.jit.cell_interface import amp_cast
from kiln.ops.primitive import Primitive
from kiln.train.loss_scale_manager import DynamicLossScaleManager, LossScaleManager

__all__ = ["auto_mixed_precision", "custom_mixed_precision", "build_train_network",
           "get_white_list", "get_black_list"]

# Cells and primitives that level O1 runs in low precision (those of MindSpore's list that kiln
# has), and the cells that level O2 keeps in float32.
AMP_WHITE_LIST = [
    nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Conv1dTranspose, nn.Conv2dTranspose,
    nn.Conv3dTranspose, nn.Dense, nn.LSTMCell, nn.RNNCell, nn.GRUCell,
    ops.Conv2D, ops.MatMul, ops.BatchMatMul, ops.PReLU, ops.ReLU,
]
AMP_BLACK_LIST = [nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm]
_LOW = (mstype.float16, mstype.bfloat16)


def get_white_list():
    """A copy of the cells and primitives amp level O1 converts."""
    return AMP_WHITE_LIST.copy()


def get_black_list():
    """A copy of the cells amp level O2 keeps in float32."""
    return AMP_BLACK_LIST.copy()


def _mark_output(cell, dtype):
    object.__setattr__(cell, "_amp_output_dtype", dtype)
    cell.__dict__.pop("_kiln_graph_fn", None)


class _OutputTo32(nn.Cell):
    """The network of levels O2/O3: the backbone's floating outputs cast back to float32."""

    def __init__(self, backbone):
        super().__init__(auto_prefix=False)
        self._backbone = backbone
        object.__setattr__(self, "_jit_config_dict", backbone.get_jit_config())
        _mark_output(self, mstype.float32)

    def construct(self, *args, **kwargs):
        return self._backbone(*args, **kwargs)


class _AmpPrimitive(nn.Cell):
    """A white-listed primitive a cell holds as an attribute, run in `dtype` (its floating
    arguments cast) with its result cast back to float32 -- the casts MindSpore's rewrite puts
    around such a call."""

    def __init__(self, primitive, dtype):
        super().__init__(auto_prefix=False)
        self.primitive = primitive
        object.__setattr__(self, "_amp_dtype", dtype)
        _mark_output(self, mstype.float32)

    def construct(self, *args, **kwargs):
        return self.primitive(*args, **kwargs)


def _precision_set_by_user(cell):
    return any(cell.__dict__.get(flag) for flag in ("fp32", "fp16", "bf16"))


def _white_list_pass(cell, white_list, dtype):
    """Level O1 / a custom white list: listed cells run in dtype with float32 outputs; listed
    primitives held as attributes are wrapped the same way; other cells are searched."""
    if type(cell) in white_list and not _precision_set_by_user(cell):
        cell.to_float(dtype)
        _mark_output(cell, mstype.float32)
        return
    if isinstance(cell, _AmpPrimitive):
        return
    for name, value in list(vars(cell).items()):
        if isinstance(value, Primitive) and type(value) in white_list:
            setattr(cell, name, _AmpPrimitive(value, dtype))
    for child in list(cell.name_cells().values()):
        _white_list_pass(child, white_list, dtype)


def _black_list_pass(network, black_list, dtype):
    """Level O2 / a custom black list: everything in dtype but the listed cells, which run in
    float32 and hand dtype on to what follows."""
    network.to_float(dtype)
    for child in network.name_cells().values():
        if isinstance(child, tuple(black_list)):
            child.to_float(mstype.float32)
            _mark_output(child, dtype)
        else:
            _black_list_pass(child, black_list, dtype)
    return network


def _check_dtype(dtype):
    if dtype not in _LOW:
        raise ValueError(f"The dtype should be one of (mstype.float16, mstype.bfloat16), but got "
                         f"{dtype}.")


def auto_mixed_precision(network, amp_level="O0", dtype=mstype.float16):
    """`network` set up to compute in `dtype` (float16 or bfloat16) at amp_level: "O0" nothing,
    "O1" the white list (get_white_list) in dtype, "O2" all but the black list
    (get_black_list), "O3" everything. Parameters stay float32; O2 and O3 return the network
    wrapped so that its outputs are float32."""
    if not isinstance(network, nn.Cell):
        raise TypeError(f"For amp_level '{amp_level}', the network type should be Cell.")
    _check_dtype(dtype)
    if amp_level == "O0":
        return network
    if amp_level == "auto":
        raise ValueError("The amp level auto is not supported by kiln (its per-operator casting "
                         "lists are not implemented); use 'O1', 'O2' or 'O3'.")
    if amp_level not in ("O1", "O2", "O3"):
        raise ValueError(f"The amp level {amp_level} is not supported")
    previous = network.__dict__.get("_amp_level")
    if previous in ("O1", "O2", "O3"):
        logger.warning(f"The network's auto mixed-precision level is adjusted from {previous} to "
                       f"{amp_level}, and repeated calls to mixed-precision interfaces can cause "
                       f"performance degradation.")
    if amp_level == "O1":
        _white_list_pass(network, AMP_WHITE_LIST, dtype)
    elif amp_level == "O2":
        network = _OutputTo32(_black_list_pass(network, AMP_BLACK_LIST, dtype))
    else:
        network = _OutputTo32(network.to_float(dtype))
    object.__setattr__(network, "_amp_level", amp_level)
    return network


def _list_check(custom_list, list_name):
    if not isinstance(custom_list, list):
        raise TypeError(f"The type of {list_name} should be list, but got {type(custom_list)}")
    for elem in custom_list:
        if not isinstance(elem, type):
            raise TypeError(f"The element in {list_name} should be a class, but got {elem}")
        allowed = (nn.Cell, Primitive) if list_name == "white_list" else (nn.Cell,)
        if not issubclass(elem, allowed):
            kinds = "'Cell' and 'Primitive'" if list_name == "white_list" else "'Cell'"
            raise TypeError(f"The subclass of element in {list_name} should be one of {kinds}, "
                            f"but got {elem}")
    if list_name == "black_list":
        for elem in AMP_BLACK_LIST:
            if elem not in custom_list:
                logger.warning(f"{elem} is removed from internal black list.")


def custom_mixed_precision(network, *, white_list=None, black_list=None, dtype=mstype.float16):
    """Mixed precision with your own list: with white_list the listed cells and primitives run
    in dtype; with black_list every cell but the listed ones does. Give exactly one list."""
    if not isinstance(network, nn.Cell):
        raise TypeError("The network type should be Cell.")
    if white_list is None and black_list is None:
        raise ValueError("For custom_mixed_precision, one of white_list and black_list must be "
                         "provided.")
    if white_list is not None and black_list is not None:
        raise ValueError("For custom_mixed_precision, the white_list or black_list cannot be "
                         "provided at the same time, please provide one or the other.")
    _check_dtype(dtype)
    if white_list is not None:
        _list_check(white_list, "white_list")
        _white_list_pass(network, white_list, dtype)
        return network
    _list_check(black_list, "black_list")
    return _OutputTo32(_black_list_pass(network, black_list, dtype))


# What each level implies, unless build_train_network's keyword arguments say otherwise.
_CONFIG_LEVEL = {
    "O0": {"keep_batchnorm_fp32": False, "cast_model_type": mstype.float32,
           "loss_scale_manager": None},
    "O1": {"keep_batchnorm_fp32": False, "cast_model_type": mstype.float32,
           "loss_scale_manager": None},
    "O2": {"keep_batchnorm_fp32": True, "cast_model_type": mstype.float16,
           "loss_scale_manager": DynamicLossScaleManager},
    "O3": {"keep_batchnorm_fp32": False, "cast_model_type": mstype.float16,
           "loss_scale_manager": None},
}


def _check_kwargs(kwargs):
    for arg in kwargs:
        if arg not in ("cast_model_type", "keep_batchnorm_fp32", "loss_scale_manager"):
            raise ValueError(f"Unsupported arg '{arg}'")
    if "cast_model_type" in kwargs:
        # bfloat16 is kiln's addition: it is the low-precision type CPUs compute fast.
        value = kwargs["cast_model_type"]
        if value not in (mstype.float16, mstype.bfloat16, mstype.float32):
            raise TypeError(f"For 'build_train_network', the 'cast_model_type' must be "
                            f"float16, bfloat16 or float32, but got {value}.")
    if "keep_batchnorm_fp32" in kwargs and not isinstance(kwargs["keep_batchnorm_fp32"], bool):
        raise TypeError(f"For 'build_train_network', the 'keep_batchnorm_fp32' must be bool, "
                        f"but got {type(kwargs['keep_batchnorm_fp32']).__name__}.")
    manager = kwargs.get("loss_scale_manager")
    if manager is not None and not isinstance(manager, LossScaleManager):
        raise TypeError(f"For 'build_train_network', the 'loss_scale_manager' must be a "
                        f"LossScaleManager, but got {type(manager).__name__}.")


def _check_level(level, boost_level):
    if not isinstance(level, str):
        raise TypeError(f"The argument `level` must be a string in ['O0', 'O1', 'O2', 'O3', "
                        f"'auto'],but got type {type(level)}.")
    if level not in ("O0", "O1", "O2", "O3", "auto"):
        raise ValueError(f"For 'build_train_network', the 'level' must be in ['O0', 'O1', 'O2', "
                         f"'O3', 'auto'], but got '{level}'.")
    if level == "auto":
        raise ValueError("The amp level auto is not supported by kiln; use 'O1', 'O2' or 'O3'.")
    if boost_level not in ("O0", "O1", "O2"):
        raise ValueError(f"For 'build_train_network', the 'boost_level' must be in ['O0', 'O1', "
                         f"'O2'], but got '{boost_level}'.")
    if boost_level != "O0":
        raise ValueError(f"For 'build_train_network', boost_level '{boost_level}' needs "
                         f"mindspore.boost, which kiln does not have; use boost_level='O0'.")


def _process_network(network, config, level):
    """The network in the precision config asks for (MindSpore's rules for which wins)."""
    cast_type = config["cast_model_type"]
    if cast_type in _LOW:
        network.to_float(cast_type)
        if config["keep_batchnorm_fp32"]:
            for _, cell in network.cells_and_names():
                if isinstance(cell, tuple(AMP_BLACK_LIST)):
                    cell.to_float(mstype.float32)
                    _mark_output(cell, cast_type)
        return network
    if not config["keep_batchnorm_fp32"] and level == "O2":
        return network.to_float(mstype.float16)
    if level in ("O2", "O3"):  # cast_model_type=float32 given for a low-precision level
        return network
    return auto_mixed_precision(network, level)


class _AmpWithLossCell(nn.Cell):
    """WithLossCell for a low-precision backbone: output and label cast to float32 before the
    loss."""

    def __init__(self, backbone, loss_fn):
        super().__init__(auto_prefix=False)
        self._backbone = backbone
        self._loss_fn = loss_fn

    def construct(self, data, label):
        out = self._backbone(data)
        return self._loss_fn(amp_cast(out, mstype.float32), amp_cast(label, mstype.float32))


def _add_loss_network(network, loss_fn, cast_model_type):
    if not isinstance(loss_fn, nn.Cell):
        raise TypeError(f"For 'build_train_network', the 'loss_fn' must be a Cell, but got "
                        f"{type(loss_fn).__name__}.")
    if cast_model_type in _LOW or network.__dict__.get("_amp_level") in ("O2", "O3"):
        return _AmpWithLossCell(network, loss_fn)
    return nn.WithLossCell(network, loss_fn)


def build_train_network(network, optimizer, loss_fn=None, level="O0", boost_level="O0",
                        **kwargs):
    """The one-step training Cell for `network`: mixed precision as `level` sets it (see
    auto_mixed_precision; cast_model_type, keep_batchnorm_fp32 and loss_scale_manager override
    the level's choices), the loss appended when loss_fn is given, and a
    TrainOneStepWithLossScaleCell when the loss-scale manager has an update cell (a
    TrainOneStepCell with sens = the fixed loss scale otherwise)."""
    if not isinstance(optimizer, nn.Optimizer):
        raise TypeError(f"For 'build_train_network', the 'optimizer' must be an Optimizer, but "
                        f"got {type(optimizer).__name__}.")
    _check_level(level, boost_level)
    _check_kwargs(kwargs)
    config = dict(_CONFIG_LEVEL[level])
    if isinstance(config["loss_scale_manager"], type):
        config["loss_scale_manager"] = config["loss_scale_manager"]()
    config.update(kwargs)
    network = _process_network(network, config, level)
    if loss_fn:
        network = _add_loss_network(network, loss_fn, config["cast_model_type"])
    loss_scale = None
    manager = config["loss_scale_manager"]
    if manager is not None:
        loss_scale = manager.get_loss_scale()
        update_cell = manager.get_update_cell()
        if update_cell is not None:
            return nn.TrainOneStepWithLossScaleCell(network, optimizer,
                                                    scale_sense=update_cell).set_train()
    return nn.TrainOneStepCell(network, optimizer, loss_scale).set_train()
