"""`python -m tessera.distributed.run` (torchrun's launcher): real launcher processes running small
worker scripts written to tmp_path. Workers only print, check their environment, write their pid,
sleep and exit; they need no collectives. Every subprocess call has a timeout."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import tessera
from dist_harness import free_port_pair

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
TIMEOUT = 30

ENV_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
             "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
             "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "OMP_NUM_THREADS")

# Writes its environment to <out>/env_<RANK>.json.
ENV_WORKER = f"""
import json, os, sys
names = {ENV_NAMES!r}
with open(os.path.join(sys.argv[1], "env_" + os.environ["RANK"] + ".json"), "w") as f:
    json.dump({{name: os.environ.get(name) for name in names}}, f)
"""

# Writes <out>/pid_<RANK>; rank FAIL_RANK fails as `FAIL_HOW` says once every rank is up, the others sleep.
FAILING_WORKER = """
import os, signal, sys, time
out, fail_rank, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if how == "grandchild":  # a child in the worker's process group, which must die with it
    import subprocess
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    open(os.path.join(out, f"grandchild_{rank}"), "w").write(str(child.pid))
if how == "ignore-sigterm":  # only SIGKILL stops it
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(os.path.join(out, f"pid_{rank}"), "w").write(str(os.getpid()))
while len([n for n in os.listdir(out) if n.startswith("pid_")]) < world:
    time.sleep(0.02)
if rank == fail_rank:
    print(f"rank {rank} about to fail", flush=True)
    print("first stderr line\\nlast words before dying", file=sys.stderr, flush=True)
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(3)
time.sleep(60)
"""


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    env.pop("OMP_NUM_THREADS", None)
    for name in list(env):
        if name.startswith("PET_"):
            env.pop(name)
    env.update(extra)
    return env


def _launcher_cmd(*args):
    return [sys.executable, "-m", "tessera.distributed.run", *map(str, args)]


def _launch(*args, cwd=None, env=None, timeout=TIMEOUT):
    return subprocess.run(_launcher_cmd(*args), capture_output=True, text=True, cwd=cwd, env=env or _env(),
                          timeout=timeout)


def _script(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def _alive(pid):
    """A zombie (nobody reaped it yet: PID 1 in a container may not) counts as dead."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _wait_dead(pids, seconds=5):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


def _pids(out, prefix):
    return {int(name[len(prefix):]): int((out / name).read_text()) for name in os.listdir(out)
            if name.startswith(prefix)}


def _read_envs(out):
    return {int(name[4:-5]): json.loads((out / name).read_text()) for name in os.listdir(out)
            if name.startswith("env_")}


def test_env_per_rank_single_node(tmp_path):
    worker = _script(tmp_path, "env_worker.py", ENV_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    done = _launch("--nproc-per-node", 3, "--rdzv-id", "job7", worker, out)
    assert done.returncode == 0, done.stderr
    envs = _read_envs(out)
    assert sorted(envs) == [0, 1, 2]
    ports = {env["MASTER_PORT"] for env in envs.values()}
    assert len(ports) == 1 and 0 < int(ports.pop()) < 65536  # one node, no port given: a free port
    for rank, env in envs.items():
        assert env == dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="3", LOCAL_WORLD_SIZE="3",
                           GROUP_RANK="0", GROUP_WORLD_SIZE="1", ROLE_RANK=str(rank), ROLE_WORLD_SIZE="3",
                           ROLE_NAME="default", MASTER_ADDR="127.0.0.1", TORCHELASTIC_RESTART_COUNT="0",
                           TORCHELASTIC_MAX_RESTARTS="0", TORCHELASTIC_RUN_ID="job7", OMP_NUM_THREADS="1")
    assert done.stderr.count("Setting OMP_NUM_THREADS environment variable") == 1


def test_env_two_nodes_as_two_launchers(tmp_path):
    worker = _script(tmp_path, "env_worker.py", ENV_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    # Underscore spellings, as torchrun accepts them; a user's OMP_NUM_THREADS is kept.
    nodes = [subprocess.Popen(_launcher_cmd("--nnodes", 2, "--node_rank", node, "--nproc_per_node", 3,
                                            "--master_addr", "127.0.0.1", "--master_port", 29123, worker, out),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(OMP_NUM_THREADS="2"))
             for node in (0, 1)]
    for node in nodes:
        _, err = node.communicate(timeout=TIMEOUT)
        assert node.returncode == 0, err
        assert "OMP_NUM_THREADS" not in err
    envs = _read_envs(out)
    assert sorted(envs) == list(range(6))
    for rank, env in envs.items():
        assert env["LOCAL_RANK"] == str(rank % 3) and env["GROUP_RANK"] == str(rank // 3)
        assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["GROUP_WORLD_SIZE"]) == ("6", "3", "2")
        assert (env["ROLE_RANK"], env["ROLE_WORLD_SIZE"]) == (str(rank), "6")
        assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["OMP_NUM_THREADS"]) == ("127.0.0.1", "29123", "2")


