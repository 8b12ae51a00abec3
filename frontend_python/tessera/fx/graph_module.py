"""GraphModule: an nn.Module whose forward is Python code generated from a Graph."""
import math
import operator

import tessera
from tessera.nn.modules.module import Module


class GraphModule(Module):
    """Runs `graph`; `root` (a Module or a dict) provides the submodules call_module nodes call
    and the attributes get_attr nodes read, copied under the same qualified names."""

    def __init__(self, root, graph, class_name="GraphModule"):
        super().__init__()
        if isinstance(root, Module):
            self.training = root.training
            if class_name == "GraphModule":
                class_name = type(root).__name__
        self._class_name = class_name
        for node in graph.nodes:
            if node.op not in ("get_attr", "call_module"):
                continue
            if isinstance(root, dict):
                if node.target not in root:
                    raise RuntimeError(f"GraphModule: node '{node.name}' reads '{node.target}', which the dict lacks")
                _set_qualified(self, node.target, root[node.target])
            else:
                _copy_attr(root, self, node.target)
        self.graph = graph

    @property
    def graph(self):
        return self._graph

    @graph.setter
    def graph(self, g):
        self._graph = g
        g.owning_module = self
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

    def forward(self, *args, **kwargs):
        return self._forward(self, *args, **kwargs)

    def print_readable(self, print_output=True):
        text = f"class {self._class_name}(tessera.nn.Module):\n" + "".join(
            "    " + line + "\n" for line in self._code.splitlines())
        if print_output:
            print(text)
        return text

    def add_submodule(self, target, module):
        """Installs module at the dotted path target, making empty parents as needed."""
        _set_qualified(self, target, module)
        return True

    def delete_all_unused_submodules(self):
        """Drops the submodules no call_module or get_attr node refers to."""
        used = set()
        for node in self._graph.nodes:
            if node.op in ("call_module", "get_attr"):
                parts = node.target.split(".")
                used.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
        for name, _ in reversed(list(self.named_modules())):
            if name and name not in used and "." not in name:
                delattr(self, name)

    def __repr__(self):
        return f"{self._class_name}()\n\n{self._code}"


def _get_qualified(root, name):
    obj = root
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _set_qualified(to, qualname, value):
    *path, field = qualname.split(".")
    for part in path:
        sub = getattr(to, part, None)
        if sub is None:
            sub = Module()
            setattr(to, part, sub)
        to = sub
    setattr(to, field, value)


def _copy_attr(src, dst, qualname):
    """Copies src's attribute at qualname to dst, making empty Modules for parents that dst
    lacks; a tensor that was a buffer stays a buffer."""
    *path, field = qualname.split(".")
    for part in path:
        s = getattr(src, part)
        d = getattr(dst, part, None)
        if d is s:  # the whole parent is already installed
            return
        if d is None:
            d = Module()
            setattr(dst, part, d)
        src, dst = s, d
    value = getattr(src, field)
    if isinstance(src, Module) and field in src._buffers and isinstance(dst, Module):
        dst.register_buffer(field, value, persistent=field not in src._non_persistent_buffers_set)
    else:
        setattr(dst, field, value)
