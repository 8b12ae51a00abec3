"""ts.load reading PyTorch checkpoints (torch.save's zip and legacy formats) without torch, and
ts.save / ts.load with file objects.

With torch installed it is the oracle: what torch.save writes (model and optimizer state dicts,
nested containers, views sharing a storage, non-contiguous tensors, every dtype) loads here with
the same values, compared through NumPy. Without torch, checkpoints are built by hand (a zip with a
data.pkl written opcode by opcode): those naming a global outside the allowed set (os.system...)
are refused with pickle.UnpicklingError naming it and run nothing; truncated or corrupted ones
raise ValueError, never crash."""
import io
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest
from conftest import assert_close, to_np

import tessera as ts
from tessera._torch_checkpoint import CheckpointError


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def saved(torch, obj, tmp_path, name="ckpt.pt", **kwargs):
    p = tmp_path / name
    torch.save(obj, p, **kwargs)
    return p


def same(t, ref, torch):
    """t (tessera) holds the values, shape and dtype of ref (torch)."""
    assert isinstance(t, ts.Tensor), type(t)
    assert tuple(t.shape) == tuple(ref.shape)
    assert t.dtype.name == str(ref.dtype).replace("torch.", "")
    expected = ref.detach().float().numpy() if ref.dtype == torch.bfloat16 else ref.detach().numpy()
    np.testing.assert_array_equal(to_np(t), expected)


# ---------------------------------------------------------------------------- hand-built checkpoints

def _str(text):
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def _int(n):
    return b"J" + struct.pack("<i", n)


def _tuple(*items):
    return b"(" + b"".join(items) + b"t"


