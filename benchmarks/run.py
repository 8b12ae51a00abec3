#!/usr/bin/env python3
"""Tessera's CPU performance beside its peers, in one table.

Each row: an operation and size, the median time of Tessera, PyTorch (when importable), NumPy,
and the roofline: the time the operation needs at this machine's measured memory bandwidth
(element-wise ops, reductions, softmax) or at its measured peak GEMM rate (matmul, conv2d), so
"roof/ts" is the fraction of the attainable speed Tessera reaches. The bandwidth comes from a
STREAM-like loop (NumPy copy and add of large arrays on every core, best of both); the peak GEMM rate from
Tessera's mm (oneDNN sgemm) on 2048 x 2048. Peers run in the same process, interleaved, so
machine noise hits them alike. Writes a PNG of the ratios when matplotlib is importable.

    PYTHONPATH=build/release/python python3 benchmarks/run.py [--quick] [--big] [--threads N] [--plot out.png]

On a loaded machine, OpenMP wake-ups dominate mid-size ops; --threads 1 (with
OPENBLAS_NUM_THREADS=1 for NumPy's matmul) gives the cleanest like-for-like single-core figures.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

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
import zoo_models  # noqa: E402  (benchmarks/, the script's folder, is on sys.path)

try:
    import torch  # noqa: E402
except ImportError:
    torch = None

F32 = 4  # bytes per float32


def timed(fn, repeat, min_time):
    """Median seconds per call over `repeat` samples, each long enough to time (>= min_time)."""
    fn()  # warm up: first-touch page faults, allocator caches, lazy plugin set-up
    number, t = 1, 0.0
    while True:  # calibrate calls per sample
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


# ---------------------------------------------------------------------------- machine limits
def stream_bandwidth(repeat):
    """Bytes per second of a NumPy copy and add of 32M floats on every core (STREAM convention:
    bytes read + written, no write-allocate traffic counted); the best of the two. As STREAM runs
    one OpenMP thread per core, the arrays are cut into one slice per CPU, each handled by its own
    thread (NumPy releases the GIL), so the roofline is the machine's, not one core's."""
    n = 32 << 20
    a = np.ones(n, np.float32)
    b = np.ones(n, np.float32)
    c = np.empty(n, np.float32)
    parts = os.cpu_count() or 1
    bounds = [(i * n // parts, (i + 1) * n // parts) for i in range(parts)]
    with ThreadPoolExecutor(parts) as pool:
        def on_every_core(kernel):
            return lambda: list(pool.map(lambda r: kernel(slice(*r)), bounds))
        t_copy = timed(on_every_core(lambda s: np.copyto(c[s], a[s])), repeat, 0.2)
        t_add = timed(on_every_core(lambda s: np.add(a[s], b[s], out=c[s])), repeat, 0.2)
    return max(2 * n * F32 / t_copy, 3 * n * F32 / t_add)


def peak_gemm(repeat):
    """Flops per second of Tessera's mm (oneDNN sgemm) on 2048 x 2048 float32."""
    n = 2048
    a = ts.randn(n, n)
    b = ts.randn(n, n)
    t = timed(lambda: ts.mm(a, b), repeat, 0.5)
    return 2.0 * n ** 3 / t


# ---------------------------------------------------------------------------- the cases
class Case:
    """One row: callables for each framework (None: no such peer), and the roofline seconds."""

    def __init__(self, op, size, ts_fn, np_fn, torch_fn, roof):
        self.op, self.size, self.ts_fn, self.np_fn, self.torch_fn, self.roof = op, size, ts_fn, np_fn, torch_fn, roof


