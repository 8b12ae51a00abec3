"""ts.compiler.explain(fn)(*args): what compiling fn does on these arguments — the graphs, the
graph breaks with their reasons and source lines, and the guards — without keeping anything."""
from tessera.compiler import _guards
from tessera.compiler._compiled import CompiledFunction


class ExplainOutput:
    def __init__(self, graphs, break_reasons, guards, ops_per_graph):
        self.graphs = graphs
        self.graph_count = len(graphs)
        self.break_reasons = break_reasons
        self.graph_break_count = len(break_reasons)
        self.out_guards = guards
        self.ops_per_graph = ops_per_graph

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {sum(len(ops) for ops in self.ops_per_graph)}", "Break Reasons:"]
        for k, (reason, where) in enumerate(self.break_reasons, 1):
            plain = reason.startswith("Tensor.")
            lines.append(f"  Break Reason {k}: {'data-dependent ' + reason if plain else reason}")
            lines.append(f"    at {where}")
        lines.append("Ops per Graph:")
        for k, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"  Graph {k}: " + ", ".join(ops))
        lines.append("Guards:")
        lines.extend("  " + g for g in self.out_guards)
        return "\n".join(lines)

    __repr__ = __str__


def explain(fn):
    """Returns a function that runs fn once under capture and reports an ExplainOutput."""
    def run(*args, **kwargs):
        compiled = CompiledFunction(fn, backend="eager")
        compiled(*args, **kwargs)
        graphs, ops, guards = [], [], []
        for key, entry in compiled.entries:
            guards.extend(_guards.describe(key, entry.paths))
            if entry.eager:
                continue
            if entry.segmented:  # one graph per piece between the reads
                from tessera.fx._from_ir import graph_module_from_ir
                modules = [graph_module_from_ir(step.ir, step.constants) for step in entry.run.pieces()
                           if step.ir["nodes"]]
            else:
                modules = [entry.capture.graph_module]
            for gm in modules:
                graphs.append(gm)
                ops.append([n.format_target() for n in gm.graph.nodes if n.op == "call_function"])
        return ExplainOutput(graphs, list(compiled.graph_breaks), guards, ops)
    return run
