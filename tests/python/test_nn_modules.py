"""tessera.nn: Module structure and state, Parameter, nn.init, and each layer's forward (and,
through autograd, backward) against NumPy references written here."""
import copy
import math
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import tessera as ts
from conftest import assert_close, from_np, to_np

nn = ts.nn
F = nn.functional
FLOATS = [ts.float32, ts.float64]


def rnd(shape, dtype=ts.float32, seed=0, low=-1.0, high=1.0):
    a = np.random.default_rng(seed).uniform(low, high, size=shape)
    return a, from_np(a, dtype)


def tols(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == ts.float32 else dict(rtol=1e-10, atol=1e-10)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.act = nn.ReLU()
        self.block = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
        self.register_buffer("scale", ts.ones(3))
        self.register_buffer("cache", ts.zeros(2), persistent=False)
        self.head = nn.Parameter(ts.zeros(3))

    def forward(self, x):
        return self.block(self.act(self.fc1(x))) * self.scale + self.head


# ---------------------------------------------------------------------------- Parameter
def test_parameter_is_a_tensor_subclass_sharing_storage():
    t = ts.randn(3)
    p = nn.Parameter(t)
    assert isinstance(p, nn.Parameter) and isinstance(p, ts.Tensor)
    assert p.requires_grad and p.is_leaf
    assert p._same_storage(t)
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\n")
    assert type(p * 2) is ts.Tensor  # results are plain tensors
    assert nn.Parameter().shape == (0,)
    with pytest.raises(TypeError):
        nn.Parameter([1.0, 2.0])


def test_parameter_deepcopy_and_pickle():
    p = nn.Parameter(ts.tensor([1.0, 2.0]))
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.requires_grad and not q._same_storage(p)
    assert_close(q, [1.0, 2.0])
    r = pickle.loads(pickle.dumps(p))
    assert isinstance(r, nn.Parameter)
    assert_close(r, [1.0, 2.0])


# ---------------------------------------------------------------------------- Module structure
def test_registration_and_iteration_order():
    m = Net()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["head", "fc1.weight", "fc1.bias", "block.0.weight", "block.0.bias", "block.1.weight",
                     "block.1.bias"]
    assert len(list(m.parameters())) == 7
    assert [n for n, _ in m.named_buffers()] == ["scale", "cache", "block.1.running_mean", "block.1.running_var",
                                                 "block.1.num_batches_tracked"]
    assert [n for n, _ in m.named_children()] == ["fc1", "act", "block"]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "act", "block", "block.0", "block.1"]
    assert [n for n, _ in m.named_modules(prefix="net")][:2] == ["net", "net.fc1"]
    assert len(list(m.parameters(recurse=False))) == 1
    assert m.get_submodule("block.1") is m.block[1]
    assert m.get_parameter("block.0.bias") is m.block[0].bias


def test_shared_parameters_are_listed_once():
    lin = nn.Linear(2, 2)
    m = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(m.parameters())) == 2
    assert len(list(m.modules())) == 3


def test_setattr_delattr_and_errors():
    m = nn.Module()
    m.w = nn.Parameter(ts.ones(2))
    assert "w" in m._parameters
    m.w = None
    assert m._parameters["w"] is None and m.w is None
    with pytest.raises(TypeError):
        m.w = ts.ones(2)  # a plain tensor cannot replace a parameter
    m.sub = nn.Linear(1, 1)
    del m.sub
    assert "sub" not in m._modules
    with pytest.raises(AttributeError):
        m.sub  # noqa: B018
    m.register_buffer("b", ts.zeros(1))
    m.b = ts.ones(1)
    assert_close(m._buffers["b"], [1.0])
    with pytest.raises(TypeError):
        m.register_parameter("p", ts.ones(1))
    with pytest.raises(KeyError):
        m.register_buffer("a.b", ts.ones(1))
    with pytest.raises(KeyError):
        m.register_buffer("b2", ts.ones(1)) or m.register_parameter("b2", nn.Parameter(ts.ones(1)))
    with pytest.raises(TypeError):
        m.add_module("x", 3)

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ts.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_train_eval_apply_and_requires_grad():
    m = Net()
    assert m.training and m.block[1].training
    m.eval()
    assert not m.training and not m.block[1].training
    m.train()
    assert m.block[0].training
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen[-1] == "Net" and seen.count("Linear") == 2
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


def test_to_dtype_converts_floating_tensors_only():
    m = Net()
    m.to(ts.float64)
    assert all(p.dtype == ts.float64 and isinstance(p, nn.Parameter) and p.requires_grad for p in m.parameters())
    assert m.block[1].running_mean.dtype == ts.float64
    assert m.block[1].num_batches_tracked.dtype == ts.int64
    m.float()
    assert m.fc1.weight.dtype == ts.float32
    assert m.to("cpu") is m
    with pytest.raises(TypeError):
        m.to(ts.int32)


def test_repr_matches_torch_layout():
    m = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Sequential(nn.Flatten(), nn.Linear(4, 2)))
    assert repr(m) == (
        "Sequential(\n"
        "  (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "  (1): ReLU()\n"
        "  (2): Sequential(\n"
        "    (0): Flatten(start_dim=1, end_dim=-1)\n"
        "    (1): Linear(in_features=4, out_features=2, bias=True)\n"
        "  )\n"
        ")")
    assert repr(nn.BatchNorm2d(3)) == "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    assert repr(nn.Dropout()) == "Dropout(p=0.5, inplace=False)"


