"""tessera.optim: each optimizer's updates against a NumPy implementation of torch's rule over
several steps, param groups and state_dict in torch's format, lr schedulers, and training loops
(loss falls; matches PyTorch step for step when it is installed)."""
import copy
import math

import numpy as np
import pytest

import tessera as ts
from conftest import assert_close, from_np, to_np

nn = ts.nn
optim = ts.optim
FLOATS = [ts.float32, ts.float64]
STEPS = 6


# ---------------------------------------------------------------------------- NumPy references (torch's rules)
def np_sgd(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    buf = None
    for g in grads:
        g = -g if maximize else g
        if weight_decay:
            g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def np_adam(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
            decoupled=False):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    vmax = np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        g = -g if maximize else g
        if weight_decay:
            if decoupled:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        bc1 = 1 - betas[0] ** t
        bc2 = 1 - betas[1] ** t
        if amsgrad:
            vmax = np.maximum(vmax, v)
            denom = np.sqrt(vmax) / math.sqrt(bc2) + eps
        else:
            denom = np.sqrt(v) / math.sqrt(bc2) + eps
        p = p - lr / bc1 * m / denom
    return p


def np_rmsprop(p, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
               maximize=False):
    sq = np.zeros_like(p)
    gavg = np.zeros_like(p)
    buf = np.zeros_like(p)
    for g in grads:
        g = -g if maximize else g
        if weight_decay:
            g = g + weight_decay * p
        sq = alpha * sq + (1 - alpha) * g * g
        if centered:
            gavg = alpha * gavg + (1 - alpha) * g
            avg = np.sqrt(sq - gavg * gavg) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum > 0:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
    return p


def run_steps(opt_factory, dtype, shape=(3, 4), steps=STEPS, seed=0):
    """Applies `steps` updates with hand-set gradients; returns (initial, grads, final) as NumPy."""
    rng = np.random.default_rng(seed)
    p0 = rng.normal(size=shape)
    grads = [rng.normal(size=shape) for _ in range(steps)]
    p = nn.Parameter(from_np(p0, dtype))
    opt = opt_factory([p])
    for g in grads:
        opt.zero_grad()
        p.grad = from_np(g, dtype)
        opt.step()
    return p0, grads, to_np(p), opt


def tols(dtype):
    return dict(rtol=2e-5, atol=2e-6) if dtype == ts.float32 else dict(rtol=1e-11, atol=1e-12)


SGD_CASES = [dict(lr=0.1), dict(lr=0.05, momentum=0.9), dict(lr=0.05, momentum=0.9, dampening=0.3),
             dict(lr=0.05, momentum=0.8, nesterov=True), dict(lr=0.1, weight_decay=0.01, momentum=0.5),
             dict(lr=0.1, maximize=True, momentum=0.9)]
ADAM_CASES = [dict(), dict(lr=0.01, betas=(0.8, 0.9)), dict(lr=0.01, weight_decay=0.1), dict(lr=0.01, amsgrad=True),
              dict(lr=0.01, maximize=True, eps=1e-6)]
RMSPROP_CASES = [dict(), dict(lr=0.01, alpha=0.9), dict(centered=True), dict(momentum=0.9),
                 dict(centered=True, momentum=0.5, weight_decay=0.1), dict(maximize=True)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", SGD_CASES, ids=str)
def test_sgd_matches_reference(dtype, kw):
    p0, grads, got, _ = run_steps(lambda ps: optim.SGD(ps, **kw), dtype)
    np.testing.assert_allclose(got, np_sgd(p0, grads, **kw), **tols(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", ADAM_CASES, ids=str)
def test_adam_matches_reference(dtype, kw):
    p0, grads, got, opt = run_steps(lambda ps: optim.Adam(ps, **kw), dtype)
    np.testing.assert_allclose(got, np_adam(p0, grads, **kw), **tols(dtype))
    st = opt.state[opt.param_groups[0]["params"][0]]
    assert st["step"].item() == STEPS
    assert set(st) == {"step", "exp_avg", "exp_avg_sq"} | ({"max_exp_avg_sq"} if kw.get("amsgrad") else set())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", [dict(), dict(lr=0.01, weight_decay=0.1), dict(lr=0.01, amsgrad=True,
                                                                              weight_decay=0.5)], ids=str)
def test_adamw_matches_reference(dtype, kw):
    p0, grads, got, opt = run_steps(lambda ps: optim.AdamW(ps, **kw), dtype)
    ref_kw = dict(kw)
    ref_kw.setdefault("weight_decay", 1e-2)
    np.testing.assert_allclose(got, np_adam(p0, grads, decoupled=True, **ref_kw), **tols(dtype))
    assert opt.defaults["weight_decay"] == ref_kw["weight_decay"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", RMSPROP_CASES, ids=str)
def test_rmsprop_matches_reference(dtype, kw):
    p0, grads, got, _ = run_steps(lambda ps: optim.RMSprop(ps, **kw), dtype)
    np.testing.assert_allclose(got, np_rmsprop(p0, grads, **kw), **tols(dtype))


def test_updates_are_in_place_and_skip_params_without_grad():
    a = nn.Parameter(ts.ones(3))
    b = nn.Parameter(ts.ones(2))
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = ts.ones(3)
    before = a
    opt.step()
    assert a is before
    assert_close(b, np.ones(2))
    assert b not in opt.state and a in opt.state
    assert_close(a, np.full(3, 0.9), rtol=1e-6, atol=1e-7)


def test_noncontiguous_and_zero_size_params():
    p = nn.Parameter(ts.zeros(0))
    q = nn.Parameter(ts.ones(2, 3))
    opt = optim.SGD([p, q], lr=0.5, momentum=0.9)
    p.grad = ts.zeros(0)
    g = ts.ones(3, 2).T  # a non-contiguous gradient
    assert not g.is_contiguous()
    q.grad = g
    opt.step()
    assert_close(q, np.full((2, 3), 0.5))
    assert tuple(p.shape) == (0,)


# ---------------------------------------------------------------------------- groups, zero_grad, errors
def test_param_groups_and_defaults():
    a, b = nn.Parameter(ts.ones(2)), nn.Parameter(ts.ones(2))
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["momentum"] == 0
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["params"] == [b]
    a.grad = ts.ones(2)
    b.grad = ts.ones(2)
    opt.step()
    assert_close(a, np.full(2, 0.9), rtol=1e-6)
    assert_close(b, np.full(2, 0.5), rtol=1e-6)
    c = nn.Parameter(ts.ones(1))
    opt.add_param_group({"params": [c], "lr": 1.0})
    assert len(opt.param_groups) == 3 and opt.param_groups[2]["momentum"] == 0
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    assert "Parameter Group 1" in repr(opt)


def test_zero_grad_modes():
    p = nn.Parameter(ts.ones(2))
    opt = optim.SGD([p], lr=0.1)
    p.grad = ts.ones(2)
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert_close(g, np.zeros(2))
    opt.zero_grad()
    assert p.grad is None


def test_constructor_errors():
    p = nn.Parameter(ts.ones(1))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError):
        optim.SGD(p, lr=0.1)  # a tensor, not an iterable of tensors
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="duplicate"):
        optim.SGD([p, p], lr=0.1)
    with pytest.raises(TypeError, match="sets"):
        optim.SGD([{"params": {p}}], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)


