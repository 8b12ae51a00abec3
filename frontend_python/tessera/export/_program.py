"""ExportedProgram: one captured graph of primitives with its signature, weights and dynamic
dims; `module()` runs it as a Module, the archive (_archive.py) stores it, and the C++ runtime
(export/runtime) runs the same graph without Python."""
import copy
import json
import threading

import tessera
from tessera.compiler._pytree import LEAF, Spec, flatten, unflatten
from tessera.export import _dynamic
from tessera.export._signature import ExportGraphSignature, InputKind, OutputKind
from tessera.fx._from_ir import graph_module_from_ir
from tessera.fx.graph_module import _get_qualified

PROGRAM_FORMAT = "tessera.exported_program"
PROGRAM_VERSION = 1


def spec_to_json(spec):
    if spec.kind == "leaf":
        return "*"
    out = {"kind": spec.kind, "children": [spec_to_json(c) for c in spec.children]}
    if spec.kind == "dict":
        out["keys"] = list(spec.meta)
    return out


def spec_from_json(j):
    if j == "*":
        return LEAF
    children = tuple(spec_from_json(c) for c in j["children"])
    return Spec(j["kind"], tuple(j["keys"]) if j["kind"] == "dict" else None, children)


class ExportedProgram:
    """What ts.export.export returns (torch.export.ExportedProgram's names).

    graph_signature: which graph input is a parameter, buffer, constant or user input, and which
    output is a user output or a buffer's new contents. state_dict: parameters and persistent
    buffers; constants: lifted tensors and non-persistent buffers. range_constraints: the
    dynamic dims, name -> (min, max). module(): a Module that runs the graph."""

    def __init__(self, ir, signature, state_dict, constants, in_spec, in_leaves, out_spec, out_leaves,
                 symbols=(), input_dims=(), input_dtypes=(), sym_exprs=(), input_paths=()):
        self._ir = ir                       # the "tessera.graph" dict: inputs = state then user inputs
        self.graph_signature = signature
        self.state_dict = state_dict
        self.constants = constants
        self._in_spec = in_spec             # Spec of (args, kwargs)
        self._in_leaves = in_leaves         # per leaf: ("tensor", k) for user input k, ("const", value)
        self._out_spec = out_spec
        self._out_leaves = out_leaves       # per leaf: ("graph", k) or ("const", value)
        self._symbols = list(symbols)       # [{"name", "min", "max"}]
        self._input_dims = [list(d) for d in input_dims]  # per user input: int or {"sym": i}
        self._input_dtypes = list(input_dtypes)
        self._input_paths = list(input_paths)
        self._sym_exprs = [(list(p), e) for p, e in sym_exprs]
        self._modules = {}
        self._lock = threading.Lock()
        self._aot = None      # ahead-of-time kernels (aot_compile, or an archive's)
        self._native = {}     # sizes -> inductor handle of usable AOT kernels (load(allow_native=True))

    @property
    def native(self):
        """True when calls at some sizes run the archive's ahead-of-time kernels."""
        return bool(self._native)

    # --- what PyTorch's ExportedProgram shows -------------------------------------------------
    @property
    def range_constraints(self):
        return {s["name"]: (s["min"], s["max"]) for s in self._symbols}

    @property
    def graph_module(self):
        """The graph with every input lifted: parameters, buffers, constants, then user inputs."""
        sig = self.graph_signature
        n_user = len(sig.user_inputs)
        n_state = len(self._ir["inputs"]) - n_user
        ir = dict(self._ir)
        ir["inputs"] = self._ir["inputs"][:n_state] + self._ir["constants"] + self._ir["inputs"][n_state:]
        ir["constants"] = []
        lifted = [s for s in sig.input_specs if s.kind != InputKind.CONSTANT_TENSOR]
        consts = [s for s in sig.input_specs if s.kind == InputKind.CONSTANT_TENSOR]
        names = [s.arg.name for s in lifted[:n_state]] + [s.arg.name for s in consts] + \
                [s.arg.name for s in lifted[n_state:]]
        return graph_module_from_ir(ir, [], input_names=names)

    @property
    def graph(self):
        return self.graph_module.graph

    @property
    def example_inputs(self):
        return getattr(self, "_example_inputs", None)

    def operators(self):
        """The full names of the operators the graph calls, sorted."""
        return sorted({n["op"] for n in self._ir["nodes"]})

    def __str__(self):
        code = self.graph_module.code
        ranges = "".join(f"\n  {n}: [{lo}, {hi}]" for n, (lo, hi) in self.range_constraints.items())
        return (f"ExportedProgram:\n{code}\nGraph signature:\n{self.graph_signature}\n"
                f"Range constraints: {ranges or '{}'}\n")

    __repr__ = __str__

    def run_decompositions(self, decomp_table=None):
        """The program with the operators in `decomp_table` (OpOverload -> function of the same
        arguments) replaced by what the function calls, recaptured. The graph already holds
        primitives only (every composite decomposes during capture), so with no table it is a
        copy of this program."""
        if not decomp_table:
            return copy.copy(self)
        from tessera.export._export import recapture_with
        return recapture_with(self, decomp_table)

    # --- running ------------------------------------------------------------------------------
    def module(self):
        """A Module holding the parameters and buffers under their original names, whose forward
        checks its inputs against the signature and runs the graph."""
        return _ExportedModule(self)

    def _check_inputs(self, args, kwargs):
        """The user input tensors of a call, and the sizes of the dynamic dims."""
        leaves, _, spec = flatten((tuple(args), dict(kwargs)))
        if spec != self._in_spec:
            raise TypeError(f"ExportedProgram: the call's arguments do not have the exported structure: expected "
                            f"{_describe_spec(self._in_spec)}, got {_describe_spec(spec)}")
        tensors = []
        sizes = [None] * len(self._symbols)
        for leaf, (kind, v) in zip(leaves, self._in_leaves):
            if kind == "const":
                if not (leaf is v or leaf == v):
                    raise ValueError(f"ExportedProgram: a non-tensor input was {v!r} at export (the graph is "
                                     f"specialised to it), got {leaf!r}")
                continue
            where = self._input_paths[v] if v < len(self._input_paths) else f"input {v}"
            if not isinstance(leaf, tessera.Tensor):
                raise TypeError(f"ExportedProgram: expected a Tensor for {where}, got {type(leaf).__name__}")
            if str(leaf.dtype) != self._input_dtypes[v]:
                raise ValueError(f"ExportedProgram: expected {where} of dtype {self._input_dtypes[v]}, got {leaf.dtype}")
            dims = self._input_dims[v]
            if leaf.dim() != len(dims):
                raise ValueError(f"ExportedProgram: expected {where} of rank {len(dims)} (shape {_shape_text(dims, self._symbols)}), "
                                 f"got rank {leaf.dim()} (shape {list(leaf.shape)})")
            for d, (want, got) in enumerate(zip(dims, leaf.shape)):
                if isinstance(want, int):
                    if want != got:
                        raise ValueError(f"ExportedProgram: expected {where}.shape[{d}] == {want} (a static dim), "
                                         f"got {got}")
                    continue
                sym = self._symbols[want["sym"]]
                if not sym["min"] <= got <= sym["max"]:
                    raise ValueError(f"ExportedProgram: expected {where}.shape[{d}] (dim '{sym['name']}') in "
                                     f"[{sym['min']}, {sym['max']}], got {got}")
                prior = sizes[want["sym"]]
                if prior is not None and prior != got:
                    raise ValueError(f"ExportedProgram: dim '{sym['name']}' is {prior} in an earlier input and {got} "
                                     f"at {where}.shape[{d}]; inputs sharing a Dim must agree")
                sizes[want["sym"]] = got
            tensors.append(leaf)
        return tensors, tuple(sizes)

    def _graph_for(self, sizes):
        with self._lock:
            gm = self._modules.get(sizes)
            if gm is None:
                ir = _dynamic.specialise(self._ir, self._sym_exprs, sizes) if self._sym_exprs else self._ir
                consts = [self.constants[s.target] for s in self.graph_signature.input_specs
                          if s.kind == InputKind.CONSTANT_TENSOR]
                gm = graph_module_from_ir(ir, consts)
                table = getattr(self, "_decompositions", None)
                if table:  # run_decompositions: the table's functions replace their operators
                    for node in gm.graph.nodes:
                        if node.op == "call_function" and node.target in table:
                            node.target = table[node.target]
                    gm.recompile()
                self._modules[sizes] = gm
            return gm

    def _call(self, state, args, kwargs):
        tensors, sizes = self._check_inputs(args, kwargs)
        handle = self._native.get(sizes)
        if handle is not None:  # the archive's kernels, built for exactly these sizes
            from tessera import _C
            consts = [self.constants[s.target] for s in self.graph_signature.input_specs
                      if s.kind == InputKind.CONSTANT_TENSOR]
            outs = _C.call_op("inductor::run", (handle, [*state, *tensors, *consts]), {})
        else:
            gm = self._graph_for(sizes)
            outs = gm(*state, *tensors)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        n_user = len([s for s in self.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT])
        return outs[:n_user], outs[n_user:]

    def _fold(self, graph_outs):
        leaves = [graph_outs[v] if kind == "graph" else v for kind, v in self._out_leaves]
        return unflatten(leaves, self._out_spec)

    # --- the serialised form (the archive's program.json) -------------------------------------
    def program_json(self):
        return {
            "format": PROGRAM_FORMAT, "version": PROGRAM_VERSION,
            "signature": self.graph_signature.to_json(),
            "in_spec": spec_to_json(self._in_spec),
            "in_leaves": [[k, v] for k, v in self._in_leaves],
            "out_spec": spec_to_json(self._out_spec),
            "out_leaves": [[k, v] for k, v in self._out_leaves],
            "symbols": self._symbols,
            "inputs": [{"path": p, "dtype": dt, "dims": dims}
                       for p, dt, dims in zip(self._input_paths, self._input_dtypes, self._input_dims)],
            "symbolic_ints": [{"path": p, "expr": e} for p, e in self._sym_exprs],
        }

    @classmethod
    def from_json(cls, ir, program, state_dict, constants):
        if program.get("format") != PROGRAM_FORMAT or program.get("version") != PROGRAM_VERSION:
            raise ValueError(f"ExportedProgram: expected '{PROGRAM_FORMAT}' version {PROGRAM_VERSION}, got "
                             f"{program.get('format')!r} version {program.get('version')!r}")
        for leaf in program["in_leaves"] + program["out_leaves"]:
            if leaf[0] not in ("tensor", "graph", "const"):
                raise ValueError(f"ExportedProgram: unknown leaf kind {leaf[0]!r}")
        return cls(ir, ExportGraphSignature.from_json(program["signature"]), state_dict, constants,
                   spec_from_json(program["in_spec"]), [tuple(x) for x in program["in_leaves"]],
                   spec_from_json(program["out_spec"]), [tuple(x) for x in program["out_leaves"]],
                   program["symbols"], [i["dims"] for i in program["inputs"]],
                   [i["dtype"] for i in program["inputs"]],
                   [(s["path"], s["expr"]) for s in program["symbolic_ints"]],
                   [i["path"] for i in program["inputs"]])

    def ir_text(self):
        return json.dumps(self._ir, separators=(",", ":"))


