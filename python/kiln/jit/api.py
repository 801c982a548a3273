"""jit, JitConfig and the compile cache: the user-facing entry to Graph mode."""

import functools
import os
import time
import types
import weakref

import numpy as np

from kiln import _C
from kiln import _graph_state as _state
from kiln.common.mutable import _is_dynamic_len, _MutableBool, _MutableFloat, _MutableInt
from kiln.common.parameter import Parameter
from kiln.common.tensor import Tensor
from kiln.jit import lax, param_names
from kiln.jit import stats as _stats
from kiln.jit.cache import CompileCache
from kiln.jit.cell_interface import CellBase
from kiln.jit.convert import Converter
from kiln.jit.declared import check_signature, compile_args
from kiln.jit.emitter import RAISE_ARG_SEPARATOR, RAISE_TENSOR_ARG, GraphEmitter
from kiln.jit.graph_tensor import GraphTensor
from kiln.jit.guards import freeze, is_user_object
from kiln.jit.trees import lazy_as_tuples, output_signature


class JitConfig:
    """Compile options: jit_level "O0" (only what correctness needs), "O1", "O2", or "" (the
    default, as in MindSpore: set_context's jit_level, itself "O1" unless set)."""

    def __init__(
        self,
        jit_level="",
        exec_mode="auto",
        jit_syntax_level="",
        debug_level="RELEASE",
        infer_boost="off",
        **kwargs,
    ):
        if "exc_mode" in kwargs:
            exec_mode = kwargs.pop("exc_mode")
        if kwargs:
            raise ValueError(f"JitConfig: unknown options {sorted(kwargs)}")
        if jit_level not in ("", "O0", "O1", "O2"):
            raise ValueError(
                f"JitConfig: jit_level must be '', 'O0', 'O1' or 'O2', got {jit_level!r}"
            )
        if exec_mode not in ("auto", "kernel_by_kernel"):
            raise ValueError(
                f"JitConfig: exec_mode must be 'auto' or 'kernel_by_kernel', got {exec_mode!r}"
            )
        if jit_syntax_level not in ("", "STRICT", "LAX"):
            raise ValueError(
                f"JitConfig: jit_syntax_level must be '', 'STRICT' or 'LAX', got "
                f"{jit_syntax_level!r}"
            )
        self.jit_level, self.exec_mode, self.jit_syntax_level = (
            jit_level,
            exec_mode,
            jit_syntax_level,
        )
        self.jit_config_dict = {
            "jit_level": jit_level,
            "exec_mode": exec_mode,
            "jit_syntax_level": jit_syntax_level,
        }

    def level(self):
        """The level graphs compile at: this config's, else set_context(jit_level=...)'s."""
        if self.jit_level:
            return self.jit_level
        return _context().get_context("jit_level")

    def key(self):
        return (self.level(), self.exec_mode, _is_lax(self.jit_syntax_level))

    def __repr__(self):
        return f"JitConfig(jit_level={self.jit_level!r}, exec_mode={self.exec_mode!r})"


def _signature(value, path=()):
    """The part of an argument the compiled graph depends on (the cache key); `path`: the ids
    of the containers it sits in."""
    if isinstance(value, Tensor):
        return ("T", value._dtype, value._shape)
    if isinstance(value, (_MutableInt, _MutableFloat, _MutableBool)):
        return ("M", type(value).__name__)
    if isinstance(value, (tuple, list)):
        path = _inside(value, path)
        kind = type(value).__name__ + ("(dynamic_len)" if _is_dynamic_len(value) else "")
        return (kind, tuple(_signature(v, path) for v in value))
    if isinstance(value, dict):
        path = _inside(value, path)
        return ("dict", tuple((k, _signature(v, path)) for k, v in value.items()))
    if isinstance(value, np.ndarray):
        return ("A",) + freeze(value)
    if is_user_object(value):  # compiled with its attributes' values: they are the key
        return ("U", type(value)) + freeze(value)[2:]  # [2:]: not its identity
    try:
        hash(value)
        return ("C", type(value).__name__, value)
    except TypeError:  # by content where freeze knows how (sets), else by identity; the key
        return ("O", freeze(value))  # holds the object, so its id is never another's