def _global(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def tensor_pickle(storage_cls, key, numel, offset, size, stride, location="cpu"):
    """The opcodes torch.save writes for one tensor: _rebuild_tensor_v2(storage, ...)."""
    pid = _tuple(_str("storage"), _global("torch", storage_cls), _str(key), _str(location), _int(numel)) + b"Q"
    hooks = _global("collections", "OrderedDict") + b")R"
    return _global("torch._utils", "_rebuild_tensor_v2") + _tuple(
        pid, _int(offset), _tuple(*map(_int, size)), _tuple(*map(_int, stride)), b"\x89", hooks) + b"R"


def dict_pickle(items):
    """A protocol-2 pickle of {name: <opcodes>}."""
    return b"\x80\x02}(" + b"".join(_str(k) + v for k, v in items.items()) + b"u."


def make_zip(pkl, records=None, byteorder="little", prefix="archive"):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{prefix}/data.pkl", pkl)
        if byteorder is not None:
            z.writestr(f"{prefix}/byteorder", byteorder)
        for key, data in (records or {}).items():
            z.writestr(f"{prefix}/data/{key}", data)
        z.writestr(f"{prefix}/version", "3\n")
    return buf.getvalue()


def simple_checkpoint():
    """{'w': float32 [[0, 1, 2], [3, 4, 5]] transposed view, 'b': int64 [7, 8]} by hand."""
    pkl = dict_pickle({"w": tensor_pickle("FloatStorage", "0", 6, 0, (3, 2), (1, 3)),
                       "b": tensor_pickle("LongStorage", "1", 3, 1, (2,), (1,))})
    return make_zip(pkl, {"0": np.arange(6, dtype="<f4").tobytes(), "1": np.array([6, 7, 8], "<i8").tobytes()})


def check_simple(out):
    assert list(out) == ["w", "b"]
    assert_close(out["w"], np.arange(6, dtype=np.float32).reshape(2, 3).T, dtype=ts.float32, rtol=0, atol=0)
    assert_close(out["b"], np.array([7, 8]), dtype=ts.int64)


def test_hand_built_checkpoint_loads_without_torch(tmp_path):
    data = simple_checkpoint()
    p = tmp_path / "hand.pt"
    p.write_bytes(data)
    check_simple(ts.load(p))
    check_simple(ts.load(str(p), weights_only=True, mmap=True))
    check_simple(ts.load(io.BytesIO(data)))
    check_simple(ts._serialization.loads(data))


def test_other_archive_names_and_missing_byteorder(tmp_path):
    data = simple_checkpoint()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        records = {n.rsplit("/", 1)[1]: z.read(n) for n in z.namelist() if "/data/" in n}
        pkl = z.read("archive/data.pkl")
    check_simple(ts.load(io.BytesIO(make_zip(pkl, records, byteorder=None, prefix="my_model"))))


@pytest.mark.parametrize("name,code,dtype", [
    ("FloatStorage", "<f4", ts.float32), ("DoubleStorage", "<f8", ts.float64), ("HalfStorage", "<f2", ts.float16),
    ("ShortStorage", "<i2", ts.int16), ("IntStorage", "<i4", ts.int32), ("LongStorage", "<i8", ts.int64),
    ("ComplexFloatStorage", "<c8", ts.complex64), ("ComplexDoubleStorage", "<c16", ts.complex128),
    ("BFloat16Storage", "<u2", ts.bfloat16), ("ByteStorage", "u1", ts.uint8)])
def test_big_endian_checkpoints_are_swapped(name, code, dtype):
    values = np.array([1, -2, 3.5, 100], dtype=np.float64)
    if dtype == ts.bfloat16:
        raw = (values.astype(np.float32).view(np.uint32) >> 16).astype(code)
        expected = values.astype(np.float32)
    elif dtype == ts.uint8:
        raw = expected = np.array([1, 2, 3, 200], dtype=code)
    else:
        raw = expected = (values + 1j * values if dtype.is_complex else values).astype(code)
    big = raw.astype(np.dtype(code).newbyteorder(">")).tobytes()
    out = ts.load(io.BytesIO(make_zip(dict_pickle({"x": tensor_pickle(name, "0", 4, 0, (4,), (1,))}), {"0": big},
                                      byteorder="big")))
    assert_close(out["x"], expected, dtype=dtype, rtol=0, atol=0)


# ---------------------------------------------------------------------------- refused globals

def _marker_command(tmp_path):
    marker = tmp_path / "pwned"
    return marker, f"touch {marker}"


def malicious_pickles(command):
    """Pickles that would run `command` if their globals were honoured."""
    cmd = _str(command)
    return {
        "os.system": b"\x80\x02" + _global("os", "system") + cmd + b"\x85R.",
        "posix.system": b"\x80\x04" + _str("posix") + _str("system") + b"\x93" + cmd + b"\x85R.",  # STACK_GLOBAL
        "builtins.eval": b"\x80\x02" + _global("__builtin__", "eval") +
                         _str(f"__import__('os').system({command!r})") + b"\x85R.",
        "subprocess.call": b"(" + cmd + b"isubprocess\ncall\n.",  # INST: protocol 0's class call
        "builtins.getattr": b"\x80\x02" + _global("__builtin__", "getattr") +
                            _global("collections", "OrderedDict") + _str("__init__") + b"\x86R.",
        # the global hidden inside an allowed call's arguments
        "os.popen": b"\x80\x02}(" + _str("w") + _global("torch._utils", "_rebuild_tensor_v2") +
                    _tuple(_global("os", "popen") + cmd + b"\x85R", _int(0), _tuple(), _tuple(), b"\x89",
                           _global("collections", "OrderedDict") + b")R") + b"Ru.",
    }


@pytest.mark.parametrize("name", list(malicious_pickles("x")))
@pytest.mark.parametrize("weights_only", [None, True, False])
def test_malicious_checkpoint_is_refused_and_runs_nothing(tmp_path, name, weights_only):
    marker, command = _marker_command(tmp_path)
    pkl = malicious_pickles(command)[name]
    p = tmp_path / "evil.pt"
    p.write_bytes(make_zip(pkl))
    kwargs = {} if weights_only is None else {"weights_only": weights_only}
    for source in (p, io.BytesIO(p.read_bytes())):
        with pytest.raises(pickle.UnpicklingError, match=name.replace(".", r"\.")) as e:
            ts.load(source, **kwargs)
        assert "Unsupported global" in str(e.value)
        if weights_only is False:
            assert "weights_only=False" in str(e.value)
    assert not marker.exists()


def test_hand_built_os_system_checkpoint(tmp_path):
    """The brief's case spelled out: a zip whose data.pkl is GLOBAL 'os system' called on a command."""
    marker = tmp_path / "ran"
    pkl = b"\x80\x02cos\nsystem\nq\x00X" + struct.pack("<I", len(f"touch {marker}")) + f"touch {marker}".encode() \
        + b"q\x01\x85q\x02Rq\x03."
    p = tmp_path / "evil.pth"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("evil/data.pkl", pkl)
        z.writestr("evil/version", "3\n")
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL os\.system"):
        ts.load(p)
    assert not marker.exists()


def test_malicious_legacy_checkpoint_is_refused(tmp_path):
    marker, command = _marker_command(tmp_path)
    head = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2) + \
        pickle.dumps({"little_endian": True}, protocol=2)
    p = tmp_path / "evil_legacy.pt"
    p.write_bytes(head + malicious_pickles(command)["os.system"] + pickle.dumps([], protocol=2))
    with pytest.raises(pickle.UnpicklingError, match=r"os\.system"):
        ts.load(p)
    assert not marker.exists()


