"""The agent behind `python -m tessera.distributed.run`: starts this node's worker processes with
torchrun's environment variables, watches them, stops the whole group when one fails (SIGTERM to
each worker's process group, SIGKILL after a grace period, so grandchildren go too), restarts the
group up to max_restarts times, forwards SIGINT/SIGTERM/... sent to the launcher, and reports the
failed rank with its exit code or signal and the last lines of its stderr.

Rendezvous is static: a worker's global rank is node_rank * nproc_per_node + local_rank and every
node is told the same MASTER_ADDR/MASTER_PORT on its command line, so no store is needed to
launch. Rank 0's process group binds that address (torch's TORCHELASTIC_USE_AGENT_STORE=False)."""
from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from tessera.distributed._node_group import DEFAULT_JOIN_TIMEOUT, NodeGroup, NodeGroupError
from tessera.distributed._worker_output import OutputConfig, WorkerOutput, forward_worker_output

DEFAULT_SIGNALS_TO_HANDLE = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")
OUTPUT_JOIN_SECONDS = 2.0  # how long a stopped worker's last lines may take to reach the console


@dataclass
class LaunchConfig:
    nproc_per_node: int
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    run_id: str = "none"
    role: str = "default"
    max_restarts: int = 0
    monitor_interval: float = 0.1
    shutdown_timeout: float = 30.0  # SIGTERM, then SIGKILL after this many seconds
    signals_to_handle: Tuple[str, ...] = DEFAULT_SIGNALS_TO_HANDLE
    omp_num_threads: Optional[str] = None  # set in every worker when given
    output: OutputConfig = field(default_factory=OutputConfig)
    join_timeout: float = DEFAULT_JOIN_TIMEOUT  # seconds to wait for the other nodes' launchers

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    def worker_env(self, local_rank: int, restart_count: int, error_file: Optional[str] = None) -> dict:
        """torchrun's variables for one worker (torch code reads these names)."""
        rank = self.node_rank * self.nproc_per_node + local_rank
        env = dict(os.environ)
        env.update({
            "RANK": str(rank),
            "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_WORLD_SIZE": str(self.nproc_per_node),
            "GROUP_RANK": str(self.node_rank),
            "GROUP_WORLD_SIZE": str(self.nnodes),
            "ROLE_RANK": str(rank),  # one role: the role rank is the global rank
            "ROLE_WORLD_SIZE": str(self.world_size),
            "ROLE_NAME": self.role,
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
            "TORCHELASTIC_RESTART_COUNT": str(restart_count),
            "TORCHELASTIC_MAX_RESTARTS": str(self.max_restarts),
            "TORCHELASTIC_RUN_ID": self.run_id,
            # No agent-hosted store: rank 0 serves the store at MASTER_ADDR:MASTER_PORT itself.
            "TORCHELASTIC_USE_AGENT_STORE": "False",
        })
        if self.omp_num_threads is not None:
            env["OMP_NUM_THREADS"] = self.omp_num_threads
        if error_file is not None and "TORCHELASTIC_ERROR_FILE" not in os.environ:
            env["TORCHELASTIC_ERROR_FILE"] = error_file  # where @record writes the worker's exception
        return env


@dataclass
class _Worker:
    rank: int
    local_rank: int
    process: subprocess.Popen
    output: WorkerOutput
    error_file: Optional[str] = None


@dataclass
class WorkerFailure:
    rank: int
    local_rank: int
    pid: int
    returncode: int
    stderr_lines: List[str]
    time: str
    error: Optional[str] = None  # what @record wrote to the worker's error file

    def how(self) -> str:
        if self.returncode < 0:
            number = -self.returncode
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = "unknown signal"
            return f"killed by signal {number} ({name})"
        return f"exit code {self.returncode}"


def say(message: str):
    print(f"tessera.distributed.run: {message}", file=sys.stderr, flush=True)


