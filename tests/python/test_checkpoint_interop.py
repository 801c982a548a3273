"""Checkpoints that move between kiln and MindSpore: MindSpore's .ckpt layout and safetensors,
every dtype, optimizer state under MindSpore's names, resumed training, damaged files."""
import pathlib
import struct
import sys
import warnings

import numpy as np
import pytest

import kiln as ms
from kiln import _C, nn
from kiln.train import _ckpt_codecs, serialization

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/fixtures/mindspore"
sys.path.insert(0, str(ROOT / "tools"))
import _ckpt_cases as cases  # noqa: E402  (tools/_ckpt_cases.py: shared with MindSpore's side)

EXPECTED = dict(np.load(FIXTURES / "ms_dtypes_values.npz"))


def check_dtype_values(params, names):
    for name in names:
        p = params[name]
        assert str(p.dtype) == str(getattr(ms, cases.DTYPES[name][1])), name
        assert p.shape == EXPECTED[name].shape, name
        np.testing.assert_array_equal(p.asnumpy().astype(EXPECTED[name].dtype), EXPECTED[name],
                                      err_msg=name)


# ---- MindSpore's files load in kiln ----

@pytest.mark.parametrize("name", ["ms_dtypes.ckpt", "ms_dtypes_crc.ckpt"])
def test_mindspore_ckpt_every_dtype_and_appended_values(name):
    params = ms.load_checkpoint(str(FIXTURES / name), crc_check="crc" in name)
    assert list(params) == list(cases.DTYPES) + list(cases.APPENDED)
    check_dtype_values(params, cases.DTYPES)
    assert str(params["epoch_num"].dtype) == "Int64" and params["epoch_num"].asnumpy() == 7
    assert str(params["lr_now"].dtype) == "Float32" and params["lr_now"].asnumpy() == 0.25
    assert params["note"] == cases.APPENDED["note"]   # a str comes back as a str


def test_mindspore_safetensors_every_dtype():
    params = ms.load_checkpoint(str(FIXTURES / "ms_dtypes.safetensors"), format="safetensors")
    assert sorted(params) == sorted(cases.DTYPES)
    check_dtype_values(params, cases.DTYPES)
    crc = ms.load_checkpoint(str(FIXTURES / "ms_dtypes_crc.safetensors"), format="safetensors",
                             crc_check=True)
    check_dtype_values(crc, crc)


def test_kiln_writes_the_bytes_mindspore_writes(tmp_path):
    # Same values, names and order: the very bytes MindSpore 2.10 wrote (with and without CRC).
    params = cases.dtype_parameters(ms)
    for crc, fixture in [(False, "ms_dtypes.ckpt"), (True, "ms_dtypes_crc.ckpt")]:
        path = tmp_path / f"k{crc}.ckpt"
        ms.save_checkpoint(params, str(path), append_dict=dict(cases.APPENDED), crc_check=crc)
        assert path.read_bytes() == (FIXTURES / fixture).read_bytes()


# ---- kiln's files, both layouts ----

@pytest.mark.parametrize("fmt", ["ckpt", "safetensors"])
def test_every_dtype_round_trips(tmp_path, fmt):
    path = str(tmp_path / f"all.{fmt}")
    ms.save_checkpoint(cases.dtype_parameters(ms), path, format=fmt, crc_check=True)
    params = ms.load_checkpoint(path, format=fmt, crc_check=True)
    check_dtype_values(params, cases.DTYPES)


def test_safetensors_is_a_real_safetensors_file(tmp_path):
    path = tmp_path / "net.safetensors"
    ms.save_checkpoint(cases.dtype_parameters(ms), str(tmp_path / "net"), format="safetensors")
    raw = dict(_ckpt_codecs.safetensors.deserialize(path.read_bytes()))
    assert raw["bfloat16"]["dtype"] == "BF16" and raw["bool"]["dtype"] == "BOOL"
    np.testing.assert_array_equal(np.frombuffer(raw["float32"]["data"], np.float32).reshape(
        raw["float32"]["shape"]), EXPECTED["float32"])


def test_a_safetensors_file_read_as_ckpt_says_which_format(tmp_path):
    path = str(tmp_path / "w.safetensors")
    ms.save_checkpoint({"w": ms.Parameter(ms.Tensor([1.0]), name="w")}, path,
                       format="safetensors")
    with pytest.raises(serialization.CheckpointError, match="pass format='safetensors'"):
        ms.load_checkpoint(path)


def test_str_values_need_the_ckpt_layout(tmp_path):
    with pytest.raises(TypeError, match="'note' is a str"):
        ms.save_checkpoint({}, str(tmp_path / "x.safetensors"), format="safetensors",
                           append_dict={"note": "text"})


