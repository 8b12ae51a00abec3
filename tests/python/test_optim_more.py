"""Adagrad, Adadelta, Adamax, NAdam and RAdam: trajectories against torch.optim from the same
weights and gradients, and one step against the update rule written in NumPy."""
import numpy as np
import pytest

import tessera as ts

RNG = np.random.default_rng(0)
X = RNG.standard_normal((32, 5)).astype(np.float32)
Y = RNG.standard_normal((32, 1)).astype(np.float32)
W0 = RNG.standard_normal((5, 1)).astype(np.float32)


def _trajectory(lib, optim_name, kwargs, steps=12):
    w = lib.tensor(W0.copy(), requires_grad=True)
    opt = getattr(lib.optim, optim_name)([w], **kwargs)
    x, y = lib.tensor(X), lib.tensor(Y)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        opt.step()
        out.append(w.detach().numpy().copy())
    return np.stack(out)


CASES = [
    ("Adagrad", {}), ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1, "initial_accumulator_value": 0.5}),
    ("Adadelta", {}), ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 0.05, "maximize": True}),
    ("Adamax", {}), ("Adamax", {"lr": 0.01, "betas": (0.8, 0.9), "weight_decay": 0.1}),
    ("NAdam", {}), ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("NAdam", {"momentum_decay": 0.01, "weight_decay": 0.1}),
    ("RAdam", {}), ("RAdam", {"lr": 0.01, "betas": (0.9, 0.9), "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
]


def test_adagrad_one_step_matches_its_rule():
    got = _trajectory(ts, "Adagrad", {"lr": 0.1}, steps=1)[0]
    g = 2 * X.T @ (X @ W0 - Y) / 32
    np.testing.assert_allclose(got, W0 - 0.1 * g / (np.sqrt(g * g) + 1e-10), rtol=1e-5)


def test_optimizers_decrease_the_loss():
    for name, kwargs in CASES:
        if kwargs.get("maximize"):
            continue
        traj = _trajectory(ts, name, kwargs, steps=30)
        loss = lambda w: float(((X @ w - Y) ** 2).mean())  # noqa: E731
        assert loss(traj[-1]) < loss(W0), (name, kwargs)


def test_bad_hyperparameters_are_named():
    w = ts.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        ts.optim.Adagrad([w], lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        ts.optim.NAdam([w], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid rho value: 1.5"):
        ts.optim.Adadelta([w], rho=1.5)


@pytest.mark.torch
@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_trajectory_matches_torch(name, kwargs):
    import torch
    np.testing.assert_allclose(_trajectory(ts, name, kwargs), _trajectory(torch, name, kwargs), rtol=1e-4, atol=1e-5)


def test_state_dict_round_trip_continues_the_trajectory():
    w = ts.tensor(W0.copy(), requires_grad=True)
    opt = ts.optim.Adamax([w], lr=0.05)
    for _ in range(3):
        opt.zero_grad()
        ((ts.tensor(X) @ w - ts.tensor(Y)) ** 2).mean().backward()
        opt.step()
    w2 = ts.tensor(w.detach().numpy().copy(), requires_grad=True)
    opt2 = ts.optim.Adamax([w2], lr=0.05)
    opt2.load_state_dict(opt.state_dict())
    for o, p in ((opt, w), (opt2, w2)):
        o.zero_grad()
        ((ts.tensor(X) @ p - ts.tensor(Y)) ** 2).mean().backward()
        o.step()
    np.testing.assert_allclose(w.detach().numpy(), w2.detach().numpy(), rtol=1e-6)
