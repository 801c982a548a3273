"""Writes the MindSpore-made checkpoint fixtures of kiln's interop tests (tests/fixtures/mindspore,
tests/python/test_checkpoint_interop.py): .ckpt and .safetensors files MindSpore 2.10 saves.

Runs under MindSpore, never kiln (a side venv: pip install mindspore==2.10.0 "numpy<2"):

    /path/to/ms-venv/bin/python tools/make_mindspore_ckpt_fixtures.py [OUT_DIR]

Files: ms_dtypes_values.npz (the values saved, bfloat16 as float32); ms_dtypes.ckpt (every
dtype and appended int/float/str); ms_dtypes_crc.ckpt (the same with crc_check=True);
ms_dtypes.safetensors (the tensors); ms_dtypes_crc.safetensors (all but bfloat16 and scalars,
with crc_check); for each optimizer of tools/_ckpt_cases.py, ms_train_<opt>.ckpt (a
TrainOneStepCell after STEPS_BEFORE steps) and ms_train_<opt>_next.npz (every parameter after
STEPS_AFTER more steps, the values a resumed run must reach).
"""
import pathlib
import sys

import _ckpt_cases as cases  # tools/_ckpt_cases.py
import mindspore as ms
import numpy as np
from mindspore import nn


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent /
                       "tests/fixtures/mindspore")
    out.mkdir(parents=True, exist_ok=True)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    tensors = cases.dtype_parameters(ms)
    np.savez(out / "ms_dtypes_values.npz", **cases.dtype_values())
    ms.save_checkpoint(tensors, str(out / "ms_dtypes.ckpt"), append_dict=dict(cases.APPENDED))
    ms.save_checkpoint(tensors, str(out / "ms_dtypes_crc.ckpt"),
                       append_dict=dict(cases.APPENDED), crc_check=True)
    ms.save_checkpoint(tensors, str(out / "ms_dtypes.safetensors"), format="safetensors")
    # MindSpore's safetensors CRC takes bytes() of each NumPy array: that fails for bfloat16,
    # and for a scalar it is bytes(<the value>), not the value's bytes. Neither is in this file.
    plain = {k: v for k, v in tensors.items() if k != "bfloat16" and v.shape}
    ms.save_checkpoint(plain, str(out / "ms_dtypes_crc.safetensors"), format="safetensors",
                       crc_check=True)
    for name in cases.OPTIMIZERS:
        step = cases.train_net(ms, nn, name)
        cases.run_steps(ms, step, cases.STEPS_BEFORE)
        ms.save_checkpoint(step, str(out / f"ms_train_{name}.ckpt"))
        cases.run_steps(ms, step, cases.STEPS_AFTER)
        np.savez(out / f"ms_train_{name}_next.npz", **cases.state_of(step))
    for f in sorted(out.glob("ms_*")):
        print(f"{f.name}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