def failure_report(failures: Sequence[WorkerFailure], what: str, restarts: int, max_restarts: int) -> str:
    """torchrun's summary: the first observed failure with its stderr tail, then any others."""
    root, others = failures[0], failures[1:]
    rule, thin = "=" * 60, "-" * 60
    signal_note = f": {root.how()}" if root.returncode < 0 else ""
    lines = [f"rank {root.rank} (local_rank {root.local_rank}, pid {root.pid}) "
             f"failed: {root.how()}", rule, f"{what} FAILED", thin, "Root Cause (first observed failure):",
             f"  rank      : {root.rank} (local_rank: {root.local_rank})",
             f"  host      : {socket.gethostname()}",
             f"  time      : {root.time}",
             f"  exitcode  : {root.returncode} (pid: {root.pid}){signal_note}",
             f"  restarts  : {restarts} of {max_restarts}"]
    if root.error:
        lines.append(f"  error     : {root.error}")
    lines.append("  last stderr lines:")
    lines += [f"    {line}" for line in root.stderr_lines] or ["    <no stderr output>"]
    lines += [thin, "Other failures:"]
    lines += [f"  rank {f.rank} (local_rank: {f.local_rank}, pid {f.pid}): {f.how()}" for f in others] \
        or ["  <NO_OTHER_FAILURES>"]
    lines.append(rule)
    return "\n".join(lines)