def _shape_text(dims, symbols):
    return "[" + ", ".join(str(d) if isinstance(d, int) else symbols[d["sym"]]["name"] for d in dims) + "]"


def _describe_spec(spec):
    if spec.kind == "leaf":
        return "*"
    inner = ", ".join(_describe_spec(c) for c in spec.children)
    if spec.kind == "dict":
        inner = ", ".join(f"{k!r}: {_describe_spec(c)}" for k, c in zip(spec.meta, spec.children))
        return "{" + inner + "}"
    return ("(" if spec.kind == "tuple" else "[") + inner + (")" if spec.kind == "tuple" else "]")


def _set_qualified(root, fqn, value, kind, persistent=True):
    *path, name = fqn.split(".")
    m = root
    for part in path:
        child = m._modules.get(part)
        if child is None:
            child = tessera.nn.Module()
            m.add_module(part, child)
        m = child
    if kind == InputKind.PARAMETER:
        m.register_parameter(name, value if isinstance(value, tessera.nn.Parameter) else tessera.nn.Parameter(value))
    else:
        m.register_buffer(name, value, persistent=persistent)


class _ExportedModule(tessera.nn.Module):
    """ep.module(): the parameters and buffers under their original names; forward runs the graph
    and writes buffer mutations back."""

    def __init__(self, ep):
        super().__init__()
        object.__setattr__(self, "_ep", ep)
        state_specs = [s for s in ep.graph_signature.input_specs if s.kind in (InputKind.PARAMETER, InputKind.BUFFER)]
        for s in state_specs:
            value = ep.state_dict.get(s.target) if s.persistent is not False else ep.constants.get(s.target)
            if value is None:
                value = ep.state_dict.get(s.target, ep.constants.get(s.target))
            _set_qualified(self, s.target, value, s.kind, persistent=s.persistent is not False)
        object.__setattr__(self, "_state_targets", [s.target for s in state_specs])
        mutation_targets = {}
        for s in ep.graph_signature.output_specs:
            if s.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION):
                mutation_targets[len(mutation_targets)] = ("state", s.target)
            elif s.kind == OutputKind.USER_INPUT_MUTATION:
                mutation_targets[len(mutation_targets)] = ("input", s.target)
        object.__setattr__(self, "_mutations", mutation_targets)

    def forward(self, *args, **kwargs):
        ep = self._ep
        state = [_get_qualified(self, t) for t in self._state_targets]
        user, mutated = ep._call(state, args, kwargs)
        # Write back what the graph wrote: the graph returns new values for mutated buffers.
        for k, value in enumerate(mutated):
            kind, target = self._mutations[k]
            if kind == "state":
                dest = _get_qualified(self, target)
                if dest is not value:
                    with tessera.no_grad():
                        dest.copy_(value)
        return ep._fold(user)
