"""optim.Adafactor: torch's update rule (factored second moment for >= 2-D parameters), checks,
defaults and state_dict, against torch's trajectories over 20 steps."""
import numpy as np
import pytest

import tessera as ts

RNG = np.random.default_rng(0)
SHAPES = [(4, 5), (3,), (2, 3, 4)]
INITS = [RNG.standard_normal(s).astype(np.float32) for s in SHAPES]


def _loss(lib, params):
    return sum(((p ** 2).sum() * (i + 1) + p.sin().sum()) for i, p in enumerate(params))


def _trajectory(lib, kwargs, steps=20):
    params = [lib.tensor(a.copy(), requires_grad=True) for a in INITS]
    opt = lib.optim.Adafactor(params, **kwargs)
    for _ in range(steps):
        opt.zero_grad()
        _loss(lib, params).backward()
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


CASES = [{}, dict(lr=0.05, weight_decay=0.1), dict(maximize=True, lr=0.02), dict(d=2.0, beta2_decay=-0.5),
         dict(eps=(1e-20, 1e-2))]


def test_state_layout_and_defaults():
    _, opt = _trajectory(ts, {}, steps=1)
    group = opt.param_groups[0]
    assert (group["lr"], group["beta2_decay"], group["eps"], group["d"], group["weight_decay"], group["maximize"]) == \
        (1e-2, -0.8, (None, 1e-3), 1.0, 0.0, False)
    states = [opt.state[p] for p in group["params"]]
    assert tuple(states[0]["row_var"].shape) == (4, 1) and tuple(states[0]["col_var"].shape) == (1, 5)
    assert tuple(states[1]["variance"].shape) == (3,) and "row_var" not in states[1]
    assert tuple(states[2]["row_var"].shape) == (2, 3, 1) and tuple(states[2]["col_var"].shape) == (2, 1, 4)
    assert states[0]["step"].item() == 1.0


def test_checks():
    w = [ts.zeros(2, requires_grad=True)]
    for kwargs, message in [(dict(lr=-1), "Learning rate should be >= 0 but is: -1"),
                            (dict(beta2_decay=0.5), "beta2_decay should be <= 0 but is: 0.5"),
                            (dict(eps=(-1, 1e-3)), "epsilon1 should be >= 0 but is: -1"),
                            (dict(eps=(None, -1)), "epsilon2 should be >= 0 but is: -1"),
                            (dict(d=0.5), "Clipping threshold d should be >= 1 but is: 0.5"),
                            (dict(weight_decay=-1), "weight_decay should be >= 0 but is: -1")]:
        with pytest.raises(ValueError, match=message):
            ts.optim.Adafactor(w, **kwargs)


def test_state_dict_round_trip_continues():
    params, opt = _trajectory(ts, {}, steps=3)
    resumed = [ts.tensor(p, requires_grad=True) for p in params]
    opt2 = ts.optim.Adafactor(resumed)
    opt2.load_state_dict(opt.state_dict())
    for _ in range(2):
        for o, ps in ((opt, opt.param_groups[0]["params"]), (opt2, resumed)):
            o.zero_grad()
            _loss(ts, ps).backward()
            o.step()
    for a, b in zip(opt.param_groups[0]["params"], resumed):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", CASES, ids=[str(i) for i in range(len(CASES))])
def test_trajectory_matches_torch(kwargs):
    import torch
    ours, _ = _trajectory(ts, kwargs)
    theirs, _ = _trajectory(torch, kwargs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.torch
def test_state_dict_keys_match_torch():
    import torch
    _, ours = _trajectory(ts, {}, steps=1)
    _, theirs = _trajectory(torch, {}, steps=1)
    assert list(ours.state_dict()["param_groups"][0]) == list(theirs.state_dict()["param_groups"][0])
    for i in range(len(SHAPES)):
        assert sorted(ours.state_dict()["state"][i]) == sorted(theirs.state_dict()["state"][i])
