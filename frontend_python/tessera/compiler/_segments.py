"""Graph breaks compiled around, as torch.compile does: a read of tensor data into Python
(`item()`, `bool(t)`, `int(t)`, `tolist()`) cuts the captured graph there. The pieces are
compiled one by one; at a replay each piece runs, the value is read from its result exactly
as the function read it, and it is guarded on: the value the capture saw continues with the
graph captured after it, and another value captures the function again (a new branch, kept
beside the first, so `if x.sum() > 0:` ends with two compiled continuations).

Why re-running is safe: a capture is cut only when no piece writes a tensor it did not make
itself (no input, parameter or buffer, no tensor of an earlier piece), so a function run again
from the start after a miss computes the same thing once more and changes nothing twice, and
no tensor read changes after its read. Captures that write such a tensor, print, or convert to
NumPy keep running eagerly for their guards (compiler/README.md, "Graph breaks")."""
from tessera.compiler._pytree import unflatten
from tessera.fx._from_ir import arg_tensor_ids, output_ids, tensor_ids


class ValueGuardMiss(Exception):
    """A replay read a value no compiled continuation was captured for."""

    def __init__(self, step, value):
        super().__init__(f"{step.what} read {value!r}")
        self.step = step
        self.value = value


class ReadPoint:
    """One data read seen during a capture: what was called, on which value, after how many
    recorded nodes, where in the user's code, and the value Python got."""
    __slots__ = ("what", "value_id", "mark", "where", "value")

    def __init__(self, what, value_id, mark, where, value):
        self.what, self.value_id, self.mark, self.where, self.value = what, value_id, mark, where, value


def read_value(tensor, what):
    """The value a replay reads, as the function read it (graph_break(): none)."""
    if what == "graph_break":
        return None
    return tensor.item() if what == "item" else tensor.tolist()


def guard_key(value):
    """A hashable form of a read value that tells True, 1 and 1.0 apart (Python branches on
    the type too: `isinstance`, integer division)."""
    if isinstance(value, list):
        return tuple(guard_key(v) for v in value)
    return (type(value), value)


def _written(node):
    return [i for k in node.get("mutates", []) for i in arg_tensor_ids(node["args"][k])]


def _root(values, vid):
    while values[vid].get("alias_of", -1) >= 0:
        vid = values[vid]["alias_of"]
    return vid


def split(ir, points):
    """The captured graph cut at its reads: a list of len(points) + 1 pieces, each a dict with
    its nodes, the ids it takes from earlier pieces or the inputs, the constants it reads, and
    the ids later pieces need from it. A string says why it cannot be cut."""
    nodes, values = ir["nodes"], ir["values"]
    bounds = [p.mark for p in points] + [len(nodes)]
    starts = [0] + bounds[:-1]
    made_in = {}
    for k, (a, b) in enumerate(zip(starts, bounds)):
        for node in nodes[a:b]:
            for vid in output_ids(node):
                made_in[vid] = k
    given = set(ir["inputs"])
    constants = set(ir["constants"])
    for k, p in enumerate(points):
        held = p.value_id is None or p.value_id in given or p.value_id in constants
        if not held and made_in.get(p.value_id, k + 1) > k:
            return f"Tensor.{p.what}() at {p.where} reads a value the graph does not hold"
    pieces = []
    for k, (a, b) in enumerate(zip(starts, bounds)):
        piece_nodes = nodes[a:b]
        # Pieces that run again after a miss must not write what they did not make; nor may the
        # last (the tensors read must keep the values read).
        for node in piece_nodes:
            for vid in _written(node):
                if made_in.get(_root(values, vid)) != k:
                    return f"{node['op']} writes a tensor made outside its piece of the graph"
        made = {vid for node in piece_nodes for vid in output_ids(node)}
        used = {vid for node in piece_nodes for vid in tensor_ids(node)} - made
        pieces.append({"nodes": piece_nodes, "made": made,
                       "inputs": sorted(v for v in used if v not in constants),
                       "constants": sorted(v for v in used if v in constants)})
    needed_later = set(ir["outputs"])
    for k in range(len(pieces) - 1, -1, -1):
        if k < len(points) and points[k].value_id is not None:
            needed_later.add(points[k].value_id)
        pieces[k]["outputs"] = sorted(pieces[k]["made"] & needed_later)
        needed_later |= set(pieces[k]["inputs"])
    return pieces


def cut(capture):
    """The capture's pieces (split), or a string saying why it cannot be cut at its reads."""
    if capture.read_points is None:
        return "a read that cannot be replayed (printing, numpy, autograd or an operator's own read)"
    return split(capture.ir, capture.read_points)


def piece_ir(ir, piece):
    """The serialisable graph of one piece (value ids kept; the ids it takes become inputs)."""
    values = list(ir["values"])
    for vid in piece["inputs"]:
        values[vid] = {**values[vid], "kind": "input", "alias_of": -1}
    return {**ir, "nodes": piece["nodes"], "inputs": piece["inputs"], "constants": piece["constants"],
            "outputs": piece["outputs"], "mutated_inputs": [], "values": values}


