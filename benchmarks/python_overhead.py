#!/usr/bin/env python3
"""Python-level overhead of tessera beside NumPy (and PyTorch when importable).

Prints one table: median time per call of ts.add on 4-element tensors, the operator form a + b,
a Tensor method (x.sum()), basic indexing x[0, 1:3], the raw _C.call_op, and the wall time of
`python -c "import tessera"` (a fresh interpreter each time), with ratios to the peers.
Target: ts.add median <= 1.0 us.

    PYTHONPATH=build/release/python python3 benchmarks/python_overhead.py [--quick]
"""
import argparse
import os
import statistics
import subprocess
import sys
import timeit

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


def per_call(stmt, env, number, repeat):
    """Median seconds per call of `stmt` over `repeat` runs of `number` calls."""
    timer = timeit.Timer(stmt, globals=env)
    timer.timeit(number=max(1, number // 10))  # warm up
    return statistics.median(t / number for t in timer.repeat(repeat=repeat, number=number))


def import_time(module, runs):
    """Median wall time of a fresh `python -c "import <module>"` (the whole process). Bytecode
    caching is allowed (PYTHONDONTWRITEBYTECODE is dropped) and one untimed run writes the
    caches first, as an installed package has its .pyc files."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if BUILD_PYTHON:
        env["PYTHONPATH"] = BUILD_PYTHON + os.pathsep + env.get("PYTHONPATH", "")
    code = f"import {module}" if module else "pass"
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    times = []
    for _ in range(runs):
        t0 = timeit.default_timer()
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        times.append(timeit.default_timer() - t0)
    return statistics.median(times)


def fmt_time(seconds):
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.3f} us"
    return f"{seconds * 1e3:8.2f} ms"


def fmt_ratio(a, b):
    if a is None or b is None:
        return "-"
    return f"{a / b:6.2f}x"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--import-runs", type=int, default=None)
    args = ap.parse_args()
    number, repeat = (20000, 7) if args.quick else (200000, 15)
    import_runs = args.import_runs or (9 if args.quick else 21)

    a_ts, b_ts = ts.tensor([1.0, 2.0, 3.0, 4.0]), ts.tensor([5.0, 6.0, 7.0, 8.0])
    m_ts = ts.arange(16, dtype=ts.float32).reshape(4, 4)
    a_np, b_np = np.array([1.0, 2.0, 3.0, 4.0], np.float32), np.array([5.0, 6.0, 7.0, 8.0], np.float32)
    m_np = np.arange(16, dtype=np.float32).reshape(4, 4)
    env_ts = {"ts": ts, "a": a_ts, "b": b_ts, "m": m_ts, "call_op": ts._C.call_op, "E": {}}
    env_np = {"np": np, "a": a_np, "b": b_np, "m": m_np}
    env_th = None
    if torch is not None:
        env_th = {"torch": torch, "a": torch.tensor([1.0, 2.0, 3.0, 4.0]), "b": torch.tensor([5.0, 6.0, 7.0, 8.0]),
                  "m": torch.arange(16, dtype=torch.float32).reshape(4, 4)}

    rows = [
        ("ts.add(a, b), 4 x float32", "ts.add(a, b)", "np.add(a, b)", "torch.add(a, b)"),
        ("a + b", "a + b", "a + b", "a + b"),
        ("_C.call_op('add', (a, b), {})", "call_op('add', (a, b), E)", None, None),
        ("x.sum() (method)", "a.sum()", "a.sum()", "a.sum()"),
        ("x[0, 1:3] (4x4)", "m[0, 1:3]", "m[0, 1:3]", "m[0, 1:3]"),
        ("x[1] (4x4)", "m[1]", "m[1]", "m[1]"),
    ]
    results = []
    for label, s_ts, s_np, s_th in rows:
        t_ts = per_call(s_ts, env_ts, number, repeat)
        t_np = per_call(s_np, env_np, number, repeat) if s_np else None
        t_th = per_call(s_th, env_th, number, repeat) if (s_th and env_th) else None
        results.append((label, t_ts, t_np, t_th))

    t_py = import_time(None, import_runs)
    t_imp_ts = import_time("tessera", import_runs)
    t_imp_np = import_time("numpy", import_runs)
    t_imp_th = import_time("torch", max(3, import_runs // 3)) if torch is not None else None
    results.append(("python -c 'import X' (wall)", t_imp_ts, t_imp_np, t_imp_th))
    results.append(("  python -c 'pass' (baseline)", t_py, t_py, t_py if torch is not None else None))

    print(f"tessera {ts.__version__} ({os.path.dirname(ts.__file__)}), numpy {np.__version__}, "
          f"torch {torch.__version__ if torch is not None else 'not installed'}; python {sys.version.split()[0]}")
    print(f"median of {repeat} runs x {number} calls; import: median of {import_runs} fresh interpreters")
    header = f"{'benchmark':34} {'tessera':>12} {'numpy':>12} {'ts/np':>8} {'torch':>12} {'ts/torch':>8}"
    print(header)
    print("-" * len(header))
    for label, t_ts, t_np, t_th in results:
        print(f"{label:34} {fmt_time(t_ts):>12} {fmt_time(t_np):>12} {fmt_ratio(t_ts, t_np):>8} "
              f"{fmt_time(t_th):>12} {fmt_ratio(t_ts, t_th):>8}")
    add = results[0][1]
    print(f"\nts.add median {add * 1e6:.3f} us (target <= 1.0 us): {'OK' if add <= 1.0e-6 else 'ABOVE TARGET'}")
    print(f"import tessera {t_imp_ts * 1e3:.1f} ms wall, {max(0.0, t_imp_ts - t_py) * 1e3:.1f} ms over a bare "
          f"interpreter (target <= 60 ms): {'OK' if t_imp_ts <= 0.060 else 'ABOVE TARGET'}")


if __name__ == "__main__":
    main()
