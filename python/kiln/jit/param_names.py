"""One name per Parameter in a compiled call: two different Parameters a graph takes (its
arguments and the weights it reads from Cells and globals) may not share a name, as in
MindSpore, since checkpoints, optimizers and the graph's signature identify weights by name."""

from kiln.common.parameter import Parameter


def argument_parameters(args, kwargs):
    """(where, Parameter) for every Parameter inside the call's arguments."""
    found = []
    for i, value in enumerate(args):
        _collect(value, f"argument {i}", found)
    for key, value in kwargs.items():
        _collect(value, f"argument {key!r}", found)
    return found


def _collect(value, where, found):
    if isinstance(value, Parameter):
        found.append((where, value))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _collect(v, f"{where}[{i}]", found)
    elif isinstance(value, dict):
        for k, v in value.items():
            _collect(v, f"{where}[{k!r}]", found)


def check_unique(function_name, arguments, weights, cell=None):
    """Raises when two different Parameters of one call share a name.

    Weights (the Parameters the graph reads) are told apart by their path in the compiled Cell
    where they have one (`self.a` and `self.b` may both be named "w": MindSpore renames such
    Parameters by path when the Cell is first called), else by name (globals, Parameters in
    plain lists or tuples, other Cells' Parameters): a clash is a RuntimeError. An argument
    Parameter named like another argument or a weight is a ValueError."""
    paths = {}
    if cell is not None and hasattr(cell, "parameters_and_names"):
        paths = {id(p): path for path, p in cell.parameters_and_names()}
    weights = [w for w in weights if isinstance(w, Parameter)]
    by_key, by_name = {}, {}
    for w in weights:
        _claim(function_name, by_key, paths.get(id(w), w.name), "a weight the graph reads", w,
               RuntimeError)
        by_name.setdefault(w.name, ("a weight the graph reads", w))
    for where, param in arguments:
        _claim(function_name, by_name, param.name, where, param, ValueError)


def _claim(function_name, taken, key, where, param, error):
    first_where, first = taken.setdefault(key, (where, param))
    if first is param:
        return
    raise error(
        f"{function_name}: two different Parameters in one compiled call are named "
        f"'{param.name}' ({first_where} and {where}): its name '{param.name}' already exists. "
        f"Give each Parameter a unique name (Parameter(..., name=...)); a graph, its "
        f"checkpoints and optimizers tell weights apart by name")