def _inside(container, path):
    """path extended by `container`; a container inside itself is an error, as in MindSpore
    (a RuntimeError), instead of Python's recursion limit somewhere deep in the compiler."""
    if id(container) in path:
        raise RecursionError(
            f"jit: an argument holds a {type(container).__name__} that contains itself. Detect "
            f"recursion when converting python object. A graph cannot take a container with a "
            f"cycle; pass the values it holds instead"
        )
    return path + (id(container),)


def _NO_SELF():  # the _fast_self of a plain function: "called with self_obj None"
    return None


class _Compiled:
    def __init__(self, executable, parameters, opaque, guards, text, raise_types,
                 lax_sites=(), objects=frozenset()):
        self.lax_sites = list(lax_sites)  # run-time interpreter sites (kept alive with the graph)
        self.objects = objects  # positions of the outputs that are Python objects (lax.resolve)
        self.executable = executable  # its signature says how results nest (output_signature)
        self.parameters = parameters  # the graph's weights, in signature order
        self.opaque = opaque  # the result's values the signature names `opaque k`
        self.guards = guards
        self.text = text
        self.raise_types = raise_types  # IR names of the exception classes its raises name


def _graph_inputs(emitter, value, inputs, name):
    """Replaces tensors and mutable numbers in an argument by graph inputs."""
    if isinstance(value, Tensor):
        inputs.append(value)
        # A placeholder Tensor(shape=[None, 64]) declares dimensions of any size (-1); a
        # Parameter argument stays one for isinstance (and its in-place methods' errors).
        source = value if isinstance(value, Parameter) else None
        return emitter.input(value._dtype, getattr(value, "_declared_shape", value.shape), name,
                             source=source)
    if isinstance(value, (_MutableInt, _MutableFloat, _MutableBool)):
        t = Tensor(
            bool(value)
            if isinstance(value, _MutableBool)
            else int(value)
            if isinstance(value, _MutableInt)
            else float(value)
        )
        inputs.append(t)
        return emitter.input(t._dtype, t.shape, name, source=value)
    if isinstance(value, (tuple, list)):
        items = [_graph_inputs(emitter, v, inputs, f"{name}[{i}]") for i, v in enumerate(value)]
        if _is_dynamic_len(value):  # keeps the declaration for F.is_sequence_shape_unknown
            items = type(value)(items)
            items.dynamic_len = True
            return items
        if hasattr(type(value), "_fields"):  # a namedtuple keeps its class (fields by name)
            return type(value)(*items)
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {k: _graph_inputs(emitter, v, inputs, f"{name}[{k!r}]") for k, v in value.items()}
    return value


def _wrap_cells(converter, value, name):
    """Cells passed as arguments are seen through a proxy, like `self`."""
    if isinstance(value, CellBase):
        return converter.wrap(value, name, None, path=name)
    return value


def _run_inputs(value, inputs):
    if isinstance(value, Tensor):
        inputs.append(value)
    elif isinstance(value, (_MutableInt, _MutableFloat, _MutableBool)):
        inputs.append(
            Tensor(
                bool(value)
                if isinstance(value, _MutableBool)
                else int(value)
                if isinstance(value, _MutableInt)
                else float(value)
            )
        )
    elif isinstance(value, (tuple, list)):
        for v in value:
            _run_inputs(v, inputs)
    elif isinstance(value, dict):
        for v in value.values():
            _run_inputs(v, inputs)


