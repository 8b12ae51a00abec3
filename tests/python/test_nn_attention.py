"""scaled_dot_product_attention's fused float32 CPU kernel (_scaled_dot_product_flash_attention_for_cpu
and its backward): values and gradients against a NumPy reference written here and against
PyTorch when importable, at sizes that cross the kernel's 128-row blocks; attn_mask (bool and
float, broadcast), grouped-query heads, bfloat16/float16 computed in float32; the transforms
(double backward, forward AD, vmap) that the kernel hands to operators; bad input."""
import numpy as np
import pytest

import tessera as ts

F = ts.nn.functional
aten = ts.ops.aten

try:
    import torch
except ImportError:
    torch = None


def np_attention(q, k, v, causal, scale=None):
    """float64 reference: softmax(q k^T * scale, masked top-left causal) v."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        L, S = s.shape[-2:]
        s = np.where(np.arange(L)[:, None] >= np.arange(S)[None, :], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def inputs(B, H, L, S, E, Ev, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, H, L, E)).astype(np.float32), rng.standard_normal((B, H, S, E)).astype(np.float32),
            rng.standard_normal((B, H, S, Ev)).astype(np.float32))


def is_fused(out):
    """The fused kernel lays its [B, H, L, Ev] output out as [B, L, H, Ev]."""
    B, H, L, Ev = out.shape
    return H > 1 and L > 1 and out.stride() == (L * H * Ev, Ev, H * Ev, 1)


CASES = [  # (B, H, L, S, E, Ev, causal, scale)
    (2, 3, 300, 300, 16, 16, True, None),    # three query and key blocks, the diagonal inside blocks
    (1, 2, 130, 260, 8, 24, False, None),    # L != S, Ev != E
    (2, 2, 260, 100, 16, 8, True, None),     # more queries than keys: the last rows see every key
    (1, 2, 70, 300, 16, 16, True, 0.3),      # fewer queries than keys under causal: later keys unseen
    (3, 2, 1, 5, 4, 4, False, None),         # one query
]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_values_and_gradients(case):
    B, H, L, S, E, Ev, causal, scale = case
    q, k, v = inputs(B, H, L, S, E, Ev)
    Q, K, V = (ts.tensor(a, requires_grad=True) for a in (q, k, v))
    out = F.scaled_dot_product_attention(Q, K, V, is_causal=causal, scale=scale)
    assert is_fused(out) or L == 1
    np.testing.assert_allclose(out.detach().numpy(), np_attention(q, k, v, causal, scale), rtol=1e-4, atol=1e-5)
    g = np.random.default_rng(9).standard_normal(out.shape).astype(np.float32)
    out.backward(ts.tensor(g))
    # the gradients of the float64 operator path (no fused kernel for float64)
    Q64, K64, V64 = (ts.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v))
    F.scaled_dot_product_attention(Q64, K64, V64, is_causal=causal, scale=scale).backward(ts.tensor(g.astype(np.float64)))
    for ours, ref in ((Q, Q64), (K, K64), (V, V64)):
        np.testing.assert_allclose(ours.grad.numpy(), ref.grad.numpy(), rtol=1e-4, atol=1e-4)
    if torch is not None:
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        ty = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(out.detach().numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
        for ours, theirs in ((Q, tq), (K, tk), (V, tv)):
            np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_reads_strided_views_in_place():
    """nanoGPT's q, k, v: views of one [B, T, 3C] projection, heads transposed; the output's
    transpose(1, 2) is then contiguous."""
    B, T, H, D = 2, 150, 3, 8
    x = ts.randn(B, T, 3 * H * D, requires_grad=True)
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in x.split(H * D, dim=2))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.transpose(1, 2).is_contiguous()
    xa = x.detach().numpy().reshape(B, T, 3, H, D).transpose(2, 0, 3, 1, 4)
    np.testing.assert_allclose(out.detach().numpy(), np_attention(xa[0], xa[1], xa[2], True), rtol=1e-4, atol=1e-5)
    out.sum().backward()
    x64 = x.detach().to(ts.float64).requires_grad_()
    q64, k64, v64 = (t.view(B, T, H, D).transpose(1, 2) for t in x64.split(H * D, dim=2))
    F.scaled_dot_product_attention(q64, k64, v64, is_causal=True).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x64.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_double_backward_takes_the_operators():
    """With create_graph the backward is built from operators, so second derivatives exist: d/dK of
    sum(dL/dQ) against central differences of the float64 operator path's dL/dQ."""
    q, k, v = (a.astype(np.float64) for a in inputs(1, 2, 6, 5, 3, 3, seed=3))

    def loss(out):
        return (out ** 2).sum()

    def grad_q_sum(k64):  # float64: the operator path
        Q = ts.tensor(q, requires_grad=True)
        out = F.scaled_dot_product_attention(Q, ts.tensor(k64), ts.tensor(v), is_causal=True)
        (gq,) = ts.autograd.grad(loss(out), Q)
        return float(gq.sum())

    Q, K, V = (ts.tensor(a.astype(np.float32), requires_grad=True) for a in (q, k, v))
    out = F.scaled_dot_product_attention(Q, K, V, is_causal=True)
    assert is_fused(out)
    (gq,) = ts.autograd.grad(loss(out), Q, create_graph=True)
    (ggk,) = ts.autograd.grad(gq.sum(), K)
    numeric = np.zeros_like(k)
    for i in np.ndindex(k.shape):
        step = np.zeros_like(k)
        step[i] = 1e-5
        numeric[i] = (grad_q_sum(k + step) - grad_q_sum(k - step)) / 2e-5
    np.testing.assert_allclose(ggk.numpy(), numeric, rtol=1e-3, atol=1e-3)


