"""tessera.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp) against torch.autograd.functional
on the same float64 inputs, and always against float64 finite differences in NumPy (so the tests mean
something without PyTorch). Functions are written once against a module `M` (numpy, tessera or torch).
Covers single tensors and tuples in and out (torch's nesting), create_graph=True differentiated again,
strict mode and bad-input errors (torch's types and messages), vectorize=True and forward-mode equal to
the row-by-row reverse mode, and hvp/vhp of a quadratic and of a small MLP loss."""
import subprocess
import sys

import numpy as np
import pytest

import tessera as ts
from conftest import HAVE_TORCH

if HAVE_TORCH:
    import torch
    import torch.autograd.functional as TF
else:  # pragma: no cover
    torch = TF = None

F = ts.autograd.functional
TOL = dict(rtol=1e-6, atol=1e-8)  # tessera vs torch, both float64
FD_TOL = dict(rtol=1e-5, atol=1e-6)  # vs float64 central differences


# ---------------------------------------------------------------------------- helpers
def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def T(a):
    return ts.tensor(np.array(a, dtype=np.float64))


def P(a):
    return torch.tensor(np.array(a, dtype=np.float64))


def N(t):
    t = t.detach()
    return np.array(t.tolist(), dtype=np.float64).reshape(tuple(t.shape))


def wrap(tree, fn):
    return tuple(wrap(x, fn) for x in tree) if isinstance(tree, (tuple, list)) else fn(tree)


