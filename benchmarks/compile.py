#!/usr/bin/env python3
"""ts.compile beside Tessera eager, PyTorch eager and torch.compile, in one run.

Rows: the 8-op element-wise chain on two 16M-float tensors, and a like chain with a graph
break (a Python branch on a value) in its middle; LayerNorm + GELU + residual and
softmax over rows of 1024; the per-call cost of a compiled function of 4 small inputs; compile
time cold (empty cache) and warm (a new process, cache on disk); dynamic sizes (a GPT forward
called at one new sequence length after another). Medians of interleaved runs.

    PYTHONPATH=build/release/python python3 benchmarks/compile.py [--quick] [--no-torch-compile]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_PYTHON = os.path.join(ROOT, "build", "release", "python")
if os.path.isdir(os.path.join(BUILD_PYTHON, "tessera")) and BUILD_PYTHON not in sys.path:
    sys.path.insert(0, BUILD_PYTHON)

import tessera as ts  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:
    torch = None


def median_time(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def chain(lib):
    def f(x, y):
        a = x * y
        b = a + x
        c = lib.sin(b)
        d = c * y
        e = d + 1.0
        g = lib.exp(e)
        h = lib.clamp(g, 0.0, 4.0)
        k = h - x
        return lib.tanh(k)
    return f


def chain_with_break(lib):
    """The chain with a Python branch on a value in its middle: a graph break in both libraries."""
    def f(x, y):
        b = x * y + x
        d = lib.sin(b) * y
        if d.mean() > 0:  # read into Python: the graph is cut here
            g = lib.exp(d + 1.0)
        else:
            g = lib.exp(d - 1.0)
        return lib.tanh(lib.clamp(g, 0.0, 4.0) - x)
    return f


def ln_gelu_residual(lib, ln):
    def f(x):
        return lib.nn.functional.gelu(ln(x)) + x
    return f


def row(name, figures, base="ts eager"):
    ref = figures[base]
    cells = "  ".join(f"{k} {v * 1e3:8.2f} ms" for k, v in figures.items())
    ratios = "  ".join(f"{base}/{k} {ref / v:5.2f}x" for k, v in figures.items() if k != base)
    print(f"{name:<34} {cells}\n{'':<34} {ratios}")


def compare(name, ts_fn, ts_args, torch_fn, torch_args, reps, use_torch_compile):
    figures = {"ts eager": median_time(lambda: ts_fn(*ts_args), reps)}
    compiled = ts.compile(ts_fn)
    figures["ts.compile"] = median_time(lambda: compiled(*ts_args), reps)
    if torch is not None:
        figures["torch eager"] = median_time(lambda: torch_fn(*torch_args), reps)
        if use_torch_compile:
            tc = torch.compile(torch_fn)
            figures["torch.compile"] = median_time(lambda: tc(*torch_args), reps)
    row(name, figures)
    return figures


def training_rows(reps, use_tc):
    """A GPT of nanoGPT's small shape and the digits CNN: one optimizer step, eager vs compiled."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from gpt_model import build
    from train_digits import make_model

    def steps(lib, model, opt, batch, compiled_model):
        def step(m):
            opt.zero_grad()
            loss = m(*batch)
            loss.backward()
            opt.step()
        return (lambda: step(model)), (lambda: step(compiled_model))

    def digits_loss(lib, net):
        F = lib.nn.functional
        return lambda x, y: F.cross_entropy(net(x), y)

    for name, make in (("GPT 6x384, block 256, batch 8", "gpt"), ("digits CNN, batch 32", "digits")):
        figures = {}
        for lib in [ts] + ([torch] if torch is not None else []):
            lib.manual_seed(0)
            if make == "gpt":
                model = build(lib)
                batch = (lib.randint(0, 65, (8, 256)), lib.randint(0, 65, (8, 256)))
                opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
            else:
                net = make_model() if lib is ts else None
                if lib is torch:
                    nn = torch.nn
                    net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                                        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 10))
                model = net
                batch = (lib.randn(32, 1, 8, 8), lib.randint(0, 10, (32,)))
                opt = lib.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
                loss_of = digits_loss(lib, net)
                model = loss_of
            prefix = "ts" if lib is ts else "torch"
            if lib is torch and not use_tc:
                eager_step, _ = steps(lib, model, opt, batch, model)
                figures["torch eager"] = median_time(eager_step, reps)
                continue
            compiled = (ts.compile if lib is ts else torch.compile)(model)
            eager_step, compiled_step = steps(lib, model, opt, batch, compiled)
            figures[f"{prefix} eager"] = median_time(eager_step, reps)
            figures[f"{prefix}.compile" if lib is ts else "torch.compile"] = median_time(compiled_step, reps)
        row(name + " (train step)", figures)


def compile_times():
    """The GPT training step's first call (capture, joint capture, both graphs compiled) in a
    new process with an empty cache, then in another new process with the cache on disk."""
    script = ("import sys, time; sys.path[:0] = [%r, %r]\n"
              "import tessera as ts\nfrom gpt_model import build\n"
              "ts.manual_seed(0); m = build(ts); c = ts.compile(m)\n"
              "idx = ts.randint(0, 65, (8, 256)); tgt = ts.randint(0, 65, (8, 256))\n"
              "t0 = time.perf_counter(); c(idx, tgt).backward(); t1 = time.perf_counter()\n"
              "c(idx, tgt).backward(); t2 = time.perf_counter()\n"
              "print(t1 - t0, t2 - t1)") % (BUILD_PYTHON, os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TESSERA_CACHE_DIR=cache)
        cold, cold_next = map(float, subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                                                    text=True, check=True).stdout.split())
        warm, _ = map(float, subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                            check=True).stdout.split())
    print(f"{'GPT train step, first call':<34} cold cache {cold:6.2f} s   warm cache, new process {warm:6.2f} s   "
          f"(a later call: {cold_next:5.2f} s)")


