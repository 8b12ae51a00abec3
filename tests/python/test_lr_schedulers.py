"""Every learning-rate scheduler of torch.optim.lr_scheduler: the lr (and momentum) sequence against
torch's from the same start, and closed forms written here for CI without torch."""
import math

import pytest

import tessera as ts


def _sequence(lib, make, steps=25, optimizer="SGD", metrics=None):
    p = lib.zeros(1, requires_grad=True)
    kwargs = {"lr": 0.1, "momentum": 0.9} if optimizer == "SGD" else {"lr": 0.1}
    opt = getattr(lib.optim, optimizer)([p], **kwargs)
    sched = make(lib.optim.lr_scheduler, opt)
    out = []
    for i in range(steps):
        opt.step()
        if metrics is not None:
            sched.step(metrics[i])
        else:
            sched.step()
        group = opt.param_groups[0]
        out.append((group["lr"], group.get("momentum", group.get("betas", (None,))[0])))
    return out


CASES = {
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, [3, 7, 7, 12], gamma=0.5),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, 0.9),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95),
    "ConstantLR": lambda m, o: m.ConstantLR(o, 0.25, 4),
    "LinearLR": lambda m, o: m.LinearLR(o, 0.2, 0.9, 6),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, 10, 2.0),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, 4, 2, 0.001),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, 1.0, total_steps=26),
    "OneCycleLR-linear-3phase": lambda m, o: m.OneCycleLR(o, 0.5, epochs=2, steps_per_epoch=13,
                                                          anneal_strategy="linear", three_phase=True),
    "CyclicLR": lambda m, o: m.CyclicLR(o, 0.01, 0.1, 4, 3),
    "CyclicLR-triangular2": lambda m, o: m.CyclicLR(o, 0.01, 0.1, 3, mode="triangular2"),
    "CyclicLR-exp_range": lambda m, o: m.CyclicLR(o, 0.01, 0.1, 3, mode="exp_range", gamma=0.9),
    "SequentialLR": lambda m, o: m.SequentialLR(o, [m.LinearLR(o, 0.1, 1.0, 5), m.ExponentialLR(o, 0.8)], [5]),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler([m.ConstantLR(o, 0.5, 3), m.ExponentialLR(o, 0.9)]),
}


def test_closed_forms():
    lrs = [lr for lr, _ in _sequence(ts, CASES["ExponentialLR"], 6)]
    assert lrs == pytest.approx([0.1 * 0.9 ** (i + 1) for i in range(6)])
    lrs = [lr for lr, _ in _sequence(ts, CASES["MultiStepLR"], 14)]
    assert lrs[1] == pytest.approx(0.1) and lrs[2] == pytest.approx(0.05) and lrs[6] == pytest.approx(0.0125)
    assert lrs[11] == pytest.approx(0.1 * 0.5 ** 4)
    lrs = [lr for lr, _ in _sequence(ts, CASES["PolynomialLR"], 12)]
    assert lrs[:10] == pytest.approx([0.1 * (1 - (i + 1) / 10) ** 2 for i in range(10)], abs=1e-12)
    seq = _sequence(ts, CASES["OneCycleLR"], 25)  # the last step (25 of 26, counting step 0) ends the cycle
    assert max(lr for lr, _ in seq) == pytest.approx(1.0, rel=1e-2)
    assert seq[-1][0] == pytest.approx(1.0 / 25 / 1e4, rel=1e-6)
    assert min(m for _, m in seq) == pytest.approx(0.85, abs=1e-2)
    cyc = [lr for lr, _ in _sequence(ts, CASES["CyclicLR"], 8)]
    assert cyc == pytest.approx([0.01 + 0.09 * f for f in (0.25, 0.5, 0.75, 1.0, 2 / 3, 1 / 3, 0.0, 0.25)])
    warm = [lr for lr, _ in _sequence(ts, CASES["CosineAnnealingWarmRestarts"], 12)]
    expected = [0.001 + (0.1 - 0.001) * (1 + math.cos(math.pi * t / T)) / 2 for t, T in
                [(1, 4), (2, 4), (3, 4), (0, 8), (1, 8), (2, 8), (3, 8), (4, 8), (5, 8), (6, 8), (7, 8), (0, 16)]]
    assert warm == pytest.approx(expected)


def test_reduce_on_plateau():
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
    lrs = [lr for lr, _ in _sequence(ts, lambda m, o: m.ReduceLROnPlateau(o, patience=2, factor=0.5, cooldown=1),
                                     len(metrics), metrics=metrics)]
    assert lrs == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025])


def test_bad_arguments():
    opt = ts.optim.SGD([ts.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        ts.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=2.0)
    with pytest.raises(ValueError, match="You must define either total_steps OR"):
        ts.optim.lr_scheduler.OneCycleLR(opt, 1.0)
    with pytest.raises(ValueError, match="optimizer must support momentum"):
        ts.optim.lr_scheduler.OneCycleLR(ts.optim.Adagrad([ts.zeros(1, requires_grad=True)]), 1.0, total_steps=5)
    sched = ts.optim.lr_scheduler.OneCycleLR(opt, 1.0, total_steps=3)
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        for _ in range(4):
            sched.step()


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_sequence_matches_torch(name, optimizer):
    import torch
    if name.startswith(("OneCycleLR", "CyclicLR")) or optimizer == "SGD":
        ours = _sequence(ts, CASES[name], 25, optimizer)
        theirs = _sequence(torch, CASES[name], 25, optimizer)
        assert [lr for lr, _ in ours] == pytest.approx([lr for lr, _ in theirs], rel=1e-9, abs=1e-15)
        assert [m for _, m in ours] == pytest.approx([m for _, m in theirs], rel=1e-9)


@pytest.mark.torch
def test_reduce_on_plateau_matches_torch():
    import torch
    metrics = [1.0, 0.5, 0.6, 0.6, 0.49995, 0.7, 0.7, 0.7, 0.7, 0.1, 0.1, 0.2, 0.2, 0.2, 0.2]
    for kwargs in ({"patience": 1}, {"mode": "max", "patience": 2, "threshold_mode": "abs", "threshold": 0.05},
                   {"patience": 0, "cooldown": 2, "min_lr": 0.02}):
        make = lambda m, o: m.ReduceLROnPlateau(o, **kwargs)  # noqa: E731
        ours = [lr for lr, _ in _sequence(ts, make, len(metrics), metrics=metrics)]
        assert ours == pytest.approx([lr for lr, _ in _sequence(torch, make, len(metrics), metrics=metrics)])
