"""The export archive: one zip file holding an exported program for deployment.

    metadata.json        {"format": "tessera.export", "format_version": 2, "producer": "tessera 0.1.0",
                          "target_devices": ["cpu"], "plugins": [...], "operators": [...],
                          "parts": {"graph.json": "xxh3-128:<hex>", ...}}
    graph.json           the graph IR ("tessera.graph" version 1, sdk/include/tessera/sdk/graph_ir.h)
    program.json         the signature, input checks, dynamic dims ("tessera.exported_program")
    weights.safetensors  parameters, buffers and lifted constants, by their signature targets

Loading runs no code: every part is data, its checksum checked before it is parsed. The C++
runtime (export/runtime/archive.cpp) reads the same layout."""
import hashlib
import json
import os
import tempfile
import time
import zipfile

import tessera
from tessera import _C
from tessera.export._program import ExportedProgram
from tessera.export._signature import InputKind
from tessera.fx._from_ir import device_of

ARCHIVE_FORMAT = "tessera.export"
# 2: parts checked with XXH3-128 (part_checksum); 1: SHA-256 (still read).
ARCHIVE_FORMAT_VERSION = 2
PARTS = ("graph.json", "program.json", "weights.safetensors")


class ArchiveError(ValueError):
    """An export archive that is truncated, tampered with, of a newer format or otherwise unreadable."""


def _plugin_of(op):
    ns = op.split("::", 1)[0] if "::" in op else "aten"
    return None if ns == "aten" else ns


def metadata_for(ep, parts):
    devices = sorted({str(device_of(v["device"])) for v in ep._ir["values"]})
    plugins = sorted({p for p in map(_plugin_of, ep.operators()) if p})
    return {"format": ARCHIVE_FORMAT, "format_version": ARCHIVE_FORMAT_VERSION, "producer": f"tessera {tessera.__version__}",
            "target_devices": devices, "plugins": plugins, "operators": ep.operators(),
            "parts": {name: part_checksum(data) for name, data in parts.items()}}


def part_checksum(data):
    """What metadata.json keeps of a part: XXH3-128 (fast; a check against damage and edits, not
    a signature)."""
    return _C._part_checksum(data)


def _matches(data, expected):
    if isinstance(expected, str) and expected.startswith("xxh3-128:"):
        return part_checksum(data) == expected
    return hashlib.sha256(data).hexdigest() == expected  # a format 1 archive


def _weights_bytes(ep):
    tensors = list(ep.state_dict.items()) + [(k, v) for k, v in ep.constants.items() if k not in ep.state_dict]
    fd, tmp = tempfile.mkstemp(suffix=".safetensors")
    os.close(fd)
    try:
        _C._save_safetensors(tmp, [(k, v.detach()) for k, v in tensors], {})
        with open(tmp, "rb") as f:
            return f.read()
    finally:
        os.unlink(tmp)


_ALIGNMENT = 64
_PADDING_FIELD = 0xD935  # the extra-field id zipalign uses for padding; readers skip unknown ids


def _aligned_entry(name):
    """A stored ZipInfo for the archive's first entry whose data starts at a multiple of 64 bytes:
    its local header (30 bytes and the name) is followed by a padding extra field."""
    info = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
    info.compress_type = zipfile.ZIP_STORED
    pad = -(30 + len(name.encode()) + 4) % _ALIGNMENT
    info.extra = _PADDING_FIELD.to_bytes(2, "little") + pad.to_bytes(2, "little") + bytes(pad)
    return info


