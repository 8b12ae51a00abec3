"""ts.export: export (one graph, signature, dynamic dims), the archive (save/load and its faults)
and the C++ runtime through its runner, tessera-export-run. The oracle is Tessera eager (itself
checked against NumPy and PyTorch elsewhere): an exported program computes what the module does;
the signature's names are checked against torch.export's when PyTorch is importable."""
import hashlib
import io
import json
import math
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from conftest import to_np

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F
from tessera.export import Dim
from tessera.export._cli import runner_path


def close(a, b, atol=1e-5, rtol=1e-5):
    np.testing.assert_allclose(to_np(a), to_np(b), atol=atol, rtol=rtol)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.bn = nn.BatchNorm1d(16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x)))).softmax(-1)


class Block(nn.Module):
    """A GPT block with a causal mask sliced to the sequence length: shapes the dims move."""

    def __init__(self, d=32, heads=4, vocab=50, context=16):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(context, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, vocab)
        self.register_buffer("mask", ts.tril(ts.ones(context, context)).view(1, 1, context, context))

    def forward(self, idx):
        B, T = idx.shape
        x = self.emb(idx) + self.pos(ts.arange(T))
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=2)
        hd = x.shape[-1] // self.heads
        q, k, v = (t.view(B, T, self.heads, hd).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, -1)
        x = x + self.proj(y)
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


def run_cli(*args, check=True):
    r = subprocess.run([runner_path(), *map(str, args)], capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"tessera-export-run failed ({r.returncode}): {r.stderr}")
    return r


def cli_outputs(archive, inputs, tmp_path, *extra):
    ts.save({f"in{k}": t for k, t in enumerate(inputs)}, tmp_path / "in.safetensors")
    run_cli(archive, "--input", tmp_path / "in.safetensors", "--output", tmp_path / "out.safetensors", *extra)
    out = ts.load(tmp_path / "out.safetensors")
    return [out[f"output_{k}"] for k in range(len(out))]


# --- export -----------------------------------------------------------------------------------