# ---- optimizer state under MindSpore's names; training resumes exactly ----

@pytest.fixture(params=["pynative", "graph"])
def mode(request):
    ms.set_context(mode=ms.GRAPH_MODE if request.param == "graph" else ms.PYNATIVE_MODE)
    return request.param


@pytest.mark.parametrize("optimizer", list(cases.OPTIMIZERS))
def test_training_resumes_from_a_mindspore_checkpoint(optimizer, mode):
    step = cases.train_net(ms, nn, optimizer)
    param_dict = ms.load_checkpoint(str(FIXTURES / f"ms_train_{optimizer}.ckpt"))
    not_loaded, unused = ms.load_param_into_net(step, param_dict)
    assert not_loaded == [] and unused == []
    cases.run_steps(ms, step, cases.STEPS_AFTER)
    expected = np.load(FIXTURES / f"ms_train_{optimizer}_next.npz")
    state = cases.state_of(step)
    assert sorted(state) == sorted(expected.files)
    for name in expected.files:
        np.testing.assert_allclose(state[name], expected[name], rtol=2e-5, atol=1e-6,
                                   err_msg=f"{optimizer}: {name}")


@pytest.mark.parametrize("optimizer", list(cases.OPTIMIZERS))
@pytest.mark.parametrize("fmt", ["ckpt", "safetensors"])
def test_training_resumes_exactly_from_kilns_checkpoint(tmp_path, optimizer, fmt):
    straight = cases.train_net(ms, nn, optimizer)
    cases.run_steps(ms, straight, cases.STEPS_BEFORE + cases.STEPS_AFTER)
    first = cases.train_net(ms, nn, optimizer)
    cases.run_steps(ms, first, cases.STEPS_BEFORE)
    path = str(tmp_path / f"step.{fmt}")
    ms.save_checkpoint(first, path, format=fmt)
    resumed = cases.train_net(ms, nn, optimizer)
    not_loaded, unused = ms.load_param_into_net(resumed, ms.load_checkpoint(path, format=fmt))
    assert not_loaded == [] and unused == []
    cases.run_steps(ms, resumed, cases.STEPS_AFTER)
    want = cases.state_of(straight)
    for name, value in cases.state_of(resumed).items():
        np.testing.assert_array_equal(value, want[name], err_msg=f"{optimizer}: {name}")


def test_optimizer_state_names_are_mindsporess():
    names = {p.name for _, p in cases.train_net(ms, nn, "sgd").parameters_and_names()}
    assert {"momentum", "global_step", "learning_rate", "stat.fc1.weight",
            "accum.fc2.bias"} <= names
    names = {p.name for _, p in cases.train_net(ms, nn, "adam").parameters_and_names()}
    assert {"beta1_power", "beta2_power", "moment1.fc1.weight", "moment2.fc2.bias"} <= names
    names = {p.name for _, p in cases.train_net(ms, nn, "adamweightdecay").parameters_and_names()}
    assert {"adam_m.fc1.weight", "adam_v.fc2.bias"} <= names


# ---- arguments as MindSpore's ----

def test_filters_choice_func_and_append_dict(tmp_path):
    path = str(tmp_path / "f.ckpt")
    ms.save_checkpoint(cases.dtype_parameters(ms), path, append_dict={"x": 1},
                       choice_func=lambda n: n.startswith("int"))
    # choice_func filters the saved object, never append_dict
    assert list(ms.load_checkpoint(path)) == ["int8", "int16", "int32", "int64", "x"]
    assert list(ms.load_checkpoint(path, specify_prefix=["int1", "int3"])) == ["int16", "int32"]
    assert list(ms.load_checkpoint(path, filter_prefix="int")) == ["x"]
    # choice_func only applies when neither prefix is given (MindSpore's rule)
    assert list(ms.load_checkpoint(path, filter_prefix="x",
                                   choice_func=lambda n: False)) == ["int8", "int16", "int32",
                                                                     "int64"]
    with pytest.raises(ValueError, match="empty after filtering"):
        ms.load_checkpoint(path, choice_func=lambda n: False)
    with pytest.raises(ValueError, match="cannot include ''"):
        ms.load_checkpoint(path, specify_prefix=["a", ""])
    with pytest.raises(ValueError, match="empty list"):
        ms.load_checkpoint(path, filter_prefix=[])
    with pytest.raises(TypeError, match="filter_prefix"):
        ms.load_checkpoint(path, filter_prefix=3)


