"""nn.RNN / LSTM / GRU, their cells and packed sequences: outputs, final states and every gradient
against PyTorch from the same weights (when torch is importable), against a NumPy LSTM / GRU
otherwise; torch's errors for bad sizes and arguments."""
import numpy as np
import pytest

import tessera as ts
from tessera.nn.utils import rnn as ts_rnn


def _torch():
    return pytest.importorskip("torch")


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol)


def _pair(torch, cls_name, dtype="float32", **kw):
    """A torch module and a tessera one holding the same weights."""
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls_name)(5, 7, **kw).to(getattr(torch, dtype))
    sm = getattr(ts.nn, cls_name)(5, 7, **kw).to(getattr(ts, dtype))
    t_names = [n for n, _ in tm.named_parameters()]
    s_names = [n for n, _ in sm.named_parameters()]
    assert t_names == s_names
    with ts.no_grad():
        for p_t, p_s in zip(tm.parameters(), sm.parameters()):
            p_s.copy_(ts.tensor(p_t.detach().numpy()))
    return tm, sm


def _loss(out, state):
    """A loss that reaches the output and every final state with distinct weights."""
    states = state if isinstance(state, tuple) else (state,)
    total = (out * out).sum() * 0.5
    for k, s in enumerate(states):
        total = total + (s * (k + 2.0)).sum()
    return total


def _compare_grads(tm, sm, x_t, x_s, rtol=1e-4, atol=1e-5):
    _close(x_s.grad, x_t.grad, rtol, atol)
    for (name, p_t), p_s in zip(tm.named_parameters(), sm.parameters()):
        assert p_s.grad is not None, name
        _close(p_s.grad, p_t.grad, rtol, atol)


CONFIGS = [
    ("LSTM", {}), ("GRU", {}), ("RNN", {}), ("RNN", {"nonlinearity": "relu"}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}), ("GRU", {"num_layers": 3, "batch_first": True}),
    ("RNN", {"bidirectional": True, "bias": False}), ("LSTM", {"proj_size": 3, "num_layers": 2}),
    ("LSTM", {"bias": False, "batch_first": True, "bidirectional": True}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cls_name,kw", CONFIGS)
def test_matches_torch_forward_and_backward(cls_name, kw, dtype):
    torch = _torch()
    tm, sm = _pair(torch, cls_name, dtype, **kw)
    shape = (3, 6, 5) if kw.get("batch_first") else (6, 3, 5)
    x_t = torch.randn(*shape, dtype=getattr(torch, dtype), requires_grad=True)
    x_s = ts.tensor(x_t.detach().numpy()).requires_grad_()
    out_t, state_t = tm(x_t)
    out_s, state_s = sm(x_s)
    assert tuple(out_s.shape) == tuple(out_t.shape)
    _close(out_s, out_t)
    for a, b in zip(state_s if isinstance(state_s, tuple) else (state_s,),
                    state_t if isinstance(state_t, tuple) else (state_t,)):
        assert tuple(a.shape) == tuple(b.shape)
        _close(a, b)
    _loss(out_t, state_t).backward()
    _loss(out_s, state_s).backward()
    _compare_grads(tm, sm, x_t, x_s, rtol=1e-3 if dtype == "float32" else 1e-7)


@pytest.mark.parametrize("cls_name,kw", [("LSTM", {}), ("GRU", {"num_layers": 2}), ("RNN", {"bidirectional": True})])
def test_initial_state_and_its_gradient(cls_name, kw):
    torch = _torch()
    tm, sm = _pair(torch, cls_name, **kw)
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    x_t = torch.randn(4, 2, 5, requires_grad=True)
    x_s = ts.tensor(x_t.detach().numpy()).requires_grad_()
    h_t = torch.randn(layers, 2, 7, requires_grad=True)
    h_s = ts.tensor(h_t.detach().numpy()).requires_grad_()
    if cls_name == "LSTM":
        c_t = torch.randn(layers, 2, 7, requires_grad=True)
        c_s = ts.tensor(c_t.detach().numpy()).requires_grad_()
        out_t, st_t = tm(x_t, (h_t, c_t))
        out_s, st_s = sm(x_s, (h_s, c_s))
    else:
        out_t, st_t = tm(x_t, h_t)
        out_s, st_s = sm(x_s, h_s)
    _close(out_s, out_t)
    _loss(out_t, st_t).backward()
    _loss(out_s, st_s).backward()
    _close(h_s.grad, h_t.grad, 1e-3)
    if cls_name == "LSTM":
        _close(c_s.grad, c_t.grad, 1e-3)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("cls_name", ["LSTM", "GRU", "RNN"])
def test_unbatched_input(cls_name, batch_first):
    torch = _torch()
    tm, sm = _pair(torch, cls_name, batch_first=batch_first)  # (L, H_in) is a sequence either way
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    out_t, st_t = tm(torch.tensor(x))
    out_s, st_s = sm(ts.tensor(x))
    assert tuple(out_s.shape) == (4, 7)
    _close(out_s, out_t)
    _close(st_s[0] if isinstance(st_s, tuple) else st_s, st_t[0] if isinstance(st_t, tuple) else st_t)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cls_name,kw", [("LSTM", {"num_layers": 2, "bidirectional": True}), ("GRU", {"bidirectional": True}),
                                         ("RNN", {}), ("LSTM", {"proj_size": 2})])
