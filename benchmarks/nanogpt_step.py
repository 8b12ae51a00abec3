#!/usr/bin/env python3
"""One framework's AdamW training step of nanoGPT's own model.py, unchanged, in a process of its
own (benchmarks/models.py runs it once per framework when given --nanogpt PATH).

    python3 benchmarks/nanogpt_step.py --framework tessera --model nanoGPT/model.py --weights W.npz

Under --framework tessera, `import torch` in model.py is answered by tessera (tests/compat's
torch_as_tessera), which needs a process where real torch was never imported: hence a process per
framework. The model is GPTConfig(n_layer, n_head=6, n_embd=384, block_size=256, vocab_size=65,
dropout=0.0, bias=True), batch 8; the optimizer is model.configure_optimizers(0.1, 6e-4,
(0.9, 0.95), "cpu"), as nanoGPT's train.py makes it. Weights go through a NumPy .npz file: the
first process writes its initial state_dict there, a later one loads it, so both frameworks run
the same numbers. Prints one JSON line: {"ms": median step time, "losses": [...], "top": "..."}.
"""
import argparse
import contextlib
import io
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def import_framework(name):
    if name == "torch":
        import torch
        return torch
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "compat"))
    import torch_as_tessera
    return torch_as_tessera.install()


def load_module(path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    module = importlib.util.module_from_spec(spec)
    with contextlib.redirect_stdout(io.StringIO()):  # model.py prints its parameter count
        spec.loader.exec_module(module)
    return module


def share_weights(lib, model, path):
    """Writes the model's state_dict to path if it is absent, else loads it from there."""
    state = model.state_dict()
    if not os.path.exists(path):
        np.savez(path, **{k: v.detach().numpy() for k, v in state.items()})
        return
    with np.load(path) as saved, lib.no_grad():
        for name, value in state.items():
            value.copy_(lib.from_numpy(np.ascontiguousarray(saved[name])))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", choices=("tessera", "torch"), required=True)
    ap.add_argument("--model", required=True, help="nanoGPT's model.py")
    ap.add_argument("--weights", required=True, help=".npz of the initial weights (written if absent)")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    lib = import_framework(args.framework)
    if args.threads:
        lib.set_num_threads(args.threads)
    sys.path.insert(0, HERE)
    from compile import median_time  # benchmarks/compile.py (imports tessera only)

    nanogpt = load_module(args.model)
    lib.manual_seed(0)
    config = nanogpt.GPTConfig(n_layer=args.layers, n_head=6, n_embd=384, block_size=256,
                               vocab_size=65, dropout=0.0, bias=True)
    with contextlib.redirect_stdout(io.StringIO()):
        model = nanogpt.GPT(config)
        share_weights(lib, model, args.weights)
        optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cpu")
    model.train()
    tokens = np.random.default_rng(0).integers(0, 65, (8, 257))
    x, y = lib.tensor(tokens[:, :-1].copy()), lib.tensor(tokens[:, 1:].copy())
    losses = []

    def step():
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.item()))

    ms = 1e3 * median_time(step, args.reps)
    top = ""
    if args.framework == "tessera":
        from models import top_ops  # benchmarks/models.py (its `torch` is tessera in this process)
        top = top_ops(step)
    print(json.dumps({"ms": ms, "losses": losses[:3], "top": top}))


if __name__ == "__main__":
    main()
