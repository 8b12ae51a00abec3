"""ASGD, Rprop, LBFGS, SparseAdam and optim.swa_utils: step-by-step trajectories against torch.optim
from the same weights and data, torch's state keys, and torch's messages for bad arguments.
Tests needing PyTorch skip without it (the `torch` fixture)."""
import numpy as np
import pytest

import tessera as ts

RNG = np.random.default_rng(0)
X = RNG.standard_normal((32, 5)).astype(np.float32)
Y = RNG.standard_normal((32, 1)).astype(np.float32)
W0 = RNG.standard_normal((5, 1)).astype(np.float32)
B0 = RNG.standard_normal((1,)).astype(np.float32)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _np(t):
    return t.detach().numpy().copy()


def _close(ours, theirs, rtol=1e-5, atol=1e-6, what=""):
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, err_msg=what)


# ---------------------------------------------------------------------------- ASGD and Rprop
def _trajectory(lib, optim_name, kwargs, steps=15):
    """Least squares x @ w + b ~ y; parameters after each step, and the optimizer."""
    w = lib.tensor(W0.copy(), requires_grad=True)
    b = lib.tensor(B0.copy(), requires_grad=True)
    opt = getattr(lib.optim, optim_name)([w, b], **kwargs)
    x, y = lib.tensor(X), lib.tensor(Y)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        ((x @ w + b - y) ** 2).mean().backward()
        opt.step()
        out.append(np.concatenate([_np(w).ravel(), _np(b)]))
    return np.stack(out), opt


CASES = [
    ("ASGD", {}), ("ASGD", {"lr": 0.05, "lambd": 1e-2, "alpha": 0.5, "t0": 3, "weight_decay": 0.1}),
    ("ASGD", {"lr": 0.02, "t0": 0, "maximize": True}),
    ("Rprop", {}), ("Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-4, 0.2)}),
    ("Rprop", {"lr": 0.001, "maximize": True}),
]


@pytest.mark.torch
@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_trajectory_and_state_match_torch(torch, name, kwargs):
    ours, opt = _trajectory(ts, name, kwargs)
    theirs, topt = _trajectory(torch, name, kwargs)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        _close(a, b, what=f"step {step + 1}")
    s, ts_state = opt.state_dict()["state"], topt.state_dict()["state"]
    assert s.keys() == ts_state.keys()
    for i in s:
        assert list(s[i]) == list(ts_state[i])
        for key, value in s[i].items():
            _close(np.asarray(value.numpy() if hasattr(value, "numpy") else value),
                   np.asarray(ts_state[i][key].numpy()), what=key)


def test_asgd_averages_after_t0():
    # with t0 = 0, ax restarts at the second iterate (mu, set after step t, is 1 / max(1, t - t0),
    # so step 2 still copies) and is then their running mean
    w = ts.tensor([1.0, -2.0], requires_grad=True)
    opt = ts.optim.ASGD([w], lr=0.1, lambd=0.0, t0=0)
    seen = []
    for _ in range(5):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
        seen.append(_np(w))
    np.testing.assert_allclose(opt.state[w]["ax"].numpy(), np.mean(seen[1:], axis=0), rtol=1e-6)


def test_rprop_backs_off_after_a_sign_flip():
    w = ts.tensor([1.0], requires_grad=True)
    opt = ts.optim.Rprop([w], lr=0.8, etas=(0.5, 1.2))
    moves = []
    for _ in range(4):
        opt.zero_grad()
        (w * w).sum().backward()
        before = w.item()
        opt.step()
        moves.append(w.item() - before)
    # 1 -> 0.2 (step 0.8), -> -0.76 (0.96: overshoot), flip: step halves and no move, then +0.48
    np.testing.assert_allclose(moves, [-0.8, -0.96, 0.0, 0.48], rtol=1e-6)


# ---------------------------------------------------------------------------- SparseAdam
IDX = [[0, 2, 2, 5], [1, 2], [7, 7, 0], [3], [5, 6, 0, 2]]
EMB0 = RNG.standard_normal((9, 3)).astype(np.float32)
TARGET = RNG.standard_normal((4, 3)).astype(np.float32)


def _embedding_run(lib, sparse, kwargs, steps=10):
    weight = lib.tensor(EMB0.copy(), requires_grad=True)
    opt = lib.optim.SparseAdam([weight], **kwargs)
    out = []
    for i in range(steps):
        idx = lib.tensor(IDX[i % len(IDX)])
        opt.zero_grad()
        rows = lib.nn.functional.embedding(idx, weight, sparse=sparse) if sparse else \
            lib.nn.functional.embedding(idx, weight)
        ((rows - lib.tensor(TARGET[:len(IDX[i % len(IDX)])])) ** 2).sum().backward()
        opt.step()
        out.append(_np(weight))
    return out, opt


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [{}, {"lr": 0.05, "betas": (0.8, 0.9), "eps": 1e-6}, {"lr": 0.01, "maximize": True}])
def test_sparse_adam_matches_torch_with_a_sparse_embedding(torch, kwargs):
    ours, opt = _embedding_run(ts, False, kwargs)  # tessera: dense gradient, rows picked by non-zero
    theirs, topt = _embedding_run(torch, True, kwargs)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        _close(a, b, what=f"step {step + 1}")
    st, tst = opt.state_dict()["state"][0], topt.state_dict()["state"][0]
    assert list(st) == list(tst) and st["step"] == tst["step"]
    _close(st["exp_avg"].numpy(), tst["exp_avg"].numpy())
    _close(st["exp_avg_sq"].numpy(), tst["exp_avg_sq"].numpy())


