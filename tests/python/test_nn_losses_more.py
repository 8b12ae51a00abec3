"""The losses of torch.nn beyond CrossEntropy/NLL/MSE/L1/BCEWithLogits, and the distance functions:
values and gradients against NumPy formulas, and against torch when it is importable."""
import numpy as np
import pytest

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F

RNG = np.random.default_rng(0)
A = RNG.standard_normal((6, 5)).astype(np.float32)
B = RNG.standard_normal((6, 5)).astype(np.float32)
P = RNG.uniform(0.05, 0.95, (6, 5)).astype(np.float32)
T01 = (RNG.uniform(size=(6, 5)) > 0.5).astype(np.float32)


def test_numpy_formulas():
    np.testing.assert_allclose(F.binary_cross_entropy(ts.tensor(P), ts.tensor(T01)).item(),
                               -(T01 * np.log(P) + (1 - T01) * np.log(1 - P)).mean(), rtol=1e-5)
    d = np.abs(A - B)
    np.testing.assert_allclose(F.smooth_l1_loss(ts.tensor(A), ts.tensor(B), reduction="sum").item(),
                               np.where(d < 1, 0.5 * d * d, d - 0.5).sum(), rtol=1e-5)
    np.testing.assert_allclose(F.huber_loss(ts.tensor(A), ts.tensor(B), delta=0.5).item(),
                               np.where(d < 0.5, 0.5 * d * d, 0.5 * (d - 0.25)).mean(), rtol=1e-5)
    logq = np.log(P / P.sum(1, keepdims=True))
    tgt = T01 / np.maximum(T01.sum(1, keepdims=True), 1)
    expected = np.where(tgt > 0, tgt * (np.log(np.where(tgt > 0, tgt, 1)) - logq), 0).sum() / 6
    np.testing.assert_allclose(F.kl_div(ts.tensor(logq), ts.tensor(tgt), reduction="batchmean").item(), expected,
                               rtol=1e-5)
    cos = (A * B).sum(1) / (np.linalg.norm(A, axis=1) * np.linalg.norm(B, axis=1))
    np.testing.assert_allclose(F.cosine_similarity(ts.tensor(A), ts.tensor(B)).numpy(), cos, rtol=1e-5)
    np.testing.assert_allclose(F.pairwise_distance(ts.tensor(A), ts.tensor(B)).numpy(),
                               np.linalg.norm(A - B + 1e-6, axis=1), rtol=1e-5)
    np.testing.assert_allclose(F.normalize(ts.tensor(A)).numpy(), A / np.linalg.norm(A, axis=1, keepdims=True),
                               rtol=1e-5)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="different to the input size"):
        F.binary_cross_entropy(ts.tensor(P), ts.ones(6))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.kl_div(ts.tensor(A), ts.tensor(B), reduction="avg")
    with pytest.raises(RuntimeError, match="negative values for beta"):
        F.smooth_l1_loss(ts.tensor(A), ts.tensor(B), beta=-1.0)
    with pytest.raises(ValueError, match="var has negative"):
        F.gaussian_nll_loss(ts.tensor(A), ts.tensor(B), -ts.ones(6, 5))


def _torch_case(name):
    import torch
    sign = np.where(RNG.uniform(size=6) > 0.5, 1.0, -1.0).astype(np.float32)
    cases = {
        "BCELoss": ((), [P, T01], [1]),
        "SmoothL1Loss": ({"beta": 0.5}, [A, B], [0]),
        "HuberLoss": ((), [A, B], [0]),
        "KLDivLoss": ((), [np.log(P), P], [0]),
        "SoftMarginLoss": ((), [A, np.sign(B)], [0]),
        "MarginRankingLoss": ((0.2,), [A[:, 0], B[:, 0], sign], [0, 1]),
        "HingeEmbeddingLoss": ((0.5,), [A, np.sign(B)], [0]),
        "PoissonNLLLoss": ((), [A, np.abs(B) * 3], [0]),
        "GaussianNLLLoss": ((), [A, B, P], [0, 2]),
        "MultiLabelSoftMarginLoss": ((), [A, T01], [0]),
        "CosineEmbeddingLoss": ((0.1,), [A, B, sign], [0, 1]),
        "TripletMarginLoss": ((0.5,), [A, B, P], [0, 1, 2]),
    }
    return cases[name], torch


NAMES = ["BCELoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "SoftMarginLoss", "MarginRankingLoss",
         "HingeEmbeddingLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss",
         "TripletMarginLoss"]


@pytest.mark.torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", NAMES)
def test_loss_matches_torch(name, reduction):
    (args, inputs, differentiable), torch = _torch_case(name)
    args, kwargs = ((), args) if isinstance(args, dict) else (args, {})
    ours = getattr(nn, name)(*args, reduction=reduction, **kwargs)
    theirs = getattr(torch.nn, name)(*args, reduction=reduction, **kwargs)
    t_in = [ts.tensor(x, requires_grad=i in differentiable) for i, x in enumerate(inputs)]
    r_in = [torch.tensor(x, requires_grad=i in differentiable) for i, x in enumerate(inputs)]
    y, ry = ours(*t_in), theirs(*r_in)
    np.testing.assert_allclose(y.detach().numpy(), ry.detach().numpy(), rtol=2e-5, atol=1e-6)
    y.sum().backward()
    ry.sum().backward()
    for i in differentiable:
        np.testing.assert_allclose(t_in[i].grad.numpy(), r_in[i].grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.torch
def test_poisson_full_and_distance_modules_match_torch():
    import torch
    lam, tgt = np.abs(A) + 0.1, np.floor(np.abs(B) * 4)
    np.testing.assert_allclose(
        F.poisson_nll_loss(ts.tensor(lam), ts.tensor(tgt), log_input=False, full=True).item(),
        torch.nn.functional.poisson_nll_loss(torch.tensor(lam), torch.tensor(tgt), log_input=False, full=True).item(),
        rtol=1e-5)
    np.testing.assert_allclose(nn.PairwiseDistance(1.0)(ts.tensor(A), ts.tensor(B)).numpy(),
                               torch.nn.PairwiseDistance(1.0)(torch.tensor(A), torch.tensor(B)).numpy(), rtol=1e-5)
    np.testing.assert_allclose(nn.CosineSimilarity(0)(ts.tensor(A), ts.tensor(B)).numpy(),
                               torch.nn.CosineSimilarity(0)(torch.tensor(A), torch.tensor(B)).numpy(), rtol=1e-5)
