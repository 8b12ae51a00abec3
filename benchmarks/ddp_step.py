"""One DistributedDataParallel training step (forward, loss, backward with the bucketed gradient
all-reduce, SGD step) on 2 ranks, tessera beside torch (both gloo over loopback, one thread per
rank), in the same run; and each framework's single process on the per-rank batch, so the cost of
DDP over plain training shows. Medians of the timed steps, in ms.

Tessera's ranks start with `python -m tessera.distributed.run --nproc-per-node 2`, torch's with
`python -m torch.distributed.run --nproc-per-node 2`; the single-process runs are plain `python`.

    PYTHONPATH=build/release/python python3 benchmarks/ddp_step.py [--steps 30] [--batch 64]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

WORKER = r'''
import json, os, statistics, sys, time
framework, mode, steps, batch, width = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if framework == "torch":
    import torch as fw
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
else:
    import tessera as fw
    import tessera.distributed as dist
    from tessera.nn.parallel import DistributedDataParallel as DDP
fw.set_num_threads(1)
nn = fw.nn
fw.manual_seed(0)
model = nn.Sequential(nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
rank = 0
if mode == "ddp":
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(model)
opt = fw.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = fw.randn(batch, 784)
y = fw.randint(0, 10, (batch,))
times = []
for i in range(steps + 5):
    if mode == "ddp":
        dist.barrier()  # every rank starts the step together: the time is the step's, not a wait for a peer
    start = time.perf_counter()
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    if i >= 5:  # the first steps allocate, and DDP rebuilds its buckets after the first
        times.append(time.perf_counter() - start)
if rank == 0:
    print("RESULT " + json.dumps({"median_ms": 1e3 * statistics.median(times)}), flush=True)
if mode == "ddp":
    dist.destroy_process_group()
'''


def run(command, env):
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    for line in out.stdout.splitlines():
        if "RESULT " in line:
            return json.loads(line.split("RESULT ", 1)[1])["median_ms"]
    raise RuntimeError(f"{' '.join(command)} gave no result (exit {out.returncode}):\n{out.stdout}\n{out.stderr}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=64, help="samples per rank")
    parser.add_argument("--width", type=int, default=1024, help="hidden width of the 3-layer MLP")
    args = parser.parse_args()
    import tessera
    package = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=package + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "ddp_worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        sizes = [str(args.steps), str(args.batch), str(args.width)]
        launchers = {"tessera": [sys.executable, "-m", "tessera.distributed.run", "--nproc-per-node", "2"],
                     "torch": [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]}
        results = {}
        for framework in ("tessera", "torch"):
            if framework == "torch":
                try:
                    import torch  # noqa: F401
                except ImportError:
                    print("torch is not installed: tessera's numbers only")
                    continue
            results[framework] = {
                "ddp": run(launchers[framework] + [script, framework, "ddp"] + sizes, env),
                "single": run([sys.executable, script, framework, "single"] + sizes, env),
            }
    params = 784 * args.width + args.width + args.width * args.width + args.width + args.width * 10 + 10
    print(f"MLP 784-{args.width}-{args.width}-10 ({params / 1e6:.2f}M parameters, {params * 4 / 2**20:.1f} MiB of "
          f"gradients), batch {args.batch} per rank, SGD, 2 ranks (gloo, loopback, 1 thread each); "
          f"median of {args.steps} steps")
    print(f"{'':10}{'DDP 2 ranks':>14}{'1 process':>12}{'DDP overhead':>15}")
    for framework, r in results.items():
        print(f"{framework:10}{r['ddp']:11.2f} ms{r['single']:9.2f} ms{r['ddp'] - r['single']:12.2f} ms")
    if len(results) == 2:
        print(f"tessera / torch, DDP step: {results['tessera']['ddp'] / results['torch']['ddp']:.2f}x; "
              f"single process: {results['tessera']['single'] / results['torch']['single']:.2f}x")


if __name__ == "__main__":
    main()
