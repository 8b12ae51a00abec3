"""Events of a profile, read back from its Chrome trace, and torch's tables over them."""
from collections import defaultdict


def _format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_memory(nbytes):
    kb, mb, gb = 1024, 1024 ** 2, 1024 ** 3
    if abs(nbytes) >= gb:
        return f"{nbytes / gb:.2f} Gb"
    if abs(nbytes) >= mb:
        return f"{nbytes / mb:.2f} Mb"
    if abs(nbytes) >= kb:
        return f"{nbytes / kb:.2f} Kb"
    return f"{nbytes} b"


def _device_types(e):
    """The device types of a FunctionEvent's or FunctionEventAvg's device time."""
    if isinstance(e, FunctionEventAvg):
        return e.device_types
    return {e.device_type} if e.is_device else set()


class FunctionEvent:
    """One operator call, user range or backward node (times in microseconds)."""

    def __init__(self, name, thread, start_us, end_us, input_shapes=None, sequence_nr=-1, kind="cpu_op",
                 device_type=None):
        self.name, self.key = name, name
        self.thread = thread
        self.start_us, self.end_us = start_us, end_us
        self.input_shapes = input_shapes or []
        self.sequence_nr = sequence_nr
        self.kind = kind
        self.device_type = device_type  # None: a CPU event; else the device of a kernel span
        self.cpu_parent = None
        self.cpu_children = []
        self.cpu_memory_usage = 0       # bytes allocated minus freed inside, children included
        self.self_cpu_memory_usage = 0
        self.device_memory_usage = 0    # the same for device memory
        self.self_device_memory_usage = 0
        self.count = 1

    @property
    def is_device(self):
        return self.device_type is not None

    @property
    def cpu_time_total(self):
        return 0.0 if self.is_device else self.end_us - self.start_us

    @property
    def self_cpu_time_total(self):
        if self.is_device:
            return 0.0
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def device_time_total(self):
        return self.end_us - self.start_us if self.is_device else 0.0

    self_device_time_total = device_time_total
    cuda_time_total = device_time_total
    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = property(lambda self: self.self_device_memory_usage)

    def __repr__(self):
        return f"<FunctionEvent {self.name} thread={self.thread} {self.start_us:.3f}..{self.end_us:.3f}us>"


class FunctionEventAvg:
    """The events of one key (name, or name and input shapes), summed."""

    def __init__(self, key, input_shapes=None):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.device_time_total = self.self_device_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.device_memory_usage = self.self_device_memory_usage = 0
        self.is_device = False
        self.device_types = set()

    def add(self, e):
        self.count += e.count
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        self.device_time_total += e.device_time_total
        self.self_device_time_total += e.self_device_time_total
        self.cpu_memory_usage += e.cpu_memory_usage
        self.self_cpu_memory_usage += e.self_cpu_memory_usage
        self.device_memory_usage += e.device_memory_usage
        self.self_device_memory_usage += e.self_device_memory_usage
        self.is_device = self.is_device or e.is_device
        self.device_types |= _device_types(e)
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / max(self.count, 1)

    @property
    def device_time(self):
        return self.device_time_total / max(self.count, 1)

    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = property(lambda self: self.self_device_memory_usage)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} count={self.count} self_cpu_time_total="
                f"{self.self_cpu_time_total:.3f}us cpu_time_total={self.cpu_time_total:.3f}us>")


_SORT_KEYS = {"cpu_time_total", "self_cpu_time_total", "cpu_time", "count", "cpu_memory_usage",
              "self_cpu_memory_usage", "device_time_total", "self_device_time_total", "cuda_time_total",
              "self_cuda_time_total", "device_time", "device_memory_usage", "self_device_memory_usage",
              "cuda_memory_usage", "self_cuda_memory_usage"}


