"""The graph being built, if any: ops._core.call sends ops there instead of running them."""

builder = None  # a kiln.jit.frontend.GraphEmitter while a function is being compiled
converter = None  # the kiln.jit.convert.Converter of that compilation
graph_tensor_type = type(None)  # kiln.jit.graph_tensor.GraphTensor, set when it is imported
