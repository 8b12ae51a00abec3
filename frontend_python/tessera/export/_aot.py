"""ts.export.aot_compile: the compiler plugin's kernels for an exported program, built ahead of
time so that a deployment loads them instead of compiling (no compiler, no first-call wait).

The inductor compiles the graph at given sizes of its dynamic dims (by default the example's);
the archive stores each shared object with the CPU features it was compiled for (target "cpu"),
or the PTX of the graph's CUDA kernels (target "cuda"). A runtime uses them only when asked
(allow_native), on a machine with those features or once the program is on a CUDA device; any
other size runs the portable graph."""
import copy
import platform

from tessera import _C
from tessera.export import _dynamic


class AotKernels:
    """What aot_compile attaches to a program: per size set, the inductor's shared object (cpu)
    or the PTX of its CUDA kernels (cuda)."""

    def __init__(self, target, machine, cpu_features, entries, arch=None):
        self.target = target              # "cpu" or "cuda"
        self.machine = machine            # platform.machine() of the building machine
        self.cpu_features = cpu_features  # what -march=native compiled for ("" for cuda)
        self.entries = entries            # [{"sizes": [int per dim], "library": bytes | None}]
        self.arch = arch                  # cuda: the PTX's virtual architecture ("compute_75")

    def manifest(self):
        ext = "ptx" if self.target == "cuda" else "so"
        out = {"target": self.target, "machine": self.machine, "cpu_features": self.cpu_features,
               "entries": [{"sizes": e["sizes"], "library": f"aot/{self.target}/kernels_{k}.{ext}" if e["library"] else None}
                           for k, e in enumerate(self.entries)]}
        if self.arch:
            out["arch"] = self.arch
        return out


def _load_inductor():
    from tessera.compiler._plugin_backend import _load
    _load("inductor")


def usable_here(manifest):
    """(True, "") when this machine can run kernels built per `manifest`, else (False, why)."""
    if manifest.get("target") == "cuda":
        return False, ("the archive's kernels are CUDA kernels: the C++ runtime uses them after Program::to(\"cuda\"); "
                       "Python runs the portable graph")
    if manifest.get("target") != "cpu":
        return False, f"target {manifest.get('target')!r} is not this machine's (cpu)"
    if manifest.get("machine") != platform.machine():
        return False, f"built for {manifest.get('machine')}, this machine is {platform.machine()}"
    _load_inductor()
    have = set(_C.call_op("inductor::target", (), {}).split())
    missing = set(str(manifest.get("cpu_features", "")).split()) - have
    if missing:
        return False, f"built for CPU features this machine lacks ({', '.join(sorted(missing)[:5])})"
    return True, ""


def prebuilt_path(library):
    """Writes an archive's kernel library into the cache (content-addressed, atomically) and
    returns its path; a file already there is reused only if its bytes are the same."""
    import hashlib
    import os
    _load_inductor()
    directory = os.path.join(os.path.dirname(_C.call_op("inductor::cache_dir", (), {})), "aot")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, hashlib.sha256(library).hexdigest() + ".so")
    try:
        with open(path, "rb") as f:
            if f.read() == library:
                return path
    except OSError:
        pass
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(library)
    os.replace(tmp, path)
    return path


def native_handles(ep):
    """{sizes tuple: inductor handle} for the program's usable AOT kernels (empty when none)."""
    import json
    aot = getattr(ep, "_aot", None)
    if aot is None:
        return {}
    ok, _ = usable_here(aot.manifest())
    if not ok:
        return {}
    handles = {}
    for e in aot.entries:
        ir = _dynamic.specialise(ep._ir, ep._sym_exprs, e["sizes"]) if ep._sym_exprs else ep._ir
        options = f"prebuilt={prebuilt_path(e['library'])}" if e["library"] else ""
        handles[tuple(e["sizes"])] = _C.call_op("inductor::compile", (json.dumps(ir, separators=(",", ":")), options), {})
    return handles


def aot_compile(ep, target="cpu", *, sizes=None, arch="compute_75"):
    """A copy of `ep` carrying ahead-of-time kernels for `target`; ts.export.save stores them.

    sizes: the dynamic dims' sizes to build for, a list of {dim name: size} (dims left out take
    their example size); default: the example's sizes only.
    target "cuda": the inductor's CUDA kernels as PTX for virtual architecture `arch` (NVRTC,
    no GPU needed to build; the driver compiles PTX for any card of that architecture or newer).
    The C++ runtime runs them once the program is on a CUDA device (Program::to)."""
    if target not in ("cpu", "cuda"):
        raise ValueError(f"ts.export.aot_compile: unknown target {target!r} (known: 'cpu', 'cuda')")
    _load_inductor()
    names = [s["name"] for s in ep._symbols]
    examples = [s["example"] for s in ep._symbols]
    size_sets = []
    for want in (sizes or [{}]):
        unknown = set(want) - set(names)
        if unknown:
            raise ValueError(f"ts.export.aot_compile: sizes name {sorted(unknown)}, not dynamic dims of the program "
                             f"({names})")
        chosen = [int(want.get(n, e)) for n, e in zip(names, examples)]
        for n, v, s in zip(names, chosen, ep._symbols):
            if not s["min"] <= v <= s["max"]:
                raise ValueError(f"ts.export.aot_compile: size {v} for dim '{n}' is outside [{s['min']}, {s['max']}]")
        size_sets.append(chosen)
    import json
    entries = []
    for chosen in size_sets:
        ir = _dynamic.specialise(ep._ir, ep._sym_exprs, chosen) if ep._sym_exprs else ep._ir
        if target == "cuda":
            source = _C.call_op("inductor::generate", (json.dumps(ir, separators=(",", ":")), "cuda"), {})
            ptx = _C.call_op("inductor::nvrtc", (source, arch), {}) if "__global__" in source else None
            entries.append({"sizes": chosen, "library": ptx.encode() if ptx else None})
            continue
        handle = _C.call_op("inductor::compile", (json.dumps(ir, separators=(",", ":")), ""), {})
        try:
            path = _C.call_op("inductor::library", (handle,), {})
            library = open(path, "rb").read() if path else None
        finally:
            _C.call_op("inductor::release", (handle,), {})
        entries.append({"sizes": chosen, "library": library})
    out = copy.copy(ep)
    out._modules = {}
    if target == "cuda":
        out._aot = AotKernels(target, "any", "", entries, arch)
    else:
        out._aot = AotKernels(target, platform.machine(), _C.call_op("inductor::target", (), {}), entries)
    return out