def elementwise_cases(sizes, bw):
    rng = np.random.default_rng(0)
    cases = []
    for n in sizes:
        x_np = rng.standard_normal(n, dtype=np.float32)
        y_np = rng.standard_normal(n, dtype=np.float32) + np.float32(3)
        x_ts, y_ts = ts.from_numpy(x_np.copy()), ts.from_numpy(y_np.copy())
        x_th = torch.from_numpy(x_np.copy()) if torch else None
        y_th = torch.from_numpy(y_np.copy()) if torch else None
        rows2 = x_np.reshape(-1, 1024) if n >= 1024 else x_np.reshape(1, -1)
        r_ts = ts.from_numpy(rows2.copy())
        r_th = torch.from_numpy(rows2.copy()) if torch else None
        size = human(n)

        def np_softmax(r=rows2):
            e = np.exp(r - r.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        bin_bytes, un_bytes = 3 * n * F32 / bw, 2 * n * F32 / bw
        th = torch is not None
        cases += [
            Case("add", size, lambda a=x_ts, b=y_ts: ts.add(a, b), lambda a=x_np, b=y_np: np.add(a, b),
                 (lambda a=x_th, b=y_th: torch.add(a, b)) if th else None, bin_bytes),
            Case("mul", size, lambda a=x_ts, b=y_ts: ts.mul(a, b), lambda a=x_np, b=y_np: np.multiply(a, b),
                 (lambda a=x_th, b=y_th: torch.mul(a, b)) if th else None, bin_bytes),
            Case("exp", size, lambda a=x_ts: ts.exp(a), lambda a=x_np: np.exp(a),
                 (lambda a=x_th: torch.exp(a)) if th else None, un_bytes),
            Case("tanh", size, lambda a=x_ts: ts.tanh(a), lambda a=x_np: np.tanh(a),
                 (lambda a=x_th: torch.tanh(a)) if th else None, un_bytes),
            Case("sum", size, lambda a=x_ts: a.sum(), lambda a=x_np: a.sum(),
                 (lambda a=x_th: a.sum()) if th else None, n * F32 / bw),
            Case("softmax(-1) rows of 1024" if n >= 1024 else "softmax(-1)", size,
                 lambda r=r_ts: ts.softmax(r, -1), np_softmax,
                 (lambda r=r_th: torch.softmax(r, -1)) if th else None, un_bytes),
        ]
    return cases


def matmul_cases(sizes, peak):
    cases = []
    for n in sizes:
        a_np = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
        b_np = np.random.default_rng(2).standard_normal((n, n), dtype=np.float32)
        a_ts, b_ts = ts.from_numpy(a_np.copy()), ts.from_numpy(b_np.copy())
        th = (torch.from_numpy(a_np.copy()), torch.from_numpy(b_np.copy())) if torch else None
        cases.append(Case("matmul", f"{n}x{n}", lambda a=a_ts, b=b_ts: ts.mm(a, b), lambda a=a_np, b=b_np: a @ b,
                          (lambda t=th: torch.mm(*t)) if th else None, 2.0 * n ** 3 / peak))
    return cases


def operator_cases(sizes, bw, peak):
    """sort, topk(k=100), cumsum over n floats; a sum over the batch rows (a bias gradient) and a
    ResNet stem's max pooling; einsum: a batched matmul and an attention-shaped
    contraction; a complex64 matmul; fft of a power-of-two and a prime length. The roofline of the
    scans, sorts and FFTs is their reads and writes at full bandwidth."""
    rng = np.random.default_rng(3)
    th = torch is not None
    cases = []
    for n in sizes:
        x_np = rng.standard_normal(n, dtype=np.float32)
        x_ts = ts.from_numpy(x_np.copy())
        x_th = torch.from_numpy(x_np.copy()) if th else None
        size, io = human(n), 2 * n * F32 / bw
        cases += [
            Case("sort", size, lambda a=x_ts: ts.sort(a), lambda a=x_np: np.sort(a, kind="stable"),
                 (lambda a=x_th: torch.sort(a)) if th else None, io),
            Case("topk(k=100)", size, lambda a=x_ts: ts.topk(a, 100), lambda a=x_np: np.argpartition(a, -100)[-100:],
                 (lambda a=x_th: torch.topk(a, 100)) if th else None, n * F32 / bw),
            Case("cumsum", size, lambda a=x_ts: ts.cumsum(a, 0), lambda a=x_np: np.cumsum(a),
                 (lambda a=x_th: torch.cumsum(a, 0)) if th else None, io),
        ]
    # A bias gradient (a sum over the batch rows) and a ResNet stem's max pooling (3x3, stride 2,
    # pad 1); NumPy's pooling is a strided window view.
    g_np = rng.standard_normal((2048, 1152), dtype=np.float32)
    g_ts, g_th = ts.from_numpy(g_np.copy()), (torch.from_numpy(g_np.copy()) if th else None)
    cases.append(Case("sum over dim 0", "2048x1152", lambda a=g_ts: a.sum(0), lambda a=g_np: a.sum(0),
                      (lambda a=g_th: a.sum(0)) if th else None, g_np.nbytes / bw))
    p_np = rng.standard_normal((8, 64, 112, 112), dtype=np.float32)
    p_ts, p_th = ts.from_numpy(p_np.copy()), (torch.from_numpy(p_np.copy()) if th else None)

    def numpy_pool(a):
        padded = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
        return np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::2, ::2].max(axis=(-2, -1))
    cases.append(Case("max_pool2d 3x3/2", "8x64x112x112", lambda a=p_ts: ts.nn.functional.max_pool2d(a, 3, 2, 1),
                      lambda a=p_np: numpy_pool(a),
                      (lambda a=p_th: torch.nn.functional.max_pool2d(a, 3, 2, 1)) if th else None,
                      1.25 * p_np.nbytes / bw))
    for eq, sa, sb in (("bij,bjk->bik", (64, 128, 128), (64, 128, 128)),
                       ("bhqd,bhkd->bhqk", (8, 8, 256, 64), (8, 8, 256, 64))):
        a_np = rng.standard_normal(sa, dtype=np.float32)
        b_np = rng.standard_normal(sb, dtype=np.float32)
        a_ts, b_ts = ts.from_numpy(a_np.copy()), ts.from_numpy(b_np.copy())
        ab_th = (torch.from_numpy(a_np.copy()), torch.from_numpy(b_np.copy())) if th else None
        flops = 2.0 * np.prod(sa) * (sb[-1] if eq.startswith("bij") else sb[-2])
        cases.append(Case(f"einsum {eq}", "x".join(map(str, sa)), lambda e=eq, a=a_ts, b=b_ts: ts.einsum(e, a, b),
                          lambda e=eq, a=a_np, b=b_np: np.einsum(e, a, b, optimize=True),
                          (lambda e=eq, t=ab_th: torch.einsum(e, *t)) if th else None, flops / peak))
    # Complex products (four real GEMMs) and FFTs: a power of two and a prime length (Bluestein).
    n = 512
    z_np = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(np.complex64)
    z_ts = ts.from_numpy(z_np.copy())
    z_th = torch.from_numpy(z_np.copy()) if th else None
    cases.append(Case("mm complex64", f"{n}x{n}", lambda a=z_ts: ts.mm(a, a), lambda a=z_np: a @ a,
                      (lambda a=z_th: torch.mm(a, a)) if th else None, 8.0 * n ** 3 / peak))
    for n in (1 << 20, 1000003):
        x_np = rng.standard_normal(n)
        x_ts = ts.from_numpy(x_np.copy())
        x_th = torch.from_numpy(x_np.copy()) if th else None
        cases.append(Case("fft float64", human(n) if n & (n - 1) == 0 else str(n), lambda a=x_ts: ts.fft.fft(a),
                          lambda a=x_np: np.fft.fft(a), (lambda a=x_th: torch.fft.fft(a)) if th else None,
                          3 * n * 8 / bw))
    return cases