def test_build_cannot_alter_the_allowed_globals():
    # BUILD with slot state on the OrderedDict stand-in would setattr on it: refused, and the
    # stand-in still works for the next load.
    pkl = b"\x80\x02" + _global("collections", "OrderedDict") + b"N}" + _str("fn") + \
        _global("collections", "Counter") + b"s\x86b."
    with pytest.raises(ValueError, match="read-only"):
        ts.load(io.BytesIO(make_zip(pkl)))
    check_simple(ts.load(io.BytesIO(simple_checkpoint())))


def test_only_latin1_bytes_decoding_is_allowed():
    good = b"\x80\x02" + _global("_codecs", "encode") + _str("ab\xff") + _str("latin1") + b"\x86R."
    assert ts.load(io.BytesIO(make_zip(good))) == b"ab\xff"
    bomb = b"\x80\x02" + _global("_codecs", "encode") + _str("x") + _str("zlib") + b"\x86R."
    with pytest.raises(ValueError, match="latin1"):
        ts.load(io.BytesIO(make_zip(bomb)))
    alloc = b"\x80\x02" + _global("__builtin__", "bytearray") + b"J\x00\x00\x00\x7f\x85R."  # bytearray(2**31)
    with pytest.raises(ValueError, match="bytearray"):
        ts.load(io.BytesIO(make_zip(alloc)))


# ---------------------------------------------------------------------------- malformed files

def test_truncated_zip_is_a_clear_error(tmp_path):
    data = simple_checkpoint()
    for n in list(range(4, len(data), 7)) + [len(data) - 1]:
        p = tmp_path / "cut.pt"
        p.write_bytes(data[:n])
        with pytest.raises(ValueError) as e:
            ts.load(p)
        assert str(p) in str(e.value)
        with pytest.raises(ValueError, match="truncated or corrupt|malformed|record|expected"):
            ts.load(io.BytesIO(data[:n]))


def test_corrupted_bytes_raise_value_error():
    """Each single-byte change of the archive loads or raises ValueError: never another error."""
    data = simple_checkpoint()
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0xFF
        try:
            ts._serialization.loads(bytes(bad))
        except ValueError:
            pass