def _build_graph(emitter, converter, fn, args, kwargs, self_obj):
    """Runs fn(*args, **kwargs) through the front end into `emitter`'s module, with its outputs
    and signature set. Returns the opaque values its output tree names."""
    graph_args = [_graph_inputs(emitter, a, [], f"arg{i}") for i, a in enumerate(args)]
    graph_args = [_wrap_cells(converter, a, f"arg{i}") for i, a in enumerate(graph_args)]
    graph_kwargs = {k: _graph_inputs(emitter, v, [], k) for k, v in kwargs.items()}
    if self_obj is not None:
        graph_args.insert(0, converter.wrap(self_obj, "self", None, path="self"))
    result = lazy_as_tuples(converter.call_function(fn, tuple(graph_args), graph_kwargs))
    param_names.check_unique(getattr(fn, "__qualname__", "jit"),
                             param_names.argument_parameters(args, kwargs), emitter.parameters,
                             self_obj)
    if converter.lax:  # objects holding graph values come back with their run-time values
        result = lax.objects_out(result)
    converter.guards.settle(fn.__qualname__)
    tree, outputs, opaque = output_signature(
        result, lambda v: isinstance(v, (GraphTensor, lax.RuntimeObject))
    )
    objects = frozenset(k for k, v in enumerate(outputs) if isinstance(v, lax.RuntimeObject))
    emitter.set_outputs([v.graph if isinstance(v, lax.RuntimeObject) else v for v in outputs])
    emitter.set_signature(tree)
    return opaque, objects


def export_function(fn, args, self_obj, path, producer_version, external_data_threshold,
                    file_format="MINDIR"):
    """Builds the graph of fn(*args) as compile_function does and writes it, unoptimized, with
    its weights' current values to the model file `path` (engine/model_file.h, or
    engine/onnx_export.h for file_format "ONNX")."""
    emitter = GraphEmitter()
    converter = Converter(emitter, lax=_is_lax(""))
    previous = _state.begin_compile(emitter)
    try:
        _build_graph(emitter, converter, fn, args, {}, self_obj)
        emitter.export(path, list(emitter.parameters), producer_version, external_data_threshold,
                       file_format)
    finally:
        _state.end_compile(previous)


def _is_lax(syntax_level):
    """Whether a JitConfig's jit_syntax_level ("" = set_context's, LAX unless set) is LAX.
    MindSpore's environment variable MS_DEV_JIT_SYNTAX_LEVEL ("0" STRICT, "2" LAX), when set,
    decides the default as it does in MindSpore."""
    if syntax_level:
        return syntax_level == "LAX"
    from_env = os.environ.get("MS_DEV_JIT_SYNTAX_LEVEL")
    if from_env in ("0", "2"):
        return from_env == "2"
    context = _context()
    return context.get_context("jit_syntax_level") == context.LAX


_CONTEXT = []


def _context():
    """kiln.context, imported on first use (it imports kiln.jit) and kept: the call path reads
    settings on every call."""
    if not _CONTEXT:
        from kiln import context  # noqa: PLC0415

        _CONTEXT.append(context)
    return _CONTEXT[0]


def compile_function(fn, args, kwargs, self_obj=None, name="graph", level="O1",
                     syntax_level=""):
    """Builds, checks and returns the compiled graph of fn(*args, **kwargs)."""
    from kiln.context import get_context  # noqa: PLC0415

    start = time.perf_counter()
    emitter = GraphEmitter()
    converter = Converter(emitter, lax=_is_lax(syntax_level))
    previous = _state.begin_compile(emitter)
    try:
        opaque, objects = _build_graph(emitter, converter, fn, args, kwargs, self_obj)
        text = emitter.text()
        _save_graph(name, "frontend", text, get_context)
        executable = emitter.finish(level)
        _save_graph(name, "optimized", executable.text(), get_context)
    finally:
        _state.end_compile(previous)
    _stats.count("compiles")
    _stats.count("compile_seconds", time.perf_counter() - start)
    _stats.note_interpreted(getattr(fn, "__qualname__", name), emitter.interpreted)
    return _Compiled(executable, list(emitter.parameters), tuple(opaque), converter.guards, text,
                     emitter.raise_types, emitter.lax_sites, objects)


_SAVE_COUNTER = [0]


def _save_graph(name, stage, text, get_context):
    if not get_context("save_graphs"):
        return
    path = get_context("save_graphs_path")
    os.makedirs(path, exist_ok=True)
    _SAVE_COUNTER[0] += 1
    with open(os.path.join(path, f"{_SAVE_COUNTER[0]:04d}_{name}_{stage}.ir"), "w") as f:
        f.write(text)


