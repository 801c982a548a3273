"""LAX: Python code a graph cannot hold runs in the interpreter, with the values of the graph.

What STRICT syntax cannot compile still runs at the LAX level (the default): while compiling when
its inputs are known (Python evaluates it and the result is a constant), otherwise as a
*run-time interpreter node* (the IR's `interpret` node, runtime/interpret.h): when the graph
runs, the engine calls back into Python with the values the graph computed, and the Python
code's result flows on. `x.asnumpy()`, NumPy functions of graph values, attributes a graph
writes on `self`, Python objects a graph returns, `print` of those objects are such nodes.

A node's result is a Python object. In the graph it is carried as a 0-d int64 *handle* into a
table of objects kept for the duration of the call (RuntimeObject stands for it while
compiling). Used where a tensor is needed (an op's input, `Tensor(...)`, returned as a tensor),
it becomes one through another node whose dtype and shape compiling must know: they come from
a *probe*, the same Python code run while compiling on example values of the right dtypes and
shapes (ones) - only for code without side effects (NumPy, `math`, a tensor's own conversions,
operators and builtins). The engine checks each run's result against that type, so a value of
another dtype or rank is an error naming the line, never a silent misread.
"""

import builtins
import itertools
import operator
import threading
import types
import warnings
import weakref

import numpy as np

from kiln import _C, _graph_state
from kiln._graph_state import GraphValue

_NO_PROBE = object()  # the result's type is unknown while compiling
_sites = weakref.WeakValueDictionary()  # key -> _Site, alive while a compiled graph holds it
_site_keys = itertools.count(1)
_per_thread = threading.local()


def _dtype_enum(name):
    from kiln.common import dtype as mstype  # noqa: PLC0415

    return getattr(mstype, name)._enum


class LaxRuntimeWarning(RuntimeWarning):
    """A compiled function runs Python code when the graph runs (run-time interpreter nodes)."""


class _Site:
    """What one interpret node runs: fn(*values) with the graph's inputs in `kinds` order."""

    __slots__ = ("key", "fn", "kinds", "output", "what", "__weakref__")

    def __init__(self, fn, kinds, output, what):
        self.key = f"lax{next(_site_keys)}"
        self.fn, self.kinds, self.output, self.what = fn, kinds, output, what


# ---- running: the host the engine calls ----
def _host(key, inputs):
    site = _sites.get(key)
    if site is None:
        raise RuntimeError(f"LAX: run-time interpreter site {key} no longer exists")
    # tensors are copies: Python may keep them past the run, when the graph reuses its buffers
    table = _per_thread.table
    values = [table[int(t.asnumpy())] if kind == "object" else t.copy()
              for kind, t in zip(site.kinds, inputs)]
    result = site.fn(*values)
    if site.output == "none":
        return []
    if site.output == "object":
        return [_keep(result)]
    if isinstance(site.output, list):  # declared tensors (run_declared)
        return [_as_tensor(r, m, site.what) for r, m in zip(result, site.output)]
    return [_as_tensor(result, site.output, site.what)]


def _keep(obj):
    """Stores a node's result for the rest of the call; its handle (its index in the call's
    table) as a 0-d int64 tensor, made once per index and reused."""
    table = _per_thread.table
    table.append(obj)
    handle = len(table) - 1
    while len(_handle_tensors) <= handle:
        _handle_tensors.append(_int64_scalar(len(_handle_tensors)))
    return _handle_tensors[handle]


def _int64_scalar(value):
    from kiln.common.tensor import Tensor  # noqa: PLC0415

    return Tensor(np.asarray(value, np.int64))


_handle_tensors = []  # shared, never written: the graph only reads its inputs


def _as_tensor(value, meta, what):
    """The run-time value as the tensor the graph was compiled for (meta: dtype enum, shape,
    weak); Python numbers take that dtype, arrays and tensors keep theirs (the engine checks)."""
    from kiln.common import dtype as mstype  # noqa: PLC0415
    from kiln.common.tensor import Tensor  # noqa: PLC0415

    dtype = mstype.from_enum(meta[0])
    if isinstance(value, Tensor):
        return Tensor(value.asnumpy()) if value._dtype != meta[0] else value.copy()
    if isinstance(value, (bool, int, float, np.generic, np.ndarray, list, tuple)):
        if isinstance(value, (bool, int, float)):
            return Tensor(value, dtype)
        array = np.array(value)
        return Tensor(array) if array.dtype != object else _not_a_tensor(value, what)
    return _not_a_tensor(value, what)


