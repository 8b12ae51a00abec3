"""Autograd: gradcheck (finite differences in float64) of every differentiable operator, second
order for the element-wise ones, and the engine's behaviour (hooks, retain_graph, create_graph,
in-place checks, custom Functions, grad modes, anomaly mode, threads)."""
import threading

import numpy as np
import pytest

import tessera as ts
from tessera.autograd import gradcheck, gradgradcheck

F64 = ts.float64


def rnd(*shape, low=-1.0, high=1.0, seed=0, requires_grad=True):
    rng = np.random.default_rng(seed + 17 * len(shape) + int(np.prod(shape) if shape else 1))
    return ts.tensor(rng.uniform(low, high, size=shape), dtype=F64, requires_grad=requires_grad)


def pos(*shape, seed=0):
    return rnd(*shape, low=0.5, high=2.0, seed=seed)


def distinct(*shape, seed=0):
    """Values far apart, so max/min/relu-like kinks are not within eps of each other."""
    n = int(np.prod(shape)) if shape else 1
    rng = np.random.default_rng(seed)
    vals = rng.permutation(n).astype(np.float64) * 0.37 - n * 0.15 + seed * 0.011  # no ties across seeds
    return ts.tensor(vals.reshape(shape), dtype=F64, requires_grad=True)


# (id, function, inputs factory, gradgradcheck too)
UNARY = [
    ("neg", lambda x: -x, lambda: rnd(3, 4), True),
    ("abs", lambda x: x.abs(), lambda: distinct(3, 4), True),
    ("exp", lambda x: x.exp(), lambda: rnd(3, 4), True),
    ("log", lambda x: x.log(), lambda: pos(3, 4), True),
    ("log1p", lambda x: x.log1p(), lambda: pos(3, 4), True),
    ("sqrt", lambda x: x.sqrt(), lambda: pos(3, 4), True),
    ("rsqrt", lambda x: x.rsqrt(), lambda: pos(3, 4), True),
    ("sin", lambda x: x.sin(), lambda: rnd(3, 4), True),
    ("cos", lambda x: x.cos(), lambda: rnd(3, 4), True),
    ("tanh", lambda x: x.tanh(), lambda: rnd(3, 4), True),
    ("sigmoid", lambda x: x.sigmoid(), lambda: rnd(3, 4), True),
    ("relu", lambda x: x.relu(), lambda: distinct(3, 4), True),
    ("erf", lambda x: x.erf(), lambda: rnd(3, 4), True),
    ("gelu", lambda x: ts.ops.aten.gelu(x), lambda: rnd(3, 4), False),
    ("gelu_tanh", lambda x: ts.ops.aten.gelu(x, approximate="tanh"), lambda: rnd(3, 4), False),
    ("silu", lambda x: ts.ops.aten.silu(x), lambda: rnd(3, 4), False),
    ("pow_scalar", lambda x: x ** 3, lambda: rnd(3, 4), True),
    ("pow_scalar_frac", lambda x: x ** 0.5, lambda: pos(3, 4), True),
    ("clamp", lambda x: x.clamp(-0.5, 0.5), lambda: distinct(3, 4), True),
    ("mul_scalar", lambda x: x * 2.5, lambda: rnd(3, 4), True),
    ("add_scalar", lambda x: x + 2.5, lambda: rnd(3, 4), True),
    ("div_scalar", lambda x: x / 2.5, lambda: rnd(3, 4), True),
    ("rsub_scalar", lambda x: 1.0 - x, lambda: rnd(3, 4), True),
    ("masked_fill", lambda x: x.masked_fill(x > 0, 0.0), lambda: distinct(3, 4), True),
]

