"""vmap's batching rules: how each registry op runs on values that carry a batch axis.

Inside ``ops.vmap`` a mapped argument is a ``Batched`` value: its logical shape is one
example's, its physical value has the batch axis first. Every op reaches the registry through
``ops._core.call``; while vmap runs, that call comes here. An op with a rule runs once on the
whole batch (elementwise ops broadcast, reductions and shape ops shift their axes by one,
matmul broadcasts over the batch axis); an op without one runs once per example and the
results are stacked (the fallback, correct for any op but a loop). Nested vmaps each have a
level; a rule unwraps only its own level, so inner physical values may be outer Batched values.
"""
import threading

from kiln import _C
from kiln._graph_state import GraphValue

ELEMENTWISE = frozenset((
    "add sub mul div floor_div mod pow maximum minimum equal not_equal less less_equal greater "
    "greater_equal logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor "
    "bitwise_left_shift bitwise_right_shift neg abs exp log sqrt rsqrt sin cos tanh sigmoid relu "
    "gelu silu logical_not bitwise_not sign square floor cast clamp where stop_gradient identity"
).split())
REDUCE = frozenset("reduce_sum reduce_mean reduce_max reduce_min reduce_prod".split())
AXIS_FIRST = frozenset("softmax log_softmax argmax argmin".split())


class Batched(GraphValue):
    """A value inside vmap: `value` holds the batch axis first; shape is one example's."""

    __slots__ = ("value", "level", "__weakref__")

    def __init__(self, value, level):
        self.value = value
        self.level = level

    @property
    def shape(self):
        return tuple(self.value.shape[1:])

    @property
    def dtype(self):
        return self.value.dtype

    @property
    def ndim(self):
        return len(self.value.shape) - 1

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self):
        return self.dtype.itemsize

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self):
        raise TypeError("vmap: the truth value of a mapped tensor differs per example; use "
                        "ops.where or ops.select instead of Python control flow on it")

    def _no_value(self, what):
        raise TypeError(f"vmap: {what} needs the values of a mapped tensor, which differ per "
                        f"example")

    def asnumpy(self):
        self._no_value("asnumpy()")

    def item(self, index=None):
        self._no_value("item()")

    def __repr__(self):
        return f"BatchedTensor(shape={list(self.shape)}, dtype={self.dtype}, level={self.level})"

    __hash__ = object.__hash__


# ---- dispatch ----
_thread = threading.local()  # each thread's vmap levels: vmaps in other threads never mix in


def levels():
    """The vmap levels this thread is running, innermost last."""
    stack = getattr(_thread, "levels", None)
    if stack is None:
        stack = _thread.levels = []
    return stack


def dispatch(name, inputs, attrs):
    """ops._core.call while vmap runs: the innermost level's rule, else the registry."""
    level = _level_of(inputs)
    if level is None:
        return _C_call(name, inputs, attrs)
    size = next(_batch_size(x) for x in _flat(inputs) if _is_level(x, level))
    rule = RULES.get(name)
    if rule is None:
        if name in ELEMENTWISE:
            rule = _elementwise
        elif name in REDUCE or name in AXIS_FIRST:
            rule = _axis_rule
    out = rule(name, inputs, attrs, level, size) if rule is not None else None
    if out is None:  # no rule, or the rule does not cover these arguments
        out = _loop(name, inputs, attrs, level, size)
    return out


def _C_call(name, inputs, attrs):  # noqa: N802 - the registry call itself
    from kiln.ops._core import KIND  # noqa: PLC0415

    return _C.call(KIND[name], inputs, attrs)


def _call(name, inputs, attrs=()):
    from kiln.ops._core import call  # noqa: PLC0415 - back through dispatch (outer levels)

    return call(name, inputs, attrs)


def _flat(inputs):
    for x in inputs:
        if isinstance(x, (tuple, list)):
            yield from x
        else:
            yield x


def _level_of(inputs):
    levels = [x.level for x in _flat(inputs) if isinstance(x, Batched)]
    return max(levels) if levels else None


def _is_level(x, level):
    return isinstance(x, Batched) and x.level == level


def _batch_size(x):
    return x.value.shape[0]


