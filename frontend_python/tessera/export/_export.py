"""ts.export.export: one capture of a module's forward (the compile layer's tracer) as a whole
graph, its parameters and buffers lifted to graph inputs, with the signature PyTorch's
ExportedProgram has. A data-dependent branch is an error naming the source line."""
import inspect
import threading

import tessera
from tessera.compiler import _capture
from tessera.compiler._guards import _path_name
from tessera.compiler._pytree import flatten
from tessera.export import _dynamic
from tessera.export._program import ExportedProgram
from tessera.export._signature import (ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec,
                                       TensorArgument)


class ExportError(RuntimeError):
    """A program export cannot hold as one graph (a data-dependent branch, an unsupported call)."""


def _placeholder_name(prefix, target):
    return prefix + "".join(c if c.isalnum() else "_" for c in target)


def _user_input_names(mod, args, kwargs, paths):
    """Names of the user input leaves: the forward's parameter names (x, x_0_1 for nested)."""
    try:
        bound = inspect.signature(mod.forward).bind(*args, **kwargs)
        names = list(bound.arguments)
    except (TypeError, ValueError):
        names = []
    out = []
    for p in paths:
        # p is "[0][i]..." for args or "[1]['k']..." for kwargs.
        parts = [x.strip("'\"") for x in p.replace("]", "").split("[")[1:]]
        if parts[0] == "0" and len(parts) > 1 and int(parts[1]) < len(names):
            head, rest = names[int(parts[1])], parts[2:]
        elif parts[0] == "1" and len(parts) > 1:
            head, rest = parts[1], parts[2:]
        else:
            head, rest = "arg", parts[1:]
        out.append("_".join([head] + rest))
    seen = {}
    unique = []
    for n in out:
        k = seen.get(n, 0)
        seen[n] = k + 1
        unique.append(n if k == 0 else f"{n}_{k}")
    return unique


def _state(mod):
    """(parameters [(fqn, tensor)], buffers [(fqn, tensor, persistent)]), each tensor once."""
    persistent = set(mod.state_dict(keep_vars=True))
    params = list(mod.named_parameters())
    seen = {id(t) for _, t in params}
    buffers = []
    for name, b in mod.named_buffers():
        if id(b) not in seen:
            seen.add(id(b))
            buffers.append((name, b, name in persistent))
    return params, buffers


_exporting = threading.local()


def exporting():
    """True while export captures on this thread (torch.compiler.is_exporting)."""
    return getattr(_exporting, "on", False)


def _capture_ir(mod, state, args, kwargs):
    """The Capture of mod(*args, **kwargs) with the state tensors as the first graph inputs."""
    def forward(state_tensors, call_args, call_kwargs):
        return mod(*call_args, **call_kwargs)
    _exporting.on = True
    try:
        _, cap = _capture.capture(forward, (state, tuple(args), dict(kwargs)), {}, fullgraph=True)
    except _capture.GraphBreakError as e:
        reason = str(e).replace("ts.compile(fullgraph=True): ", "").replace(" would break the graph", "")
        if reason.startswith("graph_break()"):
            raise ExportError(f"ts.export: {reason} cannot be exported: an exported program is one graph; remove the "
                              "graph_break() call (torch.export refuses it too)") from None
        raise ExportError(
            f"ts.export: {reason} cannot be exported: an exported program is one graph, and this reads a tensor's "
            "value into Python. Compute with tensor operations instead (ts.where for a branch on values, "
            "masks instead of indices read with .item()), or move the read out of forward") from None
    finally:
        _exporting.on = False
    collectives = sorted({n["op"] for n in cap.ir["nodes"] if n["op"].startswith("c10d::")})
    if collectives:
        raise ExportError(
            f"ts.export: forward calls the collective(s) {', '.join(collectives)}, which an exported program cannot "
            "run: its process group is not part of an archive. Export the model without its distributed wrapper "
            "(a DistributedDataParallel's .module)")
    return cap


