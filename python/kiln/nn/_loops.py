"""Control flow for kiln's own layers: while_loop(cond, body, values) and run_if(pred, fn). In
PyNative they are Python's loop and if; while a graph compiles they become one `while` or `if`
node of the graph (library code runs as is on graph values, so a plain `while`/`if` on a tensor
there could not become graph control flow). The loop's reverse mode comes from the graph
while's gradient (docs/graph_mode.md, "Gradients in Graph mode")."""
from kiln import _graph_state
from kiln.jit.conditions import scalar_bool


def while_loop(cond, body, values):
    """Runs values = body(*values) while cond(*values); returns the final tuple. Each value
    is a Tensor that keeps its dtype and shape from one iteration to the next."""
    values = tuple(values)
    emitter = _graph_state.emitter()
    if emitter is None:
        while bool(cond(*values)):
            values = tuple(body(*values))
        return values
    init = [emitter.to_graph(v, "while_loop") for v in values]
    metas = [(v._dtype, list(v.shape)) for v in init]
    group = emitter.new_group()
    params = emitter.begin_region(group, "while_cond", metas)
    test = scalar_bool(emitter.to_graph(cond(*params), "while_loop"))
    emitter.end_region([test.handle])
    params = emitter.begin_region(group, "while_body", metas)
    results = [emitter.to_graph(v, "while_loop") for v in body(*params)]
    for before, after in zip(init, results):
        if after._dtype != before._dtype or after.shape != before.shape:
            raise TypeError(f"while_loop: a carried value is {before.dtype}"
                            f"{list(before.shape)} before the loop and {after.dtype}"
                            f"{list(after.shape)} after an iteration; both must agree")
    emitter.end_region([r.handle for r in results])
    return tuple(emitter.while_(init, group))



def run_if(pred, fn):
    """Calls fn() (for its side effects: assignments to Parameters) when the 0-d bool tensor
    pred holds; in compiled code a graph `if` whose then-branch is fn's nodes."""
    emitter = _graph_state.emitter()
    if emitter is None:
        if bool(pred):
            fn()
        return
    test = scalar_bool(emitter.to_graph(pred, "run_if"))
    group = emitter.new_group()
    emitter.begin_region(group, "if_then")
    fn()
    emitter.end_region([])
    emitter.begin_region(group, "if_else")
    emitter.end_region([])
    emitter.if_(test, group)