def test_containers():
    seq = nn.Sequential(OrderedDict([("a", nn.Linear(2, 3)), ("b", nn.ReLU())]))
    assert seq.a is seq[0] and len(seq) == 2 and isinstance(seq[-1], nn.ReLU)
    assert isinstance(seq[:1], nn.Sequential) and len(seq[:1]) == 1
    seq.append(nn.Tanh())
    assert len(seq) == 3
    with pytest.raises(IndexError):
        seq[5]  # noqa: B018
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    ml.append(nn.Linear(1, 2))
    assert len(ml) == 4 and len(list(ml.parameters())) == 8
    del ml[0]
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2"]
    md = nn.ModuleDict({"x": nn.Linear(1, 1), "y": nn.ReLU()})
    assert list(md.keys()) == ["x", "y"] and "x" in md
    assert len(list(md.parameters())) == 2


def test_zero_grad():
    m = nn.Linear(2, 2)
    m(ts.ones(1, 2)).sum().backward()
    assert m.weight.grad is not None
    m.zero_grad(set_to_none=False)
    assert_close(m.weight.grad, np.zeros((2, 2)))
    m.zero_grad()
    assert m.weight.grad is None and m.bias.grad is None


def test_forward_hooks():
    m = nn.Linear(2, 2)
    calls = []
    h = m.register_forward_hook(lambda mod, inp, out: calls.append(tuple(out.shape)))
    m(ts.ones(3, 2))
    h.remove()
    m(ts.ones(3, 2))
    assert calls == [(3, 2)]


# ---------------------------------------------------------------------------- state_dict
def test_state_dict_contents_and_round_trip():
    ts.manual_seed(0)
    a = Net()
    sd = a.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd.keys()) == ["head", "scale", "fc1.weight", "fc1.bias", "block.0.weight", "block.0.bias",
                               "block.1.weight", "block.1.bias", "block.1.running_mean", "block.1.running_var",
                               "block.1.num_batches_tracked"]  # "cache" is not persistent
    assert all(type(v) is ts.Tensor for v in sd.values())
    assert sd["fc1.weight"]._same_storage(a.fc1.weight)
    assert isinstance(a.state_dict(keep_vars=True)["fc1.weight"], nn.Parameter)
    b = Net()
    w_before = b.fc1.weight
    r = b.load_state_dict(sd)
    assert r.missing_keys == [] and r.unexpected_keys == []
    assert b.fc1.weight is w_before  # copied in place
    x = ts.randn(5, 4)
    a.eval()
    b.eval()
    assert_close(b(x), to_np(a(x)))


def test_load_state_dict_errors_like_torch():
    m = nn.Linear(2, 3)
    sd = m.state_dict()
    del sd["bias"]
    sd["extra"] = ts.zeros(1)
    with pytest.raises(RuntimeError) as e:
        nn.Linear(2, 3).load_state_dict(sd)
    msg = str(e.value)
    assert msg.startswith("Error(s) in loading state_dict for Linear:")
    assert 'Missing key(s) in state_dict: "bias".' in msg and 'Unexpected key(s) in state_dict: "extra".' in msg
    r = nn.Linear(2, 3).load_state_dict(sd, strict=False)
    assert r.missing_keys == ["bias"] and r.unexpected_keys == ["extra"]  # reported, not raised
    with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with shape "
                                           r"tessera.Size\(\[4, 2\]\) from checkpoint, the shape in current model is "
                                           r"tessera.Size\(\[3, 2\]\)"):
        nn.Linear(2, 3).load_state_dict(nn.Linear(2, 4).state_dict())
    with pytest.raises(TypeError):
        m.load_state_dict([1, 2])


def test_state_dict_survives_save_and_load(tmp_path):
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    path = str(tmp_path / "m.safetensors")
    ts.save(m.state_dict(), path)
    loaded = ts.load(path)
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    fresh.load_state_dict(loaded)
    for k, v in m.state_dict().items():
        assert_close(fresh.state_dict()[k], to_np(v))


# ---------------------------------------------------------------------------- nn.init
def test_init_statistics_and_reproducibility():
    t = ts.empty(200, 300)
    nn.init.uniform_(t, -2.0, 3.0)
    a = to_np(t)
    assert a.min() >= -2.0 and a.max() < 3.0 and abs(a.mean() - 0.5) < 0.05
    nn.init.normal_(t, 1.0, 2.0)
    a = to_np(t)
    assert abs(a.mean() - 1.0) < 0.03 and abs(a.std() - 2.0) < 0.03
    nn.init.constant_(t, 0.25)
    assert (to_np(t) == 0.25).all()
    nn.init.zeros_(t)
    assert (to_np(t) == 0).all()
    nn.init.ones_(t)
    assert (to_np(t) == 1).all()

    w = ts.empty(64, 32, 3, 3, dtype=ts.float64)  # fan_in 288, fan_out 576
    nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    bound = math.sqrt(6.0 / ((1 + 5) * 288))
    a = to_np(w)
    assert a.max() <= bound and a.min() >= -bound and a.max() > 0.95 * bound
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(to_np(w).std() - math.sqrt(2.0 / 576)) < 0.02 * math.sqrt(2.0 / 576) * 5
    nn.init.xavier_uniform_(w, gain=2.0)
    bound = 2.0 * math.sqrt(6.0 / (288 + 576))
    assert np.abs(to_np(w)).max() <= bound
    nn.init.xavier_normal_(w)
    assert abs(to_np(w).std() - math.sqrt(2.0 / (288 + 576))) < 0.003

    ts.manual_seed(123)
    a = to_np(nn.init.normal_(ts.empty(5)))
    ts.manual_seed(123)
    b = to_np(nn.init.normal_(ts.empty(5)))
    assert (a == b).all()


