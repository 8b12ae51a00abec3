"""nn surface added for real programs: ParameterList / ParameterDict, 1-D max/avg pooling, LP
pooling (1-D, 2-D), adaptive max pooling, max unpooling, Softmax2d, Bilinear, RReLU, the multi-class
and multi-label margin losses, CTC loss, gumbel_softmax, pdist, and activation checkpointing
(tessera.utils.checkpoint). Each against NumPy references written here (or the ordinary, not
checkpointed, computation), and against PyTorch on the same inputs when it is importable."""
import warnings

import numpy as np
import pytest

import tessera as ts
from conftest import HAVE_TORCH, to_np

if HAVE_TORCH:
    import torch
else:  # pragma: no cover
    torch = None

RNG = np.random.default_rng(77)


def T(a, requires_grad=False):
    return ts.tensor(np.asarray(a, dtype=np.float32), requires_grad=requires_grad)


def P(a, requires_grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float32), requires_grad=requires_grad)


# ---------------------------------------------------------------------------- containers
def test_parameter_list_and_dict_register_their_parameters():
    class Model(ts.nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = ts.nn.ParameterList([ts.nn.Parameter(ts.ones(2)), ts.zeros(3)])  # a tensor is wrapped
            self.extra = ts.nn.ParameterDict({"w": ts.randn(2, 2)})

        def forward(self, x):
            return (x * self.scales[0]).sum() + self.scales[1].sum() + (self.extra["w"] @ x).sum()

    m = Model()
    assert [n for n, _ in m.named_parameters()] == ["scales.0", "scales.1", "extra.w"]
    assert isinstance(m.scales[1], ts.nn.Parameter) and m.scales[1].requires_grad
    m.scales.append(ts.ones(1))
    m.extra["b"] = ts.zeros(1)
    assert len(m.scales) == 3 and len(m.extra) == 2 and "b" in m.extra and list(m.extra.keys()) == ["w", "b"]
    assert set(m.state_dict()) == {"scales.0", "scales.1", "scales.2", "extra.w", "extra.b"}
    m(ts.ones(2)).backward()
    np.testing.assert_allclose(to_np(m.scales[0].grad), [1.0, 1.0])
    assert m.extra.pop("b").shape == (1,) and "b" not in m.extra
    with pytest.raises(IndexError):
        m.scales[5]
    with pytest.raises(TypeError, match="keys must be str"):
        m.extra[3] = ts.ones(1)
    assert "Parameter containing: [tessera.float32 of size 2]" in repr(m.scales)  # torch's form, torch.float32 there


# ---------------------------------------------------------------------------- 1-D and LP pooling
def np_windows(x, k, s, p, d=1, pad_value=0.0):
    """(N, C, L) -> (N, C, L_out, k) windows of the padded input."""
    xp = np.pad(x, ((0, 0), (0, 0), (p, p)), constant_values=pad_value)
    out = (x.shape[-1] + 2 * p - d * (k - 1) - 1) // s + 1
    return np.stack([xp[..., i * s: i * s + d * (k - 1) + 1: d] for i in range(out)], axis=2)


@pytest.mark.parametrize("k, s, p, d", [(3, 1, 0, 1), (2, 2, 1, 1), (3, 2, 1, 2)])
def test_max_and_avg_pool1d(k, s, p, d):
    x = RNG.standard_normal((2, 3, 11)).astype(np.float32)
    xt = T(x, requires_grad=True)
    out, idx = ts.nn.functional.max_pool1d(xt, k, s, p, d, return_indices=True)
    np.testing.assert_allclose(to_np(out), np_windows(x, k, s, p, d, -np.inf).max(-1), rtol=1e-6)
    np.testing.assert_allclose(to_np(ts.nn.MaxPool1d(k, s, p, d)(T(x[0]))), np_windows(x[:1], k, s, p, d, -np.inf).max(-1)[0])
    out.sum().backward()
    grad = np.zeros_like(x)  # each window's max gets one
    for n in range(2):
        for c in range(3):
            for j in to_np(idx)[n, c]:
                grad[n, c, j] += 1
    np.testing.assert_allclose(to_np(xt.grad), grad)
    if d == 1:
        avg = ts.nn.AvgPool1d(k, s, p)(T(x))
        np.testing.assert_allclose(to_np(avg), np_windows(x, k, s, p).mean(-1), rtol=1e-5, atol=1e-6)
    if HAVE_TORCH:
        to, ti = torch.nn.functional.max_pool1d(P(x), k, s, p, d, return_indices=True)
        np.testing.assert_allclose(to_np(out), to.numpy())
        np.testing.assert_array_equal(to_np(idx), ti.numpy())
        if d == 1:
            np.testing.assert_allclose(to_np(avg), torch.nn.AvgPool1d(k, s, p)(P(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_lp_pool_1d_and_2d():
    x = RNG.uniform(0.1, 2.0, (2, 3, 8, 9)).astype(np.float32)
    y2 = ts.nn.LPPool2d(2, (2, 3), stride=(2, 2))(T(x))
    ref2 = np.sqrt(np.stack([[(x[..., i * 2: i * 2 + 2, j * 2: j * 2 + 3] ** 2).sum((-1, -2))
                              for j in range(4)] for i in range(4)]).transpose(2, 3, 0, 1))
    np.testing.assert_allclose(to_np(y2), ref2, rtol=1e-5)
    x1 = x[:, :, 0, :]
    y1 = ts.nn.LPPool1d(3, 3)(T(x1))
    np.testing.assert_allclose(to_np(y1), (np_windows(x1, 3, 3, 0) ** 3).sum(-1) ** (1 / 3), rtol=1e-5)
    if HAVE_TORCH:
        np.testing.assert_allclose(to_np(y2), torch.nn.LPPool2d(2, (2, 3), stride=(2, 2))(P(x)).numpy(), rtol=1e-5)
        np.testing.assert_allclose(to_np(y1), torch.nn.LPPool1d(3, 3)(P(x1)).numpy(), rtol=1e-5)


def test_pool1d_errors_name_the_operator():
    with pytest.raises(ValueError, match="max_pool1d: expected a 2-D .* or 3-D .* input, got 4-D"):
        ts.nn.functional.max_pool1d(ts.ones(1, 1, 1, 4), 2)
    with pytest.raises(ValueError, match="avg_pool1d"):
        ts.nn.functional.avg_pool1d(ts.ones(4), 2)


# ---------------------------------------------------------------------------- Softmax2d, Bilinear, pdist
def test_softmax2d_normalises_the_channels():
    x = RNG.standard_normal((2, 4, 3, 3)).astype(np.float32)
    y = to_np(ts.nn.Softmax2d()(T(x)))
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5)
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D"):
        ts.nn.Softmax2d()(ts.ones(2, 2))


def test_bilinear_forward_backward_and_init():
    ts.manual_seed(0)
    layer = ts.nn.Bilinear(3, 4, 5)
    bound = 1 / np.sqrt(3)
    assert layer.weight.shape == (5, 3, 4) and np.abs(to_np(layer.weight)).max() <= bound
    x1, x2 = RNG.standard_normal((2, 6, 3)).astype(np.float32), RNG.standard_normal((2, 6, 4)).astype(np.float32)
    a, b = T(x1, True), T(x2, True)
    y = layer(a, b)
    w, bias = to_np(layer.weight), to_np(layer.bias)
    np.testing.assert_allclose(to_np(y), np.einsum("...i,oij,...j->...o", x1, w, x2) + bias, rtol=1e-5, atol=1e-5)
    y.sum().backward()
    np.testing.assert_allclose(to_np(a.grad), np.einsum("oij,...j->...i", w, x2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(layer.weight.grad), np.einsum("abi,abj->ij", x1, x2)[None].repeat(5, 0),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError, match="bilinear"):
        layer(T(x1), T(x1))
    if HAVE_TORCH:
        tb = torch.nn.Bilinear(3, 4, 5)
        with torch.no_grad():
            tb.weight.copy_(torch.tensor(w))
            tb.bias.copy_(torch.tensor(bias))
        np.testing.assert_allclose(to_np(y), tb(P(x1), P(x2)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_pdist_matches_the_pairwise_norms():
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    for p in (1.0, 2.0, 3.5, float("inf")):
        want = [np.linalg.norm(x[i] - x[j], ord=p) for i in range(5) for j in range(i + 1, 5)]
        np.testing.assert_allclose(to_np(ts.nn.functional.pdist(T(x), p)), want, rtol=1e-5)
        if HAVE_TORCH:
            np.testing.assert_allclose(to_np(ts.nn.functional.pdist(T(x), p)), torch.pdist(P(x), p).numpy(), rtol=1e-5)
    with pytest.raises(RuntimeError, match="pdist only supports 2D tensors, got: 3D"):
        ts.nn.functional.pdist(ts.ones(2, 2, 2))


def test_gumbel_softmax_samples_the_categorical():
    logits = T(np.log([0.1, 0.2, 0.7]))
    ts.manual_seed(1)
    samples = ts.nn.functional.gumbel_softmax(logits.expand(20000, 3), tau=0.5, hard=True)
    s = to_np(samples)
    assert set(np.unique(s)) == {0.0, 1.0} and np.all(s.sum(1) == 1)  # one-hot rows
    np.testing.assert_allclose(s.mean(0), [0.1, 0.2, 0.7], atol=0.015)  # argmax of logits + Gumbel noise
    soft = ts.nn.functional.gumbel_softmax(T(RNG.standard_normal((4, 5)), True), tau=2.0)
    np.testing.assert_allclose(to_np(soft).sum(1), np.ones(4), rtol=1e-6)
    x = T(RNG.standard_normal((4, 5)), True)
    hard = ts.nn.functional.gumbel_softmax(x, hard=True)
    (hard * T(np.arange(5))).sum().backward()  # straight through: the soft sample's gradient
    assert x.grad is not None and np.abs(to_np(x.grad)).sum() > 0


# ---------------------------------------------------------------------------- checkpointing
def make_model(lib):
    lib.manual_seed(0)
    nn = lib.nn
    return nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.25), nn.GELU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_recomputes_with_the_same_dropout_and_gradients(use_reentrant):
    from tessera.utils.checkpoint import checkpoint, checkpoint_sequential
    model = make_model(ts)
    x0 = RNG.standard_normal((5, 6)).astype(np.float32)

    def run(wrap):
        model.zero_grad()
        x = T(x0, True)
        ts.manual_seed(42)
        y = wrap(x)
        (y * T(np.arange(15).reshape(5, 3))).sum().backward()
        return to_np(y.detach()), [to_np(p.grad) for p in model.parameters()] + [to_np(x.grad)]

    y_ref, g_ref = run(model)
    y_ck, g_ck = run(lambda x: checkpoint(model, x, use_reentrant=use_reentrant))
    y_seq, g_seq = run(lambda x: checkpoint_sequential(model, 3, x, use_reentrant=use_reentrant))
    for y, g in ((y_ck, g_ck), (y_seq, g_seq)):
        np.testing.assert_allclose(y, y_ref, rtol=1e-6)
        for a, b in zip(g, g_ref):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_checkpoint_keeps_no_activations_and_passes_keywords():
    from tessera.utils.checkpoint import checkpoint
    calls = []

    def f(x, scale=1.0):
        calls.append(ts.is_grad_enabled())
        return (x * scale).sin()

    x = T([0.5, 1.0], True)
    y = checkpoint(f, x, use_reentrant=False, scale=2.0)
    assert calls == [False]  # the forward ran without a graph
    y.sum().backward()
    assert calls == [False, True]  # recomputed with one in backward
    np.testing.assert_allclose(to_np(x.grad), 2 * np.cos(2 * np.array([0.5, 1.0])), rtol=1e-6)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        checkpoint(f, x)
    assert any("use_reentrant" in str(m.message) for m in w)
    with ts.no_grad():  # nothing to record: the function just runs
        assert checkpoint(f, x, use_reentrant=True).requires_grad is False


# ---------------------------------------------------------------------------- adaptive max, unpool, rrelu, margin losses
@pytest.mark.parametrize("out_size", [(1, 1), (3, 2), (4, 5), (None, 3)])
def test_adaptive_max_pool2d_values_indices_and_gradient(out_size):
    x = RNG.standard_normal((2, 3, 7, 9)).astype(np.float32)
    xt = T(x, True)
    out, idx = ts.nn.AdaptiveMaxPool2d(out_size, return_indices=True)(xt)
    oh, ow = (7 if out_size[0] is None else out_size[0]), out_size[1]
    want = np.zeros((2, 3, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            h0, h1 = i * 7 // oh, -(-(i + 1) * 7 // oh)
            w0, w1 = j * 9 // ow, -(-(j + 1) * 9 // ow)
            want[..., i, j] = x[..., h0:h1, w0:w1].max((-1, -2))
    np.testing.assert_allclose(to_np(out), want)
    np.testing.assert_allclose(np.take_along_axis(x.reshape(2, 3, -1), to_np(idx).reshape(2, 3, -1), -1).reshape(want.shape), want)
    out.sum().backward()
    assert to_np(xt.grad).sum() == oh * ow * 6  # one per window (no ties in random data)
    if HAVE_TORCH:
        to, ti = torch.nn.AdaptiveMaxPool2d(out_size, return_indices=True)(P(x))
        np.testing.assert_allclose(to_np(out), to.numpy())
        np.testing.assert_array_equal(to_np(idx), ti.numpy())
    x1 = x[:, :, 0, :]
    np.testing.assert_allclose(to_np(ts.nn.AdaptiveMaxPool1d(4)(T(x1))),
                               np.stack([x1[..., j * 9 // 4: -(-(j + 1) * 9 // 4)].max(-1) for j in range(4)], -1))


def test_max_unpool_inverts_max_pool():
    x = RNG.standard_normal((2, 3, 6, 8)).astype(np.float32)
    pooled, idx = ts.nn.functional.max_pool2d(T(x), 2, return_indices=True)
    un = to_np(ts.nn.MaxUnpool2d(2)(pooled, idx))
    assert un.shape == (2, 3, 6, 8)
    kept = un != 0  # each window's max back at its place, zeros elsewhere
    np.testing.assert_allclose(un[kept], x[kept])
    assert kept.sum() == 2 * 3 * 3 * 4
    p1, i1 = ts.nn.functional.max_pool1d(T(x[:, :, 0]), 2, return_indices=True)
    u1 = to_np(ts.nn.MaxUnpool1d(2)(p1, i1, output_size=[9]))
    assert u1.shape == (2, 3, 9)
    if HAVE_TORCH:
        tp, ti = torch.nn.functional.max_pool2d(P(x), 2, return_indices=True)
        np.testing.assert_allclose(un, torch.nn.MaxUnpool2d(2)(tp, ti).numpy())
    with pytest.raises(ValueError, match="max_unpool2d: expected indices of the input's shape"):
        ts.nn.functional.max_unpool2d(pooled, idx[..., :1], 2)


def test_rrelu_slopes():
    x = T(np.linspace(-3, 3, 4001))
    m = ts.nn.RReLU(0.1, 0.3)
    m.eval()
    np.testing.assert_allclose(to_np(m(x)), np.where(to_np(x) >= 0, to_np(x), to_np(x) * 0.2), rtol=1e-6)
    m.train()
    ratio = to_np(m(x))[:2000] / to_np(x)[:2000]
    assert ratio.min() >= 0.1 - 1e-6 and ratio.max() <= 0.3 + 1e-6 and ratio.std() > 0.03  # drawn per element
    np.testing.assert_allclose(to_np(m(x))[2001:], to_np(x)[2001:])


def test_multi_margin_and_multilabel_margin_losses():
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    y = np.array([0, 3, 4, 1])
    w = RNG.uniform(0.5, 2, 5).astype(np.float32)
    for p in (1, 2):
        got = ts.nn.MultiMarginLoss(p=p, margin=0.7, weight=T(w), reduction="none")(T(x), ts.tensor(y))
        want = np.array([sum(max(0, 0.7 - x[n, y[n]] + x[n, i]) ** p * w[y[n]] for i in range(5) if i != y[n]) / 5
                         for n in range(4)])
        np.testing.assert_allclose(to_np(got), want, rtol=1e-5, atol=1e-7)
        if HAVE_TORCH:
            tl = torch.nn.MultiMarginLoss(p=p, margin=0.7, weight=P(w), reduction="none")(P(x), torch.tensor(y))
            np.testing.assert_allclose(to_np(got), tl.numpy(), rtol=1e-5, atol=1e-7)
    targets = np.array([[3, 0, -1, 1, 1], [1, 2, 4, 0, 3], [-1, 0, 0, 0, 0], [2, -1, 0, 0, 0]])
    got = ts.nn.MultiLabelMarginLoss(reduction="none")(T(x), ts.tensor(targets))
    want = []
    for n in range(4):
        labels = []
        for t in targets[n]:
            if t == -1:
                break
            labels.append(int(t))
        want.append(sum(max(0, 1 - (x[n, j] - x[n, i])) for j in labels for i in range(5) if i not in labels) / 5)
    np.testing.assert_allclose(to_np(got), want, rtol=1e-5, atol=1e-7)
    if HAVE_TORCH:
        tl = torch.nn.MultiLabelMarginLoss(reduction="none")(P(x), torch.tensor(targets))
        np.testing.assert_allclose(to_np(got), tl.numpy(), rtol=1e-5, atol=1e-7)
    with pytest.raises(RuntimeError, match="multi_margin_loss: expected a target of shape"):
        ts.nn.functional.multi_margin_loss(T(x), ts.tensor(y[:2]))


# ---------------------------------------------------------------------------- CTC
def np_ctc(lp, target, blank=0):
    """-log p(target | lp) by summing every alignment's probability: the forward recursion in
    float64 over the blank-extended target (an independent plain-loop implementation)."""
    ext = [blank]
    for c in target:
        ext += [c, blank]
    alpha = np.full(len(ext), -np.inf)
    if len(lp) == 0:
        return 0.0 if not target else np.inf
    alpha[0] = lp[0, blank]
    if len(ext) > 1:
        alpha[1] = lp[0, ext[1]]
    for t in range(1, len(lp)):
        new = np.full(len(ext), -np.inf)
        for s in range(len(ext)):
            terms = [alpha[s]] + ([alpha[s - 1]] if s >= 1 else [])
            if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                terms.append(alpha[s - 2])
            new[s] = np.logaddexp.reduce(terms) + lp[t, ext[s]]
        alpha = new
    return -np.logaddexp(alpha[-1], alpha[-2] if len(ext) > 1 else -np.inf)


def test_ctc_loss_against_the_alignment_sum_and_torch():
    steps, N, C = 10, 4, 5
    logits = RNG.standard_normal((steps, N, C)).astype(np.float32)
    targets = RNG.integers(1, C, (N, 4))
    targets[1, :2] = 3  # a repeated label needs a blank between its copies
    in_len, tg_len = [10, 9, 6, 10], [4, 3, 2, 0]
    lp = to_np(T(logits).log_softmax(2)).astype(np.float64)
    want = [np_ctc(lp[:in_len[n], n], list(targets[n, :tg_len[n]])) for n in range(N)]
    x = T(logits, True)
    loss = ts.nn.functional.ctc_loss(x.log_softmax(2), ts.tensor(targets), in_len, tg_len, reduction="none")
    np.testing.assert_allclose(to_np(loss), want, rtol=1e-5)
    flat = ts.tensor(np.concatenate([targets[n, :tg_len[n]] for n in range(N)]))  # the concatenated form
    mean = ts.nn.CTCLoss()(x.log_softmax(2), flat, ts.tensor(in_len), ts.tensor(tg_len))
    np.testing.assert_allclose(to_np(mean), np.mean(np.array(want) / np.maximum(tg_len, 1)), rtol=1e-5)
    mean.backward()
    if HAVE_TORCH:
        tx = P(logits, True)
        tmean = torch.nn.CTCLoss()(tx.log_softmax(2), torch.tensor(targets), in_len, tg_len)
        tmean.backward()
        np.testing.assert_allclose(to_np(mean), tmean.item(), rtol=1e-5)
        np.testing.assert_allclose(to_np(x.grad), tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    # An input too short for its target has no alignment: inf, or 0 with zero_infinity.
    short = ts.nn.functional.ctc_loss(x[:2].log_softmax(2), ts.tensor(targets), [2] * N, [4, 3, 2, 0], reduction="none")
    assert np.isinf(to_np(short)[0]) and np.isinf(to_np(short)[1])
    zeroed = ts.nn.functional.ctc_loss(x[:2].log_softmax(2), ts.tensor(targets), [2] * N, [4, 3, 2, 0],
                                       reduction="none", zero_infinity=True)
    assert to_np(zeroed)[0] == 0 and np.isfinite(to_np(zeroed)).all()
    one = ts.nn.functional.ctc_loss(x[:, 0].log_softmax(1), ts.tensor(targets[0]), 10, 4, reduction="none")
    np.testing.assert_allclose(to_np(one), want[0], rtol=1e-5)  # unbatched
    with pytest.raises(RuntimeError, match="ctc_loss: expected 4 input and target lengths"):
        ts.nn.functional.ctc_loss(x.log_softmax(2), ts.tensor(targets), [10], tg_len)
