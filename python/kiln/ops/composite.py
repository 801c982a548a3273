"""kiln.ops.composite (imported as ``C``) -- gradients of Python functions: grad, value_and_grad,
GradOperation; and MultitypeFuncGraph, HyperMap and Map (ops/multitype.py). PyNative mode
records ops on a C++ tape (runtime/tape.h) and sweeps it backwards with the registry's gradient
rules.
"""
from kiln import _C, _graph_state
from kiln.ops import _backward_hooks
from kiln.ops._core import call, is_tensor
from kiln.ops.multitype import HyperMap, Map, MultitypeFuncGraph

__all__ = ["grad", "value_and_grad", "GradOperation", "stop_gradient", "MultitypeFuncGraph",
           "HyperMap", "Map"]


def stop_gradient(value):
    """The same values, cut off from differentiation (a view; no gradient flows through it)."""
    if isinstance(value, (tuple, list)):
        return type(value)(stop_gradient(v) for v in value)
    if not is_tensor(value):
        return value
    return call("stop_gradient", (value,))


def _positions(grad_position, nargs, fn_name):
    if grad_position is None:
        return ()
    single = isinstance(grad_position, int)
    positions = (grad_position,) if single else tuple(grad_position)
    for p in positions:
        if not isinstance(p, int) or isinstance(p, bool):
            raise TypeError(f"{fn_name}: grad_position must be an int, a tuple of ints or None, "
                            f"got {grad_position!r}")
        if not -nargs <= p < nargs:
            raise IndexError(f"{fn_name}: grad_position {p} is out of range for {nargs} "
                             f"positional arguments")
    return tuple(p % nargs for p in positions)


def _weights_list(weights, fn_name):
    if weights is None:
        return ()
    if is_tensor(weights):
        return (weights,)
    try:
        weights = tuple(weights)
    except TypeError:
        raise TypeError(f"{fn_name}: weights must be a Parameter, a list/tuple of Parameters or "
                        f"a ParameterTuple, got {type(weights).__name__}") from None
    for w in weights:
        if not is_tensor(w):
            raise TypeError(f"{fn_name}: weights must hold Parameters, got {type(w).__name__}")
    return weights


def _outputs(out, has_aux, fn_name):
    """(tensors to differentiate, aux values) of fn's result."""
    if has_aux:
        if not isinstance(out, tuple) or len(out) < 2:
            raise TypeError(f"{fn_name}: with has_aux=True the function must return a tuple "
                            f"(loss, aux, ...), got {type(out).__name__}")
        return [out[0]], out[1:]
    flat = list(out) if isinstance(out, (tuple, list)) else [out]
    for o in flat:
        if not is_tensor(o):
            raise TypeError(f"{fn_name}: the function must return Tensors to differentiate, "
                            f"got {type(o).__name__}")
    return flat, ()


def _differentiate(fn, args, kwargs, positions, weights, has_aux, sens, fn_name):
    """Runs fn on a tape; returns (fn's output, gradients for positions, gradients for weights)."""
    if _graph_state.compiling():
        return _differentiate_in_graph(fn, args, kwargs, positions, weights, has_aux, sens, fn_name)
    args = list(args)
    for p in positions:
        if not is_tensor(args[p]):
            raise TypeError(f"{fn_name}: argument {p} must be a Tensor to take its gradient, "
                            f"got {type(args[p]).__name__}")
        # A fresh alias, through an op so enclosing tapes (grad of grad) see where it came from;
        # the same tensor passed at two positions then gets two gradients.
        args[p] = call("identity", (args[p],))
    tape = _C.Tape()
    sources = [args[p] for p in positions] + list(weights)
    hooks = _backward_hooks.begin(tape, sources)  # backward hooks made while fn runs
    try:
        with tape:
            for p in positions:
                tape.watch(args[p])
            for w in weights:
                tape.watch(w)
            out = fn(*args, **kwargs)
        targets, _ = _outputs(out, has_aux, fn_name)
        sens_list = [None] * len(targets)
        if sens is not None:
            sens_list = list(sens) if isinstance(sens, (tuple, list)) else [sens]
        if hooks.nodes or hooks.leaf_hooks:
            grads = _backward_hooks.gradient(hooks, targets, sens_list, sources)
        else:
            grads = tape.gradient(targets, sens_list, sources)
    finally:
        _backward_hooks.end(hooks)
    return out, grads[:len(positions)], grads[len(positions):]