def test_packed_sequences_match_torch(cls_name, kw, dtype):
    torch = _torch()
    tnn = torch.nn.utils.rnn
    tm, sm = _pair(torch, cls_name, dtype, **kw)
    lengths = [4, 2, 5, 1, 5]
    x_t = torch.randn(5, 5, 5, dtype=getattr(torch, dtype), requires_grad=True)
    x_s = ts.tensor(x_t.detach().numpy()).requires_grad_()
    p_t = tnn.pack_padded_sequence(x_t, lengths, enforce_sorted=False)
    p_s = ts_rnn.pack_padded_sequence(x_s, lengths, enforce_sorted=False)
    np.testing.assert_array_equal(p_s.batch_sizes.numpy(), p_t.batch_sizes.numpy())
    np.testing.assert_array_equal(p_s.sorted_indices.numpy(), p_t.sorted_indices.numpy())
    _close(p_s.data, p_t.data)
    out_t, st_t = tm(p_t)
    out_s, st_s = sm(p_s)
    assert isinstance(out_s, ts_rnn.PackedSequence)
    _close(out_s.data, out_t.data)
    pad_t, len_t = tnn.pad_packed_sequence(out_t, batch_first=True, total_length=6)
    pad_s, len_s = ts_rnn.pad_packed_sequence(out_s, batch_first=True, total_length=6)
    np.testing.assert_array_equal(len_s.numpy(), len_t.numpy())
    _close(pad_s, pad_t)
    _loss(pad_t, st_t).backward()
    _loss(pad_s, st_s).backward()
    _compare_grads(tm, sm, x_t, x_s, rtol=1e-3 if dtype == "float32" else 1e-7)


