"""Python numbers where an operator takes a Tensor, as torch allows (`torch.div(t, 2.0, out=o)`,
`torch.where(c, x, 0.0)`): wrapped as 0-dim tensors of torch's wrapped-number dtypes, only when no
overload takes the arguments as given, and never for an argument written in place."""
import numpy as np
import pytest

import tessera as ts


def test_out_overloads_take_numbers():
    a = ts.tensor([1.0, 2.0, 4.0])
    out = ts.empty(3)
    r = ts.div(a, 2.0, out=out)
    assert r is out and out.tolist() == [0.5, 1.0, 2.0]
    ts.mul(a, 3, out=out)
    assert out.tolist() == [3.0, 6.0, 12.0]


def test_wrapped_numbers_do_not_widen():
    a = ts.tensor([1.0, 2.0], dtype=ts.float32)
    assert ts.maximum(a, ts.tensor(1.5)).dtype == ts.float32
    r = ts.where(a > 1.5, a, 0.0)
    assert r.dtype == ts.float32 and r.tolist() == [0.0, 2.0]
    i = ts.tensor([1, 5])
    assert ts.where(i > 2, i, 0).dtype == ts.int64


def test_in_place_arguments_stay_tensors():
    with pytest.raises(TypeError):
        ts.Tensor.add_(2.0, ts.ones(2))


@pytest.mark.torch
def test_same_results_as_torch():
    import torch
    x = np.array([1.0, -2.0, 3.5], dtype=np.float32)
    for fn in (lambda m, t: m.div(t, 2.0, out=m.empty(3)), lambda m, t: m.where(t > 0, t, 0.5),
               lambda m, t: m.mul(t, 2, out=m.empty(3))):
        np.testing.assert_allclose(fn(ts, ts.from_numpy(x)).numpy(), fn(torch, torch.from_numpy(x)).numpy())