def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict=False, preserve_module_call_signature=()):
    """Captures mod(*args, **kwargs) as one graph (torch.export.export).

    args: a tuple of example inputs; kwargs: a dict. dynamic_shapes: per input, {dim: Dim} (or a
    tuple with a Dim or None per dim), as a dict by forward's argument names or a tuple in call
    order. strict is accepted for PyTorch's signature: capture here is always by running the
    program (non-strict mode). The module's buffers and the example inputs are left as they were.
    """
    if not isinstance(mod, tessera.nn.Module):
        raise ValueError(f"Expected `mod` to be an instance of `tessera.nn.Module`, got {type(mod)}.")
    if not isinstance(args, tuple):
        raise ValueError(f"Expecting `args` to be a tuple of example positional inputs, got {type(args)}")
    kwargs = dict(kwargs or {})
    params, buffers = _state(mod)
    state = [t for _, t in params] + [b for _, b, _ in buffers]
    leaves, paths, in_spec = flatten((args, kwargs))
    leaf_specs = _dynamic._per_leaf(args, kwargs, dynamic_shapes, mod.forward)
    tensor_leaves = [i for i, x in enumerate(leaves) if isinstance(x, tessera.Tensor)]
    if leaf_specs is not None and len(leaf_specs) != len(tensor_leaves):
        raise AssertionError("ts.export: dynamic_shapes walk and flatten disagree")  # a bug, not user input
    symbols = _dynamic.Symbols(leaf_specs or [], [leaves[i] for i in tensor_leaves],
                               [paths[i] for i in tensor_leaves])

    # Buffers the program writes (batch norm's statistics in training) are restored afterwards:
    # exporting runs the program (once, or once per sample size with dynamic dims).
    saved = [(b, b.clone()) for _, b, _ in buffers]
    try:
        if len(symbols) == 0:
            cap = _capture_ir(mod, state, args, kwargs)
            ir, exprs = cap.ir, []
        else:
            caps = []

            def capture_at(sizes):
                moved = dict(zip(map(id, symbols.dims), sizes))
                new_leaves = list(leaves)
                for spec, i in zip(leaf_specs, tensor_leaves):
                    change = {d: moved[id(dim)] for d, dim in spec.items() if moved[id(dim)] != leaves[i].shape[d]}
                    if change:
                        new_leaves[i] = _dynamic.resized(leaves[i], change)
                from tessera.compiler._pytree import unflatten
                call_args, call_kwargs = unflatten(new_leaves, in_spec)
                c = _capture_ir(mod, state, call_args, call_kwargs)
                caps.append(c)
                return c.ir
            ir, exprs = _dynamic.fit(symbols, capture_at)
            cap = caps[0]
    finally:
        with tessera.no_grad():
            for b, copy in saved:
                b.copy_(copy)

    # The graph's inputs are the state tensors then the user's tensors (capture dedups by identity).
    n_state = len(state)
    if cap.input_positions[:n_state] != list(range(n_state)):
        raise ExportError("ts.export: a user input is also one of the module's parameters or buffers; pass a copy")
    user_positions = cap.input_positions[n_state:]
    user_leaf_of = {p: k for k, p in enumerate(user_positions)}
    user_paths = [paths[p - n_state] for p in user_positions]
    names = _user_input_names(mod, args, kwargs, user_paths)

    input_specs = []
    for fqn, _ in params:
        input_specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(_placeholder_name("p_", fqn)), fqn))
    for fqn, _, persistent in buffers:
        input_specs.append(InputSpec(InputKind.BUFFER, TensorArgument(_placeholder_name("b_", fqn)), fqn, persistent))
    constants = {}
    for k, _ in enumerate(ir["constants"]):
        target = f"lifted_tensor_{k}"
        constants[target] = cap.constants[k]
        input_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(f"c_{target}"), target))
    for name in names:
        input_specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(name)))

    output_specs = [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(f"output_{k}")) for k in range(len(ir["outputs"]))]
    extra_outputs = []
    for position, value_id in ir["mutated_inputs"]:
        if position < len(params):
            kind, target = OutputKind.PARAMETER_MUTATION, params[position][0]
        elif position < n_state:
            kind, target = OutputKind.BUFFER_MUTATION, buffers[position - len(params)][0]
        else:
            kind, target = OutputKind.USER_INPUT_MUTATION, names[position - n_state]
        output_specs.append(OutputSpec(kind, TensorArgument(f"{kind.value}_{len(extra_outputs)}"), target))
        extra_outputs.append(value_id)
    ir = dict(ir)
    ir["outputs"] = list(ir["outputs"]) + extra_outputs

    state_dict = {fqn: t for fqn, t in params}
    for fqn, b, persistent in buffers:
        (state_dict if persistent else constants)[fqn] = b

    # Per flattened argument leaf: the user input it feeds, or the constant the graph assumed.
    in_leaves = []
    for i, leaf in enumerate(leaves):
        p = i + n_state
        if isinstance(leaf, tessera.Tensor):
            in_leaves.append(("tensor", user_leaf_of[p]) if p in user_leaf_of else ("tensor", _dup_of(leaves, i, user_leaf_of, n_state)))
        else:
            in_leaves.append(("const", leaf))
    for kind, v in in_leaves:
        if kind == "const" and not isinstance(v, (type(None), bool, int, float, str)):
            raise ExportError(f"ts.export: an input of type {type(v).__name__} is neither a tensor nor a Python scalar")

    sym_of = {id(d): i for i, d in enumerate(symbols.dims)}
    input_dims, input_dtypes = [], []
    spec_by_leaf = dict(zip(tensor_leaves, leaf_specs or [{}] * len(tensor_leaves)))
    for p in user_positions:
        leaf = leaves[p - n_state]
        spec = spec_by_leaf.get(p - n_state, {})
        input_dims.append([{"sym": sym_of[id(spec[d])]} if d in spec else int(s) for d, s in enumerate(leaf.shape)])
        input_dtypes.append(str(leaf.dtype))
    # The graph was captured at sizes >= 2; its integers are affine in the dims, so it runs at size
    # 1 too (as PyTorch's exported programs accept 1 for a dim with min <= 1). Empty inputs (size
    # 0) are not served.
    symbol_json = [{"name": d.__name__, "min": max(d.min, 1), "max": d.max, "example": e}
                   for d, e in zip(symbols.dims, symbols.examples)]
    if len({s["name"] for s in symbol_json}) != len(symbol_json):
        raise ValueError("ts.export: two different Dims have the same name; give each dynamic dim its own name")

    folded = [(kind, v) for kind, v in cap.out_leaves]
    for kind, v in folded:
        if kind == "const" and not isinstance(v, (type(None), bool, int, float, str)):
            raise ExportError(f"ts.export: forward returned a {type(v).__name__}, neither a tensor nor a Python scalar")
    ep = ExportedProgram(ir, ExportGraphSignature(input_specs, output_specs), state_dict, constants, in_spec,
                         in_leaves, cap.out_spec, folded, symbol_json, input_dims, input_dtypes, exprs,
                         [_path_name(p) for p in user_paths])
    ep._example_inputs = (args, kwargs)
    return ep


