"""nn.MultiheadAttention (every option), the Transformer family and LocalResponseNorm against PyTorch:
the torch module's state_dict is loaded into the Tessera one, both run the same inputs, and outputs,
attention weights and every gradient are compared. Also parameter names, repr, torch's exception
types for bad shapes, and LocalResponseNorm against a NumPy formula."""
import math
import warnings

import numpy as np
import pytest

import tessera as ts
from tessera import nn
from tessera.nn import functional as F

RTOL, ATOL = 1e-4, 1e-5
# torch's note that its nested-tensor fast path is off (Tessera has none)
pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


# ---------------------------------------------------------------------------- helpers
def load_from_torch(m_ts, m_th):
    m_ts.load_state_dict({k: ts.tensor(v.detach().numpy()) for k, v in m_th.state_dict().items()})


def pair(a, torch, grad=False):
    """The same NumPy array as a tessera and a torch tensor (leaves that record gradients if grad)."""
    t_ts, t_th = ts.tensor(a), torch.tensor(a)
    if grad:
        t_ts.requires_grad_(True)
        t_th.requires_grad_(True)
    return t_ts, t_th


def close(got, want, what=""):
    got = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    want = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)


def backward_both(out_ts, out_th, rng, torch):
    """Backpropagates the same random cotangent through both outputs."""
    g = rng.normal(size=tuple(out_th.shape)).astype(np.float32)
    (out_ts * ts.tensor(g)).sum().backward()
    (out_th * torch.tensor(g)).sum().backward()


def compare_grads(m_ts, m_th, inputs=()):
    names_ts = [n for n, _ in m_ts.named_parameters()]
    names_th = [n for n, _ in m_th.named_parameters()]
    assert names_ts == names_th
    params_th = dict(m_th.named_parameters())
    for name, p in m_ts.named_parameters():
        q = params_th[name]
        if q.grad is None:
            assert p.grad is None or not np.any(p.grad.numpy()), name
            continue
        assert p.grad is not None, f"no gradient for {name}"
        close(p.grad, q.grad, f"grad of {name}")
    for i, (a, b) in enumerate(inputs):
        close(a.grad, b.grad, f"grad of input {i}")


def same_structure(m_ts, m_th):
    """Every submodule has torch's name, class and extra_repr. (Whole reprs differ only in how
    ModuleList prints repeated children: torch folds them into "(0-1): 2 x Layer(...)".)"""
    def rows(m):
        return [(name, type(sub).__name__, sub.extra_repr()) for name, sub in m.named_modules()]
    assert rows(m_ts) == rows(m_th)


def same_error(fn_ts, fn_th):
    """Both calls fail, and Tessera's exception is of torch's type."""
    with pytest.raises(Exception) as th_err:
        fn_th()
    with pytest.raises(Exception) as ts_err:
        fn_ts()
    assert isinstance(ts_err.value, type(th_err.value)), (type(ts_err.value), type(th_err.value), str(ts_err.value))
    return ts_err.value


# ---------------------------------------------------------------------------- MultiheadAttention
E, H, N, L, S = 8, 2, 3, 4, 5

MHA_CONFIGS = {
    "packed": {},
    "no-bias": {"bias": False},
    "kdim-vdim": {"kdim": 5, "vdim": 3},
    "bias-kv": {"add_bias_kv": True},
    "zero-attn": {"add_zero_attn": True},
    "bias-kv-zero-attn-kvdim": {"add_bias_kv": True, "add_zero_attn": True, "kdim": 6, "vdim": 7},
    "batch-first": {"batch_first": True},
    "batch-first-kvdim": {"batch_first": True, "kdim": 5, "vdim": 3, "add_bias_kv": True},
}


def make_masks(kind, rng, n=N, lq=L, s=S, heads=H):
    """(attn_mask, key_padding_mask) as NumPy arrays; the first key is never masked, so no row is
    fully masked."""
    def bool_mask(shape):
        m = rng.random(shape) < 0.4
        m[..., 0] = False
        return m

    def float_mask(shape):
        m = rng.normal(size=shape).astype(np.float32)
        m[bool_mask(shape)] = -np.inf
        return m

    am = kpm = None
    if "am2b" in kind:
        am = bool_mask((lq, s))
    if "am3b" in kind:
        am = bool_mask((n * heads, lq, s))
    if "am2f" in kind:
        am = float_mask((lq, s))
    if "am3f" in kind:
        am = float_mask((n * heads, lq, s))
    if "kpmb" in kind:
        kpm = bool_mask((n, s))
    if "kpmf" in kind:
        kpm = float_mask((n, s))
    return am, kpm


MASK_KINDS = ["none", "am2b", "am3b", "am2f", "am3f", "kpmb", "kpmf", "am2b+kpmb", "am3f+kpmf"]


def build_mha(torch, cfg, seed=0):
    torch.manual_seed(seed)
    m_th = torch.nn.MultiheadAttention(E, H, **cfg)
    with torch.no_grad():  # non-zero biases, so their gradients and placement are exercised
        for name, p in m_th.named_parameters():
            if "bias" in name:
                p.normal_(0, 0.3)
    m_ts = nn.MultiheadAttention(E, H, **cfg)
    load_from_torch(m_ts, m_th)
    return m_ts.eval(), m_th.eval()