def dynamic_sizes(use_tc):
    """A GPT forward (benchmarks/gpt_model.py, batch 1, no_grad) called at sequence lengths 32,
    33, then 64..79 once each, as generation without a KV cache calls it: the first call, the
    second length (a recompile; sizes become dynamic), the lengths captured until the graph is
    fitted, and the last eight new lengths (served by the fitted graph), then the replay of a
    length already seen, beside eager (and torch.compile on the same lengths). An empty kernel
    cache, so the builds are real."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpt_model import build
    lengths = [32, 33] + list(range(64, 80))
    libs = [("ts", ts)] + ([("torch", torch)] if use_tc else [])
    parts = []
    for name, lib in libs:
        lib.manual_seed(0)
        model = build(lib).eval()
        runs = []

        def forward(x, model=model, runs=runs):
            runs.append(1)
            return model(x)
        compiled = ts.compile(forward) if lib is ts else torch.compile(forward)
        tokens = [lib.randint(0, 65, (1, t)) for t in lengths]
        with lib.no_grad():
            firsts, traced = [], []
            for x in tokens:
                before = len(runs)
                t0 = time.perf_counter()
                compiled(x)
                firsts.append(time.perf_counter() - t0)
                traced.append(len(runs) > before)
            replay = median_time(lambda: compiled(tokens[-1]), 9)
            eager = median_time(lambda: model(tokens[-1]), 9)
        captured = [t for t, ran in zip(firsts[2:], traced[2:]) if ran]
        text = (f"{name}: first {firsts[0]:5.2f} s, 2nd length {firsts[1]:5.2f} s, ")
        if name == "ts":
            text += (f"{len(captured)} more captured ({statistics.median(captured) * 1e3:.1f} ms each), "
                     if captured else "")
        text += (f"last 8 new lengths {statistics.median(firsts[-8:]) * 1e3:6.1f} ms each"
                 + (f" ({sum(traced[-8:])} captured)" if name == "ts" else "")
                 + f", replay {replay * 1e3:5.1f} ms (eager {eager * 1e3:5.1f} ms)")
        parts.append(text)
    print(f"{'GPT forward, new lengths (dynamic)':<34} " + f"\n{'':<35}".join(parts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-torch-compile", action="store_true")
    args = ap.parse_args()
    reps = 3 if args.quick else 9
    use_tc = torch is not None and not args.no_torch_compile
    print(f"threads: tessera {ts.get_num_threads()}" + (f", torch {torch.get_num_threads()}" if torch else ""))
    ts.manual_seed(0)

    n = 16 << 20
    x, y = ts.randn(n), ts.randn(n)
    tx, ty = (torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())) if torch else (None, None)
    with ts.no_grad():
        compare("8-op chain, 2 x 16M float32", chain(ts), (x, y), chain(torch) if torch else None, (tx, ty), reps,
                use_tc)
        compare("same, a branch on a value midway", chain_with_break(ts), (x, y),
                chain_with_break(torch) if torch else None, (tx, ty), reps, use_tc)

        rows = ts.randn(8192, 1024)
        ln = ts.nn.LayerNorm(1024)
        trows = torch.from_numpy(rows.numpy()) if torch else None
        tln = torch.nn.LayerNorm(1024) if torch else None
        with_torch = torch.no_grad() if torch else None
        if with_torch:
            with_torch.__enter__()
        compare("LayerNorm+GELU+residual 8192x1024", ln_gelu_residual(ts, ln), (rows,),
                ln_gelu_residual(torch, tln) if torch else None, (trows,), reps, use_tc)
        compare("softmax rows of 1024, 8192 rows", lambda t: ts.softmax(t, -1), (rows,),
                (lambda t: torch.softmax(t, -1)) if torch else None, (trows,), reps, use_tc)

        small = [ts.randn(4) for _ in range(4)]
        tsmall = [torch.randn(4) for _ in range(4)] if torch else None

        def four(a, b, c, d):
            return a + b + c + d
        calls = 2000
        eager = median_time(lambda: [four(*small) for _ in range(calls)], 5) / calls
        compiled = ts.compile(four)
        comp = median_time(lambda: [compiled(*small) for _ in range(calls)], 5) / calls
        line = f"{'4 small inputs, per call':<34} ts eager {eager * 1e6:6.2f} us  ts.compile {comp * 1e6:6.2f} us"
        if torch is not None:
            tc_eager = median_time(lambda: [four(*tsmall) for _ in range(calls)], 5) / calls
            line += f"  torch eager {tc_eager * 1e6:6.2f} us"
            if use_tc:
                tcf = torch.compile(four)
                tcc = median_time(lambda: [tcf(*tsmall) for _ in range(calls)], 5) / calls
                line += f"  torch.compile {tcc * 1e6:6.2f} us"
        print(line)
        if with_torch:
            with_torch.__exit__(None, None, None)
    training_rows(3 if args.quick else 5, use_tc)
    compile_times()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TESSERA_CACHE_DIR"] = cache
        dynamic_sizes(use_tc)


if __name__ == "__main__":
    main()
