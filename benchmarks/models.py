#!/usr/bin/env python3
"""Whole models, Tessera beside PyTorch in one run, from the same weights (copied through NumPy):
training steps and inference, medians of timed repetitions, and the ratio torch time / Tessera time
(above 1: Tessera is faster). Under each row, Tessera's top 5 operators by self time (its
profiler), so the next slow operator is visible.

    PYTHONPATH=build/release/python python3 benchmarks/models.py [--quick] [--reps N] [--plot PATH]

Rows: the nanoGPT-shaped GPT of benchmarks/gpt_model.py (6 layers, 384 wide, block 256, batch 8),
AdamW training step; the ResNet-18-shaped CNN of benchmarks/resnet_model.py on CIFAR-sized
inputs (32x32, batch 32), SGD training step and inference. Not yet here (issue 22): generation
tokens/s, ResNet-50, ViT-S/16, a BERT-base encoder, the LSTM language model, the digits CNN.
"""
import argparse
import os
import tempfile

import numpy as np

import gpt_model  # benchmarks/ is the script's folder, so it is on sys.path
import resnet_model
import tessera as ts
from compile import median_time  # benchmarks/compile.py

try:
    import torch
except ImportError:
    torch = None


def median_ms(fn, reps):
    return 1e3 * median_time(fn, reps)


def copy_weights(src, dst):
    """Tessera's parameters and buffers into the same-named ones of the torch model."""
    theirs = dst.state_dict()
    with torch.no_grad():
        for name, value in src.state_dict().items():
            array = np.ascontiguousarray(value.detach().numpy()).reshape(tuple(theirs[name].shape))
            theirs[name].copy_(torch.from_numpy(array))


def top_ops(fn, n=5):
    """Tessera's n operators with the most self time over one call of fn."""
    with ts.profiler.profile() as prof:
        fn()
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    return ", ".join(f"{e.key} {e.self_cpu_time_total / 1e3:.1f} ms ({100 * e.self_cpu_time_total / total:.0f}%)"
                     for e in events[:n])


def row(name, steps, reps):
    """steps: {framework: callable running one step}. Returns (name, Tessera ms, torch ms or None)."""
    ours = median_ms(steps["tessera"], reps)
    theirs = median_ms(steps["torch"], reps) if "torch" in steps else None
    ratio = f"{theirs / ours:5.2f}x" if theirs is not None else "   -  "
    torch_text = f"{theirs:10.1f} ms" if theirs is not None else "         -   "
    print(f"{name:<44}{ours:10.1f} ms{torch_text}   {ratio}")
    print(f"    top 5 (Tessera, self time of one step): {top_ops(steps['tessera'])}")
    return name, ours, theirs


def plot(rows, path):
    """A PNG of the ratios (torch / Tessera per row; above 1: Tessera is faster)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not importable: no plot)")
        return
    rows = [r for r in rows if r[2] is not None]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.2))
    ax.barh(range(len(rows)), [theirs / ours for _, ours, theirs in rows], height=0.5)
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([name for name, _, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("torch time / Tessera time (above 1: Tessera is faster)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def gpt_steps(args):
    layers = 2 if args.quick else 6
    steps = {}
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 65, (8, 256))
    frameworks = [("tessera", ts)] + ([("torch", torch)] if torch is not None else [])
    models = {}
    for name, lib in frameworks:
        lib.manual_seed(0)
        models[name] = gpt_model.build(lib, n_layer=layers)
    if torch is not None:
        copy_weights(models["tessera"], models["torch"])
    for name, lib in frameworks:
        model = models[name]
        opt = lib.optim.AdamW(model.parameters(), lr=1e-4)
        x, y = lib.tensor(idx[:, :-1].copy()), lib.tensor(idx[:, 1:].copy())

        def step(model=model, opt=opt, x=x, y=y):
            opt.zero_grad()
            model(x, y).backward()
            opt.step()
        steps[name] = step
    return f"GPT {layers}x384, block 255, batch 8, AdamW train", steps


def resnet_steps(args, train):
    frameworks = [("tessera", ts)] + ([("torch", torch)] if torch is not None else [])
    rng = np.random.default_rng(1)
    images = rng.standard_normal((32, 3, 32, 32)).astype(np.float32)
    labels = rng.integers(0, 10, 32)
    models = {}
    for name, lib in frameworks:
        lib.manual_seed(0)
        models[name] = resnet_model.build(lib, classes=10)
    if torch is not None:
        copy_weights(models["tessera"], models["torch"])
    steps = {}
    for name, lib in frameworks:
        model = models[name].train(train)
        x, y = lib.tensor(images), lib.tensor(labels)
        if train:
            opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

            def step(model=model, opt=opt, x=x, y=y, lib=lib):
                opt.zero_grad()
                lib.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        else:
            def step(model=model, x=x, lib=lib):
                with lib.no_grad():
                    model(x)
        steps[name] = step
    return f"ResNet-18 (32x32, batch 32), {'SGD train' if train else 'inference'}", steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a 2-layer GPT and fewer repetitions")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions per row (default 10, quick 3)")
    ap.add_argument("--plot", default=os.path.join(tempfile.gettempdir(), "tessera_models.png"),
                    help="PNG of the ratios (default: tessera_models.png in the temp folder; needs matplotlib)")
    args = ap.parse_args()
    reps = args.reps or (3 if args.quick else 10)
    threads = ts.get_num_threads()
    if torch is not None:
        torch.set_num_threads(threads)
    print(f"{threads} threads; medians of {reps} steps after 1 warm-up step; ratio = torch / Tessera"
          + ("" if torch is not None else " (torch not installed: Tessera only)"))
    print(f"{'':<44}{'Tessera':>13}{'PyTorch':>13}   ratio")
    rows = []
    for make in (lambda: gpt_steps(args), lambda: resnet_steps(args, True), lambda: resnet_steps(args, False)):
        name, steps = make()
        rows.append(row(name, steps, reps))
    plot(rows, args.plot)


if __name__ == "__main__":
    main()
