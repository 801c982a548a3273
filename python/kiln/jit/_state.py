"""The graph being built, if any: ops._core.call sends ops there instead of running them."""

builder = None  # a kiln.jit.frontend.GraphEmitter while a function is being compiled