def _wrap(out, level):
    if isinstance(out, tuple):
        return tuple(Batched(o, level) for o in out)
    return Batched(out, level)


def _aligned(x, rank, level):
    """x's physical value with unit axes after the batch axis up to logical `rank`."""
    if not _is_level(x, level):
        return x
    p, extra = x.value, rank - x.ndim
    if extra <= 0:
        return p
    return _call("reshape", (p,), ((p.shape[0],) + (1,) * extra + tuple(x.shape),))


def _rank(x):
    return len(x.shape) if hasattr(x, "shape") else 0


# ---- rules ----
def _elementwise(name, inputs, attrs, level, size):
    rank = max(_rank(x) for x in inputs)
    return _wrap(_call(name, tuple(_aligned(x, rank, level) for x in inputs), attrs), level)


def _norm(axis, rank):
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise ValueError(f"vmap: axis {axis} is out of range for a mapped tensor of rank {rank}")
    return axis % max(rank, 1)


def _shift(axes, rank):
    if axes is None:
        return tuple(range(1, rank + 1))
    if isinstance(axes, (tuple, list)):
        return tuple(_norm(a, rank) + 1 for a in axes)
    return _norm(axes, rank) + 1


def _axis_rule(name, inputs, attrs, level, size):
    (x,) = inputs
    if not _is_level(x, level) or (attrs[0] is None and name in AXIS_FIRST):
        return None
    if x.ndim == 0:
        return None
    return _wrap(_call(name, (x.value,), (_shift(attrs[0], x.ndim),) + tuple(attrs[1:])), level)


def _reshape(name, inputs, attrs, level, size):
    (x,) = inputs
    return _wrap(_call(name, (x.value,), ((size,) + tuple(attrs[0]),)), level)


def _transpose(name, inputs, attrs, level, size):
    (x,) = inputs
    perm = tuple(attrs[0]) or tuple(range(x.ndim - 1, -1, -1))
    return _wrap(_call(name, (x.value,), ((0,) + tuple(_norm(p, x.ndim) + 1 for p in perm),)),
                 level)


def _broadcast_to(name, inputs, attrs, level, size):
    (x,) = inputs
    shape = tuple(attrs[0])
    p = _aligned(x, len(shape), level)
    return _wrap(_call(name, (p,), ((size,) + shape,)), level)


def _expand_dims(name, inputs, attrs, level, size):
    (x,) = inputs
    return _wrap(_call(name, (x.value,), (_norm(attrs[0], x.ndim + 1) + 1,)), level)


def _squeeze(name, inputs, attrs, level, size):
    (x,) = inputs
    axes = attrs[0]
    if axes is None:
        axes = tuple(a for a, d in enumerate(x.shape) if d == 1)
        if not axes:
            return x
    return _wrap(_call(name, (x.value,), (_shift(axes, x.ndim),)), level)


def _strided_slice(name, inputs, attrs, level, size):
    (x,) = inputs
    begin, end, strides = (tuple(a) for a in attrs)
    return _wrap(_call(name, (x.value,), ((0,) + begin, (size,) + end, (1,) + strides)), level)


def _concat(name, inputs, attrs, level, size):
    tensors = inputs  # variadic: the tensors themselves
    rank = _rank(tensors[0])
    parts = []
    for t in tensors:
        if _is_level(t, level):
            parts.append(t.value)
        else:  # the same for every example: one copy each
            e = _call("expand_dims", (t,), (0,))
            parts.append(_call("broadcast_to", (e,), ((size,) + tuple(t.shape),)))
    return _wrap(_call(name, tuple(parts), (_norm(attrs[0], rank) + 1,)), level)


def _matmul(name, inputs, attrs, level, size):
    a, b = inputs
    if _rank(a) < 2 or _rank(b) < 2:
        return None
    rank = max(_rank(a), _rank(b))
    a2, b2 = _aligned(a, rank, level), _aligned(b, rank, level)
    return _wrap(_call(name, (a2, b2), attrs), level)


