"""nn.GraphCell: runs a model that kiln.load read from a MindIR file, in either mode."""
from kiln import _C, _graph_state
from kiln.common.parameter import Parameter
from kiln.nn.cell import Cell


class LoadedGraph:
    """What kiln.load returns: a compiled graph with the weights it binds and its inputs'
    names, dtypes and shapes (-1 where any size is accepted). Run it through nn.GraphCell."""

    def __init__(self, file_name, executable, weights, weight_names, inputs):
        self.file_name = file_name
        self._executable = executable
        self._weights = weights
        self._weight_names = weight_names
        self.inputs = [(name, _dtype_of(enum), tuple(shape)) for name, enum, shape in inputs]

    def __repr__(self):
        return f"LoadedGraph({self.file_name!r}, inputs={self.inputs})"


def _dtype_of(enum):
    from kiln.common import dtype as mstype  # noqa: PLC0415 - dtype is a base module

    return mstype.from_enum(enum)


class GraphCell(Cell):
    """Runs a loaded graph: ``GraphCell(kiln.load("net.mindir"))(x)``.

    ``params_init`` maps weight names to new values (Tensors or arrays of the same shape and
    dtype); the graph's weights are the cell's Parameters, so ``parameters_dict()`` lists them.
    """

    def __init__(self, graph, params_init=None, obf_random_seed=None):
        super().__init__()
        if not isinstance(graph, LoadedGraph):
            raise TypeError(f"GraphCell: 'graph' must be what kiln.load returns, got "
                            f"{type(graph).__name__}")
        if obf_random_seed is not None:
            raise ValueError("GraphCell: obfuscated models are not supported")
        self.graph = graph
        self._graph_params = []
        for name, value in zip(graph._weight_names, graph._weights):
            param = Parameter(value, name=name)
            self._graph_params.append(param)
        for name, value in (params_init or {}).items():
            self._set_weight(name, value)

    def _check_inputs(self, inputs):
        expected = self.graph.inputs
        if len(inputs) != len(expected):
            raise TypeError(f"GraphCell: the loaded model takes {len(expected)} inputs, got "
                            f"{len(inputs)}")
        for value, (name, dtype, shape) in zip(inputs, expected):
            got_shape = tuple(getattr(value, "shape", ()))
            fits = len(got_shape) == len(shape) and all(
                want < 0 or want == got for want, got in zip(shape, got_shape))
            if getattr(value, "dtype", None) != dtype or not fits:
                raise TypeError(
                    f"GraphCell: input {name!r} of the loaded model is {dtype} of shape "
                    f"{tuple('?' if d < 0 else d for d in shape)}, got "
                    f"{getattr(value, 'dtype', type(value).__name__)} of shape {got_shape}")

    def _set_weight(self, name, value):
        for param in self._graph_params:
            if param.name == name:
                param.set_data(value)
                return
        raise ValueError(f"GraphCell: the graph has no weight named {name!r}")

    def parameters_dict(self, recurse=True):
        return {p.name: p for p in self._graph_params}

    def get_parameters(self, expand=True):
        return iter(self._graph_params)

    def trainable_params(self, recurse=True):
        return list(self._graph_params)

    def __call__(self, *inputs):
        return self.construct(*inputs)

    def construct(self, *inputs):
        emitter = _graph_state.emitter()
        if emitter is not None:  # called from compiled code: the loaded graph joins that graph
            self._check_inputs(inputs)
            return emitter.inline_model(self.graph._executable, inputs, list(self._graph_params))
        try:
            return self.graph._executable.call(list(inputs), self._graph_params, ())
        except _C.GraphRaise as e:
            raise RuntimeError(str(e)) from None
