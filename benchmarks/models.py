#!/usr/bin/env python3
"""Whole models, Tessera beside PyTorch in one run, from the same weights (copied through NumPy):
training steps and inference, medians of timed repetitions, and the ratio torch time / Tessera time
(above 1: Tessera is faster). Under each row, Tessera's top 5 operators by self time (its
profiler), so the next slow operator is visible.

    PYTHONPATH=build/release/python python3 benchmarks/models.py [--quick] [--reps N] [--plot PATH]

    PYTHONPATH=build/release/python python3 benchmarks/models.py --only resnet-50

Rows: the nanoGPT-shaped GPT of benchmarks/gpt_model.py (6 layers, 384 wide, block 256, batch 8),
AdamW training step and greedy generation; ResNet-18 on CIFAR-sized inputs (32x32, batch 32) and
ResNet-50 (224x224, batch 8) of benchmarks/resnet_model.py, SGD training step and inference; from
benchmarks/zoo_models.py a ViT-S/16 (batch 8, AdamW train and inference), a BERT-base-shaped
encoder (seq 128, batch 8, inference), pytorch/examples' LSTM word language model (training step)
and the digits CNN of examples/train_digits.py (Adam training step). --quick leaves out the
ResNet-50, ViT and BERT rows.

--nanogpt PATH adds a row for nanoGPT's own model.py (github.com/karpathy/nanoGPT, not shipped
here), unchanged, under the same shape and AdamW step as its train.py: each framework in a process
of its own (benchmarks/nanogpt_step.py), since `import torch` there must be answered by tessera.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import gpt_model  # benchmarks/ is the script's folder, so it is on sys.path
import resnet_model
import zoo_models
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
    print_row(name, ours, theirs)
    print(f"    top 5 (Tessera, self time of one step): {top_ops(steps['tessera'])}")
    return name, ours, theirs


def print_row(name, ours, theirs):
    ratio = f"{theirs / ours:5.2f}x" if theirs is not None else "   -  "
    torch_text = f"{theirs:10.1f} ms" if theirs is not None else "         -   "
    print(f"{name:<52}{ours:10.1f} ms{torch_text}   {ratio}")


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


def frameworks():
    return [("tessera", ts)] + ([("torch", torch)] if torch is not None else [])


def paired_models(build, seed=0):
    """{framework: (lib, model)}, each built by build(lib) after the same seed; torch's model then
    gets Tessera's weights, so both run the same numbers."""
    models = {}
    for name, lib in frameworks():
        lib.manual_seed(seed)
        models[name] = (lib, build(lib))
    if torch is not None:
        copy_weights(models["tessera"][1], models["torch"][1])
    return models


def train_steps(build, inputs, loss, optimizer, seed=0):
    """One training step per framework: zero_grad, loss(lib, model, *inputs).backward(), step.
    inputs: NumPy arrays, made tensors of each framework."""
    steps = {}
    for name, (lib, model) in paired_models(build, seed).items():
        model.train()
        opt = optimizer(lib, model)
        tensors = [lib.tensor(a) for a in inputs]

        def step(lib=lib, model=model, opt=opt, tensors=tensors):
            opt.zero_grad()
            loss(lib, model, *tensors).backward()
            opt.step()
        steps[name] = step
    return steps


def inference_steps(build, inputs, seed=0):
    """One forward pass per framework, in eval mode under no_grad."""
    steps = {}
    for name, (lib, model) in paired_models(build, seed).items():
        model.eval()
        tensors = [lib.tensor(a) for a in inputs]

        def step(lib=lib, model=model, tensors=tensors):
            with lib.no_grad():
                model(*tensors)
        steps[name] = step
    return steps


def cross_entropy(lib, model, x, y):
    return lib.nn.functional.cross_entropy(model(x), y)


def sgd(lib, model):
    return lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def adamw(lib, model):
    return lib.optim.AdamW(model.parameters(), lr=1e-4)


def images(batch, size, channels=3, classes=10, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((batch, channels, size, size)).astype(np.float32),
            rng.integers(0, classes, batch))


def gpt_rows(args):
    layers = 2 if args.quick else 6
    idx = np.random.default_rng(0).integers(0, 65, (8, 256))
    build = lambda lib: gpt_model.build(lib, n_layer=layers)  # noqa: E731
    yield (f"GPT {layers}x384, block 255, batch 8, AdamW train",
           lambda: train_steps(build, [idx[:, :-1].copy(), idx[:, 1:].copy()],
                               lambda lib, model, x, y: model(x, y), adamw))

    def generation():
        """nanoGPT's generate, greedy (argmax, so both pick the same tokens): 32 new tokens after a
        prompt of 8, the whole context through the model for each (nanoGPT keeps no KV cache)."""
        steps = {}
        prompt = idx[:1, :8].copy()
        for name, (lib, model) in paired_models(build).items():
            model.eval()
            start = lib.tensor(prompt)

            def step(lib=lib, model=model, start=start):
                tokens = start
                with lib.no_grad():
                    for _ in range(32):
                        logits = model(tokens[:, -256:])[:, -1, :]
                        tokens = lib.cat([tokens, lib.softmax(logits, dim=-1).argmax(-1, keepdim=True)], dim=1)
            steps[name] = step
        return steps
    yield f"GPT {layers}x384 generate 32 tokens, batch 1", generation


