"""Checkpoints: round trip, dtypes, atomic writes, truncation/corruption/mismatch errors; files
in kiln's earlier format ("KILNCKPT", still loaded). MindSpore's: test_checkpoint_interop.py."""
import os
import struct
import zlib

import numpy as np
import pytest

import kiln as ms
from kiln import Parameter, Tensor, nn
from kiln.train import _ckpt_codecs, _kiln_ckpt, serialization


class Net(nn.Cell):
    def __init__(self, hidden=4):
        super().__init__()
        self.fc1 = nn.Dense(3, hidden)
        self.bn = nn.BatchNorm1d(hidden)
        self.fc2 = nn.Dense(hidden, 2)

    def construct(self, x):
        return self.fc2(self.bn(self.fc1(x)))


def values(net):
    return {p.name: p.asnumpy().copy() for p in net.get_parameters()}


def test_round_trip_into_a_fresh_network(tmp_path):
    ms.set_seed(1)
    src = Net()
    path = str(tmp_path / "net.ckpt")
    ms.save_checkpoint(src, path)
    ms.set_seed(2)
    dst = Net()
    ids = [id(p) for p in dst.get_parameters()]
    params = ms.load_checkpoint(path)
    assert list(params) == [p.name for p in src.get_parameters()]
    assert all(isinstance(v, Parameter) and v.name == k for k, v in params.items())
    not_loaded, unused = ms.load_param_into_net(dst, params)
    assert not_loaded == [] and unused == []
    assert [id(p) for p in dst.get_parameters()] == ids      # loaded in place
    for name, value in values(src).items():
        np.testing.assert_array_equal(values(dst)[name], value)
    x = Tensor(np.ones((5, 3), np.float32))
    np.testing.assert_array_equal(src(x).asnumpy(), dst(x).asnumpy())


def test_load_checkpoint_with_net_and_suffix(tmp_path):
    src = Net()
    ms.save_checkpoint(src, str(tmp_path / "model"))       # MindSpore appends ".ckpt"
    assert os.path.exists(tmp_path / "model.ckpt")
    dst = Net()
    ms.load_checkpoint(str(tmp_path / "model.ckpt"), net=dst)
    np.testing.assert_array_equal(dst.fc1.weight.asnumpy(), src.fc1.weight.asnumpy())
    assert list(ms.load_checkpoint(tmp_path / "model")) == list(values(src))


@pytest.mark.parametrize("dtype,np_dtype", [
    (ms.float32, np.float32), (ms.float64, np.float64), (ms.float16, np.float16),
    (ms.int32, np.int32), (ms.int64, np.int64), (ms.int8, np.int8), (ms.uint8, np.uint8),
    (ms.bool_, np.bool_), (ms.bfloat16, np.float32), (ms.int16, np.int16),
    (ms.uint16, np.uint16), (ms.uint32, np.uint32), (ms.uint64, np.uint64),
])
def test_every_dtype_round_trips(tmp_path, dtype, np_dtype):
    arr = (np.arange(12).reshape(3, 4) % 5).astype(np_dtype)
    path = str(tmp_path / "d.ckpt")
    ms.save_checkpoint({"x": Tensor(arr, dtype), "scalar": Tensor(np.array(3, np_dtype), dtype)},
                       path)
    loaded = ms.load_checkpoint(path)
    assert loaded["x"].dtype == dtype and loaded["x"].shape == (3, 4)
    np.testing.assert_array_equal(loaded["x"].asnumpy(), arr)
    assert loaded["scalar"].shape == ()


# Written by kiln before uint16/uint32/uint64 existed: {"w": int32 [1, -2, 3], "u": uint8 [255],
# "h": float16 [0.5]}. Adding dtypes must leave such files loadable.
OLD_FILE = bytes.fromhex(
    "4b494c4e434b505401000000030000008e00000000000000010000007705696e7433320100000003000000"
    "000000000c0000000000000001000000feffffff0300000001000000750575696e74380100000001000000"
    "000000000100000000000000ff010000006807666c6f61743136010000000100000000000000020000000000"
    "000000387f3aae174b454e44")


def test_files_from_before_the_unsigned_dtypes_still_load(tmp_path):
    path = tmp_path / "old.ckpt"
    path.write_bytes(OLD_FILE)
    loaded = ms.load_checkpoint(str(path))
    assert list(loaded) == ["w", "u", "h"]
    assert [t.dtype for t in loaded.values()] == [ms.int32, ms.uint8, ms.float16]
    assert loaded["w"].asnumpy().tolist() == [1, -2, 3]
    assert loaded["u"].asnumpy().tolist() == [255]
    assert loaded["h"].asnumpy().tolist() == [0.5]


