"""all_reduce bandwidth, tessera's gloo backend beside torch.distributed's ProcessGroupGloo, in one run.

For each world size (2 and 4 ranks on this machine, loopback TCP) and message size (4 KB .. 256 MB,
float32), every rank times all_reduce(SUM) and rank 0 prints the median. Bandwidths as nccl-tests
defines them: algbw = bytes / time; busbw = algbw * 2 (n - 1) / n.

    python3 benchmarks/distributed.py [--worlds 2 4] [--max-mb 256]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

WORKER = r'''
import json, os, statistics, sys, time
framework, sizes = sys.argv[1], json.loads(sys.argv[2])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if framework == "torch":
    import torch as fw
    import torch.distributed as dist
else:
    import tessera as fw
    import tessera.distributed as dist
fw.set_num_threads(1)
dist.init_process_group("gloo")
results = {}
for nbytes in sizes:
    t = fw.ones(nbytes // 4)
    iters = max(3, min(200, int(2e8 // max(nbytes, 1))))
    for _ in range(2):
        dist.all_reduce(t)
    times = []
    for _ in range(iters):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - start)
    results[nbytes] = statistics.median(times)
if rank == 0:
    print("RESULT " + json.dumps(results), flush=True)
dist.destroy_process_group()
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(framework, world, sizes, pythonpath):
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1", PYTHONPATH=pythonpath)
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER, framework, json.dumps(sizes)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = [p.communicate(timeout=900) for p in procs]
    for p, (o, e) in zip(procs, out):
        if p.returncode != 0:
            raise RuntimeError(f"{framework} world {world} failed:\n{o}\n{e}")
    line = next(l for l in out[0][0].splitlines() if l.startswith("RESULT "))
    return {int(k): v for k, v in json.loads(line[7:]).items()}


def human(n):
    return f"{n // (1 << 20)} MB" if n >= 1 << 20 else f"{n // 1024} KB"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--max-mb", type=int, default=256)
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.path.join(os.path.dirname(here), "build", "release", "python")
    pythonpath = build + os.pathsep + os.environ.get("PYTHONPATH", "")
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    sizes = []
    n = 4096
    while n <= args.max_mb << 20:
        sizes.append(n)
        n *= 4
    print(f"all_reduce(SUM) float32, loopback TCP, {os.cpu_count()} cores; medians; busbw = algbw * 2(n-1)/n")
    for world in args.worlds:
        ours = run("tessera", world, sizes, pythonpath)
        theirs = run("torch", world, sizes, pythonpath) if have_torch else {}
        factor = 2 * (world - 1) / world
        print(f"\n{world} ranks")
        print(f"{'size':>8} {'tessera us':>11} {'algbw GB/s':>11} {'busbw GB/s':>11} {'torch us':>10} "
              f"{'busbw GB/s':>11} {'speedup':>8}")
        for nbytes in sizes:
            t = ours[nbytes]
            algbw = nbytes / t / 1e9
            row = f"{human(nbytes):>8} {t * 1e6:11.1f} {algbw:11.3f} {algbw * factor:11.3f}"
            if theirs:
                u = theirs[nbytes]
                row += f" {u * 1e6:10.1f} {nbytes / u / 1e9 * factor:11.3f} {u / t:7.2f}x"
            print(row)


if __name__ == "__main__":
    main()