def test_pack_sequence_round_trip_and_errors():
    seqs = [ts.tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2)) for n in (3, 1, 2)]
    packed = ts_rnn.pack_sequence(seqs, enforce_sorted=False)
    assert packed.batch_sizes.tolist() == [3, 2, 1]
    back = ts_rnn.unpack_sequence(packed)
    for a, b in zip(back, seqs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        ts_rnn.pack_sequence(seqs)
    with pytest.raises(RuntimeError, match="greater than 0"):
        ts_rnn.pack_padded_sequence(ts.zeros(3, 2, 1), [2, 0])
    with pytest.raises(ValueError, match="total_length=1"):
        ts_rnn.pad_packed_sequence(packed, total_length=1)


# ---- a NumPy oracle: checked without torch too

def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _numpy_lstm(x, w_ih, w_hh, b_ih, b_hh):
    T, N, _ = x.shape
    H = w_hh.shape[1]
    h, c = np.zeros((N, H)), np.zeros((N, H))
    outs = []
    for t in range(T):
        i, f, g, o = np.split(x[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        outs.append(h)
    return np.stack(outs), h, c


def _numpy_gru(x, w_ih, w_hh, b_ih, b_hh):
    T, N, _ = x.shape
    h = np.zeros((N, w_hh.shape[1]))
    outs = []
    for t in range(T):
        xr, xz, xn = np.split(x[t] @ w_ih.T + b_ih, 3, axis=1)
        hr, hz, hn = np.split(h @ w_hh.T + b_hh, 3, axis=1)
        r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
        h = (1 - z) * np.tanh(xn + r * hn) + z * h
        outs.append(h)
    return np.stack(outs), h


@pytest.mark.parametrize("dtype", [ts.float32, ts.float64])
def test_lstm_and_gru_match_numpy(dtype):
    ts.manual_seed(3)
    x = np.random.default_rng(1).standard_normal((7, 3, 5))
    lstm, gru = ts.nn.LSTM(5, 6).to(dtype), ts.nn.GRU(5, 6).to(dtype)
    weights = [_np(p).astype(np.float64) for p in lstm.parameters()]
    out, (h, c) = lstm(ts.tensor(x).to(dtype))
    want_out, want_h, want_c = _numpy_lstm(x, *weights)
    _close(out, want_out)
    _close(h[0], want_h)
    _close(c[0], want_c)
    weights = [_np(p).astype(np.float64) for p in gru.parameters()]
    out, h = gru(ts.tensor(x).to(dtype))
    want_out, want_h = _numpy_gru(x, *weights)
    _close(out, want_out)
    _close(h[0], want_h)


def test_gradcheck_of_the_fused_layer_against_the_composite():
    """The oneDNN layer's backward (float32) agrees with autograd through the per-step cells (float64)."""
    for mode in ("LSTM", "GRU", "RNN"):
        m32 = getattr(ts.nn, mode)(4, 3, num_layers=2, bidirectional=True)
        m64 = getattr(ts.nn, mode)(4, 3, num_layers=2, bidirectional=True).double()
        m64.load_state_dict({k: v.double() for k, v in m32.state_dict().items()})
        x = np.random.default_rng(2).standard_normal((5, 2, 4))
        x32, x64 = ts.tensor(x).float().requires_grad_(), ts.tensor(x).requires_grad_()
        for m, xx in ((m32, x32), (m64, x64)):
            out, state = m(xx)
            _loss(out, state).backward()
        _close(x32.grad, x64.grad, 1e-3, 1e-4)
        for p32, p64 in zip(m32.parameters(), m64.parameters()):
            _close(p32.grad, p64.grad, 1e-3, 1e-4)


def test_backward_twice_with_retain_graph():
    m = ts.nn.LSTM(3, 4)
    x = ts.randn(5, 2, 3, requires_grad=True)
    out, _ = m(x)
    out.sum().backward(retain_graph=True)
    first = x.grad.numpy().copy()
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-5, atol=1e-6)


def test_inference_and_empty_batches():
    m = ts.nn.GRU(3, 4)
    with ts.no_grad():
        out, h = m(ts.randn(6, 2, 3))
    assert tuple(out.shape) == (6, 2, 4) and not out.requires_grad
    out, h = m(ts.randn(6, 0, 3))
    assert tuple(out.shape) == (6, 0, 4) and tuple(h.shape) == (1, 0, 4)


@pytest.mark.parametrize("cls_name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_torch(cls_name):
    torch = _torch()
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls_name)(5, 7)
    sm = getattr(ts.nn, cls_name)(5, 7)
    with ts.no_grad():
        for p_t, p_s in zip(tm.parameters(), sm.parameters()):
            p_s.copy_(ts.tensor(p_t.detach().numpy()))
    x_t = torch.randn(3, 5, requires_grad=True)
    x_s = ts.tensor(x_t.detach().numpy()).requires_grad_()
    h_t, h_s = None, None
    for _ in range(3):  # a few steps, feeding the state back
        h_t, h_s = tm(x_t, h_t), sm(x_s, h_s)
    _loss(h_t[0] if isinstance(h_t, tuple) else h_t, h_t).backward()
    _loss(h_s[0] if isinstance(h_s, tuple) else h_s, h_s).backward()
    for a, b in zip(h_s if isinstance(h_s, tuple) else (h_s,), h_t if isinstance(h_t, tuple) else (h_t,)):
        _close(a, b)
    _compare_grads(tm, sm, x_t, x_s, 1e-3)
    single = sm(x_s[0].detach())  # unbatched
    assert tuple((single[0] if isinstance(single, tuple) else single).shape) == (7,)


def test_parameters_and_repr_as_torch():
    m = ts.nn.LSTM(10, 20, num_layers=2, bidirectional=True, proj_size=5, batch_first=True)
    names = [n for n, _ in m.named_parameters()]
    assert names[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]
    assert names[5] == "weight_ih_l0_reverse" and len(names) == 20
    assert tuple(m.weight_ih_l1.shape) == (80, 10) and tuple(m.weight_hh_l0.shape) == (80, 5)
    assert repr(m) == "LSTM(10, 20, proj_size=5, num_layers=2, batch_first=True, bidirectional=True)"
    bound = 1 / np.sqrt(20)
    assert all(float(p.abs().max()) <= bound for p in m.parameters())


def test_bad_input_names_sizes():
    m = ts.nn.LSTM(10, 20)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 10, got 7"):
        m(ts.randn(5, 3, 7))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 3, 20\), got \[2, 3, 20\]"):
        m(ts.randn(5, 3, 10), (ts.zeros(2, 3, 20), ts.zeros(1, 3, 20)))
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D, got 4D instead"):
        m(ts.randn(5, 3, 10, 1))
    with pytest.raises(RuntimeError, match="hx and cx should also be 2-D"):
        m(ts.randn(5, 10), (ts.zeros(1, 1, 20), ts.zeros(1, 1, 20)))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 3, 20\), got \[1, 4, 20\]"):
        ts.nn.GRU(10, 20)(ts.randn(5, 3, 10), ts.zeros(1, 4, 20))
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        ts.nn.GRU(10, 0)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        ts.nn.LSTM(10, 4, proj_size=4)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        ts.nn.GRU(10, 4, proj_size=2)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        ts.nn.RNN(10, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        ts.nn.LSTM(10, 4, dropout=1.5)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        ts.nn.LSTM(10, 4, dropout=0.5)


def test_the_layer_operator_refuses_bad_arguments():
    x, w_ih, w_hh, h = ts.randn(3, 2, 4), ts.randn(9, 4), ts.randn(9, 3), ts.zeros(2, 3)  # a GRU, H = 3
    with pytest.raises(ValueError, match="expected weight_ih of shape \\[9, 4\\]"):
        ts.ops.aten._rnn_layer(x, ts.randn(9, 5), w_hh, None, None, h, None, 3, False, False)
    with pytest.raises(ValueError, match="an LSTM needs cx"):
        ts.ops.aten._rnn_layer(x, ts.randn(12, 4), ts.randn(12, 3), None, None, h, None, 2, False, False)
    with pytest.raises(TypeError, match="expected float32"):
        ts.ops.aten._rnn_layer(x.double(), w_ih.double(), w_hh.double(), None, None, h.double(), None, 3, False, False)
    with pytest.raises(ValueError, match="expected mode 0"):
        ts.ops.aten._rnn_layer(x, w_ih, w_hh, None, None, h, None, 7, False, False)
    y, hy, cy, ws = ts.ops.aten._rnn_layer(x, w_ih, w_hh, None, None, h, None, 3, False, False)
    with pytest.raises(ValueError, match="workspace"):  # a backward needs a training forward's workspace
        ts.ops.aten._rnn_layer_backward(x, w_ih, w_hh, None, None, h, None, y, hy, cy, ws, y, None, None, 3, False)


def test_dropout_between_layers_only_in_training():
    ts.manual_seed(0)
    m = ts.nn.LSTM(4, 8, num_layers=2, dropout=0.5)
    x = ts.randn(5, 3, 4)
    m.eval()
    a, _ = m(x)
    b, _ = m(x)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    m.train()
    c, _ = m(x)
    assert not np.allclose(c.detach().numpy(), a.detach().numpy())
