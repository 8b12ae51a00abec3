"""ts.save / ts.load (safetensors): round trips of every dtype and layout, nested optimizer-style
state dicts, interop both ways with the `safetensors` package (the oracle: files it writes load
here, files written here load there with the same names, dtypes, shapes and bytes), and corrupted
files raising ValueError (never a crash)."""
import json
import os
import struct

import numpy as np
import pytest
from conftest import ALL_DTYPES, assert_close, from_np, round_bf16, to_np

import tessera as ts

ST_CODES = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64",
            "float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64"}
NUMPY_DTYPES = [d for d in ALL_DTYPES if d.name != "bfloat16"]


def values(dtype, shape, seed=0):
    """Reference values exactly representable in `dtype`, as a NumPy array."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype == ts.bool:
        a = rng.integers(0, 2, n).astype(np.bool_)
    elif dtype == ts.uint8:
        a = rng.integers(0, 256, n).astype(np.uint8)
    elif dtype.is_floating_point:
        a = (rng.integers(-64, 64, n) / 8.0).astype(np.float32 if dtype == ts.bfloat16 else np.dtype(dtype.name))
    else:
        info = np.iinfo(np.dtype(dtype.name))
        a = rng.integers(max(info.min, -2**40), min(info.max, 2**40), n, endpoint=True).astype(np.dtype(dtype.name))
    return a.reshape(shape)


def make(dtype, shape, seed=0):
    return from_np(values(dtype, shape, seed), dtype)


def raw_file(header, data=b"", length=None):
    """A file as the spec lays it out: u64 little-endian header length, header JSON, data."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def header_of(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


# ---------------------------------------------------------------------------- round trips

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(2, 3), (4,), (), (0, 3), (2, 1, 3)])
def test_round_trip_every_dtype(tmp_path, dtype, shape):
    t = make(dtype, shape)
    p = tmp_path / "t.safetensors"
    ts.save({"x": t}, p)
    out = ts.load(p)
    assert list(out) == ["x"]
    assert out["x"].dtype == dtype
    assert tuple(out["x"].shape) == shape
    assert out["x"].device == ts.device("cpu")
    assert_close(out["x"], to_np(t), dtype=dtype, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [ts.float32, ts.float64], ids=lambda d: d.name)
def test_non_contiguous_views_are_saved_as_their_values(tmp_path, dtype):
    base = make(dtype, (4, 6))
    ref = to_np(base)
    views = {"t": base.T, "step": base[:, 1::2], "row": base[2], "narrow": base[1:3],
             "batched_t": make(dtype, (2, 3, 4)).transpose(1, 2)}
    expected = {"t": ref.T, "step": ref[:, 1::2], "row": ref[2], "narrow": ref[1:3],
                "batched_t": to_np(views["batched_t"])}
    ts.save(views, tmp_path / "v.safetensors")
    out = ts.load(tmp_path / "v.safetensors")
    assert list(out) == list(views)  # the order saved
    for k in views:
        assert out[k].is_contiguous()
        assert_close(out[k], expected[k], dtype=dtype, rtol=0, atol=0)


def test_module_style_state_dict_keeps_exact_names_and_order(tmp_path):
    sd = {"layer1.weight": make(ts.float32, (3, 2)), "layer1.bias": make(ts.float32, (3,)),
          "bn.num_batches_tracked": ts.tensor(7), "emb.weight": make(ts.float16, (5, 2))}
    p = tmp_path / "m.safetensors"
    ts.save(sd, p)
    header, _ = header_of(p)
    assert [k for k in header if k != "__metadata__"] == list(sd)
    assert "__metadata__" not in header  # a plain state dict carries nothing else
    out = ts.load(p)
    assert list(out) == list(sd)
    for k, v in sd.items():
        assert_close(out[k], to_np(v), dtype=v.dtype, rtol=0, atol=0)


def test_nn_module_state_dict_round_trips(tmp_path):
    try:
        from tessera import nn
        model = nn.Linear(3, 2)
        sd = model.state_dict()
    except (ImportError, AttributeError, RuntimeError) as e:  # nn or its autograd plugin not built
        pytest.skip(f"tessera.nn unavailable: {e}")
    p = tmp_path / "linear.safetensors"
    ts.save(sd, p)
    back = ts.load(p)
    assert list(back) == list(sd)
    for k in sd:
        assert_close(back[k], to_np(sd[k]), dtype=sd[k].dtype, rtol=0, atol=0)
    other = nn.Linear(3, 2)
    other.load_state_dict(back)
    for k, v in other.state_dict().items():
        assert_close(v, to_np(sd[k]), rtol=0, atol=0)


def test_empty_dict(tmp_path):
    ts.save({}, tmp_path / "e.safetensors")
    assert ts.load(tmp_path / "e.safetensors") == {}


def test_path_as_str_and_pathlike(tmp_path):
    t = make(ts.int32, (3,))
    ts.save({"a": t}, str(tmp_path / "s.safetensors"))
    assert_close(ts.load(str(tmp_path / "s.safetensors"))["a"], to_np(t))