def save(ep, f):
    """Writes `ep` to `f` (a path, written atomically, or a binary file object) as one zip file."""
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"ts.export.save: expected an ExportedProgram, got {type(ep).__name__}")
    parts = {"graph.json": ep.ir_text().encode(),
             "program.json": json.dumps(ep.program_json(), separators=(",", ":")).encode(),
             "weights.safetensors": _weights_bytes(ep)}
    aot = getattr(ep, "_aot", None)
    if aot is not None:  # ahead-of-time kernels (aot_compile): used only with allow_native
        manifest = aot.manifest()
        parts[f"aot/{aot.target}/aot.json"] = json.dumps(manifest, indent=1).encode()
        for entry, described in zip(aot.entries, manifest["entries"]):
            if entry["library"]:
                parts[described["library"]] = entry["library"]
    meta_dict = metadata_for(ep, parts)
    meta_dict["aot_targets"] = [aot.target] if aot is not None else []
    meta = json.dumps(meta_dict, indent=1).encode()

    def write(fileobj):
        with zipfile.ZipFile(fileobj, "w") as z:
            # The weights first, stored and aligned: the C++ runtime's tensors then view them in
            # the mapped archive instead of copying them out (export/src/archive.cpp).
            z.writestr(_aligned_entry("weights.safetensors"), parts["weights.safetensors"])
            z.writestr("metadata.json", meta, compress_type=zipfile.ZIP_DEFLATED)
            for name, data in parts.items():
                if name == "weights.safetensors":
                    continue
                # Weights are stored as they are (they barely compress), the JSON deflated.
                kind = zipfile.ZIP_DEFLATED if name.endswith(".json") else zipfile.ZIP_STORED
                z.writestr(name, data, compress_type=kind)

    if hasattr(f, "write"):
        write(f)
        return
    path = os.fspath(f)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_parts(f):
    """(metadata, {part: bytes}) of an archive, every check done: ArchiveError naming the problem."""
    where = getattr(f, "name", None) or (os.fspath(f) if not hasattr(f, "read") else "<file>")
    try:
        z = zipfile.ZipFile(f if hasattr(f, "read") else os.fspath(f))
    except zipfile.BadZipFile as e:
        raise ArchiveError(f"ts.export.load: '{where}' is not an export archive (not a zip file, or truncated: {e})") from None
    with z:
        names = set(z.namelist())
        if "metadata.json" not in names:
            raise ArchiveError(f"ts.export.load: '{where}' has no metadata.json; it is not an export archive")
        try:
            meta = json.loads(z.read("metadata.json"))
        except (ValueError, zipfile.BadZipFile, OSError) as e:
            raise ArchiveError(f"ts.export.load: '{where}': metadata.json is unreadable ({e})") from None
        if not isinstance(meta, dict) or meta.get("format") != ARCHIVE_FORMAT:
            raise ArchiveError(f"ts.export.load: '{where}': expected format '{ARCHIVE_FORMAT}', got "
                               f"{meta.get('format') if isinstance(meta, dict) else meta!r}")
        version = meta.get("format_version")
        if not isinstance(version, int) or version > ARCHIVE_FORMAT_VERSION or version < 1:
            raise ArchiveError(f"ts.export.load: '{where}' has format version {version!r} (written by "
                               f"{meta.get('producer', 'an unknown producer')}); this tessera reads versions "
                               f"1..{ARCHIVE_FORMAT_VERSION}: upgrade tessera")
        sums = meta.get("parts")
        if not isinstance(sums, dict):
            raise ArchiveError(f"ts.export.load: '{where}': metadata.json lists no parts")
        parts = {}
        for name in PARTS:
            if name not in names or name not in sums:
                raise ArchiveError(f"ts.export.load: '{where}' lacks the part {name}")
        for name in sorted(sums):
            if name not in names:
                raise ArchiveError(f"ts.export.load: '{where}' lacks the part {name}")
            try:
                data = z.read(name)
            except (zipfile.BadZipFile, OSError, EOFError) as e:
                raise ArchiveError(f"ts.export.load: '{where}': the part {name} is unreadable (truncated? {e})") from None
            if not _matches(data, sums[name]):
                raise ArchiveError(f"ts.export.load: '{where}': the checksum of {name} does not match metadata.json "
                                   "(the archive was modified or damaged)")
            parts[name] = data
    return meta, parts


def _check_operators(ep, f):
    """Every operator the graph calls exists here (loading the plugin its namespace names)."""
    from tessera._ops import op_overload
    for name in ep.operators():
        ns = _plugin_of(name)
        if ns:
            _C.plugins_load_named(ns, f"the operator {name} of an exported program")
        try:
            op_overload(name).arguments()
        except (RuntimeError, AttributeError, ValueError):
            raise ArchiveError(f"ts.export.load: the graph calls operator '{name}', which no loaded plugin provides "
                               f"(plugin search path: {_C.plugins_search_path()})") from None


def load(f, *, expected_opset_version=None, allow_native=False):
    """Reads an archive written by save(): an ExportedProgram whose module() runs the graph.

    allow_native: use the archive's ahead-of-time kernels (native code: only for a trusted
    archive) when they were built for this machine; without it, or when they were not, the
    portable graph runs. `ep.native` says which, `ep.native_reason` why not."""
    meta, parts = read_parts(f)
    try:
        ir = json.loads(parts["graph.json"])
        program = json.loads(parts["program.json"])
    except ValueError as e:
        raise ArchiveError(f"ts.export.load: a JSON part is malformed ({e})") from None
    if ir.get("format") != "tessera.graph" or ir.get("version") != 1:
        raise ArchiveError(f"ts.export.load: graph.json: expected 'tessera.graph' version 1, got "
                           f"{ir.get('format')!r} version {ir.get('version')!r}")
    try:
        weights = dict(tessera._serialization.loads(parts["weights.safetensors"]))
    except ValueError as e:
        raise ArchiveError(f"ts.export.load: weights.safetensors: {e}") from None
    try:
        ep = ExportedProgram.from_json(ir, program, {}, {})
    except (KeyError, TypeError, ValueError) as e:
        raise ArchiveError(f"ts.export.load: program.json is malformed ({type(e).__name__}: {e})") from None
    _check_operators(ep, f)
    for s in ep.graph_signature.input_specs:
        if s.kind == InputKind.USER_INPUT:
            continue
        if s.target not in weights:
            raise ArchiveError(f"ts.export.load: weights.safetensors lacks '{s.target}' ({s.kind.value})")
        persistent = s.kind == InputKind.PARAMETER or (s.kind == InputKind.BUFFER and s.persistent is not False)
        (ep.state_dict if persistent else ep.constants)[s.target] = weights[s.target]
    ep.metadata = meta
    from tessera.export import _aot
    for target in meta.get("aot_targets", []):
        try:
            manifest = json.loads(parts[f"aot/{target}/aot.json"])
            entries = [{"sizes": e["sizes"], "library": parts[e["library"]] if e["library"] else None}
                       for e in manifest["entries"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ArchiveError(f"ts.export.load: aot/{target}/aot.json is malformed ({type(e).__name__}: {e})") from None
        ep._aot = _aot.AotKernels(manifest["target"], manifest["machine"], manifest["cpu_features"], entries,
                                  manifest.get("arch"))
    ep.native_reason = "not asked (allow_native=False)"
    if allow_native:
        if getattr(ep, "_aot", None) is None:
            ep.native_reason = "the archive has no ahead-of-time kernels (ts.export.aot_compile)"
        else:
            ok, why = _aot.usable_here(ep._aot.manifest())
            ep.native_reason = why
            if ok:
                ep._native = _aot.native_handles(ep)
    return ep


