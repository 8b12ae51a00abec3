"""Training graphs, as AOTAutograd: the forward graph is replayed once more under capture with
stand-ins for its inputs and parameters, and autograd.grad runs inside the same capture, so
the derivative formulas' operators are recorded after the forward's. The joint graph is cut
there: the forward graph returns its outputs and the values the backward reads (saved
tensors); the backward graph takes those and the output gradients and returns the input
gradients. Both are compiled, and a ts.autograd.Function joins them into one autograd node."""
import copy

import tessera
from tessera import _C
from tessera.autograd import Function, grad as autograd_grad
from tessera.fx._from_ir import graph_module_from_ir, output_ids, parse_ir, tensor_ids


def _differentiable(t):
    return t.requires_grad and (t.is_floating_point() or t.is_complex())


def _dead_code_eliminated(ir):
    """The IR without nodes whose results nobody reads (in-place nodes stay)."""
    live = set(ir["outputs"]) | {vid for _, vid in ir.get("mutated_inputs", [])}
    kept = []
    for node in reversed(ir["nodes"]):
        if node.get("mutates") or any(o in live for o in output_ids(node)):
            kept.append(node)
            live.update(tensor_ids(node))
    ir["nodes"] = kept[::-1]
    return ir


def _used_ids(nodes):
    return {i for node in nodes for i in tensor_ids(node)}


def _produced_ids(nodes):
    return {i for node in nodes for i in output_ids(node)}


def joint_capture(capture, example_inputs):
    """(forward IR, backward IR, layout) of a captured graph that needs gradients."""
    ir = capture.ir
    primals = list(example_inputs) + list(capture.constants)
    mutated = {vid for node in ir["nodes"] for i in node.get("mutates", []) for vid in [node["args"][i].get("tensor")]}
    input_ids = ir["inputs"] + ir["constants"]
    stand_ins = []
    for p, vid in zip(primals, input_ids):
        if _differentiable(p):
            stand_ins.append(p.detach().requires_grad_())
        elif vid in mutated:
            stand_ins.append(p.detach().clone())  # the real buffer is written by the real calls only
        else:
            stand_ins.append(p.detach())
    replay = graph_module_from_ir(ir, stand_ins[len(example_inputs):])
    call = _C.call_op
    call("tracer::begin", (), {})
    try:
        for t in stand_ins:
            call("tracer::input", (t,), {})
        with tessera.enable_grad():
            outs = list(replay(*stand_ins[:len(example_inputs)]))
        mark = call("tracer::mark", (), {})
        diff_out = [k for k, o in enumerate(outs) if _differentiable(o)]
        diff_in = [k for k, p in enumerate(stand_ins) if _differentiable(p)]
        tangents = [tessera.zeros_like(outs[k]) for k in diff_out]
        for t in tangents:
            call("tracer::input", (t,), {})
        grads = autograd_grad([outs[k] for k in diff_out], [stand_ins[k] for k in diff_in], grad_outputs=tangents,
                              allow_unused=True)
        present = [j for j, g in enumerate(grads) if g is not None]
        text = call("tracer::end", (outs + [grads[j] for j in present],), {})
    except BaseException:
        call("tracer::abort", (), {})
        raise
    joint = parse_ir(text)
    if joint["constants"]:
        readers = sorted({n["op"] for n in joint["nodes"] for a in n["args"]
                          if a.get("tensor") in joint["constants"]})
        raise RuntimeError("ts.compile: the joint forward/backward capture read tensors it was not given "
                           f"({len(joint['constants'])}, read by {', '.join(readers)})")
    n_primals = len(stand_ins)
    primal_ids = joint["inputs"][:n_primals]
    tangent_ids = joint["inputs"][n_primals:]
    fwd_out_ids = joint["outputs"][:len(outs)]
    grad_ids = joint["outputs"][len(outs):]

    bwd_nodes = joint["nodes"][mark:]
    bwd = {**joint, "nodes": bwd_nodes, "outputs": grad_ids, "mutated_inputs": []}
    bwd = _dead_code_eliminated(bwd)
    produced_bwd = _produced_ids(bwd["nodes"])
    saved = sorted((_used_ids(bwd["nodes"]) | set(grad_ids)) - produced_bwd - set(tangent_ids))
    fwd = {**joint, "nodes": joint["nodes"][:mark], "inputs": primal_ids, "outputs": fwd_out_ids + saved}
    fwd = _dead_code_eliminated(fwd)
    bwd["inputs"] = saved + tangent_ids
    for graph in (fwd, bwd):
        graph["values"] = copy.deepcopy(graph["values"])
        for vid in graph["inputs"]:
            graph["values"][vid]["kind"] = "input"
        graph["constants"] = []
    layout = {"n_outputs": len(outs), "n_saved": len(saved), "diff_out": diff_out, "diff_in": diff_in,
              "present": present, "n_primals": n_primals}
    return fwd, bwd, layout


