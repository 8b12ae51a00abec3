"""Adam / AdamW's fused step (the CPU plugin's _fused_adam_: one pass per parameter) against the
operator-by-operator step (foreach=False) and against torch.optim, over every option; parameters
it cannot take (non-contiguous) fall back to the unfused step; the operator's errors."""
import numpy as np
import pytest

import tessera as ts

CASES = [dict(), dict(amsgrad=True), dict(weight_decay=0.1), dict(maximize=True), dict(betas=(0.8, 0.9), eps=1e-6)]


def _run(lib, cls, dtype, kw, steps=6, foreach=None):
    rng = np.random.default_rng(0)
    w = lib.tensor(rng.standard_normal((7, 5)).astype(dtype), requires_grad=True)
    b = lib.tensor(rng.standard_normal(5).astype(dtype), requires_grad=True)
    x = lib.tensor(rng.standard_normal((4, 7)).astype(dtype))
    extra = {} if foreach is None else {"foreach": foreach}
    opt = getattr(lib.optim, cls)([w, b], lr=0.05, **kw, **extra)
    for _ in range(steps):
        opt.zero_grad()
        (((x @ w + b) ** 2).mean() + (w ** 3).sum() * 0.01).backward()
        opt.step()
    return w.detach().numpy(), b.detach().numpy()


@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
@pytest.mark.parametrize("kw", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_matches_unfused(cls, kw, dtype):
    fused = _run(ts, cls, dtype, kw)
    plain = _run(ts, cls, dtype, kw, foreach=False)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, b in zip(fused, plain):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
@pytest.mark.parametrize("kw", CASES)
def test_fused_matches_torch(cls, kw):
    torch = pytest.importorskip("torch")
    for a, b in zip(_run(ts, cls, np.float64, kw), _run(torch, cls, np.float64, kw)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_the_fused_step_is_taken(monkeypatch):
    from tessera.optim import adam
    calls = []
    real = adam._call
    monkeypatch.setattr(adam, "_call", lambda name, *a: calls.append(name) or real(name, *a))
    p = ts.zeros(5, requires_grad=True)
    p.grad = ts.ones(5)
    ts.optim.AdamW([p], lr=0.1).step()
    assert calls == ["_fused_adam_"]
    calls.clear()
    ts.optim.Adam([p], lr=0.1, foreach=False).step()
    assert calls == []


def test_non_contiguous_parameters_take_the_unfused_step():
    base = ts.randn(6, 4)
    p = base.t().clone().t().requires_grad_()  # a transposed layout: not contiguous
    assert not p.is_contiguous()
    opt = ts.optim.Adam([p], lr=0.1)
    p.sum().backward()
    before = p.detach().clone()
    opt.step()
    np.testing.assert_allclose((before - p.detach()).numpy(), np.full((6, 4), 0.1), rtol=1e-5)


def test_operator_errors():
    p, m, v, g = (ts.zeros(3) for _ in range(4))
    with pytest.raises(TypeError, match="_fused_adam_: expected float32 or float64"):
        ts.ops.aten._fused_adam_(p.half(), m, v, g, None, 0.1, 0.9, 0.999, 1e-8, 0.0, 0.1, 0.1, False, False)
    with pytest.raises(ValueError, match="expected grad of shape \\[3\\]"):
        ts.ops.aten._fused_adam_(p, m, v, ts.zeros(4), None, 0.1, 0.9, 0.999, 1e-8, 0.0, 0.1, 0.1, False, False)
    with pytest.raises(TypeError, match="expected exp_avg of dtype float32"):
        ts.ops.aten._fused_adam_(p, m.double(), v, g, None, 0.1, 0.9, 0.999, 1e-8, 0.0, 0.1, 0.1, False, False)
