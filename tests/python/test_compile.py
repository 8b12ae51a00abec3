"""ts.compile: capture (the tracer plugin), guards and recompiles, graph breaks, explain, the
backend protocol, and the inductor compiler plugin (fused C++ kernels, the on-disk cache and
its faults). The oracle is Tessera eager (itself checked against NumPy and PyTorch elsewhere):
a compiled function must compute what the same function computes uncompiled."""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from conftest import BUILD_PYTHON, to_np
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera as ts
import tessera.nn.functional as F
from tessera.compiler import _plugin_backend as _inductor


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    # Small test graphs often fuse nothing; they run compiled all the same (one test checks the default).
    monkeypatch.setattr(ts.compiler.config, "eager_when_nothing_fuses", False)


def close(a, b, atol=1e-6, rtol=1e-5):
    np.testing.assert_allclose(to_np(a), to_np(b), atol=atol, rtol=rtol)


def chain(x, y):
    a = x * y
    b = a + x
    c = ts.sin(b)
    d = c * y
    e = d + 1.0
    f = ts.exp(e)
    g = ts.clamp(f, 0.0, 4.0)
    h = g - x
    return ts.tanh(h)


# ---------------------------------------------------------------- capture and the graph
def test_capture_records_primitives_after_composites_decompose():
    lin = ts.nn.Linear(8, 4)
    out = ts.compiler.explain(lambda x: F.gelu(lin(x)))(ts.randn(3, 8))
    ops = out.ops_per_graph[0]
    assert out.graph_count == 1 and out.graph_break_count == 0
    assert not any("linear" in op for op in ops), ops  # linear is a composite: it decomposed
    assert "tessera.ops.aten.gelu.default" in ops


def test_eager_backend_matches_eager_and_reuses_the_graph():
    calls = []

    def backend(gm, example_inputs):
        calls.append((gm, [tuple(t.shape) for t in example_inputs]))
        return gm.forward

    c = ts.compile(chain, backend=backend)
    x, y = ts.randn(4, 3), ts.randn(3)
    for _ in range(3):
        close(c(x, y), chain(x, y))
    assert len(calls) == 1 and calls[0][1] == [(4, 3), (3,)]
    assert isinstance(calls[0][0], ts.fx.GraphModule)
    assert "tessera.ops.aten.sin.default" in calls[0][0].code


def test_size_change_recompiles_and_names_the_guard():
    c = ts.compile(chain, backend="eager")
    c(ts.randn(4, 3), ts.randn(3))
    x = ts.randn(5, 3)
    y = ts.randn(3)
    close(c(x, y), chain(x, y))
    assert c.recompile_reasons == ["args[0]: tensor size changed from [4, 3] to [5, 3]; sizes are dynamic from now on"]


def test_dtype_and_python_scalar_changes_recompile_with_the_new_values():
    def f(x, k):
        return x * k
    c = ts.compile(f, backend="eager")
    x = ts.randn(4)
    close(c(x, 2), x * 2)
    close(c(x, 3), x * 3)  # not the constant 2 baked into the first graph
    close(c(x.double(), 3), x.double() * 3)
    assert c.recompile_reasons[0] == "args[1] changed value from 2 to 3"
    assert "dtype changed" in c.recompile_reasons[1]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_autocast_regions_are_guarded(backend):
    """A graph captured outside autocast is not reused inside it (nor the other way): the guard
    names the change, and both calls give eager's dtypes and values."""
    def f(x, w):
        return (x @ w).relu() + 1
    c = ts.compile(f, backend=backend)
    x, w = ts.randn(8, 16), ts.randn(16, 4)
    plain = c(x, w)
    with ts.autocast("cpu", dtype=ts.bfloat16):
        mixed, mixed_eager = c(x, w), f(x, w)
        assert c(x, w).dtype == ts.bfloat16  # the autocast graph is reused inside autocast
    again = c(x, w)
    assert plain.dtype == again.dtype == ts.float32 and mixed.dtype == mixed_eager.dtype == ts.bfloat16
    close(plain, f(x, w))
    close(again, f(x, w))
    close(mixed.float(), mixed_eager.float())
    assert c.recompile_reasons == ["autocast changed from off to on for cpu in bfloat16"]


def test_recompile_limit_runs_eagerly_and_says_so_once():
    from tessera.compiler import config
    old = config.recompile_limit
    config.recompile_limit = 2
    try:
        c = ts.compile(lambda x: x.sin() + 1, backend="eager", dynamic=False)  # sizes stay static
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in range(1, 6):
                x = ts.randn(n)
                close(c(x), x.sin() + 1)
        messages = [str(w.message) for w in caught if "recompile limit" in str(w.message)]
        assert len(messages) == 1 and "tensor size changed from [2] to [3]" in messages[0]
        assert len(c.entries) == 2
    finally:
        config.recompile_limit = old


def test_module_training_flag_and_parameter_updates():
    ts.manual_seed(0)
    m = ts.nn.Sequential(ts.nn.Linear(6, 6), ts.nn.Dropout(0.5), ts.nn.ReLU())
    cm = ts.compile(m, backend="eager")
    x = ts.randn(8, 6)
    cm(x)
    m.eval()
    close(cm(x), m(x))  # eval: a recompile, and no dropout
    assert "training flag" in cm._compiled_call.recompile_reasons[0]
    with ts.no_grad():
        m[0].weight.add_(1.0)  # an in-place update (an optimizer step) is seen: parameters are read by identity
    close(cm(x), m(x))


def test_in_place_mutation_of_an_input_happens_once_per_call():
    def f(x):
        x.add_(1)
        return x * 2
    for backend in ("eager", "inductor"):
        c = ts.compile(f, backend=backend)
        x = ts.zeros(5)
        for k in range(1, 4):
            out = c(x)
            close(x, ts.full((5,), float(k)))
            close(out, ts.full((5,), 2.0 * k))


