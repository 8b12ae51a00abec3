"""An ExportedProgram's graph as an ONNX ModelProto.

User inputs become graph inputs (dynamic dims as dim_param), parameters and buffers become
initializers named by their state_dict keys, lifted constants and folded results initializers
too; each live node goes through its translation in _ops.py. Shape inference then checks that
every translated value has the dtype and static shape the IR recorded, so a wrong translation
stops the export instead of giving a model that computes something else."""
import onnx
from onnx import helper

import tessera
from tessera.export._signature import InputKind, OutputKind
from tessera.fx._from_ir import tensor_ids
from tessera.onnx import _effects, _folding
from tessera.onnx._graph import ONNX_TYPES, GraphContext, SymInt, to_numpy
from tessera.onnx._node import Node
from tessera.onnx._ops import lookup
from tessera.onnx.errors import OnnxExporterError, UnsupportedOperatorError


def _live(ir, n_outputs):
    """(values read by a node that matters or returned, indices of the nodes that matter)."""
    used = set(ir["outputs"][:n_outputs])
    nodes = set()
    for k in range(len(ir["nodes"]) - 1, -1, -1):
        node = ir["nodes"][k]
        if not any(v in used for v in _folding._outputs(node)):
            continue
        nodes.add(k)
        used.update(tensor_ids(node))
    return used, nodes


def _bind(ctx, node, n, results):
    """Records the ONNX names a translation returned for the node's outputs."""
    if not isinstance(results, (list, tuple)):
        results = [results]
    for k, ids in enumerate(node["outputs"]):
        r = results[k] if k < len(results) else None
        if r is None:
            if n.used(k):
                raise n.unsupported(f"output {k} is read but has no translation")
            continue
        if isinstance(ids, list):
            ctx.env.update(zip(ids, r))
        elif ids >= 0:
            ctx.env[ids] = r


def _dim(s, symbol_names):
    if isinstance(s, int):
        return s
    if isinstance(s, SymInt) and len(s.expr) == 1 and s.expr[0][0] == 1 and len(s.expr[0][1]) == 1:
        return symbol_names[s.expr[0][1][0]]
    return None  # an expression of several dims: left unnamed