def test_calculate_gain_and_init_errors():
    assert nn.init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert nn.init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert nn.init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert nn.init.calculate_gain("conv2d") == 1
    with pytest.raises(ValueError):
        nn.init.calculate_gain("nope")
    with pytest.raises(ValueError):
        nn.init.xavier_uniform_(ts.empty(3))
    with pytest.raises(ValueError):
        nn.init.kaiming_uniform_(ts.empty(3, 3), mode="fan_middle")
    with pytest.raises(TypeError):
        nn.init.uniform_(ts.zeros(3, dtype=ts.int64))


def test_init_runs_under_no_grad():
    p = nn.Parameter(ts.empty(3, 3))
    nn.init.normal_(p)
    assert p.is_leaf and p.grad_fn is None and p.requires_grad


def test_default_initialisation_bounds():
    ts.manual_seed(0)
    lin = nn.Linear(100, 50)
    bound = 1 / math.sqrt(100)
    assert np.abs(to_np(lin.weight)).max() <= bound and np.abs(to_np(lin.bias)).max() <= bound
    conv = nn.Conv2d(4, 8, 3)
    bound = 1 / math.sqrt(4 * 9)
    assert np.abs(to_np(conv.weight)).max() <= bound and np.abs(to_np(conv.bias)).max() <= bound
    emb = nn.Embedding(10, 3, padding_idx=2)
    assert (to_np(emb.weight)[2] == 0).all()
    mha = nn.MultiheadAttention(8, 2)
    assert (to_np(mha.in_proj_bias) == 0).all() and (to_np(mha.out_proj.bias) == 0).all()


# ---------------------------------------------------------------------------- NumPy references
def np_conv2d(x, w, b, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    co, cig, kh, kw = w.shape
    sh, sw = stride
    ph, pw = padding
    dh, dw = dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, co, oh, ow))
    cog = co // groups
    for g in range(groups):
        for o in range(g * cog, (g + 1) * cog):
            for i in range(oh):
                for j in range(ow):
                    patch = xp[:, g * cig:(g + 1) * cig, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                               j * sw:j * sw + dw * (kw - 1) + 1:dw]
                    out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    if b is not None:
        out += b[None, :, None, None]
    return out


def np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def np_softmax(x, axis):
    return np.exp(np_log_softmax(x, axis))


def np_layer_norm(x, w, b, eps, k):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * w + b if w is not None else y


# ---------------------------------------------------------------------------- layers vs NumPy
@pytest.mark.parametrize("dtype", FLOATS)
def test_linear(dtype):
    m = nn.Linear(5, 3, dtype=dtype)
    assert m.weight.dtype == dtype
    w, b = to_np(m.weight), to_np(m.bias)
    for shape in [(5,), (4, 5), (2, 3, 5)]:
        xn, x = rnd(shape, dtype)
        assert_close(m(x), xn @ w.T + b, dtype, **tols(dtype))
    xn, x = rnd((5, 4), dtype)
    assert not x.T.is_contiguous()
    assert_close(m(x.T), xn.T @ w.T + b, dtype, **tols(dtype))
    assert_close(nn.Linear(5, 3, bias=False, dtype=dtype)(ts.zeros(2, 5, dtype=dtype)), np.zeros((2, 3)))
    assert tuple(m(ts.zeros(0, 5, dtype=dtype)).shape) == (0, 3)
    with pytest.raises(ValueError, match="in_features=5"):
        m(ts.zeros(2, 4, dtype=dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("cfg", [dict(), dict(stride=2, padding=1), dict(padding=2, dilation=2),
                                 dict(groups=2, padding="same"), dict(padding="valid", bias=False)])
def test_conv2d(dtype, cfg):
    ts.manual_seed(1)
    m = nn.Conv2d(4, 6, 3, dtype=dtype, **cfg)
    xn, x = rnd((2, 4, 7, 6), dtype)
    pad = m.padding if not isinstance(m.padding, str) else ((1, 1) if m.padding == "same" else (0, 0))
    ref = np_conv2d(xn, to_np(m.weight), None if m.bias is None else to_np(m.bias), m.stride, pad, m.dilation,
                    m.groups)
    assert_close(m(x), ref, dtype, **tols(dtype))
    assert_close(m(x[0]), ref[0], dtype, **tols(dtype))  # unbatched


def test_conv2d_same_padding_even_kernel_and_noncontiguous():
    ts.manual_seed(2)
    m = nn.Conv2d(2, 3, (2, 4), padding="same", dtype=ts.float64)
    xn, x = rnd((1, 2, 5, 6), ts.float64)
    # torch pads total d*(k-1): left = total // 2, the extra one on the right
    xp = np.pad(xn, ((0, 0), (0, 0), (0, 1), (1, 2)))
    ref = np_conv2d(xp, to_np(m.weight), to_np(m.bias), (1, 1), (0, 0), (1, 1), 1)
    assert_close(m(x), ref, ts.float64, **tols(ts.float64))
    xt = x.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2)
    assert not xt.is_contiguous()
    assert_close(m(xt), ref, ts.float64, **tols(ts.float64))


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv1d(dtype):
    m = nn.Conv1d(3, 4, 3, stride=2, padding=1, dtype=dtype)
    xn, x = rnd((2, 3, 9), dtype)
    ref = np_conv2d(xn[:, :, None, :], to_np(m.weight)[:, :, None, :], to_np(m.bias), (1, 2), (0, 1), (1, 1), 1)
    assert_close(m(x), ref[:, :, 0, :], dtype, **tols(dtype))


def test_conv_bad_input():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="4-D"):
        nn.Conv2d(3, 4, 3)(ts.zeros(3, 5))
    with pytest.raises(Exception):
        nn.Conv2d(3, 4, 3)(ts.zeros(1, 2, 5, 5))  # channel mismatch, reported by the kernel