def _not_a_tensor(value, what):
    raise TypeError(f"the Python code {what} returned a {type(value).__name__} when the graph "
                    f"ran, where the graph needs a tensor")


class run_scope:  # noqa: N801 - used as `with lax.run_scope():`
    """One call of a graph with interpret nodes: the objects its nodes make live in this
    call's table until the call's result is built (a graph run from inside a node's Python
    code has its own table)."""

    def __enter__(self):
        self.saved = getattr(_per_thread, "table", None)
        _per_thread.table = []
        return self

    def __exit__(self, *exc):
        _per_thread.table = self.saved


def resolve(result, object_positions):
    """The call's result with each object handle (leaf `k` in object_positions, in the order
    the graph's outputs were flattened) replaced by its object."""
    from kiln.jit.trees import flatten, unflatten  # noqa: PLC0415

    leaves, structure = flatten(result)
    position, out = 0, []
    for leaf in leaves:
        if isinstance(leaf, _C.TensorBase):
            if position in object_positions:
                leaf = _per_thread.table[int(leaf.asnumpy())]
            position += 1
        out.append(leaf)
    return unflatten(structure, out)


_C.set_interpret_host(_host)


# ---- compiling: creating nodes ----
def is_lax():
    """Whether the function being compiled is at the LAX level."""
    converter = _graph_state.converter()
    return converter is not None and getattr(converter, "lax", False)


def run_later(fn, args, kwargs, what, output="object", probe=True):
    """A node running fn(*args, **kwargs) when the graph runs. Graph values anywhere in the
    arguments (also inside tuples, lists and dicts) become its inputs. `output`: "object" (a
    RuntimeObject), "none", or "tensor" (then a GraphTensor typed by the probe). `probe`:
    whether fn may also run while compiling, on example values, to learn its result's type."""
    emitter = _graph_state.emitter()
    inputs, kinds = [], []
    template = _template((args, kwargs), inputs, kinds)
    example = _probe(fn, template, inputs) if probe else _NO_PROBE

    build_args, build_kwargs = _rebuilder(template[0]), _rebuilder(template[1])

    def run(*values):
        return fn(*build_args(values), **build_kwargs(values))

    where = _where(emitter, what)
    if output == "tensor":
        meta = _meta_of(example, exact=_all_exact(inputs), what=where)
        site = _Site(run, kinds, meta, where)
        return _emit(emitter, site, inputs, [meta], what)[0]
    site = _Site(run, kinds, output, where)
    if output == "none":
        _emit(emitter, site, inputs, [], what)
        return None
    handle = _emit(emitter, site, inputs, [(_dtype_enum("int64"), (), False)], what)[0]
    return RuntimeObject(handle, example, _all_exact(inputs) and example is not _NO_PROBE, where)


def run_declared(fn, tensors, metas, what):
    """A node running fn(*tensors) when the graph runs (at any syntax level: the caller, e.g.
    ops.Custom's pyfunc, declares the results), returning a list of values that must match
    `metas` [(dtype enum, shape)]; fn gets Tensors and returns a sequence of arrays or Tensors."""
    emitter = _graph_state.emitter()
    full = [(dtype, tuple(shape), False) for dtype, shape in metas]
    site = _Site(fn, ["tensor"] * len(tensors), full, _where(emitter, what))
    inputs = [_Input(emitter.to_graph(t, what)) for t in tensors]
    return _emit(emitter, site, inputs, full, what)


def _emit(emitter, site, inputs, metas, what):
    _sites[site.key] = site
    emitter.lax_sites.append(site)  # the compiled graph keeps its sites alive
    handles = emitter.interpret_(site.key, what, [v.graph_handle() for v in inputs], metas)
    emitter.note_interpret(what)
    return handles


def _where(emitter, what):
    file, line, _ = emitter.loc
    return f"`{what}` ({file}:{line})"


def _template(value, inputs, kinds):
    """value with every graph value replaced by its input slot."""
    if isinstance(value, GraphValue):  # a GraphTensor or a RuntimeObject
        inputs.append(_Input(value))
        kinds.append("object" if isinstance(value, RuntimeObject) else "tensor")
        return _Slot(len(inputs) - 1)
    if type(value) in (tuple, list):
        return type(value)(_template(v, inputs, kinds) for v in value)
    if type(value) is dict:
        return {k: _template(v, inputs, kinds) for k, v in value.items()}
    return value