def run_compiled(compiled, args, kwargs):
    inputs = []
    for a in args:
        if type(a) is Tensor:  # the common case, without _run_inputs' dispatch
            inputs.append(a)
        else:
            _run_inputs(a, inputs)
    for v in kwargs.values():
        _run_inputs(v, inputs)
    try:
        if not compiled.lax_sites:
            return compiled.executable.call(inputs, compiled.parameters, compiled.opaque)
        with lax.run_scope():  # objects made by interpreter nodes live until the result is built
            out = compiled.executable.call(inputs, compiled.parameters, compiled.opaque)
            return lax.resolve(out, compiled.objects) if compiled.objects else out
    except _C.GraphRaise as e:
        raise _raised(e, compiled.raise_types) from None


def _raised(error, raise_types):
    """The exception a graph's `raise` named, as its own class (e.g. the user's MyError)."""
    import builtins  # noqa: PLC0415

    cls = raise_types.get(error.type_name) or getattr(builtins, error.type_name, None)
    if isinstance(cls, tuple):  # raised with Python's arguments (emitter.raise_)
        cls, template = cls
        texts = iter(str(error).split(RAISE_ARG_SEPARATOR))
        args = tuple(next(texts) if a is RAISE_TENSOR_ARG else a for a in template)
    else:
        args = (str(error),)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        return error
    try:
        return cls(*args)
    except Exception:  # noqa: BLE001 - a constructor taking other arguments: set them directly
        exc = cls.__new__(cls)
        exc.args = args
        return exc


class JitCacheLimitWarning(RuntimeWarning):
    """A jitted function reached jit_cache_limit variants; new variants run in PyNative."""


def _still_same(checks):
    """The fast path's per-call guards: each global or closure variable compilation read still
    holds the same object (the step function closing over `grad_fn` and `opt`, the MindSpore
    idiom, checks two names this way instead of taking the full path on every call)."""
    try:
        for getter, obj in checks:
            if getter() is not obj:
                return False
    except Exception:  # noqa: BLE001 - a vanished name: the full check reports it
        return False
    return True