def test_export_runs_like_eager_with_the_signature_of_torch_export():
    m = MLP().eval()
    x = ts.randn(5, 8)
    ep = ts.export.export(m, (x,))
    close(ep.module()(x), m(x))
    sig = ep.graph_signature
    assert sig.parameters == ["fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "fc2.weight", "fc2.bias"]
    assert sig.buffers == ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert sig.user_inputs == ["x"] and sig.user_outputs == ["output_0"]
    assert sig.buffers_to_mutate == {}
    assert set(ep.state_dict) == set(m.state_dict())
    placeholders = [n.name for n in ep.graph.nodes if n.op == "placeholder"]
    assert placeholders[0] == "p_fc1_weight" and placeholders[-1] == "x"
    assert "p_fc1_weight" in str(ep) and "native_batch_norm" in " ".join(ep.operators())


@pytest.mark.torch
def test_signature_names_match_torch_export():
    import torch
    tm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    m = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4)).eval()
    m.load_state_dict({name: ts.tensor(t.numpy()) for name, t in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    tep = torch.export.export(tm, (torch.tensor(x),))
    ep = ts.export.export(m, (ts.tensor(x),))
    assert list(ep.graph_signature.parameters) == list(tep.graph_signature.parameters)
    assert list(ep.graph_signature.buffers) == list(tep.graph_signature.buffers)
    ours = [s.arg.name for s in ep.graph_signature.input_specs]
    theirs = [s.arg.name for s in tep.graph_signature.input_specs]
    assert ours == theirs
    close(ep.module()(ts.tensor(x)), tep.module()(torch.tensor(x)).detach().numpy())


def test_training_mode_buffer_updates_are_outputs_and_export_leaves_the_module_alone():
    m = MLP().train()
    x = ts.randn(6, 8)
    before = m.bn.running_mean.clone()
    ep = ts.export.export(m, (x,))
    close(m.bn.running_mean, before, atol=0, rtol=0)  # exporting ran forward, then restored the buffers
    assert "bn.running_mean" in ep.graph_signature.buffers_to_mutate.values()
    em = ep.module()
    y = em(x)
    y_ref = m(x)                      # eager updates m's statistics the same way
    close(y, y_ref)
    close(em.bn.running_mean, m.bn.running_mean)
    close(em.bn.running_var, m.bn.running_var)


def test_kwargs_nested_inputs_and_non_tensor_outputs():
    class M(nn.Module):
        def forward(self, pair, *, scale):
            a, b = pair
            return {"sum": (a + b) * scale["s"], "n": 3}

    m = M()
    a, b, s = ts.randn(3), ts.randn(3), ts.randn(3)
    ep = ts.export.export(m, ((a, b),), {"scale": {"s": s}})
    out = ep.module()((a, b), scale={"s": s})
    assert out["n"] == 3
    close(out["sum"], (a + b) * s)
    with pytest.raises(TypeError, match="structure"):
        ep.module()(a, scale={"s": s})


def test_data_dependent_branch_names_the_line():
    class M(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # reads a value: one graph cannot hold both paths
                return x + 1
            return x - 1

    with pytest.raises(ts.export.ExportError, match=r"test_export.py:\d+ .*if x.sum\(\) > 0.*ts.where"):
        ts.export.export(M(), (ts.randn(4),))


def test_bad_arguments():
    with pytest.raises(ValueError, match="Expected `mod` to be an instance of `tessera.nn.Module`"):
        ts.export.export(lambda x: x, (ts.randn(2),))
    with pytest.raises(ValueError, match="tuple"):
        ts.export.export(MLP(), ts.randn(2, 8))
    with pytest.raises(ValueError, match="not arguments of forward"):
        ts.export.export(MLP().eval(), (ts.randn(4, 8),), dynamic_shapes={"y": {0: Dim("b")}})


# --- dynamic dims -----------------------------------------------------------------------------

def test_dynamic_batch_one_program_for_every_size():
    m = MLP().eval()
    ep = ts.export.export(m, (ts.randn(5, 8),), dynamic_shapes={"x": {0: Dim("batch", max=64)}})
    assert ep.range_constraints == {"batch": (1, 64)}
    em = ep.module()
    for n in (1, 2, 3, 17, 64):
        x = ts.randn(n, 8)
        close(em(x), m(x))
    with pytest.raises(ValueError, match=r"dim 'batch'\) in \[1, 64\], got 65"):
        em(ts.randn(65, 8))
    with pytest.raises(ValueError, match=r"shape\[1\] == 8 \(a static dim\), got 9"):
        em(ts.randn(4, 9))
    with pytest.raises(ValueError, match="rank 2"):
        em(ts.randn(4, 8, 1))
    with pytest.raises(ValueError, match="dtype"):
        em(ts.randn(4, 8).double())


def test_dynamic_batch_and_sequence_in_a_transformer():
    m = Block().eval()
    idx = ts.randint(0, 50, (3, 10))
    batch, seq = Dim("batch", max=32), Dim("seq", max=16)
    ep = ts.export.export(m, (idx,), dynamic_shapes={"idx": {0: batch, 1: seq}})
    em = ep.module()
    for b, t in ((1, 1), (2, 2), (5, 16), (32, 7), (3, 10), (1, 16)):
        x = ts.randint(0, 50, (b, t))
        close(em(x), m(x), atol=1e-4)


def test_size_one_examples_and_shape_branches_are_refused():
    m = MLP().eval()
    with pytest.raises(ts.export.ConstraintViolationError, match="sizes 0 and 1 specialise"):
        ts.export.export(m, (ts.randn(1, 8),), dynamic_shapes={"x": {0: Dim("batch")}})

    class Branchy(nn.Module):
        def forward(self, x):
            return x * 2 if x.shape[0] > 4 else x + 2

    with pytest.raises(ts.export.ConstraintViolationError, match="batch"):
        ts.export.export(Branchy(), (ts.randn(4, 3),), dynamic_shapes=({0: Dim("batch", min=2, max=8)},))


def test_run_decompositions_replaces_an_operator():
    m = MLP().eval()
    x = ts.randn(5, 8)
    ep = ts.export.export(m, (x,))
    same = ep.run_decompositions()
    assert same.operators() == ep.operators()
    relu = ts.ops.aten.relu.default
    ep2 = ep.run_decompositions({relu: lambda t: ts.clamp(t, min=0.0)})
    assert "relu" not in ep2.operators() and any(op.startswith("clamp") for op in ep2.operators())
    close(ep2.module()(x), m(x))


# --- the archive -----------------------------------------------------------------------------

def test_save_load_round_trip(tmp_path):
    m = MLP().eval()
    x = ts.randn(5, 8)
    ep = ts.export.export(m, (x,), dynamic_shapes={"x": {0: Dim("batch", max=64)}})
    ts.export.save(ep, tmp_path / "m.tspt")
    buf = io.BytesIO()
    ts.export.save(ep, buf)
    for source in (tmp_path / "m.tspt", io.BytesIO(buf.getvalue())):
        ep2 = ts.export.load(source)
        for n in (2, 9):
            xx = ts.randn(n, 8)
            close(ep2.module()(xx), m(xx))
        assert ep2.range_constraints == ep.range_constraints
        assert ep2.graph_signature == ep.graph_signature
    meta = ep2.metadata
    assert meta["format_version"] == ts.export.ARCHIVE_FORMAT_VERSION and meta["target_devices"] == ["cpu"]
    assert meta["producer"] == f"tessera {ts.__version__}" and "matmul" in meta["operators"]


def _rewrite(src, dst, change, fix_checksum=True):
    """Copies an archive, passing each part's bytes through change(name, data)."""
    with zipfile.ZipFile(src) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    meta = json.loads(parts["metadata.json"])
    for name in list(parts):
        if name != "metadata.json":
            parts[name] = change(name, parts[name])
            if fix_checksum:
                meta["parts"][name] = fix_checksum(parts[name]) if callable(fix_checksum) else \
                    ts.export._archive.part_checksum(parts[name])
    parts["metadata.json"] = change("metadata.json", json.dumps(meta).encode())
    with zipfile.ZipFile(dst, "w") as z:
        for name, data in parts.items():
            z.writestr(name, data)


def _format_version(version):
    """A _rewrite change that sets metadata.json's format_version."""
    def change(name, data):
        if name != "metadata.json":
            return data
        meta = json.loads(data)
        meta["format_version"] = version
        return json.dumps(meta).encode()
    return change


@pytest.fixture
def archive(tmp_path):
    m = MLP().eval()
    ep = ts.export.export(m, (ts.randn(5, 8),), dynamic_shapes={"x": {0: Dim("batch", max=64)}})
    path = tmp_path / "m.tspt"
    ts.export.save(ep, path)
    return m, path


def _broken_archives(path, tmp_path):
    """(name, archive, message expected from Python and from the C++ runtime)."""
    data = path.read_bytes()
    out = []
    (tmp_path / "truncated.tspt").write_bytes(data[: len(data) // 2])
    out.append(("truncated", tmp_path / "truncated.tspt", "not an export archive"))
    (tmp_path / "empty.tspt").write_bytes(b"")
    out.append(("empty", tmp_path / "empty.tspt", "not an export archive"))
    _rewrite(path, tmp_path / "tampered.tspt",
             lambda n, d: d.replace(b'"alpha"', b'"alpha"') if n != "weights.safetensors" else d[:-4] + b"\0\0\0\1",
             fix_checksum=False)
    out.append(("tampered", tmp_path / "tampered.tspt", "checksum of weights.safetensors does not match"))

    _rewrite(path, tmp_path / "newer.tspt", _format_version(99))
    out.append(("newer", tmp_path / "newer.tspt", "format version 99"))
    return out


def test_format_1_archives_with_sha256_sums_still_load_and_damage_is_caught(archive, tmp_path):
    """Format 2 checks parts with XXH3-128; archives written as format 1 (SHA-256) still load,
    in Python and in the C++ runtime, and a damaged part of either is refused."""
    m, path = archive
    _rewrite(path, tmp_path / "v1.tspt", _format_version(1), fix_checksum=lambda d: hashlib.sha256(d).hexdigest())
    with zipfile.ZipFile(tmp_path / "v1.tspt") as z:
        sums = json.loads(z.read("metadata.json"))["parts"]
    assert all(len(v) == 64 and ":" not in v for v in sums.values())
    x = ts.randn(4, 8)
    close(ts.export.load(tmp_path / "v1.tspt").module()(x), m(x))
    (y,) = cli_outputs(tmp_path / "v1.tspt", [x], tmp_path)
    close(y, m(x))
    with zipfile.ZipFile(path) as z:
        sums = json.loads(z.read("metadata.json"))["parts"]
    assert all(v.startswith("xxh3-128:") and len(v) == 9 + 32 for v in sums.values())
    for src in (path, tmp_path / "v1.tspt"):  # one bit of the weights flipped, the sums kept
        _rewrite(src, tmp_path / "bad.tspt",
                 lambda n, d: d[:-1] + bytes([d[-1] ^ 1]) if n == "weights.safetensors" else d, fix_checksum=False)
        with pytest.raises(ts.export.ArchiveError, match="checksum of weights.safetensors does not match"):
            ts.export.load(tmp_path / "bad.tspt")
        r = run_cli(tmp_path / "bad.tspt", "--describe", check=False)
        assert r.returncode == 1 and "checksum of weights.safetensors does not match" in r.stderr


def test_broken_archives_are_clear_errors_in_python_and_cpp(archive, tmp_path):
    _, path = archive
    ts.save({"x": ts.randn(4, 8)}, tmp_path / "in.safetensors")
    for name, broken, message in _broken_archives(path, tmp_path):
        with pytest.raises(ts.export.ArchiveError, match=message):
            ts.export.load(broken)
        r = run_cli(broken, "--input", tmp_path / "in.safetensors", check=False)
        assert r.returncode == 1, (name, r.stderr)
        assert message in r.stderr, (name, r.stderr)


def test_weights_come_first_stored_and_aligned(archive):
    # The C++ runtime's tensors view the weights in the mapped archive (no copy) only in this layout.
    _, path = archive
    with zipfile.ZipFile(path) as z:
        first = z.infolist()[0]
        assert first.filename == "weights.safetensors" and first.compress_type == zipfile.ZIP_STORED
        assert z.testzip() is None
    data = path.read_bytes()
    name_length = int.from_bytes(data[first.header_offset + 26:first.header_offset + 28], "little")
    extra_length = int.from_bytes(data[first.header_offset + 28:first.header_offset + 30], "little")
    start = first.header_offset + 30 + name_length + extra_length
    assert start % 64 == 0
    with zipfile.ZipFile(path) as z:
        assert data[start:start + first.file_size] == z.read("weights.safetensors")


def test_cpp_runtime_reads_parts_in_any_order_and_compression(archive, tmp_path):
    # An archive another writer made (weights last and deflated) loads through the copying path.
    m, path = archive
    with zipfile.ZipFile(path) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    other = tmp_path / "reordered.tspt"
    with zipfile.ZipFile(other, "w") as z:
        for name in reversed(list(parts)):
            z.writestr(name, parts[name], compress_type=zipfile.ZIP_DEFLATED)
    x = ts.randn(3, 8)
    (y,) = cli_outputs(other, [x], tmp_path)
    close(y, m(x))


def test_large_weights_with_a_flipped_byte_are_refused(tmp_path):
    # Weights of 2 MB are checked on a thread of their own while the graph loads; a flipped byte in
    # the middle is still a clear error, from Python and from C++.
    m = nn.Sequential(nn.Linear(1024, 512), nn.ReLU()).eval()
    ep = ts.export.export(m, (ts.randn(2, 1024),))
    path = tmp_path / "big.tspt"
    ts.export.save(ep, path)
    x = ts.randn(2, 1024)
    (y,) = cli_outputs(path, [x], tmp_path)
    close(y, m(x))
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("weights.safetensors")
    data = bytearray(path.read_bytes())
    middle = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.file_size // 2
    data[middle] ^= 0x40
    (tmp_path / "flipped.tspt").write_bytes(bytes(data))
    # Python's zipfile checks the zip's CRC-32 first; the C++ runtime views the bytes in place and
    # relies on the SHA-256.
    with pytest.raises(ts.export.ArchiveError, match="part weights.safetensors is unreadable.*CRC"):
        ts.export.load(tmp_path / "flipped.tspt")
    message = "checksum of weights.safetensors does not match"
    r = run_cli(tmp_path / "flipped.tspt", "--input", tmp_path / "in.safetensors", check=False)
    assert r.returncode == 1 and message in r.stderr, r.stderr


def test_an_operator_no_plugin_provides(archive, tmp_path):
    _, path = archive
    _rewrite(path, tmp_path / "unknown.tspt",
             lambda n, d: d.replace(b'"op":"relu"', b'"op":"vendorx::fused_relu"') if n == "graph.json" else d)
    r = run_cli(tmp_path / "unknown.tspt", "--describe", check=False)
    assert r.returncode == 1 and "operator 'vendorx::fused_relu', which no loaded plugin provides" in r.stderr
    with pytest.raises(ts.export.ArchiveError, match="vendorx::fused_relu"):
        ts.export.load(tmp_path / "unknown.tspt")


def test_a_graph_that_does_not_fit_the_schema(archive, tmp_path):
    _, path = archive
    _rewrite(path, tmp_path / "bad.tspt",
             lambda n, d: d.replace(b'"op":"relu"', b'"op":"transpose.int"') if n == "graph.json" else d)
    r = run_cli(tmp_path / "bad.tspt", "--describe", check=False)
    assert r.returncode == 1 and "transpose.int with 1 arguments; its schema takes 3" in r.stderr


def test_two_processes_saving_one_path(tmp_path):
    code = ("import sys, tessera as ts\nm = ts.nn.Linear(64, 64)\n"
            "ep = ts.export.export(m, (ts.randn(8, 64),))\n"
            "for _ in range(5): ts.export.save(ep, sys.argv[1])\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "same.tspt")], env=os.environ.copy())
             for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    ep = ts.export.load(tmp_path / "same.tspt")  # whole: one writer's archive, never a mix
    assert ep.module()(ts.randn(8, 64)).shape == (8, 64)
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]


# --- the C++ runtime --------------------------------------------------------------------------

def test_cpp_runtime_matches_eager_at_every_batch(archive, tmp_path):
    m, path = archive
    for n in (1, 2, 31, 64):
        x = ts.randn(n, 8)
        (y,) = cli_outputs(path, [x], tmp_path)
        close(y, m(x))


def test_cpp_runtime_transformer_and_threads(tmp_path):
    m = Block().eval()
    ep = ts.export.export(m, (ts.randint(0, 50, (3, 10)),),
                          dynamic_shapes={"idx": {0: Dim("batch", max=32), 1: Dim("seq", max=16)}})
    ts.export.save(ep, tmp_path / "gpt.tspt")
    for b, t in ((1, 1), (2, 16), (7, 5)):
        x = ts.randint(0, 50, (b, t))
        (y,) = cli_outputs(tmp_path / "gpt.tspt", [x], tmp_path, "--threads", "4")
        close(y, m(x), atol=1e-4)


def test_cpp_runtime_input_errors(archive, tmp_path):
    _, path = archive
    cases = [([ts.randn(65, 8)], r"dim 'batch'\) in \[1, 64\], got 65"),
             ([ts.randn(4, 8, 2)], "expected input x of rank 2, got rank 3"),
             ([ts.randn(4, 7)], r"x.shape\[1\] == 8 \(a static dim\), got 7"),
             ([ts.randn(4, 8).double()], "expected input x of dtype float32, got float64"),
             ([ts.randn(4, 8), ts.randn(4, 8)], "the program takes 1 inputs")]
    import re
    for inputs, message in cases:
        ts.save({f"in{k}": t for k, t in enumerate(inputs)}, tmp_path / "in.safetensors")
        r = run_cli(path, "--input", tmp_path / "in.safetensors", check=False)
        assert r.returncode == 1 and re.search(message, r.stderr), (message, r.stderr)


def test_cpp_runtime_training_mode_buffers(tmp_path):
    m = MLP().train()
    x = ts.randn(6, 8)
    ep = ts.export.export(m, (x,))
    ts.export.save(ep, tmp_path / "train.tspt")
    before = (tmp_path / "train.tspt").read_bytes()
    (y,) = cli_outputs(tmp_path / "train.tspt", [x], tmp_path)
    close(y, m(x))
    # The runtime's buffers view the mapped archive privately: writing them leaves the file alone.
    assert (tmp_path / "train.tspt").read_bytes() == before


# --- ahead-of-time kernels ----------------------------------------------------------------------

@pytest.fixture
def aot_archive(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    # (Linear + GELU would fold into one library call: the LayerNorm's row and the GELU after it make the kernel)
    m = nn.Sequential(nn.Linear(16, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 16)).eval()
    ep = ts.export.export(m, (ts.randn(8, 16),), dynamic_shapes=({0: Dim("batch", max=64)},))
    aep = ts.export.aot_compile(ep, sizes=[{"batch": 8}, {"batch": 32}])
    path = tmp_path / "aot.tspt"
    ts.export.save(aep, path)
    return m, path


def test_aot_kernels_run_only_when_allowed(aot_archive, tmp_path):
    m, path = aot_archive
    assert ts.export.load(path).native is False
    ep = ts.export.load(path, allow_native=True)
    assert ep.native, ep.native_reason
    em = ep.module()
    for n in (8, 32, 5):  # 5: no kernels for it, the portable graph runs
        x = ts.randn(n, 16)
        close(em(x), m(x), atol=1e-5)
    assert "ahead-of-time, for 2 size set(s)" in run_cli(path, "--describe", "--allow-native").stdout
    assert "the portable graph (ahead-of-time kernels: not asked" in run_cli(path, "--describe").stdout
    for n in (8, 5):
        x = ts.randn(n, 16)
        (y,) = cli_outputs(path, [x], tmp_path, "--allow-native", "--threads", "3")
        close(y, m(x), atol=1e-5)


def test_aot_kernels_for_other_cpus_are_not_used(aot_archive, tmp_path):
    m, path = aot_archive

    def other_cpu(name, data):
        if name != "aot/cpu/aot.json":
            return data
        manifest = json.loads(data)
        manifest["cpu_features"] += " imaginary_isa_9000"
        return json.dumps(manifest).encode()
    _rewrite(path, tmp_path / "other.tspt", other_cpu)
    ep = ts.export.load(tmp_path / "other.tspt", allow_native=True)
    assert not ep.native and "imaginary_isa_9000" in ep.native_reason
    out = run_cli(tmp_path / "other.tspt", "--describe", "--allow-native").stdout
    assert "portable graph" in out and "imaginary_isa_9000" in out
    x = ts.randn(8, 16)
    (y,) = cli_outputs(tmp_path / "other.tspt", [x], tmp_path, "--allow-native")
    close(y, m(x), atol=1e-5)


def test_aot_kernels_of_another_graph_are_refused(aot_archive, tmp_path):
    _, path = aot_archive
    with zipfile.ZipFile(path) as z:
        other_library = z.read("aot/cpu/kernels_1.so")  # the kernels for batch 32, not 8
    _rewrite(path, tmp_path / "swapped.tspt",
             lambda n, d: other_library if n == "aot/cpu/kernels_0.so" else d)
    with pytest.raises(RuntimeError, match="not generated from this graph"):
        ts.export.load(tmp_path / "swapped.tspt", allow_native=True)
    # The C++ runtime hands each size set's kernels to the inductor on the first run at those sizes
    # (loading stays quick with many size sets): the batch-8 run is refused, batch 32 runs.
    for batch, refused in ((8, True), (32, False)):
        ts.save({"x": ts.randn(batch, 16)}, tmp_path / "in.safetensors")
        r = run_cli(tmp_path / "swapped.tspt", "--allow-native", "--input", tmp_path / "in.safetensors", check=False)
        assert (r.returncode == 1 and "not generated from this graph" in r.stderr) == refused, (batch, r.stderr)
    assert ts.export.load(tmp_path / "swapped.tspt").native is False  # without the opt-in: portable, fine


def test_aot_compile_arguments():
    ep = ts.export.export(nn.Linear(4, 4), (ts.randn(3, 4),), dynamic_shapes=({0: Dim("batch", max=8)},))
    with pytest.raises(ValueError, match="unknown target 'tpu'"):
        ts.export.aot_compile(ep, target="tpu")
    with pytest.raises(ValueError, match="outside"):
        ts.export.aot_compile(ep, sizes=[{"batch": 9}])
    with pytest.raises(ValueError, match="not dynamic dims"):
        ts.export.aot_compile(ep, sizes=[{"seq": 4}])


def test_aot_cuda_kernels_are_ptx_for_the_cpp_runtime_on_a_cuda_device(tmp_path, monkeypatch):
    """aot_compile(target="cuda") stores the PTX of the graph's CUDA kernels (NVRTC, no GPU
    needed), each led by the key of the source it came from. A program on the CPU (here: no GPU)
    says why they are not used and runs the portable graph; on a device the runtime hands them
    to the inductor after Program::to (run by backends/cuda/device_check.sh's pytest step)."""
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    m = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16), nn.Tanh()).eval()
    ep = ts.export.export(m, (ts.randn(8, 16),), dynamic_shapes=({0: Dim("batch", max=64)},))
    try:
        aep = ts.export.aot_compile(ep, target="cuda", sizes=[{"batch": 8}, {"batch": 32}])
    except RuntimeError as e:
        if "not installed" in str(e):
            pytest.skip(str(e))
        raise
    path = tmp_path / "cuda.tspt"
    ts.export.save(aep, path)
    with zipfile.ZipFile(path) as z:
        manifest = json.loads(z.read("aot/cuda/aot.json"))
        assert manifest["target"] == "cuda" and manifest["arch"] == "compute_75"
        assert [e["sizes"] for e in manifest["entries"]] == [[8], [32]]
        for e in manifest["entries"]:
            ptx = z.read(e["library"]).decode()
            assert ptx.startswith("// tessera source key ") and ".entry tessera_kernel_0(" in ptx
        assert json.loads(z.read("metadata.json"))["aot_targets"] == ["cuda"]
    ep2 = ts.export.load(path, allow_native=True)
    assert not ep2.native and "Program::to" in ep2.native_reason
    out = run_cli(path, "--describe", "--allow-native").stdout
    assert "portable graph" in out and "kernels are for cuda" in out, out
    x = ts.randn(8, 16)
    close(ep2.module()(x), m(x), atol=1e-5)
    (y,) = cli_outputs(path, [x], tmp_path, "--allow-native")
    close(y, m(x), atol=1e-5)


def test_tensors_made_from_python_data_inside_forward(tmp_path):
    """ts.tensor([...]) and a composite's scalar tensors are filled by the host, not by an
    operator: the capture keeps their contents as constants (and an in-place write to one starts
    from a fresh copy on every run)."""
    class M(nn.Module):
        def forward(self, x, i):
            t = ts.tensor([1.0, 1.0, 1.0])
            t.add_(1.0)
            return (x[ts.tensor([2, 0])], x + ts.tensor([1.0, 2.0, 3.0]), 2 ** x, i // 3 + i % 3, x * t,
                    ts.empty(3).fill_(4.0) + 1)

    m = M()
    x, i = ts.randn(4, 3), ts.arange(6)
    ep = ts.export.export(m, (x, i))
    assert "empty" in ep.operators()  # the one an operator fills stays a node
    for _ in range(2):  # a second run sees the same constants
        for got, want in zip(ep.module()(x, i), m(x, i)):
            close(got, want)
    ts.export.save(ep, tmp_path / "lit.tspt")
    ts.save({"x": x, "i": i}, tmp_path / "in.safetensors")
    run_cli(tmp_path / "lit.tspt", "--input", tmp_path / "in.safetensors", "--output", tmp_path / "out.safetensors")
    out = ts.load(tmp_path / "out.safetensors")
    for k, want in enumerate(m(x, i)):
        close(out[f"output_{k}"], want)
