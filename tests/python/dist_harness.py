"""Runs a world of real processes on loopback for the distributed tests: each rank runs the same
script with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, as the launcher would."""
import os
import socket
import subprocess
import sys
import textwrap


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_pair():
    """A port p with p + 1 free too (the multi-node launcher keeps its own store at
    MASTER_PORT + 1): both are bound at once to check, then released."""
    for _ in range(100):
        p = free_port()
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + 1))
            except OSError:
                continue
            return p
    raise RuntimeError("free_port_pair: no two adjacent free ports found in 100 tries")


def package_path():
    import tessera
    return os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))


def start_world(tmp_path, world_size, body, extra_env=None, name="worker.py"):
    """Starts the ranks; returns their Popen objects (stdout and stderr piped)."""
    script = tmp_path / name
    script.write_text("import os, sys\nimport numpy as np\nimport tessera as ts\nimport tessera.distributed as dist\n"
                      "RANK = int(os.environ['RANK']); WORLD = int(os.environ['WORLD_SIZE'])\n"
                      + textwrap.dedent(body))
    port = free_port()
    procs = []
    for rank in range(world_size):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                   PYTHONPATH=package_path() + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.update(extra_env or {})
        procs.append(subprocess.Popen([sys.executable, str(script)], env=env, cwd=str(tmp_path),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def finish_world(procs, timeout=120):
    """Waits for every rank (killing all of them past `timeout`); returns [(returncode, out, err)]."""
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, err = p.communicate()
            err += f"\n[harness] killed after {timeout} s"
        results.append((p.returncode, out, err))
    return results


def run_world_to_ok(tmp_path, world_size, body, timeout=120, extra_env=None):
    """run_world, and every rank's last line of output must be "ok" (the body got to its end)."""
    results = run_world(tmp_path, world_size, body, timeout, extra_env)
    for rank, (_, out, err) in enumerate(results):
        assert out.strip().endswith("ok"), f"rank {rank} did not finish:\n{out}\n{err}"
    return results


def run_world(tmp_path, world_size, body, timeout=120, extra_env=None):
    """Runs the ranks to the end and fails the test with every rank's output when one failed."""
    results = finish_world(start_world(tmp_path, world_size, body, extra_env), timeout)
    if any(rc != 0 for rc, _, _ in results):
        report = "\n".join(f"--- rank {r} (exit {rc})\n{out}\n{err}" for r, (rc, out, err) in enumerate(results))
        raise AssertionError(f"a rank failed:\n{report}")
    return results