# ---------------------------------------------------------------------------- state_dict
def test_state_dict_format_and_resume():
    rng = np.random.default_rng(1)
    grads = [[rng.normal(size=(2, 2)), rng.normal(size=3)] for _ in range(6)]

    def make():
        w = nn.Parameter(from_np(np.arange(4.0).reshape(2, 2), ts.float64))
        b = nn.Parameter(from_np(np.ones(3), ts.float64))
        return [w, b], optim.Adam([{"params": [w]}, {"params": [b], "lr": 0.05}], lr=0.01, amsgrad=True)

    def steps(params, opt, gs):
        for g in gs:
            for p, gi in zip(params, g):
                p.grad = from_np(gi, ts.float64)
            opt.step()

    params, opt = make()
    steps(params, opt, grads)
    ref = [to_np(p) for p in params]

    params, opt = make()
    steps(params, opt, grads[:3])
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert sd["param_groups"][1]["lr"] == 0.05 and sd["param_groups"][0]["amsgrad"] is True
    assert set(sd["state"]) == {0, 1} and set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    saved = copy.deepcopy(sd)
    snapshot = [to_np(p) for p in params]

    params2, opt2 = make()
    with ts.no_grad():
        for p, s in zip(params2, snapshot):
            p.copy_(from_np(s, ts.float64))
    opt2.load_state_dict(saved)
    assert opt2.state[params2[0]]["exp_avg"] is not saved["state"][0]["exp_avg"]  # copied
    steps(params2, opt2, grads[3:])
    for got, want in zip(params2, ref):
        np.testing.assert_allclose(to_np(got), want, rtol=1e-12, atol=1e-14)