@pytest.mark.parametrize("dtype", FLOATS)
def test_pooling(dtype):
    xn, x = rnd((2, 3, 6, 7), dtype)
    out, idx = nn.MaxPool2d(2, return_indices=True)(x)
    ref = xn[:, :, :6, :6].reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5))
    assert_close(out, ref, dtype)
    assert idx.dtype == ts.int64
    flat = xn.reshape(2, 3, -1)
    assert_close(out, np.take_along_axis(flat, to_np(idx).reshape(2, 3, -1), 2).reshape(ref.shape), dtype)
    ref = xn[:, :, :6, :6].reshape(2, 3, 3, 2, 3, 2).mean(axis=(3, 5))
    assert_close(nn.AvgPool2d(2)(x), ref, dtype, **tols(dtype))
    assert_close(nn.AdaptiveAvgPool2d(1)(x), xn.mean(axis=(2, 3), keepdims=True), dtype, **tols(dtype))
    assert_close(nn.AdaptiveAvgPool2d((None, 1))(x[0]), xn[0].mean(axis=2, keepdims=True), dtype, **tols(dtype))
    with pytest.raises(ValueError):
        F.max_pool2d(ts.zeros(4, 4), 2)


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_train_and_eval(dtype):
    bn = nn.BatchNorm2d(3, dtype=dtype)
    with ts.no_grad():
        bn.weight.copy_(ts.tensor([1.0, 2.0, 0.5], dtype=dtype))
        bn.bias.copy_(ts.tensor([0.0, -1.0, 1.0], dtype=dtype))
    xn, x = rnd((4, 3, 2, 5), dtype, low=-2, high=3)
    y = bn(x)
    mu = xn.mean(axis=(0, 2, 3))
    var = xn.var(axis=(0, 2, 3))
    w, b = np.array([1.0, 2.0, 0.5]), np.array([0.0, -1.0, 1.0])
    ref = (xn - mu[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5) * w[None, :, None, None] \
        + b[None, :, None, None]
    assert_close(y, ref, dtype, **tols(dtype))
    n = 4 * 2 * 5
    assert_close(bn.running_mean, 0.1 * mu, dtype, **tols(dtype))
    assert_close(bn.running_var, 0.9 + 0.1 * var * n / (n - 1), dtype, **tols(dtype))
    assert bn.num_batches_tracked.item() == 1
    bn.eval()
    rm, rv = to_np(bn.running_mean), to_np(bn.running_var)
    ref = (xn - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5) * w[None, :, None, None] \
        + b[None, :, None, None]
    assert_close(bn(x), ref, dtype, **tols(dtype))
    assert bn.num_batches_tracked.item() == 1


def test_batch_norm_trains_with_running_stats():
    """backward through a training-mode batch norm that updates its running stats in place."""
    bn = nn.BatchNorm2d(3, dtype=ts.float64)
    x = ts.randn(4, 3, 2, 2, dtype=ts.float64)
    x.requires_grad_()
    (bn(x) * ts.arange(48, dtype=ts.float64).reshape(4, 3, 2, 2)).sum().backward()
    assert x.grad is not None and bn.weight.grad is not None
    assert bn.num_batches_tracked.item() == 1


def test_batch_norm_cumulative_momentum_and_errors():
    bn = nn.BatchNorm1d(2, momentum=None, affine=False)
    a, b = np.array([[1.0, 2.0], [3.0, 6.0]]), np.array([[5.0, 0.0], [7.0, 2.0]])
    bn(from_np(a, ts.float32))
    bn(from_np(b, ts.float32))
    assert_close(bn.running_mean, (a.mean(0) + b.mean(0)) / 2)
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        bn(ts.zeros(2, 2, 2, 2))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        bn(ts.zeros(1, 2))
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(2)(ts.zeros(2, 2))


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_and_group_norm(dtype):
    xn, x = rnd((3, 4, 5), dtype, low=-3, high=2)
    ln = nn.LayerNorm(5, dtype=dtype)
    with ts.no_grad():
        ln.weight.copy_(from_np(np.linspace(0.5, 1.5, 5), dtype))
    assert_close(ln(x), np_layer_norm(xn, np.linspace(0.5, 1.5, 5), 0.0, 1e-5, 1), dtype, **tols(dtype))
    assert_close(nn.LayerNorm((4, 5), elementwise_affine=False)(x.to(ts.float64)),
                 np_layer_norm(xn, None, None, 1e-5, 2), ts.float64, rtol=1e-5, atol=1e-5)
    gn = nn.GroupNorm(2, 4, dtype=dtype)
    g = xn.reshape(3, 2, 10)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(3, 4, 5)
    assert_close(gn(x), ref, dtype, **tols(dtype))
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match="divisible by num_groups"):
        F.group_norm(x, 3)
    with pytest.raises(ValueError, match="normalized_shape"):
        F.layer_norm(x, [4])