def test_unsigned_values_past_the_signed_range_round_trip(tmp_path):
    values = {"a": np.array([0, 2**63, 2**64 - 1], np.uint64),
              "b": np.array([[4294967295, 2**31]], np.uint32), "c": np.array(65535, np.uint16)}
    path = str(tmp_path / "u.ckpt")
    ms.save_checkpoint({k: Tensor(v) for k, v in values.items()}, path)
    loaded = ms.load_checkpoint(path)
    for name, arr in values.items():
        assert loaded[name].dtype == ms.dtype.to_dtype(arr.dtype)
        np.testing.assert_array_equal(loaded[name].asnumpy(), arr)
        assert loaded[name].asnumpy().dtype == arr.dtype


def test_list_form_append_dict_and_filters(tmp_path):
    path = str(tmp_path / "l.ckpt")
    ms.save_checkpoint([{"name": "a.w", "data": Tensor(np.ones(2, np.float32))},
                        {"name": "b.w", "data": Tensor(np.zeros(2, np.float32))}], path,
                       append_dict={"epoch": 3, "lr": 0.5})
    loaded = ms.load_checkpoint(path)
    assert list(loaded) == ["a.w", "b.w", "epoch", "lr"]
    assert loaded["epoch"].asnumpy().item() == 3
    assert list(ms.load_checkpoint(path, filter_prefix="a.")) == ["b.w", "epoch", "lr"]
    assert list(ms.load_checkpoint(path, specify_prefix=["a.", "b."])) == ["a.w", "b.w"]
    assert list(ms.load_checkpoint(path, choice_func=lambda n: n == "lr")) == ["lr"]
    ms.save_checkpoint(Net(), str(tmp_path / "c.ckpt"), choice_func=lambda n: "fc1" in n)
    assert list(ms.load_checkpoint(str(tmp_path / "c.ckpt"))) == ["fc1.weight", "fc1.bias"]


def test_shape_mismatch_is_a_clear_error(tmp_path):
    path = str(tmp_path / "n.ckpt")
    ms.save_checkpoint(Net(hidden=4), path)
    with pytest.raises(ValueError, match=r"fc1.weight.*\(5, 3\).*\(4, 3\)"):
        ms.load_checkpoint(path, net=Net(hidden=5))
    with pytest.raises(RuntimeError):     # MindSpore raises RuntimeError here
        ms.load_checkpoint(path, net=Net(hidden=5))


def test_name_mismatch(tmp_path):
    path = str(tmp_path / "n.ckpt")
    ms.save_checkpoint({"other.weight": Tensor(np.ones(2, np.float32))}, path)
    net = Net()
    with pytest.warns(UserWarning, match="not in the checkpoint"):
        not_loaded, unused = ms.load_param_into_net(net, ms.load_checkpoint(path))
    assert "fc1.weight" in not_loaded and unused == ["other.weight"]
    # strict_load turns off suffix matching and dtype conversion; a missing name still only
    # warns (MindSpore's behaviour)
    with pytest.warns(UserWarning, match="fc1.weight"):
        ms.load_param_into_net(net, ms.load_checkpoint(path), strict_load=True)


def test_suffix_matching_when_not_strict(tmp_path):
    src = Net()
    params = {"network." + k: v for k, v in values(src).items()}
    dst = Net()
    ms.load_param_into_net(dst, {k: Tensor(v) for k, v in params.items()})
    np.testing.assert_array_equal(dst.fc2.bias.asnumpy(), src.fc2.bias.asnumpy())


