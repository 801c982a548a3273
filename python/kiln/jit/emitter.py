"""GraphEmitter: turns op calls on graph values into nodes of the C++ graph builder.

It is the front end's only door to that builder (_C.GraphBuilder): the rest of kiln.jit, and
the grad of ops.composite, build graphs through its methods.
"""

import builtins

from kiln import _C
from kiln.common.parameter import Parameter
from kiln.common.tensor import Tensor
from kiln.jit import lax
from kiln.jit.graph_tensor import GraphTensor, with_runtime_dims
from kiln.ops._core import KIND

_OP_NAMES = _C.op_names()  # by kind, for messages


# ops whose outputs share their first input's storage in PyNative
_VIEW_KINDS = frozenset(k for k in KIND.values() if _C.op_schema(k)["is_view"])
# ops whose result depends only on their inputs: computed while compiling when those are known
_FOLDABLE_KINDS = frozenset(
    k for k in KIND.values()
    if not _C.op_schema(k)["mutates"] and not _C.op_schema(k)["is_random"]
)
_EFFECT_KINDS = frozenset(k for k in KIND.values() if k not in _FOLDABLE_KINDS)
_FOLD_LIMIT = 4096  # elements: larger constants stay graph ops (the graph keeps what it folds)


_UNKNOWN = object()
RAISE_TENSOR_ARG = object()  # where a raised exception's argument is a tensor's run-time value
RAISE_ARG_SEPARATOR = "\x1f"  # between those values in the run-time message


def _from_spec(spec, values, flatten, unflatten):
    """A result nested as an output spec says (("result", k), ("literal", v), ("tuple", ...))."""
    kind, value = spec
    if kind == "result":
        return values[value]
    if kind == "literal":
        return value
    if kind == "dict":
        return {_from_spec(k, values, flatten, unflatten): _from_spec(v, values, flatten,
                                                                      unflatten)
                for k, v in value}
    items = [_from_spec(item, values, flatten, unflatten) for item in value]
    return items if kind == "list" else tuple(items)


