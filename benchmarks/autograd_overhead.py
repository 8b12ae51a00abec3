#!/usr/bin/env python3
"""Autograd overhead: Tessera beside PyTorch (when importable) and hand-written NumPy backprop.

Two workloads, median time per iteration:
  tiny MLP   4-16-1 on a batch of 8: forward + backward, where the tape and dispatch dominate
             (NumPy's manual backprop is the floor: no tape at all);
  train step 784-256-10 MLP on a batch of 128: forward, cross-entropy, backward, SGD update,
             where the GEMMs dominate.

    PYTHONPATH=build/release/python python3 benchmarks/autograd_overhead.py [--quick] [--threads N]
"""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_build_python():
    for p in (os.environ.get("TESSERA_TEST_BUILD_DIR"), os.path.join(ROOT, "build", "release")):
        if not p:
            continue
        for cand in (os.path.join(p, "python"), p):
            if os.path.isdir(os.path.join(cand, "tessera")):
                return cand
    return None


BUILD_PYTHON = find_build_python()
if BUILD_PYTHON and BUILD_PYTHON not in sys.path:
    sys.path.insert(0, BUILD_PYTHON)

import numpy as np  # noqa: E402

import tessera as ts  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:
    torch = None


def timed(fn, repeat, min_time):
    """Median seconds per call over `repeat` samples of enough calls to last min_time."""
    fn()
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        t = time.perf_counter() - t0
        if t >= min_time or number >= 1 << 20:
            break
        number *= 2 if t <= 0 else max(2, min(100, int(min_time / t) + 1))
    samples = [t / number]
    for _ in range(repeat - 1):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def mlp_params(sizes, seed):
    rng = np.random.default_rng(seed)
    ps = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        ps.append((rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32))
        ps.append(np.zeros(fan_out, np.float32))
    return ps


# ---------------------------------------------------------------------------- tiny MLP, fwd + bwd
def tiny(lib, batch=8):
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((batch, 4), dtype=np.float32)
    p_np = mlp_params([4, 16, 1], 1)
    if lib == "numpy":
        w1, b1, w2, b2 = p_np

        def step():
            z = x_np @ w1 + b1
            h = np.tanh(z)
            y = h @ w2 + b2
            loss = (y * y).mean()
            gy = 2 * y / y.size
            gw2, gb2 = h.T @ gy, gy.sum(0)
            gz = (gy @ w2.T) * (1 - h * h)
            return loss, x_np.T @ gz, gz.sum(0), gw2, gb2
        return step
    mod = ts if lib == "tessera" else torch
    x = mod.from_numpy(x_np.copy())
    params = [mod.from_numpy(p.copy()).requires_grad_() for p in p_np]

    def step():
        w1, b1, w2, b2 = params
        y = mod.tanh(x @ w1 + b1) @ w2 + b2
        loss = (y * y).mean()
        loss.backward()
        for p in params:
            p.grad = None
    return step


# ---------------------------------------------------------------------------- 784-256-10 train step
def train_step(lib, batch=128, lr=1e-3):
    rng = np.random.default_rng(2)
    x_np = rng.standard_normal((batch, 784), dtype=np.float32)
    y_np = rng.integers(0, 10, batch)
    p_np = mlp_params([784, 256, 10], 3)
    if lib == "numpy":
        w1, b1, w2, b2 = (p.copy() for p in p_np)
        onehot = np.eye(10, dtype=np.float32)[y_np]

        def step():
            z1 = x_np @ w1 + b1
            h = np.maximum(z1, 0)
            z2 = h @ w2 + b2
            e = np.exp(z2 - z2.max(axis=1, keepdims=True))
            prob = e / e.sum(axis=1, keepdims=True)
            g2 = (prob - onehot) / batch
            gw2, gb2 = h.T @ g2, g2.sum(0)
            gh = (g2 @ w2.T) * (z1 > 0)
            gw1, gb1 = x_np.T @ gh, gh.sum(0)
            for p, g in ((w1, gw1), (b1, gb1), (w2, gw2), (b2, gb2)):
                p -= lr * g
        return step
    mod = ts if lib == "tessera" else torch
    x = mod.from_numpy(x_np.copy())
    y = mod.tensor(y_np, dtype=mod.int64) if lib == "tessera" else torch.from_numpy(y_np.copy())
    params = [mod.from_numpy(p.copy()).requires_grad_() for p in p_np]
    F = mod.nn.functional

    def step():
        w1, b1, w2, b2 = params
        loss = F.cross_entropy(F.relu(x @ w1 + b1) @ w2 + b2, y)
        loss.backward()
        with mod.no_grad():
            for p in params:
                p.sub_(p.grad, alpha=lr)
                p.grad = None
    return step


def fmt(s):
    return "-" if s is None else (f"{s * 1e6:9.1f} us" if s < 1e-3 else f"{s * 1e3:9.3f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=None, help="tessera (and torch) thread count")
    args = ap.parse_args()
    if args.threads:
        ts._C.set_num_threads(args.threads)
        if torch:
            torch.set_num_threads(args.threads)
    repeat, min_time = (3, 0.05) if args.quick else (7, 0.2)
    print(f"tessera {ts.__version__}, numpy {np.__version__}, torch {torch.__version__ if torch else 'not installed'}; "
          f"{ts._C.get_num_threads()} tessera threads; median of {repeat}")
    print(f"{'workload':36} {'tessera':>12} {'torch':>12} {'numpy (manual)':>15} {'torch/ts':>9} {'np/ts':>7}")
    for label, make in (("tiny MLP 4-16-1, batch 8: fwd+bwd", tiny),
                        ("MLP 784-256-10, batch 128: train step", train_step)):
        t_ts = timed(make("tessera"), repeat, min_time)
        t_th = timed(make("torch"), repeat, min_time) if torch else None
        t_np = timed(make("numpy"), repeat, min_time)
        r_th = f"{t_th / t_ts:8.2f}x" if t_th else "-"
        print(f"{label:36} {fmt(t_ts):>12} {fmt(t_th):>12} {fmt(t_np):>15} {r_th:>9} {t_np / t_ts:6.2f}x")
    print("ratios are peer time / tessera time: > 1 means tessera is faster")


if __name__ == "__main__":
    main()
