"""ts.onnx.export (torch.onnx.export's names): captures the module with ts.export.export and
writes its graph as an ONNX model. dynamic_axes become the export's dynamic dims (Dims), so
sizes the graph computes from them (a reshape to batch * T) are computed in ONNX too."""
import os
import re

import onnx

import tessera
from tessera.compiler._pytree import flatten, unflatten
from tessera.export._dynamic import Dim
from tessera.export._export import _user_input_names
from tessera.onnx._translate import translate

MIN_OPSET = 17  # LayerNormalization; the translations assume opset 13+ operator forms
DEFAULT_OPSET = 17


class ONNXProgram:
    """What ts.onnx.export returns: the model (model_proto) and save(destination)."""

    def __init__(self, model_proto, exported_program):
        self.model_proto = model_proto
        self.exported_program = exported_program

    def save(self, destination):
        if hasattr(destination, "write"):
            destination.write(self.model_proto.SerializeToString())
        else:
            onnx.save_model(self.model_proto, os.fspath(destination))

    def __repr__(self):
        g = self.model_proto.graph
        return (f"ONNXProgram(opset {self.model_proto.opset_import[0].version}, inputs "
                f"{[i.name for i in g.input]}, outputs {[o.name for o in g.output]}, {len(g.node)} nodes)")


def _user_tensors(args, kwargs):
    """(leaves, paths, spec, indices of the distinct tensor leaves): the graph's user inputs are
    the tensors of (args, kwargs) in flatten order, each object once."""
    leaves, paths, spec = flatten((args, kwargs))
    seen, firsts = set(), []
    for i, x in enumerate(leaves):
        if isinstance(x, tessera.Tensor) and id(x) not in seen:
            seen.add(id(x))
            firsts.append(i)
    return leaves, paths, spec, firsts


def _dynamic_shapes(dynamic_axes, names, leaves, spec, firsts, kwargs):
    """dynamic_axes ({input name: {dim: axis name} or [dims]}) as ts.export's dynamic_shapes
    (a tuple per argument), with one Dim per axis name; also returns {Dim name: axis name} and
    the entries for outputs."""
    dims, display = {}, {}

    def dim_for(axis_name):
        if axis_name not in dims:
            # A Dim's name is an identifier (ts.export's messages show it); ONNX shows axis_name.
            name = axis_name if axis_name.isidentifier() else f"dim{len(dims)}_" + re.sub(r"\W", "_", axis_name)
            dims[axis_name] = Dim(name)
            display[name] = axis_name
        return dims[axis_name]

    def axes_of(key, value):
        if isinstance(value, dict):
            return {int(d): str(a) for d, a in value.items()}
        if isinstance(value, (list, tuple)):
            return {int(d): f"{key}_dynamic_axes_{j + 1}" for j, d in enumerate(value)}
        raise TypeError(f"ts.onnx.export: dynamic_axes['{key}'] must be a dict {{dim: name}} or a list of dims, "
                        f"got {type(value).__name__}")

    axes = {k: axes_of(k, v) for k, v in dynamic_axes.items()}
    by_object = {id(leaves[i]): names[j] for j, i in enumerate(firsts)}
    per_leaf = []
    for x in leaves:
        if isinstance(x, tessera.Tensor):
            per_leaf.append({d: dim_for(a) for d, a in axes.get(by_object[id(x)], {}).items()})
        else:
            per_leaf.append(None)
    arg_specs, kwarg_specs = unflatten(per_leaf, spec)
    dynamic = tuple(arg_specs) + tuple(kwarg_specs[k] for k in kwargs)
    return dynamic, display, {k: v for k, v in axes.items() if k not in names}


def export(model, args=(), f=None, *, kwargs=None, input_names=None, output_names=None, opset_version=None,
           dynamic_axes=None, do_constant_folding=True, export_params=True, dynamo=True, verbose=None):
    """Exports `model` (a ts.nn.Module) called with `args` (a tuple; a single tensor is taken as
    one argument) and `kwargs` as an ONNX model written to `f` (a path or a binary file), and
    returns it as an ONNXProgram.

    input_names / output_names: names of the graph's inputs (the tensors of args and kwargs in
    order, by default forward's parameter names) and outputs (output_0, ...). dynamic_axes:
    {name: {dim: axis name}} (or {name: [dims]}) for inputs and outputs; those dims are symbolic in
    the model, which then runs at other sizes (sizes 0 and 1 of an example specialise, as in
    ts.export). opset_version: 17 (the default) or newer. do_constant_folding: computations on
    constants alone run at export. export_params=False makes parameters and buffers graph
    inputs rather than initializers. dynamo and verbose are accepted for PyTorch's signature: the
    graph always comes from ts.export.

    A module in training mode whose forward updates buffers is refused (call model.eval());
    an operator without an ONNX translation raises UnsupportedOperatorError naming it.
    """
    if not isinstance(model, tessera.nn.Module):
        raise TypeError(f"ts.onnx.export: expected a tessera.nn.Module, got {type(model).__name__}")
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    newest = onnx.defs.onnx_opset_version()
    if opset < MIN_OPSET:
        raise ValueError(f"ts.onnx.export: opset_version {opset} is not supported; the lowest supported opset is "
                         f"{MIN_OPSET}")
    if opset > newest:
        raise ValueError(f"ts.onnx.export: opset_version {opset} is newer than this onnx package knows ({newest})")
    if isinstance(args, list):
        args = tuple(args)
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = dict(kwargs or {})

    leaves, paths, spec, firsts = _user_tensors(args, kwargs)
    names = _user_input_names(model, args, kwargs, [paths[i] for i in firsts])
    if input_names is not None:
        if len(input_names) > len(names):
            raise ValueError(f"ts.onnx.export: {len(input_names)} input_names for {len(names)} tensor inputs")
        names[:len(input_names)] = list(input_names)
    if len(set(names)) != len(names):
        raise ValueError(f"ts.onnx.export: input names must be distinct, got {names}")

    dynamic, display, output_axes = None, {}, {}
    if dynamic_axes:
        dynamic, display, output_axes = _dynamic_shapes(dynamic_axes, names, leaves, spec, firsts, kwargs)
    ep = tessera.export.export(model, args, kwargs, dynamic_shapes=dynamic)
    if len(ep.graph_signature.user_inputs) != len(names):  # the capture and flatten disagree: a bug
        raise AssertionError("ts.onnx.export: the exported program's inputs do not match the example's tensors")

    symbol_names = {i: display.get(s["name"], s["name"]) for i, s in enumerate(ep._symbols)}
    outputs = list(output_names or [])
    n_out = len(ep._ir["outputs"])
    known = set(outputs) | {f"output_{k}" for k in range(len(outputs), n_out)}
    unknown = sorted(set(output_axes) - known)
    if unknown:
        raise ValueError(f"ts.onnx.export: dynamic_axes names {unknown}, which are neither inputs ({names}) nor "
                         f"outputs ({sorted(known)})")
    model_proto = translate(ep, opset=opset, input_names=names, output_names=outputs, output_axes=output_axes,
                            symbol_names=symbol_names, fold=do_constant_folding, export_params=export_params)
    program = ONNXProgram(model_proto, ep)
    if f is not None:
        program.save(f)
    return program