def test_rdzv_endpoint_and_local_addr_name_the_master(tmp_path):
    worker = _script(tmp_path, "env_worker.py", ENV_WORKER)
    for args, addr, port in ((("--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.3:29777",
                               "--master-addr", "127.0.0.9", "--master-port", 1234), "127.0.0.3", "29777"),
                             (("--local-addr", "127.0.0.5", "--master-port", 29555), "127.0.0.5", "29555")):
        out = tmp_path / f"out_{port}"
        out.mkdir()
        done = _launch(*args, worker, out)
        assert done.returncode == 0, done.stderr
        env = _read_envs(out)[0]
        assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["OMP_NUM_THREADS"]) == (addr, port, None)


def test_output_lines_carry_rank_prefixes(tmp_path):
    worker = _script(tmp_path, "talk.py", "import os, sys\n"
                     "r = os.environ['RANK']\n"
                     "for i in range(3): print(f'out {i} of', r)\n"
                     "print('err of', r, file=sys.stderr)\n"
                     "sys.stdout.write('no newline at the end')\n")
    done = _launch("--nproc-per-node", 2, worker)
    assert done.returncode == 0, done.stderr
    for rank in (0, 1):
        assert [f"[rank{rank}]:out {i} of {rank}" for i in range(3)] == \
               [line for line in done.stdout.splitlines() if line.startswith(f"[rank{rank}]:out")]
        assert f"[rank{rank}]:no newline at the end" in done.stdout.splitlines()
        assert f"[rank{rank}]:err of {rank}" in done.stderr.splitlines()
    assert all(line.startswith("[rank") for line in done.stdout.splitlines())


def test_tee_log_dir_redirects_and_prefix_template(tmp_path):
    worker = _script(tmp_path, "talk.py", "import os, sys\nprint('out', os.environ['RANK'])\n"
                                          "print('err', os.environ['RANK'], file=sys.stderr)\n")
    logs = tmp_path / "logs"
    done = _launch("--nproc-per-node", 2, "--rdzv-id", "myjob", "--log-dir", logs, "--tee", 1,
                   "--redirects", "0:2", "--log-line-prefix-template", "<${role_name}${local_rank}> ", worker)
    assert done.returncode == 0, done.stderr
    (run_folder,) = logs.iterdir()
    assert run_folder.name.startswith("myjob_")
    attempt = run_folder / "attempt_0"
    assert (attempt / "0" / "stdout.log").read_text() == "out 0\n"  # the file has no prefix
    assert (attempt / "1" / "stdout.log").read_text() == "out 1\n"
    assert (attempt / "0" / "stderr.log").read_text() == "err 0\n"  # redirected: the file only
    assert not (attempt / "1" / "stderr.log").exists()
    assert "<default0> out 0" in done.stdout and "<default1> out 1" in done.stdout
    assert "err 0" not in done.stderr and "<default1> err 1" in done.stderr


def test_local_ranks_filter(tmp_path):
    worker = _script(tmp_path, "talk.py", "import os\nprint('hi from', os.environ['RANK'])\n")
    done = _launch("--nproc-per-node", 3, "--local-ranks-filter", "0,2", worker)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == ["[rank0]:hi from 0", "[rank2]:hi from 2"]