def test_outputs_keep_structure_and_non_tensor_values():
    def f(x):
        return {"a": x + 1, "b": [x * 2, 7], "shape": tuple(x.shape)}
    c = ts.compile(f)
    x = ts.randn(3)
    for _ in range(2):
        out = c(x)
        assert set(out) == {"a", "b", "shape"} and out["b"][1] == 7 and out["shape"] == (3,)
        close(out["a"], x + 1)
        close(out["b"][0], x * 2)


# ---------------------------------------------------------------- graph breaks and explain
def data_dependent(x):
    if x.sum() > 0:  # reads a value into Python: a graph break
        return x + 1
    return x - 1


def test_graph_break_is_reported_with_its_line_and_the_function_stays_correct():
    out = ts.compiler.explain(data_dependent)(ts.ones(3))
    assert out.graph_break_count == 1
    reason, where = out.break_reasons[0]
    assert reason == "Tensor.item()" and "if x.sum() > 0" in where and "test_compile.py" in where
    assert "Break Reason 1" in str(out) and "Guards:" in str(out)
    c = ts.compile(data_dependent)
    close(c(ts.ones(3)), ts.full((3,), 2.0))
    close(c(-ts.ones(3)), ts.full((3,), -2.0))  # the other branch: not a replay of the first


def test_fullgraph_turns_a_break_into_an_error_naming_the_line():
    with pytest.raises(ts.compiler.GraphBreakError, match=r"Tensor.item\(\).*if x.sum\(\) > 0"):
        ts.compile(data_dependent, fullgraph=True)(ts.ones(3))


def test_printing_and_tolist_are_breaks_too():
    def f(x):
        print(x)
        return x.tolist(), x * 3
    out = ts.compiler.explain(f)(ts.ones(2))
    assert [r for r, _ in out.break_reasons] == ["Tensor.tolist()", "Tensor.tolist()"]


def test_compile_arguments_are_checked_as_torch_does():
    with pytest.raises(RuntimeError, match="Either mode or options can be specified"):
        ts.compile(chain, mode="default", options={})
    with pytest.raises(RuntimeError, match="Unrecognized mode=fast"):
        ts.compile(chain, mode="fast")
    with pytest.raises(ValueError, match="unknown backend 'nope': not registered"):
        ts.compile(chain, backend="nope")
    assert {"eager", "aot_eager", "inductor"} <= set(ts.compiler.list_backends())


def test_decorator_forms_and_module_compile_in_place():
    @ts.compile
    def f(x):
        return x.cos()

    @ts.compile(backend="eager")
    def g(x):
        return x.cos()
    x = ts.randn(4)
    close(f(x), x.cos())
    close(g(x), x.cos())
    m = ts.nn.Sequential(ts.nn.Linear(4, 4), ts.nn.Tanh())
    expected = m(x)
    m.compile(backend="eager")
    close(m(x), expected)
    assert m.__dict__["_compiled_call_impl"].entries


# ---------------------------------------------------------------- ts.fx
def test_fx_graph_built_by_hand_runs_and_can_be_edited():
    g = ts.fx.Graph()
    x = g.placeholder("x")
    s = g.call_function(ts.ops.aten.sin.default, (x,))
    dead = g.call_function(ts.ops.aten.cos.default, (x,))
    out = g.call_function(ts.ops.aten.mul.Tensor, (s, x))
    g.output(out)
    assert g.eliminate_dead_code() and dead not in g.nodes
    gm = ts.fx.GraphModule({}, g)
    t = ts.randn(5)
    close(gm(t), t.sin() * t)
    s.target = ts.ops.aten.cos.default
    gm.recompile()
    close(gm(t), t.cos() * t)
    assert "tessera.ops.aten.cos.default(x)" in gm.code


def test_fx_print_tabular_and_lint(capsys):
    gm = ts.compiler.explain(lambda a: a.exp() + 1)(ts.randn(2)).graphs[0]
    gm.graph.print_tabular()
    text = capsys.readouterr().out
    assert "opcode" in text and "placeholder" in text and "tessera.ops.aten.exp.default" in text
    g = ts.fx.Graph()
    a = g.placeholder("a")
    late = ts.fx.Node(g, "late", "call_function", ts.ops.aten.exp.default, (a,))
    g.call_function(ts.ops.aten.neg.default, (late,))
    with pytest.raises(RuntimeError, match="uses 'late' before it is defined"):
        g.lint()


def test_ir_of_another_version_is_refused():
    with pytest.raises(ValueError, match="version 1"):
        ts.fx.graph_module_from_ir('{"format": "tessera.graph", "version": 99}', [])
    _inductor._load()
    with pytest.raises(Exception, match="tessera.graph: this reader understands versions 1..1, got version 7"):
        ts.ops.inductor.compile('{"format": "tessera.graph", "version": 7}', "")
    with pytest.raises(Exception, match="not valid JSON"):
        ts.ops.inductor.compile("{", "")


# ---------------------------------------------------------------- the inductor plugin
def test_inductor_fuses_the_chain_into_one_kernel_and_matches_eager():
    c = ts.compile(chain)
    for shape in [(1000,), (33, 17), (1 << 16,)]:
        x, y = ts.randn(*shape), ts.randn(*shape)
        c(x, y)
        close(c(x, y), chain(x, y))
    handle = c.entries[0][1].run.handle
    assert _inductor.describe(handle).startswith("nodes=9 kernels=1 fused_nodes=9 extern_calls=0")


def test_inductor_broadcasting_float64_where_and_nan():
    def f(x, bias, mask):
        y = ts.relu(x + bias) * 0.5
        y = ts.where(mask, y, -y)
        return ts.clamp(y, -0.25, None), ts.maximum(y, x)
    c = ts.compile(f)
    for dtype in (ts.float32, ts.float64):
        x = ts.randn(6, 5, dtype=dtype)
        x[1, 2] = float("nan")
        bias = ts.randn(5, dtype=dtype)
        mask = ts.randn(6, 1) > 0
        c(x, bias, mask)
        for got, want in zip(c(x, bias, mask), f(x, bias, mask)):
            np.testing.assert_allclose(to_np(got), to_np(want), rtol=1e-6, equal_nan=True)
            assert np.isnan(to_np(got)[1, 2])