def test_dropout():
    ts.manual_seed(0)
    x = ts.ones(1000)
    d = nn.Dropout(0.3)
    y = to_np(d(x))
    kept = y != 0
    assert 0.6 < kept.mean() < 0.8
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    d.eval()
    assert d(x) is x
    ts.manual_seed(5)
    a = to_np(F.dropout(x, 0.5))
    ts.manual_seed(5)
    b = to_np(F.dropout(x, 0.5))
    assert (a == b).all()
    assert_close(F.dropout(x, 1.0), np.zeros(1000))
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_embedding():
    emb = nn.Embedding(6, 3, padding_idx=-1)
    assert emb.padding_idx == 5
    idx = ts.tensor([[0, 5], [2, 2]])
    assert_close(emb(idx), to_np(emb.weight)[[[0, 5], [2, 2]]])
    pre = ts.tensor([[1.0, 2.0], [3.0, 4.0]])
    e2 = nn.Embedding.from_pretrained(pre)
    assert not e2.weight.requires_grad
    assert_close(e2(ts.tensor([1, 0])), [[3.0, 4.0], [1.0, 2.0]])
    with pytest.raises(Exception):
        emb(ts.tensor([6]))
    with pytest.raises(ValueError):
        nn.Embedding(3, 2, padding_idx=3)


@pytest.mark.parametrize("dtype", FLOATS)
def test_activations(dtype):
    xn, x = rnd((3, 4), dtype, low=-3, high=3)
    from math import erf
    verf = np.vectorize(erf)
    cases = [
        (nn.ReLU(), np.maximum(xn, 0)),
        (nn.GELU(), 0.5 * xn * (1 + verf(xn / math.sqrt(2)))),
        (nn.GELU("tanh"), 0.5 * xn * (1 + np.tanh(math.sqrt(2 / math.pi) * (xn + 0.044715 * xn ** 3)))),
        (nn.SiLU(), xn / (1 + np.exp(-xn))),
        (nn.Tanh(), np.tanh(xn)),
        (nn.Sigmoid(), 1 / (1 + np.exp(-xn))),
        (nn.Softmax(dim=1), np_softmax(xn, 1)),
        (nn.Softmax(dim=0), np_softmax(xn, 0)),
        (nn.LogSoftmax(dim=-1), np_log_softmax(xn, -1)),
        (nn.Flatten(0), xn.reshape(-1)),
        (nn.Identity(), xn),
    ]
    for mod, ref in cases:
        assert_close(mod(x), ref, dtype, **tols(dtype))
    y = x.clone()
    nn.ReLU(inplace=True)(y)
    assert_close(y, np.maximum(xn, 0), dtype)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        F.softmax(x)


