"""Where each worker's stdout and stderr go: the launcher reads both pipes line by line (one thread
per pipe) and writes each line, as it comes, to the console behind a per-rank prefix and/or to a
log file, as torchrun's --redirects, --tee, --log-dir, --log-line-prefix-template and
--local-ranks-filter ask. The last stderr lines are kept for the failure report."""
from __future__ import annotations

import collections
import enum
import os
import string
import sys
import threading
from dataclasses import dataclass, field
from typing import Dict, Optional, Set, Union

DEFAULT_LINE_PREFIX = "[rank${rank}]:"  # torch's own rank prefix ("[rank0]:"), for every line
STDERR_TAIL_LINES = 20


class Std(enum.IntFlag):
    """Which streams a --redirects/--tee value names (torchrun's numbering)."""
    NONE = 0
    OUT = 1
    ERR = 2
    ALL = 3


StdSpec = Union[Std, Dict[int, Std]]


def parse_std_spec(text: str) -> StdSpec:
    """'3' (every local rank) or '0:1,1:2' (local rank: streams); an argparse type."""
    def one(value):
        number = int(value)
        if not 0 <= number <= 3:
            raise ValueError(value)
        return Std(number)
    try:
        if ":" not in text:
            return one(text)
        pairs = (item.split(":") for item in text.split(","))
        return {int(rank): one(value) for rank, value in pairs}
    except ValueError:
        import argparse
        raise argparse.ArgumentTypeError(
            f"{text!r} is not 0-3 (0 none, 1 stdout, 2 stderr, 3 both) or a list like '0:1,1:2'") from None


def std_for(spec: StdSpec, local_rank: int) -> Std:
    return spec.get(local_rank, Std.NONE) if isinstance(spec, dict) else spec


@dataclass
class OutputConfig:
    redirects: StdSpec = Std.NONE  # these streams go to the log file only
    tee: StdSpec = Std.NONE  # these streams go to the log file and the console
    log_dir: Optional[str] = None  # the run's folder; made by the launcher when a file is needed
    line_prefix_template: str = DEFAULT_LINE_PREFIX  # macros: ${rank} ${local_rank} ${role_name} ${hostname}
    local_ranks_filter: Optional[Set[int]] = None  # only these local ranks reach the console

    def needs_files(self, nproc_per_node: int) -> bool:
        return any(std_for(self.redirects, r) | std_for(self.tee, r) for r in range(nproc_per_node))


_console_lock = threading.Lock()  # whole lines from different ranks, never interleaved mid-line


def _binary(stream):
    return getattr(stream, "buffer", None)


class _LineForwarder(threading.Thread):
    """Copies one worker pipe to its sinks a line at a time, flushing each line."""

    def __init__(self, pipe, console, prefix: bytes, log_path: Optional[str], tail):
        super().__init__(daemon=True)  # a grandchild holding the pipe open must not hold the launcher
        self._pipe, self._console, self._prefix, self._tail = pipe, console, prefix, tail
        self._log = open(log_path, "ab") if log_path else None

    def _to_console(self, line: bytes):
        if self._console is None:
            return
        try:
            with _console_lock:
                binary = _binary(self._console)
                if binary is not None:
                    binary.write(self._prefix + line)
                    binary.flush()
                else:  # a text stream without a buffer (a replaced sys.stdout)
                    self._console.write((self._prefix + line).decode(errors="replace"))
                    self._console.flush()
        except (OSError, ValueError):  # the console went away (a closed pipe): keep draining the worker
            self._console = None

    def run(self):
        try:
            for line in iter(self._pipe.readline, b""):
                if not line.endswith(b"\n"):
                    line += b"\n"
                if self._tail is not None:
                    self._tail.append(line)
                if self._log is not None:
                    self._log.write(line)
                    self._log.flush()
                self._to_console(line)
        except (OSError, ValueError):
            pass
        finally:
            self._pipe.close()
            if self._log is not None:
                self._log.close()


@dataclass
class WorkerOutput:
    """The two forwarders of one worker and the tail of its stderr."""
    forwarders: list = field(default_factory=list)
    stderr_tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=STDERR_TAIL_LINES))

    def join(self, timeout: float):
        for forwarder in self.forwarders:
            forwarder.join(timeout)

    def last_stderr_lines(self):
        return [line.decode(errors="replace").rstrip("\n") for line in self.stderr_tail]


def line_prefix(config: OutputConfig, rank: int, local_rank: int, role: str) -> bytes:
    import socket
    text = string.Template(config.line_prefix_template).safe_substitute(
        rank=rank, local_rank=local_rank, role_name=role, hostname=socket.gethostname())
    return text.encode()


def attempt_log_folder(config: OutputConfig, restart_count: int, local_rank: int) -> str:
    """torchrun's layout: <run folder>/attempt_<restart>/<local rank>/{stdout,stderr}.log."""
    return os.path.join(config.log_dir, f"attempt_{restart_count}", str(local_rank))


def forward_worker_output(process, config: OutputConfig, rank: int, local_rank: int, role: str,
                          restart_count: int) -> WorkerOutput:
    """Starts the threads that carry `process`'s stdout and stderr pipes to their sinks."""
    output = WorkerOutput()
    prefix = line_prefix(config, rank, local_rank, role)
    shown = config.local_ranks_filter is None or local_rank in config.local_ranks_filter
    redirected, teed = std_for(config.redirects, local_rank), std_for(config.tee, local_rank)
    folder = None
    if redirected | teed:
        folder = attempt_log_folder(config, restart_count, local_rank)
        os.makedirs(folder, exist_ok=True)
    for pipe, which, console, name, tail in ((process.stdout, Std.OUT, sys.stdout, "stdout", None),
                                             (process.stderr, Std.ERR, sys.stderr, "stderr", output.stderr_tail)):
        to_file = bool((redirected | teed) & which)
        to_console = shown and (not redirected & which or teed & which)
        log_path = os.path.join(folder, f"{name}.log") if to_file else None
        forwarder = _LineForwarder(pipe, console if to_console else None, prefix, log_path, tail)
        forwarder.start()
        output.forwarders.append(forwarder)
    return output