BINARY = [
    ("add", lambda a, b: a + b, lambda: (rnd(3, 4), rnd(3, 4, seed=1)), True),
    ("add_alpha", lambda a, b: ts.add(a, b, alpha=2.0), lambda: (rnd(3, 4), rnd(3, 4, seed=1)), True),
    ("add_broadcast", lambda a, b: a + b, lambda: (rnd(3, 1), rnd(1, 4, seed=1)), True),
    ("sub_broadcast", lambda a, b: a - b, lambda: (rnd(2, 3, 4), rnd(4, seed=1)), True),
    ("mul", lambda a, b: a * b, lambda: (rnd(3, 4), rnd(3, 4, seed=1)), True),
    ("mul_broadcast", lambda a, b: a * b, lambda: (rnd(3, 1, 2), rnd(4, 1, seed=1)), True),
    ("div", lambda a, b: a / b, lambda: (rnd(3, 4), pos(3, 4, seed=1)), True),
    ("pow", lambda a, b: a ** b, lambda: (pos(3, 4), rnd(3, 4, seed=1)), True),
    ("maximum", lambda a, b: ts.maximum(a, b), lambda: (distinct(3, 4), distinct(3, 4, seed=1)), True),
    ("minimum", lambda a, b: ts.minimum(a, b), lambda: (distinct(3, 4), distinct(3, 4, seed=1)), True),
    ("where", lambda a, b: ts.where(a > b, a, b), lambda: (distinct(3, 4), distinct(3, 4, seed=1)), True),
    ("matmul_2d", lambda a, b: a @ b, lambda: (rnd(3, 4), rnd(4, 2, seed=1)), True),
    ("matmul_1d_2d", lambda a, b: a @ b, lambda: (rnd(4), rnd(4, 2, seed=1)), False),
    ("matmul_2d_1d", lambda a, b: a @ b, lambda: (rnd(3, 4), rnd(4, seed=1)), False),
    ("matmul_dot", lambda a, b: a @ b, lambda: (rnd(4), rnd(4, seed=1)), False),
    ("matmul_batched_broadcast", lambda a, b: a @ b, lambda: (rnd(2, 3, 4), rnd(4, 2, seed=1)), False),
    ("mm", lambda a, b: ts.mm(a, b), lambda: (rnd(3, 4), rnd(4, 2, seed=1)), True),
    ("bmm", lambda a, b: ts.bmm(a, b), lambda: (rnd(2, 3, 4), rnd(2, 4, 2, seed=1)), False),
    ("mse_loss", lambda a, b: ts.ops.aten.mse_loss(a, b), lambda: (rnd(3, 4), rnd(3, 4, seed=1)), False),
    ("l1_loss", lambda a, b: ts.ops.aten.l1_loss(a, b, 2), lambda: (distinct(3, 4), rnd(3, 4, seed=1)), False),
    ("bce_logits", lambda a, b: ts.ops.aten.binary_cross_entropy_with_logits(a, b.sigmoid()),
     lambda: (rnd(3, 4), rnd(3, 4, seed=1)), False),
]

REDUCTIONS = [
    ("sum", lambda x: x.sum(), lambda: rnd(3, 4)),
    ("sum_dim", lambda x: x.sum(1), lambda: rnd(3, 4)),
    ("sum_dims_keepdim", lambda x: x.sum((0, 2), keepdim=True), lambda: rnd(2, 3, 4)),
    ("mean", lambda x: x.mean(), lambda: rnd(3, 4)),
    ("mean_dim", lambda x: x.mean(-1), lambda: rnd(3, 4)),
    ("prod", lambda x: ts.prod(x, 1), lambda: pos(3, 4)),
    ("amax", lambda x: x.amax(1), lambda: distinct(3, 4)),
    ("amin", lambda x: x.amin(0), lambda: distinct(3, 4)),
    ("var", lambda x: x.var(1), lambda: rnd(3, 4)),
    ("std", lambda x: x.std(), lambda: rnd(3, 4)),
    ("logsumexp", lambda x: ts.logsumexp(x, 1), lambda: rnd(3, 4)),
    ("softmax", lambda x: ts.softmax(x, -1), lambda: rnd(3, 4)),
    ("log_softmax", lambda x: ts.log_softmax(x, 0), lambda: rnd(3, 4)),
]