def needs_grad(capture, example_inputs):
    """Whether calling the captured graph needs gradients: grad mode on and an input or
    parameter requiring grad."""
    from tessera.autograd.grad_mode import is_grad_enabled
    return is_grad_enabled() and any(_differentiable(t) for t in list(example_inputs) + list(capture.constants))


def training_capture(gm, example_inputs):
    """The Capture behind `gm` when calling it needs gradients and gm is unedited; else None."""
    meta = getattr(gm, "meta", None) or {}
    capture = meta.get("tessera_capture")
    if capture is None or meta.get("tessera_code") != gm.code or not needs_grad(capture, example_inputs):
        return None
    return capture


def _cache_path(capture, example_inputs):
    """Where the joint capture of this forward graph is kept on disk: it depends only on the
    forward IR (shapes, dtypes and operators included) and on which inputs need gradients."""
    import hashlib
    import os
    base = os.environ.get("TESSERA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tessera")
    needs = "".join("1" if _differentiable(t) else "0" for t in list(example_inputs) + list(capture.constants))
    # The derivative formulas are the library's: another Tessera version captures again.
    key = hashlib.sha256(f"aot/1\n{tessera.__version__}\n{needs}\n{capture.ir_text}".encode()).hexdigest()[:32]
    return os.path.join(base, "aot", key + ".json")


def cached_joint_capture(capture, example_inputs):
    """joint_capture, read from the on-disk cache when an earlier process wrote it (a file that
    does not parse is recomputed and rewritten; files are written whole, then renamed)."""
    import json
    import os
    import tempfile
    path = _cache_path(capture, example_inputs)
    try:
        with open(path) as f:
            entry = json.load(f)
        return entry["forward"], entry["backward"], entry["layout"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    fwd_ir, bwd_ir, layout = joint_capture(capture, example_inputs)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"forward": fwd_ir, "backward": bwd_ir, "layout": layout}, f)
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs the next process this capture
    return fwd_ir, bwd_ir, layout


def make_training_callable(capture, example_inputs, compile_ir):
    """A callable of the graph's inputs returning its outputs, differentiable, with forward and
    backward each compiled by compile_ir(ir_dict) -> callable(*tensors) -> list of tensors."""
    fwd_ir, bwd_ir, layout = cached_joint_capture(capture, example_inputs)
    return training_callable(fwd_ir, bwd_ir, layout, list(capture.constants), compile_ir)


def training_callable(fwd_ir, bwd_ir, layout, constants, compile_ir):
    """make_training_callable from the joint capture's two graphs and layout."""
    run_fwd, run_bwd = compile_ir(fwd_ir), compile_ir(bwd_ir)
    n_out, diff_out, diff_in = layout["n_outputs"], layout["diff_out"], layout["diff_in"]
    diff_out_set = set(diff_out)
    present, n_primals = layout["present"], layout["n_primals"]

    class CompiledGraphFunction(Function):
        @staticmethod
        def forward(ctx, *primals):
            results = run_fwd(*primals)
            ctx.save_for_backward(*results[n_out:])
            outs = tuple(results[:n_out])
            # Outputs the capture saw without gradient (a detach, an argmax) stay without it.
            ctx.mark_non_differentiable(*[o for k, o in enumerate(outs) if k not in diff_out_set])
            return outs

        @staticmethod
        def backward(ctx, *grad_outputs):
            tangents = [grad_outputs[k] for k in diff_out]
            grads = run_bwd(*ctx.saved_tensors, *tangents)
            result = [None] * n_primals
            for g, j in zip(grads, present):
                result[diff_in[j]] = g
            return tuple(result)

    def run(*inputs):
        return CompiledGraphFunction.apply(*inputs, *constants)
    run.fuses = getattr(run_fwd, "fuses", True) or getattr(run_bwd, "fuses", True)
    return run
