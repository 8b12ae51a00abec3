"""torch's top-level surface that real programs touch before any model code: Tensor.data,
the legacy typed constructors, thread counts, torch.accelerator, torch.testing.assert_close."""
import numpy as np
import pytest

import tessera as ts


def test_data_shares_storage_without_history():
    t = ts.ones(2, 3, requires_grad=True)
    d = t.data
    assert not d.requires_grad
    d.fill_(4.0)  # writes through: the same storage
    np.testing.assert_array_equal(t.detach().numpy(), np.full((2, 3), 4.0, np.float32))


def test_data_assignment_writes_values_and_keeps_the_parameter():
    p = ts.nn.Parameter(ts.ones(3))
    p.data = ts.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, 2.0, 3.0])
    assert p.requires_grad
    with pytest.raises(RuntimeError, match=r"Tensor.data: assigning a tensor of shape \(2,\)"):
        p.data = ts.ones(2)


def test_legacy_constructors():
    assert ts.FloatTensor(3, 4).shape == (3, 4) and ts.FloatTensor(3, 4).dtype == ts.float32
    assert ts.FloatTensor().shape == (0,)
    long = ts.LongTensor([1, 2, 3])
    assert long.dtype == ts.int64 and long.tolist() == [1, 2, 3]
    assert ts.DoubleTensor([0.5]).dtype == ts.float64
    assert ts.BoolTensor([True, False]).dtype == ts.bool
    with pytest.raises(RuntimeError, match="FloatTensor: sizes must be non-negative"):
        ts.FloatTensor(2, -1)


def test_tensor_class_as_legacy_constructor():
    t = ts.Tensor(3, 4)  # uninitialised, of the default dtype
    assert isinstance(t, ts.Tensor) and t.shape == (3, 4) and t.dtype == ts.get_default_dtype()
    assert ts.Tensor(5).shape == (5,)  # one int: a size, as torch (not the data [5.])
    assert ts.Tensor([5]).tolist() == [5.0] and ts.Tensor().shape == (0,)
    assert ts.Tensor([True]).dtype == ts.float32  # data converts to the default dtype
    with pytest.raises(RuntimeError, match="Tensor: sizes must be non-negative, got a size of -2 in dim 1"):
        ts.Tensor(2, -2)
    with pytest.raises(TypeError):
        ts.Tensor(2, 3.5)


def test_interop_threads_set_once_as_torch():
    import subprocess
    import sys
    code = """
import tessera as ts
ts.set_num_interop_threads(3)
assert ts.get_num_interop_threads() == 3
try:
    ts.set_num_interop_threads(2)
except RuntimeError as e:
    assert "cannot set number of interop threads" in str(e)
else:
    raise AssertionError("a second set_num_interop_threads was accepted")
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
    with pytest.raises(RuntimeError, match="expected a positive number of threads, got 0"):
        ts.set_num_interop_threads(0)


def test_thread_count_round_trips():
    before = ts.get_num_threads()
    assert before >= 1
    ts.set_num_threads(1)
    try:
        assert ts.get_num_threads() == 1
        np.testing.assert_allclose((ts.ones(1000) * 2).sum().item(), 2000.0)
    finally:
        ts.set_num_threads(before)
    assert ts.get_num_threads() == before


def test_accelerator_answers_like_cuda():
    assert ts.accelerator.is_available() == ts.cuda.is_available()
    if ts.accelerator.is_available():
        assert ts.accelerator.current_accelerator().type == "cuda"
        assert ts.accelerator.device_count() == ts.cuda.device_count()
    else:
        assert ts.accelerator.current_accelerator() is None
        assert ts.accelerator.device_count() == 0
        with pytest.raises(RuntimeError, match="no accelerator is available"):
            ts.accelerator.current_device_index()


def test_assert_close_uses_dtype_tolerances():
    ts.testing.assert_close(ts.ones(3), ts.ones(3) + 1e-7)
    ts.testing.assert_close([ts.ones(2), ts.zeros(1)], [ts.ones(2), ts.zeros(1)])
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 3"):
        ts.testing.assert_close(ts.tensor([1.0, 2.0, 3.0]), ts.tensor([1.0, 2.0, 3.01]))
    with pytest.raises(AssertionError, match="'dtype' do not match"):
        ts.testing.assert_close(ts.ones(2), ts.ones(2, dtype=ts.float64))
    with pytest.raises(AssertionError, match="'shape' do not match"):
        ts.testing.assert_close(ts.ones(2), ts.ones(3))
    ts.testing.assert_close(ts.tensor([1, 2]), ts.tensor([1, 2]))
    with pytest.raises(AssertionError):
        ts.testing.assert_close(ts.tensor([1, 2]), ts.tensor([1, 3]))
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
        ts.testing.assert_close(ts.ones(1), ts.ones(1), rtol=0.1)


@pytest.mark.torch
def test_assert_close_agrees_with_torch_on_what_is_close():
    import torch
    rng = np.random.default_rng(0)
    for scale in (1e-8, 1e-6, 1e-5, 1e-4):
        a = rng.standard_normal(50).astype(np.float32)
        b = (a + scale * rng.standard_normal(50)).astype(np.float32)
        try:
            torch.testing.assert_close(torch.tensor(a), torch.tensor(b))
            torch_ok = True
        except AssertionError:
            torch_ok = False
        try:
            ts.testing.assert_close(ts.tensor(a), ts.tensor(b))
            ours_ok = True
        except AssertionError:
            ours_ok = False
        assert ours_ok == torch_ok, scale