def _gather(name, inputs, attrs, level, size):
    """gather(params, indices, axis, batch_dims) with one side batched."""
    params, indices = inputs
    axis, batch_dims = attrs
    if batch_dims != 0 or (_is_level(params, level) and _is_level(indices, level)):
        return None
    if _is_level(params, level):
        axis = _norm(axis, params.ndim) + 1
        return _wrap(_call(name, (params.value, indices), (axis, 0)), level)
    axis = _norm(axis, len(params.shape))
    out = _call(name, (params, indices.value), (axis, 0))  # the batch axis lands at `axis`
    if axis:
        order = list(range(len(out.shape)))
        order.insert(0, order.pop(axis))
        out = _call("transpose", (out,), (tuple(order),))
    return _wrap(out, level)


RULES = {
    "gather": _gather,
    "reshape": _reshape,
    "transpose": _transpose,
    "broadcast_to": _broadcast_to,
    "expand_dims": _expand_dims,
    "squeeze": _squeeze,
    "strided_slice": _strided_slice,
    "concat": _concat,
    "matmul": _matmul,
}


def _loop(name, inputs, attrs, level, size):
    """The fallback: the op once per example, the results stacked on a new first axis."""
    def pick(x, i):
        if isinstance(x, (tuple, list)):
            return type(x)(pick(v, i) for v in x)
        return _call("reshape", (_call("strided_slice", (x.value,), _row(x, i)),),
                     (tuple(x.shape),)) if _is_level(x, level) else x

    outs = [_call(name, tuple(pick(x, i) for x in inputs), attrs) for i in range(size)]
    if isinstance(outs[0], tuple):
        return tuple(_stack([o[k] for o in outs], level) for k in range(len(outs[0])))
    return _stack(outs, level)


def _row(x, i):
    shape = tuple(x.value.shape)
    return ((i,) + (0,) * (len(shape) - 1), (i + 1,) + shape[1:], (1,) * len(shape))


def _stack(values, level):
    parts = tuple(_call("expand_dims", (v,), (0,)) for v in values)
    return Batched(_call("concat", parts, (0,)), level)


# ---- Tensor's API on Batched values ----
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "floordiv": "floor_div",
           "mod": "mod", "pow": "pow", "matmul": "matmul", "and": "bitwise_and",
           "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift",
           "rshift": "bitwise_right_shift"}
_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
            "gt": "greater", "ge": "greater_equal"}


def _operator(op, swap):
    def method(self, other):
        from kiln.ops._core import is_tensor  # noqa: PLC0415

        if not (is_tensor(other) or isinstance(other, (bool, int, float))):
            return NotImplemented
        return _call(op, (other, self) if swap else (self, other))

    return method


def install_methods(Tensor):  # noqa: N803 - the class
    """Gives Batched the operators and the Python-level methods of Tensor (written with ops,
    they work on batched values as they do on graph values); kiln.common.tensor calls it."""
    from kiln.ops import _indexing  # noqa: PLC0415

    for dunder, op in _BINARY.items():
        setattr(Batched, f"__{dunder}__", _operator(op, False))
        setattr(Batched, f"__r{dunder}__", _operator(op, True))
    for dunder, op in _COMPARE.items():
        setattr(Batched, f"__{dunder}__", _operator(op, False))
    Batched.__neg__ = lambda self: _call("neg", (self,))
    Batched.__abs__ = lambda self: _call("abs", (self,))
    Batched.__invert__ = lambda self: _call("bitwise_not", (self,))
    Batched.__getitem__ = lambda self, index: _indexing.getitem(self, index)
    skip = set(vars(Batched)) | {"__init__", "__new__", "__setitem__", "__repr__", "__str__",
                                 "__format__", "__reduce__", "__copy__", "__deepcopy__",
                                 "__dict__", "__module__", "__doc__", "__weakref__",
                                 "__slots__", "tolist", "numpy", "copy", "clone", "init_data",
                                 "_write_inplace"}
    for name, value in vars(Tensor).items():
        if name not in skip and callable(value) and not isinstance(value, (staticmethod,
                                                                           classmethod)):
            setattr(Batched, name, value)
    Batched.T = property(lambda self: self.transpose())
    for name in ("mT", "H", "mH"):
        setattr(Batched, name, getattr(Tensor, name))
