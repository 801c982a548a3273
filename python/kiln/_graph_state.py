"""The graph being built, if any: ops._core.call sends ops there instead of running them."""

builder = None  # a kiln.jit.frontend.GraphEmitter while a function is being compiled
converter = None  # the kiln.jit.convert.Converter of that compilation
cell_epoch = 0  # bumped on every Cell attribute change: lets compile-cache guards skip re-reading
graph_tensor_type = type(None)  # kiln.jit.graph_tensor.GraphTensor, set when it is imported


class eager:  # noqa: N801 - used as `with _graph_state.eager():`
    """Runs ops eagerly even while a graph is being compiled (compile-time work such as
    initialising the Parameters of a Cell built inside a jitted function)."""

    def __enter__(self):
        global builder
        self.saved, builder = builder, None

    def __exit__(self, *exc):
        global builder
        builder = self.saved