def test_sparse_adam_leaves_untouched_rows_alone():
    weight = ts.tensor(EMB0.copy(), requires_grad=True)
    opt = ts.optim.SparseAdam([weight], lr=0.1)
    for idx in ([1, 2], [2], [4]):
        opt.zero_grad()
        ts.nn.functional.embedding(ts.tensor(idx), weight).sum().backward()
        opt.step()
    w = _np(weight)
    untouched = [0, 3, 5, 6, 7, 8]
    np.testing.assert_array_equal(w[untouched], EMB0[untouched])
    assert not np.allclose(w[[1, 2, 4]], EMB0[[1, 2, 4]])
    # row 1's moments were not decayed at steps 2 and 3, unlike Adam's
    np.testing.assert_allclose(opt.state[weight]["exp_avg"].numpy()[1], 0.1, rtol=1e-6)
    assert opt.state[weight]["step"] == 3


def test_sparse_adam_one_dimensional_parameter_is_masked_per_element():
    p = ts.tensor([1.0, 2.0, 3.0], requires_grad=True)
    opt = ts.optim.SparseAdam([p], lr=0.5)
    (p * ts.tensor([0.0, 1.0, 0.0])).sum().backward()
    opt.step()
    np.testing.assert_allclose(_np(p), [1.0, 1.5, 3.0], rtol=1e-6)


# ---------------------------------------------------------------------------- LBFGS
A = RNG.standard_normal((20, 4)).astype(np.float32)
BV = RNG.standard_normal((20,)).astype(np.float32)