class EventList(list):
    """A list of FunctionEvent (or FunctionEventAvg) with torch's table and aggregates."""

    def __init__(self, events=(), *, has_memory=False, has_shapes=False, has_device_memory=False,
                 memory_peaks=None):
        super().__init__(events)
        self._has_memory, self._has_shapes = has_memory, has_shapes
        self._has_device_memory = has_device_memory
        # "type:index" -> (peak, last) of the device's total allocated bytes during the profile
        self.memory_peaks = dict(memory_peaks or {})

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape=False):
        groups = {}
        for e in self:
            shapes = str(e.input_shapes) if group_by_input_shape else None
            k = (e.key, shapes)
            if k not in groups:
                groups[k] = FunctionEventAvg(e.key, shapes)
            groups[k].add(e)
        return EventList(groups.values(), has_memory=self._has_memory, has_shapes=group_by_input_shape,
                         has_device_memory=self._has_device_memory, memory_peaks=self.memory_peaks)

    def total_average(self):
        total = FunctionEventAvg("Total")
        for e in self:
            total.add(e)
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False):
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"table: sort_by must be one of {sorted(_SORT_KEYS)}, got {sort_by!r}")
            rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        self_cpu_total = self.self_cpu_time_total
        device_total = sum(e.self_device_time_total for e in self)
        has_device = device_total > 0
        types = set().union(*(_device_types(e) for e in self))
        device = "CUDA" if types <= {1, 2} else "Device"  # torch says CUDA on ROCm too
        name_width = min(max([len(str(e.key)) for e in rows] + [4]) + 4, max_name_column_width)
        columns = [("Name", name_width)] + [(h, 12) for h in
                                            ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]]
        if has_device:
            columns += [(h, 12) for h in [f"Self {device}", f"Self {device} %", f"{device} total",
                                          f"{device} time avg"]]
        if self._has_memory:
            columns += [("CPU Mem", 12), ("Self CPU Mem", 12)]
        if self._has_device_memory:
            columns += [(f"{device} Mem", 12), (f"Self {device} Mem", 12)]
        columns.append(("# of Calls", 12))
        if self._has_shapes:
            shapes_width = min(max([len(str(getattr(e, "input_shapes", ""))) for e in rows] + [12]) + 2,
                               max_shapes_column_width)
            columns.append(("Input Shapes", shapes_width))
        line = "  ".join("-" * w for _, w in columns) + "  "
        out = [line, "  ".join(h.rjust(w) for h, w in columns) + "  ", line]

        def pct(part, whole):
            return f"{100.0 * part / whole:.2f}%" if whole else "0.00%"

        for e in rows:
            name = str(e.key)
            if len(name) >= name_width:
                name = name[:name_width - 3] + "..."
            cells = [name, pct(e.self_cpu_time_total, self_cpu_total), _format_time(e.self_cpu_time_total),
                     pct(e.cpu_time_total, self_cpu_total), _format_time(e.cpu_time_total), _format_time(e.cpu_time)]
            if has_device:
                cells += [_format_time(e.self_device_time_total), pct(e.self_device_time_total, device_total),
                          _format_time(e.device_time_total), _format_time(e.device_time_total / max(e.count, 1))]
            if self._has_memory:
                cells += [_format_memory(e.cpu_memory_usage), _format_memory(e.self_cpu_memory_usage)]
            if self._has_device_memory:
                cells += [_format_memory(e.device_memory_usage), _format_memory(e.self_device_memory_usage)]
            cells.append(str(e.count))
            if self._has_shapes:
                shapes = str(getattr(e, "input_shapes", "") or "")
                cells.append(shapes[:shapes_width])
            out.append("  ".join(c.rjust(w) for c, (_, w) in zip(cells, columns)) + "  ")
        out.append(line)
        out.append(f"Self CPU time total: {_format_time(self_cpu_total)}")
        if has_device:
            out.append(f"Self {device} time total: {_format_time(device_total)}")
        for where, (peak, last) in sorted(self.memory_peaks.items()):
            label = "CPU" if where == "0:0" else f"Device {where}"
            out.append(f"{label} memory allocated: peak {_format_memory(peak)}, at the end {_format_memory(last)}")
        return "\n".join(out) + "\n"

    def __str__(self):
        return self.table()


def events_from_trace(trace):
    """The FunctionEvents of a Chrome trace written by the profiler plugin, with their parents,
    children (nesting per thread) and the memory allocated inside each."""
    events, memory, totals = [], [], []
    has_shapes = False
    for t in trace["traceEvents"]:
        ph = t.get("ph")
        if ph == "X":
            args = t.get("args", {})
            has_shapes = has_shapes or "Input Dims" in args
            device = args.get("device_type", -1) if t.get("cat") == "kernel" else None
            events.append(FunctionEvent(t["name"], t["tid"], float(t["ts"]), float(t["ts"]) + float(t["dur"]),
                                        input_shapes=args.get("Input Dims", []),
                                        sequence_nr=args.get("Sequence number", -1), kind=t.get("cat"),
                                        device_type=device))
        elif ph == "i" and t.get("name") == "[memory]":
            args = t["args"]
            memory.append((t["tid"], float(t["ts"]), args["Bytes"], args.get("Device Type", 0) != 0))
            totals.append((float(t["ts"]), f"{args.get('Device Type', 0)}:{args.get('Device Id', 0)}",
                           args["Total Allocated"]))
    # One sweep per thread in time order: an event's parent is the innermost open event that
    # contains it; a memory event belongs to the innermost event open at its time (its ancestors
    # count it too).
    by_thread = defaultdict(list)
    for e in events:
        if not e.is_device:
            by_thread[e.thread].append(e)
    memory_by_thread = defaultdict(list)
    for tid, ts, nbytes, on_device in memory:
        memory_by_thread[tid].append((ts, nbytes, on_device))

    def charge(owner, nbytes, on_device):
        prefix = "device" if on_device else "cpu"
        setattr(owner, f"self_{prefix}_memory_usage", getattr(owner, f"self_{prefix}_memory_usage") + nbytes)
        while owner is not None:
            setattr(owner, f"{prefix}_memory_usage", getattr(owner, f"{prefix}_memory_usage") + nbytes)
            owner = owner.cpu_parent

    for tid, thread_events in by_thread.items():
        thread_events.sort(key=lambda e: (e.start_us, -e.end_us))
        points = sorted(memory_by_thread.get(tid, ()))
        stack, k = [], 0
        for e in thread_events + [None]:
            start = e.start_us if e is not None else float("inf")
            while k < len(points) and points[k][0] < start:
                ts, nbytes, on_device = points[k]
                while stack and stack[-1].end_us < ts:
                    stack.pop()
                if stack:
                    charge(stack[-1], nbytes, on_device)
                k += 1
            if e is None:
                break
            while stack and stack[-1].end_us < e.end_us:
                stack.pop()
            if stack:
                e.cpu_parent = stack[-1]
                stack[-1].cpu_children.append(e)
            stack.append(e)
    events.sort(key=lambda e: e.start_us)
    peaks = {}
    for _, where, total in sorted(totals):
        peak, _last = peaks.get(where, (total, total))
        peaks[where] = (max(peak, total), total)
    return EventList(events, has_memory=any(not m[3] for m in memory), has_shapes=has_shapes,
                     has_device_memory=any(m[3] for m in memory), memory_peaks=peaks)