def test_fused_gelu_and_clamp_match_eager_to_rounding():
    # The kernels compute gelu and its derivative with the CPU plugin's own formula, and clamps
    # against numbers keep NaN inputs (and a NaN bound gives NaN), so fused equals eager.
    def f(x, g):
        return (F.gelu(x) * 2, ts.ops.aten.gelu_backward(g, x) * 2, ts.clamp(x * 2, -3.0, 3.0),
                ts.ops.aten.gelu_backward(g, x, approximate="tanh") * 2,
                ts.clamp(x + 1, float("nan"), None), F.gelu(x, approximate="tanh") * 3)
    c = ts.compile(f)
    for n in (37, 5000, 70000):  # one thread with a scalar tail, one thread, parallel
        x = ts.linspace(-12, 12, n) * ts.rand(n)
        x[0], x[1], x[2] = float("nan"), float("inf"), -30.0
        g = ts.randn(n)
        with ts.no_grad():
            c(x, g)
            for got, want in zip(c(x, g), f(x, g)):
                np.testing.assert_allclose(to_np(got), to_np(want), rtol=2e-6, atol=3e-7, equal_nan=True)
    got = c(x, g)
    assert np.isnan(to_np(got[2])[0]) and np.isnan(to_np(got[4])).all()


def test_fused_sin_and_cos_are_accurate_at_every_range():
    # Kernels take an inline sin/cos where every argument of a chunk is within +-8192, and
    # redo a chunk with the library's otherwise (huge, infinite, NaN arguments).
    c = ts.compile(lambda x: (ts.sin(x) * 2, ts.cos(x) + 1))
    rng = np.random.default_rng(0)
    for bound in (1, 10, 1000, 8192):
        a = rng.uniform(-bound, bound, 50000).astype(np.float32)
        s, k = c(ts.from_numpy(a))
        wide = a.astype(np.float64)
        np.testing.assert_allclose(to_np(s), 2 * np.sin(wide), rtol=0, atol=4e-7)
        np.testing.assert_allclose(to_np(k), np.cos(wide) + 1, rtol=0, atol=4e-7)
    a = np.tile(np.array([1e5, -3e7, 1e30, np.inf, -np.inf, np.nan, 8192.5, 0.5, -0.0], np.float32), 1000)
    x = ts.from_numpy(a)
    s, k = c(x)
    np.testing.assert_array_equal(to_np(s), to_np(ts.sin(x) * 2))
    np.testing.assert_array_equal(to_np(k), to_np(ts.cos(x) + 1))


def test_inductor_keeps_library_calls_and_fuses_around_them():
    lin = ts.nn.Linear(16, 16)

    def block(x):
        h = lin(x)
        return F.gelu(h) + x, ts.softmax(h, -1)
    c = ts.compile(block)
    x = ts.randn(32, 16)
    with ts.no_grad():
        c(x)
        for got, want in zip(c(x), block(x)):
            close(got, want, atol=1e-5)
        handle = c.entries[0][1].run.handle
    text = _inductor.describe(handle)
    assert "kernels=0" not in text and "extern_calls=0" not in text, text


def test_inductor_training_graph_is_differentiable():
    lin = ts.nn.Linear(4, 3)
    c = ts.compile(lambda x: ts.tanh(lin(x)).sum())
    x = ts.randn(5, 4, requires_grad=True)
    for _ in range(2):
        x.grad = None
        lin.zero_grad()
        c(x).backward()
    got = (x.grad.clone(), lin.weight.grad.clone())
    x.grad = None
    lin.zero_grad()
    ts.tanh(lin(x)).sum().backward()
    close(got[0], x.grad)
    close(got[1], lin.weight.grad)


UNARY = ["sin", "cos", "exp", "tanh", "sigmoid", "relu", "neg", "abs", "silu", "erf"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(UNARY), st.tuples(st.sampled_from(BINARY), st.booleans())),
                min_size=1, max_size=8),
       st.sampled_from([(7,), (4, 9), (3, 1, 5)]))
def test_random_fused_chains_match_eager(steps, shape):
    def step(x, s, b):
        if isinstance(s, str):
            return getattr(ts, s)(x)
        op, use_scalar = s
        return getattr(ts, op)(x, 0.75 if use_scalar and op in ("add", "sub", "mul") else b)

    def f(x, b):
        for s in steps:
            x = step(x, s, b)
        return x
    x = ts.randn(*shape)
    b = ts.randn(shape[-1])
    c = ts.compile(f)
    c(x, b)
    # A fused kernel may round an intermediate differently by an ulp, and a later sin/cos turns
    # an ulp of a large value (exp(exp(x))) into an absolute error of that size: the tolerance
    # scales with the largest intermediate, which eager mode gives step by step.
    expected, largest = x, 1.0
    for s in steps:
        expected = step(expected, s, b)
        largest = max(largest, float(np.abs(to_np(expected)).max()))
    np.testing.assert_allclose(to_np(c(x, b)), to_np(expected), rtol=2e-6, atol=2e-6 * largest)


# ---------------------------------------------------------------- the on-disk cache and its faults
SCRIPT = textwrap.dedent("""
    import sys, warnings
    sys.path.insert(0, {path!r}) if {path!r} else None
    import tessera as ts
    from tessera.compiler import _plugin_backend as _inductor
    warnings.simplefilter("always")
    def f(x, y):
        return ts.tanh(ts.sin(x * y) + {salt})
    x, y = ts.arange(12.0).reshape(3, 4), ts.ones(4)
    c = ts.compile(f)
    c(x, y)
    got = c(x, y)
    run = c.entries[0][1].run
    print("DESCRIBE", _inductor.describe(run.handle) if hasattr(run, "handle") else "eager")
    print("OK", float((got - f(x, y)).abs().max()))
""")


def run_script(cache, salt=0.5, env_extra=None):
    env = dict(os.environ, TESSERA_CACHE_DIR=str(cache), **(env_extra or {}))
    code = SCRIPT.format(path=BUILD_PYTHON or "", salt=salt)
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(proc):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    error = float(out.split("OK ")[1])
    assert error < 1e-6, out
    return out, err


