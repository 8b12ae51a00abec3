"""ts.profiler: a profiled training step's trace (valid Trace Event JSON, strictly nested per
thread, user ranges, operators with shapes, backward nodes linked to their forwards, memory),
tables whose self times add up, schedules, handlers, threads and bad input."""
import gzip
import json
import threading

import numpy as np
import pytest

import tessera as ts
import tessera.profiler as profiler
from tessera import _C, nn
from tessera.profiler import ProfilerAction, ProfilerActivity, record_function


def _training_step(model, opt, x, target):
    with record_function("forward"):
        loss = ((model(x) - target) ** 2).mean()
    with record_function("backward"):
        opt.zero_grad()
        loss.backward()
    opt.step()
    return loss


def _model():
    ts.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    return model, ts.optim.SGD(model.parameters(), lr=0.1), ts.randn(8, 16), ts.randn(8, 4)


def _complete_events(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def _assert_strictly_nested(events):
    """Per (pid, tid): any two complete events are disjoint or one contains the other."""
    by_track = {}
    for e in events:
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for track, evs in by_track.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            start, end = e["ts"], e["ts"] + e["dur"]
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-9, f"{e['name']} on {track} overlaps its parent"
            stack.append(end)


@pytest.fixture
def profiled_step(tmp_path):
    model, opt, x, target = _model()
    _training_step(model, opt, x, target)  # warm: plugins loaded
    with profiler.profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as prof:
        _training_step(model, opt, x, target)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        return prof, json.load(f)


def test_trace_is_trace_event_json_strictly_nested(profiled_step):
    _, trace = profiled_step
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    for e in events:  # the Trace Event format's required fields and types
        assert e["ph"] in ("X", "s", "f", "i", "M") and isinstance(e["name"], str)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
    _assert_strictly_nested(_complete_events(trace))


def test_trace_holds_ranges_operators_shapes_and_memory(profiled_step):
    _, trace = profiled_step
    complete = _complete_events(trace)
    names = {e["name"] for e in complete}
    assert {"forward", "backward"} <= {e["name"] for e in complete if e["cat"] == "user_annotation"}
    assert {"aten::addmm", "aten::relu", "aten::mean", "autograd::backward"} <= names or \
        {"aten::matmul", "aten::relu", "aten::mean", "autograd::backward"} <= names, sorted(names)
    relu = next(e for e in complete if e["name"] == "aten::relu")
    assert relu["args"]["Input Dims"] == [[8, 32]] and relu["args"]["Input type"] == ["float32"]
    forward = next(e for e in complete if e["name"] == "forward")
    inside = [e for e in complete if e["tid"] == forward["tid"] and e["cat"] == "cpu_op"
              and forward["ts"] <= e["ts"] and e["ts"] + e["dur"] <= forward["ts"] + forward["dur"]]
    assert any(e["name"] == "aten::relu" for e in inside)
    memory = [e for e in trace["traceEvents"] if e["name"] == "[memory]"]
    assert any(e["args"]["Bytes"] > 0 for e in memory) and any(e["args"]["Bytes"] < 0 for e in memory)
    assert all(e["args"]["Device Type"] == 0 and e["args"]["Total Allocated"] >= 0 for e in memory)


def test_backward_nodes_are_linked_to_their_forward_operators(profiled_step):
    _, trace = profiled_step
    complete = _complete_events(trace)
    backward = [e for e in complete if e["name"].startswith("autograd::engine::evaluate_function: ")]
    assert {"autograd::engine::evaluate_function: ReluBackward", "autograd::engine::evaluate_function: PowTensorScalarBackward"} \
        <= {e["name"] for e in backward}, sorted({e["name"] for e in backward})
    starts = {e["id"]: e for e in trace["traceEvents"] if e["ph"] == "s"}
    finishes = {e["id"]: e for e in trace["traceEvents"] if e["ph"] == "f"}
    assert starts and starts.keys() == finishes.keys()
    ops_by_seq = {e["args"]["Sequence number"]: e for e in complete
                  if e["cat"] == "cpu_op" and "Sequence number" in e["args"] and not e["name"].startswith("autograd::")}
    relu_backward = next(e for e in backward if e["name"].endswith("ReluBackward"))
    seq = relu_backward["args"]["Sequence number"]
    assert ops_by_seq[seq]["name"] == "aten::relu"  # the node's forward is the relu call
    assert starts[seq]["ts"] == ops_by_seq[seq]["ts"] and finishes[seq]["ts"] == relu_backward["ts"]
    assert starts[seq]["ts"] < finishes[seq]["ts"]


def test_table_self_times_add_up_to_the_total(profiled_step):
    prof, trace = profiled_step
    averages = prof.key_averages()
    events = prof.events()
    top_level_total = sum(e.cpu_time_total for e in events if e.cpu_parent is None and not e.is_device)
    self_total = sum(a.self_cpu_time_total for a in averages)
    assert self_total == pytest.approx(top_level_total, rel=0.05)
    assert self_total == pytest.approx(averages.self_cpu_time_total)
    relu = next(a for a in averages if a.key == "aten::relu")
    assert relu.count == 1 and relu.self_cpu_time_total <= relu.cpu_time_total
    text = averages.table(sort_by="self_cpu_time_total", row_limit=5)
    lines = text.splitlines()
    for column in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "CPU Mem",
                   "Self CPU Mem", "# of Calls"):
        assert column in lines[1]
    assert len(lines) == 3 + 5 + 3 and lines[-2].startswith("Self CPU time total:")
    peak, last = averages.memory_peaks["0:0"]
    memory = [e["args"]["Total Allocated"] for e in trace["traceEvents"] if e["name"] == "[memory]"]
    assert peak == max(memory) and lines[-1].startswith("CPU memory allocated: peak ")
    shaped = prof.key_averages(group_by_input_shape=True).table(row_limit=3)
    assert "Input Shapes" in shaped.splitlines()[1]
    with pytest.raises(ValueError, match="sort_by"):
        averages.table(sort_by="wall_time")