def test_load_state_dict_casts_and_validates():
    p = nn.Parameter(ts.ones(2, dtype=ts.float32))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    sd = {"state": {0: {"momentum_buffer": ts.ones(2, dtype=ts.float64)}},
          "param_groups": [{"lr": 0.2, "momentum": 0.9, "dampening": 0, "weight_decay": 0, "nesterov": False,
                            "maximize": False, "foreach": None, "differentiable": False, "fused": None,
                            "params": [0]}]}
    opt.load_state_dict(sd)
    assert opt.state[p]["momentum_buffer"].dtype == ts.float32
    assert opt.param_groups[0]["lr"] == 0.2 and opt.param_groups[0]["params"][0] is p
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    bad = copy.deepcopy(sd)
    bad["param_groups"][0]["params"] = [0, 1]
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(bad)


def test_optimizer_state_survives_ts_save(tmp_path):
    p = nn.Parameter(ts.ones(3))
    opt = optim.Adam([p])
    p.grad = ts.ones(3)
    opt.step()
    tensors = {f"{k}.{name}": v for k, st in opt.state_dict()["state"].items() for name, v in st.items()}
    path = str(tmp_path / "opt.safetensors")
    ts.save(tensors, path)
    back = ts.load(path)
    assert_close(back["0.exp_avg"], to_np(opt.state[p]["exp_avg"]))


# ---------------------------------------------------------------------------- lr schedulers
def lrs(sched_factory, epochs, lr=1.0):
    p = nn.Parameter(ts.ones(1))
    opt = optim.SGD([p], lr=lr)
    sched = sched_factory(opt)
    out = [sched.get_last_lr()[0]]
    for _ in range(epochs):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
        assert opt.param_groups[0]["lr"] == out[-1]
    return out, sched, opt