def test_cache_is_reused_by_a_new_process(tmp_path):
    first, _ = finish(run_script(tmp_path))
    second, _ = finish(run_script(tmp_path))
    assert "from_cache=0" in first and "from_cache=1" in second


def test_truncated_cache_entry_is_detected_and_rebuilt(tmp_path):
    finish(run_script(tmp_path))
    (so,) = (tmp_path / "inductor").glob("*.so")
    so.write_bytes(so.read_bytes()[:200])
    out, _ = finish(run_script(tmp_path))
    assert "from_cache=0" in out
    out, _ = finish(run_script(tmp_path))
    assert "from_cache=1" in out


def test_two_processes_building_the_same_entry_at_once(tmp_path):
    procs = [run_script(tmp_path, salt=0.25) for _ in range(2)]
    for p in procs:
        finish(p)
    assert len(list((tmp_path / "inductor").glob("*.so"))) == 1
    assert not list((tmp_path / "inductor").glob("*.tmp"))


def test_missing_compiler_falls_back_to_eager_with_one_warning(tmp_path):
    out, err = finish(run_script(tmp_path, env_extra={"PATH": str(tmp_path), "TESSERA_CXX": "", "CXX": ""}))
    assert "DESCRIBE eager" in out
    assert err.count("no C++ compiler found") == 1, err


def test_fast_guards_see_requires_grad_aliasing_and_replaced_parameters():
    lin = ts.nn.Linear(3, 3)
    c = ts.compile(lin, backend="eager")
    x = ts.randn(2, 3)
    for _ in range(2):
        close(c(x), lin(x))
    x.requires_grad_()
    out = c(x)
    assert out.requires_grad and "requires_grad changed from False to True" in c._compiled_call.recompile_reasons[-1]
    lin.weight = ts.nn.Parameter(ts.ones(3, 3))  # a new tensor, not an in-place update
    with ts.no_grad():
        close(c(x.detach()), lin(x.detach()))
    add = ts.compile(lambda a, b: a + b, backend="eager")
    y = ts.randn(3)
    z = ts.randn(3)
    close(add(y, z), y + z)
    close(add(y, y), y + y)  # the same tensor twice is another graph (one input)
    close(add(y, z), y + z)


@pytest.mark.parametrize("dtype", [ts.float32, ts.float64])
def test_row_reductions_fuse_with_what_follows(dtype):
    ln = ts.nn.LayerNorm(48).to(dtype)
    bias = ts.randn(48, dtype=dtype)

    def f(x):
        return (F.gelu(ln(x)) + x,
                ts.softmax(x, -1) * 3 + bias,
                ts.log_softmax(x, dim=1).neg(),
                F.layer_norm(x, (48,)) - 1,
                ts.ops.aten.native_layer_norm(x, [48], None, None, 1e-5))
    c = ts.compile(f)
    x = ts.randn(20, 48, dtype=dtype) * 3
    with ts.no_grad():
        c(x)
        got, want = c(x), f(x)
        for a, b in zip(got[:4], want[:4]):
            close(a, b, atol=1e-5)
        for a, b in zip(got[4], want[4]):  # the layer norm's mean and rstd leave the kernel too
            close(a, b, atol=1e-5)
        text = _inductor.describe(c.entries[0][1].run.handle)
    # Four row kernels; the bare native_layer_norm (nothing after it to fuse) stays a library call.
    assert "kernels=4" in text and "extern_calls=1" in text, text


def test_softmax_over_another_dimension_stays_a_library_call():
    c = ts.compile(lambda x: ts.softmax(x, 0) + 1)
    x = ts.randn(6, 5)
    with ts.no_grad():
        c(x)
        close(c(x), ts.softmax(x, 0) + 1)
        assert "extern_calls=1" in _inductor.describe(c.entries[0][1].run.handle)


class SmallNet(ts.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = ts.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = ts.nn.BatchNorm2d(4)
        self.fc1 = ts.nn.Linear(4 * 8 * 8, 32)
        self.ln = ts.nn.LayerNorm(32)
        self.fc2 = ts.nn.Linear(32, 10)

    def forward(self, x):
        h = ts.relu(self.bn(self.conv(x)))
        h = F.gelu(self.ln(self.fc1(h.flatten(1))))
        return F.log_softmax(self.fc2(h), -1)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_training_compiled_matches_eager_over_20_steps(backend):
    ts.manual_seed(0)
    eager = SmallNet()
    compiled_net = SmallNet()
    compiled_net.load_state_dict(eager.state_dict())
    step_fn = ts.compile(compiled_net, backend=backend)
    opts = [ts.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (eager, compiled_net)]
    x = ts.randn(16, 1, 8, 8)
    target = ts.randint(0, 10, (16,))
    for _ in range(20):
        losses = []
        for model, opt, call in ((eager, opts[0], eager), (compiled_net, opts[1], step_fn)):
            opt.zero_grad()
            loss = F.nll_loss(call(x), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) < 1e-4, losses
    for (name, a), b in zip(eager.state_dict().items(), compiled_net.state_dict().values()):
        np.testing.assert_allclose(to_np(a), to_np(b), atol=1e-4, rtol=1e-4, err_msg=name)
    assert len(step_fn._compiled_call.entries) == 1  # one graph served every step


def test_backward_graph_fuses_its_element_wise_and_row_formulas():
    ts.manual_seed(1)
    w = ts.randn(16, 16, requires_grad=True)
    mask = ts.randn(8, 16) > 0.5

    def f(x):
        h = x @ w
        a = F.gelu(h, approximate="tanh") + F.gelu(h)
        s = ts.softmax(a.masked_fill(mask, -3.0), -1)
        return (F.log_softmax(s * a, -1) * s).sum()
    c = ts.compile(f)
    x = ts.randn(8, 16, requires_grad=True)
    for _ in range(2):
        x.grad = w.grad = None
        c(x).backward()
    got = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    f(x).backward()
    close(got[0], x.grad, atol=1e-5)
    close(got[1], w.grad, atol=1e-5)


def test_two_threads_capture_at_once_and_keep_their_own_breaks():
    import threading
    barrier = threading.Barrier(2, timeout=60)
    results, errors = {}, []

    def reads(x):
        barrier.wait()
        return x * 2 if x.sum().item() > 0 else x  # a data-dependent read: a break in this thread only

    def pure(x):
        barrier.wait()
        return ts.sin(x) + 1

    def work(name, fn):
        try:
            c = ts.compile(fn, backend="eager")
            x = ts.ones(64)
            results[name] = (c(x), fn.__name__ == "reads" or c(x), c.graph_breaks)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(n, f)) for n, f in (("reads", reads), ("pure", pure))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a capture thread did not finish within 120 s"
    assert not errors, errors
    assert [r for r, _ in results["reads"][2]] == ["Tensor.item()"]
    assert results["pure"][2] == []
    close(results["pure"][0], ts.sin(ts.ones(64)) + 1)
    close(results["reads"][0], ts.full((64,), 2.0))