def test_duplicate_names_are_rejected(tmp_path):
    class Dup(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a = Parameter(Tensor(np.ones(1, np.float32)), name="same")
            self.b = Parameter(Tensor(np.ones(1, np.float32)), name="same")

    with pytest.raises(ValueError, match="'same' appears twice"):
        ms.save_checkpoint(Dup(), str(tmp_path / "dup.ckpt"))


# ---- damaged files ----

def save_kiln_format(net, path):
    """A file in kiln's earlier format, as kiln saved before it wrote MindSpore's layout."""
    with open(path, "wb") as f:
        _kiln_ckpt._write_records(f, {p.name: p for p in net.get_parameters()})


@pytest.fixture
def saved(tmp_path):
    path = str(tmp_path / "good.ckpt")
    save_kiln_format(Net(), path)
    with open(path, "rb") as f:
        return path, f.read()


def test_files_in_kilns_earlier_format_load(saved):
    path, _ = saved
    net = Net()
    assert ms.load_param_into_net(net, ms.load_checkpoint(path)) == ([], [])


def write(path, blob):
    with open(path, "wb") as f:
        f.write(blob)


def test_truncated_files(saved, tmp_path):
    path, blob = saved
    bad = str(tmp_path / "bad.ckpt")
    for cut in (0, 5, 20, len(blob) // 2, len(blob) - 1):
        write(bad, blob[:cut])
        with pytest.raises(serialization.CheckpointError, match="truncated|empty|not a check"):
            ms.load_checkpoint(bad)


def test_corrupted_bytes_fail_the_checksum(saved, tmp_path):
    path, blob = saved
    bad = str(tmp_path / "bad.ckpt")
    for pos in (40, len(blob) // 2, len(blob) - 12):
        damaged = bytearray(blob)
        damaged[pos] ^= 0xFF
        write(bad, bytes(damaged))
        with pytest.raises(ValueError, match="corrupted"):
            ms.load_checkpoint(bad)


def test_bad_magic_version_and_trailing_data(saved, tmp_path):
    path, blob = saved
    bad = str(tmp_path / "bad.ckpt")
    write(bad, b"NOTKILN!" + blob[8:])
    with pytest.raises(ValueError, match="not a checkpoint"):
        ms.load_checkpoint(bad)
    write(bad, blob[:8] + struct.pack("<I", 99) + blob[12:])
    with pytest.raises(ValueError, match="version 99"):
        ms.load_checkpoint(bad)
    write(bad, blob + b"extra")
    with pytest.raises(ValueError, match="unexpected bytes"):
        ms.load_checkpoint(bad)
    pickle_like = b"\x80\x04\x95" + b"\x00" * 40
    write(bad, pickle_like)
    with pytest.raises(ValueError, match="not a checkpoint"):
        ms.load_checkpoint(bad)


def test_inconsistent_record_with_valid_checksum(saved, tmp_path):
    """A record length that lies is caught even when the CRC was recomputed to match."""
    path, blob = saved
    body = bytearray(blob[:-8])
    first_name_len = struct.unpack_from("<I", body, 24)[0]
    struct.pack_into("<I", body, 24, first_name_len + 10_000)
    forged = bytes(body) + struct.pack("<I4s", zlib.crc32(bytes(body)) & 0xFFFFFFFF, b"KEND")
    bad = str(tmp_path / "forged.ckpt")
    write(bad, forged)
    with pytest.raises(ValueError, match="runs past the end"):
        ms.load_checkpoint(bad)


def test_missing_file():
    with pytest.raises((FileNotFoundError, ValueError)):
        ms.load_checkpoint("/nonexistent/dir/x.ckpt")


# ---- atomicity ----

def test_failure_mid_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = str(tmp_path / "model.ckpt")
    ms.save_checkpoint(Net(), path)
    with open(path, "rb") as f:
        before = f.read()
    real = _ckpt_codecs.write_ckpt

    def failing(f, entries, crc_check):
        real(f, entries[:2], crc_check)   # part of the file is written, then the disk fills
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(_ckpt_codecs, "write_ckpt", failing)
    with pytest.raises(OSError, match="simulated"):
        ms.save_checkpoint(Net(hidden=6), path)
    with open(path, "rb") as f:
        assert f.read() == before
    assert os.listdir(tmp_path) == ["model.ckpt"]   # the temp file was removed
    monkeypatch.undo()
    assert len(ms.load_checkpoint(path)) == len(list(Net().get_parameters()))


def test_failure_at_replace_keeps_the_old_file(tmp_path, monkeypatch):
    path = str(tmp_path / "model.ckpt")
    ms.save_checkpoint({"x": Tensor(np.ones(3, np.float32))}, path)

    def boom(src, dst):
        raise OSError("crash before rename (simulated)")

    monkeypatch.setattr(serialization.os, "replace", boom)
    with pytest.raises(OSError, match="simulated"):
        ms.save_checkpoint({"x": Tensor(np.zeros(3, np.float32))}, path)
    monkeypatch.undo()
    np.testing.assert_array_equal(ms.load_checkpoint(path)["x"].asnumpy(), np.ones(3))
    assert os.listdir(tmp_path) == ["model.ckpt"]


def test_save_errors(tmp_path):
    with pytest.raises(TypeError, match="save_obj"):
        ms.save_checkpoint(42, str(tmp_path / "x.ckpt"))
    with pytest.raises(FileNotFoundError, match="directory"):
        ms.save_checkpoint(Net(), str(tmp_path / "missing" / "x.ckpt"))
    with pytest.raises(TypeError, match="value of 'bad'"):
        ms.save_checkpoint({"bad": object()}, str(tmp_path / "x.ckpt"))


def test_optimizer_state_round_trip(tmp_path):
    net = Net()
    opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
    grads = tuple(Tensor(np.ones(p.shape, np.float32)) for p in opt.parameters)
    opt(grads)
    path = str(tmp_path / "opt.ckpt")
    ms.save_checkpoint(opt, path)
    fresh = nn.Momentum(Net().trainable_params(), 0.1, 0.9)
    ms.load_checkpoint(path, net=fresh)
    assert fresh.global_step.asnumpy().tolist() == [1]
    np.testing.assert_array_equal(fresh.moments[0].asnumpy(), np.ones(opt.moments[0].shape))


# ---- hostile files: header first, bounded reads, one exception type ----

def forge(records, count=None, total=None):
    """A checkpoint with a correct header length and CRC around hand-made record bytes."""
    body = b"".join(records)
    size = 24 + len(body) + 8
    head = struct.pack("<8sIIQ", b"KILNCKPT", 1, len(records) if count is None else count,
                       size if total is None else total)
    crc = zlib.crc32(head + body) & 0xFFFFFFFF
    return head + body + struct.pack("<I4s", crc, b"KEND")


def record(name_bytes, dtype=b"float32", dims=(2,), data=None, nbytes=None):
    data = np.arange(int(np.prod(dims)), dtype=np.float32).tobytes() if data is None else data
    return (struct.pack("<I", len(name_bytes)) + name_bytes + struct.pack("<B", len(dtype))
            + dtype + struct.pack(f"<I{len(dims)}QQ", len(dims), *dims,
                                  len(data) if nbytes is None else nbytes) + data)


def test_a_large_non_checkpoint_is_rejected_after_reading_its_header(tmp_path, monkeypatch):
    big = tmp_path / "huge.bin"
    with open(big, "wb") as f:
        f.truncate(64 << 20)               # sparse: 64 MiB of zeros that are never read
    read_sizes = []
    real_open = open

    class Spy:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            read_sizes.append(n)
            return self.f.read(n)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(serialization, "open", lambda *a, **k: Spy(real_open(*a, **k)),
                        raising=False)
    with pytest.raises(serialization.CheckpointError, match="huge.bin.*not a checkpoint"):
        ms.load_checkpoint(str(big))
    assert read_sizes and max(read_sizes) <= 64 and -1 not in read_sizes


def test_lengths_are_checked_before_allocating(tmp_path, monkeypatch):
    """A record claiming 2**40 bytes of data fails before any allocation of that size."""
    allocations = []
    real_empty = np.empty
    monkeypatch.setattr(serialization.np, "empty",
                        lambda n, *a, **k: allocations.append(n) or real_empty(n, *a, **k))
    bad = str(tmp_path / "claims.ckpt")
    write(bad, forge([record(b"w", dims=(1 << 38,), data=b"", nbytes=4 << 38)]))
    with pytest.raises(serialization.CheckpointError, match="runs past the end"):
        ms.load_checkpoint(bad)
    write(bad, forge([record(b"w")], count=1 << 30))
    with pytest.raises(serialization.CheckpointError, match="cannot fit"):
        ms.load_checkpoint(bad)
    assert allocations == []


def test_duplicate_names_in_a_file_are_an_error(tmp_path):
    bad = str(tmp_path / "dup.ckpt")
    twice = [record(b"fc.weight"), record(b"fc.weight", data=np.ones(2, "<f4").tobytes())]
    write(bad, forge(twice))
    with pytest.raises(ValueError, match=r"dup\.ckpt.*'fc\.weight' appears twice"):
        ms.load_checkpoint(bad)


@pytest.mark.parametrize("blob,why", [
    (forge([record(b"\xff\xfe")]), "not valid UTF-8"),
    (forge([record(b"")]), "empty name"),
    (forge([record(b"w", dims=(1 << 63, 1 << 63, 0), data=b"")]), "impossible shape"),
    (forge([record(b"w", dims=(0xFFFFFFFFFFFFFFFF,), data=b"")]), "impossible shape"),
    (forge([record(b"w", dims=(0, 1 << 61), data=b"")]), "impossible shape"),  # 2**63 bytes
    (forge([record(b"w", dims=(3,), data=b"\x00" * 8)]), "needs 12"),
    (forge([record(b"w", dtype=b"\xff\xfe")]), "unknown dtype"),
    (forge([record(b"w")])[:-8] + b"\x00\x00\x00\x00KEND", "CRC32"),
    (forge([record(b"w")], total=(1 << 64) - 1), "truncated"),
], ids=["utf8", "empty-name", "huge-dims", "u64-dim", "span-bytes", "length", "dtype", "crc",
        "total"])
def test_damaged_records_raise_checkpoint_error(tmp_path, blob, why):
    bad = str(tmp_path / "damaged.ckpt")
    write(bad, blob)
    with pytest.raises(serialization.CheckpointError, match=f"damaged.ckpt.*{why}"):
        ms.load_checkpoint(bad)


def test_forged_file_loads_when_consistent(tmp_path):
    """The forging helpers above describe the real format: a consistent forgery loads."""
    good = str(tmp_path / "forged.ckpt")
    write(good, forge([record(b"a"), record(b"b", dims=(2, 3))]))
    loaded = ms.load_checkpoint(good)
    np.testing.assert_array_equal(loaded["b"].asnumpy(), np.arange(6).reshape(2, 3))


# ---- temp files of killed saves ----

KILLED_SAVE = """
import os, signal, sys
import numpy as np
import kiln as ms
from kiln.train import _ckpt_codecs
def die(f, entries, crc_check):
    f.write(b"partial")
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)
_ckpt_codecs.write_ckpt = die
ms.save_checkpoint({"x": ms.Tensor(np.zeros(3, np.float32))}, sys.argv[1])
"""


def temp_files(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".kiln-tmp"))


def test_a_killed_save_leaves_a_temp_file_the_next_save_removes(tmp_path):
    import subprocess
    import sys

    path = str(tmp_path / "model.ckpt")
    ms.save_checkpoint({"x": Tensor(np.ones(3, np.float32))}, path)
    proc = subprocess.run([sys.executable, "-c", KILLED_SAVE, path], env=dict(os.environ),
                          check=False)
    assert proc.returncode == -9
    assert len(temp_files(tmp_path)) == 1                         # the killed save's file
    np.testing.assert_array_equal(ms.load_checkpoint(path)["x"].asnumpy(), np.ones(3))
    ms.save_checkpoint({"y": Tensor(np.ones(2, np.float32))}, str(tmp_path / "other.ckpt"))
    assert temp_files(tmp_path) == []
    np.testing.assert_array_equal(ms.load_checkpoint(path)["x"].asnumpy(), np.ones(3))


def test_a_live_save_temp_file_and_user_files_are_kept(tmp_path):
    lock_fd, live = serialization._create_locked_temp(str(tmp_path), "a.ckpt")
    user_files = [".notes.kiln-tmp", "a.ckpt.tmp", ".a.ckpt.x.kiln-tmp", ".b.bin.abcdefgh.kiln-tmp"]
    for name in user_files:
        write(str(tmp_path / name), b"mine")
    ms.save_checkpoint({"x": Tensor(np.ones(3, np.float32))}, str(tmp_path / "b.ckpt"))
    assert os.path.exists(live)                                   # its writer is alive
    os.close(lock_fd)
    ms.save_checkpoint({"x": Tensor(np.ones(3, np.float32))}, str(tmp_path / "b.ckpt"))
    assert not os.path.exists(live)                               # its writer is gone
    assert sorted(os.listdir(tmp_path)) == sorted(user_files + ["b.ckpt"])


def test_a_temp_file_removed_before_its_lock_is_taken_is_replaced(tmp_path, monkeypatch):
    """A concurrent save's cleanup may delete a temp file between its creation and its lock;
    the writer notices (the file has no name left) and starts over with a new one."""
    import tempfile

    real_mkstemp, made = tempfile.mkstemp, []

    def racing_mkstemp(*args, **kwargs):
        fd, name = real_mkstemp(*args, **kwargs)
        if not made:
            os.unlink(name)          # what the other process's cleanup did
        made.append(name)
        return fd, name

    monkeypatch.setattr(serialization.tempfile, "mkstemp", racing_mkstemp)
    path = str(tmp_path / "m.ckpt")
    ms.save_checkpoint({"x": Tensor(np.ones(3, np.float32))}, path)
    assert len(made) == 2
    np.testing.assert_array_equal(ms.load_checkpoint(path)["x"].asnumpy(), np.ones(3))
    assert os.listdir(tmp_path) == ["m.ckpt"]