@pytest.mark.parametrize("case,fragment", [
    ("out_of_bounds", "reaches element 6 of storage '0', which holds 6"),
    ("negative_stride", "ints >= 0"),
    ("record_size", "expected 24 bytes"),
    ("missing_record", "has no record 'archive/data/0'"),
    ("bad_pid", "persistent id"),
    ("byteorder", "expected 'little' or 'big'"),
    ("no_data_pkl", "expected an entry '<name>/data.pkl'"),
    ("torchscript", "TorchScript"),
    ("not_a_pickle", "data.pkl is malformed"),
])
def test_malformed_checkpoints(case, fragment):
    good = np.arange(6, dtype="<f4").tobytes()
    pkl = dict_pickle({"w": tensor_pickle("FloatStorage", "0", 6, 0, (2, 3), (3, 1))})
    records, byteorder = {"0": good}, "little"
    if case == "out_of_bounds":  # one element past the end
        pkl = dict_pickle({"w": tensor_pickle("FloatStorage", "0", 6, 1, (2, 3), (3, 1))})
    elif case == "negative_stride":
        pkl = dict_pickle({"w": tensor_pickle("FloatStorage", "0", 6, 5, (2,), (-1,))})
    elif case == "record_size":
        records = {"0": good[:-4]}
    elif case == "missing_record":
        records = {}
    elif case == "bad_pid":
        pkl = b"\x80\x02" + _tuple(_str("storage"), _str("0")) + b"Q."
    elif case == "byteorder":
        byteorder = "middle"
    elif case == "not_a_pickle":
        pkl = b"\x80\x02}(\xfe"
    data = make_zip(pkl, records, byteorder)
    if case == "no_data_pkl":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("something/else.txt", "hi")
        data = buf.getvalue()
    elif case == "torchscript":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("m/data.pkl", pkl)
            z.writestr("m/constants.pkl", b"\x80\x02).")
        data = buf.getvalue()
    with pytest.raises(CheckpointError, match=fragment) as e:
        ts.load(io.BytesIO(data))
    assert isinstance(e.value, ValueError) and isinstance(e.value, pickle.UnpicklingError)


def test_legacy_tar_format_is_refused(tmp_path):
    import tarfile

    p = tmp_path / "old.tar"
    with tarfile.open(p, "w") as t:
        info = tarfile.TarInfo("sys_info")
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(ValueError, match="tar format.*newer torch.save"):
        ts.load(p)


# ---------------------------------------------------------------------------- file objects (no torch)

def test_save_and_load_with_file_objects(tmp_path):
    sd = {"w": ts.arange(6, dtype=ts.float32).reshape(2, 3), "n": {"step": 3, "t": ts.tensor([1, 2])}}
    buf = io.BytesIO()
    ts.save(sd, buf)
    buf.seek(0)
    out = ts.load(buf)
    assert_close(out["w"], np.arange(6).reshape(2, 3), dtype=ts.float32)
    assert out["n"]["step"] == 3
    assert_close(out["n"]["t"], np.array([1, 2]))
    # a real file, written and read at a position after other data
    p = tmp_path / "f.bin"
    with open(p, "wb") as f:
        f.write(b"HEAD")
        ts.save({"a": ts.tensor([1.5])}, f)
    with open(p, "rb") as f:
        assert f.read(4) == b"HEAD"
        assert_close(ts.load(f)["a"], np.array([1.5], dtype=np.float32))
    # the same bytes as a path save
    ts.save(sd, tmp_path / "p.safetensors")
    assert (tmp_path / "p.safetensors").read_bytes() == buf.getvalue()