def _fill(template, values):
    values = list(values)

    def fill(t):
        if isinstance(t, _Slot):
            return values[t.index]
        if type(t) in (tuple, list):
            return type(t)(fill(v) for v in t)
        if type(t) is dict:
            return {k: fill(v) for k, v in t.items()}
        return t

    return fill(template)


def _rebuilder(template):
    """A function of the node's input values that rebuilds `template` (made once per node, so
    each run only indexes and builds containers)."""
    if isinstance(template, _Slot):
        index = template.index
        return lambda values: values[index]
    if type(template) in (tuple, list, dict) and not _has_slot(template):
        if not template:
            return lambda values: type(template)()
        return lambda values: template if type(template) is tuple else _copy_container(template)
    if type(template) in (tuple, list):
        kind, parts = type(template), [_rebuilder(t) for t in template]
        return lambda values: kind([p(values) for p in parts])
    if type(template) is dict:
        parts = [(k, _rebuilder(v)) for k, v in template.items()]
        return lambda values: {k: p(values) for k, p in parts}
    return lambda values: template


def _has_slot(template):
    if isinstance(template, _Slot):
        return True
    if type(template) in (tuple, list):
        return any(_has_slot(t) for t in template)
    if type(template) is dict:
        return any(_has_slot(t) for t in template.values())
    return False


def _copy_container(template):  # a fresh list/dict per run: the code may change it
    import copy  # noqa: PLC0415

    return copy.deepcopy(template)


class _Slot:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