# ---------------------------------------------------------------------------- losses vs NumPy
def np_nll(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    n = logp.shape[0]
    w = np.ones(logp.shape[1]) if weight is None else weight
    losses, ws = np.zeros(n), np.zeros(n)
    for i in range(n):
        if target[i] == ignore_index:
            continue
        ws[i] = w[target[i]]
        losses[i] = -logp[i, target[i]] * ws[i]
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / ws.sum()


def np_cross_entropy(x, target, weight=None, ignore_index=-100, reduction="mean", ls=0.0):
    logp = np_log_softmax(x, 1)
    nll = np_nll(logp, target, weight, ignore_index, reduction)
    if ls == 0:
        return nll
    c = x.shape[1]
    w = np.ones(c) if weight is None else weight
    smooth = -(logp * w).sum(1)
    keep = target != ignore_index
    smooth = np.where(keep, smooth, 0.0)
    if reduction == "mean":
        denom = w[target[keep]].sum() if weight is not None else keep.sum()
        smooth = smooth.sum() / denom
    elif reduction == "sum":
        smooth = smooth.sum()
    return (1 - ls) * nll + ls / c * smooth


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_and_nll(dtype, reduction):
    xn, x = rnd((6, 4), dtype, low=-2, high=2)
    tn = np.array([0, 3, 1, 1, 2, 3])
    t = ts.tensor(tn.tolist())
    wn = np.array([1.0, 2.0, 0.5, 1.5])
    w = from_np(wn, dtype)
    tl = dict(rtol=1e-5, atol=1e-6) if dtype == ts.float32 else dict(rtol=1e-10, atol=1e-12)
    assert_close(F.cross_entropy(x, t, reduction=reduction), np_cross_entropy(xn, tn, reduction=reduction), dtype,
                 **tl)
    assert_close(nn.CrossEntropyLoss(weight=w, reduction=reduction)(x, t),
                 np_cross_entropy(xn, tn, wn, reduction=reduction), dtype, **tl)
    ti = np.array([0, -100, 1, 1, -100, 3])
    assert_close(F.cross_entropy(x, ts.tensor(ti.tolist()), weight=w, reduction=reduction, label_smoothing=0.2),
                 np_cross_entropy(xn, ti, wn, reduction=reduction, ls=0.2), dtype, **tl)
    assert_close(F.cross_entropy(x, t, reduction=reduction, label_smoothing=0.1),
                 np_cross_entropy(xn, tn, reduction=reduction, ls=0.1), dtype, **tl)
    logp = np_log_softmax(xn, 1)
    assert_close(nn.NLLLoss(weight=w, ignore_index=1, reduction=reduction)(from_np(logp, dtype), t),
                 np_nll(logp, tn, wn, 1, reduction), dtype, **tl)


def test_cross_entropy_probability_targets_spatial_and_unbatched():
    xn, x = rnd((3, 4), ts.float64)
    pn = np_softmax(np.random.default_rng(3).normal(size=(3, 4)), 1)
    ref = -(np_log_softmax(xn, 1) * pn).sum(1).mean()
    assert_close(F.cross_entropy(x, from_np(pn)), ref, ts.float64, rtol=1e-10, atol=1e-12)
    ps = pn * 0.7 + 0.3 / 4
    assert_close(F.cross_entropy(x, from_np(pn), label_smoothing=0.3), -(np_log_softmax(xn, 1) * ps).sum(1).mean(),
                 ts.float64, rtol=1e-10, atol=1e-12)
    # (N, C, d) input with (N, d) targets
    xn, x = rnd((2, 3, 4), ts.float64)
    tn = np.array([[0, 1, 2, 1], [2, 2, 0, 1]])
    logp = np_log_softmax(xn, 1)
    ref = -np.take_along_axis(logp, tn[:, None, :], 1).mean()
    assert_close(F.cross_entropy(x, ts.tensor(tn.tolist())), ref, ts.float64, rtol=1e-10, atol=1e-12)
    # unbatched (C,) input and () target
    assert_close(F.cross_entropy(x[0, :, 0], ts.tensor(2)), -logp[0, 2, 0], ts.float64, rtol=1e-10, atol=1e-12)


def test_loss_bad_input():
    x = ts.zeros(3, 4)
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, ts.tensor([0, 1, 2]), reduction="avg")
    with pytest.raises(ValueError, match="batch_size"):
        F.cross_entropy(x, ts.tensor([0, 1]))
    with pytest.raises(IndexError):
        F.cross_entropy(x, ts.tensor([0, 1, 7]))
    with pytest.raises(ValueError, match="Target size"):
        F.binary_cross_entropy_with_logits(x, ts.zeros(3))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, ts.tensor([0, 1, 2]), label_smoothing=1.5)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_and_bce_losses(dtype, reduction):
    an, a = rnd((3, 5), dtype, seed=1)
    bn_, b = rnd((3, 5), dtype, seed=2)
    red = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]
    assert_close(nn.MSELoss(reduction=reduction)(a, b), red((an - bn_) ** 2), dtype, **tols(dtype))
    assert_close(nn.L1Loss(reduction=reduction)(a, b), red(np.abs(an - bn_)), dtype, **tols(dtype))
    tn = (bn_ > 0).astype(np.float64)
    xn = an * 20  # large logits: the stable form must not overflow
    pw = np.array([1.0, 2.0, 0.5, 3.0, 1.0])
    logsig = -np.logaddexp(0, -xn)
    log1msig = -np.logaddexp(0, xn)
    ref = -(pw * tn * logsig + (1 - tn) * log1msig)
    got = nn.BCEWithLogitsLoss(reduction=reduction, pos_weight=from_np(pw, dtype))(from_np(xn, dtype),
                                                                                    from_np(tn, dtype))
    assert_close(got, red(ref), dtype, **tols(dtype))
    with pytest.warns(UserWarning, match="different to the input size"):
        assert_close(F.mse_loss(a, b[0]), np.mean((an - bn_[0]) ** 2), dtype, **tols(dtype))


# ---------------------------------------------------------------------------- attention
def np_sdpa(q, k, v, mask=None, causal=False):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        mask = np.tril(np.ones((q.shape[-2], k.shape[-2]), dtype=bool))
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    return np_softmax(s, -1) @ v


@pytest.mark.parametrize("dtype", FLOATS)
def test_scaled_dot_product_attention(dtype):
    qn, q = rnd((2, 3, 5, 4), dtype, seed=1)
    kn, k = rnd((2, 3, 6, 4), dtype, seed=2)
    vn, v = rnd((2, 3, 6, 2), dtype, seed=3)
    assert_close(F.scaled_dot_product_attention(q, k, v), np_sdpa(qn, kn, vn), dtype, **tols(dtype))
    mn = np.random.default_rng(4).random((5, 6)) < 0.7
    mn[:, 0] = True
    assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=ts.tensor(mn.tolist())),
                 np_sdpa(qn, kn, vn, mn), dtype, **tols(dtype))
    fm = np.random.default_rng(5).normal(size=(5, 6))
    assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=from_np(fm, dtype)), np_sdpa(qn, kn, vn, fm),
                 dtype, **tols(dtype))
    assert_close(F.scaled_dot_product_attention(q, k[:, :, :5], v[:, :, :5], is_causal=True),
                 np_sdpa(qn, kn[:, :, :5], vn[:, :, :5], causal=True), dtype, **tols(dtype))
    with pytest.raises(ValueError):
        F.scaled_dot_product_attention(q, k[..., :3], v)


def np_mha(x_q, x_k, x_v, w_in, b_in, w_out, b_out, h, key_padding_mask=None, attn_mask=None):
    """Batch-first (N, L, E) reference for nn.MultiheadAttention."""
    n, lq, e = x_q.shape
    s = x_k.shape[1]
    hd = e // h
    q = x_q @ w_in[:e].T + b_in[:e]
    k = x_k @ w_in[e:2 * e].T + b_in[e:2 * e]
    v = x_v @ w_in[2 * e:].T + b_in[2 * e:]
    q = q.reshape(n, lq, h, hd).transpose(0, 2, 1, 3)
    k = k.reshape(n, s, h, hd).transpose(0, 2, 1, 3)
    v = v.reshape(n, s, h, hd).transpose(0, 2, 1, 3)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
    if attn_mask is not None:
        scores = np.where(attn_mask, -np.inf, scores)
    if key_padding_mask is not None:
        scores = np.where(key_padding_mask[:, None, None, :], -np.inf, scores)
    a = np_softmax(scores, -1)
    out = (a @ v).transpose(0, 2, 1, 3).reshape(n, lq, e) @ w_out.T + b_out
    return out, a.mean(1)