VIEWS = [
    ("view", lambda x: x.view(4, 3), lambda: rnd(3, 4)),
    ("reshape", lambda x: x.reshape(2, 6), lambda: rnd(3, 4)),
    ("permute", lambda x: x.permute(2, 0, 1), lambda: rnd(2, 3, 4)),
    ("transpose", lambda x: x.transpose(0, 1), lambda: rnd(3, 4)),
    ("T", lambda x: x.T @ x, lambda: rnd(3, 4)),
    ("expand", lambda x: x.expand(3, 4), lambda: rnd(3, 1)),
    ("squeeze", lambda x: x.squeeze(), lambda: rnd(3, 1, 4)),
    ("unsqueeze", lambda x: x.unsqueeze(1), lambda: rnd(3, 4)),
    ("slice", lambda x: x[1:3, ::2], lambda: rnd(4, 5)),
    ("select", lambda x: x[1], lambda: rnd(4, 5)),
    ("negative_index", lambda x: x[:, -1], lambda: rnd(4, 5)),
    ("narrow", lambda x: x.narrow(1, 1, 2), lambda: rnd(3, 4)),
    ("flatten", lambda x: x.flatten(), lambda: rnd(2, 3, 2)),
    ("contiguous", lambda x: x.T.contiguous(), lambda: rnd(3, 4)),
    ("clone", lambda x: x.clone(), lambda: rnd(3, 4)),
    ("cat", lambda x: ts.cat([x, x * 2, x[:1]], 0), lambda: rnd(3, 4)),
    ("stack", lambda x: ts.stack([x, x.exp()], 1), lambda: rnd(3, 4)),
    ("index_select", lambda x: x.index_select(0, ts.tensor([2, 0, 2])), lambda: rnd(3, 4)),
    ("gather", lambda x: x.gather(1, ts.tensor([[0, 0], [1, 3], [2, 2]])), lambda: rnd(3, 4)),
    ("advanced_index", lambda x: x[ts.tensor([0, 2, 0])], lambda: rnd(3, 4)),
    ("bool_mask_index", lambda x: x[x > 0], lambda: distinct(3, 4)),
    ("masked_select", lambda x: ts.masked_select(x, x > 0), lambda: distinct(3, 4)),
]


@pytest.mark.parametrize("name,fn,make,second", UNARY, ids=[u[0] for u in UNARY])
def test_gradcheck_unary(name, fn, make, second):
    x = make()
    assert gradcheck(fn, (x,))
    if second:
        assert gradgradcheck(fn, (x,))


@pytest.mark.parametrize("name,fn,make,second", BINARY, ids=[b[0] for b in BINARY])
def test_gradcheck_binary(name, fn, make, second):
    a, b = make()
    assert gradcheck(fn, (a, b))
    if second:
        assert gradgradcheck(fn, (a, b))


