"""kiln.nn.Cell -- the base class of layers and networks (MindSpore's Cell, PyNative execution)."""
from collections import OrderedDict

from kiln import _C, _graph_state, context
from kiln.common import dtype as mstype
from kiln.common.parameter import Parameter, ParameterTuple, is_generated_name
from kiln.jit import cell_hooks
from kiln.jit.api import cell_graph_call
from kiln.jit.cell_interface import CellBase, amp_call, amp_param
from kiln.jit.forbidden import refused_in_compiled_code

__all__ = ["Cell"]

_SETTINGS, _GRAPH_MODE = context._settings, context.GRAPH_MODE  # read on every call


class Cell(CellBase):
    """Base class of every layer and network.

    Subclasses define ``construct(*inputs)``; calling the cell runs it. Assigning a Parameter,
    a ParameterTuple or a Cell to an attribute registers it. With ``auto_prefix=True`` (the
    default) a child's parameters are renamed ``<attribute>.<name>`` when it is attached, so
    names are hierarchical (``dense_relu_sequential.0.weight``) once the network is built.
    A new cell is in evaluation mode (``training`` is False), as in MindSpore; call
    ``set_train()`` before training.
    """

    def __init__(self, auto_prefix=True, flags=None):
        object.__setattr__(self, "_params", OrderedDict())
        object.__setattr__(self, "_params_list", OrderedDict())
        object.__setattr__(self, "_cells", _graph_state.EpochDict())
        object.__setattr__(self, "_auto_prefix", bool(auto_prefix))
        object.__setattr__(self, "training", False)
        object.__setattr__(self, "requires_grad", False)
        object.__setattr__(self, "_jit_config_dict", None)
        if flags:
            for key, value in dict(flags).items():
                object.__setattr__(self, key, value)

    # ---- running ----
    # A subclass may define bprop(self, *inputs, out, dout) -> (gradient of each input,): the
    # gradient then goes through it instead of through construct (jit/cell_hooks.py).
    bprop = None

    def construct(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define construct(...)")

    def __call__(self, *args, **kwargs):
        if "_params" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}.__init__ must call super().__init__() "
                               f"before the cell is used")
        d = self.__dict__
        if ("_hooked" in d or type(self).bprop is not None) and not _graph_state.compiling():
            return cell_hooks.call_with_hooks(self, self, args, kwargs, self._call_unhooked)
        return self._call_unhooked(args, kwargs)

    def _call_unhooked(self, args, kwargs):
        d = self.__dict__
        if "_amp_dtype" in d or "_amp_output_dtype" in d:
            return amp_call(self, self._call, args, kwargs)  # mixed precision: the casts
        # Inside a graph being compiled, or in GRAPH_MODE, the compiler takes the call.
        if _graph_state.compiling() or _SETTINGS["mode"] == _GRAPH_MODE:
            return cell_graph_call(self, args, kwargs)
        return self.construct(*args, **kwargs)

    def _call(self, args, kwargs):
        if _graph_state.compiling() or _SETTINGS["mode"] == _GRAPH_MODE:
            return cell_graph_call(self, args, kwargs)
        return self.construct(*args, **kwargs)

    # ---- hooks ----
    def register_forward_pre_hook(self, hook_fn, *, prepend=False, with_kwargs=False):
        """hook_fn(cell, args) (with_kwargs: hook_fn(cell, args, kwargs)) runs before every
        construct; a value it returns replaces the arguments. Returns a handle whose remove()
        unregisters it."""
        return cell_hooks.register(self, "forward_pre_hook", hook_fn, prepend,
                                   with_kwargs=with_kwargs)

    def register_forward_hook(self, hook_fn, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """hook_fn(cell, args, output) (with_kwargs: hook_fn(cell, args, kwargs, output)) runs
        after every construct; a value it returns replaces the output. always_call: it also
        runs (with output None) when construct raises."""
        return cell_hooks.register(self, "forward_hook", hook_fn, prepend,
                                   with_kwargs=with_kwargs, always_call=always_call)

    def register_backward_pre_hook(self, hook_fn):
        """hook_fn(cell, grad_output) runs when a PyNative gradient reaches the cell's outputs;
        a tuple it returns replaces grad_output. Not run in compiled code."""
        return cell_hooks.register(self, "backward_pre_hook", hook_fn, False)

    def register_backward_hook(self, hook_fn):
        """hook_fn(cell, grad_input, grad_output) runs when a PyNative gradient has gone
        through the cell; a tuple it returns replaces grad_input (the gradients of the cell's
        tensor inputs). Not run in compiled code."""
        return cell_hooks.register(self, "backward_hook", hook_fn, False)

    # ---- attribute registration ----
    def __getattr__(self, name):
        # Only called when normal lookup fails: look in the registries.
        d = self.__dict__
        for registry in ("_params", "_cells", "_params_list"):
            if registry in d and name in d[registry]:
                value = d[registry][name]
                if registry == "_params" and "_amp_dtype" in d and value is not None \
                        and value.requires_grad and not _graph_state.compiling():
                    return amp_param(self, value)  # read by a mixed-precision construct
                return value
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        _graph_state.bump_cell_epoch()  # compiled graphs re-check what they read from cells
        d = self.__dict__
        if "_params" not in d:
            if isinstance(value, (Parameter, Cell, ParameterTuple)):
                raise AttributeError(f"{type(self).__name__}: call super().__init__() before "
                                     f"assigning the {type(value).__name__} '{name}'")
            object.__setattr__(self, name, value)
            return
        params, cells, plist = d["_params"], d["_cells"], d["_params_list"]
        if isinstance(value, Parameter):
            self.insert_param_to_cell(name, value, check_name_contain_dot=False)
        elif isinstance(value, ParameterTuple):
            self._drop(name)
            plist[name] = value
        elif isinstance(value, Cell):
            self.insert_child_to_cell(name, value)
        elif name in params:
            if value is None:
                params[name] = None
            elif isinstance(value, _C.TensorBase) and params[name] is not None:
                params[name].set_data(value)  # MindSpore: assigning a tensor updates in place
            else:
                raise TypeError(f"{type(self).__name__}: attribute '{name}' is a Parameter; "
                                f"assign a Parameter, a Tensor or None, not "
                                f"{type(value).__name__}")
        elif name in cells:
            if value is not None:
                raise TypeError(f"{type(self).__name__}: attribute '{name}' is a Cell; assign "
                                f"a Cell or None, not {type(value).__name__}")
            cells[name] = None
        else:
            if name in plist:
                del plist[name]
            if type(value) in (list, tuple):
                self._check_sequence_parameter_names(name, value)
            object.__setattr__(self, name, value)

    def _check_sequence_parameter_names(self, name, value):
        """Parameters held in plain list/tuple attributes are not renamed by path, so two
        different ones with one name (across all such attributes) are refused, as in MindSpore."""
        mine = [p for p in value if isinstance(p, Parameter)]
        if not mine:
            return
        taken = {}  # name -> (attribute, Parameter)
        for attr, other in vars(self).items():
            if attr != name and type(other) in (list, tuple):
                for p in other:
                    if isinstance(p, Parameter):
                        taken.setdefault(p.name, (attr, p))
        for p in mine:
            attr, first = taken.setdefault(p.name, (name, p))
            if first is not p:
                raise ValueError(
                    f"{type(self).__name__}.{name}: a Parameter named '{p.name}' clashes with a "
                    f"different one in '{attr}': its name '{p.name}' already exists. Give each "
                    f"Parameter a unique name")

    def __delattr__(self, name):
        for registry in ("_params", "_cells", "_params_list"):
            if name in self.__dict__.get(registry, {}):
                del self.__dict__[registry][name]
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._params) | set(self._cells)
                      | set(self._params_list))

    def _drop(self, name):
        """Removes `name` from every registry and the instance dict before re-registering."""
        for registry in ("_params", "_cells", "_params_list"):
            self.__dict__[registry].pop(name, None)
        self.__dict__.pop(name, None)

    def insert_param_to_cell(self, param_name, param, check_name_contain_dot=True):
        if not isinstance(param_name, str) or not param_name:
            raise KeyError(f"{type(self).__name__}: parameter name must be a non-empty str, "
                           f"got {param_name!r}")
        if check_name_contain_dot and "." in param_name:
            raise KeyError(f"{type(self).__name__}: parameter name '{param_name}' must not "
                           f"contain '.'")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"{type(self).__name__}: '{param_name}' must be a Parameter, got "
                            f"{type(param).__name__}")
        if param is not None and is_generated_name(param.name):
            param.name = param_name
        self._drop(param_name)
        self._params[param_name] = param

    def insert_child_to_cell(self, child_name, child_cell):
        if not isinstance(child_name, str) or not child_name or "." in child_name:
            raise KeyError(f"{type(self).__name__}: child name must be a non-empty str without "
                           f"'.', got {child_name!r}")
        if child_cell is not None and not isinstance(child_cell, Cell):
            raise TypeError(f"{type(self).__name__}: child '{child_name}' must be a Cell, got "
                            f"{type(child_cell).__name__}")
        if child_cell is self:
            raise ValueError(f"{type(self).__name__}: a cell cannot be its own child")
        if child_cell is not None and self._auto_prefix:
            child_cell.update_parameters_name(child_name + ".")
        if child_name in self._cells:  # a replaced child keeps its place (SequentialCell order)
            self._cells[child_name] = child_cell
            return
        self._drop(child_name)
        self._cells[child_name] = child_cell

    def update_parameters_name(self, prefix="", recurse=True):
        """Prepends prefix to the name of every parameter of this cell (and its children)."""
        if not isinstance(prefix, str):
            raise TypeError(f"update_parameters_name: prefix must be a str, got {prefix!r}")
        for _, param in self.parameters_and_names(expand=recurse):
            param.name = prefix + param.name

    # ---- traversal ----
    def cells_and_names(self, cell_name_prefix=""):
        """Yields (path, cell) for this cell and every descendant, each cell once."""
        seen = set()

        def walk(prefix, cell):
            if id(cell) in seen:
                return
            seen.add(id(cell))
            yield prefix, cell
            for name, child in cell._cells.items():
                if child is not None:
                    yield from walk(f"{prefix}.{name}" if prefix else name, child)

        yield from walk(cell_name_prefix, self)

    def name_cells(self):
        return OrderedDict((k, v) for k, v in self._cells.items() if v is not None)

    def cells(self):
        return self.name_cells().values()

    def parameters_and_names(self, name_prefix="", expand=True):
        """Yields (attribute path, Parameter), each Parameter once (shared ones too)."""
        cells = self.cells_and_names(name_prefix) if expand else [(name_prefix, self)]
        seen = set()
        for cell_name, cell in cells:
            for par_name, par in cell._params.items():
                if par is not None and id(par) not in seen:
                    seen.add(id(par))
                    yield (f"{cell_name}.{par_name}" if cell_name else par_name), par
            for ptuple in cell._params_list.values():
                for par in ptuple:
                    if id(par) not in seen:
                        seen.add(id(par))
                        yield par.name, par

    def init_parameters_data(self, auto_parallel_mode=False):
        """{original Parameter: initialised Parameter} for every parameter. kiln's parameters
        hold their values from creation (no_init_parameters defers nothing), so each maps to
        itself."""
        return {param: param for param in self.get_parameters()}

    @refused_in_compiled_code
    def get_parameters(self, expand=True):
        for _, param in self.parameters_and_names(expand=expand):
            yield param

    def trainable_params(self, recurse=True):  # allowed in compiled code (MindSpore refuses)
        return [p for p in self.get_parameters(expand=recurse) if p.requires_grad]

    @refused_in_compiled_code
    def untrainable_params(self, recurse=True):
        return [p for p in self.get_parameters(expand=recurse) if not p.requires_grad]

    def parameters_dict(self, recurse=True):
        """OrderedDict of Parameter.name -> Parameter."""
        return OrderedDict((p.name, p) for p in self.get_parameters(expand=recurse))

    def check_names(self):
        """ValueError when two different parameters of this network share a name."""
        owners = {}
        for path, param in self.parameters_and_names():
            if param.name in owners:
                raise ValueError(f"{type(self).__name__}: two different parameters are named "
                                 f"'{param.name}' (at '{owners[param.name]}' and '{path}'); "
                                 f"parameter names must be unique within a network")
            owners[param.name] = path

    def apply(self, fn):
        for _, cell in self.cells_and_names():
            fn(cell)
        return self

    # ---- modes ----
    def set_train(self, mode=True):
        """Sets training mode (dropout active, batch statistics) on this cell and all children."""
        if not isinstance(mode, bool):
            raise TypeError(f"{type(self).__name__}.set_train: mode must be a bool, got {mode!r}")
        for _, cell in self.cells_and_names():
            _graph_state.bump_cell_epoch()
            object.__setattr__(cell, "training", mode)
        return self

    def set_grad(self, requires_grad=True):
        _graph_state.bump_cell_epoch()
        object.__setattr__(self, "requires_grad", bool(requires_grad))
        return self

    def set_jit_config(self, jit_config):
        """Stores the JitConfig used when this cell is compiled (Graph mode / @jit)."""
        _graph_state.bump_cell_epoch()
        object.__setattr__(self, "_jit_config_dict", jit_config)
        # the compiled construct was made with the old config: the next call compiles afresh
        self.__dict__.pop("_kiln_graph_fn", None)
        return self

    def get_jit_config(self):
        return self._jit_config_dict

    # ---- declared inputs (dynamic shapes) ----
    def set_inputs(self, *inputs):
        """Declares the inputs Graph mode compiles this cell for: a Tensor per argument, with
        None for dimensions of any size (`Tensor(shape=[None, 784], dtype=ms.float32)`). Every
        call then runs on that one graph, after its tensors are checked against the declaration
        (dtype, rank, the fixed dimensions); arguments declared as other values are passed as
        they come. PyNative calls are not affected."""
        declared = tuple(inputs)
        _graph_state.bump_cell_epoch()
        object.__setattr__(self, "_kiln_declared_inputs", declared)
        self.__dict__.pop("_kiln_graph_fn", None)  # the next Graph-mode call compiles afresh

    def get_inputs(self):
        """The inputs given to set_inputs, or None."""
        return self.__dict__.get("_kiln_declared_inputs")

    # ---- mixed precision ----
    def to_float(self, dst_type):
        """Runs this cell and its children in `dst_type` (float16, bfloat16 or float32): the
        floating inputs of each cell's call, and the trainable Parameters its construct reads,
        are cast to it; the Parameters themselves keep their type (float32 master weights). A
        later call on a child overrides the setting for that child. Returns the cell."""
        if dst_type not in (mstype.float16, mstype.float32, mstype.bfloat16):
            raise ValueError(f"For 'to_float', the argument 'dst_type' must be mstype.float32, "
                             f"mstype.float16 or mstype.bfloat16, but got type: "
                             f"{type(dst_type)} and value: {dst_type}.")
        flags = {"fp16": dst_type == mstype.float16, "fp32": dst_type == mstype.float32,
                 "bf16": dst_type == mstype.bfloat16, "_amp_dtype": dst_type}
        for _, cell in self.cells_and_names():
            for key, value in flags.items():
                object.__setattr__(cell, key, value)
            cell.__dict__.pop("_kiln_graph_fn", None)  # compiled without the casts
        _graph_state.bump_cell_epoch()
        return self

    # ---- printing ----
    def extend_repr(self):
        """Subclasses return their configuration, shown between < and > in repr."""
        return ""

    def __repr__(self):
        lines = []
        for name, cell in self._cells.items():
            child = repr(cell).replace("\n", "\n  ")
            lines.append(f"({name}): {child}")
        text = type(self).__name__ + "<" + self.extend_repr()
        if lines:
            text += "\n  " + "\n  ".join(lines) + "\n  "
        return text + ">"