def test_unwritable_cache_falls_back_to_eager_with_a_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(blocker / "cache"))
    c = ts.compile(lambda x: ts.cos(x) * 3 + 0.125)
    x = ts.randn(10)
    with pytest.warns(UserWarning, match="cannot create the cache directory"):
        c(x)
    close(c(x), ts.cos(x) * 3 + 0.125)


def test_a_compiler_that_hangs_is_stopped_by_the_timeout(tmp_path):
    slow = tmp_path / "slow-c++"
    slow.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo slow 1.0; exit 0; fi\nsleep 60\n')
    slow.chmod(0o755)
    out, err = finish(run_script(tmp_path, env_extra={"TESSERA_CXX": str(slow), "TESSERA_COMPILE_TIMEOUT": "1"}))
    assert "DESCRIBE eager" in out
    assert "did not finish compiling" in err and "within 1 s" in err, err


def test_joint_capture_is_cached_on_disk_and_a_truncated_entry_is_rebuilt(tmp_path):
    import json
    lin = ts.nn.Linear(6, 4)
    x = ts.randn(3, 6, requires_grad=True)

    def grads(backend_fn):
        x.grad = None
        lin.zero_grad()
        backend_fn(x).backward()
        return x.grad.clone(), lin.weight.grad.clone()

    def fn(t):
        return ts.tanh(lin(t)).sum()
    want = grads(fn)
    got = grads(ts.compile(fn))
    (entry,) = (tmp_path / "cache" / "aot").glob("*.json")
    assert set(json.loads(entry.read_text())) == {"forward", "backward", "layout"}
    for a, b in zip(got, want):
        close(a, b)
    entry.write_text(entry.read_text()[:100])  # truncated: a reader must not trust it
    again = grads(ts.compile(fn))
    for a, b in zip(again, want):
        close(a, b)
    json.loads(entry.read_text())  # rewritten whole


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_views_and_mutation_through_them(backend):
    def f(x, y):
        row = x[1]              # a view of an input
        row.mul_(2)             # written through the view: x changes
        t = y.t()               # a transposed view, read by the fused part below
        z = ts.exp(x) + t * 3   # reads x after the write
        z[0].zero_()            # a write into a graph buffer through a view
        return z, row, x.view(-1)[:4]
    c = ts.compile(f, backend=backend)
    for _ in range(3):
        x, y = ts.randn(3, 4), ts.randn(4, 3)
        xe, ye = x.clone(), y.clone()
        got, want = c(x, y), f(xe, ye)
        for a, b in zip(got, want):
            close(a, b)
        close(x, xe)  # the input was written the same way
        assert got[1]._same_storage(x) and got[2]._same_storage(x)  # views of the input stay views


def test_a_graph_that_fuses_nothing_runs_the_function_itself(monkeypatch):
    monkeypatch.setattr(ts.compiler.config, "eager_when_nothing_fuses", True)
    calls = []

    def f(x):
        calls.append(1)
        return ts.matmul(x, x)  # a library call and nothing to fuse with it
    c = ts.compile(f)
    x = ts.randn(3, 3)
    c(x)
    c(x)
    assert len(calls) == 2 and c.entries[0][1].eager  # the second call ran f itself
    g = ts.compile(lambda t: ts.sin(t) * 2 + 1)  # three nodes in one kernel: compiled
    g(x)
    assert not g.entries[0][1].eager


def test_dynamic_true_makes_sizes_dynamic_from_the_first_call():
    c = ts.compile(lambda x: x + 1, dynamic=True, backend="eager")
    assert c.dynamic_sizes
    for n in (2, 3):
        close(c(ts.ones(n)), ts.full((n,), 2.0))
    assert ts.compile(lambda x: x + 1, dynamic=False).dynamic_sizes is False


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_no_grad_blocks_inside_a_compiled_function_stay_without_gradient(backend):
    def f(x):
        with ts.no_grad():
            scale = ts.sigmoid(x * 2).sum()  # a statistic, not differentiated
        return (x * scale).tanh().sum()
    c = ts.compile(f, backend=backend)
    for _ in range(2):
        x = ts.randn(6, requires_grad=True)
        c(x).backward()
        got = x.grad.clone()
        x.grad = None
        f(x).backward()
        close(got, x.grad)
    code = ts.compiler.explain(f)(ts.randn(6)).graphs[0].code
    assert "with tessera.no_grad():" in code


@pytest.mark.parametrize("dtype", [ts.float32, ts.float64])
def test_element_wise_work_before_a_row_reduction_is_fused_into_it(dtype):
    mask = ts.randn(16, 16) > 0.8
    w = ts.randn(16, dtype=dtype)

    def f(scores, x, y):
        attn = ts.softmax((scores * 0.125).masked_fill(mask, float("-inf")), -1)
        residual = x + y
        normed = F.layer_norm(residual, (16,), w) * 2
        return attn, normed, residual  # the residual leaves the kernel too
    c = ts.compile(f)
    args = [ts.randn(4, 16, 16, dtype=dtype) * 4, ts.randn(4, 16, 16, dtype=dtype), ts.randn(16, dtype=dtype)]
    with ts.no_grad():
        c(*args)
        for got, want in zip(c(*args), f(*args)):
            close(got, want, atol=1e-5)
        text = _inductor.describe(c.entries[0][1].run.handle)
    assert "nodes=6 kernels=2 fused_nodes=6 extern_calls=0" in text, text  # two row kernels, each with its prologue


