"""ts.autocast / ts.amp.autocast and ts.amp.GradScaler: result dtypes of the policy lists as
torch's under the same autocast, values against torch, gradients reaching float32 parameters,
nesting, the decorator, per-thread state; GradScaler's scale sequence and skipped steps against
torch.amp.GradScaler("cpu")."""
import threading
import warnings

import numpy as np
import pytest

import tessera as ts
from tessera import amp


def _torch():
    return pytest.importorskip("torch")


def test_policy_dtypes_and_nesting():
    a, b = ts.randn(4, 5), ts.randn(5, 3)
    with amp.autocast("cpu"):
        assert amp.is_autocast_enabled("cpu") and amp.get_autocast_dtype("cpu") == ts.bfloat16
        c = a @ b
        assert c.dtype == ts.bfloat16
        assert ts.exp(c).dtype == ts.float32 and ts.softmax(c, -1).dtype == ts.float32
        assert c.sum().dtype == ts.float32
        assert (c + c).dtype == ts.bfloat16  # element-wise: neither list
        with amp.autocast("cpu", enabled=False):
            assert not amp.is_autocast_enabled("cpu")
            assert (a @ b).dtype == ts.float32
        assert (a @ b).dtype == ts.bfloat16
    assert not amp.is_autocast_enabled("cpu")
    assert (a @ b).dtype == ts.float32


def test_decorator_and_threads():
    @amp.autocast("cpu", dtype=ts.bfloat16)
    def product(x, y):
        return x @ y

    a, b = ts.randn(3, 3), ts.randn(3, 3)
    assert product(a, b).dtype == ts.bfloat16
    seen = []
    with amp.autocast("cpu"):
        t = threading.Thread(target=lambda: seen.append((a @ b).dtype))  # autocast state is per thread
        t.start()
        t.join(timeout=30)
    assert seen == [ts.float32]


def test_matches_torch_dtypes_values_and_gradients():
    torch = _torch()
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 5))
    sm = ts.nn.Sequential(ts.nn.Conv2d(3, 4, 3), ts.nn.ReLU(), ts.nn.Flatten(), ts.nn.Linear(4 * 4 * 4, 5))
    sm.load_state_dict({k: ts.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    target = np.array([1, 3])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out_t = tm(torch.tensor(x))
        loss_t = torch.nn.functional.cross_entropy(out_t, torch.tensor(target))
    with ts.autocast("cpu", dtype=ts.bfloat16):
        out_s = sm(ts.tensor(x))
        loss_s = ts.nn.functional.cross_entropy(out_s, ts.tensor(target))
    assert str(out_s.dtype).split(".")[-1] == str(out_t.dtype).split(".")[-1] == "bfloat16"
    assert str(loss_s.dtype).split(".")[-1] == str(loss_t.dtype).split(".")[-1] == "float32"
    np.testing.assert_allclose(out_s.float().detach().numpy(), out_t.float().detach().numpy(), rtol=3e-2, atol=3e-2)
    loss_t.backward()
    loss_s.backward()
    for (name, p_t), p_s in zip(tm.named_parameters(), sm.parameters()):
        assert p_s.grad.dtype == ts.float32, name
        np.testing.assert_allclose(p_s.grad.numpy(), p_t.grad.numpy(), rtol=5e-2, atol=5e-2)


def test_autocast_errors():
    with pytest.raises(RuntimeError, match="not supported"):
        amp.autocast("cpu", dtype=ts.float64)
    with pytest.raises(ValueError, match="unknown device type 'nodevice'"):
        with amp.autocast("nodevice"):
            pass


def _train(lib, scaler, steps, poison_at):
    """A few SGD steps of a tiny model; at the listed steps the loss is multiplied by inf."""
    model = lib.nn.Linear(3, 1)
    with lib.no_grad():  # the same start for both libraries
        model.weight.copy_(lib.tensor([[0.5, -0.25, 0.125]]))
        model.bias.fill_(0.1)
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    x = lib.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    scales, weights = [], []
    for step in range(steps):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        if step in poison_at:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(model.weight.detach().numpy().copy())
    return scales, weights, scaler.state_dict()


def test_grad_scaler_matches_torch():
    torch = _torch()
    kw = dict(init_scale=2.0 ** 10, growth_factor=2.0, backoff_factor=0.5, growth_interval=3)
    s_t, w_t, sd_t = _train(torch, torch.amp.GradScaler("cpu", **kw), 9, {1, 5})
    s_s, w_s, sd_s = _train(ts, ts.amp.GradScaler("cpu", **kw), 9, {1, 5})
    assert s_s == s_t
    for a, b in zip(w_s, w_t):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert sd_s == {k: (v if not hasattr(v, "item") else v.item()) for k, v in sd_t.items()}


def test_grad_scaler_without_torch():
    scaler = ts.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    scales, weights, state = _train(ts, scaler, 5, {0})
    assert scales == [4.0, 4.0, 8.0, 8.0, 16.0]
    np.testing.assert_array_equal(weights[0], [[0.5, -0.25, 0.125]])  # step 0 was skipped
    assert state["scale"] == 16.0 and state["_growth_tracker"] == 0
    fresh = ts.amp.GradScaler("cpu")
    fresh.load_state_dict(state)
    assert fresh.get_scale() == 16.0
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        opt = ts.optim.SGD([ts.zeros(1, requires_grad=True)], lr=0.1)
        scaler.scale(ts.ones(1)).sum()
        scaler.unscale_(opt)
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: 0)


def test_grad_scaler_skips_the_poisoned_step():
    scaler = ts.amp.GradScaler("cpu", init_scale=4.0)
    ts.manual_seed(0)
    model = ts.nn.Linear(2, 1)
    before = model.weight.detach().numpy().copy()
    opt = ts.optim.SGD(model.parameters(), lr=1.0)
    loss = model(ts.ones(1, 2)).sum() * float("inf")
    scaler.scale(loss).backward()
    assert scaler.step(opt) is None
    scaler.update()
    np.testing.assert_array_equal(model.weight.detach().numpy(), before)
    assert scaler.get_scale() == 2.0


def test_cuda_scaler_disables_itself_without_a_gpu():
    if ts.cuda.is_available():
        pytest.skip("a GPU is present")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scaler = ts.amp.GradScaler()
    assert not scaler.is_enabled()
    assert any("CUDA is not available" in str(w.message) for w in caught)
    loss = ts.ones(())
    assert scaler.scale(loss) is loss
