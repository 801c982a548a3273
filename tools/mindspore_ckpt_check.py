"""Checks that MindSpore 2.10 loads kiln's checkpoints (docs/checkpoints.md, "MindSpore loads
kiln's files"): every dtype in both layouts, and training resumed from kiln's optimizer state.

Two steps in two environments, since kiln and MindSpore are never installed together:

    PYTHONPATH=build/dev/python python tools/mindspore_ckpt_check.py --write DIR      # kiln
    /path/to/ms-venv/bin/python tools/mindspore_ckpt_check.py --check DIR              # MindSpore

--write saves, with kiln, the cases of tools/_ckpt_cases.py: the values of every dtype (.ckpt
with appended int/float/str, with and without CRC; .safetensors, with and without CRC) and, per
optimizer, a TrainOneStepCell after STEPS_BEFORE steps (.ckpt and .safetensors) with the state
kiln reaches STEPS_AFTER steps later. --check loads each file with MindSpore, compares the
values, loads the train checkpoints into MindSpore's own TrainOneStepCell (nothing may be left
unloaded either way), trains STEPS_AFTER steps and compares with kiln's state.
"""
import pathlib
import sys

import _ckpt_cases as cases  # tools/_ckpt_cases.py
import numpy as np


def write(out):
    import kiln as ms  # noqa: PLC0415 - only this step runs under kiln
    from kiln import nn  # noqa: PLC0415

    out.mkdir(parents=True, exist_ok=True)
    params = cases.dtype_parameters(ms)
    np.savez(out / "kiln_dtypes_values.npz", **cases.dtype_values())
    appended = dict(cases.APPENDED)
    ms.save_checkpoint(params, str(out / "kiln_dtypes.ckpt"), append_dict=appended)
    ms.save_checkpoint(params, str(out / "kiln_dtypes_crc.ckpt"), append_dict=appended,
                       crc_check=True)
    ms.save_checkpoint(params, str(out / "kiln_dtypes.safetensors"), format="safetensors")
    # MindSpore's safetensors CRC cannot read bfloat16 or scalars (tools/make_mindspore_ckpt_
    # fixtures.py says why): the CRC file holds the other tensors.
    plain = {k: v for k, v in params.items() if k != "bfloat16" and v.shape}
    ms.save_checkpoint(plain, str(out / "kiln_dtypes_crc.safetensors"), format="safetensors",
                       crc_check=True)
    for name in cases.OPTIMIZERS:
        step = cases.train_net(ms, nn, name)
        cases.run_steps(ms, step, cases.STEPS_BEFORE)
        ms.save_checkpoint(step, str(out / f"kiln_train_{name}.ckpt"))
        ms.save_checkpoint(step, str(out / f"kiln_train_{name}.safetensors"), format="safetensors")
        cases.run_steps(ms, step, cases.STEPS_AFTER)
        np.savez(out / f"kiln_train_{name}_next.npz", **cases.state_of(step))
    print(f"wrote {len(list(out.iterdir()))} files to {out}")


def _check_values(ms, params, expected, names):
    for name in names:
        p = params[name]
        want = expected[name]
        assert str(p.dtype) == str(getattr(ms, cases.DTYPES[name][1])), (name, p.dtype)
        got = p.float().asnumpy() if name == "bfloat16" else p.asnumpy()
        assert got.shape == want.shape and np.array_equal(got.astype(want.dtype), want), name


def check(out):
    import mindspore as ms  # noqa: PLC0415 - only this step runs under MindSpore
    from mindspore import nn  # noqa: PLC0415

    ms.set_context(mode=ms.PYNATIVE_MODE)
    expected = dict(np.load(out / "kiln_dtypes_values.npz"))
    for fname in ("kiln_dtypes.ckpt", "kiln_dtypes_crc.ckpt"):
        params = ms.load_checkpoint(str(out / fname), crc_check="crc" in fname)
        _check_values(ms, params, expected, cases.DTYPES)
        assert params["note"] == cases.APPENDED["note"], params["note"]
        assert int(params["epoch_num"].asnumpy()) == cases.APPENDED["epoch_num"]
        print(f"ok  {fname}: {len(params)} entries, every dtype, appended int/float/str")
    for fname in ("kiln_dtypes.safetensors", "kiln_dtypes_crc.safetensors"):
        params = ms.load_checkpoint(str(out / fname), format="safetensors",
                                    crc_check="crc" in fname)
        _check_values(ms, params, expected, params)
        print(f"ok  {fname}: {len(params)} tensors")
    for mode, mode_name in ((ms.PYNATIVE_MODE, "PyNative"), (ms.GRAPH_MODE, "Graph")):
        ms.set_context(mode=mode)
        for name in cases.OPTIMIZERS:
            for fmt in ("ckpt", "safetensors"):
                _check_resume(ms, nn, out, name, fmt)
            print(f"ok  kiln_train_{name}.ckpt/.safetensors, {mode_name}: nothing unloaded, "
                  f"{cases.STEPS_AFTER} more steps match kiln's")


def _check_resume(ms, nn, out, name, fmt):
    step = cases.train_net(ms, nn, name)
    params = ms.load_checkpoint(str(out / f"kiln_train_{name}.{fmt}"), format=fmt)
    not_loaded, unused = ms.load_param_into_net(step, params)
    assert not_loaded == [] and unused == [], (name, fmt, not_loaded, unused)
    cases.run_steps(ms, step, cases.STEPS_AFTER)
    want = np.load(out / f"kiln_train_{name}_next.npz")
    state = cases.state_of(step)
    assert sorted(state) == sorted(want.files), (name, sorted(state), sorted(want.files))
    for key in want.files:
        np.testing.assert_allclose(state[key], want[key], rtol=2e-5, atol=1e-6,
                                   err_msg=f"{name} {fmt}: {key}")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("--write", "--check"):
        sys.exit(__doc__)
    (write if sys.argv[1] == "--write" else check)(pathlib.Path(sys.argv[2]))


if __name__ == "__main__":
    main()