def test_file_object_errors(tmp_path):
    buf = io.BytesIO()
    with pytest.raises(ValueError, match="reserved"):
        ts.save({"__metadata__": ts.tensor([1.0])}, buf)
    assert buf.getvalue() == b""  # nothing written by a failed save
    with pytest.raises(TypeError, match="file object"):
        ts.save({"a": ts.tensor([1.0])}, 42)
    with pytest.raises(TypeError, match="file object"):
        ts.load(3.5)
    with pytest.raises(ValueError, match="mmap=True needs a path"):
        ts.load(io.BytesIO(simple_checkpoint()), mmap=True)
    p = tmp_path / "t.txt"
    p.write_text("text")
    with open(p) as f, pytest.raises(TypeError, match="binary file object"):
        ts.load(f)
    with pytest.raises(ValueError, match="pickle_module"):
        ts.load(io.BytesIO(simple_checkpoint()), pickle_module=os)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        ts.load(io.BytesIO(simple_checkpoint()), bogus=1)
    check_simple(ts.load(io.BytesIO(simple_checkpoint()), pickle_module=pickle, encoding="latin1"))


def test_save_accepts_torch_keywords(tmp_path):
    ts.save({"a": ts.tensor([2.0])}, tmp_path / "k.pt", pickle, 2, _use_new_zipfile_serialization=True,
            _disable_byteorder_record=False)
    assert_close(ts.load(tmp_path / "k.pt")["a"], np.array([2.0], dtype=np.float32))


def test_safetensors_map_location_callable_and_dict(tmp_path):
    ts.save({"a": ts.tensor([1.0, 2.0])}, tmp_path / "s.safetensors")
    seen = []

    def fn(storage, location):
        seen.append(location)
        return storage

    assert_close(ts.load(tmp_path / "s.safetensors", map_location=fn)["a"], np.array([1.0, 2.0], np.float32))
    assert seen == ["cpu"]
    assert ts.load(tmp_path / "s.safetensors", map_location={"cpu": "cpu"})["a"].device == ts.device("cpu")


# ---------------------------------------------------------------------------- against torch

TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
                "complex64", "complex128"]


def torch_values(torch, name, shape=(3, 4)):
    g = torch.Generator().manual_seed(0)
    dtype = getattr(torch, name)
    if name == "bool":
        return torch.rand(shape, generator=g) < 0.5
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype.is_floating_point:
        return (torch.randint(-64, 64, shape, generator=g) / 8).to(dtype)
    lo, hi = (0, 255) if name == "uint8" else (-100, 100)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_every_dtype(torch, tmp_path, name):
    x = torch_values(torch, name)
    obj = {"x": x, "t": x.t(), "row": x[1], "scalar": x[0, 0].clone(), "empty": x[:0], "step": x[:, ::2]}
    out = ts.load(saved(torch, obj, tmp_path))
    assert list(out) == list(obj)
    for k, v in obj.items():
        same(out[k], v, torch)
    assert out["t"].stride() == x.t().stride()


def test_model_state_dict_loads_into_the_same_tessera_model(torch, tmp_path):
    from tessera import nn

    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    tm.train()
    tm(torch.randn(16, 4))  # running statistics and num_batches_tracked move
    tm.eval()
    sd = tm.state_dict()
    loaded = ts.load(saved(torch, sd, tmp_path, "model.pth"))
    assert list(loaded) == list(sd)
    for k, v in sd.items():
        same(loaded[k], v, torch)
    ours = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    ours.load_state_dict(loaded)
    ours.eval()
    for k, v in ours.state_dict().items():
        same(v, sd[k], torch)
    x = torch.randn(5, 4)
    with torch.no_grad():
        ref = tm(x).numpy()
    assert_close(ours(ts.tensor(x.numpy())), ref, rtol=1e-5, atol=1e-6)


def test_parameters_and_requires_grad(torch, tmp_path):
    from tessera import nn

    lin = torch.nn.Linear(3, 2)
    frozen = torch.nn.Parameter(torch.ones(2), requires_grad=False)
    obj = {"params": dict(lin.named_parameters()), "frozen": frozen, "leaf": torch.zeros(2, requires_grad=True)}
    out = ts.load(saved(torch, obj, tmp_path))
    for k, v in lin.named_parameters():
        assert isinstance(out["params"][k], nn.Parameter)
        assert out["params"][k].requires_grad
        same(out["params"][k].detach(), v, torch)
    assert isinstance(out["frozen"], nn.Parameter) and not out["frozen"].requires_grad
    assert out["leaf"].requires_grad