def _differentiate_in_graph(fn, args, kwargs, positions, weights, has_aux, sens, fn_name):
    """Inside a function being compiled: fn's nodes are added to the graph, then its backward
    nodes, built by reverse-mode autodiff on the IR (csrc/autodiff) from the same rules."""
    emitter = _graph_state.emitter()
    args = list(args)
    for p in positions:
        if not is_tensor(args[p]):
            raise TypeError(f"{fn_name}: argument {p} must be a Tensor to take its gradient, "
                            f"got {type(args[p]).__name__}")
        args[p] = call("identity", (args[p],))
    sources = [args[p] for p in positions] + [emitter.to_graph(w, fn_name) for w in weights]
    mark = emitter.mark()
    hooks = _backward_hooks.begin_graph(emitter, sources)  # Cell backward hooks' cuts
    emitter.differentiating += 1  # index assignment then writes as one differentiable node
    try:
        out = fn(*args, **kwargs)
    finally:
        emitter.differentiating -= 1
        _backward_hooks.end_graph(hooks)
    targets, _ = _outputs(out, has_aux, fn_name)
    targets = [emitter.to_graph(t, fn_name) for t in targets]
    sens_list = [] if sens is None else (list(sens) if isinstance(sens, (tuple, list)) else [sens])
    sens_values = [emitter.to_graph(s, fn_name) for s in sens_list]
    if hooks.nodes:
        grads = _backward_hooks.graph_gradient(hooks, mark, targets, sens_values, sources)
    else:
        grads = emitter.gradient(mark, targets, sens_values, sources)
    return out, grads[:len(positions)], grads[len(positions):]


def _pack(pos_grads, weight_grads, grad_position, weights):
    single = isinstance(grad_position, int)
    pos = pos_grads[0] if single and pos_grads else tuple(pos_grads)
    if weights is None:
        return pos
    if grad_position is None:
        return tuple(weight_grads)
    return pos, tuple(weight_grads)


def grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False):
    """A function returning d fn / d (the inputs at grad_position, and weights).

    grad_position: int, tuple of ints, or None (then only weights). With has_aux, fn returns
    (loss, aux...) and the result is (gradients, (aux...)): the aux outputs as a tuple, even
    one, cut off from differentiation.
    """
    weight_list = _weights_list(weights, "grad")

    def grad_fn(*args, **kwargs):
        positions = _positions(grad_position, len(args), "grad")
        if not positions and not weight_list:
            raise ValueError("grad: grad_position is None and no weights were given")
        out, pg, wg = _differentiate(fn, args, kwargs, positions, weight_list, has_aux, None,
                                     "grad")
        grads = _pack(pg, wg, grad_position, weights)
        if has_aux:  # MindSpore: (gradients, (aux, ...)), the aux outputs always as a tuple
            return grads, stop_gradient(tuple(out[1:]))
        return grads

    return grad_fn


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False,
                   sens_param=False):
    """Like grad, but returns (fn's output, gradients); MindSpore's training idiom:
    ``grad_fn = value_and_grad(forward, None, optimizer.parameters)``. With sens_param the
    last argument is the gradient of the output to start from (not passed to fn)."""
    weight_list = _weights_list(weights, "value_and_grad")

    def value_and_grad_fn(*args, **kwargs):
        sens = None
        if sens_param:
            if not args:
                raise TypeError("value_and_grad: sens_param=True needs the sensitivity as the "
                                "last argument")
            args, sens = args[:-1], args[-1]
        positions = _positions(grad_position, len(args), "value_and_grad")
        if not positions and not weight_list:
            raise ValueError("value_and_grad: grad_position is None and no weights were given")
        out, pg, wg = _differentiate(fn, args, kwargs, positions, weight_list, has_aux, sens,
                                     "value_and_grad")
        return out, _pack(pg, wg, grad_position, weights)

    return value_and_grad_fn


class GradOperation:
    """MindSpore's GradOperation(get_all, get_by_list, sens_param): ``GradOperation(...)(fn,
    weights)`` returns the gradient function."""

    def __init__(self, get_all=False, get_by_list=False, sens_param=False):
        self.get_all, self.get_by_list, self.sens_param = get_all, get_by_list, sens_param

    def __call__(self, fn, weights=None):
        if self.get_by_list and weights is None:
            raise TypeError("GradOperation: get_by_list=True needs weights")
        weight_list = _weights_list(weights, "GradOperation") if self.get_by_list else ()

        def grad_fn(*args):
            sens = None
            if self.sens_param:
                args, sens = args[:-1], args[-1]
            positions = tuple(range(len(args))) if self.get_all else (0,) if args else ()
            positions = tuple(p for p in positions if is_tensor(args[p]))
            _, pg, wg = _differentiate(fn, args, {}, positions, weight_list, False, sens,
                                       "GradOperation")
            if self.get_by_list and not self.get_all:
                return tuple(wg)
            inputs = tuple(pg) if self.get_all else pg[0]
            return (inputs, tuple(wg)) if self.get_by_list else inputs

        return grad_fn