def conv_case(peak):
    """A ResNet basic-block conv: 1x64x56x56 input, 64 3x3 filters, padding 1."""
    rng = np.random.default_rng(3)
    x_np = rng.standard_normal((1, 64, 56, 56), dtype=np.float32)
    w_np = rng.standard_normal((64, 64, 3, 3), dtype=np.float32)
    x_ts, w_ts = ts.from_numpy(x_np.copy()), ts.from_numpy(w_np.copy())
    conv = ts.ops.aten.convolution

    def np_conv(x=x_np, w=w_np):  # im2col with a strided view, then one GEMM
        xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))  # C, H, W, 3, 3
        return np.tensordot(w, cols, axes=([1, 2, 3], [0, 3, 4]))

    th = None
    if torch:
        xt, wt = torch.from_numpy(x_np.copy()), torch.from_numpy(w_np.copy())
        th = lambda: torch.nn.functional.conv2d(xt, wt, padding=1)  # noqa: E731
    flops = 2.0 * 64 * 64 * 9 * 56 * 56
    return Case("conv2d 3x3 64->64", "1x64x56x56", lambda: conv(x_ts, w_ts, None, [1, 1], [1, 1], [1, 1], 1),
                np_conv, th, flops / peak)


def mlp_case(peak, batch=128):
    """One SGD training step of a 784-256-10 MLP with cross-entropy, autograd in Tessera and
    PyTorch, hand-written backprop in NumPy."""
    rng = np.random.default_rng(4)
    x_np = rng.standard_normal((batch, 784), dtype=np.float32)
    y_np = rng.integers(0, 10, batch)
    w1_np = (rng.standard_normal((784, 256)) * 0.05).astype(np.float32)
    w2_np = (rng.standard_normal((256, 10)) * 0.05).astype(np.float32)
    b1_np, b2_np = np.zeros(256, np.float32), np.zeros(10, np.float32)
    lr = 1e-3

    def make_ts():
        x, y = ts.from_numpy(x_np.copy()), ts.tensor(y_np, dtype=ts.int64)
        params = [ts.from_numpy(p.copy()).requires_grad_() for p in (w1_np, b1_np, w2_np, b2_np)]
        F = ts.nn.functional

        def step():
            w1, b1, w2, b2 = params
            h = F.relu(x @ w1 + b1)
            loss = F.cross_entropy(h @ w2 + b2, y)
            loss.backward()
            with ts.no_grad():
                for p in params:
                    p.sub_(p.grad, alpha=lr)
                    p.grad = None
        return step

    def make_np():
        w1, b1, w2, b2 = (p.copy() for p in (w1_np, b1_np, w2_np, b2_np))
        onehot = np.eye(10, dtype=np.float32)[y_np]

        def step():
            z1 = x_np @ w1 + b1
            h = np.maximum(z1, 0)
            z2 = h @ w2 + b2
            e = np.exp(z2 - z2.max(axis=1, keepdims=True))
            p = e / e.sum(axis=1, keepdims=True)
            g2 = (p - onehot) / batch
            gw2, gb2 = h.T @ g2, g2.sum(0)
            gh = (g2 @ w2.T) * (z1 > 0)
            gw1, gb1 = x_np.T @ gh, gh.sum(0)
            for p_, g in ((w1, gw1), (b1, gb1), (w2, gw2), (b2, gb2)):
                p_ -= lr * g
        return step

    def make_torch():
        x, y = torch.from_numpy(x_np.copy()), torch.from_numpy(y_np.copy())
        params = [torch.from_numpy(p.copy()).requires_grad_() for p in (w1_np, b1_np, w2_np, b2_np)]
        F = torch.nn.functional

        def step():
            w1, b1, w2, b2 = params
            loss = F.cross_entropy(F.relu(x @ w1 + b1) @ w2 + b2, y)
            loss.backward()
            with torch.no_grad():
                for p in params:
                    p.sub_(p.grad, alpha=lr)
                    p.grad = None
        return step

    flops = 3 * 2.0 * batch * (784 * 256 + 256 * 10)  # forward + two backward GEMMs per layer
    return Case("MLP 784-256-10 train step", f"batch {batch}", make_ts(), make_np(),
                make_torch() if torch else None, flops / peak)


