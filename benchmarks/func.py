#!/usr/bin/env python3
"""tessera.func beside torch.func (when importable) and a Python loop, median time per call:
  per-sample grads   vmap(grad) of an MLP's loss (784-128-10, batch 256) w.r.t. its weights
  jacrev, jacfwd     the Jacobian of a 100-input function (an MLP 100-64-100 with tanh), by
                     reverse mode (vmap of vjp) and by forward mode (vmap of jvp over dual tensors)
  ensemble           10 small MLPs (64-128-10) on one batch through vmap(functional_call)

    PYTHONPATH=build/release/python python3 benchmarks/func.py [--quick] [--threads N]
"""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "release", "python"))

import numpy as np  # noqa: E402

import tessera as ts  # noqa: E402
import tessera.func as tfunc  # noqa: E402

try:
    import torch  # noqa: E402
    import torch.func  # noqa: E402,F401
except ImportError:
    torch = None


def median_time(fn, repeat, min_time=0.2):
    fn()
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        t = time.perf_counter() - t0
        if t >= min_time or number >= 4096:
            break
        number *= 2
    samples = [t / number]
    for _ in range(repeat - 1):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def mlp_weights(rng, sizes):
    return [((rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32), np.zeros(o, np.float32))
            for i, o in zip(sizes[:-1], sizes[1:])]


# ---------------------------------------------------------------------------- workloads
def per_sample_grads(lib, weights, x, y):
    """(vmap(grad) per-sample gradients, the same by a Python loop over samples)."""
    F = lib.nn.functional
    params = [lib.tensor(a) for w in weights for a in w]
    xs, ys = lib.tensor(x), lib.tensor(y)
    func = tfunc if lib is ts else torch.func

    def loss(ps, xi, yi):
        h = xi.unsqueeze(0)
        for k in range(0, len(ps), 2):
            h = F.linear(h, ps[k], ps[k + 1])
            if k + 2 < len(ps):
                h = h.relu()
        return F.cross_entropy(h, yi.unsqueeze(0))

    vmapped = func.vmap(func.grad(loss), in_dims=(None, 0, 0))

    def with_vmap():
        return vmapped(params, xs, ys)

    leaves = [p.detach().requires_grad_() for p in params]

    def with_loop():
        out = []
        for i in range(xs.shape[0]):
            out.append(lib.autograd.grad(loss(leaves, xs[i], ys[i]), leaves))
        return out

    return with_vmap, with_loop


def jacobian(lib, weights, v, mode="jacrev"):
    func = tfunc if lib is ts else torch.func
    (w1, b1), (w2, b2) = [(lib.tensor(w), lib.tensor(b)) for w, b in weights]

    def f(x):
        return (w2 @ (w1 @ x + b1).tanh() + b2).tanh()

    xv = lib.tensor(v)
    jac = getattr(func, mode)(f)
    return lambda: jac(xv)


def ensemble(lib, models_np, x):
    func = tfunc if lib is ts else torch.func
    nn = lib.nn

    def make(ws):
        m = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        with lib.no_grad():
            m[0].weight.copy_(lib.tensor(ws[0][0]))
            m[0].bias.copy_(lib.tensor(ws[0][1]))
            m[2].weight.copy_(lib.tensor(ws[1][0]))
            m[2].bias.copy_(lib.tensor(ws[1][1]))
        return m

    models = [make(ws) for ws in models_np]
    params, buffers = func.stack_module_state(models)
    base = make(models_np[0]).to("meta") if lib is torch else make(models_np[0])
    xs = lib.tensor(x)

    def call(p, b, xi):
        return func.functional_call(base, (p, b), (xi,))

    batched = func.vmap(call, in_dims=(0, 0, None))

    def with_vmap():
        with lib.no_grad():
            return batched(params, buffers, xs)

    def with_loop():
        with lib.no_grad():
            return [m(xs) for m in models]

    return with_vmap, with_loop


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        ts.set_num_threads(args.threads)
        if torch:
            torch.set_num_threads(args.threads)
    repeat = 3 if args.quick else 7
    rng = np.random.default_rng(0)
    mlp = mlp_weights(rng, [784, 128, 10])
    x = rng.standard_normal((256, 784)).astype(np.float32)
    y = rng.integers(0, 10, 256).astype(np.int64)
    jac_w = mlp_weights(rng, [100, 64, 100])
    v = rng.standard_normal(100).astype(np.float32)
    models_np = [mlp_weights(rng, [64, 128, 10]) for _ in range(10)]
    xe = rng.standard_normal((32, 64)).astype(np.float32)

    rows = []
    libs = [ts] + ([torch] if torch else [])
    timings = {}
    for lib in libs:
        name = "tessera" if lib is ts else "torch"
        vm, loop = per_sample_grads(lib, mlp, x, y)
        timings[(name, "psg_vmap")] = median_time(vm, repeat)
        timings[(name, "psg_loop")] = median_time(loop, max(3, repeat // 2), min_time=0)
        timings[(name, "jacrev")] = median_time(jacobian(lib, jac_w, v), repeat)
        timings[(name, "jacfwd")] = median_time(jacobian(lib, jac_w, v, "jacfwd"), repeat)
        ev, el = ensemble(lib, models_np, xe)
        timings[(name, "ens_vmap")] = median_time(ev, repeat)
        timings[(name, "ens_loop")] = median_time(el, repeat)

    def ms(k):
        return timings[k] * 1e3

    print(f"tessera.func beside {'torch.func ' + torch.__version__ if torch else '(torch not importable)'}, "
          f"{ts.get_num_threads()} threads, median ms per call")
    print(f"{'workload':<44}{'tessera':>10}{'torch':>10}{'torch/tessera':>15}")
    for label, key in [("per-sample grads, vmap(grad), MLP b=256", "psg_vmap"),
                       ("per-sample grads, Python loop of autograd", "psg_loop"),
                       ("jacrev, 100 inputs", "jacrev"),
                       ("jacfwd, 100 inputs", "jacfwd"),
                       ("ensemble of 10 MLPs, vmap(functional_call)", "ens_vmap"),
                       ("ensemble of 10 MLPs, Python loop", "ens_loop")]:
        t_ts = ms(("tessera", key))
        t_pt = ms(("torch", key)) if torch else float("nan")
        rows.append((label, t_ts, t_pt))
        print(f"{label:<44}{t_ts:>10.2f}{t_pt:>10.2f}{t_pt / t_ts:>14.2f}x")
    print(f"tessera: vmap(grad) is {ms(('tessera', 'psg_loop')) / ms(('tessera', 'psg_vmap')):.1f}x its loop; "
          f"ensemble vmap is {ms(('tessera', 'ens_loop')) / ms(('tessera', 'ens_vmap')):.1f}x its loop")
    # The floor of the per-sample gradients: only writing them (every parameter once per sample).
    out_numel = x.shape[0] * sum(w.size + b.size for w, b in mlp)
    buffer = ts.empty(out_numel)
    fill = median_time(lambda: buffer.fill_(1.0), repeat) * 1e3
    print(f"floor: writing the {out_numel * 4 / 1e6:.0f} MB of per-sample gradients alone takes {fill:.2f} ms "
          f"(fill_); 10x the loop would be {ms(('tessera', 'psg_loop')) / 10:.2f} ms")


if __name__ == "__main__":
    main()