def test_schedule_records_the_active_steps_and_calls_on_trace_ready():
    model, opt, x, target = _model()
    traces = []
    sched = profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    assert [sched(i) for i in range(6)] == [ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
                                            ProfilerAction.RECORD_AND_SAVE, ProfilerAction.NONE, ProfilerAction.NONE]
    with profiler.profile(schedule=sched, on_trace_ready=lambda p: traces.append(p._trace)) as prof:
        for _ in range(6):
            _training_step(model, opt, x, target)
            prof.step()
    assert len(traces) == 1
    steps = sorted(e["name"] for e in _complete_events(traces[0]) if e["name"].startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
    assert sum(e["name"] == "forward" for e in _complete_events(traces[0])) == 2
    assert not _C.observing()


def test_record_function_decorator_handler_and_gzip(tmp_path):
    @record_function("my_block")
    def work(a):
        return (a * 2).sum()

    handler = profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w0", use_gzip=True)
    with profiler.profile(on_trace_ready=handler):
        work(ts.ones(4))
    (written,) = tmp_path.iterdir()
    assert written.name.startswith("w0.") and written.name.endswith(".pt.trace.json.gz")
    with gzip.open(written, "rt") as f:
        trace = json.load(f)
    block = next(e for e in _complete_events(trace) if e["name"] == "my_block")
    assert any(e["name"] == "aten::mul" and block["ts"] <= e["ts"] <= block["ts"] + block["dur"]
               for e in _complete_events(trace))


def test_inactive_profiler_records_nothing_and_errors_are_clear():
    with profiler.profile() as prof:
        ts.ones(2) + 1
    assert not _C.observing()
    recorded = len(prof.events())
    ts.ones(2) + 1  # after the profile: not recorded
    assert len(prof.events()) == recorded
    with pytest.raises(RuntimeError, match="nothing was recorded"):
        profiler.profile().key_averages()
    with pytest.raises(ValueError, match="active > 0"):
        profiler.schedule(wait=0, warmup=1, active=0)
    with pytest.raises(TypeError, match="ProfilerActivity"):
        profiler.profile(activities=["cpu"])
    with profiler.profile():
        with pytest.raises(RuntimeError, match="already recording"):
            profiler.profile().start()
    assert not _C.observing()


def test_a_failing_operator_keeps_the_trace_nested():
    with profiler.profile() as prof:
        with record_function("outer"):
            with pytest.raises(ValueError):
                ts.ones(2, 3) @ ts.ones(2, 3)
            ts.ones(3).sum()
    trace = prof._trace
    _assert_strictly_nested(_complete_events(trace))
    outer = next(e for e in _complete_events(trace) if e["name"] == "outer")
    mm = [e for e in _complete_events(trace) if e["name"] == "aten::matmul"]
    assert mm and all(outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] for e in mm)