def lstm_cases(peak, steps=35, batch=20, vocab=2000, width=256, layers=2):
    """pytorch/examples' word_language_model shapes: a 2-layer LSTM of width 256 over 35 steps of
    20 sequences. Inference: the LSTM alone under no_grad. Train step: embedding, LSTM, decoder,
    cross-entropy, backward, gradient clipping and SGD, in Tessera and PyTorch from the same weights."""
    rng = np.random.default_rng(6)
    x_np = rng.standard_normal((steps, batch, width), dtype=np.float32)
    tokens = rng.integers(0, vocab, (steps, batch))
    targets = rng.integers(0, vocab, steps * batch)

    def build(lib):
        lib.manual_seed(0)
        nn = lib.nn
        emb, lstm, dec = nn.Embedding(vocab, width), nn.LSTM(width, width, layers), nn.Linear(width, vocab)
        return emb, lstm, dec

    def make(lib, from_numpy):
        emb, lstm, dec = build(lib)
        params = list(emb.parameters()) + list(lstm.parameters()) + list(dec.parameters())
        x, tok, tgt = from_numpy(x_np), from_numpy(tokens), from_numpy(targets)

        def infer():
            with lib.no_grad():
                lstm(x)

        def train():
            out, _ = lstm(emb(tok))
            loss = lib.nn.functional.cross_entropy(dec(out).reshape(-1, vocab), tgt)
            loss.backward()
            lib.nn.utils.clip_grad_norm_(params, 0.25)
            with lib.no_grad():
                for p in params:
                    p.sub_(p.grad, alpha=0.1)
                    p.grad = None
        return infer, train

    ts_infer, ts_train = make(ts, lambda a: ts.from_numpy(np.ascontiguousarray(a)))
    th_infer, th_train = make(torch, lambda a: torch.from_numpy(np.ascontiguousarray(a))) if torch else (None, None)
    lstm_flops = layers * steps * 2.0 * batch * (2 * width) * 4 * width
    train_flops = 3 * (lstm_flops + 2.0 * steps * batch * width * vocab)
    return [Case("LSTM inference", f"{layers}x{width}, {steps}x{batch}", ts_infer, None, th_infer, lstm_flops / peak),
            Case("LSTM LM train step", f"vocab {vocab}", ts_train, None, th_train, train_flops / peak)]


