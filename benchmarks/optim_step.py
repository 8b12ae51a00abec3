"""One Adam step over a 100M-parameter model (10 tensors of 10M floats, gradients set), in
Tessera (its fused step) and in PyTorch (fused=True and foreach=True) in the same run; medians.

    PYTHONPATH=build/release/python python3 benchmarks/optim_step.py [--params 100] [--repeat 7]
"""
import argparse
import time

import numpy as np

import tessera as ts

try:
    import torch
except ImportError:
    torch = None


def median_ms(step, repeat):
    step()  # state allocation happens on the first step
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def make(lib, n_tensors, size, **kw):
    params = [lib.zeros(size, requires_grad=True) for _ in range(n_tensors)]
    for p in params:
        p.grad = lib.full((size,), 1e-3)
    opt = lib.optim.Adam(params, lr=1e-3, **kw)
    return opt.step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=int, default=100, help="millions of parameters")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    n_tensors, size = 10, args.params * 100_000
    rows = [("tessera (fused)", median_ms(make(ts, n_tensors, size), args.repeat))]
    if torch:
        rows.append(("torch fused=True", median_ms(make(torch, n_tensors, size, fused=True), args.repeat)))
        rows.append(("torch foreach=True", median_ms(make(torch, n_tensors, size, foreach=True), args.repeat)))
    print(f"Adam step over {args.params}M float32 parameters ({n_tensors} tensors), median of {args.repeat}")
    base = rows[0][1]
    for name, ms in rows:
        print(f"  {name:<20} {ms:9.1f} ms   {ms / base:5.2f}x tessera's time")


if __name__ == "__main__":
    main()