def test_optimizer_state_dict(torch, tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.99))
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(4, 3)).pow(2).sum().backward()
        opt.step()
    sd = opt.state_dict()
    out = ts.load(saved(torch, sd, tmp_path, "opt.pt"))
    assert out["param_groups"] == sd["param_groups"]  # floats, tuples, bools, None, int lists
    assert isinstance(out["param_groups"][0]["betas"], tuple)
    assert list(out["state"]) == list(sd["state"]) == [0, 1]  # int keys
    for i, state in sd["state"].items():
        assert list(out["state"][i]) == list(state)
        for k, v in state.items():
            same(out["state"][i][k], v, torch)


def test_nested_containers_and_plain_values(torch, tmp_path):
    from collections import OrderedDict

    t = torch.arange(4)
    obj = {
        "ints": [1, -2, 2**70], "str": "héllo", "none": None, "tuple": (1, ("a", None), t), "float": 0.1,
        "bools": (True, False), "bytes": b"\x00\xffab", "empty_bytes": b"", "set": {1, 2}, "frozenset": frozenset("ab"),
        "complex": 1 - 2j, "slice": slice(1, None, 2), "od": OrderedDict([("z", 1), ("a", t)]), 3: "int key",
        "size": torch.Size([2, 3]), "dtype": torch.float64, "device": torch.device("cpu"),
        "bytearray": bytearray(b"xy"),
        "nested": {"deep": [{"t": t * 2}]},
    }
    out = ts.load(saved(torch, obj, tmp_path))
    assert list(out) == list(obj)
    for k in ("ints", "str", "none", "float", "bools", "bytes", "empty_bytes", "set", "frozenset", "complex", "slice",
              "bytearray"):
        assert out[k] == obj[k] and type(out[k]) is type(obj[k]), k
    assert out[3] == "int key"
    assert out["tuple"][:2] == (1, ("a", None))
    same(out["tuple"][2], t, torch)
    assert type(out["od"]) is OrderedDict and list(out["od"]) == ["z", "a"]
    same(out["od"]["a"], t, torch)
    assert out["size"] == (2, 3)
    assert out["dtype"] is ts.float64
    assert out["device"] == ts.device("cpu")
    same(out["nested"]["deep"][0]["t"], t * 2, torch)


def test_views_share_one_storage(torch, tmp_path):
    base = torch.arange(24.0)
    obj = {"base": base, "narrow": base[2:5], "grid": base.view(4, 6), "col": base.view(4, 6)[:, 1],
           "t": base.view(4, 6).t(), "expanded": base[:1].expand(3, 5)}
    out = ts.load(saved(torch, obj, tmp_path))
    for k, v in obj.items():
        same(out[k], v, torch)
        assert out[k].storage_offset() == v.storage_offset()
        assert out[k].stride() == v.stride()
    out["base"][3] = 100.0  # one buffer, as in torch: the views see it
    assert out["narrow"].tolist() == [2.0, 100.0, 4.0]
    assert out["grid"][0, 3].item() == 100.0
    assert out["t"][3, 0].item() == 100.0
    assert out["col"]._same_storage(out["base"])


def test_non_contiguous_tensors(torch, tmp_path):
    x = torch.arange(60, dtype=torch.float64).reshape(3, 4, 5)
    obj = {"perm": x.permute(2, 0, 1), "steps": x[::2, 1::2, ::3],
           "diag": x[0].diagonal(), "mT": x.mT, "unfold": torch.arange(10.0).unfold(0, 4, 2)}
    out = ts.load(saved(torch, obj, tmp_path))
    for k, v in obj.items():
        assert not v.is_contiguous(), k
        same(out[k], v, torch)
        assert out[k].stride() == v.stride()