def digits_cnn_case(peak, batch=32):
    """One Adam step of examples/train_digits.py's CNN (two 3x3 convs with BatchNorm, ReLU and
    max-pooling, then Linear) on a batch of 8x8 images, in Tessera and PyTorch from the same
    weights; NumPy has no peer for it."""
    rng = np.random.default_rng(5)
    x_np = rng.standard_normal((batch, 1, 8, 8), dtype=np.float32)
    y_np = rng.integers(0, 10, batch)

    def stepper(lib, model, x, y):
        opt = lib.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = lib.nn.functional.cross_entropy

        def step():
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return step

    model = zoo_models.digits_cnn(ts)
    ts_step = stepper(ts, model, ts.from_numpy(x_np.copy()), ts.tensor(y_np, dtype=ts.int64))
    th_step = None
    if torch:
        tmodel = zoo_models.digits_cnn(torch)
        with torch.no_grad():  # the same initial weights
            for p, q in zip(tmodel.parameters(), model.parameters()):
                p.copy_(torch.from_numpy(q.detach().numpy().copy()))
        th_step = stepper(torch, tmodel, torch.from_numpy(x_np.copy()), torch.from_numpy(y_np.copy()))
    flops = 3 * 2.0 * batch * (16 * 9 * 64 + 32 * 16 * 9 * 16 + 128 * 10)
    return Case("digits CNN train step", f"batch {batch}", ts_step, None, th_step, flops / peak)


def human(n):
    for unit, k in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k}{unit}"
    return str(n)


def fmt_time(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def fmt_ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}x"