def test_load_map_location(tmp_path):
    ts.save({"a": make(ts.float32, (2,))}, tmp_path / "a.safetensors")
    assert ts.load(tmp_path / "a.safetensors", map_location="cpu")["a"].device == ts.device("cpu")


# ---------------------------------------------------------------------------- nested structures

def test_optimizer_state_dict_round_trips(tmp_path):
    state = {
        "state": {
            0: {"step": ts.tensor(3.0), "exp_avg": make(ts.float32, (3, 2), 1), "exp_avg_sq": make(ts.float32, (3, 2), 2)},
            1: {"step": ts.tensor(3.0), "exp_avg": make(ts.float64, (3,), 3), "momentum_buffer": None},
        },
        "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0, "amsgrad": False,
                          "params": [0, 1], "name": "default", "maximize": None, "big": 2**62}],
    }
    p = tmp_path / "opt.safetensors"
    ts.save(state, p)
    out = ts.load(p)
    assert set(out) == {"state", "param_groups"}
    assert list(out["state"]) == [0, 1]  # int keys stay ints
    for k in (0, 1):
        assert list(out["state"][k]) == list(state["state"][k])
        for name, v in state["state"][k].items():
            if v is None:
                assert out["state"][k][name] is None
            else:
                assert_close(out["state"][k][name], to_np(v), dtype=v.dtype, rtol=0, atol=0)
    assert out["param_groups"] == state["param_groups"]  # floats, tuples, bools, None, big ints exact
    assert isinstance(out["param_groups"][0]["betas"], tuple)
    # Other readers see the tensors under dotted paths.
    header, _ = header_of(p)
    assert {k for k in header if k != "__metadata__"} == {
        "state.0.step", "state.0.exp_avg", "state.0.exp_avg_sq", "state.1.step", "state.1.exp_avg"}
    assert "tessera.structure" in header["__metadata__"]


def test_nested_lists_tuples_and_colliding_names(tmp_path):
    a, b, c = make(ts.int64, (2,)), make(ts.float32, (1,)), make(ts.bool, (3,))
    obj = {"a.b": a, "a": {"b": b}, "list": [c, [1, "x", 2.5], (c,)], "s": "text"}
    ts.save(obj, tmp_path / "n.safetensors")
    out = ts.load(tmp_path / "n.safetensors")
    assert_close(out["a.b"], to_np(a))
    assert_close(out["a"]["b"], to_np(b))
    assert_close(out["list"][0], to_np(c))
    assert out["list"][1] == [1, "x", 2.5]
    assert isinstance(out["list"][2], tuple)
    assert_close(out["list"][2][0], to_np(c))
    assert out["s"] == "text"


def test_save_rejects_what_it_cannot_store(tmp_path):
    p = tmp_path / "bad.safetensors"
    with pytest.raises(TypeError, match="dict"):
        ts.save([make(ts.float32, (1,))], p)
    with pytest.raises(TypeError, match="object"):
        ts.save({"x": object()}, p)
    with pytest.raises(TypeError, match="keys"):
        ts.save({("a", 1): make(ts.float32, (1,))}, p)
    cyc = {"t": make(ts.float32, (1,))}
    cyc["self"] = cyc
    with pytest.raises(ValueError, match="cycle"):
        ts.save(cyc, p)
    with pytest.raises(ValueError, match="reserved"):
        ts.save({"__metadata__": make(ts.float32, (1,))}, p)
    assert not p.exists()
    assert os.listdir(tmp_path) == []  # no temporary file left either


def test_failed_save_leaves_the_existing_file(tmp_path):
    p = tmp_path / "keep.safetensors"
    ts.save({"old": make(ts.float32, (2,))}, p)
    before = p.read_bytes()
    with pytest.raises(ValueError):
        ts.save({"__metadata__": make(ts.float32, (1,))}, p)
    assert p.read_bytes() == before
    os.mkdir(tmp_path / "dir")
    (tmp_path / "dir" / "child").write_bytes(b"x")
    with pytest.raises(OSError):
        ts.save({"a": make(ts.float32, (1,))}, tmp_path / "dir")  # rename onto a non-empty folder
    assert sorted(os.listdir(tmp_path)) == ["dir", "keep.safetensors"]


# ---------------------------------------------------------------------------- interop

@pytest.fixture
def st():
    return pytest.importorskip("safetensors")


@pytest.fixture
def st_np():
    return pytest.importorskip("safetensors.numpy")


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: d.name)
def test_files_we_write_load_in_safetensors(tmp_path, st_np, dtype):
    tensors = {"a": make(dtype, (2, 3), 1), "b.c": make(dtype, (0,), 2), "s": make(dtype, (), 3),
               "t": make(dtype, (3, 2), 4).T}
    p = tmp_path / "ours.safetensors"
    ts.save(tensors, p)
    theirs = st_np.load_file(str(p))
    assert set(theirs) == set(tensors)
    for k, v in tensors.items():
        assert theirs[k].dtype == np.dtype(dtype.name)
        assert theirs[k].shape == tuple(v.shape)
        np.testing.assert_array_equal(theirs[k], to_np(v))