def test_forward_ad_and_vmap():
    q, k, v = inputs(2, 2, 20, 30, 4, 4, seed=4)
    tangents = inputs(2, 2, 20, 30, 4, 4, seed=5)
    attend = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    _, jvp32 = ts.func.jvp(attend, tuple(ts.tensor(a) for a in (q, k, v)), tuple(ts.tensor(a) for a in tangents))
    _, jvp64 = ts.func.jvp(attend, tuple(ts.tensor(a.astype(np.float64)) for a in (q, k, v)),
                           tuple(ts.tensor(a.astype(np.float64)) for a in tangents))
    np.testing.assert_allclose(jvp32.numpy(), jvp64.numpy(), rtol=1e-4, atol=1e-5)
    # vmap over a leading dim: each sample is 4-D, batched tensors take the operator path
    stacked = [np.stack([a, a[::-1].copy()]) for a in (q, k, v)]
    got = ts.vmap(attend)(*(ts.tensor(a) for a in stacked))
    for i in range(2):
        np.testing.assert_allclose(got[i].numpy(), np_attention(*(a[i] for a in stacked), False), rtol=1e-4, atol=1e-5)


def test_the_operator_path_keeps_what_the_kernel_does_not_do():
    q, k, v = (ts.tensor(a) for a in inputs(1, 2, 10, 10, 4, 4))
    assert not is_fused(F.scaled_dot_product_attention(q.double(), k.double(), v.double()))
    assert not is_fused(F.scaled_dot_product_attention(q, k[:, :1], v[:, :1]))  # one key head broadcast
    assert not is_fused(F.scaled_dot_product_attention(q, k, v, dropout_p=0.5))
    mask = ts.zeros(10, 10, requires_grad=True)  # a mask that wants its gradient
    assert not is_fused(F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    # an expanded head (stride 0) is read in place
    shared = F.scaled_dot_product_attention(q, k[:, :1].expand(1, 2, 10, 4), v)
    assert is_fused(shared)
    np.testing.assert_allclose(shared.numpy(), np_attention(q.numpy(), np.repeat(k.numpy()[:, :1], 2, 1), v.numpy(),
                                                            False), rtol=1e-4, atol=1e-5)


def mask_of(kind, B, H, L, S, seed=7):
    """(NumPy additive float mask broadcast to [B, H, L, S], the attn_mask to pass)."""
    rng = np.random.default_rng(seed)
    if kind == "bool 4-D, a row fully masked":
        allowed = rng.random((B, H, L, S)) > 0.3
        allowed[:, :, 1] = False
        return np.where(allowed, 0.0, -np.inf), ts.tensor(allowed)
    if kind == "bool [L, S]":
        allowed = rng.random((L, S)) > 0.5
        allowed[:, 0] = True
        return np.where(allowed, 0.0, -np.inf), ts.tensor(allowed)
    if kind == "float [B, 1, L, S]":
        m = rng.standard_normal((B, 1, L, S)).astype(np.float32)
        m[0, 0, 2] = -np.inf
        return m, ts.tensor(m)
    if kind == "float [1, S] key padding":
        m = np.zeros((1, S), np.float32)
        m[:, S - 7:] = -np.inf
        return m, ts.tensor(m)
    assert kind == "float [S, L] transposed"
    m = rng.standard_normal((S, L)).astype(np.float32)
    return m.T, ts.tensor(m).t()  # read through its strides


MASKS = ["bool 4-D, a row fully masked", "bool [L, S]", "float [B, 1, L, S]", "float [1, S] key padding",
         "float [S, L] transposed"]


def np_masked_attention(q, k, v, mask):
    """float64 reference with an additive mask; a row that sees no key gives zeros."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]) + mask
    top = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = p.sum(-1, keepdims=True)
    return np.where(total > 0, p / np.where(total > 0, total, 1.0), 0.0) @ v


@pytest.mark.parametrize("kind", MASKS)
def test_masks_run_fused(kind):
    """attn_mask in the fused kernel (bool ones converted to 0 / -inf, any broadcast and strides,
    the mask added to each scores block): values against NumPy, gradients against the float64
    operator path and against PyTorch; a row that sees no key gives zeros and zero gradients."""
    B, H, L, S, E = 2, 2, 150, 300, 8
    q, k, v = inputs(B, H, L, S, E, E, seed=11)
    np_mask, mask = mask_of(kind, B, H, L, S)
    Q, K, V = (ts.tensor(a, requires_grad=True) for a in (q, k, v))
    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
    assert is_fused(out)
    np.testing.assert_allclose(out.detach().numpy(), np_masked_attention(q, k, v, np_mask), rtol=1e-4, atol=1e-5)
    g = np.random.default_rng(12).standard_normal(out.shape).astype(np.float32)
    out.backward(ts.tensor(g))
    Q64, K64, V64 = (ts.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v))
    mask64 = mask if mask.dtype == ts.bool else mask.to(ts.float64)
    F.scaled_dot_product_attention(Q64, K64, V64, attn_mask=mask64).backward(ts.tensor(g.astype(np.float64)))
    for ours, ref in ((Q, Q64), (K, K64), (V, V64)):
        assert np.isfinite(ours.grad.numpy()).all()
        np.testing.assert_allclose(ours.grad.numpy(), ref.grad.numpy(), rtol=1e-4, atol=1e-4)
    if kind.startswith("bool 4-D"):
        assert not out.detach().numpy()[:, :, 1].any() and not Q.grad.numpy()[:, :, 1].any()
    if torch is not None:
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        tmask = torch.tensor(mask.numpy())
        ty = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask)
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(out.detach().numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
        for ours, theirs in ((Q, tq), (K, tk), (V, tv)):
            np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_masked_double_backward_and_forward_ad():
    """With a mask, the operator formulas (create_graph, jvp) add it as the kernel does."""
    q, k, v = inputs(1, 2, 7, 9, 4, 4, seed=13)
    np_mask, mask = mask_of("bool 4-D, a row fully masked", 1, 2, 7, 9)
    Q, K, V = (ts.tensor(a, requires_grad=True) for a in (q, k, v))
    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
    assert is_fused(out)
    (gq,) = ts.autograd.grad((out ** 2).sum(), Q, create_graph=True)
    (ggk,) = ts.autograd.grad(gq.sum(), K)
    Q64, K64, V64 = (ts.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v))
    out64 = F.scaled_dot_product_attention(Q64, K64, V64, attn_mask=mask)
    (gq64,) = ts.autograd.grad((out64 ** 2).sum(), Q64, create_graph=True)
    (ggk64,) = ts.autograd.grad(gq64.sum(), K64)
    np.testing.assert_allclose(ggk.numpy(), ggk64.numpy(), rtol=1e-3, atol=1e-4)
    tangents = inputs(1, 2, 7, 9, 4, 4, seed=14)
    attend = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
    _, jvp32 = ts.func.jvp(attend, tuple(ts.tensor(a) for a in (q, k, v)), tuple(ts.tensor(a) for a in tangents))
    _, jvp64 = ts.func.jvp(attend, tuple(ts.tensor(a.astype(np.float64)) for a in (q, k, v)),
                           tuple(ts.tensor(a.astype(np.float64)) for a in tangents))
    np.testing.assert_allclose(jvp32.numpy(), jvp64.numpy(), rtol=1e-4, atol=1e-5)


def test_grouped_query_attention():
    """enable_gqa: 6 query heads over 2 key/value heads, each shared by 3 query heads in turn;
    the gradients of the shared heads sum over their group."""
    q = np.random.default_rng(15).standard_normal((2, 6, 140, 8)).astype(np.float32)
    _, k, v = inputs(2, 2, 1, 150, 8, 8, seed=16)
    Q, K, V = (ts.tensor(a, requires_grad=True) for a in (q, k, v))
    out = F.scaled_dot_product_attention(Q, K, V, is_causal=True, enable_gqa=True)
    assert is_fused(out)
    np.testing.assert_allclose(out.detach().numpy(), np_attention(q, np.repeat(k, 3, 1), np.repeat(v, 3, 1), True),
                               rtol=1e-4, atol=1e-5)
    out.sum().backward()
    Q64, K64, V64 = (ts.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v))
    F.scaled_dot_product_attention(Q64, K64.repeat_interleave(3, dim=1), V64.repeat_interleave(3, dim=1),
                                   is_causal=True).sum().backward()
    for ours, ref in ((Q, Q64), (K, K64), (V, V64)):
        np.testing.assert_allclose(ours.grad.numpy(), ref.grad.numpy(), rtol=1e-4, atol=1e-4)
    if torch is not None:
        ty = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)), is_causal=True,
                                                              enable_gqa=True)
        np.testing.assert_allclose(out.detach().numpy(), ty.numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError, match="Number of heads in key and value must divide the number of heads in query"):
        F.scaled_dot_product_attention(Q, K[:, :1].expand(2, 4, 150, 8), V, enable_gqa=True)


@pytest.mark.parametrize("dtype", [ts.bfloat16, ts.float16], ids=str)
def test_half_precision_computes_in_float32(dtype):
    """bfloat16 / float16 attention runs the fused kernel in float32 and rounds the output once:
    equal to the float32 result of the rounded inputs, rounded; gradients come back in dtype."""
    q, k, v = inputs(1, 2, 130, 140, 16, 16, seed=17)
    Q, K, V = (ts.tensor(a).to(dtype).requires_grad_() for a in (q, k, v))
    out = F.scaled_dot_product_attention(Q, K, V, is_causal=True)
    assert out.dtype == dtype
    rounded = [t.detach().to(ts.float32) for t in (Q, K, V)]
    want = F.scaled_dot_product_attention(*rounded, is_causal=True).to(dtype)
    np.testing.assert_array_equal(out.detach().to(ts.float32).numpy(), want.to(ts.float32).numpy())
    out.sum().backward()
    assert Q.grad.dtype == dtype and np.isfinite(Q.grad.to(ts.float32).numpy()).all()
    if torch is not None:
        tdtype = {ts.bfloat16: torch.bfloat16, ts.float16: torch.float16}[dtype]
        tq, tk, tv = (torch.tensor(t.detach().to(ts.float32).numpy()).to(tdtype) for t in (Q, K, V))
        ty = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        np.testing.assert_allclose(out.detach().to(ts.float32).numpy(), ty.float().numpy(), rtol=2e-2, atol=2e-2)


def test_bad_input_names_the_operator():
    q, k, v = (ts.tensor(a) for a in inputs(1, 2, 6, 6, 4, 4))
    op = aten._scaled_dot_product_flash_attention_for_cpu
    with pytest.raises(ValueError, match="_scaled_dot_product_flash_attention_for_cpu: expected dropout_p=0"):
        op(q, k, v, 0.5)
    with pytest.raises(TypeError, match="expected a float32 attn_mask .*got bool"):
        op(q, k, v, attn_mask=ts.ones(6, 6, dtype=ts.bool))
    with pytest.raises(ValueError, match=r"expected an attn_mask broadcastable to \[1, 2, 6, 6\].*got shape \[6, 5\]"):
        op(q, k, v, attn_mask=ts.zeros(6, 5))
    with pytest.raises(TypeError, match="expected float32 query, got float64"):
        op(q.double(), k, v)
    with pytest.raises(ValueError, match="expected a 4-D key"):
        op(q, k[0], v)
    with pytest.raises(ValueError, match="query's embedding size 4 does not match key's 3"):
        op(q, k[..., :3], v)
    with pytest.raises(ValueError, match="key has 6 positions but value has 5"):
        op(q, k, v[:, :, :5])
    out, lse = op(q, k, v)
    with pytest.raises(ValueError, match="_backward: expected float32 grad_out of shape"):
        aten._scaled_dot_product_flash_attention_for_cpu_backward(out[:, :, :3], q, k, v, out, lse, 0.0, False)


def test_multihead_attention_without_weights_runs_fused():
    """nn.MultiheadAttention(need_weights=False), as TransformerEncoderLayer calls it, goes through
    scaled_dot_product_attention (its fused kernel), as PyTorch's does; the same output as the
    path that computes the weights."""
    mha = ts.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    x = ts.randn(2, 150, 32)
    pad = ts.zeros(2, 150, dtype=ts.bool)
    pad[1, 140:] = True
    with ts.no_grad():
        with ts.profiler.profile() as prof:
            fused, none = mha(x, x, x, need_weights=False, key_padding_mask=pad)
        full, weights = mha(x, x, x, need_weights=True, key_padding_mask=pad)
    assert none is None and weights is not None
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in {e.key for e in prof.key_averages()}
    np.testing.assert_allclose(fused.numpy(), full.numpy(), rtol=1e-4, atol=1e-5)