@pytest.mark.parametrize("dtype", FLOATS)
def test_multihead_attention(dtype):
    ts.manual_seed(3)
    mha = nn.MultiheadAttention(8, 2, batch_first=True, dtype=dtype)
    with ts.no_grad():
        nn.init.normal_(mha.in_proj_bias, 0, 0.1)
        nn.init.normal_(mha.out_proj.bias, 0, 0.1)
    p = [to_np(t) for t in (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)]
    qn, q = rnd((2, 5, 8), dtype, seed=1)
    kn, k = rnd((2, 4, 8), dtype, seed=2)
    out, w = mha(q, k, k)
    ro, rw = np_mha(qn, kn, kn, *p, 2)
    assert_close(out, ro, dtype, **tols(dtype))
    assert_close(w, rw, dtype, **tols(dtype))
    kpm = np.array([[False, False, True, False], [False, True, True, False]])
    am = np.triu(np.ones((5, 4), dtype=bool), 1)
    out, w = mha(q, k, k, key_padding_mask=ts.tensor(kpm.tolist()), attn_mask=ts.tensor(am.tolist()))
    ro, rw = np_mha(qn, kn, kn, *p, 2, kpm, am)
    assert_close(out, ro, dtype, **tols(dtype))
    # sequence-first layout and unbatched input give the same numbers
    mha.batch_first = False
    out_sf, _ = mha(q.transpose(0, 1), k.transpose(0, 1), k.transpose(0, 1), need_weights=False)
    assert_close(out_sf.transpose(0, 1), np_mha(qn, kn, kn, *p, 2)[0], dtype, **tols(dtype))
    out_u, w_u = mha(q[0], k[0], k[0], average_attn_weights=False)
    assert tuple(w_u.shape) == (2, 5, 4)
    assert_close(out_u, np_mha(qn[:1], kn[:1], kn[:1], *p, 2)[0][0], dtype, **tols(dtype))
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(6, 4)


def test_transformer_encoder_layer_matches_its_composition():
    ts.manual_seed(4)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.1, batch_first=True,
                                       dtype=ts.float64).eval()
    names = [n for n, _ in layer.named_parameters()]
    assert names == ["self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                     "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
                     "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]
    xn, x = rnd((2, 5, 8), ts.float64)
    P = {n: to_np(p) for n, p in layer.named_parameters()}
    sa = np_mha(xn, xn, xn, P["self_attn.in_proj_weight"], P["self_attn.in_proj_bias"],
                P["self_attn.out_proj.weight"], P["self_attn.out_proj.bias"], 2)[0]
    h = np_layer_norm(xn + sa, P["norm1.weight"], P["norm1.bias"], 1e-5, 1)
    ff = np.maximum(h @ P["linear1.weight"].T + P["linear1.bias"], 0) @ P["linear2.weight"].T + P["linear2.bias"]
    ref = np_layer_norm(h + ff, P["norm2.weight"], P["norm2.bias"], 1e-5, 1)
    assert_close(layer(x), ref, ts.float64, rtol=1e-9, atol=1e-9)
    enc = nn.TransformerEncoder(layer, 2)
    assert len(enc.layers) == 2 and enc.layers[0] is not layer
    assert tuple(enc(x).shape) == (2, 5, 8)
    pre = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True, activation="gelu")
    assert tuple(pre(x.float()).shape) == (2, 5, 8)


# ---------------------------------------------------------------------------- gradients through the layers
def numeric_grad(f, t, eps=1e-6):
    """Central differences of the scalar f() with respect to each element of the float64 tensor t."""
    flat = t.detach().reshape(-1)
    g = np.zeros(flat.shape[0])
    for i in range(flat.shape[0]):
        old = flat[i].item()
        with ts.no_grad():
            flat[i] = old + eps
            hi = f().item()
            flat[i] = old - eps
            lo = f().item()
            flat[i] = old
        g[i] = (hi - lo) / (2 * eps)
    return g.reshape(tuple(t.shape))


@pytest.mark.parametrize("make", [
    lambda: nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.GELU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(12, 3)),
    lambda: nn.Sequential(nn.Conv1d(2, 3, 2), nn.SiLU(), nn.Flatten(), nn.LayerNorm(15), nn.Linear(15, 3)),
    lambda: nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.Tanh(), nn.AvgPool2d(2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)),
    lambda: nn.Sequential(nn.Flatten(), nn.Linear(32, 6), nn.BatchNorm1d(6), nn.Sigmoid(), nn.Linear(6, 3)),
], ids=["conv-gelu-maxpool", "conv1d-silu-layernorm", "groupnorm-avgpool", "batchnorm"])
def test_layer_gradients_match_finite_differences(make):
    ts.manual_seed(0)
    model = make().double()
    shape = (4, 2, 4, 4) if not isinstance(model[0], nn.Conv1d) else (4, 2, 6)
    x = ts.randn(*shape, dtype=ts.float64)
    y = ts.tensor([0, 2, 1, 2])

    def loss():
        return F.cross_entropy(model(x), y, label_smoothing=0.1)

    for m in model.modules():  # finite differences need the batch-norm running stats left alone
        if isinstance(m, nn.BatchNorm1d):
            m.track_running_stats = False
            m.running_mean = m.running_var = m.num_batches_tracked = None
    loss().backward()
    for name, p in model.named_parameters():
        np.testing.assert_allclose(to_np(p.grad), numeric_grad(loss, p), rtol=1e-5, atol=1e-7, err_msg=name)