@pytest.mark.slow
def test_train_digits_example_compiled(tmp_path, monkeypatch):
    """examples/train_digits.py with --compile (model.compile()): train and eval modes, the short
    last batch and no_grad evaluation each get their graph; the accuracy bar is eager's."""
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    import importlib.util
    monkeypatch.setattr(ts.compiler.config, "eager_when_nothing_fuses", True)
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train_digits.py")
    spec = importlib.util.spec_from_file_location("train_digits", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--compile", "--out", str(tmp_path / "digits.safetensors")]) == 0


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_detach_and_integer_outputs_keep_their_meaning_in_training_graphs(backend):
    lin = ts.nn.Linear(4, 3)

    def f(x):
        y = lin(x)
        stop = y.detach() * 2          # no gradient through here
        return (y * stop).sum(), y.argmax(-1), stop
    c = ts.compile(f, backend=backend)
    x = ts.randn(5, 4)
    lin.zero_grad()
    f(x)[0].backward()
    want = lin.weight.grad.clone()
    for _ in range(2):
        lin.zero_grad()
        loss, index, stop = c(x)
        loss.backward()
        close(lin.weight.grad, want)
    assert not stop.requires_grad and not index.requires_grad and index.dtype == ts.int64


def test_a_custom_autograd_function_breaks_the_graph_and_keeps_its_backward():
    class StraightThrough(ts.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return ts.round(x)

        @staticmethod
        def backward(ctx, grad):
            return grad  # the identity, not round's zero derivative

    def f(x):
        return (StraightThrough.apply(x * 3) * 2).sum()
    c = ts.compile(f)
    for _ in range(2):
        x = ts.randn(4, requires_grad=True)
        c(x).backward()
        close(x.grad, ts.full((4,), 6.0))
    reasons = [r for r, _ in c.graph_breaks]
    assert reasons and "StraightThrough" in reasons[0]
    with pytest.raises(ts.compiler.GraphBreakError, match="custom autograd.Function"):
        ts.compile(f, fullgraph=True)(ts.randn(4, requires_grad=True))


def test_a_training_step_with_backward_inside_runs_eagerly_and_trains_as_eager():
    ts.manual_seed(3)
    nets = [ts.nn.Linear(5, 2) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    opts = [ts.optim.SGD(n.parameters(), lr=0.1) for n in nets]
    x, y = ts.randn(8, 5), ts.randn(8, 2)

    def make_step(net, opt):
        def step(x, y):
            opt.zero_grad()
            loss = ((net(x) - y) ** 2).mean()
            loss.backward()  # autograd inside the function: the graph cannot replay it
            opt.step()
            return loss
        return step
    eager_step = make_step(nets[0], opts[0])
    compiled_step = ts.compile(make_step(nets[1], opts[1]))
    for _ in range(4):
        close(compiled_step(x, y), eager_step(x, y))
    close(nets[1].weight, nets[0].weight)
    assert any("autograd::backward" in r for r, _ in compiled_step.graph_breaks)


def test_an_optimizer_step_reads_the_current_gradients():
    net = ts.nn.Linear(3, 2)
    opt = ts.optim.SGD(net.parameters(), lr=0.5)
    step = ts.compile(opt.step)
    x = ts.randn(4, 3)
    for _ in range(3):
        opt.zero_grad()  # .grad becomes None, then a new tensor: a graph must not keep the old one
        net(x).sum().backward()
        before = net.weight.detach().clone()
        step()
        close(net.weight, before - 0.5 * net.weight.grad)


def test_tensors_made_from_python_data_inside_the_function():
    # ts.tensor([...]) is filled by the host, not by an operator: the graph keeps the contents.
    def f(x):
        t = ts.tensor([1.0, 2.0, 3.0])
        t.mul_(2.0)
        return x[ts.tensor([1, 0])] * t + 2 ** x[:2]

    x = ts.randn(3, 3)
    compiled = ts.compile(f)
    for _ in range(3):
        close(compiled(x), f(x))


# ---------------------------------------------------------------- memory planning: in-place kernels
def _in_place_count(c):
    text = _inductor.describe(c.entries[0][1].run.handle)
    return int(dict(f.split("=", 1) for f in text.split() if "=" in f)["in_place"])


def test_a_kernel_writes_over_an_input_that_dies_there_and_only_then():
    w = ts.randn(48, 48)
    cases = [  # (function, outputs written in place)
        (lambda x: (x.mm(w) * 2).tanh() + 1, 1),          # the product dies at the kernel
        (lambda x: (lambda y: (y, (y * 2).tanh()))(x.mm(w)), 0),   # it is also a result
        (lambda x: (lambda y: ((y * 2).exp(), y.t() @ w))(x.mm(w)), 0),  # a view of it lives on
        (lambda x: (x * 2).tanh() + 1, 0),                 # x is the caller's tensor
        (lambda x: ts.sin(x.mm(w) * 2) + 1, 0),            # sin's chunks re-read their inputs
    ]
    x = ts.randn(48, 48)
    for f, expected in cases:
        with ts.no_grad():
            c = ts.compile(f)
            c(x)
            for _ in range(3):  # the allocator hands the same blocks around: results stay right
                got, want = c(x), f(x)
                for g, e in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                    close(g, e, atol=1e-4)
        assert _in_place_count(c) == expected


def test_horizontal_fusion_joins_independent_work_to_an_earlier_kernel():
    w = ts.randn(32, 32)

    def independent(x):
        a = ts.tanh(x * 2)      # a kernel, closed by the product that reads it
        b = a.mm(w)
        c = ts.sigmoid(x) + 1   # reads only x: computed in the first kernel's loop
        return b, c * 3

    def dependent(x):
        a = ts.tanh(x * 2)
        b = a.mm(w)
        return b, ts.sigmoid(b) + 1  # needs the product: a kernel of its own after it

    x = ts.randn(32, 32)
    for f, kernels in ((independent, 1), (dependent, 2)):
        with ts.no_grad():
            c = ts.compile(f)
            c(x)
            for g, e in zip(c(x), f(x)):
                close(g, e, atol=1e-5)
        fields = dict(t.split("=", 1) for t in _inductor.describe(c.entries[0][1].run.handle).split() if "=" in t)
        assert int(fields["kernels"]) == kernels, fields


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e5])
def test_fused_layer_norm_is_as_accurate_as_eager_on_rows_far_from_zero(offset):
    """Float rows get their mean and variance in one pass (double sums); against a float64
    reference the fused kernel is no less accurate than eager, even when the mean is 1e5 times
    the spread."""
    x = ts.randn(64, 256) + offset

    def f(x):
        return F.layer_norm(x, (256,)) * 2 + 1
    with ts.no_grad():
        c = ts.compile(f)
        c(x)
        got, eager = to_np(c(x)), to_np(f(x))
    xd = to_np(x).astype(np.float64)
    ref = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * 2 + 1
    assert np.abs(got - ref).max() <= 1.5 * np.abs(eager - ref).max() + 1e-6


# ---------------------------------------------------------------- decompositions before fusion
def _batch_norm_net(bn, affine=True):
    ts.manual_seed(3)
    conv = ts.nn.Conv2d(3, 8, 3, padding=1) if bn is ts.nn.BatchNorm2d else ts.nn.Conv1d(3, 8, 3, padding=1)
    net = ts.nn.Sequential(conv, bn(8, affine=affine), ts.nn.ReLU())
    with ts.no_grad():  # running statistics away from 0 and 1
        net[1].running_mean.copy_(ts.randn(8))
        net[1].running_var.copy_(ts.rand(8) + 0.5)
    return net.eval()


@pytest.mark.parametrize("bn,shape,affine,dtype", [(ts.nn.BatchNorm2d, (4, 3, 9, 7), True, ts.float32),
                                                   (ts.nn.BatchNorm2d, (2, 3, 5, 5), False, ts.float32),
                                                   (ts.nn.BatchNorm1d, (4, 3, 20), True, ts.float64)])
def test_evaluation_batch_norm_is_element_wise_and_fuses_with_its_relu(bn, shape, affine, dtype):
    net = _batch_norm_net(bn, affine).to(dtype)
    c = ts.compile(net)
    x = ts.randn(*shape, dtype=dtype)
    with ts.no_grad():
        c(x)
        close(c(x), net(x), rtol=1e-5 if dtype == ts.float32 else 1e-12)
    # conv, then the per-channel scale and shift (one [C] kernel: add eps, rsqrt, times weight,
    # times mean, bias minus it), their two [C, 1, ...] views, then x * scale + shift and the
    # ReLU as one kernel: the batch norm is no library call of its own.
    per_channel = 5 if affine else 4  # without weight and bias: no product, a negation
    text = _inductor.describe(c._compiled_call.entries[0][1].run.handle)
    assert text.startswith(f"nodes={per_channel + 6} kernels=2 fused_nodes={per_channel + 3} extern_calls=3"), text


def test_training_batch_norm_and_one_whose_statistics_a_backward_reads_stay_library_calls():
    net = _batch_norm_net(ts.nn.BatchNorm2d)
    x = ts.randn(4, 3, 6, 6)
    net.train()
    c = ts.compile(net)
    with ts.no_grad():
        c(x)
        c(x)
    # conv, batch norm (statistics of the batch) and num_batches_tracked += 1 stay calls; the ReLU is a kernel
    text = _inductor.describe(c._compiled_call.entries[0][1].run.handle)
    assert text.startswith("nodes=4 kernels=1 fused_nodes=1 extern_calls=3"), text
    # Frozen batch norm in a training step (eval mode, gradients): compiled gradients equal eager.
    net.eval()
    x = ts.randn(4, 3, 6, 6, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    c = ts.compile(net)
    for _ in range(2):
        out = c(x)
    out.sum().backward()
    net(x2).sum().backward()
    close(x.grad, x2.grad, rtol=1e-5)


# ---------------------------------------------------------------- epilogues folded into library calls
ACTIVATIONS = [("gelu", lambda: ts.nn.GELU()), ("gelu_tanh", lambda: ts.nn.GELU(approximate="tanh")),
               ("relu", lambda: ts.nn.ReLU()), ("tanh", lambda: ts.nn.Tanh()), ("sigmoid", lambda: ts.nn.Sigmoid()),
               ("silu", lambda: ts.nn.SiLU())]


@pytest.mark.parametrize("name,activation", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_linear_bias_and_activation_fold_into_one_library_call(name, activation):
    ts.manual_seed(1)
    net = ts.nn.Sequential(ts.nn.Linear(24, 40), activation(), ts.nn.Linear(40, 8, bias=False), ts.nn.ReLU(),
                           ts.nn.Linear(8, 5)).eval()
    c = ts.compile(net)
    x = ts.randn(3, 7, 24)
    with ts.no_grad():
        c(x)
        close(c(x), net(x), atol=2e-6, rtol=1e-5)
    text = _inductor.describe(c._compiled_call.entries[0][1].run.handle)
    # matmul + bias + activation and matmul + ReLU (no bias) are one call each; the last Linear
    # (bias, no activation) stays matmul + add (the add a kernel: a bias alone is not folded)
    assert text.startswith("nodes=7 kernels=1 fused_nodes=1 extern_calls=6 in_place=1 epilogues=2"), text


def test_a_product_read_twice_is_not_folded_and_training_matches_eager():
    ts.manual_seed(2)
    lin = ts.nn.Linear(16, 16)

    def f(x):
        pre = lin(x)
        return ts.relu(pre), pre * 2  # the pre-activation has two readers: the ReLU does not fold

    c = ts.compile(f)
    x = ts.randn(5, 16)
    with ts.no_grad():
        c(x)
        for got, want in zip(c(x), f(x)):
            close(got, want)
    assert "epilogues=0" in _inductor.describe(c.entries[0][1].run.handle)
    # Training: the forward graph folds what the backward does not read; gradients equal eager's.
    net = ts.nn.Sequential(ts.nn.Linear(16, 32), ts.nn.GELU(), ts.nn.Linear(32, 4))
    twin = ts.nn.Sequential(ts.nn.Linear(16, 32), ts.nn.GELU(), ts.nn.Linear(32, 4))
    twin.load_state_dict(net.state_dict())
    c = ts.compile(net)
    for _ in range(3):
        x = ts.randn(6, 16)
        c(x).square().sum().backward()
        twin(x).square().sum().backward()
    for p, q in zip(net.parameters(), twin.parameters()):
        close(p.grad, q.grad, atol=1e-5, rtol=1e-4)


def test_linear_epilogue_operator_errors():
    call = ts._C.call_op
    x, w = ts.randn(4, 8), ts.randn(8, 3)
    with pytest.raises(ValueError, match="cpu::linear_epilogue: activation must be one of .*got 'swish'"):
        call("cpu::linear_epilogue", (x, w, None, "swish"))
    with pytest.raises(TypeError, match="cpu::linear_epilogue: expected a float32 input, got float64"):
        call("cpu::linear_epilogue", (x.double(), w, None, "none"))
    with pytest.raises(ValueError, match=r"expected input \[..., K\] and weight \[K, N\], got \[4, 8\] and \[3, 8\]"):
        call("cpu::linear_epilogue", (x, w.t().contiguous(), None, "none"))
    with pytest.raises(ValueError, match=r"expected a dense bias of shape \[3\]"):
        call("cpu::linear_epilogue", (x, w, ts.randn(4), "relu"))
    np.testing.assert_allclose(to_np(call("cpu::linear_epilogue", (x, w, None, "relu"))),
                               np.maximum(to_np(x) @ to_np(w), 0), rtol=1e-5, atol=1e-6)


def test_in_place_relu_after_batch_norm_fuses_and_in_place_semantics_hold():
    net = ts.nn.Sequential(ts.nn.Conv2d(3, 8, 3), ts.nn.BatchNorm2d(8), ts.nn.ReLU(inplace=True)).eval()
    c = ts.compile(net)
    x = ts.randn(2, 3, 8, 8)
    with ts.no_grad():
        c(x)
        close(c(x), net(x))
    text = _inductor.describe(c._compiled_call.entries[0][1].run.handle)
    # conv and the two views are calls; the [C] kernel, then scale, shift and the ReLU (made out of
    # place: nothing else reads what it overwrites) in one kernel
    assert text.startswith("nodes=11 kernels=2 fused_nodes=8 extern_calls=3"), text

    def through_a_view(x):
        y = x * 2
        flat = y.view(-1)  # sees the write below: the ReLU stays in place
        y.relu_()
        return flat + 1

    def read_before(x):
        y = x * 2
        z = y + 1          # reads y before it is overwritten
        y.relu_()
        return y, z

    for fn in (through_a_view, read_before):
        cf = ts.compile(fn)
        x = ts.randn(4, 5)
        cf(x)
        got, want = cf(x), fn(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            close(g, w)

    def writes_its_input(x):
        x.relu_()
        return x * 2

    cf = ts.compile(writes_its_input)
    for _ in range(2):
        a = ts.randn(6)
        b = a.clone()
        close(cf(a), writes_its_input(b))
        close(a, b)  # the caller's tensor is written, as eagerly


def test_the_gradient_of_split_pieces_is_one_cat():
    """Three slice_backwards tiling the last dim, summed by two adds (the backward of q, k, v
    split from one projection, as a GPT's compiled backward has it) run as one cat."""
    import json

    from tessera.compiler import _plugin_backend

    def value(i, kind, shape):
        strides = list(np.cumprod([1] + shape[::-1][:-1])[::-1]) if shape else []
        return {"id": i, "kind": kind, "dtype": 8, "shape": shape, "strides": [int(s) for s in strides],
                "storage_offset": 0, "device": [0, 0], "alias_of": -1}

    def slice_backward(grad, start, end, out):
        return {"op": "slice_backward", "args": [{"tensor": grad}, {"ints": [2, 3, 12]}, {"int": -1},
                                                 {"int": start}, {"int": end}, {"int": 1}], "outputs": [out]}

    nodes = [slice_backward(2, 8, 12, 3), slice_backward(1, 4, 8, 4),
             {"op": "add.Tensor", "args": [{"tensor": 3}, {"tensor": 4}, {"int": 1}], "outputs": [5]},
             slice_backward(0, 0, 4, 6),
             {"op": "add.Tensor", "args": [{"tensor": 5}, {"tensor": 6}, {"int": 1}], "outputs": [7]}]
    values = [value(i, "input", [2, 3, 4]) for i in range(3)] + [value(i, "node", [2, 3, 12]) for i in range(3, 8)]
    graph = {"format": "tessera.graph", "version": 1, "values": values, "inputs": [0, 1, 2], "constants": [],
             "nodes": nodes, "outputs": [7], "mutated_inputs": []}
    run = _plugin_backend._compile_ir(json.dumps(graph), [], "inductor")
    assert _inductor.describe(run.handle).startswith("nodes=1 kernels=0 fused_nodes=0 extern_calls=1"), \
        _inductor.describe(run.handle)
    q, k, v = (ts.randn(2, 3, 4) for _ in range(3))
    (out,) = run(q, k, v)
    close(out, ts.cat([q, k, v], dim=-1))
    # Pieces that leave a gap are not a cat: the adds and slice_backwards stay, and zeros fill the gap.
    nodes[0] = slice_backward(2, 9, 12, 3)
    values[2] = value(2, "input", [2, 3, 3])
    run = _plugin_backend._compile_ir(json.dumps(graph), [], "inductor")
    assert "nodes=1 " not in _inductor.describe(run.handle)
    v3 = ts.randn(2, 3, 3)
    (out,) = run(q, k, v3)
    close(out, ts.cat([q, k, ts.zeros(2, 3, 1), v3], dim=-1))
