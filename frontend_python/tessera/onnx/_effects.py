"""What an ONNX graph cannot hold: writes to the program's state, and in-place writes that reach
a value through shared storage. ONNX values are immutable and never alias, so a program whose
result depends on either is refused rather than exported with the write lost."""
from tessera.export._signature import OutputKind
from tessera.onnx.errors import OnnxExporterError


def _arg_ids(arg):
    (kind, value), = arg.items()
    if kind == "tensor":
        return [value]
    if kind == "tensors":
        return [v for v in value if v is not None]
    return []


def check(ep):
    ir = ep._ir
    if ir["mutated_inputs"]:
        written = [s.target for s in ep.graph_signature.output_specs if s.kind != OutputKind.USER_OUTPUT]
        raise OnnxExporterError(
            f"ts.onnx.export: the program writes to {written}; an ONNX graph has no state to write to. A module in "
            "training mode updates its buffers (batch norm's running statistics): call model.eval() before "
            "exporting, or compute without writing to buffers and inputs")

    values, nodes = ir["values"], ir["nodes"]

    def root(vid):
        while values[vid]["alias_of"] >= 0:
            vid = values[vid]["alias_of"]
        return vid

    born = {}           # value id -> index of the node that made it (-1: an input or constant)
    last_read = {}      # value id -> index of the last node that reads it (len(nodes): returned)
    for k, node in enumerate(nodes):
        for arg in node["args"]:
            for vid in _arg_ids(arg):
                last_read[vid] = k
        for out in node["outputs"]:
            for vid in (out if isinstance(out, list) else [out]):
                if vid >= 0:
                    born[vid] = k
    for vid in ir["outputs"]:
        last_read[vid] = len(nodes)

    group = {}
    for v in values:
        group.setdefault(root(v["id"]), []).append(v["id"])
    for k, node in enumerate(nodes):
        for a in node.get("mutates", []):
            for target in _arg_ids(node["args"][a]):
                for vid in group[root(target)]:
                    # A value that existed before the write and is read after it would see the write
                    # in tessera (shared storage) and not in ONNX.
                    if born.get(vid, -1) < k and last_read.get(vid, -1) > k:
                        raise OnnxExporterError(
                            f"ts.onnx.export: the in-place operator '{node['op']}' (node {k}) writes to storage that "
                            f"another tensor of the program (value {vid}, made before the write and read after it) "
                            "shares; ONNX values never alias, so the write would be lost. Use the out-of-place "
                            "operator (x = x.mul(2) rather than x.view(-1).mul_(2))")