class Step:
    """One piece of a segmented graph and what follows it: the read at its end and one
    continuation per value read so far, or, for the last piece, how the result folds."""
    __slots__ = ("ir", "constants", "lifted", "run", "what", "value_id", "where", "children", "values_seen",
                 "result")

    def __init__(self, ir, constants, lifted):
        self.ir = ir
        self.constants = constants
        self.lifted = lifted  # the capture's lifted tensors by id: a read or a result may be one
        self.run = None  # compiled on first use, with that call's tensors as examples
        self.what = self.value_id = self.where = None
        self.children = {}     # guard_key(value read) -> the step that follows
        self.values_seen = []  # those values, for messages
        self.result = None  # (graph output ids, out_spec, out_leaves) on the last piece

    def add_child(self, value, step):
        self.children[guard_key(value)] = step
        self.values_seen.append(value)


class SegmentedGraph:
    """A compiled function whose capture read tensor data: a tree of compiled pieces, branching
    on the values read. `compile_piece(step, example_inputs)` compiles one piece (a callable of
    its input tensors returning its outputs)."""

    def __init__(self, capture, pieces, compile_piece):
        """`pieces`: cut(capture), a list."""
        self._compile_piece = compile_piece
        self.input_ids = capture.ir["inputs"]
        self.variants = 1
        self._live = {}  # step -> ids it and its continuations read (_live_from)
        self.root = self._chain(capture, pieces, 0)


    def _chain(self, capture, pieces, first):
        """The steps of pieces[first:], linked; returns the first."""
        ir, points = capture.ir, capture.read_points
        by_id = dict(zip(ir["constants"], capture.constants))
        head = prev = None
        for k in range(first, len(pieces)):
            step = Step(piece_ir(ir, pieces[k]), [by_id[v] for v in pieces[k]["constants"]], by_id)
            if k < len(points):
                p = points[k]
                step.what, step.value_id, step.where = p.what, p.value_id, p.where
            else:
                step.result = (list(ir["outputs"]), capture.out_spec, capture.out_leaves)
            if prev is None:
                head = step
            else:
                prev.add_child(points[k - 1].value, step)
            prev = step
        return head

    def __call__(self, *inputs):
        env = dict(zip(self.input_ids, inputs))
        step = self.root
        while True:
            piece = step.ir
            if piece["outputs"]:  # a piece nobody reads from (all its work dead) is skipped
                args = [env[i] for i in piece["inputs"]]
                if step.run is None:
                    step.run = self._compile_piece(step, args)
                env.update(zip(piece["outputs"], step.run(*args)))
            if step.result is not None:
                ids, spec, leaves = step.result
                lifted = step.lifted
                return unflatten([(env[ids[x]] if ids[x] in env else lifted[ids[x]]) if kind == "graph" else x
                                  for kind, x in leaves], spec)
            vid = step.value_id
            value = None if vid is None else read_value(env[vid] if vid in env else step.lifted[vid], step.what)
            following = step.children.get(guard_key(value))
            if following is None:
                raise ValueGuardMiss(step, value)
            step = following
            # Tensors no later piece reads are let go now (as a graph releases after last use).
            live = self._live.get(step) or self._live_from(step)
            env = {i: t for i, t in env.items() if i in live}

    def _live_from(self, step):
        """The value ids `step` and every continuation after it read (memoised until a variant
        is added)."""
        live = set(step.ir["inputs"])
        if step.result is not None:
            live.update(step.result[0])
        if step.value_id is not None:
            live.add(step.value_id)
        for child in step.children.values():
            live |= self._live.get(child) or self._live_from(child)
        self._live[step] = live
        return live

    def add_variant(self, capture, miss):
        """Adds the continuation a new capture took after `miss`. False when the capture does
        not retrace the pieces before the miss (a function that is not deterministic in its
        guards and the values read), which then stays uncompiled for that value."""
        self.variants += 1
        self._live = {}
        pieces = cut(capture)
        if isinstance(pieces, str) or capture.ir["inputs"] != self.input_ids:
            return False
        points = capture.read_points
        step, trail, depth = self.root, [], 0
        while True:
            if depth >= len(points) or step.result is not None or pieces[depth]["nodes"] != step.ir["nodes"]:
                return False
            trail.append((step, pieces[depth]))
            if step is miss.step:
                break
            step = step.children.get(guard_key(points[depth].value))
            depth += 1
            if step is None:
                return False
        if guard_key(points[depth].value) != guard_key(miss.value):
            return False  # the value moved between the replay and the capture (random operators)
        # The new continuation may need values the shared pieces did not return: they return
        # the union, and compile again on next use.
        for shared, piece in trail:
            wanted = sorted(set(shared.ir["outputs"]) | set(piece["outputs"]))
            if wanted != shared.ir["outputs"]:
                shared.ir = {**shared.ir, "outputs": wanted}
                shared.run = None
        miss.step.add_child(miss.value, self._chain(capture, pieces, depth + 1))
        return True

    def pieces(self):
        """The steps of the first variant, in order (for explain)."""
        step, out = self.root, []
        while step is not None:
            out.append(step)
            step = next(iter(step.children.values()), None) if step.result is None else None
        return out