def _lbfgs_run(lib, problem, kwargs, steps, dtype="float32"):
    if problem == "lsq":
        w = lib.tensor(np.zeros(4, dtype=dtype), requires_grad=True)
        c = lib.tensor(np.zeros(1, dtype=dtype), requires_grad=True)
        params = [w, c]
        a, bv = lib.tensor(A.astype(dtype)), lib.tensor(BV.astype(dtype))

        def loss_fn():
            return ((a @ w + c - bv) ** 2).mean()
    else:  # Rosenbrock, from (-1.5, 2)
        xy = lib.tensor(np.array([-1.5, 2.0], dtype=dtype), requires_grad=True)
        params = [xy]

        def loss_fn():
            return (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2
    sign = -1.0 if kwargs.get("maximize") else 1.0
    opt = lib.optim.LBFGS(params, **kwargs)
    calls = [0]

    def closure():
        calls[0] += 1
        opt.zero_grad()
        loss = sign * loss_fn()
        loss.backward()
        return loss

    out = []
    for _ in range(steps):
        loss = opt.step(closure)
        out.append((np.concatenate([_np(p).ravel() for p in params]), float(loss.detach())))
    return out, opt, calls[0]


LBFGS_CASES = [
    ("lsq", {}, 2), ("lsq", {"lr": 0.5, "max_iter": 4, "history_size": 2}, 5),
    ("lsq", {"line_search_fn": "strong_wolfe"}, 2), ("lsq", {"max_iter": 10, "maximize": True, "lr": 0.3}, 3),
    ("lsq", {"tolerance_grad": 1e-2, "tolerance_change": 1e-3}, 2), ("lsq", {"max_iter": 6, "max_eval": 4}, 3),
    ("rosen", {"lr": 0.1, "max_iter": 5}, 6), ("rosen", {"line_search_fn": "strong_wolfe", "max_iter": 8}, 5),
    ("rosen", {"line_search_fn": "strong_wolfe", "history_size": 3, "max_iter": 30}, 2),
    ("rosen", {"line_search_fn": "strong_wolfe", "max_iter": 10, "max_eval": 6}, 3),
]


def _compare_lbfgs(torch, problem, kwargs, steps, dtype, rtol, atol, counts):
    ours, opt, calls = _lbfgs_run(ts, problem, kwargs, steps, dtype)
    theirs, topt, tcalls = _lbfgs_run(torch, problem, kwargs, steps, dtype)
    for step, ((p, loss), (tp, tloss)) in enumerate(zip(ours, theirs)):
        _close(p, tp, rtol=rtol, atol=atol, what=f"step {step + 1}")
        assert loss == pytest.approx(tloss, rel=rtol, abs=atol)
    st, tst = opt.state_dict()["state"][0], topt.state_dict()["state"][0]
    assert sorted(st) == sorted(tst)
    if counts:
        assert calls == tcalls
        assert (st["func_evals"], st["n_iter"]) == (tst["func_evals"], tst["n_iter"])
        assert len(st["old_dirs"]) == len(tst["old_dirs"])
        _close(st["d"].numpy(), tst["d"].numpy(), rtol=rtol, atol=1e-7)  # d is tiny near a minimum
        _close(float(st["t"]), float(tst["t"]), rtol=rtol, atol=atol)


@pytest.mark.torch
@pytest.mark.parametrize("problem,kwargs,steps", LBFGS_CASES,
                         ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(LBFGS_CASES)])
def test_lbfgs_matches_torch_float64(torch, problem, kwargs, steps):
    # in float64 rounding cannot decide a branch, so every iterate, evaluation count and the
    # stored state agree
    _compare_lbfgs(torch, problem, kwargs, steps, "float64", rtol=1e-6, atol=1e-8, counts=True)


@pytest.mark.torch
@pytest.mark.parametrize("case", [0, 1, 2, 4, 5, 9])
def test_lbfgs_matches_torch_float32(torch, case):
    # float32: reductions sum in another order than torch's, so the stopping rules that compare
    # loss changes against 1e-9 may end an iteration earlier or later; iterates still agree
    problem, kwargs, steps = LBFGS_CASES[case]
    _compare_lbfgs(torch, problem, kwargs, steps, "float32", rtol=1e-4, atol=1e-5, counts=False)


def test_lbfgs_solves_least_squares():
    ours, _, _ = _lbfgs_run(ts, "lsq", {"line_search_fn": "strong_wolfe"}, 3)
    design = np.hstack([A, np.ones((20, 1), np.float32)]).astype(np.float64)
    solution = np.linalg.lstsq(design, BV.astype(np.float64), rcond=None)[0]
    np.testing.assert_allclose(ours[-1][0], solution, rtol=1e-3, atol=1e-4)


def test_lbfgs_reaches_rosenbrock_minimum():
    ours, _, _ = _lbfgs_run(ts, "rosen", {"line_search_fn": "strong_wolfe", "max_iter": 100}, 3)
    np.testing.assert_allclose(ours[-1][0], [1.0, 1.0], atol=1e-3)


def test_lbfgs_rejects_groups_and_unknown_line_search():
    a, b = ts.zeros(2, requires_grad=True), ts.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match=r"LBFGS doesn't support per-parameter options \(parameter groups\)"):
        ts.optim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = ts.optim.LBFGS([a], line_search_fn="armijo")

    def closure():
        opt.zero_grad()
        loss = ((a - 1) ** 2).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)
    assert ts.optim.LBFGS([a], max_iter=8).defaults["max_eval"] == 10


# ---------------------------------------------------------------------------- swa_utils
def _lrs(lib, make, steps, n_groups=1, pre=None):
    params = [{"params": [lib.zeros(2, requires_grad=True)], "lr": 0.1 * (i + 1)} for i in range(n_groups)]
    opt = lib.optim.SGD(params, lr=0.1)
    if pre is not None:  # a schedule that runs before SWA starts
        sched = pre(lib, opt)
        for _ in range(4):
            opt.step()
            sched.step()
    swa = make(lib, opt)
    out = [[g["lr"] for g in opt.param_groups]]
    for _ in range(steps):
        opt.step()
        swa.step()
        out.append(swa.get_last_lr())
    return out