@pytest.mark.torch
@pytest.mark.parametrize("masks", MASK_KINDS)
@pytest.mark.parametrize("config", list(MHA_CONFIGS))
def test_mha_matches_torch(torch, config, masks):
    cfg = MHA_CONFIGS[config]
    m_ts, m_th = build_mha(torch, cfg)
    rng = np.random.default_rng(len(config) * 31 + len(masks))
    kd, vd = cfg.get("kdim", E), cfg.get("vdim", E)
    bf = cfg.get("batch_first", False)
    lay = (lambda length, d: (N, length, d)) if bf else (lambda length, d: (length, N, d))
    q_ts, q_th = pair(rng.normal(size=lay(L, E)).astype(np.float32), torch, grad=True)
    k_ts, k_th = pair(rng.normal(size=lay(S, kd)).astype(np.float32), torch, grad=True)
    v_ts, v_th = pair(rng.normal(size=lay(S, vd)).astype(np.float32), torch, grad=True)
    am, kpm = make_masks(masks, rng)
    extra = int(bool(cfg.get("add_bias_kv"))) + int(bool(cfg.get("add_zero_attn")))
    kw_ts, kw_th = {}, {}
    if am is not None:
        kw_ts["attn_mask"], kw_th["attn_mask"] = pair(am, torch)
    if kpm is not None:
        kw_ts["key_padding_mask"], kw_th["key_padding_mask"] = pair(kpm, torch)
    # cycle through the weight options so every mask kind meets each of them somewhere
    variant = MASK_KINDS.index(masks) % 3
    need, avg = (True, True) if variant == 0 else (True, False) if variant == 1 else (False, True)
    o_ts, w_ts = m_ts(q_ts, k_ts, v_ts, need_weights=need, average_attn_weights=avg, **kw_ts)
    o_th, w_th = m_th(q_th, k_th, v_th, need_weights=need, average_attn_weights=avg, **kw_th)
    close(o_ts, o_th, "output")
    if need:
        close(w_ts, w_th, "weights")
        assert w_ts.shape[-1] == S + extra
    else:
        assert w_ts is None and w_th is None
    backward_both(o_ts, o_th, rng, torch)
    compare_grads(m_ts, m_th, [(q_ts, q_th), (k_ts, k_th), (v_ts, v_th)])


@pytest.mark.torch
@pytest.mark.parametrize("config", ["packed", "bias-kv", "batch-first"])
@pytest.mark.parametrize("form", ["self", "key-is-value"])
def test_mha_shared_inputs_match_torch(torch, config, form):
    """Self-attention (query is key is value) and key is value take the packed projection's shortcuts."""
    m_ts, m_th = build_mha(torch, MHA_CONFIGS[config], seed=1)
    rng = np.random.default_rng(7)
    bf = MHA_CONFIGS[config].get("batch_first", False)
    x_ts, x_th = pair(rng.normal(size=(N, L, E) if bf else (L, N, E)).astype(np.float32), torch, grad=True)
    m_ts_, m_th_ = pair(rng.normal(size=(N, S, E) if bf else (S, N, E)).astype(np.float32), torch, grad=True)
    if form == "self":
        args_ts, args_th, inputs = (x_ts, x_ts, x_ts), (x_th, x_th, x_th), [(x_ts, x_th)]
    else:
        args_ts, args_th, inputs = (x_ts, m_ts_, m_ts_), (x_th, m_th_, m_th_), [(x_ts, x_th), (m_ts_, m_th_)]
    kpm = make_masks("kpmb", rng, s=args_th[1].shape[1 if bf else 0])[1]
    o_ts, w_ts = m_ts(*args_ts, key_padding_mask=ts.tensor(kpm))
    o_th, w_th = m_th(*args_th, key_padding_mask=torch.tensor(kpm))
    close(o_ts, o_th)
    close(w_ts, w_th)
    backward_both(o_ts, o_th, rng, torch)
    compare_grads(m_ts, m_th, inputs)


@pytest.mark.torch
@pytest.mark.parametrize("config", ["packed", "kdim-vdim", "bias-kv-zero-attn-kvdim", "batch-first"])
@pytest.mark.parametrize("masks", ["none", "am2b+kpmb", "am3f"])
def test_mha_unbatched_matches_torch(torch, config, masks):
    cfg = MHA_CONFIGS[config]
    m_ts, m_th = build_mha(torch, cfg, seed=2)
    rng = np.random.default_rng(3)
    q_ts, q_th = pair(rng.normal(size=(L, E)).astype(np.float32), torch, grad=True)
    k_ts, k_th = pair(rng.normal(size=(S, cfg.get("kdim", E))).astype(np.float32), torch, grad=True)
    v_ts, v_th = pair(rng.normal(size=(S, cfg.get("vdim", E))).astype(np.float32), torch, grad=True)
    am, kpm = make_masks(masks, rng, n=1)
    kw_ts, kw_th = {}, {}
    if am is not None:
        kw_ts["attn_mask"], kw_th["attn_mask"] = pair(am, torch)
    if kpm is not None:
        kw_ts["key_padding_mask"], kw_th["key_padding_mask"] = pair(kpm[0], torch)
    for avg in (True, False):
        o_ts, w_ts = m_ts(q_ts, k_ts, v_ts, average_attn_weights=avg, **kw_ts)
        o_th, w_th = m_th(q_th, k_th, v_th, average_attn_weights=avg, **kw_th)
        close(o_ts, o_th)
        close(w_ts, w_th)
    backward_both(o_ts, o_th, rng, torch)
    compare_grads(m_ts, m_th, [(q_ts, q_th), (k_ts, k_th), (v_ts, v_th)])


