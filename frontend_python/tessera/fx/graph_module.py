"""GraphModule: an nn.Module whose forward is Python code generated from a Graph."""
import math
import operator

import tessera
from tessera.nn.modules.module import Module


class GraphModule(Module):
    """Runs `graph`; `root` (a Module or a dict) provides the attributes get_attr nodes read."""

    def __init__(self, root, graph, class_name="GraphModule"):
        super().__init__()
        self._class_name = class_name
        for node in graph.nodes:
            if node.op != "get_attr":
                continue
            value = root[node.target] if isinstance(root, dict) else _get_qualified(root, node.target)
            setattr(self, node.target, value)
        self.graph = graph

    @property
    def graph(self):
        return self._graph

    @graph.setter
    def graph(self, g):
        self._graph = g
        self.recompile()

    @property
    def code(self):
        return self._code

    def recompile(self):
        """Regenerates `code` (and the forward that runs it) from `graph`."""
        self._graph.lint()
        self._code = self._graph.python_code("self")
        scope = {"tessera": tessera, "operator": operator, "math": math, "inf": math.inf, "nan": math.nan,
                 "device": tessera.device}  # repr(ts.device("cpu")) is "device(type='cpu')"
        scope.update(self._graph.code_globals)
        exec(compile(self._code, f"<{self._class_name} generated code>", "exec"), scope)  # noqa: S102
        self._forward = scope["forward"]

    def forward(self, *args):
        return self._forward(self, *args)

    def print_readable(self, print_output=True):
        text = f"class {self._class_name}(tessera.nn.Module):\n" + "".join(
            "    " + line + "\n" for line in self._code.splitlines())
        if print_output:
            print(text)
        return text

    def __repr__(self):
        return f"{self._class_name}()\n\n{self._code}"


def _get_qualified(root, name):
    obj = root
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj
