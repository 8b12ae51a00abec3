"""ts.profiler: torch.profiler's interface over the profiler plugin (libtessera_profiler.so).

The plugin observes every operator call at the dispatcher (ABI 1.6), the ranges that
record_function and autograd's backward nodes mark, allocator events and device activity, and
writes them as a Chrome trace (Trace Event JSON). Tables (key_averages().table()) are computed
here from that trace, so what a table says is exactly what the trace holds.
"""
import functools
import gzip
import json
import os
import socket
import time
import warnings
from enum import Enum

from tessera import _C

from ._events import EventList, events_from_trace

__all__ = ["ProfilerActivity", "ProfilerAction", "profile", "record_function", "schedule", "supported_activities",
           "tensorboard_trace_handler", "EventList"]


class ProfilerActivity(Enum):
    CPU = 0
    CUDA = 1


class ProfilerAction(Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities():
    """CPU always; CUDA when a CUDA device is present (its plugin reports kernel spans)."""
    found = {ProfilerActivity.CPU}
    try:
        import tessera.cuda
        if tessera.cuda.is_available():
            found.add(ProfilerActivity.CUDA)
    except Exception:  # no CUDA plugin: CPU only
        pass
    return found


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """torch.profiler.schedule: after skip_first steps, cycles of `wait` idle steps, `warmup`
    steps recorded and discarded, `active` steps recorded (the last one saves: on_trace_ready);
    `repeat` cycles (0: forever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError(f"schedule: expected wait >= 0, warmup >= 0, active > 0, repeat >= 0, skip_first >= 0; got "
                         f"wait={wait}, warmup={warmup}, active={active}, repeat={repeat}, skip_first={skip_first}")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results")

    def schedule_fn(step):
        if step < 0:
            raise ValueError(f"schedule: step must be >= 0, got {step}")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if skip_first_wait and step < wait:  # only the first cycle's wait is skipped
            step += wait
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _default_schedule(_step):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An on_trace_ready that writes `<worker>.<ms>.pt.trace.json[.gz]` into dir_name, as torch's."""
    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{int(time.time() * 1000)}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler


def _plugin_call(op, *args):
    if not _C.plugins_load_named("profiler", "the profiler (ts.profiler)"):
        raise RuntimeError("profiler is not available: libtessera_profiler.so is not on the plugin search path "
                           f"{_C.plugins_search_path()}")
    return _C.call_op("profiler::" + op, args, {})


class record_function:
    """A labelled range in the trace and tables; a context manager and a decorator."""

    def __init__(self, name, args=None):
        self.name = name if args is None else f"{name}({args})"
        self._open = False

    def __enter__(self):
        self._open = _C.observing()
        if self._open:
            _C.observe_range(0, self.name)
        return self

    def __exit__(self, *exc):
        if self._open:
            _C.observe_range(1, self.name)
            self._open = False
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapped


class profile:
    """torch.profiler.profile: records while active (or as `schedule` says, advanced by step()),
    then key_averages(), events(), export_chrome_trace() and export_memory_timeline()."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None):
        self.activities = set(activities) if activities is not None else supported_activities()
        for a in self.activities:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"profile: activities must be ProfilerActivity values, got {a!r}")
        self.schedule = schedule or _default_schedule
        self.on_trace_ready = on_trace_ready
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack)  # accepted; Python stacks are not recorded yet
        self.acc_events = bool(acc_events)
        self.step_num = 0
        self._action = ProfilerAction.NONE
        self._recording = False
        self._step_range = None
        self._trace = None
        self._events = None

    # ---- recording
    def _start_recording(self):
        _plugin_call("start", self.record_shapes, self.profile_memory)
        self._recording = True
        self._open_step_range()

    def _stop_recording(self):
        self._close_step_range()
        _plugin_call("stop")
        self._recording = False
        trace = json.loads(_plugin_call("trace_json"))
        if self.acc_events and self._trace is not None:
            trace["traceEvents"] = self._trace["traceEvents"] + trace["traceEvents"]
        self._trace, self._events = trace, None

    def _open_step_range(self):
        if self.schedule is not _default_schedule:
            self._step_range = record_function(f"ProfilerStep#{self.step_num}")
            self._step_range.__enter__()

    def _close_step_range(self):
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None

    def _enter_action(self, action):
        prev, self._action = self._action, action
        recording_now = action in (ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if prev == ProfilerAction.RECORD_AND_SAVE:
            self._stop_recording()
            if self.on_trace_ready:
                self.on_trace_ready(self)
        elif prev == ProfilerAction.WARMUP and action != ProfilerAction.WARMUP and self._recording:
            _plugin_call("stop")  # warmup steps are recorded and dropped
            self._recording = False
            self._close_step_range()
        if recording_now and not self._recording:
            self._start_recording()
        elif self._recording:
            self._close_step_range()
            self._open_step_range()

    def start(self):
        self.step_num = 0
        self._enter_action(self.schedule(self.step_num))

    def stop(self):
        if self._recording:
            if self._action == ProfilerAction.WARMUP:
                _plugin_call("stop")
                self._recording = False
                self._close_step_range()
            else:
                self._stop_recording()
                if self.on_trace_ready:
                    self.on_trace_ready(self)
        self._action = ProfilerAction.NONE

    def step(self):
        """Marks the end of a training step: the schedule moves on."""
        self.step_num += 1
        self._enter_action(self.schedule(self.step_num))

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # ---- results
    def _require_trace(self, what):
        if self._trace is None:
            raise RuntimeError(f"profile.{what}: nothing was recorded yet (use it after the profile stopped, or "
                               "in on_trace_ready)")
        return self._trace

    def events(self):
        if self._events is None:
            self._events = events_from_trace(self._require_trace("events"))
        return self._events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        return self.events().key_averages(group_by_input_shape=group_by_input_shape)

    def export_chrome_trace(self, path):
        trace = self._require_trace("export_chrome_trace")
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "wt") as f:
            json.dump(trace, f)

    def export_memory_timeline(self, path, device=None):
        """The total allocated bytes over time, from the trace's memory events: a plot (.html or
        .png, with matplotlib) or the raw series (.json: [[times in us], [bytes]])."""
        trace = self._require_trace("export_memory_timeline")
        points = sorted((e["ts"], e["args"]["Total Allocated"]) for e in trace["traceEvents"]
                        if e.get("name") == "[memory]" and (device is None or
                                                            f"{e['args']['Device Type']}:{e['args']['Device Id']}"
                                                            == str(device).replace("cpu", "0:0")))
        times, sizes = [p[0] for p in points], [p[1] for p in points]
        if str(path).endswith(".json"):
            with open(path, "w") as f:
                json.dump([times, sizes], f)
            return
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(10, 4))
        ax.step([t / 1000 for t in times], [s / 2**20 for s in sizes], where="post")
        ax.set_xlabel("time (ms)")
        ax.set_ylabel("allocated (MiB)")
        ax.set_title("Memory timeline")
        if str(path).endswith(".html"):
            import base64
            import io
            buf = io.BytesIO()
            fig.savefig(buf, format="png")
            with open(path, "w") as f:
                f.write("<html><body><img src='data:image/png;base64,"
                        f"{base64.b64encode(buf.getvalue()).decode()}'></body></html>")
        else:
            fig.savefig(path)
        plt.close(fig)