def test_attention_gradients_match_finite_differences():
    ts.manual_seed(1)
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0, batch_first=True,
                                       dtype=ts.float64)
    x = ts.randn(2, 3, 4, dtype=ts.float64)
    mask = ts.tensor([[False, False, True], [False, False, False]])

    def loss():
        return (layer(x, src_key_padding_mask=mask) ** 2).sum()

    loss().backward()
    for name in ("self_attn.in_proj_weight", "self_attn.out_proj.bias", "linear1.weight", "norm2.weight"):
        p = layer.get_parameter(name)
        np.testing.assert_allclose(to_np(p.grad), numeric_grad(loss, p), rtol=1e-5, atol=1e-7, err_msg=name)


def test_embedding_and_loss_gradients():
    emb = nn.Embedding(5, 3, dtype=ts.float64)
    idx = ts.tensor([[1, 4], [1, 0]])
    t = ts.randn(2, 2, 3, dtype=ts.float64)

    def loss():
        return F.mse_loss(emb(idx), t) + F.l1_loss(emb(idx), t) + \
            F.binary_cross_entropy_with_logits(emb(idx), ts.sigmoid(t))

    loss().backward()
    np.testing.assert_allclose(to_np(emb.weight.grad), numeric_grad(loss, emb.weight), rtol=1e-5, atol=1e-7)
    assert (to_np(emb.weight.grad)[[2, 3]] == 0).all()


# ---------------------------------------------------------------------------- against PyTorch (when installed)
def copy_weights(src_ts, dst_torch, torch):
    sd = dst_torch.state_dict()
    with torch.no_grad():
        for k, v in src_ts.state_dict().items():
            sd[k].copy_(torch.tensor(to_np(v)))


@pytest.mark.torch
def test_layers_match_pytorch():
    torch = pytest.importorskip("torch")
    ts.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 8))
    cases = [
        (lambda lib: lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), (x,), {}),
        (lambda lib: lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=True, activation="gelu"),
         (x.transpose(1, 0, 2),), {}),
        (lambda lib: lib.nn.Sequential(lib.nn.Conv1d(5, 4, 3, padding="same"), lib.nn.GroupNorm(2, 4),
                                       lib.nn.SiLU()), (x,), {}),
        (lambda lib: lib.nn.Sequential(lib.nn.Linear(8, 6), lib.nn.LayerNorm(6), lib.nn.Tanh()), (x,), {}),
    ]
    for make, args, kw in cases:
        m_ts, m_th = make(ts).double(), make(torch).double()
        copy_weights(m_ts, m_th, torch)
        got = m_ts(*(from_np(a, ts.float64) for a in args))
        want = m_th(*(torch.tensor(a) for a in args)).detach().numpy()
        assert_close(got, want, ts.float64, rtol=1e-9, atol=1e-9)

    mha_ts = nn.MultiheadAttention(8, 4, batch_first=True, dtype=ts.float64)
    mha_th = torch.nn.MultiheadAttention(8, 4, batch_first=True, dtype=torch.float64)
    copy_weights(mha_ts, mha_th, torch)
    kpm = np.array([[False] * 4 + [True], [False] * 5])
    am = np.triu(np.ones((5, 5), dtype=bool), 1)
    o1, w1 = mha_ts(from_np(x), from_np(x), from_np(x), key_padding_mask=ts.tensor(kpm.tolist()),
                    attn_mask=ts.tensor(am.tolist()))
    xt = torch.tensor(x)
    o2, w2 = mha_th(xt, xt, xt, key_padding_mask=torch.tensor(kpm), attn_mask=torch.tensor(am))
    assert_close(o1, o2.detach().numpy(), ts.float64, rtol=1e-9, atol=1e-9)
    assert_close(w1, w2.detach().numpy(), ts.float64, rtol=1e-9, atol=1e-9)


@pytest.mark.torch
def test_functional_losses_match_pytorch():
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 5))
    t = np.array([0, 4, -100, 2, 2, 1])
    w = rng.uniform(0.5, 2, size=5)
    for red in ("mean", "sum", "none"):
        for ls in (0.0, 0.15):
            got = F.cross_entropy(from_np(x), ts.tensor(t.tolist()), weight=from_np(w), reduction=red,
                                  label_smoothing=ls)
            want = tF.cross_entropy(torch.tensor(x), torch.tensor(t), weight=torch.tensor(w), reduction=red,
                                    label_smoothing=ls)
            assert_close(got, want.numpy(), ts.float64, rtol=1e-10, atol=1e-12)
    p = rng.dirichlet(np.ones(5), size=6)
    assert_close(F.cross_entropy(from_np(x), from_np(p), label_smoothing=0.1),
                 tF.cross_entropy(torch.tensor(x), torch.tensor(p), label_smoothing=0.1).numpy(), ts.float64,
                 rtol=1e-10, atol=1e-12)
    q, k, v = (rng.normal(size=(2, 3, 4, 6)) for _ in range(3))
    assert_close(F.scaled_dot_product_attention(from_np(q), from_np(k), from_np(v), is_causal=True),
                 tF.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)), is_causal=True).numpy(),
                 ts.float64, rtol=1e-10, atol=1e-12)