@pytest.mark.torch
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("with_kpm", [False, True])
def test_mha_is_causal_matches_torch(torch, need_weights, with_kpm):
    m_ts, m_th = build_mha(torch, {"batch_first": True}, seed=4)
    rng = np.random.default_rng(5)
    x_ts, x_th = pair(rng.normal(size=(N, L, E)).astype(np.float32), torch, grad=True)
    causal = np.triu(np.ones((L, L), dtype=bool), 1)
    kw_ts, kw_th = {"attn_mask": ts.tensor(causal)}, {"attn_mask": torch.tensor(causal)}
    if with_kpm:
        kpm = make_masks("kpmb", rng, s=L)[1]
        kw_ts["key_padding_mask"], kw_th["key_padding_mask"] = pair(kpm, torch)
    o_ts, w_ts = m_ts(x_ts, x_ts, x_ts, is_causal=True, need_weights=need_weights, **kw_ts)
    o_th, w_th = m_th(x_th, x_th, x_th, is_causal=True, need_weights=need_weights, **kw_th)
    close(o_ts, o_th)
    if need_weights:
        close(w_ts, w_th)
    backward_both(o_ts, o_th, rng, torch)
    compare_grads(m_ts, m_th, [(x_ts, x_th)])
    # Tessera also takes is_causal alone (torch asks for the mask as well): the same numbers
    o_alone, _ = m_ts(x_ts, x_ts, x_ts, is_causal=True, need_weights=need_weights,
                      key_padding_mask=kw_ts.get("key_padding_mask"))
    close(o_alone, o_th)


@pytest.mark.torch
def test_mha_mixed_mask_types_warn_like_torch(torch):
    m_ts, m_th = build_mha(torch, {}, seed=6)
    rng = np.random.default_rng(6)
    x_ts, x_th = pair(rng.normal(size=(L, N, E)).astype(np.float32), torch)
    am, _ = make_masks("am2f", rng, s=L)
    _, kpm = make_masks("kpmb", rng, s=L)
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask"):
        o_ts, _ = m_ts(x_ts, x_ts, x_ts, attn_mask=ts.tensor(am), key_padding_mask=ts.tensor(kpm))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        o_th, _ = m_th(x_th, x_th, x_th, attn_mask=torch.tensor(am), key_padding_mask=torch.tensor(kpm))
    close(o_ts, o_th)


@pytest.mark.torch
@pytest.mark.parametrize("config", list(MHA_CONFIGS))
def test_mha_parameters_init_and_repr_match_torch(torch, config):
    cfg = MHA_CONFIGS[config]
    m_th = torch.nn.MultiheadAttention(E, H, **cfg)
    m_ts = nn.MultiheadAttention(E, H, **cfg)
    assert [(n, tuple(p.shape)) for n, p in m_ts.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in m_th.named_parameters()]
    assert list(m_ts.state_dict()) == list(m_th.state_dict())
    assert repr(m_ts) == repr(m_th)
    same = cfg.get("kdim", E) == E and cfg.get("vdim", E) == E
    assert m_ts._qkv_same_embed_dim is same
    for attr in ("embed_dim", "kdim", "vdim", "num_heads", "head_dim", "dropout", "batch_first", "add_zero_attn"):
        assert getattr(m_ts, attr) == getattr(m_th, attr), attr
    if same:
        assert m_ts.q_proj_weight is None and m_ts.k_proj_weight is None and m_ts.v_proj_weight is None
    else:
        assert m_ts.in_proj_weight is None
    if not cfg.get("add_bias_kv"):
        assert m_ts.bias_k is None and m_ts.bias_v is None
    # torch's initialisation: xavier_uniform_ matrices, zero biases, xavier_normal_ bias_k / bias_v
    for name, p in m_ts.named_parameters():
        a = p.detach().numpy()
        if name.endswith("proj_weight"):
            fan_in, fan_out = a.shape[1], a.shape[0]
            assert np.abs(a).max() <= math.sqrt(6.0 / (fan_in + fan_out)) + 1e-6, name
        elif name in ("in_proj_bias", "out_proj.bias"):
            assert not a.any(), name
        elif name in ("bias_k", "bias_v"):
            assert a.any() and np.isfinite(a).all()