class _Input:
    """A graph value passed to a node: its handle, and an example value for probing."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def graph_handle(self):
        v = self.value
        return v.graph.handle if isinstance(v, RuntimeObject) else v.handle

    def exact(self):
        v = self.value
        return v.exact if isinstance(v, RuntimeObject) else -1 not in v.shape

    def example(self):
        from kiln import ops  # noqa: PLC0415

        v = self.value
        if isinstance(v, RuntimeObject):
            return v.probe
        with _graph_state.eager():
            return ops.ones(tuple(1 if d < 0 else d for d in v.shape), v.dtype)


def _all_exact(inputs):
    return all(i.exact() for i in inputs)


def _probe(fn, template, inputs):
    """fn's result on example values (ones of each input's dtype and shape) while compiling;
    _NO_PROBE where an input has none or fn fails on them."""
    examples = [i.example() for i in inputs]
    if any(e is _NO_PROBE for e in examples):
        return _NO_PROBE
    call_args, call_kwargs = _fill(template, iter(examples))
    try:
        with _graph_state.eager(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*call_args, **call_kwargs)
    except Exception:  # noqa: BLE001 - the example values may not suit fn: the type stays open
        return _NO_PROBE


def _meta_of(example, exact, what):
    """(dtype enum, shape, weak) of the tensor a probed value converts to."""
    from kiln.common import dtype as mstype  # noqa: PLC0415
    from kiln.common.tensor import Tensor  # noqa: PLC0415

    if example is _NO_PROBE:
        raise TypeError(
            f"Graph mode (LAX): {what} runs in Python when the graph runs, and its result is "
            f"used as a tensor, but kiln cannot tell its dtype and shape while compiling (it "
            f"only tries code without side effects: NumPy, math, tensor conversions). Compute "
            f"it with kiln operations, or run this code in PyNative mode."
        )
    if isinstance(example, bool):
        return (_dtype_enum("bool_"), (), True)
    if isinstance(example, int):
        return (_dtype_enum("int64"), (), True)
    if isinstance(example, float):
        return (_dtype_enum("float32"), (), True)
    if isinstance(example, Tensor):
        dtype, shape = example._dtype, tuple(example.shape)
    else:
        array = np.asarray(example)
        if array.dtype == object:
            raise TypeError(f"Graph mode (LAX): {what} gives a {type(example).__name__}, which "
                            f"is not a tensor")
        dtype, shape = mstype.to_dtype(array.dtype)._enum, array.shape
    return (dtype, tuple(shape) if exact else tuple(-1 for _ in shape), False)


def to_tensor(obj, dtype=None):
    """A RuntimeObject as a graph tensor (optionally cast to `dtype`)."""
    from kiln.ops._core import call  # noqa: PLC0415

    if obj.converted is None:
        meta = _meta_of(obj.probe, obj.exact, obj.what)
        site = _Site(lambda o: o, ["object"], meta, obj.what)
        emitter = _graph_state.emitter()
        obj.converted = _emit(emitter, site, [_Input(obj)], [meta],
                              f"{obj._text()} as a tensor")[0]
    if dtype is None:
        return obj.converted
    from kiln.common import dtype as mstype  # noqa: PLC0415

    return call("cast", (obj.converted,), (mstype.to_dtype(dtype)._enum,))


# What a probe may run: library code without side effects.
_PURE_MODULES = ("numpy", "math", "cmath", "operator", "builtins", "kiln")


def is_pure(fn):
    module = getattr(fn, "__module__", None) or getattr(type(fn), "__module__", "") or ""
    if isinstance(fn, np.ufunc):
        return True
    if module.startswith("numpy.random") or getattr(fn, "__name__", "") in ("print", "input"):
        return False
    return module.split(".")[0] in _PURE_MODULES


class RuntimeObject(GraphValue):
    """Stands for the Python object a run-time interpreter node returns, while compiling.
    Operations on it (attributes, calls, operators, NumPy functions) become more such nodes;
    used as a tensor it is converted (to_tensor)."""

    __slots__ = ("graph", "probe", "exact", "what", "converted")

    def __init__(self, graph, probe, exact, what):
        self.graph, self.probe, self.exact, self.what = graph, probe, exact, what
        self.converted = None

    def __repr__(self):
        return f"<value of {self.what}, known when the graph runs>"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return run_later(getattr, (self, name), {}, f"{self._text()}.{name}")

    def __call__(self, *args, **kwargs):
        return run_later(lambda f, *a, **k: f(*a, **k), (self,) + args, kwargs,
                         f"{self._text()}(...)", probe=self._pure_callable())

    def _pure_callable(self):
        p = self.probe
        return p is not _NO_PROBE and (
            isinstance(p, (types.BuiltinMethodType, types.MethodWrapperType, np.ufunc))
            and is_pure(getattr(p, "__self__", p))
            or isinstance(getattr(p, "__self__", None), (np.ndarray, np.generic, int, float,
                                                          str, bytes))
        )

    def _text(self):
        return self.what.split(" (")[0].strip("`")

    def __getitem__(self, index):
        return run_later(operator.getitem, (self, index), {}, f"{self._text()}[...]")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fn = ufunc if method == "__call__" else getattr(ufunc, method)
        return run_later(fn, _to_runtime(inputs), _to_runtime(kwargs), f"numpy.{ufunc.__name__}")

    def __array_function__(self, func, types_, args, kwargs):
        return run_later(func, _to_runtime(args), _to_runtime(kwargs),
                         f"numpy.{func.__name__}", probe=is_pure(func))

    def _no_value(self, what):
        raise TypeError(f"Graph mode (LAX): {what} of {self.what} needs its value, which is only "
                        f"known when the graph runs; keep it in NumPy or Python code that runs "
                        f"then (or make it a Tensor and use tensor operations)")

    def __bool__(self):
        self._no_value("the truth value")

    def __int__(self):
        self._no_value("int()")

    def __float__(self):
        self._no_value("float()")

    def __index__(self):
        self._no_value("using it as an index")

    def __iter__(self):
        raise TypeError(f"Graph mode (LAX): iterating over {self.what}, whose length is only "
                        f"known when the graph runs, cannot unroll a loop")

    def __len__(self):
        self._no_value("len()")

    __hash__ = object.__hash__


def _to_runtime(value):
    """GraphTensors inside NumPy's arguments take part as arrays (their asnumpy())."""
    if isinstance(value, GraphValue) and not isinstance(value, RuntimeObject):  # a GraphTensor
        return as_array(value)
    if type(value) in (tuple, list):
        return type(value)(_to_runtime(v) for v in value)
    if type(value) is dict:
        return {k: _to_runtime(v) for k, v in value.items()}
    return value


def as_array(tensor):
    """graph tensor.asnumpy() when the graph runs."""
    return run_later(lambda t: t.asnumpy(), (tensor,), {}, "Tensor.asnumpy()")