def test_conjugate_and_negative_views(torch, tmp_path):
    c = torch.tensor([1 + 2j, -3 - 1j])
    obj = {"conj": c.conj(), "neg": torch.tensor([1.0, -2.0])._neg_view()}
    out = ts.load(saved(torch, obj, tmp_path))
    np.testing.assert_array_equal(to_np(out["conj"]), c.conj().resolve_conj().numpy())
    np.testing.assert_array_equal(to_np(out["neg"]), np.array([-1.0, 2.0], np.float32))


def test_tensor_attributes_are_dropped(torch, tmp_path):
    t = torch.ones(2)
    t.note = "hello"
    out = ts.load(saved(torch, {"t": t}, tmp_path))
    same(out["t"], t, torch)


@pytest.mark.parametrize("protocol", [2, 4])
def test_legacy_format(torch, tmp_path, protocol):
    base = torch.arange(12, dtype=torch.int32)
    obj = {"base": base, "view": base[3:9].view(2, 3), "bf": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
           "c": torch.tensor([1 + 1j], dtype=torch.complex128), "meta": ("x", 1, None)}
    p = saved(torch, obj, tmp_path, "legacy.pt", _use_new_zipfile_serialization=False, pickle_protocol=protocol)
    assert not zipfile.is_zipfile(p)
    out = ts.load(p)
    for k in ("base", "view", "bf", "c"):
        same(out[k], obj[k], torch)
    assert out["meta"] == ("x", 1, None)
    out["base"][4] = -1
    assert out["view"][0, 1].item() == -1
    same(ts.load(io.BytesIO(p.read_bytes()))["view"], obj["view"], torch)
    data = p.read_bytes()
    for n in range(len(data) - 40, len(data), 3):  # cut inside the storages
        with pytest.raises(ValueError, match="truncated|expected a record"):
            ts.load(io.BytesIO(data[:n]))


def test_pickle_protocol_4(torch, tmp_path):
    obj = {"a": torch.arange(5.0), "b": [1, (2, "x")]}
    out = ts.load(saved(torch, obj, tmp_path, pickle_protocol=4))
    same(out["a"], obj["a"], torch)
    assert out["b"] == [1, (2, "x")]


def test_paths_file_objects_and_bytes(torch, tmp_path):
    obj = {"w": torch.randn(3, 2)}
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    p = tmp_path / "w.pt"
    p.write_bytes(data)
    with open(p, "rb") as f:
        from_file = ts.load(f)
    for out in (ts.load(p), ts.load(str(p)), ts.load(io.BytesIO(data)), from_file, ts._serialization.loads(data)):
        same(out["w"], obj["w"], torch)


def test_map_location(torch, tmp_path):
    base = torch.arange(4.0)
    obj = {"a": base, "b": base[1:], "c": torch.ones(2, dtype=torch.int64)}
    p = saved(torch, obj, tmp_path)
    for loc in ("cpu", ts.device("cpu"), torch.device("cpu"), {"cpu": "cpu"}, lambda s, loc: s, lambda s, loc: None):
        out = ts.load(p, map_location=loc)
        for k, v in obj.items():
            assert out[k].device == ts.device("cpu")
            same(out[k], v, torch)
    calls = []

    def record(storage, location):
        calls.append((location, tuple(storage.shape), storage.dtype))
        return storage

    ts.load(p, map_location=record)
    # one call per storage (a and b share one)
    assert sorted(calls, key=str) == sorted([("cpu", (4,), ts.float32), ("cpu", (2,), ts.int64)], key=str)
    with pytest.raises(TypeError, match="map_location returned str"):
        ts.load(p, map_location=lambda s, loc: "cpu")
    with pytest.raises(RuntimeError, match="nowhere"):
        ts.load(p, map_location="nowhere:0")