def test_failing_worker_stops_the_others_and_is_reported(tmp_path):
    worker = _script(tmp_path, "fail.py", FAILING_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    started = time.monotonic()
    done = _launch("--nproc-per-node", 3, worker, out, 1, "grandchild")
    assert time.monotonic() - started < 15  # the sleepers were stopped, not waited for
    assert done.returncode == 1
    assert "[rank1]:rank 1 about to fail" in done.stdout
    assert "rank 1 (local_rank 1, pid" in done.stderr and "failed: exit code 3" in done.stderr
    report = done.stderr[done.stderr.index("Root Cause"):]
    assert "exitcode  : 3" in report
    assert "    first stderr line\n    last words before dying" in report
    assert "<NO_OTHER_FAILURES>" in report  # the workers the launcher stopped are not failures
    pids = list(_pids(out, "pid_").values()) + list(_pids(out, "grandchild_").values())
    assert len(pids) == 6
    assert _wait_dead(pids) == []


def test_worker_killed_by_signal_is_named(tmp_path):
    worker = _script(tmp_path, "fail.py", FAILING_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    done = _launch("--nproc-per-node", 2, worker, out, 0, "sigkill")
    assert done.returncode == 1
    assert "rank 0 (local_rank 0" in done.stderr and "killed by signal 9 (SIGKILL)" in done.stderr
    assert "exitcode  : -9" in done.stderr
    assert _wait_dead(list(_pids(out, "pid_").values())) == []


def test_workers_ignoring_sigterm_get_sigkill_after_the_shutdown_timeout(tmp_path):
    worker = _script(tmp_path, "fail.py", FAILING_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    started = time.monotonic()
    done = _launch("--nproc-per-node", 3, "--shutdown-timeout", 0.5, worker, out, 2, "ignore-sigterm")
    assert time.monotonic() - started < 15
    assert done.returncode == 1 and "rank 2 (local_rank 2" in done.stderr and "<NO_OTHER_FAILURES>" in done.stderr
    assert _wait_dead(list(_pids(out, "pid_").values())) == []


def test_max_restarts_recovers_a_first_attempt_failure(tmp_path):
    worker = _script(tmp_path, "flaky.py", "import os, sys\n"
                     "attempt = os.environ['TORCHELASTIC_RESTART_COUNT']\n"
                     "print('attempt', attempt, 'of', os.environ['TORCHELASTIC_MAX_RESTARTS'])\n"
                     "sys.exit(5 if attempt == '0' and os.environ['RANK'] == '1' else 0)\n")
    done = _launch("--nproc-per-node", 2, "--max-restarts", 2, worker)
    assert done.returncode == 0, done.stderr
    assert "rank 1 (local_rank 1) failed: exit code 5; restarting the worker group (restart 1 of 2)" in done.stderr
    assert "[rank0]:attempt 1 of 2" in done.stdout and "[rank1]:attempt 1 of 2" in done.stdout
    assert "attempt 2" not in done.stdout


def test_max_restarts_exhausted_fails(tmp_path):
    worker = _script(tmp_path, "broken.py", "import os, sys\nprint('attempt', os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
                                            "sys.exit(2)\n")
    done = _launch("--max_restarts", 1, worker)
    assert done.returncode == 1
    assert "[rank0]:attempt 0" in done.stdout and "[rank0]:attempt 1" in done.stdout
    assert "restarts  : 1 of 1" in done.stderr and "failed: exit code 2" in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_launcher_signal_is_forwarded_and_leaves_nothing_behind(tmp_path, sig):
    worker = _script(tmp_path, "fail.py", FAILING_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    launcher = subprocess.Popen(_launcher_cmd("--nproc-per-node", 2, worker, out, -1, "grandchild"), env=_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(_pids(out, "pid_")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = list(_pids(out, "pid_").values()) + list(_pids(out, "grandchild_").values())
        assert len(pids) == 4
        launcher.send_signal(sig)
        _, err = launcher.communicate(timeout=TIMEOUT)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
    assert launcher.returncode == 128 + sig
    assert f"received {signal.Signals(sig).name}" in err
    assert _wait_dead(pids) == []


def test_a_second_launcher_signal_skips_the_grace_period(tmp_path):
    worker = _script(tmp_path, "fail.py", FAILING_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    launcher = subprocess.Popen(_launcher_cmd("--nproc-per-node", 2, "--shutdown-timeout", 60, worker, out, -1,
                                              "ignore-sigterm"),
                                env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(_pids(out, "pid_")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        launcher.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):  # the workers ignore SIGTERM: the launcher waits
            launcher.wait(timeout=0.5)
        started = time.monotonic()
        launcher.send_signal(signal.SIGTERM)
        launcher.communicate(timeout=TIMEOUT)
        assert time.monotonic() - started < 10
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
    assert launcher.returncode == 128 + signal.SIGTERM
    assert _wait_dead(list(_pids(out, "pid_").values())) == []


def test_module_mode_and_run_path(tmp_path):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "job.py").write_text("import os, sys\nprint(__name__, sys.argv[1:], os.environ['RANK'])\n")
    done = _launch("--nproc-per-node", 2, "-m", "mypkg.job", "--lr", "0.1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == ["[rank0]:__main__ ['--lr', '0.1'] 0",
                                                "[rank1]:__main__ ['--lr', '0.1'] 1"]
    done = _launch("--run-path", package / "job.py", "x", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[rank0]:__main__ ['x'] 0"]


def test_no_python_runs_a_program(tmp_path):
    done = _launch("--nproc-per-node", 2, "--no-python", "sh", "-c", 'echo "rank $RANK of $WORLD_SIZE"')
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == ["[rank0]:rank 0 of 2", "[rank1]:rank 1 of 2"]
    done = _launch("--no-python", "/no/such/program")
    assert done.returncode == 1 and "could not start worker '/no/such/program'" in done.stderr


def test_standalone_picks_a_fresh_port_and_run_id(tmp_path):
    worker = _script(tmp_path, "env_worker.py", ENV_WORKER)
    runs = []
    for attempt in range(2):
        out = tmp_path / f"out{attempt}"
        out.mkdir()
        done = _launch("--standalone", "--nproc-per-node", 2, "--rdzv-id", "ignored", "--master-port", 29500,
                       worker, out)
        assert done.returncode == 0, done.stderr
        envs = _read_envs(out)
        assert envs[0]["MASTER_ADDR"] == "127.0.0.1" and envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"]
        assert envs[0]["TORCHELASTIC_RUN_ID"] == envs[1]["TORCHELASTIC_RUN_ID"] != "ignored"
        runs.append(envs[0]["TORCHELASTIC_RUN_ID"])
    assert runs[0] != runs[1]


def test_pet_environment_defaults(tmp_path):
    worker = _script(tmp_path, "env_worker.py", ENV_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    done = _launch(worker, out, env=_env(PET_NPROC_PER_NODE="2", PET_MASTER_PORT="29333", PET_ROLE="trainer"))
    assert done.returncode == 0, done.stderr
    envs = _read_envs(out)
    assert sorted(envs) == [0, 1] and envs[1]["MASTER_PORT"] == "29333" and envs[1]["ROLE_NAME"] == "trainer"


@pytest.mark.parametrize("args, named", [
    (["--nproc-per-node", "two"], "--nproc-per-node"),
    (["--nproc-per-node", "0"], "--nproc-per-node"),
    (["--nnodes", "1:2:3"], "--nnodes"),
    (["--nnodes", "2:1"], "--nnodes"),
    (["--master-port", "70000"], "--master-port"),
    (["--max-restarts", "-1"], "--max-restarts"),
    (["--rdzv-backend", "etcd"], "--rdzv-backend"),
    (["--redirects", "7"], "--redirects"),
    (["--nnodes", "2", "--node-rank", "2"], "--node-rank"),
    (["--standalone", "--nnodes", "2"], "--standalone"),
    (["--no-python", "-m"], "--no-python"),
    (["--rdzv-endpoint", "host:port"], "--rdzv-endpoint"),
    (["--not-an-option"], "--not-an-option"),
])
def test_bad_options_are_argparse_errors(args, named):
    done = _launch(*args, "script.py")
    assert done.returncode == 2
    assert "usage: python -m tessera.distributed.run" in done.stderr
    assert named in done.stderr.splitlines()[-1]


def test_missing_script_is_an_argparse_error():
    done = _launch("--nproc-per-node", 2)
    assert done.returncode == 2 and "training_script" in done.stderr


def test_main_is_the_console_entry_point(tmp_path, capfd):
    from tessera.distributed.run import main
    worker = _script(tmp_path, "ok.py", "print('fine')\n")
    assert main(["--monitor-interval", "0.05", str(worker)]) == 0
    assert capfd.readouterr().out == "[rank0]:fine\n"


@pytest.mark.torch
def test_torch_gloo_program_runs_under_the_launcher(tmp_path):
    """torch reads the launcher's environment as it reads torchrun's: env:// rendezvous on MASTER_ADDR,
    rank 0 serving the store (TORCHELASTIC_USE_AGENT_STORE=False)."""
    worker = _script(tmp_path, "gloo.py", "import torch, torch.distributed as dist\n"
                     "dist.init_process_group('gloo')\n"
                     "t = torch.tensor([float(dist.get_rank() + 1)])\n"
                     "dist.all_reduce(t)\n"
                     "print('sum', t.item())\n"
                     "dist.destroy_process_group()\n")
    done = _launch("--nproc-per-node", 2, worker, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(line for line in done.stdout.splitlines() if "sum" in line) == ["[rank0]:sum 3.0", "[rank1]:sum 3.0"]


RECORDED_WORKER = """
import os
from tessera.distributed.elastic.multiprocessing.errors import record

@record
def main():
    if os.environ["RANK"] == "1":
        raise RuntimeError("loss is nan at step 12")

main()
"""


def test_recorded_error_appears_in_the_report(tmp_path):
    worker = _script(tmp_path, "recorded.py", RECORDED_WORKER)
    done = _launch("--nproc-per-node", 2, worker)
    assert done.returncode == 1
    assert "error     : RuntimeError: loss is nan at step 12" in done.stderr


# Two nodes: rank 1 fails on the first attempt once both ranks joined the group, while rank 0 waits
# in an all_reduce that would only end at the collective timeout (10 minutes).
TWO_NODE_WORKER = """
import os, sys
import tessera as ts
import tessera.distributed as dist
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
dist.init_process_group("gloo")
rank = dist.get_rank()
open(os.path.join(sys.argv[1], f"attempt_{attempt}_rank_{rank}"), "w").write(str(os.getpid()))
if attempt == 0 and rank == 1:
    sys.exit(3)
t = ts.ones(4)
dist.all_reduce(t)
print("attempt", attempt, "sum", t.tolist()[0], flush=True)
dist.destroy_process_group()
"""


def _two_nodes(tmp_path, *extra):
    worker = _script(tmp_path, "two_node_worker.py", TWO_NODE_WORKER)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    port = free_port_pair()  # the launchers' store listens on port + 1
    nodes = [subprocess.Popen(_launcher_cmd("--nnodes", 2, "--node-rank", node, "--nproc-per-node", 1,
                                            "--master-addr", "127.0.0.1", "--master-port", port, *extra, worker, out),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for node in (0, 1)]
    results = []
    for node in nodes:
        stdout, stderr = node.communicate(timeout=TIMEOUT)
        results.append((node.returncode, stdout, stderr))
    return results, out


def test_a_failure_on_one_node_restarts_every_node(tmp_path):
    start = time.monotonic()
    results, out = _two_nodes(tmp_path, "--max-restarts", 1)
    assert time.monotonic() - start < TIMEOUT  # not the all_reduce's 10-minute timeout
    for code, stdout, stderr in results:
        assert code == 0, stderr
    # Node 1 saw its own worker fail; node 0 was told through the launchers' store.
    assert "rank 1 (local_rank 0) failed: exit code 3; restarting every node's worker group" in results[1][2]
    assert "the workers of node 1: rank 1 (local_rank 0) exit code 3; restarting every node's worker group" in \
        results[0][2]
    assert "[rank0]:attempt 1 sum 2.0" in results[0][1] and "[rank1]:attempt 1 sum 2.0" in results[1][1]
    assert sorted(p.name for p in out.iterdir()) == ["attempt_0_rank_0", "attempt_0_rank_1", "attempt_1_rank_0",
                                                     "attempt_1_rank_1"]
    first_rank0 = int((out / "attempt_0_rank_0").read_text())
    _wait_dead([first_rank0])  # the waiting worker of the failed attempt was stopped, not left behind


def test_a_failure_on_one_node_stops_every_node(tmp_path):
    start = time.monotonic()
    results, _ = _two_nodes(tmp_path)
    assert time.monotonic() - start < TIMEOUT
    assert [code for code, _, _ in results] == [1, 1]
    assert "rank 1" in results[1][2] and "exit code 3" in results[1][2]
    assert "stopped this node's workers: the workers of node 1: rank 1 (local_rank 0) exit code 3" in results[0][2]


def test_a_node_that_never_comes_is_an_error_naming_the_store(tmp_path):
    worker = _script(tmp_path, "noop.py", "print('never runs')\n")
    port = free_port_pair()  # the launchers' store listens on port + 1
    start = time.monotonic()
    alone = _launch("--nnodes", 2, "--node-rank", 0, "--nproc-per-node", 1, "--master-port", port,
                    "--rdzv-conf", "join_timeout=2", worker)
    assert time.monotonic() - start < TIMEOUT
    assert alone.returncode == 1
    assert f"waiting for the other 1 node(s) to start attempt 0 through the launchers' store at 127.0.0.1:{port + 1}" \
        in alone.stderr, alone.stderr
    assert "never runs" not in alone.stdout
    bad = _launch("--rdzv-conf", "join_timeout=soon", worker)
    assert bad.returncode == 2 and "join_timeout must be a number" in bad.stderr
