#!/usr/bin/env python3
"""ts.export end to end, in one run: a nanoGPT-shaped GPT and a ResNet-18-shaped CNN exported with
a dynamic batch (one archive for batch 1..64), loaded and run from Python and from C++ (the
runner, tessera-export-run), checked against eager; timings beside eager, ts.compile and PyTorch
eager; the C++ runtime's per-call overhead on a 30-operator graph; a new process's load + first
run; the install footprint of a C++ deployment beside libtorch's; and the error each bad input
gets.

    PYTHONPATH=build/release/python python3 benchmarks/export.py [--quick]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_PYTHON = os.path.join(ROOT, "build", "release", "python")
if os.path.isdir(os.path.join(BUILD_PYTHON, "tessera")) and BUILD_PYTHON not in sys.path:
    sys.path.insert(0, BUILD_PYTHON)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import gpt_model  # noqa: E402
from compile import median_time  # noqa: E402  (benchmarks/compile.py)
import resnet_model  # noqa: E402
import tessera as ts  # noqa: E402
from tessera.export._cli import runner_path  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:
    torch = None

RUNNER = runner_path()


def runner(*args):
    r = subprocess.run([RUNNER, *map(str, args)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return r.stdout


def max_diff(a, b):
    return float(np.abs(a.detach().numpy().astype(np.float64) - b.detach().numpy()).max())


def cpp_outputs(archive, x, work):
    ts.save({"x": x}, os.path.join(work, "in.safetensors"))
    runner(archive, "--input", os.path.join(work, "in.safetensors"), "--output", os.path.join(work, "out.safetensors"))
    return ts.load(os.path.join(work, "out.safetensors"))["output_0"]


def cpp_median_us(archive, x, work, reps, *extra):
    ts.save({"x": x}, os.path.join(work, "in.safetensors"))
    out = runner(archive, "--input", os.path.join(work, "in.safetensors"), "--benchmark", reps, *extra)
    return float(out.split("median ")[1].split(" us")[0]), out.strip()


def model_rows(name, model, make_input, sizes, timing_batch, reps, work, torch_model=None):
    print(f"\n== {name}")
    model.eval()
    t0 = time.perf_counter()
    ep = ts.export.export(model, (make_input(2),), dynamic_shapes=({0: ts.export.Dim("batch", min=1, max=64)},))
    export_s = time.perf_counter() - t0
    archive = os.path.join(work, f"{name}.tspt")
    t0 = time.perf_counter()
    ts.export.save(ep, archive)
    save_s = time.perf_counter() - t0
    print(f"export {export_s:.2f} s ({len(ep.operators())} operators, {len(ep._ir['nodes'])} nodes), save "
          f"{save_s:.2f} s, archive {os.path.getsize(archive) / 2**20:.1f} MiB")
    loaded = ts.export.load(archive).module()
    with ts.no_grad():
        for n in sizes:
            x = make_input(n)
            ref = model(x)
            print(f"batch {n:>2}: |python - eager| = {max_diff(loaded(x), ref):.2e}   "
                  f"|C++ - eager| = {max_diff(cpp_outputs(archive, x, work), ref):.2e}")
        x = make_input(timing_batch)
        eager = median_time(lambda: model(x), reps)
        exported = median_time(lambda: loaded(x), reps)
        compiled_fn = ts.compile(model)
        compiled = median_time(lambda: compiled_fn(x), reps)
    cpp_us, _ = cpp_median_us(archive, x, work, reps)
    # The same program with the inductor's kernels built ahead of time for this batch size.
    t0 = time.perf_counter()
    aot_archive = os.path.join(work, f"{name}_aot.tspt")
    ts.export.save(ts.export.aot_compile(ep, sizes=[{"batch": timing_batch}, {"batch": 1}]), aot_archive)
    aot_s = time.perf_counter() - t0
    aot_us, _ = cpp_median_us(aot_archive, x, work, reps, "--allow-native")
    runner(
        aot_archive, "--allow-native", "--input", os.path.join(work, "in.safetensors"), "--output",
        os.path.join(work, "out.safetensors"))
    aot_out = ts.load(os.path.join(work, "out.safetensors"))["output_0"]
    print(f"aot_compile + save {aot_s:.1f} s; AOT kernels |C++ - eager| = {max_diff(aot_out, model(x)):.2e}")
    row = (f"batch {timing_batch} forward: eager {eager * 1e3:.1f} ms | ep.module() {exported * 1e3:.1f} ms | "
           f"C++ portable {cpp_us / 1e3:.1f} ms | C++ AOT {aot_us / 1e3:.1f} ms | ts.compile {compiled * 1e3:.1f} ms "
           f"(AOT/ts.compile {compiled * 1e6 / aot_us:.2f}x)")
    if torch_model is not None:
        tx = torch.randn(*make_input(timing_batch).shape) if name != "gpt" else torch.randint(0, 65, (timing_batch, 64))
        with torch.no_grad():
            row += f" | torch eager {median_time(lambda: torch_model(tx), reps) * 1e3:.1f} ms"
    print(row)
    # A new process: load the archive, run once (the runner), against a new Python process doing the same.
    cold_start_rows(archive, aot_archive, make_input, timing_batch, work)


def cold_start(archive, input_path, *extra, runs=5):
    """Medians over `runs` new runner processes: (wall ms, load ms, first run ms)."""
    rows = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = runner(archive, "--input", input_path, "--timings", *extra)
        wall = (time.perf_counter() - t0) * 1e3
        line = [ln for ln in out.splitlines() if ln.startswith("load ")][0]  # "load X ms, first run Y ms"
        rows.append((wall, float(line.split()[1]), float(line.split("first run ")[1].split()[0])))
    return [float(np.median([r[k] for r in rows])) for k in range(3)]


def cold_start_rows(archive, aot_archive, make_input, timing_batch, work):
    for batch in sorted({1, timing_batch}):
        path = os.path.join(work, f"cold{batch}.safetensors")
        ts.save({"x": make_input(batch)}, path)
        portable = cold_start(archive, path)
        aot = cold_start(aot_archive, path, "--allow-native")
        code = f"import tessera as ts; x = ts.load({path!r})['x']; ts.export.load({archive!r}).module()(x)"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, timeout=600)
        cold_py = (time.perf_counter() - t0) * 1e3
        print(f"new process, load + first run at batch {batch} (medians of 5; the process's wall time = start + load "
              f"+ first run + exit): C++ runner portable {portable[0]:.0f} ms (load {portable[1]:.0f}, first run "
              f"{portable[2]:.0f}) | AOT {aot[0]:.0f} ms (load {aot[1]:.0f}, first run {aot[2]:.0f}) | "
              f"Python {cold_py:.0f} ms")


class Chain30(ts.nn.Module):
    """30 operator calls on small tensors: what the runtime adds per call shows, not the kernels."""

    def forward(self, x):
        for _ in range(6):
            x = ts.tanh(x * 1.01 + 0.1).relu() - 0.05
        return x


def overhead_row(work):
    print("\n== per-call overhead, 30-operator graph on 64 floats")
    ep = ts.export.export(Chain30(), (ts.randn(64),))
    archive = os.path.join(work, "chain30.tspt")
    ts.export.save(ep, archive)
    print(f"{len(ep._ir['nodes'])} nodes")
    _, line = cpp_median_us(archive, ts.randn(64), work, 20000)
    print("C++ runtime:", line)


def footprint_row():
    print("\n== install footprint of a C++ deployment")
    lib = os.path.join(ROOT, "build", "release", "lib")
    parts = [os.path.join(lib, "libtessera.so"), os.path.join(lib, "tessera", "plugins", "libtessera_cpu.so"),
             os.path.join(lib, "libtessera-cpp.so"), os.path.join(lib, "libtessera-export.so")]
    ours = sum(os.path.getsize(os.path.realpath(p)) for p in parts)
    print("Tessera (libtessera + CPU plugin + C++ API + export runtime): " +
          ", ".join(f"{os.path.basename(p)} {os.path.getsize(os.path.realpath(p)) / 2**20:.1f}" for p in parts) +
          f" = {ours / 2**20:.1f} MiB")
    if torch is not None:
        tlib = os.path.join(os.path.dirname(torch.__file__), "lib")
        names = ["libtorch_cpu.so", "libtorch.so", "libc10.so"] + [os.path.basename(p) for p in glob.glob(os.path.join(tlib, "libgomp*.so*"))]
        sizes = {n: os.path.getsize(os.path.join(tlib, n)) for n in names if os.path.exists(os.path.join(tlib, n))}
        total = sum(sizes.values())
        print("libtorch CPU (what an AOTInductor deployment links): " +
              ", ".join(f"{n} {s / 2**20:.1f}" for n, s in sizes.items()) +
              f" = {total / 2**20:.1f} MiB  ({total / ours:.1f}x Tessera's)")


def bad_input_rows(work):
    print("\n== bad input: the error each gets from the C++ runtime")
    m = ts.nn.Sequential(ts.nn.Linear(8, 4), ts.nn.ReLU()).eval()
    ep = ts.export.export(m, (ts.randn(4, 8),), dynamic_shapes=({0: ts.export.Dim("batch", max=64)},))
    good = os.path.join(work, "good.tspt")
    ts.export.save(ep, good)
    data = open(good, "rb").read()
    cases = {}
    cases["truncated archive"] = (data[: len(data) // 2], None)
    with zipfile.ZipFile(good) as z:
        parts = {n: z.read(n) for n in z.namelist()}

    def rezip(parts):
        path = os.path.join(work, "case.zip")
        with zipfile.ZipFile(path, "w") as z:
            for n, d in parts.items():
                z.writestr(n, d)
        return open(path, "rb").read()
    tampered = dict(parts, **{"weights.safetensors": parts["weights.safetensors"][:-1] + b"\x01"})
    cases["tampered weights"] = (rezip(tampered), None)
    meta = json.loads(parts["metadata.json"])
    newer_version = ts.export.ARCHIVE_FORMAT_VERSION + 1
    newer = dict(parts, **{"metadata.json": json.dumps(dict(meta, format_version=newer_version)).encode()})
    cases["newer format version"] = (rezip(newer), None)
    graph = parts["graph.json"].replace(b'"op":"relu"', b'"op":"vendorx::fused_relu"')
    meta_u = dict(meta, parts=dict(meta["parts"], **{"graph.json": ts.export._archive.part_checksum(graph)}))
    cases["operator no plugin provides"] = (rezip(dict(parts, **{"graph.json": graph, "metadata.json": json.dumps(meta_u).encode()})), None)
    cases["input of the wrong rank"] = (data, ts.randn(4, 8, 1))
    cases["dim out of range"] = (data, ts.randn(65, 8))
    for name, (archive_bytes, x) in cases.items():
        path = os.path.join(work, "case.tspt")
        open(path, "wb").write(archive_bytes)
        ts.save({"x": ts.randn(4, 8) if x is None else x}, os.path.join(work, "in.safetensors"))
        r = subprocess.run([RUNNER, path, "--input", os.path.join(work, "in.safetensors")], capture_output=True, text=True)
        message = r.stderr.strip().replace(path, "case.tspt").replace("tessera-export-run: ", "")
        print(f"{name:<28} exit {r.returncode}: {message}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller models and fewer repetitions")
    args = ap.parse_args()
    reps = 3 if args.quick else 10
    ts.manual_seed(0)
    with tempfile.TemporaryDirectory() as work:
        gpt = gpt_model.build(ts, n_layer=2 if args.quick else 6)
        torch_gpt = gpt_model.build(torch, n_layer=2 if args.quick else 6).eval() if torch is not None else None
        model_rows("gpt", gpt, lambda n: ts.randint(0, 65, (n, 64)), (1, 7, 64), 8, reps, work, torch_gpt)
        side = 64 if args.quick else 224
        resnet = resnet_model.build(ts)
        torch_resnet = resnet_model.build(torch).eval() if torch is not None else None
        model_rows("resnet18", resnet, lambda n: ts.randn(n, 3, side, side), (1, 7) if args.quick else (1, 7, 64),
                   4, reps, work, torch_resnet)
        overhead_row(work)
        footprint_row()
        bad_input_rows(work)


if __name__ == "__main__":
    main()