SWALR_CASES = {
    "cos": lambda lib, opt: lib.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=5),
    "linear": lambda lib, opt: lib.optim.swa_utils.SWALR(opt, swa_lr=0.5, anneal_epochs=3, anneal_strategy="linear"),
    "zero_epochs": lambda lib, opt: lib.optim.swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=0),
    "per_group": lambda lib, opt: lib.optim.swa_utils.SWALR(opt, swa_lr=[0.01, 0.3], anneal_epochs=4),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(SWALR_CASES))
def test_swalr_sequence_matches_torch(torch, name):
    groups = 2 if name == "per_group" else 1
    ours = _lrs(ts, SWALR_CASES[name], 12, groups)
    theirs = _lrs(torch, SWALR_CASES[name], 12, groups)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    cosine = lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)  # noqa: E731
    np.testing.assert_allclose(_lrs(ts, SWALR_CASES[name], 8, groups, pre=cosine),
                               _lrs(torch, SWALR_CASES[name], 8, groups, pre=cosine), rtol=1e-12)


def test_swalr_closed_form_and_state_dict():
    lrs = _lrs(ts, SWALR_CASES["linear"], 5)
    # linear from 0.1 to 0.5 over 3 epochs, then held
    np.testing.assert_allclose([lr[0] for lr in lrs], [0.1, 0.1 + 0.4 / 3, 0.1 + 0.8 / 3, 0.5, 0.5, 0.5], rtol=1e-12)
    opt = ts.optim.SGD([ts.zeros(1, requires_grad=True)], lr=1.0)
    sched = ts.optim.swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="linear")
    state = sched.state_dict()
    assert "anneal_func" not in state and "optimizer" not in state
    other = ts.optim.swa_utils.SWALR(opt, swa_lr=0.1)
    other.load_state_dict(state)
    assert other.anneal_func(0.3) == 0.3


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.BatchNorm1d(3), lib.nn.ReLU(), lib.nn.Linear(3, 1))


MW = [RNG.standard_normal(s).astype(np.float32) for s in [(3, 4), (3,), (3,), (3,), (1, 3), (1,)]]
DATA = [(RNG.standard_normal((8, 4)).astype(np.float32), RNG.standard_normal((8, 1)).astype(np.float32))
        for _ in range(5)]


def _init_model(lib):
    model = _model(lib)
    with lib.no_grad():
        for p, value in zip(model.parameters(), MW):
            p.copy_(lib.tensor(value))
    return model


def _swa_run(lib, make_avg, steps=6):
    model = _init_model(lib)
    avg = make_avg(lib, model)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    snapshots = []
    for i in range(steps):
        x, y = DATA[i % len(DATA)]
        opt.zero_grad()
        ((model(lib.tensor(x)) - lib.tensor(y)) ** 2).mean().backward()
        opt.step()
        avg.update_parameters(model)
        snapshots.append(([_np(p) for p in avg.parameters()], [_np(b) for b in avg.module.buffers()],
                          int(avg.n_averaged.item())))
    return snapshots, avg


AVG_CASES = {
    "swa": lambda lib, m: lib.optim.swa_utils.AveragedModel(m),
    "ema_avg_fn": lambda lib, m: lib.optim.swa_utils.AveragedModel(m, avg_fn=lib.optim.swa_utils.get_ema_avg_fn(0.8)),
    "ema_multi": lambda lib, m: lib.optim.swa_utils.AveragedModel(
        m, multi_avg_fn=lib.optim.swa_utils.get_ema_multi_avg_fn(0.7)),
    "swa_multi": lambda lib, m: lib.optim.swa_utils.AveragedModel(
        m, multi_avg_fn=lib.optim.swa_utils.get_swa_multi_avg_fn()),
    "ema_buffers": lambda lib, m: lib.optim.swa_utils.AveragedModel(
        m, multi_avg_fn=lib.optim.swa_utils.get_ema_multi_avg_fn(0.9), use_buffers=True),
    "swa_buffers": lambda lib, m: lib.optim.swa_utils.AveragedModel(m, use_buffers=True),
    "custom": lambda lib, m: lib.optim.swa_utils.AveragedModel(m, avg_fn=lambda a, c, n: 0.5 * a + 0.5 * c),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(AVG_CASES))