@pytest.mark.parametrize("name,fn,make", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_gradcheck_reductions(name, fn, make):
    assert gradcheck(fn, (make(),))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_second_derivatives(name):
    """Double backward through softmax / log_softmax (their backward operators have derivatives:
    a gradient penalty through attention needs them), against finite differences."""
    fn = {"softmax": lambda x: ts.softmax(x, -1), "log_softmax": lambda x: ts.log_softmax(x, 0)}[name]
    weights = ts.arange(12, dtype=F64).reshape(3, 4)  # (a softmax row sums to 1: unweighted, its gradient is 0)
    assert gradgradcheck(lambda x: fn(x) * weights, (rnd(3, 4),))


@pytest.mark.parametrize("name,fn,make", VIEWS, ids=[v[0] for v in VIEWS])
def test_gradcheck_views_and_indexing(name, fn, make):
    assert gradcheck(fn, (make(),))


def test_gradcheck_addmm_and_scatter():
    assert gradcheck(lambda c, a, b: ts.addmm(c, a, b, beta=0.5, alpha=2.0), (rnd(3, 2), rnd(3, 4, seed=1), rnd(4, 2, seed=2)))
    idx = ts.tensor([[0, 1, 2, 0]])
    assert gradcheck(lambda s, src: s.scatter(0, idx, src), (rnd(3, 4), rnd(1, 4, seed=1)))
    assert gradcheck(lambda s, src: ts.ops.aten.scatter_add(s, 0, idx, src), (rnd(3, 4), rnd(1, 4, seed=1)))
    assert gradcheck(lambda s, src: ts.ops.aten.index_add(s, 0, ts.tensor([2, 0]), src), (rnd(3, 4), rnd(2, 4, seed=1)))


def test_gradcheck_index_put():
    i = ts.tensor([0, 2])
    assert gradcheck(lambda x, v: ts.ops.aten.index_put(x, [i], v), (rnd(3, 4), rnd(2, 4, seed=1)))
    assert gradcheck(lambda x, v: ts.ops.aten.index_put(x, [i], v, True), (rnd(3, 4), rnd(4, seed=1)))


def test_gradcheck_nn_ops():
    x = rnd(2, 2, 5, 5)
    w = rnd(3, 2, 3, 3, seed=1)
    b = rnd(3, seed=2)
    assert gradcheck(lambda x, w, b: ts.ops.aten.convolution(x, w, b, [1, 1], [1, 1], [1, 1], 1), (x, w, b))
    assert gradcheck(lambda x, w: ts.ops.aten.convolution(x, w, None, [2, 1], [0, 1], [1, 1], 1), (x, w))
    x1 = rnd(2, 4, 7)
    w1 = rnd(4, 2, 3, seed=3)
    assert gradcheck(lambda x, w: ts.ops.aten.convolution(x, w, None, [1], [1], [2], 2), (x1, w1))
    p = distinct(1, 2, 4, 4)
    assert gradcheck(lambda x: ts.ops.aten.max_pool2d_with_indices(x, [2, 2])[0], (p,))
    assert gradcheck(lambda x: ts.ops.aten.avg_pool2d(x, [3, 3], [2, 2], [1, 1]), (rnd(1, 2, 5, 5),))
    assert gradcheck(lambda x: ts.ops.aten.adaptive_avg_pool2d(x, [2, 3]), (rnd(1, 2, 5, 5),))


def test_gradcheck_normalization():
    x = rnd(4, 3, 2)
    w, b = rnd(3, seed=1), rnd(3, seed=2)
    rm, rv = ts.zeros(3, dtype=F64), ts.ones(3, dtype=F64)
    assert gradcheck(lambda x, w, b: ts.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)[0], (x, w, b))
    assert gradcheck(lambda x, w, b: ts.ops.aten.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)[0], (x, w, b))
    y = rnd(3, 4, 5)
    lw, lb = rnd(5, seed=3), rnd(5, seed=4)
    assert gradcheck(lambda y, w, b: ts.ops.aten.native_layer_norm(y, [5], w, b, 1e-5)[0], (y, lw, lb))
    g = rnd(2, 4, 3)
    gw, gb = rnd(4, seed=5), rnd(4, seed=6)
    assert gradcheck(lambda g, w, b: ts.ops.aten.native_group_norm(g, w, b, 2, 4, 3, 2, 1e-5)[0], (g, gw, gb))


def test_gradcheck_losses_and_embedding():
    logits = rnd(4, 5)
    target = ts.tensor([1, 0, 4, 2])
    assert gradcheck(lambda x: ts.ops.aten.nll_loss_forward(ts.log_softmax(x, 1), target, None, 1, -100)[0], (logits,))
    weight = rnd(6, 3)
    idx = ts.tensor([[0, 5], [5, 2]])
    assert gradcheck(lambda w: ts.ops.aten.embedding(w, idx), (weight,))


def test_backward_accumulates_and_matches_numpy():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = ts.tensor(a, requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * a + 3)
    assert x.is_leaf and x.grad_fn is None
    y = x * 2
    assert not y.is_leaf and y.grad_fn.name() == "MulScalarBackward" and y.requires_grad


def test_backward_needs_scalar_or_gradient():
    x = rnd(3)
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        (x * 2).backward()
    (x * 2).backward(ts.ones(3, dtype=F64))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_retain_graph():
    x = rnd(3)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_create_graph_higher_order():
    x = ts.tensor([0.3, -1.2, 2.0], dtype=F64, requires_grad=True)
    y = (x ** 3).sum()
    (g,) = ts.autograd.grad(y, x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 3 * x.detach().numpy() ** 2)
    (g2,) = ts.autograd.grad(g.sum(), x, create_graph=True)
    np.testing.assert_allclose(g2.detach().numpy(), 6 * x.detach().numpy())
    (g3,) = ts.autograd.grad(g2.sum(), x)
    np.testing.assert_allclose(g3.numpy(), [6.0, 6.0, 6.0])