def translate(ep, *, opset, input_names, output_names, output_axes, symbol_names, fold, export_params):
    ir = ep._ir
    _effects.check(ep)
    ctx = GraphContext(ir, ep._sym_exprs, opset)
    sig = ep.graph_signature
    state = [s for s in sig.input_specs if s.kind in (InputKind.PARAMETER, InputKind.BUFFER)]
    lifted = [s for s in sig.input_specs if s.kind == InputKind.CONSTANT_TENSOR]
    state_ids, user_ids = ir["inputs"][:len(state)], ir["inputs"][len(state):]
    n_outputs = len([s for s in sig.output_specs if s.kind == OutputKind.USER_OUTPUT])

    graph_inputs = []
    for k, (vid, name) in enumerate(zip(user_ids, input_names)):
        ctx.env[vid] = ctx.claim(name)
        dims = []
        for d, x in enumerate(ep._input_dims[k]):
            if isinstance(x, int):
                dims.append(x)
            else:
                dims.append(symbol_names[x["sym"]])
                ctx.add_symbol_source(x["sym"], name, d)
        graph_inputs.append(helper.make_tensor_value_info(name, ONNX_TYPES[ir["values"][vid]["dtype"]], dims))
    for spec, vid in zip(state, state_ids):
        tensor = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
        ctx.defer(vid, spec.target, to_numpy(tensor), as_input=not export_params)
    constants = {}
    for spec, vid in zip(lifted, ir["constants"]):
        constants[vid] = ep.constants[spec.target]
        ctx.defer(vid, spec.target, to_numpy(constants[vid]))

    used, live = _live(ir, n_outputs)
    producer = {}
    for k, node in enumerate(ir["nodes"]):
        if k not in live:
            continue
        folded = _folding.fold(ctx, k, node, constants) if fold else None
        if folded is not None:
            for vid, t in folded.items():
                constants[vid] = t
                if vid in used:
                    ctx.defer(vid, ctx.fresh(f"folded_{node['op'].split('.')[0]}"), to_numpy(t), claimed=True)
            continue
        fn = lookup(node["op"])
        if fn is None:
            raise UnsupportedOperatorError(node["op"], opset, "no translation is registered for it")
        n = Node(ctx, k, node, used)
        _bind(ctx, node, n, fn(n))
        for vid in _folding._outputs(node):
            producer[vid] = (k, node["op"])

    # Graph outputs: a node's result is renamed to the output name; an input, an initializer or
    # a value returned twice goes through Identity.
    out_ids = ir["outputs"][:n_outputs]
    names = list(output_names or [])
    if len(names) > len(out_ids):
        raise ValueError(f"ts.onnx.export: {len(names)} output_names for {len(out_ids)} outputs")
    names += [f"output_{k}" for k in range(len(names), len(out_ids))]
    made = {o for node in ctx.nodes for o in node.output}
    renamed, graph_outputs = {}, []
    for k, (vid, name) in enumerate(zip(out_ids, names)):
        ctx.claim(name)
        src = ctx.name_of(vid)
        if src in made and src not in renamed:
            renamed[src] = name
        else:
            ctx.nodes.append(helper.make_node("Identity", [renamed.get(src, src)], [name],
                                              name=ctx.fresh("n_Identity")))
        shape = [_dim(s, symbol_names) for s in ctx.shape(vid)]
        for d, axis_name in output_axes.get(name, {}).items():
            if not -len(shape) <= d < len(shape):
                raise ValueError(f"ts.onnx.export: dynamic_axes names dim {d} of output '{name}', which has rank "
                                 f"{len(shape)}")
            shape[d] = axis_name
        graph_outputs.append(helper.make_tensor_value_info(name, ONNX_TYPES[ir["values"][vid]["dtype"]], shape))
    for node in ctx.nodes:
        node.input[:] = [renamed.get(x, x) for x in node.input]
        node.output[:] = [renamed.get(x, x) for x in node.output]
    env = {vid: renamed.get(name, name) for vid, name in ctx.env.items()}

    graph = helper.make_graph(ctx.nodes, "main_graph", graph_inputs + ctx.extra_inputs, graph_outputs,
                              initializer=ctx.initializers)
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="tessera",
                              producer_version=getattr(tessera, "__version__", ""))
    model.ir_version = helper.find_min_ir_version_for(opsets)
    _check_types(model, env, ir, ctx, producer)
    return model


def _check_types(model, env, ir, ctx, producer):
    """Every translated value has the IR's dtype, rank and static sizes (ONNX shape inference)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as e:  # noqa: BLE001  (onnx raises several kinds)
        raise OnnxExporterError(f"ts.onnx.export: the ONNX graph does not type-check ({e}); this is a bug in "
                                "ts.onnx") from e
    types = {vi.name: vi.type.tensor_type for vi in
             list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}
    for vid, name in env.items():
        t = types.get(name)
        if t is None or vid not in producer:
            continue
        v = ir["values"][vid]
        k, op = producer[vid]
        if t.elem_type != ONNX_TYPES[v["dtype"]]:
            raise OnnxExporterError(f"ts.onnx.export: the translation of '{op}' (node {k}) gives element type "
                                    f"{t.elem_type} where the graph has dtype code {v['dtype']}; this is a bug in "
                                    "ts.onnx")
        if not t.HasField("shape"):
            continue
        dims = t.shape.dim
        if len(dims) != len(v["shape"]):
            raise OnnxExporterError(f"ts.onnx.export: the translation of '{op}' (node {k}) gives rank {len(dims)} "
                                    f"where the graph has shape {v['shape']}; this is a bug in ts.onnx")
        for d, (dim, size) in enumerate(zip(dims, ctx.shape(vid))):
            if isinstance(size, int) and dim.HasField("dim_value") and dim.dim_value != size:
                raise OnnxExporterError(
                    f"ts.onnx.export: the translation of '{op}' (node {k}) gives size {dim.dim_value} at dim {d} "
                    f"where the graph has shape {v['shape']}; this is a bug in ts.onnx")
