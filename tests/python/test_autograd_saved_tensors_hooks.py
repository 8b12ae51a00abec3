"""ts.autograd.graph.saved_tensors_hooks, save_on_cpu and disable_saved_tensors_hooks, against
torch.autograd.graph when torch is importable and against closed-form gradients otherwise."""
import gc
import weakref

import numpy as np
import pytest

import tessera as ts
from conftest import HAVE_TORCH

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch not importable")


def _x(fw, requires_grad=True):
    data = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    return fw.tensor(data, requires_grad=requires_grad)


def test_pack_result_stands_in_for_the_saved_tensor():
    x = _x(ts)
    seen = []
    # unpack gives back twice what was saved: y = x * x saves x twice, so the gradient doubles.
    with ts.autograd.graph.saved_tensors_hooks(lambda t: (seen.append(tuple(t.shape)), t)[1], lambda t: t * 2):
        y = (x * x).sum()
    assert seen == [(3, 4), (3, 4)]
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (2 * x.detach().numpy()), rtol=1e-6)  # d(x*x) = 2x, each 2x


@needs_torch
@pytest.mark.parametrize("name", ["mul", "exp_chain", "matmul_relu", "softmax"])
def test_hooked_gradients_match_torch(name):
    def program(fw, x):
        if name == "mul":
            return (x * x.sin()).sum()
        if name == "exp_chain":
            return (x.exp() * x).tanh().sum()
        if name == "matmul_relu":
            return (x @ x.T).relu().sum()
        return fw.softmax(x * 3, dim=1)[:, 0].sum()

    grads = []
    for fw in (ts, torch):
        x = _x(fw)
        with fw.autograd.graph.saved_tensors_hooks(lambda t: ("packed", t.clone()), lambda p: p[1] * 1.5):
            y = program(fw, x)
        y.backward()
        grads.append(x.grad.detach().numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


def test_innermost_pair_packs_and_nothing_is_kept_after_backward():
    class Box:
        def __init__(self, t):
            self.t = t
    outer, inner, boxes = [], [], []

    def pack_inner(t):
        boxes.append(weakref.ref(box := Box(t)))
        inner.append(1)
        return box
    x = _x(ts)
    with ts.autograd.graph.saved_tensors_hooks(lambda t: (outer.append(1), t)[1], lambda t: t):
        a = x.exp()  # packed by the outer pair
        with ts.autograd.graph.saved_tensors_hooks(pack_inner, lambda b: b.t):
            b = a.sin()  # the inner one
        c = (b * a).sum()
    assert inner == [1] and len(outer) == 3
    c.backward()
    del a, b, c
    gc.collect()
    assert all(r() is None for r in boxes)  # released with the graph


def test_save_on_cpu_trains_as_without_it():
    x = _x(ts)
    with ts.autograd.graph.save_on_cpu():
        (x.sin() * x).sum().backward()
    xn = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(xn) * xn + np.sin(xn), rtol=1e-6)


def test_disable_and_bad_hooks_are_clear_errors():
    with ts.autograd.graph.disable_saved_tensors_hooks("no hooks in here"):
        with pytest.raises(RuntimeError, match="^no hooks in here$"):
            with ts.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with ts.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):  # allowed again
        pass
    with pytest.raises(TypeError, match="must be callables"):
        ts.autograd.graph.saved_tensors_hooks(1, lambda t: t)
    x = _x(ts)
    with ts.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: "not a tensor"):
        y = (x * x).sum()
    with pytest.raises(Exception, match="unpack_hook expected to be a Tensor but got result of type str"):
        y.backward()
