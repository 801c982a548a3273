"""ops.Custom: a user's function as an op, MindSpore's "pyfunc" and "aot" kinds on the CPU.

- pyfunc: func(*NumPy arrays) -> array(s), run in Python (in compiled code, when the graph
  runs: a run-time interpreter node whose results out_shape/out_dtype declare).
- aot: "lib.so:func", a compiled C/C++ function with MindSpore's signature, run by the engine
  (ops/custom.cc). A ".cc"/".cpp" path is compiled first with g++, as MindSpore does.
out_shape/out_dtype are callables of the inputs' shapes/dtypes (or the values themselves);
bprop(*inputs, out, dout) -> (gradient per input,) makes it differentiable.
"""
import hashlib
import os
import shutil
import subprocess

import numpy as np

from kiln import _graph_state
from kiln.common import dtype as mstype
from kiln.ops._core import call, is_tensor
from kiln.ops.primitive import Primitive

__all__ = ["Custom"]

_SUPPORTED = ("pyfunc", "aot")
_NEEDS_OTHER_HARDWARE = ("akg", "tbe", "hybrid", "tik", "ascendc", "julia")


class Custom(Primitive):
    def __init__(self, func, out_shape=None, out_dtype=None, func_type="pyfunc", bprop=None,
                 reg_info=None):
        super().__init__("Custom")
        if func_type in _NEEDS_OTHER_HARDWARE:
            raise NotImplementedError(
                f"Custom: func_type='{func_type}' needs MindSpore's kernel compilers or an "
                f"accelerator; kiln runs func_type 'pyfunc' and 'aot' (a compiled C/C++ "
                f"function) on the CPU")
        if func_type not in _SUPPORTED:
            raise ValueError(f"Custom: func_type must be one of {_SUPPORTED}, got {func_type!r}")
        if out_shape is None or out_dtype is None:
            raise ValueError("Custom: kiln needs out_shape and out_dtype (the output's shape "
                             "and dtype, or functions computing them from the inputs')")
        if bprop is not None and not callable(bprop):
            raise TypeError(f"Custom: bprop must be a function, got {type(bprop).__name__}")
        self.func, self.func_type, self.bprop = func, func_type, bprop
        self.out_shape, self.out_dtype, self.reg_info = out_shape, out_dtype, reg_info
        if func_type == "pyfunc":
            if not callable(func):
                raise TypeError(f"Custom: a pyfunc func must be a Python function, got "
                                f"{type(func).__name__}")
        else:
            self.library, self.symbol = _aot_function(func)
        self.add_prim_attr("func_type", func_type)

    def __call__(self, *inputs):
        for i, x in enumerate(inputs):
            if not is_tensor(x):
                raise TypeError(f"Custom: input {i} must be a Tensor, got {type(x).__name__}")
        shapes, dtypes = self._declared(inputs)
        if self.func_type == "aot":
            packed = [v for s in shapes for v in (len(s), *s)]
            outs = call("custom_aot", tuple(inputs),
                        (self.library, self.symbol, tuple(packed),
                         tuple(int(d._enum.value) for d in dtypes)))
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        elif _graph_state.compiling():
            metas = [(d._enum, s) for s, d in zip(shapes, dtypes)]
            outs = _graph_state.emitter().run_declared(
                lambda *ts: self._run_pyfunc(ts, shapes, dtypes), inputs, metas,
                f"Custom({_name(self.func)})")
        else:
            outs = self._run_pyfunc(inputs, shapes, dtypes)
        single = len(outs) == 1
        if self.bprop is not None:
            outs = self._with_bprop(inputs, outs, single)
        return outs[0] if single else tuple(outs)

    def _declared(self, inputs):
        """([shape per output], [dtype per output]) from out_shape and out_dtype."""
        shape = self.out_shape(*[list(x.shape) for x in inputs]) if callable(self.out_shape) \
            else self.out_shape
        dtype = self.out_dtype(*[x.dtype for x in inputs]) if callable(self.out_dtype) \
            else self.out_dtype
        one = isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape)
        shapes = [tuple(shape)] if one else [tuple(s) for s in shape]
        dtypes = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype]
        if len(shapes) != len(dtypes):
            raise ValueError(f"Custom({_name(self.func)}): out_shape gives {len(shapes)} "
                             f"outputs, out_dtype {len(dtypes)}")
        for d in dtypes:
            if not isinstance(d, mstype.Type):
                raise TypeError(f"Custom({_name(self.func)}): out_dtype must give kiln dtypes, "
                                f"got {d!r}")
        return shapes, dtypes

    def _run_pyfunc(self, inputs, shapes, dtypes):
        from kiln.common._arrays import tensor_of  # noqa: PLC0415

        result = self.func(*[x.asnumpy() for x in inputs])
        results = list(result) if isinstance(result, (tuple, list)) and len(shapes) > 1 \
            else [result]
        if len(results) != len(shapes):
            raise ValueError(f"Custom({_name(self.func)}) returned {len(results)} outputs, "
                             f"out_shape declares {len(shapes)}")
        outs = []
        for i, (value, shape, dtype) in enumerate(zip(results, shapes, dtypes)):
            array = np.asarray(value.asnumpy() if is_tensor(value) else value,
                               mstype.dtype_to_nptype(dtype))
            if array.shape != tuple(shape):
                raise ValueError(f"Custom({_name(self.func)}): output {i} has shape "
                                 f"{array.shape}, out_shape declares {tuple(shape)}")
            outs.append(tensor_of(array))
        return outs

    def _with_bprop(self, inputs, outs, single):
        from kiln.ops import _backward_hooks  # noqa: PLC0415

        def backward(grads):
            out = outs[0] if single else tuple(outs)
            dout = grads[0] if single else tuple(grads)
            result = self.bprop(*inputs, out, dout)
            if not isinstance(result, (tuple, list)) or len(result) != len(inputs):
                raise TypeError(f"Custom({_name(self.func)}): bprop must return a tuple of "
                                f"{len(inputs)} gradient(s), one per input")
            return list(result)

        return _backward_hooks.replace_outputs(list(inputs), outs, backward)


def _name(func):
    return getattr(func, "__name__", None) or str(func)


def _aot_function(func):
    """(library path, symbol) of "path:symbol"; a C/C++ source path is compiled first."""
    if not isinstance(func, str) or ":" not in func:
        raise TypeError(f"Custom: an aot func is 'path/to/lib.so:function_name', got {func!r}")
    path, symbol = func.rsplit(":", 1)
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"Custom: '{path}' does not exist")
    if path.endswith((".cc", ".cpp")):
        path = _compile(path)
    return path, symbol


def _compile(source):
    """source compiled into a shared library under ./akg_kernel_meta (MindSpore's folder),
    named by the source's content, so an unchanged source is compiled once."""
    compiler = shutil.which("g++")
    if compiler is None:
        raise RuntimeError(f"Custom: compiling '{source}' needs g++, which is not installed")
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    folder = os.path.abspath("akg_kernel_meta")
    os.makedirs(folder, exist_ok=True)
    target = os.path.join(folder, f"{os.path.splitext(os.path.basename(source))[0]}_{digest}.so")
    if not os.path.exists(target):
        partial = f"{target}.{os.getpid()}.tmp"
        done = subprocess.run([compiler, "-std=c++17", "--shared", "-fPIC", "-O2",
                               f"-I{os.path.dirname(source)}", "-o", partial, source],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"Custom: compiling '{source}' failed:\n{done.stderr.strip()}")
        os.replace(partial, target)  # atomic: a concurrent compile never loads half a file
    return target