def test_autograd_grad_leaves_dot_grad_alone_and_allow_unused():
    x, z = rnd(3), rnd(3, seed=4)
    y = (x * 2).sum()
    (gx,) = ts.autograd.grad(y, [x], retain_graph=True)
    assert x.grad is None
    np.testing.assert_allclose(gx.numpy(), [2.0] * 3)
    with pytest.raises(RuntimeError, match="allow_unused"):
        ts.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = ts.autograd.grad(y, [x, z], allow_unused=True)
    assert gz is None


def test_grad_with_respect_to_intermediate():
    x = rnd(3)
    h = x.exp()
    y = (h * h).sum()
    (gh,) = ts.autograd.grad(y, h)
    np.testing.assert_allclose(gh.numpy(), 2 * h.detach().numpy())


def test_hooks_leaf_and_nonleaf_and_removal():
    x = rnd(3)
    seen = []
    handle = x.register_hook(lambda g: g * 10)
    h = x * 2
    h.register_hook(lambda g: seen.append(g.numpy().copy()))
    h.sum().backward()
    np.testing.assert_allclose(seen[0], [1.0, 1.0, 1.0])
    np.testing.assert_allclose(x.grad.numpy(), [20.0] * 3)
    handle.remove()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0] * 3)


def test_retain_grad():
    x = rnd(3)
    h = x * 3
    h.retain_grad()
    assert h.retains_grad
    (h * h).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.detach().numpy())


def test_inplace_on_saved_tensor_is_detected_with_versions():
    x = rnd(3)
    y = x * 1.0
    z = y * y
    y.add_(1.0)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*mul\.Tensor.*version 1; expected version 0"):
        z.sum().backward()


def test_inplace_on_leaf_requiring_grad_is_an_error_but_allowed_under_no_grad():
    x = rnd(3)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1.0)
    with ts.no_grad():
        x.add_(1.0)
    assert x.requires_grad and x.is_leaf


def test_inplace_rebases_history():
    x = rnd(3)
    y = x * 2
    y.mul_(y.detach() * 0 + 3)  # y = 6x
    y.exp_()                      # y = exp(6x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * np.exp(6 * x.detach().numpy()), rtol=1e-10)


def test_grad_modes():
    x = rnd(3)
    with ts.no_grad():
        assert not ts.is_grad_enabled()
        assert not (x * 2).requires_grad
        with ts.enable_grad():
            assert (x * 2).requires_grad
    assert ts.is_grad_enabled()
    with ts.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    with ts.inference_mode():
        assert not (x * 2).requires_grad

    @ts.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad and (x * 2).requires_grad


def test_detach_and_requires_grad_errors():
    x = rnd(3)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    d[0] = 5.0
    assert float(x[0]) == 5.0  # shares storage
    with pytest.raises(RuntimeError, match="floating point"):
        ts.tensor([1, 2]).requires_grad_()
    y = x * 2
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad = False
    with pytest.raises(ValueError, match="different size"):
        x.grad = ts.zeros(4, dtype=F64)


class _Exp(ts.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class _ScaleBy(ts.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k, x + 1

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * ctx.k + g2, None


def test_custom_function():
    x = rnd(4)
    y = _Exp.apply(x)
    assert y.grad_fn.name() == "_ExpBackward"
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()))
    assert gradcheck(lambda t: _Exp.apply(t), (rnd(3),))
    a, b = _ScaleBy.apply(x, 3.0)
    (a.sum() + b.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()) + 4.0)


def test_custom_function_errors_surface():
    class Bad(ts.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom in backward")

    x = rnd(2)
    with pytest.raises(RuntimeError, match="boom in backward"):
        Bad.apply(x).sum().backward()


def test_anomaly_mode_names_the_forward_operator():
    x = ts.tensor([-1.0, 4.0], dtype=F64, requires_grad=True)
    y = x.sqrt()
    with ts.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="sqrt"):
            y.sum().backward()


def test_out_variant_refuses_grad():
    x = rnd(3)
    out = ts.empty(3, dtype=F64)
    with pytest.raises(RuntimeError, match="out="):
        ts.add(x, x, out=out)