def test_threads_get_their_own_nested_tracks():
    barrier = threading.Barrier(2)

    def work():
        barrier.wait()
        for _ in range(20):
            with record_function("thread_work"):
                (ts.ones(64, 64) @ ts.ones(64, 64)).sum()

    with profiler.profile() as prof:
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    complete = _complete_events(prof._trace)
    tids = {e["tid"] for e in complete if e["name"] == "thread_work"}
    assert len(tids) == 2
    _assert_strictly_nested(complete)
    assert sum(e["name"] == "thread_work" for e in complete) == 40


@pytest.mark.torch
def test_operator_names_and_table_columns_match_torch():
    import torch
    import torch.profiler as tp
    a, b = np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)
    with tp.profile(activities=[tp.ProfilerActivity.CPU]) as theirs:
        (torch.tensor(a) @ torch.tensor(b)).relu().sum()
    with profiler.profile(activities=[ProfilerActivity.CPU]) as ours:
        (ts.tensor(a) @ ts.tensor(b)).relu().sum()
    their_keys = {e.key for e in theirs.key_averages()}
    our_keys = {e.key for e in ours.key_averages()}
    assert {"aten::matmul", "aten::relu", "aten::sum"} <= their_keys & our_keys
    their_header = theirs.key_averages().table(row_limit=1).splitlines()[1].split()
    our_header = ours.key_averages().table(row_limit=1).splitlines()[1].split()
    assert our_header == their_header


def test_device_spans_get_device_columns():
    from tessera.profiler._events import events_from_trace

    def trace(device_type):
        return {"traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0, "args": {}},
            {"ph": "X", "cat": "kernel", "name": "mm.kernel", "pid": 1000, "tid": 0, "ts": 2.0, "dur": 6.0,
             "args": {"device": 0, "device_type": device_type}},
            {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1.0,
             "args": {"Device Type": device_type, "Device Id": 0, "Addr": 1, "Bytes": 2048, "Total Allocated": 2048}}]}

    averages = events_from_trace(trace(1)).key_averages()
    kernel = next(a for a in averages if a.key == "mm.kernel")
    assert kernel.device_time_total == 6.0 and kernel.self_cpu_time_total == 0.0
    text = averages.table()
    assert "Self CUDA" in text.splitlines()[1] and "\nSelf CUDA time total: 6.000us\n" in text
    assert text.rstrip().endswith("Device 1:0 memory allocated: peak 2.00 Kb, at the end 2.00 Kb")
    assert "CUDA Mem" in text.splitlines()[1] and "CPU Mem" not in text.splitlines()[1]
    mm = next(a for a in averages if a.key == "aten::mm")
    assert mm.self_cuda_memory_usage == 2048 and mm.cpu_memory_usage == 0
    assert "Self Device" in events_from_trace(trace(9)).key_averages().table()
    assert averages.self_cpu_time_total == 10.0  # device time is not CPU time


@pytest.mark.skipif(not ts.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_kernels_appear_on_the_device_track():
    a = ts.randn(256, 256, device="cuda")
    (a @ a).sum()  # warm
    ts.cuda.synchronize()
    with profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("gpu_work"):
            (a @ a).relu().sum()
        ts.cuda.synchronize()  # every span is complete (and reported) before the profile ends
    kernels = [e for e in prof._trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "kernel"]
    assert {"mm", "relu"} <= {k["name"].split(".")[0] for k in kernels} or \
        {"matmul", "relu"} <= {k["name"].split(".")[0] for k in kernels}, [k["name"] for k in kernels]
    assert all(k["args"]["device_type"] == 1 and k["dur"] >= 0 for k in kernels)
    assert "Self CUDA" in prof.key_averages().table()


def test_memory_timeline_series_and_plot(tmp_path):
    with profiler.profile(profile_memory=True) as prof:
        keep = [ts.ones(1024) for _ in range(4)]
        del keep
    prof.export_memory_timeline(str(tmp_path / "timeline.json"))
    with open(tmp_path / "timeline.json") as f:
        times, sizes = json.load(f)
    assert len(times) == len(sizes) >= 8 and times == sorted(times)
    assert max(sizes) - min(sizes) >= 4 * 4096 - 4096  # the four tensors were live at once
    pytest.importorskip("matplotlib")
    prof.export_memory_timeline(str(tmp_path / "timeline.png"))
    assert (tmp_path / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