def test_saved_on_a_missing_device_suggests_map_location(torch, tmp_path):
    # A checkpoint saved on cuda:7 (its location tag rewritten): loading it where tessera has no such
    # device says to pass map_location; with map_location='cpu' it loads.
    p = saved(torch, {"a": torch.arange(3.0)}, tmp_path)
    with zipfile.ZipFile(p) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    pkl_name = next(n for n in entries if n.endswith("/data.pkl"))
    entries[pkl_name] = entries[pkl_name].replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:7")
    q = tmp_path / "cuda7.pt"
    with zipfile.ZipFile(q, "w") as z:
        for n, d in entries.items():
            z.writestr(n, d)
    with pytest.raises(RuntimeError, match="saved on 'cuda:7'.*map_location='cpu'"):
        ts.load(q)
    same(ts.load(q, map_location="cpu")["a"], torch.arange(3.0), torch)
    same(ts.load(q, map_location={"cuda:7": "cpu"})["a"], torch.arange(3.0), torch)


def test_mmap(torch, tmp_path):
    obj = {"a": torch.arange(1000, dtype=torch.float32), "v": torch.arange(1000, dtype=torch.float32)[10:20],
           "bf": torch.ones(3, dtype=torch.bfloat16)}
    obj["v"] = obj["a"][10:20]
    p = saved(torch, obj, tmp_path)
    before = p.read_bytes()
    out = ts.load(p, mmap=True)
    for k, v in obj.items():
        same(out[k], v, torch)
    out["a"][15] = -1.0  # a private mapping: the view sees it, the file does not
    assert out["v"][5].item() == -1.0
    assert p.read_bytes() == before


def test_weights_only_false_reads_the_same(torch, tmp_path):
    p = saved(torch, {"a": torch.arange(3), "s": "x"}, tmp_path)
    out = ts.load(p, weights_only=False)
    same(out["a"], torch.arange(3), torch)
    assert out["s"] == "x"


def test_refused_torch_objects(torch, tmp_path):
    with pytest.raises(pickle.UnpicklingError, match=r"torch\.uint16.*no dtype uint16"):
        ts.load(saved(torch, {"u": torch.ones(2, dtype=torch.uint16)}, tmp_path, "u16.pt"))
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL torch\.nn\.modules\.linear\.Linear"):
        ts.load(saved(torch, torch.nn.Linear(2, 2), tmp_path, "module.pt"))  # a whole pickled module
    with pytest.raises(pickle.UnpicklingError, match="sparse"):
        ts.load(saved(torch, {"s": torch.eye(2).to_sparse()}, tmp_path, "sparse.pt"))


@pytest.mark.filterwarnings("ignore::FutureWarning")  # torch.jit is deprecated
def test_torchscript_archive_is_refused(torch, tmp_path):
    p = tmp_path / "script.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(p))
    with pytest.raises(ValueError, match="TorchScript"):
        ts.load(p)


def test_cuda_checkpoint(torch, tmp_path):
    """Saved from a GPU: restored on the GPU by default, on the CPU with map_location."""
    if not torch.cuda.is_available() or not ts.cuda.is_available():
        pytest.skip("needs CUDA in both torch and tessera")
    base = torch.arange(12.0, device="cuda").reshape(3, 4)
    p = saved(torch, {"w": base, "t": base.t(), "h": base.half()}, tmp_path)
    out = ts.load(p)
    assert out["w"].device == ts.device("cuda:0") and out["t"].device == ts.device("cuda:0")
    for k, v in {"w": base, "t": base.t(), "h": base.half()}.items():
        same(out[k].cpu(), v.cpu(), torch)
    out["w"][0, 1] = -5.0  # still one storage on the device
    assert out["t"][1, 0].item() == -5.0
    on_cpu = ts.load(p, map_location="cpu")
    assert on_cpu["w"].device == ts.device("cpu")
    same(on_cpu["t"], base.t().cpu(), torch)
    moved = ts.load(saved(torch, {"c": torch.ones(2)}, tmp_path, "c.pt"), map_location="cuda:0")
    assert moved["c"].device == ts.device("cuda:0")