def resnet_rows(args):
    x18, y18 = images(32, 32)
    yield "ResNet-18 (32x32, batch 32), SGD train", lambda: train_steps(
        lambda lib: resnet_model.build(lib, classes=10), [x18, y18], cross_entropy, sgd)
    yield "ResNet-18 (32x32, batch 32), inference", lambda: inference_steps(
        lambda lib: resnet_model.build(lib, classes=10), [x18])
    if args.quick:
        return
    x50, y50 = images(8, 224, classes=1000)
    yield "ResNet-50 (224x224, batch 8), SGD train", lambda: train_steps(resnet_model.build50, [x50, y50],
                                                                          cross_entropy, sgd)
    yield "ResNet-50 (224x224, batch 8), inference", lambda: inference_steps(resnet_model.build50, [x50])


def transformer_rows(args):
    if args.quick:
        return
    xv, yv = images(8, 224, classes=1000)
    yield "ViT-S/16 (224x224, batch 8), AdamW train", lambda: train_steps(zoo_models.vit_s16, [xv, yv],
                                                                           cross_entropy, adamw)
    yield "ViT-S/16 (224x224, batch 8), inference", lambda: inference_steps(zoo_models.vit_s16, [xv])
    ids = np.random.default_rng(2).integers(0, 30522, (8, 128))
    yield "BERT-base encoder (seq 128, batch 8), inference", lambda: inference_steps(zoo_models.bert_encoder,
                                                                                     [ids])


def small_rows(args):
    rng = np.random.default_rng(3)
    words = rng.integers(0, 33278, (36, 20))

    def lstm():
        """word_language_model's training step: bptt 35, batch 20, hidden state carried (detached),
        gradients clipped to 0.25."""
        steps = {}
        for name, (lib, model) in paired_models(zoo_models.lstm_lm).items():
            model.train()
            opt = lib.optim.SGD(model.parameters(), lr=20)
            data, targets = lib.tensor(words[:-1].copy()), lib.tensor(words[1:].copy().reshape(-1))
            hidden = [model.init_hidden(20)]

            def step(lib=lib, model=model, opt=opt, data=data, targets=targets, hidden=hidden):
                model.zero_grad()
                output, state = model(data, tuple(h.detach() for h in hidden[0]))
                hidden[0] = state
                lib.nn.functional.nll_loss(output, targets).backward()
                lib.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
                opt.step()
            steps[name] = step
        return steps
    yield "LSTM word LM (2x200, bptt 35, batch 20), train", lstm
    xd, yd = images(32, 8, channels=1)
    yield "digits CNN (8x8, batch 32), Adam train", lambda: train_steps(
        zoo_models.digits_cnn, [xd, yd], cross_entropy, lambda lib, model: lib.optim.Adam(model.parameters(), lr=1e-2))


def nanogpt_row(path, reps, quick):
    """nanoGPT's model.py step, one process per framework (tessera first: it writes the shared
    initial weights); the row as row() prints it."""
    layers = 2 if quick else 6
    name = f"nanoGPT's model.py {layers}x384, batch 8, AdamW train"
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for framework in ["tessera"] + (["torch"] if torch is not None else []):
            cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "nanogpt_step.py"),
                   "--framework", framework, "--model", path, "--weights", os.path.join(tmp, "weights.npz"),
                   "--layers", str(layers), "--reps", str(reps), "--threads", str(ts.get_num_threads())]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                raise RuntimeError(f"nanogpt_step.py --framework {framework} failed:\n{done.stderr[-3000:]}")
            results[framework] = json.loads(done.stdout.strip().splitlines()[-1])
    ours = results["tessera"]["ms"]
    theirs = results["torch"]["ms"] if "torch" in results else None
    print_row(name, ours, theirs)
    if theirs is not None:
        print(f"    first losses: Tessera {results['tessera']['losses']}, PyTorch {results['torch']['losses']}")
    print(f"    top 5 (Tessera, self time of one step): {results['tessera']['top']}")
    return name, ours, theirs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="a 2-layer GPT, no ResNet-50/ViT/BERT rows, fewer repetitions")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions per row (default 10, quick 3)")
    ap.add_argument("--only", default=None, help="run only the rows whose name contains this text")
    ap.add_argument("--nanogpt", default=os.environ.get("NANOGPT_MODEL_PY"),
                    help="nanoGPT's model.py: adds its training-step row (default: $NANOGPT_MODEL_PY)")
    ap.add_argument("--plot", default=os.path.join(tempfile.gettempdir(), "tessera_models.png"),
                    help="PNG of the ratios (default: tessera_models.png in the temp folder; needs matplotlib)")
    args = ap.parse_args()
    reps = args.reps or (3 if args.quick else 10)
    threads = ts.get_num_threads()
    if torch is not None:
        torch.set_num_threads(threads)
    print(f"{threads} threads; medians of {reps} steps after 1 warm-up step; ratio = torch / Tessera"
          + ("" if torch is not None else " (torch not installed: Tessera only)"))
    print(f"{'':<52}{'Tessera':>13}{'PyTorch':>13}   ratio")
    rows = []
    for group in (gpt_rows, resnet_rows, transformer_rows, small_rows):
        for name, make_steps in group(args):
            if args.only is None or args.only.lower() in name.lower():
                rows.append(row(name, make_steps(), reps))
    if args.nanogpt and (args.only is None or args.only.lower() in "nanogpt's model.py"):
        rows.append(nanogpt_row(args.nanogpt, reps, args.quick))
    plot(rows, args.plot)


if __name__ == "__main__":
    main()