def _operator(op, symbol, swap=False):
    def method(self, other):
        # Python's meaning with the run-time values (a NumPy value and a tensor: what PyNative
        # does with them); Tensor(value) brings a NumPy result back into the graph
        pair = (other, self) if swap else (self, other)
        return run_later(op, pair, {}, f"{symbol} on {self._text()}")

    return method


for _name, _op, _sym in [
    ("add", operator.add, "+"), ("sub", operator.sub, "-"), ("mul", operator.mul, "*"),
    ("truediv", operator.truediv, "/"), ("floordiv", operator.floordiv, "//"),
    ("mod", operator.mod, "%"), ("pow", operator.pow, "**"), ("matmul", operator.matmul, "@"),
    ("and", operator.and_, "&"), ("or", operator.or_, "|"), ("xor", operator.xor, "^"),
    ("lshift", operator.lshift, "<<"), ("rshift", operator.rshift, ">>"),
]:
    setattr(RuntimeObject, f"__{_name}__", _operator(_op, _sym))
    setattr(RuntimeObject, f"__r{_name}__", _operator(_op, _sym, swap=True))
for _name, _op, _sym in [
    ("eq", operator.eq, "=="), ("ne", operator.ne, "!="), ("lt", operator.lt, "<"),
    ("le", operator.le, "<="), ("gt", operator.gt, ">"), ("ge", operator.ge, ">="),
]:
    setattr(RuntimeObject, f"__{_name}__", _operator(_op, _sym))
RuntimeObject.__neg__ = lambda self: run_later(operator.neg, (self,), {}, f"-{self._text()}")
RuntimeObject.__abs__ = lambda self: run_later(builtins.abs, (self,), {}, f"abs({self._text()})")
RuntimeObject.__invert__ = lambda self: run_later(operator.invert, (self,), {}, "~")
del _name, _op, _sym


def length(obj):
    """len() of a RuntimeObject: known while compiling when its example has the exact shape
    (an array's first dimension), else taken when the graph runs."""
    if obj.exact and isinstance(obj.probe, np.ndarray) and obj.probe.ndim > 0:
        return len(obj.probe)
    return run_later(len, (obj,), {}, f"len({obj._text()})")


def join(graph, a, b):
    """The RuntimeObject after a tensor-dependent if whose branches gave `a` and `b`."""
    same = _same_type(a.probe, b.probe)
    return RuntimeObject(graph, a.probe if same else _NO_PROBE, a.exact and b.exact and same,
                         f"`{a._text()} or {b._text()}` (after an if)")


def _same_type(p, q):
    if p is _NO_PROBE or q is _NO_PROBE or type(p) is not type(q):
        return False
    if isinstance(p, (np.ndarray, np.generic)):
        return p.dtype == q.dtype and np.shape(p) == np.shape(q)
    return True


def objects_out(result):
    """The result with every object whose attributes hold graph values (a plain Python or
    @jit_class object made in compiled code) replaced by a copy made when the graph runs, with
    those attributes' run-time values, as PyNative returns it."""
    if type(result) in (tuple, list):
        return type(result)(objects_out(v) for v in result)
    if type(result) is dict:
        return {k: objects_out(v) for k, v in result.items()}
    attrs = getattr(result, "__dict__", None)
    if (isinstance(attrs, dict) and not isinstance(result, (type, GraphValue))
            and type(result).__module__.split(".")[0] != "kiln" and uses_graph(attrs.values())):
        return run_later(_with_attributes(result), ({k: objects_out(v) for k, v in
                                                     attrs.items()},), {},
                         f"{type(result).__name__} object", probe=False)
    return result


def _with_attributes(obj):
    import copy  # noqa: PLC0415

    def rebuild(values):
        out = copy.copy(obj)
        out.__dict__.update(values)
        return out

    return rebuild


def uses_graph(values):
    """Whether a graph value (a GraphTensor or a RuntimeObject) is among `values`, also inside
    tuples, lists and dicts (keys too)."""
    return _contains(values, GraphValue)


def uses_runtime(values):
    """Whether a RuntimeObject is among `values` (also inside tuples, lists and dicts)."""
    return _contains(values, RuntimeObject)


def _contains(values, kind):
    for v in values:
        if isinstance(v, kind):
            return True
        if type(v) in (tuple, list) and _contains(v, kind):
            return True
        if type(v) is dict and _contains(list(v.keys()) + list(v.values()), kind):
            return True
    return False