def test_bfloat16_we_write_reads_back_in_safetensors(tmp_path, st):
    t = make(ts.bfloat16, (3,))
    p = tmp_path / "bf.safetensors"
    ts.save({"w": t}, p)
    if not hasattr(st, "deserialize"):
        pytest.skip("this safetensors has no deserialize()")
    (name, info), = st.deserialize(p.read_bytes())
    assert name == "w" and info["dtype"] == "BF16" and list(info["shape"]) == [3]
    bits = np.frombuffer(bytes(info["data"]), dtype="<u2").astype(np.uint32) << 16
    np.testing.assert_array_equal(bits.view(np.float32), round_bf16(to_np(t)))


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: d.name)
def test_files_safetensors_writes_load_here(tmp_path, st_np, dtype):
    rng = np.random.default_rng(0)
    arrays = {"z": values(dtype, (2, 3), 5), "a": values(dtype, (4,), 6), "e": values(dtype, (0, 2), 7),
              "s": values(dtype, (), 8), "big": values(dtype, (3, 1, 5), 9)}
    arrays["z"] = np.ascontiguousarray(arrays["z"])
    p = tmp_path / "theirs.safetensors"
    st_np.save_file(arrays, str(p), metadata={"format": "np", "seed": str(rng.integers(9))})
    out = ts.load(p)
    assert set(out) == set(arrays)
    for k, a in arrays.items():
        assert_close(out[k], a, dtype=dtype, rtol=0, atol=0)


def test_bfloat16_written_by_hand_loads(tmp_path):
    # 1.5, -2, 0.1 rounded: bfloat16 bit patterns in the data buffer.
    bits = np.array([0x3FC0, 0xC000, 0x3DCD], dtype="<u2")
    p = tmp_path / "bf.safetensors"
    p.write_bytes(raw_file({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}}, bits.tobytes()))
    out = ts.load(p)
    assert out["w"].dtype == ts.bfloat16
    np.testing.assert_array_equal(to_np(out["w"]), (bits.astype(np.uint32) << 16).view(np.float32))


def test_metadata_other_readers_see(tmp_path, st):
    p = tmp_path / "m.safetensors"
    ts.save({"state": {0: {"x": make(ts.float32, (2,))}}, "lr": 0.1}, p)
    with st.safe_open(str(p), framework="numpy") as f:
        meta = f.metadata()
        assert set(f.keys()) == {"state.0.x"}
    assert json.loads(meta["tessera.structure"])  # plain JSON text


# ---------------------------------------------------------------------------- corrupted files

CORRUPT = {
    "empty": (b"", "truncated"),
    "short": (b"\x01\x02\x03", "truncated"),
    "length_past_end": (raw_file({}, length=1000), "truncated"),
    "absurd_length": (raw_file({}, length=2**63), "absurd"),
    "not_json": (raw_file(b"{nope"), "not valid JSON"),
    "not_object": (raw_file([1, 2]), "JSON object"),
    "unknown_dtype": (raw_file({"w": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}, b"\0"),
                      "unsupported dtype"),
    "size_mismatch": (raw_file({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}}, bytes(16)),
                      "needs 16 bytes"),
    "out_of_bounds": (raw_file({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)),
                      "out of bounds"),
    "overlap": (raw_file({"a": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "I32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)), "overlap"),
    "negative_dim": (raw_file({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}), "negative"),
    "overflow": (raw_file({"w": {"dtype": "U8", "shape": [2**40, 2**40], "data_offsets": [0, 0]}}), "overflows"),
    "duplicate": (raw_file(b'{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                           b'"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"\0\0"), "duplicate"),
    "bad_structure": (raw_file({"__metadata__": {"tessera.structure": '{"tensor": "missing"}'}}), "missing"),
    "structure_not_json": (raw_file({"__metadata__": {"tessera.structure": "{"}}), "not valid JSON"),
}


@pytest.mark.parametrize("case", list(CORRUPT))
def test_corrupted_files_raise_value_error(tmp_path, case):
    data, fragment = CORRUPT[case]
    p = tmp_path / f"{case}.safetensors"
    p.write_bytes(data)
    with pytest.raises(ValueError, match=fragment) as e:
        ts.load(p)
    assert str(p) in str(e.value)
    with pytest.raises(ValueError, match=fragment):
        ts._serialization.loads(data)


def test_corrupted_by_truncation_and_bit_flips(tmp_path):
    """Every prefix of a valid file, and each single-byte change of its header, loads or raises
    ValueError: never another error, never a crash."""
    p = tmp_path / "ok.safetensors"
    ts.save({"a": make(ts.float32, (2, 2)), "b": make(ts.int8, (3,))}, p)
    good = p.read_bytes()
    for n in range(len(good)):
        with pytest.raises(ValueError):
            ts._serialization.loads(good[:n])
    _, data_start = header_of(p)
    for i in range(data_start):
        for flip in (0x01, 0x80):
            bad = bytearray(good)
            bad[i] ^= flip
            try:
                ts._serialization.loads(bytes(bad))
            except ValueError:
                pass


def test_missing_file_is_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        ts.load(tmp_path / "nope.safetensors")
    with pytest.raises(OSError):
        ts.load(tmp_path)  # a folder