def test_not_implemented_derivative_is_named():
    x = rnd(3)
    y = ts.ops.aten.gelu_backward(x, x)  # an operator without a formula
    with pytest.raises((RuntimeError, NotImplementedError), match="gelu_backward"):
        y.sum().backward()


def test_callbacks_are_released_with_the_graph():
    import gc

    base = ts._C.live_callbacks()
    for _ in range(3):
        x = rnd(3)
        y = _Exp.apply(x)
        y.register_hook(lambda g: None)
        y.sum().backward()
        del x, y
    gc.collect()
    assert ts._C.live_callbacks() == base


def test_backward_on_separate_graphs_in_threads():
    errors = []

    def work(seed):
        try:
            for _ in range(20):
                w = rnd(8, 8, seed=seed)
                x = rnd(4, 8, seed=seed + 1, requires_grad=False)
                loss = ((x @ w).tanh() ** 2).mean()
                loss.backward()
                expected = ts.autograd.grad(((x @ w).tanh() ** 2).mean(), w)[0]
                np.testing.assert_allclose(w.grad.numpy(), expected.numpy(), rtol=1e-12)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_mlp_training_matches_a_numpy_oracle_and_loss_falls():
    """The same MLP trained by Tessera's autograd and by hand-written NumPy backprop, from the same
    weights: identical losses step by step, and the loss really falls."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 4))
    Y = np.tanh(X @ rng.standard_normal((4, 1)))
    W1, B1, W2 = rng.standard_normal((4, 16)) * 0.5, np.zeros(16), rng.standard_normal((16, 1)) * 0.5
    w1, b1, w2 = (ts.tensor(a, requires_grad=True) for a in (W1, B1, W2))
    xt, yt = ts.tensor(X), ts.tensor(Y)
    lr, ours, oracle = 0.1, [], []
    for _ in range(40):
        loss = (((xt @ w1 + b1).relu() @ w2 - yt) ** 2).mean()
        ours.append(float(loss))
        for p in (w1, b1, w2):
            p.grad = None
        loss.backward()
        with ts.no_grad():
            for p in (w1, b1, w2):
                p -= lr * p.grad
        z = X @ W1 + B1
        h = np.maximum(z, 0)
        pred = h @ W2
        oracle.append(float(((pred - Y) ** 2).mean()))
        d = 2 * (pred - Y) / pred.size
        gW2 = h.T @ d
        dz = (d @ W2.T) * (z > 0)
        W1, B1, W2 = W1 - lr * (X.T @ dz), B1 - lr * dz.sum(0), W2 - lr * gW2
    np.testing.assert_allclose(ours, oracle, rtol=1e-10)
    assert ours[-1] < 0.5 * ours[0], ours[::10]


def test_setitem_with_gradients():
    """x[idx] = v records an in-place index_put_ on x: gradients reach v and x's history."""
    w = rnd(3)
    buf = ts.zeros(2, 3, dtype=F64)
    buf[1] = w * 2            # an untracked target gets history from the value
    buf[0, 1:] = w[:2]
    loss = (buf * buf).sum()
    loss.backward()
    wn = w.detach().numpy()
    expected = 8 * wn
    expected[:2] += 2 * wn[:2]
    np.testing.assert_allclose(w.grad.numpy(), expected)
    x = rnd(2, 3)
    y = x * 1.0
    y[:, 0] = 0.0             # gradient through the overwritten entries is zero
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 1, 1], [0, 1, 1]])
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x[0] = 1.0


def _row_scaled(x, w):
    y = x * 1.0
    y[1].mul_(w)             # select view, in-place with a second differentiable input
    return y * y


def _block_sin(x):
    y = x.clone()
    y[:, 1:3].sin_()         # slice view
    return y


def _view_of_view(x, w):
    y = x.clone()
    y.t()[2].add_(w)         # transpose, then select: the base is y
    return y.exp()


def _flat_view(x):
    y = x * 2.0
    y.view(-1)[3:8].tanh_()  # a view of the whole, then a slice of it
    return y


def _python_augmented_assign(x):
    y = x * 1.0
    y[:, 0] *= 3.0           # getitem, imul on the view, setitem of the view into itself
    y[1] += y[0]
    return y


