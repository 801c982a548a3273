"""Declared inputs (Cell.set_inputs, jit's input_signature): the tensors a graph is compiled for,
a dimension declared None taking any size, and the check of each call against them."""
from kiln.common.tensor import Tensor


def check_signature(signature, where):
    """signature as a tuple of Tensors (jit's input_signature: a Tensor or a tuple or list)."""
    if signature is None:
        return None
    items = tuple(signature) if isinstance(signature, (tuple, list)) else (signature,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"{where}: input {i} must be a Tensor (Tensor(shape=[None, ...], dtype=...) for "
                f"dimensions of any size), got {type(t).__name__}"
            )
    return items


def dims_of(t):
    """A tensor's dimensions as declared: -1 where any size goes."""
    return tuple(getattr(t, "_declared_shape", t.shape))


def compile_args(declared, args, where):
    """The arguments to compile for: each declared tensor in the place of the call's, once the
    call's tensor is checked against it (dtype, rank, every fixed dimension); other arguments as
    the call passes them."""
    if len(declared) != len(args):
        raise ValueError(
            f"{where}: {len(declared)} inputs were declared, but the call passes {len(args)}"
        )
    out = []
    for i, (want, got) in enumerate(zip(declared, args)):
        if not isinstance(want, Tensor):
            out.append(got)
            continue
        if not isinstance(got, Tensor):
            raise TypeError(
                f"{where}: input {i} was declared a Tensor, but the call passes "
                f"{type(got).__name__}"
            )
        dims = dims_of(want)
        if got.dtype != want.dtype:
            raise TypeError(
                f"{where}: input {i} was declared {want.dtype}, but the call passes {got.dtype}"
            )
        fixed_mismatch = any(d >= 0 and d != g for d, g in zip(dims, got.shape))
        if len(dims) != len(got.shape) or fixed_mismatch:
            shown = tuple(None if d < 0 else d for d in dims)
            raise ValueError(
                f"{where}: input {i} has shape {tuple(got.shape)}, but the declared shape is "
                f"{shown} (None: any size)"
            )
        out.append(want)
    return tuple(out)