def _dup_of(leaves, i, user_leaf_of, n_state):
    """The user input a repeated tensor argument stands for (the same object given twice)."""
    for j in range(i):
        if leaves[j] is leaves[i] and (j + n_state) in user_leaf_of:
            return user_leaf_of[j + n_state]
    raise ExportError("ts.export: a tensor argument could not be matched to a graph input")


def recapture_with(ep, decomp_table):
    """ep.run_decompositions(table): exports again a module that runs this program's graph with
    the table's functions in place of their operators (same dynamic dims)."""
    import copy
    from tessera.compiler._pytree import unflatten
    from tessera.export._program import _ExportedModule
    replay = copy.copy(ep)
    replay._modules = {}
    replay._decompositions = dict(decomp_table)
    dims = [_dynamic.Dim(s["name"], min=s["min"], max=s["max"]) for s in ep._symbols]
    per_leaf = [({d: dims[x["sym"]] for d, x in enumerate(ep._input_dims[v]) if not isinstance(x, int)}
                 if kind == "tensor" else None) for kind, v in ep._in_leaves]
    arg_specs, kwarg_specs = unflatten(per_leaf, ep._in_spec)
    args, kwargs = ep.example_inputs
    dynamic = tuple(arg_specs) + tuple(kwarg_specs.values()) if dims else None
    return export(_ExportedModule(replay), args, kwargs, dynamic_shapes=dynamic)