class WorkerGroupAgent:
    """Runs `cmd` as this node's nproc_per_node workers until they all succeed, one fails past
    the restarts allowed, or the launcher is signalled. run() returns the launcher's exit code."""

    def __init__(self, config: LaunchConfig, cmd: Sequence[str], what: Optional[str] = None):
        self.config, self.cmd = config, list(cmd)
        self.what = what or " ".join(self.cmd)
        self._workers: List[_Worker] = []
        self._signals: List[int] = []  # received by the launcher; handled by the monitor loop
        self._error_dir: Optional[str] = None  # the workers' TORCHELASTIC_ERROR_FILEs, for this run
        self._nodes: Optional[NodeGroup] = None  # the other nodes' launchers (--nnodes > 1)

    # --- signals -------------------------------------------------------------------------------
    def _on_signal(self, signum, frame):
        self._signals.append(signum)  # only record: the loop forwards, so no Popen is interrupted

    def _install_signal_handlers(self):
        previous = {}
        if threading.current_thread() is not threading.main_thread():
            return previous  # handlers can only be set from the main thread
        for name in self.config.signals_to_handle:
            number = getattr(signal, name, None)
            if number is not None:
                previous[number] = signal.signal(number, self._on_signal)
        return previous

    # --- one attempt ---------------------------------------------------------------------------
    def _start_workers(self, restart_count: int):
        config = self.config
        for local_rank in range(config.nproc_per_node):
            rank = config.node_rank * config.nproc_per_node + local_rank
            # Its own session and process group, so a group kill reaches the worker's children and a
            # terminal's Ctrl-C reaches only the launcher, which forwards it.
            error_file = os.path.join(self._error_dir, f"attempt_{restart_count}_rank_{rank}.json")
            process = subprocess.Popen(self.cmd, env=config.worker_env(local_rank, restart_count, error_file),
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            try:
                output = forward_worker_output(process, config.output, rank, local_rank, config.role, restart_count)
            except BaseException:  # e.g. an unwritable log folder: leave no worker without a watcher
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                raise
            self._workers.append(_Worker(rank, local_rank, process, output, error_file))

    def _monitor(self, attempt):
        """[] when every worker exited 0, the failed (worker, returncode) pairs when one failed,
        None when the launcher was signalled; a str when another node's workers failed (its report)."""
        while True:
            if self._signals:
                return None
            codes = [(worker, worker.process.poll()) for worker in self._workers]
            failed = [(worker, code) for worker, code in codes if code not in (None, 0)]
            if failed:
                return failed
            if all(code == 0 for _, code in codes):
                return []
            if self._nodes is not None:
                elsewhere = self._nodes.failure(attempt)
                if elsewhere is not None:
                    return elsewhere
            time.sleep(self.config.monitor_interval)

    def _signal_groups(self, number: int):
        for worker in self._workers:
            try:
                os.killpg(worker.process.pid, number)
            except (ProcessLookupError, PermissionError):
                pass  # the group is gone

    def _stop_workers(self, first_signal: int = signal.SIGTERM):
        """first_signal to every worker's process group (exited workers' too: their children may live
        on), SIGKILL to what is left after shutdown_timeout (at once on a second launcher signal)."""
        signals_before = len(self._signals)
        self._signal_groups(first_signal)
        deadline = time.monotonic() + self.config.shutdown_timeout
        while any(w.process.poll() is None for w in self._workers) and time.monotonic() < deadline:
            if len(self._signals) > signals_before:
                break
            time.sleep(0.02)
        self._signal_groups(signal.SIGKILL)
        for worker in self._workers:
            worker.process.wait()
        for worker in self._workers:
            worker.output.join(OUTPUT_JOIN_SECONDS)

    def _failures(self, failed, now: str) -> List[WorkerFailure]:
        return [WorkerFailure(w.rank, w.local_rank, w.process.pid, code, w.output.last_stderr_lines(), now,
                              self._recorded_error(w)) for w, code in failed]

    @staticmethod
    def _recorded_error(worker) -> Optional[str]:
        """The message a worker's @record wrote, if it wrote one."""
        try:
            with open(worker.error_file) as f:
                return json.load(f)["message"]["message"]
        except (OSError, TypeError, ValueError, KeyError):
            return None

    def _run_attempt(self, restart_count: int):
        """This node's WorkerFailures ([] when the attempt succeeded everywhere), None when the
        launcher was signalled, or the report (a str) of another node whose workers failed."""
        self._workers = []
        failed = None
        if self._nodes is not None:
            self._nodes.start(restart_count)
        try:
            self._start_workers(restart_count)
            failed = self._monitor(restart_count)
        finally:
            when = datetime.datetime.now().strftime("%Y-%m-%d_%H:%M:%S")
            self._stop_workers(self._signals[0] if self._signals else signal.SIGTERM)
        if failed is None or isinstance(failed, str):
            return failed
        failures = self._failures(failed, when)
        if self._nodes is not None:
            if failures:
                root = failures[0]
                self._nodes.fail(restart_count, f"node {self.config.node_rank}: rank {root.rank} (local_rank "
                                                f"{root.local_rank}) {root.how()}")
            else:  # succeeded here: wait for the other nodes, whose failure restarts this node too
                elsewhere = self._nodes.finish(restart_count, self.config.monitor_interval, lambda: self._signals)
                if elsewhere is not None:
                    return elsewhere
        return failures

    # --- the whole run -------------------------------------------------------------------------
    def run(self) -> int:
        previous = self._install_signal_handlers()
        self._error_dir = tempfile.mkdtemp(prefix="tessera-run-errors-")
        try:
            return self._run()
        finally:
            shutil.rmtree(self._error_dir, ignore_errors=True)
            for number, handler in previous.items():
                signal.signal(number, handler)

    def _run(self) -> int:
        max_restarts = self.config.max_restarts
        restart_count = 0
        try:
            if self.config.nnodes > 1:
                self._nodes = NodeGroup(self.config, self.config.join_timeout)
            while True:
                try:
                    failures = self._run_attempt(restart_count)
                except OSError as error:  # the command could not be started
                    say(f"could not start worker {self.cmd[0]!r}: {error}")
                    if self._nodes is not None:
                        self._nodes.fail(restart_count, f"node {self.config.node_rank}: could not start the workers")
                    return 1
                if self._signals:
                    name = signal.Signals(self._signals[0]).name
                    say(f"received {name}: stopped the workers")
                    return 128 + self._signals[0]
                if not failures:
                    return 0
                if isinstance(failures, str):
                    what = f"the workers of {failures}"
                else:
                    root = failures[0]
                    what = f"rank {root.rank} (local_rank {root.local_rank}) failed: {root.how()}"
                if restart_count < max_restarts:
                    restart_count += 1
                    group = "every node's worker group" if self._nodes is not None else "the worker group"
                    say(f"{what}; restarting {group} (restart {restart_count} of {max_restarts})")
                    continue
                if isinstance(failures, str):
                    say(f"stopped this node's workers: the workers of {failures} (restarts: {restart_count} of "
                        f"{max_restarts})")
                else:
                    say(failure_report(failures, self.what, restart_count, max_restarts))
                return 1
        except NodeGroupError as error:  # another node's launcher never came, or node 0's went away
            self._stop_workers()
            say(str(error))
            return 1