def test_mha_dropout_in_training_only():
    ts.manual_seed(0)
    m = nn.MultiheadAttention(E, H, dropout=0.5)
    x = ts.randn(L, N, E)
    m.eval()
    _, w_eval = m(x, x, x, average_attn_weights=False)
    m.train()
    _, w_train = m(x, x, x, average_attn_weights=False)
    we, wt = w_eval.detach().numpy(), w_train.detach().numpy()
    kept = wt != 0
    assert kept.any() and (~kept).any()  # some weights dropped, the rest scaled by 1 / (1 - p)
    np.testing.assert_allclose(wt[kept], 2 * we[kept], rtol=1e-5)
    np.testing.assert_allclose(we.sum(-1), 1.0, rtol=1e-5)


@pytest.mark.torch
def test_functional_mha_takes_torchs_arguments(torch):
    """F.multi_head_attention_forward with torch's positional signature: separate projection weights,
    bias_k / bias_v, add_zero_attn, and static_k / static_v."""
    tF = torch.nn.functional
    rng = np.random.default_rng(8)
    arrays = {
        "q": rng.normal(size=(L, N, E)), "k": rng.normal(size=(S, N, 5)), "v": rng.normal(size=(S, N, 3)),
        "wq": rng.normal(size=(E, E)) * 0.3, "wk": rng.normal(size=(E, 5)) * 0.3, "wv": rng.normal(size=(E, 3)) * 0.3,
        "b": rng.normal(size=(3 * E,)), "bk": rng.normal(size=(1, 1, E)), "bv": rng.normal(size=(1, 1, E)),
        "wo": rng.normal(size=(E, E)) * 0.3, "bo": rng.normal(size=(E,)),
    }
    T = {k: pair(v.astype(np.float32), torch, grad=True) for k, v in arrays.items()}

    def run(i, f):
        g = {k: v[i] for k, v in T.items()}
        return f(g["q"], g["k"], g["v"], E, H, None, g["b"], g["bk"], g["bv"], True, 0.0, g["wo"], g["bo"], True,
                 None, True, None, True, g["wq"], g["wk"], g["wv"])

    o_ts, w_ts = run(0, F.multi_head_attention_forward)
    o_th, w_th = run(1, tF.multi_head_attention_forward)
    close(o_ts, o_th)
    close(w_ts, w_th)
    backward_both(o_ts, o_th, rng, torch)
    for k, (a, b) in T.items():
        close(a.grad, b.grad, f"grad of {k}")

    # static_k / static_v replace the projected keys and values: (N * H, S', head_dim)
    sk = rng.normal(size=(N * H, 6, E // H)).astype(np.float32)
    sv = rng.normal(size=(N * H, 6, E // H)).astype(np.float32)
    w_in = (rng.normal(size=(3 * E, E)) * 0.3).astype(np.float32)
    q = rng.normal(size=(L, N, E)).astype(np.float32)
    kpm = np.zeros((N, 6), dtype=bool)
    kpm[:, -1] = True
    outs = []
    for lib, Fm in ((ts, F), (torch, tF)):
        t = lib.tensor
        outs.append(Fm.multi_head_attention_forward(
            t(q), t(q), t(q), E, H, t(w_in), t(arrays["b"].astype(np.float32)), None, None, False, 0.0,
            t(arrays["wo"].astype(np.float32)), t(arrays["bo"].astype(np.float32)), key_padding_mask=t(kpm),
            static_k=t(sk), static_v=t(sv), average_attn_weights=False))
    close(outs[0][0], outs[1][0])
    close(outs[0][1], outs[1][1])


@pytest.mark.torch
def test_mha_bad_shapes_raise_torchs_exceptions(torch):
    rng = np.random.default_rng(9)
    mods = build_mha(torch, {})
    sep = build_mha(torch, {"kdim": 5, "vdim": 3})

    def t(shape, dtype=np.float32):
        return rng.normal(size=shape).astype(dtype)

    x, m = t((L, N, E)), t((S, N, E))
    cases = [
        ("4-D query", mods, (t((1, L, N, E)), m, m), {}),
        ("batched query, 2-D key", mods, (x, t((S, E)), t((S, E))), {}),
        ("unbatched query, 3-D key", mods, (t((L, E)), m, m), {}),
        ("1-D key_padding_mask for a batch", mods, (x, m, m), {"key_padding_mask": np.zeros(S, bool)}),
        ("2-D key_padding_mask unbatched", mods, (t((L, E)), t((S, E)), t((S, E))),
         {"key_padding_mask": np.zeros((1, S), bool)}),
        ("4-D attn_mask", mods, (x, m, m), {"attn_mask": np.zeros((1, 1, L, S), bool)}),
        ("2-D attn_mask of the wrong size", mods, (x, m, m), {"attn_mask": np.zeros((L, S + 1), bool)}),
        ("3-D attn_mask of the wrong size", mods, (x, m, m), {"attn_mask": np.zeros((N, L, S), bool)}),
        ("unbatched 3-D attn_mask of the wrong size", mods, (t((L, E)), t((S, E)), t((S, E))),
         {"attn_mask": np.zeros((H + 1, L, S), bool)}),
        ("key_padding_mask of the wrong length", mods, (x, m, m), {"key_padding_mask": np.zeros((N, S + 1), bool)}),
        ("key_padding_mask of the wrong batch", mods, (x, m, m), {"key_padding_mask": np.zeros((N + 1, S), bool)}),
        ("integer attn_mask", mods, (x, m, m), {"attn_mask": np.zeros((L, S), np.int64)}),
        ("integer key_padding_mask", mods, (x, m, m), {"key_padding_mask": np.zeros((N, S), np.int64)}),
        ("query of the wrong embedding size", mods, (t((L, N, E + 2)), m, m), {}),
        ("key and value shapes differ", mods, (x, m, t((S + 1, N, E))), {}),
        ("key of the wrong kdim", sep, (x, t((S, N, 4)), t((S, N, 3))), {}),
        ("key and value lengths differ (separate weights)", sep, (x, t((S, N, 5)), t((S + 1, N, 3))), {}),
    ]
    for what, (m_ts, m_th), args, kw in cases:
        err = same_error(lambda: m_ts(*(ts.tensor(a) for a in args), **{k: ts.tensor(v) for k, v in kw.items()}),
                         lambda: m_th(*(torch.tensor(a) for a in args), **{k: torch.tensor(v) for k, v in kw.items()}))
        assert str(err), what
    same_error(lambda: nn.MultiheadAttention(6, 4), lambda: torch.nn.MultiheadAttention(6, 4))
    same_error(lambda: nn.MultiheadAttention(0, 2), lambda: torch.nn.MultiheadAttention(0, 2))
    same_error(lambda: nn.MultiheadAttention(8, 0), lambda: torch.nn.MultiheadAttention(8, 0))
    with pytest.raises(ValueError, match="divisible"):  # also a ValueError, as Tessera raised before
        nn.MultiheadAttention(6, 4)
    # the messages name what was expected and what came
    with pytest.raises(RuntimeError, match=r"should be \(4, 5\)"):
        mods[0](ts.tensor(x), ts.tensor(m), ts.tensor(m), attn_mask=ts.zeros(4, 6, dtype=ts.bool))
    with pytest.raises(AssertionError, match="to be 5, but got 6"):
        mods[0](ts.tensor(x), ts.tensor(m), ts.tensor(m), key_padding_mask=ts.zeros(N, 6, dtype=ts.bool))


# ---------------------------------------------------------------------------- Transformer family
D, NH, FF = 8, 2, 16


def causal_np(n):
    return np.triu(np.full((n, n), -np.inf, dtype=np.float32), 1)


def acts(torch):
    """(tessera, torch) activation pairs: strings, functions and modules."""
    return {
        "relu": ("relu", "relu"),
        "gelu": ("gelu", "gelu"),
        "fn-gelu": (F.gelu, torch.nn.functional.gelu),
        "lambda": (lambda x: ts.tanh(x) * 2, lambda x: torch.tanh(x) * 2),
        "module": (nn.GELU(approximate="tanh"), torch.nn.GELU(approximate="tanh")),
    }


def build_pair(torch, make_ts, make_th, seed=0):
    torch.manual_seed(seed)
    m_th = make_th()
    with torch.no_grad():  # LayerNorm and bias values away from 1 / 0, so their gradients show
        for name, p in m_th.named_parameters():
            if p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.2)
    m_ts = make_ts()
    load_from_torch(m_ts, m_th)
    return m_ts.eval(), m_th.eval()


@pytest.mark.torch
@pytest.mark.parametrize("activation", ["relu", "gelu", "fn-gelu", "lambda", "module"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_layer_matches_torch(torch, activation, norm_first, batch_first):
    a_ts, a_th = acts(torch)[activation]
    kw = dict(dim_feedforward=FF, dropout=0.1, norm_first=norm_first, batch_first=batch_first)
    m_ts, m_th = build_pair(torch, lambda: nn.TransformerEncoderLayer(D, NH, activation=a_ts, **kw),
                            lambda: torch.nn.TransformerEncoderLayer(D, NH, activation=a_th, **kw))
    assert repr(m_ts) == repr(m_th)
    assert m_ts.activation_relu_or_gelu == m_th.activation_relu_or_gelu
    rng = np.random.default_rng(10)
    x_ts, x_th = pair(rng.normal(size=(N, S, D) if batch_first else (S, N, D)).astype(np.float32), torch, grad=True)
    am, kpm = make_masks("am2b+kpmb", rng, lq=S, s=S)
    o_ts = m_ts(x_ts, src_mask=ts.tensor(am), src_key_padding_mask=ts.tensor(kpm))
    o_th = m_th(x_th, src_mask=torch.tensor(am), src_key_padding_mask=torch.tensor(kpm))
    close(o_ts, o_th)
    backward_both(o_ts, o_th, rng, torch)
    compare_grads(m_ts, m_th, [(x_ts, x_th)])


@pytest.mark.torch
@pytest.mark.parametrize("masks", ["none", "mask", "kpm", "float-both", "causal"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_matches_torch(torch, masks, norm_first):
    def make(lib):
        layer = lib.nn.TransformerEncoderLayer(D, NH, FF, 0.0, batch_first=True, norm_first=norm_first)
        return lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(D), enable_nested_tensor=False)

    m_ts, m_th = build_pair(torch, lambda: make(ts), lambda: make(torch), seed=1)
    same_structure(m_ts, m_th)
    rng = np.random.default_rng(11)
    x_ts, x_th = pair(rng.normal(size=(N, S, D)).astype(np.float32), torch, grad=True)
    am, kpm = make_masks({"none": "", "mask": "am2b", "kpm": "kpmb", "float-both": "am2f+kpmf",
                          "causal": "kpmf"}[masks], rng, lq=S, s=S)
    kw = {}
    if masks == "causal":
        am = causal_np(S)
        kw["is_causal"] = True
    args_ts = dict(mask=None if am is None else ts.tensor(am),
                   src_key_padding_mask=None if kpm is None else ts.tensor(kpm), **kw)
    args_th = dict(mask=None if am is None else torch.tensor(am),
                   src_key_padding_mask=None if kpm is None else torch.tensor(kpm), **kw)
    o_ts, o_th = m_ts(x_ts, **args_ts), m_th(x_th, **args_th)
    close(o_ts, o_th)
    backward_both(o_ts, o_th, rng, torch)
    compare_grads(m_ts, m_th, [(x_ts, x_th)])


@pytest.mark.torch
@pytest.mark.parametrize("activation", ["relu", "fn-gelu", "module"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_matches_torch(torch, activation, norm_first, batch_first):
    a_ts, a_th = acts(torch)[activation]
    kw = dict(dim_feedforward=FF, dropout=0.1, norm_first=norm_first, batch_first=batch_first)
    m_ts, m_th = build_pair(torch, lambda: nn.TransformerDecoderLayer(D, NH, activation=a_ts, **kw),
                            lambda: torch.nn.TransformerDecoderLayer(D, NH, activation=a_th, **kw), seed=2)
    assert repr(m_ts) == repr(m_th)
    rng = np.random.default_rng(12)
    lay = (lambda n: (N, n, D)) if batch_first else (lambda n: (n, N, D))
    t_ts, t_th = pair(rng.normal(size=lay(L)).astype(np.float32), torch, grad=True)
    m_ts_, m_th_ = pair(rng.normal(size=lay(S)).astype(np.float32), torch, grad=True)
    tgt_mask = causal_np(L)
    mem_mask, mem_kpm = make_masks("am2b+kpmb", rng, lq=L, s=S)
    tgt_kpm = make_masks("kpmf", rng, s=L)[1]  # float, as the float tgt_mask (mixed types warn)
    kw_np = dict(tgt_mask=tgt_mask, memory_mask=mem_mask, tgt_key_padding_mask=tgt_kpm,
                 memory_key_padding_mask=mem_kpm)
    o_ts = m_ts(t_ts, m_ts_, tgt_is_causal=True, **{k: ts.tensor(v) for k, v in kw_np.items()})
    o_th = m_th(t_th, m_th_, tgt_is_causal=True, **{k: torch.tensor(v) for k, v in kw_np.items()})
    close(o_ts, o_th)
    backward_both(o_ts, o_th, rng, torch)
    compare_grads(m_ts, m_th, [(t_ts, t_th), (m_ts_, m_th_)])


@pytest.mark.torch
def test_decoder_layer_unbatched_matches_torch(torch):
    m_ts, m_th = build_pair(torch, lambda: nn.TransformerDecoderLayer(D, NH, FF, 0.0),
                            lambda: torch.nn.TransformerDecoderLayer(D, NH, FF, 0.0), seed=3)
    rng = np.random.default_rng(13)
    t_ts, t_th = pair(rng.normal(size=(L, D)).astype(np.float32), torch, grad=True)
    m_ts_, m_th_ = pair(rng.normal(size=(S, D)).astype(np.float32), torch, grad=True)
    kpm = np.zeros(S, dtype=bool)
    kpm[-2:] = True
    o_ts = m_ts(t_ts, m_ts_, tgt_mask=ts.tensor(causal_np(L)), memory_key_padding_mask=ts.tensor(kpm))
    o_th = m_th(t_th, m_th_, tgt_mask=torch.tensor(causal_np(L)), memory_key_padding_mask=torch.tensor(kpm))
    close(o_ts, o_th)
    backward_both(o_ts, o_th, rng, torch)
    compare_grads(m_ts, m_th, [(t_ts, t_th), (m_ts_, m_th_)])


@pytest.mark.torch
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_matches_torch(torch, norm_first):
    def make(lib):
        layer = lib.nn.TransformerDecoderLayer(D, NH, FF, 0.0, norm_first=norm_first)
        return lib.nn.TransformerDecoder(layer, 2, norm=lib.nn.LayerNorm(D))

    m_ts, m_th = build_pair(torch, lambda: make(ts), lambda: make(torch), seed=4)
    same_structure(m_ts, m_th)
    assert m_ts.layers[0] is not m_ts.layers[1] and m_ts.num_layers == 2
    rng = np.random.default_rng(14)
    t_ts, t_th = pair(rng.normal(size=(L, N, D)).astype(np.float32), torch, grad=True)
    m_ts_, m_th_ = pair(rng.normal(size=(S, N, D)).astype(np.float32), torch, grad=True)
    mem_mask, mem_kpm = make_masks("am2f+kpmf", rng, lq=L, s=S)
    tgt_kpm = make_masks("kpmf", rng, s=L)[1]
    kw_np = dict(tgt_mask=causal_np(L), memory_mask=mem_mask, tgt_key_padding_mask=tgt_kpm,
                 memory_key_padding_mask=mem_kpm)
    o_ts = m_ts(t_ts, m_ts_, **{k: ts.tensor(v) for k, v in kw_np.items()})
    o_th = m_th(t_th, m_th_, **{k: torch.tensor(v) for k, v in kw_np.items()})
    close(o_ts, o_th)
    backward_both(o_ts, o_th, rng, torch)
    compare_grads(m_ts, m_th, [(t_ts, t_th), (m_ts_, m_th_)])


@pytest.mark.torch
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_full_forward_matches_torch(torch, batch_first, norm_first):
    kw = dict(d_model=D, nhead=NH, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=FF, dropout=0.0,
              batch_first=batch_first, norm_first=norm_first, activation="gelu")
    m_ts, m_th = build_pair(torch, lambda: nn.Transformer(**kw), lambda: torch.nn.Transformer(**kw), seed=5)
    same_structure(m_ts, m_th)
    rng = np.random.default_rng(15)
    lay = (lambda n: (N, n, D)) if batch_first else (lambda n: (n, N, D))
    s_ts, s_th = pair(rng.normal(size=lay(S)).astype(np.float32), torch, grad=True)
    t_ts, t_th = pair(rng.normal(size=lay(L)).astype(np.float32), torch, grad=True)
    src_kpm = make_masks("kpmb", rng, s=S)[1]
    tgt_kpm = make_masks("kpmb", rng, s=L)[1]
    kw_np = dict(src_mask=make_masks("am2b", rng, lq=S, s=S)[0], tgt_mask=~np.tril(np.ones((L, L), dtype=bool)),
                 memory_mask=make_masks("am2b", rng, lq=L, s=S)[0], src_key_padding_mask=src_kpm,
                 tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=src_kpm)
    o_ts = m_ts(s_ts, t_ts, **{k: ts.tensor(v) for k, v in kw_np.items()})
    o_th = m_th(s_th, t_th, **{k: torch.tensor(v) for k, v in kw_np.items()})
    close(o_ts, o_th)
    backward_both(o_ts, o_th, rng, torch)
    compare_grads(m_ts, m_th, [(s_ts, s_th), (t_ts, t_th)])


@pytest.mark.torch
def test_transformer_defaults_names_and_shapes_match_torch(torch):
    m_th = torch.nn.Transformer()
    m_ts = nn.Transformer()
    assert [(n, tuple(p.shape)) for n, p in m_ts.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in m_th.named_parameters()]
    assert list(m_ts.state_dict()) == list(m_th.state_dict())
    same_structure(m_ts, m_th)
    assert (m_ts.d_model, m_ts.nhead, m_ts.batch_first) == (512, 8, False)
    assert len(m_ts.encoder.layers) == 6 and len(m_ts.decoder.layers) == 6
    layer = m_ts.encoder.layers[0]
    assert layer.linear1.out_features == 2048 and layer.dropout.p == 0.1 and layer.norm1.eps == 1e-5
    assert layer.activation is F.relu and not layer.norm_first
    # xavier_uniform_ over every matrix (the LayerNorms stay ones and zeros)
    w = m_ts.encoder.layers[0].linear1.weight.detach().numpy()
    assert np.abs(w).max() <= math.sqrt(6.0 / (512 + 2048)) + 1e-6
    assert (m_ts.decoder.norm.weight.detach().numpy() == 1).all()


@pytest.mark.torch
def test_transformer_options_and_custom_stacks(torch):
    kw = dict(d_model=D, nhead=NH, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=FF,
              layer_norm_eps=1e-3, bias=False)
    m_ts, m_th = nn.Transformer(**kw), torch.nn.Transformer(**kw)
    assert [n for n, _ in m_ts.named_parameters()] == [n for n, _ in m_th.named_parameters()]
    same_structure(m_ts, m_th)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, NH, FF), 1)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, NH, FF), 1)
    custom = nn.Transformer(d_model=D, nhead=NH, custom_encoder=enc, custom_decoder=dec)
    assert custom.encoder is enc and custom.decoder is dec


@pytest.mark.torch
def test_generate_square_subsequent_mask(torch):
    for sz in (1, 4):
        got = nn.Transformer.generate_square_subsequent_mask(sz)
        want = torch.nn.Transformer.generate_square_subsequent_mask(sz)
        assert got.dtype == ts.float32
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    got = nn.Transformer.generate_square_subsequent_mask(3, dtype=ts.float64, device="cpu")
    assert got.dtype == ts.float64 and str(got.device) == "cpu"
    inst = nn.Transformer(d_model=D, nhead=NH, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=FF)
    np.testing.assert_array_equal(inst.generate_square_subsequent_mask(3).numpy(), causal_np(3))


@pytest.mark.torch
def test_transformer_bad_inputs_raise_torchs_exceptions(torch):
    kw = dict(d_model=D, nhead=NH, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=FF)
    m_ts, m_th = nn.Transformer(**kw), torch.nn.Transformer(**kw)
    z = np.zeros
    for src, tgt in (((S, N, D), (L, N + 1, D)), ((S, N, D), (L, N, D + 1)), ((S, N, D + 1), (L, N, D + 1))):
        a, b = z(src, np.float32), z(tgt, np.float32)
        same_error(lambda: m_ts(ts.tensor(a), ts.tensor(b)), lambda: m_th(torch.tensor(a), torch.tensor(b)))
    same_error(lambda: nn.TransformerEncoderLayer(D, NH, activation="tanh"),
               lambda: torch.nn.TransformerEncoderLayer(D, NH, activation="tanh"))
    same_error(lambda: nn.TransformerDecoderLayer(D, NH, activation="swish"),
               lambda: torch.nn.TransformerDecoderLayer(D, NH, activation="swish"))


def test_layer_is_causal_without_mask_uses_the_causal_mask():
    """A Tessera extension: is_causal=True alone applies the causal mask (torch asks for the mask too)."""
    ts.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, NH, FF, 0.0, batch_first=True)
    x = ts.randn(N, S, D)
    mask = nn.Transformer.generate_square_subsequent_mask(S)
    np.testing.assert_allclose(layer(x, is_causal=True).detach().numpy(),
                               layer(x, src_mask=mask).detach().numpy(), rtol=1e-6, atol=1e-6)
    enc = nn.TransformerEncoder(layer, 2)
    np.testing.assert_allclose(enc(x, is_causal=True).detach().numpy(), enc(x, mask=mask).detach().numpy(),
                               rtol=1e-6, atol=1e-6)


def test_transformer_modules_in_import_paths():
    import tessera.nn.modules.transformer as tr
    import tessera.nn.modules.normalization as norm

    for name in ("Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
                 "TransformerDecoderLayer"):
        assert getattr(nn, name) is getattr(tr, name)
    assert nn.LocalResponseNorm is norm.LocalResponseNorm
    assert callable(F.local_response_norm)


# ---------------------------------------------------------------------------- LocalResponseNorm
def np_lrn(x, size, alpha, beta, k):
    """The definition, channel by channel: the window runs from c - size // 2 to c + (size - 1) // 2."""
    x = x.astype(np.float64)
    c = x.shape[1]
    out = np.empty_like(x)
    for i in range(c):
        lo, hi = max(0, i - size // 2), min(c, i + (size - 1) // 2 + 1)
        energy = (x[:, lo:hi] ** 2).sum(axis=1)
        out[:, i] = x[:, i] / (k + alpha / size * energy) ** beta
    return out


LRN_SHAPES = [(2, 7, 5), (2, 6, 4, 3), (1, 5, 3, 2, 2)]


@pytest.mark.parametrize("shape", LRN_SHAPES, ids=["3d", "4d", "5d"])
@pytest.mark.parametrize("size", [1, 2, 3, 5, 9])
def test_local_response_norm_matches_numpy(shape, size):
    rng = np.random.default_rng(size)
    x = rng.normal(size=shape).astype(np.float32) * 2
    alpha, beta, k = 0.3, 0.6, 1.2
    got = nn.LocalResponseNorm(size, alpha=alpha, beta=beta, k=k)(ts.tensor(x))
    np.testing.assert_allclose(got.numpy(), np_lrn(x, size, alpha, beta, k), rtol=1e-5, atol=1e-6)
    got = F.local_response_norm(ts.tensor(x.astype(np.float64)), size, alpha, beta, k)
    assert got.dtype == ts.float64
    np.testing.assert_allclose(got.numpy(), np_lrn(x, size, alpha, beta, k), rtol=1e-12, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("shape", LRN_SHAPES, ids=["3d", "4d", "5d"])
@pytest.mark.parametrize("size", [2, 3, 8])
def test_local_response_norm_matches_torch(torch, shape, size):
    rng = np.random.default_rng(20 + size)
    x_ts, x_th = pair(rng.normal(size=shape).astype(np.float32), torch, grad=True)
    m_ts, m_th = nn.LocalResponseNorm(size, alpha=0.2, beta=0.75, k=1.0), torch.nn.LocalResponseNorm(size, 0.2)
    assert repr(m_ts) == repr(m_th)
    o_ts, o_th = m_ts(x_ts), m_th(x_th)
    close(o_ts, o_th)
    backward_both(o_ts, o_th, rng, torch)
    close(x_ts.grad, x_th.grad, "input grad")
    close(F.local_response_norm(x_ts, size), torch.nn.functional.local_response_norm(x_th, size))


@pytest.mark.torch
def test_local_response_norm_errors_and_empty_input(torch):
    same_error(lambda: F.local_response_norm(ts.ones(3, 4), 2),
               lambda: torch.nn.functional.local_response_norm(torch.ones(3, 4), 2))
    assert repr(nn.LocalResponseNorm(2)) == repr(torch.nn.LocalResponseNorm(2))
    empty = ts.ones(0, 3, 4)
    assert tuple(nn.LocalResponseNorm(2)(empty).shape) == (0, 3, 4)