class JitFunction:
    """A function (or method) compiled to a graph on its first call per input signature."""

    def __init__(self, fn, config, input_signature=None):
        self.bound_self = None
        if isinstance(fn, types.MethodType):  # jit(net.construct): compiled with its self
            fn, self.bound_self = fn.__func__, fn.__self__
        self.fn = fn
        self.config = config
        self.input_signature = check_signature(input_signature, f"jit({fn.__qualname__})")
        self.cache = CompileCache()
        # (owner weakref or _NO_SELF, _C.FastCall, raise_types, opaque values, identity checks)
        self._fast = None
        self._warned_limit = False
        functools.update_wrapper(self, fn)

    def __get__(self, instance, owner):
        if instance is None or self.bound_self is not None:
            return self
        return functools.partial(self.call_bound, instance)

    def __call__(self, *args, **kwargs):
        return self.call_bound(self.bound_self, *args, **kwargs)

    def call_bound(self, self_obj, *args, **kwargs):
        armed = self._fast  # one read: another thread may re-arm it meanwhile
        if (armed is not None and not kwargs and _C.graph_target() is None
                and armed[0]() is self_obj and not _C.tape_active()
                and (not armed[4] or _still_same(armed[4]))):
            try:
                out = armed[1](args, _state.cell_epoch, armed[3])
            except _C.GraphRaise as e:
                raise _raised(e, armed[2]) from None
            if out is not None:
                return out
        converter = _state.converter()
        if converter is not None:  # called while compiling an enclosing graph: inline it
            if self_obj is not None:  # a Cell is seen through its proxy, as `self` is
                args = (converter.wrap(self_obj, "self", None, path="self"),) + args
            from kiln.jit.scope import Converted  # noqa: PLC0415

            return Converted(converter, self.fn)(*args, **kwargs)
        if _C.tape_active():
            # grad(jit(f)) in PyNative: the eager tape must see f's ops, so f runs op by op.
            return self._run_eagerly(self_obj, args, kwargs)
        declared = self._declared_inputs(self_obj)
        if declared is not None:  # one graph for every call that fits the declaration
            key_args = compile_args(declared, args, self.fn.__qualname__)
            compiled = self.compiled_for(self_obj, key_args, kwargs)
            if compiled is None:
                return self._run_eagerly(self_obj, args, kwargs)
            return run_compiled(compiled, args, kwargs)
        compiled = self.compiled_for(self_obj, args, kwargs)
        if compiled is None:
            return self._run_eagerly(self_obj, args, kwargs)
        self._arm_fast_call(compiled, self_obj, args, kwargs)
        return run_compiled(compiled, args, kwargs)

    def _declared_inputs(self, self_obj):
        """jit's input_signature, else the inputs a Cell declared with set_inputs."""
        if self.input_signature is not None:
            return self.input_signature
        if self_obj is None:
            return None
        return getattr(self_obj, "__dict__", {}).get("_kiln_declared_inputs")

    def compiled_for(self, self_obj, args, kwargs):
        """The compiled variant for these arguments, compiled now if the cache has none; None
        past jit_cache_limit (the call then runs in PyNative)."""
        key = (
            tuple([_signature(a) for a in args]),
            tuple([(k, _signature(v)) for k, v in sorted(kwargs.items())]) if kwargs else (),
            self.config.key(),
        )
        variants = self.cache.of(self, self_obj)
        compiled = variants.lookup(key)
        if compiled is not None:
            _stats.count("cache_hits")
            return compiled
        return self._compile(variants, key, self_obj, args, kwargs)

    def _compile(self, variants, key, self_obj, args, kwargs):
        """Compiles and caches the variant for `key`; None past jit_cache_limit variants."""
        from kiln.context import get_context  # noqa: PLC0415

        with self.cache.lock:
            compiled = variants.lookup(key)  # another thread may have compiled it meanwhile
            if compiled is not None:
                return compiled
            reason = variants.miss_reason(key)
            if variants.count >= get_context("jit_cache_limit"):
                self._warn_limit(reason)
                return None
            if reason is not None:
                _stats.note_recompile(f"{self.fn.__qualname__}: {reason}")
            compiled = compile_function(
                self.fn, args, kwargs, self_obj, self.fn.__name__, self.config.level(),
                self.config.jit_syntax_level,
            )
            variants.insert(key, compiled)
            return compiled

    def _warn_limit(self, reason):
        _stats.count("eager_fallbacks")
        if self._warned_limit:
            return
        self._warned_limit = True
        import warnings  # noqa: PLC0415

        from kiln.context import get_context  # noqa: PLC0415

        warnings.warn(
            f"jit: {self.fn.__qualname__} has compiled {get_context('jit_cache_limit')} "
            f"variants (jit_cache_limit) and needs another: {reason}. A value it reads as a "
            f"constant keeps changing; pass it as a Tensor argument or wrap it in ms.mutable() "
            f"to make it a graph input. Calls that need a new variant now run in PyNative.",
            JitCacheLimitWarning,
            stacklevel=_stats.user_stacklevel(),
        )

    def _run_eagerly(self, self_obj, args, kwargs):
        if self_obj is not None:
            args = (self_obj,) + args
        return self.fn(*args, **kwargs)

    def _arm_fast_call(self, compiled, self_obj, args, kwargs):
        """Lets the next calls with the same tensor types skip straight to C++ (_C.FastCall)
        while no Cell attribute changes; only for graphs whose per-call guards are identity
        checks (globals and closure variables holding Cells, functions, tensors), with tensor
        arguments only. The engine rebuilds the result from the graph's signature, whatever
        its structure."""
        self._fast = None
        checks = compiled.guards.identity_checks()
        if kwargs or checks is None or compiled.lax_sites:
            return
        if not all(isinstance(a, Tensor) for a in args):
            return
        try:
            owner = _NO_SELF if self_obj is None else weakref.ref(self_obj, self._disarm)
        except TypeError:  # an owner without weak references (__slots__): no fast path
            return
        fast = _C.FastCall(compiled.executable, compiled.parameters, _state.cell_epoch)
        self._fast = (owner, fast, compiled.raise_types, compiled.opaque, checks)

    def _disarm(self, dead_owner):
        """The owner of the armed fast call died: drop its graph and Parameters with it."""
        armed = self._fast
        if armed is not None and armed[0] is dead_owner:
            self._fast = None

    def variants(self):
        """Every compiled variant (of every owner still alive)."""
        return [c for entries in self.cache.all_variants(self) for c in entries]

    def graph_text(self, stage="optimized"):
        """The IR of every compiled variant: "frontend" (as built from the source) or
        "optimized" (after the jit level's passes, what runs)."""
        if stage not in ("frontend", "optimized"):
            raise ValueError(f"graph_text: stage must be 'frontend' or 'optimized', got {stage!r}")
        texts = [c.text if stage == "frontend" else c.executable.text() for c in self.variants()]
        return "\n".join(texts)