def test_a_list_of_parameters_and_the_format_suffix(tmp_path):
    step = cases.train_net(ms, nn, "momentum")
    ms.save_checkpoint(step.trainable_params(), str(tmp_path / "p"))
    assert sorted(ms.load_checkpoint(str(tmp_path / "p.ckpt"))) == sorted(
        p.name for p in step.trainable_params())
    ms.save_checkpoint(step, str(tmp_path / "q"), format="safetensors")
    assert (tmp_path / "q.safetensors").exists()


def test_refused_arguments_are_clear(tmp_path):
    path = str(tmp_path / "x.ckpt")
    ms.save_checkpoint({"a": ms.Parameter(ms.Tensor([1.0]), name="a")}, path)
    with pytest.raises(ValueError, match="encrypted checkpoints .dec_key. are not supported"):
        ms.load_checkpoint(path, dec_key=b"0123456789abcdef")
    with pytest.raises(TypeError, match="dec_key"):
        ms.load_checkpoint(path, dec_key="text")
    with pytest.raises(ValueError, match="enc_key"):
        ms.save_checkpoint({}, path, enc_key=b"0123456789abcdef")
    with pytest.raises(ValueError, match="format must be"):
        ms.save_checkpoint({}, path, format="npz")
    with pytest.raises(ValueError, match="format must be"):
        ms.load_checkpoint(path, format="pickle")
    with pytest.raises(ValueError, match="async_save"):
        ms.save_checkpoint({}, path, async_save="later")
    with pytest.raises(ValueError, match="does not exist"):   # ValueError, as MindSpore
        ms.load_checkpoint(str(tmp_path / "missing.ckpt"))
    with pytest.raises(FileNotFoundError):                   # and what kiln raised before
        ms.load_checkpoint(str(tmp_path / "missing.ckpt"))