def plot(rows, path, have_torch):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not importable: no plot)")
        return
    labels = [f"{r[0].op} {r[0].size}" for r in rows]
    y = range(len(rows))
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(rows) + 1.5))
    ax.barh([i - 0.2 for i in y], [(r[2] / r[1]) if r[2] else 0 for r in rows], height=0.4,
            label="numpy / tessera (>1: faster)")
    if have_torch:
        ax.barh([i + 0.2 for i in y], [(r[3] / r[1]) if r[3] else 0 for r in rows], height=0.4,
                label="torch / tessera")
    ax.scatter([r[0].roof / r[1] for r in rows], list(y), marker="|", color="k", s=80, label="roofline / tessera")
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(list(y))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("speed relative to tessera")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a fast subset: 4K and 1M, matmul 256/512, fewer repeats")
    ap.add_argument("--big", action="store_true", help="also matmul 4096")
    ap.add_argument("--repeat", type=int, default=None, help="samples per measurement (median reported)")
    ap.add_argument("--plot", default=None,
                    help="PNG path (default: tessera_benchmarks.png in the temp folder; needs matplotlib)")
    ap.add_argument("--only", default=None, help="comma-separated op names to keep (e.g. add,exp,sum)")
    ap.add_argument("--threads", type=int, default=None,
                    help="tessera's thread count (ts._C.set_num_threads); peers follow OMP_NUM_THREADS etc.")
    args = ap.parse_args()
    if args.threads:
        ts._C.set_num_threads(args.threads)
        if torch:
            torch.set_num_threads(args.threads)
    repeat = args.repeat or (3 if args.quick else 7)
    min_time = 0.02 if args.quick else 0.1

    sizes = [4 << 10, 1 << 20] if args.quick else [4 << 10, 1 << 20, 16 << 20, 64 << 20]
    mm_sizes = [256, 512] if args.quick else [256, 512, 1024, 2048] + ([4096] if args.big else [])

    bw = stream_bandwidth(repeat)
    peak = peak_gemm(3 if args.quick else 5)
    cases = elementwise_cases(sizes, bw) + matmul_cases(mm_sizes, peak)
    cases += operator_cases([1 << 20, 16 << 20] if not args.quick else [1 << 20], bw, peak)
    cases += [conv_case(peak), mlp_case(peak), digits_cnn_case(peak)] + lstm_cases(peak)
    if args.only:
        keep = set(args.only.split(","))
        cases = [c for c in cases if c.op.split("(")[0].split()[0] in keep]

    print(f"tessera {ts.__version__} ({os.path.dirname(ts.__file__)}), numpy {np.__version__}, "
          f"torch {torch.__version__ if torch else 'not installed'}; {os.cpu_count()} CPUs, "
          f"{ts._C.get_num_threads()} tessera threads")
    print(f"roofline: STREAM bandwidth {bw / 1e9:.1f} GB/s (numpy copy/add, 32M floats, every core), "
          f"peak GEMM {peak / 1e9:.1f} GFLOP/s (tessera mm 2048, oneDNN); median of {repeat} samples")
    cols = ["operation", "size", "tessera", "torch", "numpy", "roofline", "np/ts", "torch/ts", "roof/ts"]
    widths = [26, 11, 11, 11, 11, 11, 7, 8, 7]
    line = " ".join(f"{c:>{w}}" if i > 1 else f"{c:<{w}}" for i, (c, w) in enumerate(zip(cols, widths)))
    print(line)
    print("-" * len(line))
    rows = []
    for c in cases:
        # Interleave the peers: each measured right after the other, under the same load.
        t_ts = timed(c.ts_fn, repeat, min_time)
        t_np = timed(c.np_fn, repeat, min_time) if c.np_fn else None
        t_th = timed(c.torch_fn, repeat, min_time) if c.torch_fn else None
        rows.append((c, t_ts, t_np, t_th))
        vals = [c.op, c.size, fmt_time(t_ts), fmt_time(t_th), fmt_time(t_np), fmt_time(c.roof),
                fmt_ratio(t_np, t_ts), fmt_ratio(t_th, t_ts), f"{100 * c.roof / t_ts:.0f}%"]
        print(" ".join(f"{v:>{w}}" if i > 1 else f"{v:<{w}}" for i, (v, w) in enumerate(zip(vals, widths))),
              flush=True)
    print("np/ts, torch/ts: >1 means tessera is faster; roof/ts: the share of the roofline tessera reaches")
    path = args.plot or os.path.join(tempfile.gettempdir(), "tessera_benchmarks.png")
    plot(rows, path, torch is not None)


if __name__ == "__main__":
    main()