def jit(
    function=None,
    *,
    jit_config=None,
    jit_level=None,
    fullgraph=False,
    input_signature=None,
    capture_mode="ast",
    dynamic=0,
    backend="",
    **options,
):
    """Compiles a function or method to a graph (decorator, or ``jit(fn)`` as a transform)."""
    if options:
        raise ValueError(f"jit: unknown options {sorted(options)}")
    if jit_config is None:
        jit_config = JitConfig(
            jit_level=jit_level or "", jit_syntax_level="STRICT" if fullgraph else ""
        )
    elif not isinstance(jit_config, JitConfig):
        raise TypeError(f"jit: jit_config must be a JitConfig, got {type(jit_config).__name__}")
    if capture_mode not in ("ast",):
        raise ValueError(
            f"jit: capture_mode {capture_mode!r} is not supported; kiln compiles "
            f"from source ('ast')"
        )

    def wrap(fn):
        if isinstance(fn, type) and issubclass(fn, CellBase):
            # @jit on a Cell class: construct compiles; calling an instance still runs the
            # Cell's __call__ (hooks, PyNative bookkeeping) around it.
            fn.construct = JitFunction(_plain_construct(fn), jit_config, input_signature)
            return fn
        if isinstance(fn, CellBase):  # jit(net): net's construct, compiled with net as self
            return JitFunction(
                types.MethodType(_plain_construct(type(fn)), fn), jit_config, input_signature
            )
        if not callable(fn):
            raise TypeError(f"jit: expected a function, got {type(fn).__name__}")
        return JitFunction(fn, jit_config, input_signature)

    return wrap if function is None else wrap(function)


def _plain_construct(cell_type):
    """A Cell class's construct as a plain function (unwrapped where @jit already compiles it)."""
    construct = cell_type.construct
    return construct.fn if isinstance(construct, JitFunction) else construct


def cell_graph_call(cell, args, kwargs):
    """Cell.__call__ in Graph mode: compiles construct (cached per cell and input signature);
    while another graph is being compiled, the cell is compiled into that graph instead."""
    converter = _state.converter()
    if converter is not None:
        from kiln.jit.scope import CellProxy  # noqa: PLC0415

        return converter.call_cell(cell, CellProxy(converter, cell, type(cell).__name__), args,
                                   kwargs)
    return cell_jit_function(cell).call_bound(cell, *args, **kwargs)


def cell_jit_function(cell):
    """The JitFunction that compiles and caches a Cell's construct (made on first use)."""
    jitted = cell.__dict__.get("_kiln_graph_fn")
    if jitted is None:
        jitted = JitFunction(_plain_construct(type(cell)), _cell_config(cell))
        object.__setattr__(cell, "_kiln_graph_fn", jitted)
    return jitted


def _cell_config(cell):
    config = cell.__dict__.get("_jit_config_dict")
    if isinstance(config, JitConfig):
        return config
    if isinstance(config, dict):
        return JitConfig(**config)
    return JitConfig()
