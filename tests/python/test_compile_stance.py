"""torch.compiler.set_stance over ts.compile, as a call, a context manager and a decorator, and
torch.compiler's tracing decorators (identities here: the capture records what a call
dispatches, whatever Python ran it)."""
import pytest

import tessera as ts


def counted():
    runs = []

    def f(x):
        runs.append(1)
        return ts.sin(x) + 1
    return f, runs


def test_force_eager_ignores_compile_and_default_restores_it():
    f, runs = counted()
    c = ts.compile(f, backend="eager")
    with ts.compiler.set_stance("force_eager"):
        c(ts.ones(3))
        c(ts.ones(3))
    assert c.entries == [] and len(runs) == 2
    c(ts.ones(3))
    c(ts.ones(3))
    assert len(c.entries) == 1 and len(runs) == 3  # captured once, then replayed


def test_fail_on_recompile_raises_on_a_capture_and_allows_cached_graphs():
    f, _ = counted()
    c = ts.compile(f, backend="eager")
    with ts.compiler.set_stance("fail_on_recompile"):
        with pytest.raises(RuntimeError, match="Detected recompile when torch.compile stance is 'fail_on_recompile'.*"
                                               "function name: 'f'"):
            c(ts.ones(3))
    c(ts.ones(3))
    with ts.compiler.set_stance("fail_on_recompile"):
        c(ts.ones(3))  # the guards hold: no capture
        with pytest.raises(RuntimeError, match="fail_on_recompile"):
            c(ts.ones(3, dtype=ts.float64))


def test_eager_on_recompile_and_eager_then_compile():
    f, runs = counted()
    c = ts.compile(f, backend="eager")
    c(ts.ones(3))
    with ts.compiler.set_stance("eager_on_recompile"):
        c(ts.ones(3, dtype=ts.float64))
        c(ts.ones(3))
    assert len(c.entries) == 1 and len(runs) == 2  # the float64 call ran eagerly; the float32 one replayed
    g, runs = counted()
    cg = ts.compile(g, backend="eager")
    with ts.compiler.set_stance("eager_then_compile"):
        for _ in range(3):
            cg(ts.ones(2))
    assert len(cg.entries) == 1 and len(runs) == 2  # eager, capture, replay


def test_set_stance_as_a_decorator_holds_only_inside_and_checks_its_arguments():
    f, runs = counted()
    c = ts.compile(f, backend="eager")

    @ts.compiler.set_stance("force_eager")
    def inside(x):
        return c(x)
    inside(ts.ones(2))
    assert c.entries == []
    c(ts.ones(2))
    assert len(c.entries) == 1
    with pytest.raises(RuntimeError, match="invalid torch.compile stance 'sometimes'"):
        ts.compiler.set_stance("sometimes")

    def sets_stance(x):
        ts.compiler.set_stance("force_eager")
        return x
    with pytest.raises(RuntimeError, match="set_stance in a torch.compile region"):
        ts.compile(sets_stance, backend="eager")(ts.ones(1))


def test_tracing_decorators_and_predicates():
    def f(x):
        return x * 2
    assert ts.compiler.allow_in_graph(f) is f and ts.compiler.assume_constant_result(f) is f
    assert ts.compiler.substitute_in_graph(len)(f) is f and ts.compiler.nested_compile_region(f) is f
    seen = []

    def probe(x):
        seen.append((ts.compiler.is_dynamo_compiling(), ts.compiler.is_exporting()))
        return x + 1
    ts.compile(probe, backend="eager")(ts.ones(2))

    class M(ts.nn.Module):
        def forward(self, x):
            return probe(x)
    ts.export.export(M(), (ts.ones(2),))
    probe(ts.ones(2))
    assert seen == [(True, False), (True, True), (False, False)]
    x = ts.ones(2, 3)
    ts._dynamo.mark_dynamic(x, 0)
    ts._dynamo.mark_static(x, 0)
    assert x._dynamo_dynamic_indices == set()
    assert ts._dynamo.optimize("eager")(f)(ts.ones(1)).item() == 2


def test_export_refuses_an_explicit_graph_break_naming_it():
    class M(ts.nn.Module):
        def forward(self, x):
            y = x * 2
            ts._dynamo.graph_break()
            return y + 1
    with pytest.raises(ts.export.ExportError, match=r"graph_break\(\) at .*ts._dynamo.graph_break\(\).*one graph"):
        ts.export.export(M(), (ts.ones(2),))