def _stale_view_of_base(x):
    y = x.clone()
    v = y[0]                 # made before y changes: it must see the new values and history
    y.mul_(2.0)
    return v * 3.0


def _stale_sibling_view(x, w):
    y = x.clone()
    row = y[0]
    col = y[:, 0]            # shares y[0, 0] with row
    row.mul_(w)
    return col * col


INPLACE_ON_VIEWS = [
    ("select_mul_tensor", _row_scaled, lambda: (rnd(3, 4), rnd(4, seed=1))),
    ("slice_sin", _block_sin, lambda: (rnd(3, 4),)),
    ("transpose_select_add", _view_of_view, lambda: (rnd(3, 4), rnd(3, seed=2))),
    ("view_slice_tanh", _flat_view, lambda: (rnd(3, 4),)),
    ("python_augmented_assign", _python_augmented_assign, lambda: (rnd(3, 4),)),
    ("stale_view_of_base", _stale_view_of_base, lambda: (rnd(3, 4),)),
    ("stale_sibling_view", _stale_sibling_view, lambda: (rnd(3, 4), rnd(4, seed=3))),
]


@pytest.mark.parametrize("name,fn,make", INPLACE_ON_VIEWS, ids=[c[0] for c in INPLACE_ON_VIEWS])
def test_gradcheck_inplace_on_views(name, fn, make):
    assert gradcheck(fn, make())


def test_inplace_on_a_view_updates_the_base_history():
    x = rnd(2, 3)
    y = x * 1.0
    v = y[0]
    v.mul_(2.0)
    assert y.grad_fn.name() == "CopySlices"
    assert v.grad_fn.name() == "AsStridedBackward"
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[2, 2, 2], [1, 1, 1]])


def test_inplace_on_views_matches_torch():
    torch = pytest.importorskip("torch")
    x0 = np.random.default_rng(5).uniform(-1, 1, size=(3, 4))
    w0 = np.random.default_rng(6).uniform(-1, 1, size=4)

    def run(lib, x, w):
        y = x * 1.5
        y[1].mul_(w)
        v = y[:, 2:]
        v.add_(w[1:3])
        y.t()[0].sigmoid_()  # last: sigmoid saves its result, which a later in-place would invalidate
        return (y * y).sum() + (v * 2.0).sum()

    x, w = ts.tensor(x0, requires_grad=True), ts.tensor(w0, requires_grad=True)
    tx, tw = torch.tensor(x0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    run(ts, x, w).backward()
    run(torch, tx, tw).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_inplace_on_views_refuses_what_pytorch_refuses():
    x = rnd(2, 3)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        x[0].mul_(2.0)
    y = (x * 1.0)[0:1].expand(4, 3)
    with pytest.raises(RuntimeError, match="single memory location"):
        y.mul_(2.0)


def test_create_graph_through_an_inplace_on_a_view_is_refused_clearly():
    x = rnd(2, 3)
    y = x * 1.0
    y[0].mul_(2.0)
    (g,) = ts.autograd.grad((y * y).sum(), [x], create_graph=False)
    np.testing.assert_allclose(g.numpy(), 2 * x.detach().numpy() * [[4], [1]])
    with pytest.raises(NotImplementedError, match="create_graph"):
        ts.autograd.grad((y * y).sum(), [x], create_graph=True)


@pytest.mark.slow
def test_long_chains_backward_and_release_without_recursion():
    x = ts.tensor([1.0], dtype=F64, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y + 1.0
    y.backward()
    assert float(x.grad) == 1.0
    z = x
    for _ in range(100_000):
        z = z * 1.0
    del z  # releasing an unused 100k-node graph must not overflow the stack


def test_backward_with_inputs_accumulates_only_there():
    a, b = rnd(3), rnd(3, seed=2)
    h = a * b
    (h * h).sum().backward(inputs=[a, h])
    assert b.grad is None
    np.testing.assert_allclose(a.grad.numpy(), 2 * (h * b).detach().numpy())
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.detach().numpy())


def test_grad_nobody_else_holds_becomes_dot_grad_without_a_copy():
    # As torch's AccumulateGrad: a fresh gradient laid out as the leaf is kept as .grad (no
    # clone in the backward pass); one shared with another leaf is copied, so the two .grads
    # never alias.
    w = rnd(64, 32)
    x = rnd(8, 64, requires_grad=False)
    with ts.profiler.profile() as prof:
        (x @ w).relu().sum().backward()
    assert "aten::clone" not in {e.key for e in prof.key_averages()}
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ ((x @ w).detach().numpy() > 0))
    a, b = rnd(3, 4), rnd(3, 4, seed=1)
    (a + b).sum().backward()  # add's backward hands the same tensor to both leaves
    assert a.grad.data_ptr() != b.grad.data_ptr()
    a.grad.mul_(5.0)
    np.testing.assert_allclose(b.grad.numpy(), np.ones((3, 4)))
    c = rnd(4, 3)
    keep = []
    c.register_hook(lambda g: keep.append(g))  # a hook holding the gradient: it must be copied
    (c * 2.0).sum().backward()
    assert c.grad.data_ptr() != keep[0].data_ptr()
    t = rnd(3, 4)
    t.T.sum().backward()  # a gradient in another layout than the leaf's is copied into its layout
    assert t.grad.stride() == t.stride()


