#!/usr/bin/env python3
"""The operators under a transformer step, Tessera beside PyTorch in one run (issue 22's targets):
scaled_dot_product_attention forward and backward (causal and not) at 8x6x256x64 and
1x12x1024x64, layer_norm(384) and GELU (both approximations) forward+backward on 8x256x384.
Medians of timed repetitions; ratio = torch time / Tessera time (above 1: Tessera is faster).

    PYTHONPATH=build/release/python python3 benchmarks/transformer_ops.py [--reps N]
"""
import argparse

import numpy as np

import tessera as ts
from compile import median_time  # benchmarks/compile.py

try:
    import torch
except ImportError:
    torch = None


def frameworks():
    return [("tessera", ts)] + ([("torch", torch)] if torch is not None else [])


def attention_cases(shape, causal):
    """{name: {framework: callable}} for the forward (no grad) and the backward alone."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    forward, backward = {}, {}
    for name, lib in frameworks():
        q, k, v = (lib.tensor(a, requires_grad=True) for a in arrays)
        sdpa = lib.nn.functional.scaled_dot_product_attention
        forward[name] = lambda sdpa=sdpa, q=q, k=k, v=v, lib=lib: sdpa(q.detach(), k.detach(), v.detach(),
                                                                         is_causal=causal)
        out = sdpa(q, k, v, is_causal=causal)
        grad = lib.ones_like(out)
        backward[name] = lambda lib=lib, out=out, q=q, k=k, v=v, grad=grad: lib.autograd.grad(
            out, (q, k, v), grad, retain_graph=True)
    label = "x".join(map(str, shape)) + (" causal" if causal else "")
    return {f"sdpa {label} forward": forward, f"sdpa {label} backward": backward}


def row_op_cases():
    x = np.random.default_rng(1).standard_normal((8, 256, 384)).astype(np.float32)
    cases = {}
    for label, make in (("layer_norm(384)", lambda lib: lib.nn.LayerNorm(384)),
                        ("gelu", lambda lib: lib.nn.GELU()),
                        ("gelu tanh", lambda lib: lib.nn.GELU(approximate="tanh"))):
        steps = {}
        for name, lib in frameworks():
            module, inp = make(lib), lib.tensor(x, requires_grad=True)

            def step(module=module, inp=inp):
                module(inp).sum().backward()
            steps[name] = step
        cases[f"{label} 8x256x384 forward+backward"] = steps
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    threads = ts.get_num_threads()
    if torch is not None:
        torch.set_num_threads(threads)
    print(f"{threads} threads; medians of {args.reps}; ratio = torch / Tessera")
    print(f"{'':<48}{'Tessera':>11}{'PyTorch':>11}   ratio")
    cases = {}
    for shape in ((8, 6, 256, 64), (1, 12, 1024, 64)):
        for causal in (True, False):
            cases.update(attention_cases(shape, causal))
    cases.update(row_op_cases())
    for name, steps in cases.items():
        ours = 1e3 * median_time(steps["tessera"], args.reps)
        if "torch" in steps:
            theirs = 1e3 * median_time(steps["torch"], args.reps)
            print(f"{name:<48}{ours:8.2f} ms{theirs:8.2f} ms   {theirs / ours:5.2f}x")
        else:
            print(f"{name:<48}{ours:8.2f} ms{'-':>11}")


if __name__ == "__main__":
    main()