def test_step_lr():
    got, _, _ = lrs(lambda o: optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5), 9)
    np.testing.assert_allclose(got, [0.5 ** (e // 3) for e in range(10)])


def test_cosine_annealing_lr():
    got, _, _ = lrs(lambda o: optim.lr_scheduler.CosineAnnealingLR(o, T_max=5, eta_min=0.1), 12, lr=0.5)
    ref = [0.1 + 0.4 * (1 + math.cos(math.pi * e / 5)) / 2 for e in range(13)]
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)


def test_lambda_lr_and_state_dict():
    got, sched, opt = lrs(lambda o: optim.lr_scheduler.LambdaLR(o, lambda e: 0.9 ** e), 4, lr=0.2)
    np.testing.assert_allclose(got, [0.2 * 0.9 ** e for e in range(5)])
    sd = sched.state_dict()
    assert sd["last_epoch"] == 4 and sd["base_lrs"] == [0.2] and sd["lr_lambdas"] == [None]
    assert "optimizer" not in sd
    p = nn.Parameter(ts.ones(1))
    opt2 = optim.SGD([p], lr=0.2)
    s2 = optim.lr_scheduler.LambdaLR(opt2, lambda e: 0.9 ** e)
    s2.load_state_dict(sd)
    assert s2.last_epoch == 4
    opt2.step()
    s2.step()
    assert s2.get_last_lr()[0] == pytest.approx(0.2 * 0.9 ** 5)
    with pytest.raises(ValueError):
        optim.lr_scheduler.LambdaLR(opt2, [lambda e: 1.0, lambda e: 2.0])


def test_step_lr_state_dict_round_trip_and_resume():
    _, sched, opt = lrs(lambda o: optim.lr_scheduler.StepLR(o, 2, 0.1), 3)
    sd = sched.state_dict()
    assert sd["step_size"] == 2 and sd["gamma"] == 0.1 and sd["last_epoch"] == 3
    p = nn.Parameter(ts.ones(1))
    opt2 = optim.SGD([p], lr=1.0)
    opt2.load_state_dict(opt.state_dict())
    s2 = optim.lr_scheduler.StepLR(opt2, 2, 0.1, last_epoch=-1)
    s2.load_state_dict(sd)
    s2.step()
    assert s2.get_last_lr()[0] == pytest.approx(0.01)


# ---------------------------------------------------------------------------- training
def make_blobs(n=120, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    y = rng.integers(0, 3, size=n)
    x = centers[y] + rng.normal(scale=0.6, size=(n, 2))
    return x.astype(np.float32), y


@pytest.mark.parametrize("opt_factory", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: optim.Adam(ps, lr=0.02),
    lambda ps: optim.AdamW(ps, lr=0.02),
    lambda ps: optim.RMSprop(ps, lr=0.01),
], ids=["sgd", "adam", "adamw", "rmsprop"])
def test_training_loss_falls(opt_factory):
    ts.manual_seed(0)
    xn, yn = make_blobs()
    x, y = from_np(xn), ts.tensor(yn.tolist())
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = opt_factory(model.parameters())
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    acc = (to_np(model(x)).argmax(1) == yn).mean()
    assert acc > 0.9


def test_closure_is_called_with_grad_enabled():
    p = nn.Parameter(ts.tensor([3.0]))
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with ts.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 9.0
    assert_close(p, [1.5])


@pytest.mark.torch
@pytest.mark.parametrize("which", ["sgd", "adam", "adamw", "rmsprop"])
def test_training_matches_pytorch(which):
    """The same CNN from the same weights, trained 20 steps in both frameworks: equal losses."""
    torch = pytest.importorskip("torch")
    ts.manual_seed(0)
    rng = np.random.default_rng(0)
    xn = rng.normal(size=(16, 1, 8, 8)).astype(np.float32)
    yn = rng.integers(0, 4, size=16)

    def build(lib):
        n = lib.nn
        return n.Sequential(n.Conv2d(1, 4, 3, padding=1), n.ReLU(), n.MaxPool2d(2), n.Conv2d(4, 8, 3, padding=1),
                            n.BatchNorm2d(8), n.GELU(), n.AdaptiveAvgPool2d(1), n.Flatten(), n.Linear(8, 4))

    m_ts, m_th = build(ts), build(torch)
    with torch.no_grad():
        for (name, p), (name2, q) in zip(m_ts.state_dict().items(), m_th.state_dict().items()):
            assert name == name2
            q.copy_(torch.tensor(to_np(p)))
    factories = {
        "sgd": lambda lib, ps: lib.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3),
        "adam": lambda lib, ps: lib.optim.Adam(ps, lr=0.01),
        "adamw": lambda lib, ps: lib.optim.AdamW(ps, lr=0.01, amsgrad=True),
        "rmsprop": lambda lib, ps: lib.optim.RMSprop(ps, lr=0.005, centered=True, momentum=0.5),
    }
    o_ts, o_th = factories[which](ts, m_ts.parameters()), factories[which](torch, m_th.parameters())
    x_ts, y_ts = from_np(xn), ts.tensor(yn.tolist())
    x_th, y_th = torch.tensor(xn), torch.tensor(yn)
    for step in range(20):
        for model, opt, x, y, lib in ((m_ts, o_ts, x_ts, y_ts, ts), (m_th, o_th, x_th, y_th, torch)):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(x), y, label_smoothing=0.05)
            loss.backward()
            opt.step()
            if lib is ts:
                l_ts = loss.item()
            else:
                l_th = loss.item()
        assert abs(l_ts - l_th) < 1e-4, (step, l_ts, l_th)


@pytest.mark.torch
def test_schedulers_match_pytorch():
    torch = pytest.importorskip("torch")
    factories = [
        lambda lib, o: lib.optim.lr_scheduler.StepLR(o, 3, 0.3),
        lambda lib, o: lib.optim.lr_scheduler.CosineAnnealingLR(o, 4, eta_min=0.01),
        lambda lib, o: lib.optim.lr_scheduler.LambdaLR(o, lambda e: 1.0 / (1 + e)),
    ]
    for make in factories:
        seqs = []
        for lib, p in ((ts, nn.Parameter(ts.ones(1))), (torch, torch.nn.Parameter(torch.ones(1)))):
            opt = lib.optim.SGD([p], lr=0.3)
            sched = make(lib, opt)
            seq = [sched.get_last_lr()[0]]
            for _ in range(11):
                opt.step()
                sched.step()
                seq.append(sched.get_last_lr()[0])
            seqs.append(seq)
        np.testing.assert_allclose(seqs[0], seqs[1], rtol=1e-12)


@pytest.mark.slow
def test_train_digits_example(tmp_path):
    """examples/train_digits.py end to end: >= 97% test accuracy, and the model saved with ts.save
    and reloaded with ts.load scores the same."""
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train_digits.py")
    spec = importlib.util.spec_from_file_location("train_digits", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--out", str(tmp_path / "digits.safetensors")]) == 0
    assert os.path.exists(tmp_path / "digits.safetensors")
