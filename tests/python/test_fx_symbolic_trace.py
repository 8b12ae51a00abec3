"""ts.fx.symbolic_trace, Tracer, Proxy, wrap, the graph-editing API, Interpreter and Transformer:
traced modules must compute what the eager modules compute, and record the nodes torch.fx
records for the same module written in torch."""
import operator

import pytest

import tessera as ts
from tessera import relu as imported_relu  # a name bound by from-import must be intercepted too

F = ts.nn.functional
nn = ts.nn

try:
    import torch
    import torch.fx  # noqa: F401
except ImportError:  # the comparisons with torch.fx are skipped without it
    torch = None


def scaled_sum(a, b):
    return a * 2 + b


ts.fx.wrap("scaled_sum")


def close(a, b, tol=1e-5):
    assert ts.allclose(a, b, atol=tol, rtol=tol), (a, b)


def signature(gm):
    """(op, target name) of each node, the form in which ts.fx and torch.fx graphs are compared."""
    out = []
    for n in gm.graph.nodes:
        t = n.target
        out.append((n.op, t if isinstance(t, str) else t.__name__))
    return out


# ---------------------------------------------------------------- modules, written for either library
def make_modules(lib):
    """The test modules over lib (tessera or torch): the same code, so their graphs must agree."""
    nn_, F_ = lib.nn, lib.nn.functional

    class MLP(nn_.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn_.Sequential(nn_.Linear(8, 16), nn_.ReLU(), nn_.Linear(16, 4))

        def forward(self, x):
            return F_.softmax(self.layers(x), dim=-1)

    class SmallCNN(nn_.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn_.Conv2d(3, 8, 3, padding=1)
            self.bn1 = nn_.BatchNorm2d(8)
            self.conv2 = nn_.Conv2d(8, 8, 3, padding=1)
            self.bn2 = nn_.BatchNorm2d(8)
            self.fc = nn_.Linear(8 * 4 * 4, 10)

        def forward(self, x):
            y = lib.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y)) + y  # the residual
            y = F_.max_pool2d(F_.relu(y), 2)
            return self.fc(y.flatten(1))

    class Block(nn_.Module):  # a user module: traced through, its conv a leaf
        def __init__(self):
            super().__init__()
            self.conv = nn_.Conv2d(4, 4, 1)
            self.scale = nn_.Parameter(lib.ones(4, 1, 1) * 0.5)

        def forward(self, x):
            return F_.relu(self.conv(x)) * self.scale + x

    class WithBlock(nn_.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.head = nn_.Linear(4, 2)

        def forward(self, x):
            y = self.block(x)
            n = y.size(0)
            y = y.view(n, 4, -1).transpose(1, 2)
            y = y.mean(dim=1)
            return self.head(y)[:, 0], y.shape[1]

    class Arith(nn_.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn_.Parameter(lib.randn(5, 3))
            self.register_buffer("offset", lib.arange(5.0))

        def forward(self, x, y):
            a, b = (x @ self.weight).chunk(2, dim=0)
            c = lib.cat([a, b], dim=1)
            d = (c - 1) / 2 + c ** 2 - (-c)
            return lib.sigmoid(d[..., 1:]) * y + self.offset

    return {"MLP": MLP, "SmallCNN": SmallCNN, "WithBlock": WithBlock, "Arith": Arith}


TS_MODULES = make_modules(ts)
INPUTS = {"MLP": lambda: (ts.randn(3, 8),), "SmallCNN": lambda: (ts.randn(2, 3, 8, 8),),
          "WithBlock": lambda: (ts.randn(2, 4, 3, 3),), "Arith": lambda: (ts.randn(4, 5), ts.randn(2, 5))}


def tree_close(a, b):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            tree_close(x, y)
    elif isinstance(a, ts.Tensor):
        close(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("name", sorted(TS_MODULES))
@pytest.mark.parametrize("training", [True, False])
def test_traced_module_computes_what_the_eager_module_computes(name, training):
    ts.manual_seed(0)
    m = TS_MODULES[name]()
    m.train(training)
    gm = ts.fx.symbolic_trace(m)
    assert isinstance(gm, ts.fx.GraphModule) and gm.training == training
    args = INPUTS[name]()
    if training:  # batch norm updates its running statistics: run eager and traced on copies of the state
        m2 = TS_MODULES[name]()
        m2.load_state_dict(m.state_dict())
        m2.train(True)
        tree_close(ts.fx.symbolic_trace(m2)(*args), m(*args))
        for (k, v), (k2, v2) in zip(m.state_dict().items(), m2.state_dict().items()):
            assert k == k2
            close(v.float(), v2.float())
    else:
        tree_close(gm(*args), m(*args))
    gm.graph.lint()
    compile(gm.code, "<code>", "exec")


@pytest.mark.skipif(torch is None, reason="torch is not importable")
@pytest.mark.parametrize("name", sorted(TS_MODULES))
def test_node_sequence_matches_torch_fx(name):
    torch_modules = make_modules(torch)
    ours = signature(ts.fx.symbolic_trace(TS_MODULES[name]()))
    theirs = signature(torch.fx.symbolic_trace(torch_modules[name]()))
    assert ours == theirs
    ours_names = [n.name for n in ts.fx.symbolic_trace(TS_MODULES[name]()).graph.nodes]
    theirs_names = [n.name for n in torch.fx.symbolic_trace(torch_modules[name]()).graph.nodes]
    assert ours_names == theirs_names


def test_node_kinds_and_targets():
    gm = ts.fx.symbolic_trace(TS_MODULES["WithBlock"]())
    by_name = {n.name: n for n in gm.graph.nodes}
    assert by_name["block_conv"].op == "call_module" and by_name["block_conv"].target == "block.conv"
    assert by_name["relu"].op == "call_function" and by_name["relu"].target is F.relu
    assert by_name["block_scale"].op == "get_attr" and by_name["block_scale"].target == "block.scale"
    assert by_name["size"].op == "call_method" and by_name["size"].args == (by_name["add"], 0)
    assert by_name["view"].args == (by_name["add"], by_name["size"], 4, -1)
    assert by_name["mean"].kwargs == {"dim": 1}
    assert by_name["getitem"].target is operator.getitem
    assert by_name["head"].users == {by_name["getitem"]: None}
    assert by_name["add"].all_input_nodes == [by_name["mul"], by_name["x"]]
    assert "self.block.conv(x)" in gm.code and "tessera.nn.functional.relu(block_conv)" in gm.code
    assert "view = add.view(size, 4, -1)" in gm.code and "getitem = head[:, 0]" in gm.code
    assert gm.block.scale is not None and isinstance(gm.block.conv, nn.Conv2d)


def test_sequential_numeric_names_and_buffers():
    m = TS_MODULES["SmallCNN"]().eval()
    gm = ts.fx.symbolic_trace(m)
    assert [n.target for n in gm.graph.nodes if n.op == "call_module"] == ["conv1", "bn1", "conv2", "bn2", "fc"]
    gm2 = ts.fx.symbolic_trace(TS_MODULES["MLP"]())
    assert 'getattr(self.layers, "0")' in gm2.code or "getattr(self.layers, '0')" in gm2.code
    arith = TS_MODULES["Arith"]()
    gm3 = ts.fx.symbolic_trace(arith)
    assert "offset" in dict(gm3.named_buffers()) and "weight" in dict(gm3.named_parameters())


class SlicesABuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", ts.arange(6.0))

    def forward(self, x):
        return x + self.table[1:4]


def test_a_buffer_read_directly_stays_a_buffer():
    # torch.fx slices the buffer eagerly into a constant here; reading it as get_attr keeps it live
    m = SlicesABuffer()
    gm = ts.fx.symbolic_trace(m)
    assert [(n.op, n.target) for n in gm.graph.nodes][1] == ("get_attr", "table")
    x = ts.randn(3)
    close(gm(x), x + ts.tensor([1.0, 2.0, 3.0]))
    gm.table.add_(1)
    close(gm(x), x + ts.tensor([2.0, 3.0, 4.0]))


def test_a_function_and_from_imported_names_trace():
    def f(x, y=3.0):
        return imported_relu(x) * y + ts.tanh(x).sum(dim=0, keepdim=True)
    gm = ts.fx.symbolic_trace(f)
    x = ts.randn(4, 3)
    close(gm(x), f(x))
    close(gm(x, 0.5), f(x, 0.5))
    assert [n.op for n in gm.graph.nodes][:2] == ["placeholder", "placeholder"]
    assert gm.graph.nodes[1].args == (3.0,)
    assert "def forward(self, x, y=3.0):" in gm.code
    assert imported_relu is ts.relu and ts.relu.__module__ == "tessera._generated_ops"  # patches undone


def test_tensor_constants_become_attributes():
    c = ts.tensor([1.0, 2.0, 3.0])

    def f(x):
        return x + c + ts.ones(3)
    gm = ts.fx.symbolic_trace(f)
    x = ts.randn(2, 3)
    close(gm(x), f(x))
    assert [n.target for n in gm.graph.nodes if n.op == "get_attr"] == ["_tensor_constant0", "_tensor_constant1"]


# ---------------------------------------------------------------- the graph API
def test_replacing_relu_with_gelu_changes_the_outputs():
    m = TS_MODULES["WithBlock"]().eval()
    gm = ts.fx.symbolic_trace(m)
    x = ts.randn(2, 4, 3, 3)
    before = gm(x)[0]
    close(before, m(x)[0])
    replaced = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is F.relu:
            with gm.graph.inserting_after(node):
                new = gm.graph.call_function(F.gelu, node.args, node.kwargs)
            node.replace_all_uses_with(new)
            gm.graph.erase_node(node)
            replaced += 1
    assert replaced == 1
    gm.graph.lint()
    gm.recompile()
    assert "tessera.nn.functional.gelu(block_conv)" in gm.code and "relu" not in gm.code
    after = gm(x)[0]
    # the same computation with gelu by hand
    y = F.gelu(m.block.conv(x)) * m.block.scale + x
    expected = m.head(y.view(2, 4, -1).transpose(1, 2).mean(dim=1))[:, 0]
    close(after, expected)
    assert not ts.allclose(after, before)


def test_graph_editing_inserting_dead_code_and_lint(capsys):
    mlp = TS_MODULES["MLP"]()
    gm = ts.fx.symbolic_trace(mlp)
    g = gm.graph
    out = g.nodes[-1]
    softmax = out.args[0]
    with g.inserting_before(out):
        doubled = g.call_function(operator.mul, (softmax, 2.0))
        neg = g.call_method("neg", (doubled,))
        g.call_module("layers.0", (g.nodes[0],))  # unused: dead code
        g.get_attr("layers.0.weight")  # unused: dead code
    out.args = (neg,)
    assert softmax.users == {doubled: None} and doubled.users == {neg: None}
    assert g.eliminate_dead_code()
    assert [n.op for n in g.nodes].count("call_module") == 3 and not g.find_nodes(op="get_attr")
    gm.recompile()
    x = ts.randn(2, 8)
    close(gm(x), mlp.layers(x).softmax(-1) * -2.0)
    assert "neg = mul.neg()" in gm.code
    gm.graph.print_tabular()
    text = capsys.readouterr().out
    assert "call_module" in text and "call_method" in text and "layers.0" in text
    g.erase_node(g.nodes[-1])  # the output
    bad = g.create_node("call_function", ts.exp, (neg,))
    g._nodes.insert(0, g._nodes.pop())  # move it before what it uses
    with pytest.raises(RuntimeError, match="before it is defined"):
        g.lint()
    with pytest.raises(RuntimeError, match="still has users"):
        g.erase_node(neg)
    assert bad.op == "call_function"


def test_graph_built_by_hand_with_every_op():
    root = nn.Module()
    root.lin = nn.Linear(3, 3)
    root.register_buffer("b", ts.ones(3))
    g = ts.fx.Graph()
    x = g.placeholder("x")
    k = g.placeholder("k", default_value=2)
    lin = g.call_module("lin", (x,))
    b = g.get_attr("b")
    s = g.call_function(ts.add, (lin, b), {"alpha": k})
    t = g.call_method("relu", (s,))
    g.output({"out": t, "pair": [t, x]})
    gm = ts.fx.GraphModule(root, g)
    v = ts.randn(4, 3)
    res = gm(v)
    close(res["out"], ts.add(root.lin(v), root.b, alpha=2).relu())
    assert res["pair"][1] is v
    assert "add = tessera.add(lin, b, alpha=k)" in gm.code
    interp = ts.fx.Interpreter(gm).run(v, 3)
    close(interp["out"], ts.add(root.lin(v), root.b, alpha=3).relu())


# ---------------------------------------------------------------- errors and specialisation
class Branchy(nn.Module):
    def forward(self, x, flag=True):
        if flag:
            return x + 1
        return x - 1


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


class Loops(nn.Module):
    def forward(self, x):
        return [v for v in x]


class Length(nn.Module):
    def forward(self, x):
        return x * len(x)


def test_control_flow_on_a_proxy_raises_trace_error():
    control_flow = "symbolically traced variables cannot be used as inputs to control flow"
    with pytest.raises(ts.fx.TraceError, match=control_flow):
        ts.fx.symbolic_trace(DataDependent())
    with pytest.raises(ts.fx.TraceError, match=control_flow):
        ts.fx.symbolic_trace(Branchy())
    with pytest.raises(ts.fx.TraceError, match="cannot be iterated"):
        ts.fx.symbolic_trace(Loops())
    with pytest.raises(RuntimeError, match="'len' is not supported in symbolic tracing"):
        ts.fx.symbolic_trace(Length())
    # every patch is undone after an error
    assert ts.relu.__module__ == "tessera._generated_ops" and not hasattr(F.relu, "_fx_original")
    assert "__call__" not in vars(nn.Linear) and nn.Module.__getattr__.__qualname__ == "Module.__getattr__"


def test_concrete_args_specialise():
    gm = ts.fx.symbolic_trace(Branchy(), concrete_args={"flag": False})
    x = ts.randn(3)
    close(gm(x), x - 1)
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [operator.sub]
    gm2 = ts.fx.symbolic_trace(Branchy(), concrete_args={"flag": True})
    close(gm2(x), x + 1)
    with pytest.raises(TypeError, match="concrete_args"):
        ts.fx.symbolic_trace(Branchy(), concrete_args={"nope": 1})


class UsesWrapped(nn.Module):
    def forward(self, x):
        return scaled_sum(x, ts.relu(x)) + 1


def test_wrapped_functions_are_call_function_leaves():
    gm = ts.fx.symbolic_trace(UsesWrapped())
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert calls == [ts.relu, scaled_sum, operator.add]
    assert "scaled_sum" in globals() and globals()["scaled_sum"] is scaled_sum  # the global is restored
    x = ts.randn(5)
    close(gm(x), x * 2 + x.relu() + 1)
    with pytest.raises(NotImplementedError, match="top level"):
        ts.fx.wrap("scaled_sum")


def test_unpacking_and_custom_tracer_leaves():
    class Leafy(ts.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return qualname == "block" or super().is_leaf_module(m, qualname)
    m = TS_MODULES["WithBlock"]().eval()
    graph = Leafy().trace(m)
    assert [n.target for n in graph.nodes if n.op == "call_module"] == ["block", "head"]
    gm = ts.fx.GraphModule(m, graph)
    x = ts.randn(2, 4, 3, 3)
    tree_close(gm(x), m(x))


# ---------------------------------------------------------------- Interpreter and Transformer
def test_interpreter_runs_node_by_node_and_can_be_overridden():
    m = TS_MODULES["SmallCNN"]().eval()
    gm = ts.fx.symbolic_trace(m)
    x = ts.randn(2, 3, 8, 8)
    close(ts.fx.Interpreter(gm).run(x), m(x))

    class Counting(ts.fx.Interpreter):
        def __init__(self, mod):
            super().__init__(mod)
            self.modules_called = []

        def call_module(self, target, args, kwargs):
            self.modules_called.append(target)
            return super().call_module(target, args, kwargs)

        def call_function(self, target, args, kwargs):
            if target in (ts.relu, F.relu):
                target = ts.sigmoid
            return super().call_function(target, args, kwargs)
    it = Counting(gm)
    res = it.run(x)
    assert it.modules_called == ["conv1", "bn1", "conv2", "bn2", "fc"]
    y = ts.sigmoid(m.bn1(m.conv1(x)))
    y = m.bn2(m.conv2(y)) + y
    close(res, m.fc(F.max_pool2d(ts.sigmoid(y), 2).flatten(1)))


def test_transformer_rewrites_the_graph():
    m = TS_MODULES["WithBlock"]().eval()
    gm = ts.fx.symbolic_trace(m)

    class ReluToGelu(ts.fx.Transformer):
        def call_function(self, target, args, kwargs):
            if target is F.relu:
                return super().call_function(F.gelu, args, kwargs)
            return super().call_function(target, args, kwargs)
    new = ReluToGelu(gm).transform()
    assert isinstance(new, ts.fx.GraphModule)
    assert F.gelu in [n.target for n in new.graph.nodes] and F.relu not in [n.target for n in new.graph.nodes]
    x = ts.randn(2, 4, 3, 3)
    y = F.gelu(m.block.conv(x)) * m.block.scale + x
    close(new(x)[0], m.head(y.view(2, 4, -1).transpose(1, 2).mean(dim=1))[:, 0])


class KeywordsAndDtypes(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, *, scale):
        y = self.fc(x.to(ts.float64).to(dtype=ts.float32)) * scale
        return {"y": y, "zeros": x.new_zeros(2, device=ts.device("cpu"))}


def test_keyword_only_arguments_dtypes_retracing_and_compiling():
    m = KeywordsAndDtypes()
    gm = ts.fx.symbolic_trace(m)
    assert "def forward(self, x, *, scale):" in gm.code and "x.to(tessera.float64)" in gm.code
    x = ts.randn(2, 4)
    close(gm(x, scale=3.0)["y"], m(x, scale=3.0)["y"])
    again = ts.fx.symbolic_trace(gm)  # a GraphModule retraces to the same graph
    assert signature(again) == signature(gm)
    close(again(x, scale=0.5)["y"], m(x, scale=0.5)["y"])
    traced = ts.fx.symbolic_trace(TS_MODULES["MLP"]())
    v = ts.randn(3, 8)
    expected = traced(v)
    close(ts.compile(traced, backend="eager")(v), expected)