def test_averaged_model_matches_torch(torch, name):
    ours, avg = _swa_run(ts, AVG_CASES[name])
    theirs, tavg = _swa_run(torch, AVG_CASES[name])
    for step, ((p, b, n), (tp, tb, tn)) in enumerate(zip(ours, theirs)):
        assert n == tn == step + 1
        for a, t in zip(p + b, tp + tb):
            _close(a, t, what=f"{name} step {step + 1}")
    assert list(avg.state_dict()) == list(tavg.state_dict())
    x = DATA[0][0]
    avg.eval()
    tavg.eval()
    _close(_np(avg(ts.tensor(x))), _np(tavg(torch.tensor(x))))


def test_averaged_model_default_is_the_mean_of_the_iterates():
    model = _init_model(ts)
    swa = ts.optim.swa_utils.AveragedModel(model)
    seen = []
    opt = ts.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DATA:
        opt.zero_grad()
        ((model(ts.tensor(x)) - ts.tensor(y)) ** 2).mean().backward()
        opt.step()
        swa.update_parameters(model)
        seen.append([_np(p) for p in model.parameters()])
    for i, p in enumerate(swa.parameters()):
        np.testing.assert_allclose(_np(p), np.mean([s[i] for s in seen], axis=0), rtol=1e-5, atol=1e-6)
    # buffers are copied, not averaged, without use_buffers
    np.testing.assert_array_equal(swa.module[1].running_mean.numpy(), model[1].running_mean.numpy())
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn should be provided"):
        ts.optim.swa_utils.AveragedModel(model, avg_fn=lambda a, c, n: a, multi_avg_fn=lambda a, c, n: None)


def _bn_run(lib, momentum=0.1, as_tuples=True, device=None):
    model = _init_model(lib)
    model[1].momentum = momentum
    model.eval()
    loader = [(lib.tensor(x), lib.tensor(y)) if as_tuples else lib.tensor(x) for x, y in DATA]
    lib.optim.swa_utils.update_bn(loader, model, device=device)
    bn = model[1]
    return model, [_np(bn.running_mean), _np(bn.running_var), int(bn.num_batches_tracked.item())]


@pytest.mark.torch
@pytest.mark.parametrize("as_tuples", [True, False])
def test_update_bn_matches_torch(torch, as_tuples):
    model, ours = _bn_run(ts, as_tuples=as_tuples)
    _, theirs = _bn_run(torch, as_tuples=as_tuples)
    _close(ours[0], theirs[0])
    _close(ours[1], theirs[1])
    assert ours[2] == theirs[2] == len(DATA)