def test_crc_check_warns_when_a_file_has_none(tmp_path):
    path = str(tmp_path / "x.ckpt")
    ms.save_checkpoint({"a": ms.Parameter(ms.Tensor([1.0]), name="a")}, path)
    with pytest.warns(UserWarning, match="no crc_num"):
        ms.load_checkpoint(path, crc_check=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ms.load_checkpoint(path)


def test_load_param_into_net_converts_as_mindspore():
    net = nn.Dense(2, 2)
    half = {"weight": ms.Parameter(ms.Tensor(np.ones((2, 2), np.float16)), name="weight"),
            "bias": ms.Parameter(ms.Tensor(np.ones((2, 1, 1), np.float32)), name="bias")}
    assert ms.load_param_into_net(net, half) == ([], [])   # float16 -> float32, (2,1,1) -> (2,)
    assert str(net.weight.dtype) == "Float32" and net.bias.shape == (2,)
    with pytest.raises(RuntimeError, match="Float32 in the network but Float16"):
        ms.load_param_into_net(net, half, strict_load=True)
    ints = {"weight": ms.Parameter(ms.Tensor(np.ones((2, 2), np.int32)), name="weight")}
    with pytest.raises(RuntimeError, match="Int32"):
        ms.load_param_into_net(net, ints)
    with pytest.raises(RuntimeError, match="shape"):
        ms.load_param_into_net(net, {"weight": ms.Parameter(ms.Tensor(np.ones(3, np.float32)),
                                                            name="weight")})


def test_load_param_into_net_finds_a_common_prefix():
    step = cases.train_net(ms, nn, "momentum")
    prefixed = {"network." + p.name: p for p in step.trainable_params()}
    net = cases.train_net(ms, nn, "momentum").network._backbone
    not_loaded, unused = ms.load_param_into_net(net, prefixed)
    assert not_loaded == [] and unused == []
    with pytest.warns(UserWarning, match="not in the checkpoint"):
        not_loaded, _ = ms.load_param_into_net(net, prefixed, strict_load=True)
    assert len(not_loaded) == 4
    # a str entry named like a parameter is skipped, as MindSpore skips it: neither loaded nor
    # reported missing, and left in ckpt_not_load
    with pytest.warns(UserWarning, match="fc2.weight"):
        not_loaded, unused = ms.load_param_into_net(net, {"fc1.weight": "text"})
    assert "fc1.weight" not in not_loaded and unused == ["fc1.weight"]


# ---- damaged files: one exception type, naming the file and the problem ----

def entry(name, values=(1.0, 2.0)):
    data = np.array(values, np.float32).tobytes()
    return _C.ckpt_serialize_entry(name, "Float32", [len(values)], data)


@pytest.mark.parametrize("blob, why", [
    (b"", "empty"),
    (b"\x00" * 40, "not a checkpoint"),
    (entry("a") + b"\x00\x00", "not a MindSpore checkpoint"),
    (entry("a")[:-3], "truncated"),
    (entry("a") + entry("b") + entry("a"), "'a' appears twice"),
    (entry("a").replace(b"Float32", b"Float99"), "Float99"),
    (entry("a") + b"crc_num" + (12345).to_bytes(10, "big"), "CRC32"),
    (_C.ckpt_serialize_entry("s", "str", [0], b"\xff\xff\xff\xff"), "not valid UTF-32"),
    (_C.ckpt_serialize_entry("s", "str", [0], b"\x00\xd8\x00\x00"), "not valid UTF-32"),
])
def test_damaged_ckpt_files(tmp_path, blob, why):
    path = tmp_path / "damaged.ckpt"
    path.write_bytes(blob)
    with pytest.raises(serialization.CheckpointError, match=f"damaged.ckpt.*{why}"):
        ms.load_checkpoint(str(path))


def safetensors_blob(header, data=b""):
    head = header.encode()
    return struct.pack("<Q", len(head)) + head + data


@pytest.mark.parametrize("blob, why", [
    (b"", "safetensors"),
    (b"\x05\x00\x00\x00\x00\x00\x00\x00{]", "safetensors"),
    (safetensors_blob('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', b"1234"),
     "safetensors"),
    (safetensors_blob('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                      '"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
     "'a' appears twice"),
    (safetensors_blob('{"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}', b"x"),
     "F8_E4M3"),
])
def test_damaged_safetensors_files(tmp_path, blob, why):
    path = tmp_path / "damaged.safetensors"
    path.write_bytes(blob)
    with pytest.raises(serialization.CheckpointError, match=f"damaged.safetensors.*{why}"):
        ms.load_checkpoint(str(path), format="safetensors")


def test_a_failed_safetensors_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "m.safetensors"
    ms.save_checkpoint({"x": ms.Parameter(ms.Tensor([1.0]), name="x")}, str(path),
                       format="safetensors")
    before = path.read_bytes()

    def boom(f, entries, crc_check):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(_ckpt_codecs, "write_safetensors", boom)
    with pytest.raises(OSError, match="disk full"):
        ms.save_checkpoint({"x": ms.Parameter(ms.Tensor([2.0]), name="x")}, str(path),
                           format="safetensors")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


# ---- ckpt_to_safetensors / safetensors_to_ckpt ----

def test_converting_a_file_both_ways(tmp_path):
    src = tmp_path / "adam.ckpt"
    src.write_bytes((FIXTURES / "ms_train_adam.ckpt").read_bytes())
    ms.ckpt_to_safetensors(str(src))                       # beside the file
    back_dir = tmp_path / "back"
    ms.safetensors_to_ckpt(str(tmp_path / "adam.safetensors"), str(back_dir),
                           name_map={"fc1.weight": "encoder.weight"})
    original = ms.load_checkpoint(str(src))
    back = ms.load_checkpoint(str(back_dir / "adam.ckpt"))
    assert sorted(back) == sorted(["encoder.weight"] + [k for k in original if k != "fc1.weight"])
    np.testing.assert_array_equal(back["encoder.weight"].asnumpy(),
                                  original["fc1.weight"].asnumpy())
    for name in original:
        if name != "fc1.weight":
            np.testing.assert_array_equal(back[name].asnumpy(), original[name].asnumpy())


def test_converting_the_rank_folders_of_a_directory(tmp_path):
    for rank in ("rank0", "rank1"):
        (tmp_path / "src" / rank).mkdir(parents=True)
        for opt in ("sgd", "momentum"):
            (tmp_path / "src" / rank / f"{opt}.ckpt").write_bytes(
                (FIXTURES / f"ms_train_{opt}.ckpt").read_bytes())
    ms.ckpt_to_safetensors(str(tmp_path / "src"), str(tmp_path / "out"), file_name_regex="sgd")
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.*")
                  ) == ["rank0/sgd.safetensors", "rank1/sgd.safetensors"]
    with pytest.raises(ValueError, match="no directories starting with 'rank'"):
        ms.ckpt_to_safetensors(str(tmp_path / "out" / "rank0"))
    with pytest.raises(ValueError, match="must be a .ckpt file"):
        ms.ckpt_to_safetensors(str(tmp_path / "out" / "rank0" / "sgd.safetensors"))
    with pytest.raises(ValueError, match="save_path must be a directory"):
        ms.ckpt_to_safetensors(str(tmp_path / "src"), "x.ckpt")
    with pytest.raises(ValueError, match="valid path"):
        ms.safetensors_to_ckpt(str(tmp_path / "nowhere"))