def close(got, want, tol=TOL):
    """got: tessera result tree; want: torch or numpy tree of the same nesting."""
    assert isinstance(got, tuple) == isinstance(want, tuple), (type(got), type(want))
    if isinstance(got, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            close(g, w, tol)
        return
    assert isinstance(got, ts.Tensor), type(got)
    w = N(want) if HAVE_TORCH and isinstance(want, torch.Tensor) else np.asarray(want)
    assert tuple(got.shape) == w.shape, (tuple(got.shape), w.shape)
    np.testing.assert_allclose(N(got), w, **tol)


def _tup(x):
    return x if isinstance(x, tuple) else (x,)


def fd_jacobian(f, inputs, h=1e-6):
    """f: numpy arrays -> array or tuple; J[i][j] of shape out_i.shape + in_j.shape, torch's nesting."""
    ins = [np.array(x, dtype=np.float64) for x in _tup(inputs)]
    out0 = f(*ins)
    outs0 = _tup(out0)
    jac = [[np.zeros(np.shape(o) + x.shape) for x in ins] for o in outs0]
    for j, x in enumerate(ins):
        for k in np.ndindex(x.shape):
            plus = [a.copy() for a in ins]
            minus = [a.copy() for a in ins]
            plus[j][k] += h
            minus[j][k] -= h
            for i, (op, om) in enumerate(zip(_tup(f(*plus)), _tup(f(*minus)))):
                jac[i][j][(Ellipsis,) + k] = (np.asarray(op) - np.asarray(om)) / (2 * h)
    res = tuple(tuple(row) if isinstance(inputs, tuple) else row[0] for row in jac)
    return res if isinstance(out0, tuple) else res[0]


def fd_hessian(f, inputs, h=1e-4):
    """Second central differences of a scalar f; H[i][j] of shape in_i.shape + in_j.shape."""
    ins = [np.array(x, dtype=np.float64) for x in _tup(inputs)]

    def at(steps):
        xs = [a.copy() for a in ins]
        for (j, k), s in steps:
            xs[j][k] += s
        return float(np.asarray(f(*xs)))

    H = [[np.zeros(a.shape + b.shape) for b in ins] for a in ins]
    for i, a in enumerate(ins):
        for ka in np.ndindex(a.shape):
            for j, b in enumerate(ins):
                for kb in np.ndindex(b.shape):
                    p, q = (i, ka), (j, kb)
                    H[i][j][ka + kb] = (at([(p, h), (q, h)]) - at([(p, h), (q, -h)]) - at([(p, -h), (q, h)])
                                        + at([(p, -h), (q, -h)])) / (4 * h * h)
    if not isinstance(inputs, tuple):
        return H[0][0]
    return tuple(tuple(row) for row in H)


def contract_out(jac_io, v_o, n_in_dims):
    """sum over output dims of v * J (a vjp from a Jacobian block)."""
    return np.tensordot(v_o, jac_io, axes=v_o.ndim)


def contract_in(jac_io, v_i):
    """sum over input dims of J * v (a jvp from a Jacobian block)."""
    axes = v_i.ndim
    return np.tensordot(jac_io, v_i, axes=(list(range(jac_io.ndim - axes, jac_io.ndim)), list(range(axes))))


def torch_or_none(fn):
    return fn() if HAVE_TORCH else None


def same_error(ts_call, torch_call, exc_type, match):
    """tessera raises exc_type with `match` in its message; with torch present, torch raises the same
    type with the same message."""
    with pytest.raises(exc_type) as ei:
        ts_call()
    assert match in str(ei.value), str(ei.value)
    if HAVE_TORCH:
        with pytest.raises(exc_type) as et:
            torch_call()
        assert str(et.value) == str(ei.value)


# ---------------------------------------------------------------------------- functions under test
def f_single(M, x):
    return M.exp(x).sum(1) * (x * x).sum(1)


def f_multi(M, x, y):
    return (M.sin(x) * y).sum(1), (x * x).sum() * y


def g_scalar(M, x, y):
    return (M.sin(x) * y).sum() + (y ** 3).sum() + (x ** 2 * x).sum()


def M_of(t):
    if isinstance(t, tuple):
        t = t[0]
    if isinstance(t, ts.Tensor):
        return ts
    if HAVE_TORCH and isinstance(t, torch.Tensor):
        return torch
    return np


def bind(fn):
    """fn(M, *args) as a one-module function, the module picked from the first argument."""
    return lambda *args: fn(M_of(args), *args)


XN, YN = rand(2, 3, seed=1), rand(3, seed=2)


# ---------------------------------------------------------------------------- jacobian
@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_single_tensor(vectorize):
    f = bind(f_single)
    J = F.jacobian(f, T(XN), vectorize=vectorize)
    assert isinstance(J, ts.Tensor) and tuple(J.shape) == (2, 2, 3) and not J.requires_grad
    close(J, fd_jacobian(f, XN), FD_TOL)
    if HAVE_TORCH:
        close(J, TF.jacobian(f, P(XN), vectorize=vectorize))


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_tuple_inputs_tuple_outputs(vectorize):
    f = bind(f_multi)
    J = F.jacobian(f, (T(XN), T(YN)), vectorize=vectorize)
    assert isinstance(J, tuple) and len(J) == 2 and all(isinstance(r, tuple) and len(r) == 2 for r in J)
    assert [[tuple(b.shape) for b in r] for r in J] == [[(2, 2, 3), (2, 3)], [(3, 2, 3), (3, 3)]]
    close(J, fd_jacobian(f, (XN, YN)), FD_TOL)
    if HAVE_TORCH:
        close(J, TF.jacobian(f, (P(XN), P(YN)), vectorize=vectorize))


def test_jacobian_mixed_nesting():
    # tuple inputs, one output: a tuple over inputs; one input, tuple outputs: a tuple over outputs
    f2 = bind(lambda M, x, y: (M.sin(x) * y).sum(0))
    J = F.jacobian(f2, (T(XN), T(YN)))
    assert isinstance(J, tuple) and len(J) == 2 and isinstance(J[0], ts.Tensor)
    close(J, fd_jacobian(f2, (XN, YN)), FD_TOL)
    f3 = bind(lambda M, x: (M.exp(x), x.sum()))
    J3 = F.jacobian(f3, T(YN))
    assert isinstance(J3, tuple) and len(J3) == 2 and tuple(J3[1].shape) == (3,)
    close(J3, fd_jacobian(f3, YN), FD_TOL)
    # a one-element tuple stays a tuple (of tuples)
    J4 = F.jacobian(lambda x: (x * 2,), (T(YN),))
    assert isinstance(J4, tuple) and isinstance(J4[0], tuple) and isinstance(J4[0][0], ts.Tensor)
    np.testing.assert_allclose(N(J4[0][0]), 2 * np.eye(3))
    if HAVE_TORCH:
        close(J, TF.jacobian(f2, (P(XN), P(YN))))
        close(J3, TF.jacobian(f3, P(YN)))


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_unused_input_is_zero(vectorize):
    f = lambda x, y: x * 3  # noqa: E731
    J = F.jacobian(f, (T(YN), T(XN)), vectorize=vectorize)
    np.testing.assert_allclose(N(J[0]), 3 * np.eye(3))
    assert tuple(J[1].shape) == (3, 2, 3) and not N(J[1]).any()
    if HAVE_TORCH:
        close(J, TF.jacobian(f, (P(YN), P(XN)), vectorize=vectorize))


def test_vectorize_and_forward_mode_equal_reverse():
    f = bind(f_multi)
    base = F.jacobian(f, (T(XN), T(YN)))
    close(F.jacobian(f, (T(XN), T(YN)), vectorize=True), tuple(tuple(N(b) for b in r) for r in base))
    fwd = F.jacobian(f, (T(XN), T(YN)), vectorize=True, strategy="forward-mode")
    close(fwd, tuple(tuple(N(b) for b in r) for r in base))
    single = F.jacobian(bind(f_single), T(XN), vectorize=True, strategy="forward-mode")
    close(single, N(F.jacobian(bind(f_single), T(XN))))


def test_jacobian_create_graph_then_differentiate():
    x = T(YN).requires_grad_()
    w = T(rand(3, 3, seed=5))
    J = F.jacobian(lambda a: a ** 3, x, create_graph=True)
    assert J.requires_grad
    (g,) = ts.autograd.grad((J * w).sum(), x)
    # d/dx sum_ij w_ij * 3 x_i^2 delta_ij = 6 x_i w_ii
    np.testing.assert_allclose(N(g), 6 * YN * np.diag(N(w)), rtol=1e-12)
    Jv = F.jacobian(lambda a: a ** 3, x, create_graph=True, vectorize=True)
    (gv,) = ts.autograd.grad((Jv * w).sum(), x)
    np.testing.assert_allclose(N(gv), N(g), rtol=1e-12)
    # without create_graph: detached, and the caller's tensor is left alone
    J0 = F.jacobian(lambda a: a ** 3, x)
    assert not J0.requires_grad and x.is_leaf and x.grad is None
    if HAVE_TORCH:
        xt = P(YN).requires_grad_()
        (gt,) = torch.autograd.grad((TF.jacobian(lambda a: a ** 3, xt, create_graph=True) * P(N(w))).sum(), xt)
        close(g, gt)


# ---------------------------------------------------------------------------- vjp / jvp
def test_vjp_single_and_tuple():
    f = bind(f_single)
    v = rand(2, seed=3)
    out, r = F.vjp(f, T(XN), T(v))
    close(out, f(XN), FD_TOL)
    close(r, contract_out(fd_jacobian(f, XN), v, 2), FD_TOL)
    fm = bind(f_multi)
    vs = (rand(2, seed=3), rand(3, seed=4))
    outs, rs = F.vjp(fm, (T(XN), T(YN)), (T(vs[0]), T(vs[1])))
    assert isinstance(outs, tuple) and isinstance(rs, tuple) and len(rs) == 2
    J = fd_jacobian(fm, (XN, YN))
    want = tuple(sum(contract_out(J[i][j], vs[i], 0) for i in range(2)) for j in range(2))
    close(rs, want, FD_TOL)
    assert not rs[0].requires_grad and not outs[0].requires_grad
    if HAVE_TORCH:
        close((out, r), TF.vjp(f, P(XN), P(v)))
        close((outs, rs), TF.vjp(fm, (P(XN), P(YN)), (P(vs[0]), P(vs[1]))))


def test_vjp_scalar_output_default_v_and_create_graph():
    x = T(YN).requires_grad_()
    out, g = F.vjp(lambda a: (a ** 3).sum(), x, create_graph=True)
    assert out.requires_grad and g.requires_grad
    np.testing.assert_allclose(N(g), 3 * YN ** 2, rtol=1e-12)
    (gg,) = ts.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(N(gg), 6 * YN, rtol=1e-12)
    if HAVE_TORCH:
        xt = P(YN).requires_grad_()
        _, gt = TF.vjp(lambda a: (a ** 3).sum(), xt, create_graph=True)
        close(gg, torch.autograd.grad(gt.sum(), xt)[0])


def test_jvp_single_and_tuple():
    f = bind(f_single)
    v = rand(2, 3, seed=6)
    out, r = F.jvp(f, T(XN), T(v))
    close(r, contract_in(fd_jacobian(f, XN), v), FD_TOL)
    fm = bind(f_multi)
    vs = (rand(2, 3, seed=7), rand(3, seed=8))
    outs, rs = F.jvp(fm, (T(XN), T(YN)), (T(vs[0]), T(vs[1])))
    assert isinstance(rs, tuple) and [tuple(t.shape) for t in rs] == [(2,), (3,)]
    J = fd_jacobian(fm, (XN, YN))
    close(rs, tuple(sum(contract_in(J[i][j], vs[j]) for j in range(2)) for i in range(2)), FD_TOL)
    # one-element input: v may be omitted
    _, r1 = F.jvp(lambda a: a * ts.tensor([1.0, 2.0], dtype=ts.float64), T([0.5]))
    np.testing.assert_allclose(N(r1), [1.0, 2.0])
    if HAVE_TORCH:
        close((out, r), TF.jvp(f, P(XN), P(v)))
        close((outs, rs), TF.jvp(fm, (P(XN), P(YN)), (P(vs[0]), P(vs[1]))))


def test_jvp_create_graph_then_differentiate():
    x = T(YN).requires_grad_()
    v = T(rand(3, seed=9))
    _, r = F.jvp(lambda a: a.sin() * a, x, v, create_graph=True)
    assert r.requires_grad
    (g,) = ts.autograd.grad(r.sum(), x)
    # r = (cos x * x + sin x) v ; dr/dx = (2 cos x - x sin x) v
    np.testing.assert_allclose(N(g), (2 * np.cos(YN) - YN * np.sin(YN)) * N(v), rtol=1e-10)
    if HAVE_TORCH:
        xt = P(YN).requires_grad_()
        _, rt = TF.jvp(lambda a: a.sin() * a, xt, P(N(v)), create_graph=True)
        close(g, torch.autograd.grad(rt.sum(), xt)[0])


# ---------------------------------------------------------------------------- hessian
@pytest.mark.parametrize("vectorize,strategy", [(False, "reverse-mode"), (True, "reverse-mode"),
                                                (True, "forward-mode")])
def test_hessian(vectorize, strategy):
    g = bind(g_scalar)
    H = F.hessian(g, (T(XN), T(YN)), vectorize=vectorize, outer_jacobian_strategy=strategy)
    assert [[tuple(b.shape) for b in r] for r in H] == [[(2, 3, 2, 3), (2, 3, 3)], [(3, 2, 3), (3, 3)]]
    close(H, fd_hessian(g, (XN, YN)), FD_TOL)
    h1 = bind(lambda M, x: (x ** 3).sum() + (x[0] * x[1]))
    H1 = F.hessian(h1, T(YN), vectorize=vectorize, outer_jacobian_strategy=strategy)
    assert isinstance(H1, ts.Tensor) and tuple(H1.shape) == (3, 3)
    close(H1, fd_hessian(h1, YN), FD_TOL)
    if HAVE_TORCH:
        # (torch's forward-mode result is a list of lists of tensors requiring grad; tessera's is detached tuples)
        close(H, wrap(TF.hessian(g, (P(XN), P(YN)), vectorize=vectorize, outer_jacobian_strategy=strategy),
                      lambda t: t.detach()))


def test_hessian_create_graph_then_differentiate():
    x = T(YN).requires_grad_()
    H = F.hessian(lambda a: (a ** 4).sum(), x, create_graph=True)
    assert H.requires_grad
    (g,) = ts.autograd.grad(H.sum(), x)  # H = diag(12 x^2)
    np.testing.assert_allclose(N(g), 24 * YN, rtol=1e-12)
    if HAVE_TORCH:
        xt = P(YN).requires_grad_()
        close(g, torch.autograd.grad(TF.hessian(lambda a: (a ** 4).sum(), xt, create_graph=True).sum(), xt)[0])


# ---------------------------------------------------------------------------- hvp / vhp
def test_hvp_vhp_quadratic():
    A = rand(4, 4, seed=10)
    b = rand(4, seed=11)
    x0 = rand(4, seed=12)
    v = rand(4, seed=13)
    S = (A + A.T) / 2

    def quad(x):
        M = M_of(x)
        Am = T(A) if M is ts else P(A) if M is not np else A
        bm = T(b) if M is ts else P(b) if M is not np else b
        return 0.5 * (x * (Am @ x)).sum() + (bm * x).sum()

    out, hv = F.hvp(quad, T(x0), T(v))
    np.testing.assert_allclose(float(N(out)), 0.5 * x0 @ A @ x0 + b @ x0, rtol=1e-12)
    np.testing.assert_allclose(N(hv), S @ v, rtol=1e-10)
    _, vh = F.vhp(quad, T(x0), T(v))
    np.testing.assert_allclose(N(vh), v @ S, rtol=1e-10)
    np.testing.assert_allclose(N(F.hessian(quad, T(x0))), S, rtol=1e-10)
    if HAVE_TORCH:
        close((out, hv), TF.hvp(quad, P(x0), P(v)))
        close((out, vh), TF.vhp(quad, P(x0), P(v)))


def mlp_loss(W1, b1, W2):
    M = M_of(W1)
    X = rand(5, 3, seed=20)
    y = rand(5, 2, seed=21)
    X, y = (T(X), T(y)) if M is ts else (P(X), P(y)) if M is not np else (X, y)
    h = M.tanh(X @ W1.T + b1)
    return ((h @ W2.T - y) ** 2).mean()


def test_hvp_vhp_mlp_loss():
    params = (rand(4, 3, seed=22), rand(4, seed=23), rand(2, 4, seed=24))
    vs = (rand(4, 3, seed=25), rand(4, seed=26), rand(2, 4, seed=27))
    tp = tuple(T(p) for p in params)
    tv = tuple(T(v) for v in vs)
    loss, hv = F.hvp(mlp_loss, tp, tv)
    _, vh = F.vhp(mlp_loss, tp, tv)
    assert isinstance(hv, tuple) and [tuple(t.shape) for t in hv] == [(4, 3), (4,), (2, 4)]
    close(loss, mlp_loss(*params), FD_TOL)
    H = F.hessian(mlp_loss, tp)
    want = tuple(sum(contract_in(N(H[i][j]), vs[j]) for j in range(3)) for i in range(3))
    close(hv, want, dict(rtol=1e-9, atol=1e-12))
    close(vh, want, dict(rtol=1e-9, atol=1e-12))  # the Hessian is symmetric
    Hfd = fd_hessian(mlp_loss, params)
    close(hv, tuple(sum(contract_in(Hfd[i][j], vs[j]) for j in range(3)) for i in range(3)), FD_TOL)
    if HAVE_TORCH:
        pp, pv = tuple(P(p) for p in params), tuple(P(v) for v in vs)
        close((loss, hv), TF.hvp(mlp_loss, pp, pv))
        close((loss, vh), TF.vhp(mlp_loss, pp, pv))


def test_hvp_vhp_create_graph():
    x = T(YN).requires_grad_()
    v = T(rand(3, seed=30))
    for fn in (F.hvp, F.vhp):
        _, r = fn(lambda a: (a ** 4).sum(), x, v, create_graph=True)
        assert r.requires_grad
        np.testing.assert_allclose(N(r), 12 * YN ** 2 * N(v), rtol=1e-12)
        (g,) = ts.autograd.grad(r.sum(), x)
        np.testing.assert_allclose(N(g), 24 * YN * N(v), rtol=1e-12)
        _, r0 = fn(lambda a: (a ** 4).sum(), x, v)
        assert not r0.requires_grad


# ---------------------------------------------------------------------------- errors
def test_strict_mode_errors():
    def indep0(x, y):
        return y * 2

    tx, ty = T(YN), T(YN)
    px, py = torch_or_none(lambda: P(YN)), torch_or_none(lambda: P(YN))
    v = T(np.ones(3))
    pv = torch_or_none(lambda: P(np.ones(3)))
    same_error(lambda: F.vjp(indep0, (tx, ty), v, strict=True),
               lambda: TF.vjp(indep0, (px, py), pv, strict=True), RuntimeError,
               "The output of the user-provided function is independent of input 0. This is not allowed in strict "
               "mode.")
    # non-strict: zeros
    _, r = F.vjp(indep0, (tx, ty), v)
    assert not N(r[0]).any() and np.allclose(N(r[1]), 2)
    same_error(lambda: F.jacobian(indep0, (tx, ty), strict=True),
               lambda: TF.jacobian(indep0, (px, py), strict=True), RuntimeError,
               "Output 0 of the user-provided function is independent of input 0. This is not allowed in strict "
               "mode.")
    same_error(lambda: F.jvp(indep0, (tx, ty), (v, v), strict=True),
               lambda: TF.jvp(indep0, (px, py), (pv, pv), strict=True), RuntimeError,
               "The output of the user-provided function is independent of input 0. This is not allowed in strict "
               "mode.")
    const = lambda x: ts.ones(3, dtype=ts.float64) if isinstance(x, ts.Tensor) else torch.ones(3, dtype=torch.float64)  # noqa: E731
    same_error(lambda: F.vjp(const, tx, v, strict=True), lambda: TF.vjp(const, px, pv, strict=True), RuntimeError,
               "Output 0 of the user-provided function does not require gradients.")
    linear = lambda x: (x * 2).sum()  # noqa: E731
    same_error(lambda: F.hessian(linear, tx, strict=True), lambda: TF.hessian(linear, px, strict=True), RuntimeError,
               "the jacobian of the user-provided function with respect to input 0 is independent of the input")
    same_error(lambda: F.hvp(linear, tx, v, strict=True), lambda: TF.hvp(linear, px, pv, strict=True), RuntimeError,
               "the jacobian of the user-provided function with respect to input 0 is independent of the input")
    same_error(lambda: F.jacobian(indep0, (tx, ty), strict=True, vectorize=True),
               lambda: TF.jacobian(indep0, (px, py), strict=True, vectorize=True), RuntimeError,
               "`strict=True` and `vectorized=True` are not supported together")


def test_bad_input_errors():
    tx, px = T(YN), torch_or_none(lambda: P(YN))
    sq = lambda x: x ** 2  # noqa: E731
    same_error(lambda: F.vjp(sq, [1.0, 2.0], None), lambda: TF.vjp(sq, [1.0, 2.0], None), TypeError,
               "The inputs given to vjp must be either a Tensor or a tuple of Tensors but the given inputs has type "
               "<class 'list'>.")
    same_error(lambda: F.jacobian(lambda x, y: x, (tx, 3.0)), lambda: TF.jacobian(lambda x, y: x, (px, 3.0)),
               TypeError, "but the value at index 1 has type <class 'float'>.")
    same_error(lambda: F.jacobian(lambda x: 3.0, tx), lambda: TF.jacobian(lambda x: 3.0, px), TypeError,
               "The outputs of the user-provided function given to jacobian must be either a Tensor or a tuple of "
               "Tensors")
    same_error(lambda: F.vjp(sq, tx), lambda: TF.vjp(sq, px), RuntimeError,
               "The vector v can only be None if the user-provided function returns a single Tensor with a single "
               "element.")
    same_error(lambda: F.jvp(sq, tx), lambda: TF.jvp(sq, px), RuntimeError,
               "The vector v can only be None if the input to the user-provided function is a single Tensor with a "
               "single element.")
    # v of the wrong shape / length (torch prints torch.Size, tessera tessera.Size)
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be tessera.Size\(\[3\]\) but got "
                                           r"tessera.Size\(\[4\]\)"):
        F.vjp(sq, tx, T(np.ones(4)))
    with pytest.raises(RuntimeError, match=r"Entry 1 in v has invalid size"):
        F.jvp(lambda a, b: a * b, (tx, tx), (tx, T(np.ones(2))))
    same_error(lambda: F.jvp(lambda a, b: a * b, (tx, tx), (tx,)), lambda: TF.jvp(lambda a, b: a * b, (px, px), (px,)),
               RuntimeError, "v is a tuple of invalid length: should be 2 but got 1.")
    same_error(lambda: F.vjp(sq, tx, (tx, tx)), lambda: TF.vjp(sq, px, (px, px)), RuntimeError,
               "The given v should contain a single Tensor.")
    # hessian / hvp need a scalar function
    same_error(lambda: F.hessian(sq, tx), lambda: TF.hessian(sq, px), RuntimeError,
               "The Tensor returned by the function given to hessian should contain a single element")
    same_error(lambda: F.vhp(lambda x: (x.sum(), x.sum()), tx, tx), lambda: TF.vhp(lambda x: (x.sum(), x.sum()), px, px),
               RuntimeError, "The function given to vhp should return a single Tensor")
    # strategies
    same_error(lambda: F.jacobian(sq, tx, strategy="forward-mode"),
               lambda: TF.jacobian(sq, px, strategy="forward-mode"), NotImplementedError,
               "only implemented for `vectorize=True`.")
    same_error(lambda: F.jacobian(sq, tx, strategy="forward-mode", vectorize=True, create_graph=True),
               lambda: TF.jacobian(sq, px, strategy="forward-mode", vectorize=True, create_graph=True),
               NotImplementedError, "`create_graph=True` and `strategy=\"forward-mode\"` are not supported together")
    same_error(lambda: F.jacobian(sq, tx, strategy="forward-mode", vectorize=True, strict=True),
               lambda: TF.jacobian(sq, px, strategy="forward-mode", vectorize=True, strict=True),
               RuntimeError, "`strict=True` and `strategy=\"forward-mode\"` are not supported together")
    same_error(lambda: F.jacobian(sq, tx, strategy="sideways"), lambda: TF.jacobian(sq, px, strategy="sideways"),
               AssertionError, 'Expected strategy to be either "forward-mode" or "reverse-mode".')
    same_error(lambda: F.hessian(sq, tx, outer_jacobian_strategy="sideways"),
               lambda: TF.hessian(sq, px, outer_jacobian_strategy="sideways"),
               AssertionError, 'Expected strategy to be either "forward-mode" or "reverse-mode".')


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_of_select(vectorize):
    J = F.jacobian(lambda x: x[:, 0] * 2, T(XN), vectorize=vectorize)
    want = np.zeros((2, 2, 3))
    want[0, 0, 0] = want[1, 1, 0] = 2
    np.testing.assert_allclose(N(J), want)


def test_captured_input_is_not_differentiated():
    # the function's own reference to the caller's tensor is a constant (torch's issue 32576 behaviour)
    x = T(YN)
    J = F.jacobian(lambda a: a * x, x)
    np.testing.assert_allclose(N(J), np.diag(YN))


def test_reachable_lazily():
    code = ("import sys, tessera\n"
            "assert 'tessera.autograd.functional' not in sys.modules\n"
            "assert 'tessera._functorch.vmap' not in sys.modules\n"
            "f = tessera.autograd.functional\n"
            "assert f.__name__ == 'tessera.autograd.functional' and callable(f.jacobian)\n"
            "from tessera.autograd.functional import vjp, jvp, jacobian, hessian, hvp, vhp\n"
            "from tessera.autograd import functional\n"
            "assert functional is f and sorted(f.__all__) == ['hessian', 'hvp', 'jacobian', 'jvp', 'vhp', 'vjp']\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    with pytest.raises(AttributeError):
        ts.autograd.no_such_submodule  # noqa: B018
