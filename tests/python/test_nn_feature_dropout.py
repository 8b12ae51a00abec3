"""Dropout1d/2d/3d: whole channels are zeroed (or all kept and scaled by 1 / (1 - p)), at the rate p,
differentiably; identity in eval; PyTorch's errors and reprs."""
import numpy as np
import pytest

import tessera as ts
import tessera.nn as nn
import tessera.nn.functional as F


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_channels_are_dropped_whole_at_rate_p(dims):
    ts.manual_seed(0)
    shape = (32, 64) + (3,) * dims
    x = ts.ones(shape, requires_grad=True)
    y = getattr(F, f"dropout{dims}d")(x, p=0.3)
    planes = y.detach().numpy().reshape(32, 64, -1)
    kept = planes[:, :, 0] != 0
    # every element of a plane shares its channel's fate and the kept ones are scaled by 1 / (1 - p)
    assert np.all(planes == planes[:, :, :1])
    np.testing.assert_allclose(planes[kept], 1 / 0.7, rtol=1e-6)
    assert abs((1 - kept.mean()) - 0.3) < 0.05
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy().reshape(32, 64, -1)[:, :, 0], kept / 0.7, rtol=1e-6)


def test_unbatched_eval_and_errors():
    ts.manual_seed(1)
    y = F.dropout2d(ts.ones(64, 4, 4), 0.5).numpy().reshape(64, -1)
    assert np.all(y == y[:, :1]) and 0 < (y[:, 0] == 0).sum() < 64
    m = nn.Dropout2d(0.5).eval()
    x = ts.randn(2, 3, 4, 4)
    assert m(x) is x or np.array_equal(m(x).numpy(), x.numpy())
    with pytest.raises(RuntimeError, match="dropout2d: Expected 3D or 4D input, but received a 2D input"):
        F.dropout2d(ts.ones(3, 4))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout3d(1.5)


@pytest.mark.torch
def test_reprs_match_torch():
    import torch
    for name in ("Dropout1d", "Dropout2d", "Dropout3d"):
        assert repr(getattr(nn, name)(0.2, inplace=True)) == repr(getattr(torch.nn, name)(0.2, inplace=True))


@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout_keeps_zero_mean_and_unit_variance(feature):
    ts.manual_seed(2)
    x = ts.randn(64, 256, 8)
    m = nn.FeatureAlphaDropout(0.2) if feature else nn.AlphaDropout(0.2)
    y = m(x).numpy()
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05
    saturated = 1.7580993408473766 / np.sqrt((1.7580993408473766 ** 2 * 0.2 + 1) * 0.8) * 0.2 - 1.7580993408473766 / \
        np.sqrt((1.7580993408473766 ** 2 * 0.2 + 1) * 0.8)
    dropped = np.isclose(y, saturated, atol=1e-6)
    assert abs(dropped.mean() - 0.2) < 0.03
    if feature:
        planes = dropped.reshape(64, 256, 8)
        assert np.all(planes == planes[:, :, :1])
    m.eval()
    assert np.array_equal(m(x).numpy(), x.numpy())


@pytest.mark.torch
def test_alpha_dropout_reprs_match_torch():
    import torch
    for name in ("AlphaDropout", "FeatureAlphaDropout"):
        assert repr(getattr(nn, name)(0.3)) == repr(getattr(torch.nn, name)(0.3))