def test_update_bn_averages_the_batches_and_restores_the_model():
    model, (mean, var, n) = _bn_run(ts, momentum=0.3, device="cpu")
    assert not model.training and model[1].momentum == 0.3 and n == len(DATA)
    # momentum None during the pass: the running mean is the plain mean of the batch means
    with ts.no_grad():
        feats = [_np(model[0](ts.tensor(x))) for x, _ in DATA]
    np.testing.assert_allclose(mean, np.mean([f.mean(0) for f in feats], axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, np.mean([f.var(0, ddof=1) for f in feats], axis=0), rtol=1e-5, atol=1e-6)
    ts.optim.swa_utils.update_bn([], ts.nn.Linear(2, 2))  # no BatchNorm: nothing to do


# ---------------------------------------------------------------------------- arguments and surface
def test_bad_hyperparameters_raise_torchs_messages():
    w = ts.zeros(2, requires_grad=True)
    optim = ts.optim
    bad = [
        (lambda: optim.ASGD([w], lr=-1), "Invalid learning rate: -1"),
        (lambda: optim.ASGD([w], lambd=-0.5), "Invalid lambd value: -0.5"),
        (lambda: optim.ASGD([w], alpha=-1), "Invalid alpha value: -1"),
        (lambda: optim.ASGD([w], weight_decay=-1), "Invalid weight_decay value: -1"),
        (lambda: optim.Rprop([w], lr=-0.1), "Invalid learning rate: -0.1"),
        (lambda: optim.Rprop([w], etas=(1.1, 1.2)), "Invalid eta values: 1.1, 1.2"),
        (lambda: optim.Rprop([w], etas=(0.5, 0.9)), "Invalid eta values: 0.5, 0.9"),
        (lambda: optim.LBFGS([w], lr=-1), "Invalid learning rate: -1"),
        (lambda: optim.SparseAdam([w], lr=0.0), "Invalid learning rate: 0.0"),
        (lambda: optim.SparseAdam([w], eps=0.0), "Invalid epsilon value: 0.0"),
        (lambda: optim.SparseAdam([w], betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
        (lambda: optim.SparseAdam([w], betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
        (lambda: optim.swa_utils.get_ema_avg_fn(1.5),
         r"Invalid decay value 1.5 provided. Please provide a value in \[0,1\] range."),
        (lambda: optim.swa_utils.get_ema_multi_avg_fn(-0.1), "Invalid decay value -0.1"),
        (lambda: optim.swa_utils.SWALR(optim.SGD([w], lr=0.1), swa_lr=0.1, anneal_strategy="exp"),
         "anneal_strategy must be one of 'cos' or 'linear', instead got exp"),
        (lambda: optim.swa_utils.SWALR(optim.SGD([w], lr=0.1), swa_lr=0.1, anneal_epochs=-1),
         "anneal_epochs must be equal or greater than 0, got -1"),
        (lambda: optim.swa_utils.SWALR(optim.SGD([w], lr=0.1), swa_lr=0.1, anneal_epochs=2.5),
         "anneal_epochs must be equal or greater than 0, got 2.5"),
        (lambda: optim.swa_utils.SWALR(optim.SGD([w], lr=0.1), swa_lr=[0.1, 0.2]),
         r"swa_lr must have the same length as optimizer.param_groups. swa_lr has 2 values, param_groups has 1."),
    ]
    for make, message in bad:
        with pytest.raises(ValueError, match=message):
            make()


@pytest.mark.torch
def test_messages_and_defaults_are_torchs(torch):
    for name in ("ASGD", "Rprop", "LBFGS", "SparseAdam"):
        ours = getattr(ts.optim, name)([ts.zeros(2, requires_grad=True)]).defaults
        theirs = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)]).defaults
        assert ours == theirs, name
    for make in (lambda lib, w: lib.optim.Rprop([w], etas=(0.0, 2.0)),
                 lambda lib, w: lib.optim.ASGD([w], alpha=-2.0)):
        with pytest.raises(ValueError) as ours:
            make(ts, ts.zeros(1, requires_grad=True))
        with pytest.raises(ValueError) as theirs:
            make(torch, torch.zeros(1, requires_grad=True))
        assert str(ours.value) == str(theirs.value)


def test_exports_and_keywords():
    optim = ts.optim
    for name in ("ASGD", "Rprop", "LBFGS", "SparseAdam", "swa_utils"):
        assert name in optim.__all__ and hasattr(optim, name)
    for name in ("AveragedModel", "SWALR", "update_bn", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
                 "get_ema_avg_fn", "get_swa_avg_fn"):
        assert name in optim.swa_utils.__all__ and hasattr(optim.swa_utils, name)
    w = ts.zeros(2, requires_grad=True)
    optim.ASGD([w], foreach=False, maximize=True, differentiable=False, capturable=False)
    optim.Rprop([w], capturable=False, foreach=None, maximize=True, differentiable=False)
    optim.LBFGS([w], maximize=True)
    optim.SparseAdam([w], maximize=True)


@pytest.mark.parametrize("name,kwargs", [("ASGD", {"t0": 1}), ("Rprop", {}), ("SparseAdam", {"lr": 0.05}),
                                         ("LBFGS", {"max_iter": 3, "history_size": 2})])
def test_state_dict_round_trip_continues_the_trajectory(name, kwargs):
    def run(opt, p, steps):
        for _ in range(steps):
            def closure():
                opt.zero_grad()
                loss = ((ts.tensor(X) @ p - ts.tensor(Y)) ** 2).mean()
                loss.backward()
                return loss
            opt.step(closure)

    w = ts.tensor(W0.copy(), requires_grad=True)
    opt = getattr(ts.optim, name)([w], **kwargs)
    run(opt, w, 3)
    w2 = ts.tensor(_np(w), requires_grad=True)
    opt2 = getattr(ts.optim, name)([w2], **kwargs)
    opt2.load_state_dict(opt.state_dict())
    run(opt, w, 2)
    run(opt2, w2, 2)
    np.testing.assert_allclose(_np(w), _np(w2), rtol=1e-6)
