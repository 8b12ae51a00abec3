"""The example compiler plugin behind ts.compile(backend="tinycompiler"): loaded by path
(TINYCOMPILER_PLUGIN), it compiles captured graphs, forward and backward, and its results are
eager's. Run by scripts/test_sdk.sh after building the plugin out of tree."""
import os

import numpy as np
import pytest

import tessera as ts

PLUGIN = os.environ.get("TINYCOMPILER_PLUGIN")
pytestmark = pytest.mark.skipif(not PLUGIN, reason="TINYCOMPILER_PLUGIN is not set (scripts/test_sdk.sh sets it)")


@pytest.fixture(scope="module", autouse=True)
def _load():
    ts.plugins.load(PLUGIN)


def test_inference_through_the_example_compiler():
    lin = ts.nn.Linear(5, 3)

    def f(x):
        return ts.softmax(ts.tanh(lin(x)) * 2, -1)
    c = ts.compile(f, backend="tinycompiler")
    x = ts.randn(4, 5)
    with ts.no_grad():
        c(x)
        np.testing.assert_allclose(c(x).numpy(), f(x).numpy(), rtol=1e-6, atol=1e-7)
        handle = c.entries[0][1].run.handle
    assert ts.ops.tinycompiler.describe(handle).startswith("tinycompiler: ")


def test_training_through_the_example_compiler():
    lin = ts.nn.Linear(5, 3)
    c = ts.compile(lambda x: ts.nn.functional.gelu(lin(x)).sum(), backend="tinycompiler")
    x = ts.randn(4, 5, requires_grad=True)
    for _ in range(2):
        x.grad = None
        lin.zero_grad()
        c(x).backward()
    got = x.grad.clone(), lin.weight.grad.clone()
    x.grad = None
    lin.zero_grad()
    ts.nn.functional.gelu(lin(x)).sum().backward()
    np.testing.assert_allclose(got[0].numpy(), x.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1].numpy(), lin.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_bad_graph_is_refused_by_name():
    with pytest.raises(Exception, match="tinycompiler::compile: tessera.graph: expected format"):
        ts.ops.tinycompiler.compile('{"format": "other"}', "")