class GraphEmitter:
    """Owns one _C.GraphBuilder while a function compiles. While it is this thread's graph
    target (kiln._graph_state), every op called from Python comes here (emit)."""

    def __init__(self):
        self._builder = _C.GraphBuilder()
        self.converter = None  # the kiln.jit.convert.Converter compiling into it (it sets this)
        self.loc = ("", 0, 0)
        self.parameters = []  # Parameters that became graph inputs, in input order
        self._param_values = {}  # id(Parameter) -> GraphTensor
        self._consts = {}  # (function, id(tensor)) -> (tensor, GraphTensor)
        self.entries = {}  # id -> graph inputs (arguments, Parameters, outside tensors)
        self._sources = {}  # id(graph input) -> the mutable number it stands for
        self.views = {}  # id -> (view, op name, base): outputs of view ops
        self.raise_types = {}  # name in the graph -> exception class, for classes not builtin
        self.is_outside = lambda tensor: False  # read from outside (set by the Converter)
        self.differentiating = 0  # how many grad regions (ops.composite) are being built
        self.has_effects = False  # a node that writes, draws or prints was added (raise_now)
        self.lax_sites = []  # the run-time interpreter sites of the graph (kept alive with it)
        self.interpreted = []  # (function, file, line, what) of each, for get_jit_stats

    # ---- values ----
    def wrap(self, handle):
        dtype, shape, _ = self._builder.meta(handle)
        return GraphTensor(handle, dtype, shape)

    def input(self, dtype_enum, shape, name, source=None):
        """A graph input; `source` is the Python value it stands for where that is not a plain
        tensor (a mutable number: isinstance(n, int) holds in compiled code too)."""
        value = self.wrap(self._builder.input(dtype_enum, list(shape), name))
        self.entries[id(value)] = value
        if source is not None:
            self._sources[id(value)] = source
        return value

    def parameter(self, param):
        """A Parameter is an input of the graph: updates to it are seen without recompiling."""
        value = self._param_values.get(id(param))
        if value is None:
            value = self.input(param._dtype, param.shape, getattr(param, "name", "") or "")
            self._param_values[id(param)] = value
            self.parameters.append(param)
        return value

    def source_of(self, value):
        """What a graph input stands for: a Parameter, an outside tensor or a mutable number;
        None for other values."""
        if id(value) in self._sources and self.entries.get(id(value)) is value:
            return self._sources[id(value)]
        for param in self.parameters:
            if self._param_values[id(param)] is value:
                return param
        return None

    def weight_positions(self):
        """The entry parameter positions of the Parameters (and other state tensors) that became
        graph inputs: the weights of the graph's signature, in signature order."""
        return [self._param_values[id(p)].handle[2] for p in self.parameters]

    def constant(self, value):
        """A graph constant from a Tensor or a Python number (weakly typed)."""
        if isinstance(value, Tensor):
            key = (self._builder.current_func, id(value))
            hit = self._consts.get(key)
            if hit is not None:
                return hit[1]
            g = self.wrap(self._builder.const(value, *self.loc))
            self._consts[key] = (value, g)
            return g
        return self.wrap(self._builder.const(_C.weak_scalar(value), *self.loc))

    def to_graph(self, value, op_name):
        if isinstance(value, GraphTensor):
            return value
        if isinstance(value, Tensor):
            # A tensor of the user's state (a Parameter, or one reached through a global or
            # closure list or object) is a graph input: read on every run, written back by
            # index assignment. Only tensors made while compiling are constants.
            if isinstance(value, Parameter) or id(value) in self._param_values:
                return self.parameter(value)
            hit = self._consts.get((self._builder.current_func, id(value)))
            if hit is not None:  # decided already (is_outside walks the guards)
                return hit[1]
            return self.parameter(value) if self.is_outside(value) else self.constant(value)
        if isinstance(value, (bool, int, float)):
            return self.constant(value)
        if isinstance(value, lax.RuntimeObject):  # a value Python computes when the graph runs
            return lax.to_tensor(value)
        raise TypeError(f"{op_name}: expected a Tensor or a number, got {type(value).__name__}")

    def truncate(self, mark):
        """Forgets the current function's nodes after `mark` (an abandoned attempt)."""
        func = self._builder.current_func
        self._builder.truncate(mark)
        self._consts = {k: v for k, v in self._consts.items() if k[0] != func}

    # ---- nodes ----
    def emit(self, kind, inputs, attrs):
        """Op `kind` (the registry's number) as a node; bindings/dispatch.cc calls this for
        every op this thread runs while it compiles."""
        name = _OP_NAMES[kind]
        inputs = with_runtime_dims(inputs)  # ops.add(x, x.shape[0]): the size as the graph runs
        folded = self._fold(kind, name, inputs, attrs)
        if folded is not None:
            return folded
        if kind in _EFFECT_KINDS:
            self.has_effects = True
        handles, absent = [], []
        for x in inputs:
            if x is None:
                handles.append((0, -2, 0))
                absent.append(True)
            else:
                handles.append(self.to_graph(x, name).handle)
                absent.append(False)
        outs = self._builder.op(kind, handles, absent, list(attrs), *self.loc)
        values = [self.wrap(h) for h in outs]
        if kind in _VIEW_KINDS and inputs and inputs[0] is not None:
            base = self.to_graph(inputs[0], name)
            for v in values:
                self.views[id(v)] = (v, name, base)
        return values[0] if len(values) == 1 else tuple(values)

    def _fold(self, kind, name, inputs, attrs):
        """An op on values known while compiling (tensors made from constants in compiled code,
        numbers) runs now, as MindSpore folds them: its result is a graph constant whose value
        Python code can still read (all(t), max(t), list.index(t)). None when it cannot."""
        if kind not in _FOLDABLE_KINDS or self.differentiating or _C.tape_active():
            return None  # (an eager op would be recorded on the tape)
        values = []
        for x in inputs:
            value = self._known(x)
            if value is _UNKNOWN:
                return None
            values.append(value)
        if not any(isinstance(v, Tensor) for v in values):
            return None
        from kiln import _graph_state  # noqa: PLC0415
        from kiln.ops._core import call  # noqa: PLC0415

        try:
            with _graph_state.eager():
                result = call(name, tuple(values), tuple(attrs))
        except Exception:  # noqa: BLE001 - the graph op reports the error with its line
            return None
        results = result if isinstance(result, tuple) else (result,)
        if not all(isinstance(r, Tensor) and r.size <= _FOLD_LIMIT for r in results):
            return None
        graph = tuple(self._known_constant(r.copy()) for r in results)
        return graph if isinstance(result, tuple) else graph[0]

    def _known(self, x):
        """x's value when compiling knows it: a number, None, a tensor made while compiling, or
        a graph constant that kept its value; else _UNKNOWN."""
        if x is None or isinstance(x, (bool, int, float)):
            return x
        if isinstance(x, GraphTensor):
            return _UNKNOWN if x.known is None else x.known
        if isinstance(x, Tensor) and not isinstance(x, Parameter):
            if id(x) in self._param_values or x.size > _FOLD_LIMIT or self.is_outside(x):
                return _UNKNOWN
            return x
        return _UNKNOWN

    def _known_constant(self, value):
        g = self.constant(value)
        g.known = value
        return g

    # ---- regions: the bodies of graph if and while ----
    @property
    def current_func(self):
        """The graph function (the open region) new nodes go into."""
        return self._builder.current_func

    def new_group(self):
        """A new group of regions (the branches of one if, or the condition and body of one
        while)."""
        return self._builder.new_group()

    def begin_region(self, group, prefix, metas=()):
        """Opens a region of `group`; its parameters (one per (dtype, shape) of `metas`) as
        graph values."""
        return [self.wrap(h) for h in self._builder.begin_region(group, prefix, list(metas))]

    def end_region(self, handles):
        """Closes the open region; `handles` are its results."""
        self._builder.end_region(list(handles))

    def if_(self, cond, group):
        """A graph if on the 0-d bool graph value `cond` choosing between `group`'s two regions;
        the handles of its results."""
        return self._builder.if_(cond.handle, group, *self.loc)

    def while_(self, init, group):
        """A graph while over `group` (condition, body) carrying `init`; the final values."""
        handles = self._builder.while_([v.handle for v in init], group, *self.loc)
        return [self.wrap(h) for h in handles]

    def mark(self):
        """The current function's node count, for truncate() and gradient()."""
        return self._builder.mark()

    def gradient(self, mark, targets, sens, sources):
        """Reverse-mode gradients (csrc/autodiff) of `targets` with respect to `sources`, over
        the nodes added since `mark`; `sens` seeds them (none: ones)."""
        handles = self._builder.gradient(mark, [t.handle for t in targets],
                                         [s.handle for s in sens], [False] * len(sens),
                                         [s.handle for s in sources])
        return [self.wrap(h) for h in handles]

    # ---- the finished graph ----
    def set_outputs(self, outputs):
        self._builder.set_outputs([v.handle for v in outputs])

    def set_signature(self, outputs):
        """Records which entry parameters are weights and how the outputs nest."""
        self._builder.set_signature(self.weight_positions(), outputs)

    def text(self):
        """The graph as built, in IR text."""
        return self._builder.text()

    def export(self, path, weights, producer_version, external_data_threshold, file_format):
        """Writes the graph as built (no passes) and `weights` to a model file."""
        self._builder.export(path, weights, producer_version, external_data_threshold,
                             file_format)

    def finish(self, level):
        """Verifies the graph, runs the jit level's passes and plans it: a _C.Executable."""
        return self._builder.finish(level)

    def inline_model(self, executable, inputs, weights):
        """A loaded model (nn.GraphCell) called in compiled code: its graph, copied into this
        one, on `inputs` and its weights (Parameters, graph inputs as any other)."""
        from kiln.jit.trees import flatten, unflatten  # noqa: PLC0415

        handles, spec = self._builder.inline_(
            executable, [self.to_graph(v, "GraphCell").handle for v in inputs],
            [self.parameter(w).handle for w in weights], *self.loc)
        values = [self.wrap(h) for h in handles]
        return _from_spec(spec, values, flatten, unflatten)

    def interpret_(self, key, what, handles, metas):
        """A run-time interpreter node (jit/lax.py) running host site `key`; its results."""
        self.has_effects = True
        outs = self._builder.interpret_(key, what, list(handles), list(metas), *self.loc)
        return [self.wrap(h) for h in outs]

    def run_declared(self, fn, tensors, metas, what):
        """A run-time Python node whose results the caller declares (lax.run_declared), for
        ops in lower layers (ops.Custom's pyfunc) that may not import the compiler."""
        return lax.run_declared(fn, tensors, metas, what)

    def note_interpret(self, what):
        converter = self.converter
        function = converter.frames[-1][0].source.name if converter and converter.frames else ""
        self.interpreted.append((function, self.loc[0], self.loc[1], what))

    def print_(self, format_string, values):
        self.has_effects = True
        handles = [self.to_graph(v, "print").handle for v in values]
        self._builder.print_(format_string, handles, *self.loc)

    def raises_now(self):
        """Whether a raise reached now happens on every run before anything else the graph
        does (the entry function, not a branch or loop region, and no effect before it): then
        it is raised while compiling, as MindSpore does."""
        return self._builder.current_func == 0 and not self.has_effects

    def raise_(self, error_type, format_string, values, args=None):
        """A node raising `error_type` (an exception class) when the graph runs; with `args`
        (the exception's arguments, RAISE_TENSOR_ARG where a tensor's value goes, which the
        message carries as text, one per RAISE_ARG_SEPARATOR-separated field), the run-time
        exception is rebuilt with them."""
        if args is None:
            name = self._raise_type_name(error_type)
        else:  # a name no builtin has, unique to this node: the exception comes back through us
            name = f"{error_type.__module__}.{error_type.__qualname__}@{len(self.raise_types)}"
            self.raise_types[name] = (error_type, tuple(args))
        self._builder.raise_(
            name,
            format_string,
            [self.to_graph(v, "raise").handle for v in values],
            *self.loc,
        )

    def _raise_type_name(self, cls):
        """A builtin exception by its name; any other class by "module.QualName" (no builtin
        matches a dotted name), made unique in this graph, and kept in raise_types."""
        if getattr(builtins, cls.__name__, None) is cls:
            return cls.__name__
        name = base = f"{cls.__module__}.{cls.__qualname__}"
        n = 1
        while self.raise_types.get(name, cls) is not cls:
            n += 1
            name = f"{base}#{n}"
        self.raise_types[name] = cls
        return name