# as_strided: the gradient sums the outputs that share a storage position and splits a position
# that several input elements share (an expanded input); the NumPy oracle adds in storage space.
AS_STRIDED_CASES = [
    ((4, 6), None, (3, 2), (4, 1), 5),
    ((4, 6), None, (2, 2), (1, 2), None),
    ((10,), None, (3, 3), (1, 1), 0),  # overlapping windows
    ((2, 3, 4), None, (2, 2), (0, 1), 3),  # a repeated row
    ((4, 6), "t", (3, 2), (1, 6), 8),  # of a transposed view
    ((4, 6), "rows", (3, 2), (1, 6), 8),  # of a view with an offset
]


@pytest.mark.parametrize("shape, view, size, stride, offset", AS_STRIDED_CASES)
def test_as_strided_gradient(shape, view, size, stride, offset):
    base = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) * 0.5
    x = ts.tensor(base, requires_grad=True)
    v = {None: lambda t: t * 1, "t": lambda t: t.t(), "rows": lambda t: t[1:]}[view](x)
    y = v.as_strided(size, stride) if offset is None else v.as_strided(size, stride, offset)
    w = np.arange(1, int(np.prod(size)) + 1, dtype=np.float64).reshape(size)
    (y * ts.tensor(w)).sum().backward()
    # Oracle: every output element's weight lands on the storage position it reads.
    expected = np.zeros(base.size)
    start = (v.storage_offset() if offset is None else offset)
    for index in np.ndindex(*size):
        expected[start + sum(i * s for i, s in zip(index, stride))] += w[index]
    np.testing.assert_allclose(x.grad.numpy(), expected.reshape(shape))
    assert gradcheck(lambda t: (t * 1).as_strided(size, stride, 0 if offset is None else offset)
                     if view is None else t, (ts.tensor(base, requires_grad=True),))


def test_as_strided_of_an_expanded_input_splits_the_gradient():
    a = ts.ones(3, requires_grad=True)
    e = a.expand(2, 3)
    (e.as_strided((3,), (1,), 0) * ts.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert a.grad.tolist() == [1.0, 2.0, 3.0]
    torch = pytest.importorskip("torch")
    b = torch.ones(3, requires_grad=True)
    (b.expand(2, 3).as_strided((3,), (1,), 0) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert b.grad.tolist() == a.grad.tolist()


def test_as_strided_tangent_of_a_transposed_view():
    import tessera.autograd.forward_ad as fwAD
    x = np.arange(24, dtype=np.float64).reshape(4, 6)
    t = np.cos(x)
    with fwAD.dual_level():
        d = fwAD.make_dual(ts.tensor(x), ts.tensor(t))
        tangent = fwAD.unpack_dual(d.t().as_strided((3, 2), (1, 6), 8)).tangent
    # The output reads storage positions 8 + i + 6 j of x's row-major storage; so does its tangent.
    expected = np.array([[t.flat[8 + i + 6 * j] for j in range(2)] for i in range(3)])
    np.testing.assert_allclose(tangent.numpy(), expected)
