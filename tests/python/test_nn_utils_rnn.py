"""nn.utils.rnn.pad_sequence and unpad_sequence: against NumPy padding, and torch when importable."""
import numpy as np
import pytest

import tessera as ts
from tessera.nn.utils.rnn import pad_sequence, unpad_sequence

SEQS = [np.random.default_rng(i).standard_normal((n, 3)).astype(np.float32) for i, n in enumerate((4, 1, 6))]


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_matches_numpy(batch_first, side):
    got = pad_sequence([ts.tensor(s) for s in SEQS], batch_first, -1.0, side).numpy()
    want = np.stack([np.pad(s, ((0, 6 - len(s)) if side == "right" else (6 - len(s), 0), (0, 0)),
                            constant_values=-1.0) for s in SEQS])
    np.testing.assert_array_equal(got, want if batch_first else want.transpose(1, 0, 2))


def test_unpad_round_trips_and_gradients_flow():
    xs = [ts.tensor(s, requires_grad=True) for s in SEQS]
    padded = pad_sequence(xs)
    back = unpad_sequence(padded, ts.tensor([4, 1, 6]))
    for b, s in zip(back, SEQS):
        np.testing.assert_array_equal(b.detach().numpy(), s)
    (padded * 2).sum().backward()
    for x in xs:
        np.testing.assert_array_equal(x.grad.numpy(), np.full(x.shape, 2.0, np.float32))


def test_bad_input():
    with pytest.raises(RuntimeError, match="sequence 1 has shape \\(2, 4\\)"):
        pad_sequence([ts.ones(3, 3), ts.ones(2, 4)])
    with pytest.raises(ValueError, match="padding_side"):
        pad_sequence([ts.ones(3, 3)], padding_side="middle")


@pytest.mark.torch
def test_matches_torch():
    import torch
    from torch.nn.utils.rnn import pad_sequence as torch_pad
    for kwargs in ({}, {"batch_first": True, "padding_value": 5.0}, {"padding_side": "left"}):
        np.testing.assert_array_equal(pad_sequence([ts.tensor(s) for s in SEQS], **kwargs).numpy(),
                                      torch_pad([torch.tensor(s) for s in SEQS], **kwargs).numpy())
