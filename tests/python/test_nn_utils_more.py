"""nn.utils (get_total_norm, clip_grads_with_norm_, clip_grad_norm, BatchNorm fusion, weight memory
formats, skip_init, rnn.invert_permutation), nn.init (dirac_, sparse_, the deprecated names) and
nn.parallel's scatter / gather / replicate / parallel_apply, against torch on the same weights."""
import math

import numpy as np
import pytest

import tessera as ts
import tessera.nn as nn
from conftest import T, close, from_torch, load_torch_state, to_np

RNG = np.random.default_rng(0)
U = nn.utils


def _params_with_grads(arrays):
    params = []
    for a in arrays:
        p = nn.Parameter(T(a))
        p.grad = T(a * 3 - 1)
        params.append(p)
    return params


def test_get_total_norm_and_clip_grads_with_norm():
    arrays = [RNG.standard_normal((3, 4)), RNG.standard_normal(5)]
    grads = [a * 3 - 1 for a in arrays]
    flat = np.concatenate([g.ravel() for g in grads])
    for p in (2.0, 1.0, 3.0, math.inf):
        expected = np.abs(flat).max() if p == math.inf else (np.abs(flat) ** p).sum() ** (1 / p)
        np.testing.assert_allclose(U.get_total_norm([T(g) for g in grads], p).item(), expected, rtol=1e-5)
    assert U.get_total_norm([]).item() == 0.0
    params = _params_with_grads(arrays)
    total = U.get_total_norm([p.grad for p in params])
    assert U.clip_grads_with_norm_(params, 1.0, total) is None
    np.testing.assert_allclose(U.get_total_norm([p.grad for p in params]).item(), 1.0, rtol=1e-5)
    with pytest.raises(RuntimeError, match="non-finite"):
        U.get_total_norm([ts.tensor([float("inf")])], error_if_nonfinite=True)


def test_clip_grad_norm_is_deprecated_alias():
    params = _params_with_grads([RNG.standard_normal(4)])
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        total = U.clip_grad_norm(params, 0.5)
    assert total.item() > 0.5
    np.testing.assert_allclose(U.get_total_norm([params[0].grad]).item(), 0.5, rtol=1e-5)
    # A generator of parameters works: it is read once.
    params = _params_with_grads([RNG.standard_normal(4)])
    U.clip_grad_norm_((p for p in params), 0.5)
    np.testing.assert_allclose(U.get_total_norm([params[0].grad]).item(), 0.5, rtol=1e-5)


def test_fusion_requires_eval():
    conv, bn = nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3)
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        U.fuse_conv_bn_eval(conv, bn)
    lin, bn1 = nn.Linear(3, 4).eval(), nn.BatchNorm1d(5).eval()
    with pytest.raises(AssertionError, match="out_features == bn.num_features"):
        U.fuse_linear_bn_eval(lin, bn1)


def test_memory_format_conversion_and_skip_init():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Sequential(nn.ConvTranspose2d(4, 2, 3)), nn.Conv3d(2, 2, 1))
    before = to_np(model[0].weight)
    assert U.convert_conv2d_weight_memory_format(model, ts.channels_last) is model
    assert model[0].weight.is_contiguous(memory_format=ts.channels_last)
    assert model[2][0].weight.is_contiguous(memory_format=ts.channels_last)
    assert isinstance(model[0].weight, nn.Parameter) and model[0].weight.requires_grad
    np.testing.assert_array_equal(to_np(model[0].weight), before)
    U.convert_conv3d_weight_memory_format(model, ts.channels_last_3d)
    assert model[3].weight.is_contiguous(memory_format=ts.channels_last_3d)
    lin = U.skip_init(nn.Linear, 3, 4)
    assert isinstance(lin, nn.Linear) and tuple(lin.weight.shape) == (4, 3)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        U.skip_init(int)


def test_invert_permutation():
    perm = ts.tensor([2, 0, 3, 1])
    inv = U.rnn.invert_permutation(perm)
    assert inv.tolist() == [1, 3, 0, 2]
    assert U.rnn.invert_permutation(None) is None


def test_init_dirac_sparse_and_deprecated_names():
    w = ts.empty(4, 2, 3, 3)
    nn.init.dirac_(w, groups=2)
    a = to_np(w)
    assert a.sum() == 4 and a[0, 0, 1, 1] == 1 and a[1, 1, 1, 1] == 1 and a[2, 0, 1, 1] == 1
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions are supported"):
        nn.init.dirac_(ts.empty(3, 3))
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        nn.init.dirac_(ts.empty(3, 2, 3), groups=2)
    s = to_np(nn.init.sparse_(ts.empty(10, 6), 0.3, std=0.5))
    assert ((s == 0).sum(0) >= 3).all()
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        nn.init.sparse_(ts.empty(3), 0.5)
    for old in ("uniform", "normal", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal",
                "orthogonal", "eye"):
        with pytest.warns(FutureWarning, match=f"`nn.init.{old}` is now deprecated in favor of `nn.init.{old}_`"):
            getattr(nn.init, old)(ts.empty(3, 4))
    with pytest.warns(FutureWarning, match="nn.init.constant_"):
        assert to_np(nn.init.constant(ts.empty(2), 0.5)).tolist() == [0.5, 0.5]
    with pytest.warns(FutureWarning, match="nn.init.dirac_"):
        nn.init.dirac(ts.empty(2, 2, 3))
    with pytest.warns(FutureWarning, match="nn.init.sparse_"):
        nn.init.sparse(ts.empty(4, 2), 0.5)


def test_init_generator_reproduces():
    def draw(fn, *args):
        g = ts.Generator()
        g.manual_seed(11)
        return to_np(fn(ts.empty(3, 4), *args, generator=g))
    for fn in (nn.init.uniform_, nn.init.normal_, nn.init.xavier_uniform_, nn.init.kaiming_normal_,
               nn.init.orthogonal_):
        np.testing.assert_array_equal(draw(fn), draw(fn))
    np.testing.assert_array_equal(draw(nn.init.sparse_, 0.5), draw(nn.init.sparse_, 0.5))


def test_parallel_scatter_gather_apply():
    from tessera.nn.parallel import gather, parallel_apply, replicate, scatter
    from tessera.nn.parallel.scatter_gather import scatter_kwargs
    x = T(np.arange(10).reshape(5, 2))
    pieces = scatter((x, {"k": x, "n": 3}), [0, 1])
    assert len(pieces) == 2 and tuple(pieces[0][0].shape) == (3, 2) and tuple(pieces[1][0].shape) == (2, 2)
    assert pieces[1][1]["n"] == 3 and to_np(pieces[1][1]["k"]).tolist() == [[6, 7], [8, 9]]
    args, kwargs = scatter_kwargs((x,), {"flag": True}, [0, 1])
    assert len(args) == len(kwargs) == 2 and kwargs[1] == {"flag": True}
    model = nn.Linear(2, 3)
    replicas = replicate(model, [0, 1])
    outs = parallel_apply(replicas, [p[0] for p in pieces])
    close(gather(outs, -1), to_np(model(x)))
    joined = gather([{"a": ts.ones(2), "b": None}, {"a": ts.zeros(1), "b": None}], -1)
    assert to_np(joined["a"]).tolist() == [1, 1, 0] and joined["b"] is None
    gather(outs, 0).sum().backward()
    assert model.weight.grad is not None
    with pytest.raises(AssertionError, match="number of modules"):
        parallel_apply(replicas, [x])


@pytest.mark.torch
@pytest.mark.parametrize("transpose", [False, True])
def test_fuse_conv_bn_matches_torch(transpose):
    import torch
    torch.manual_seed(0)
    conv_t = (torch.nn.ConvTranspose2d(3, 4, 3) if transpose else torch.nn.Conv2d(3, 4, 3)).eval()
    bn_t = torch.nn.BatchNorm2d(4).eval()
    with torch.no_grad():
        bn_t.running_mean.uniform_(-1, 1)
        bn_t.running_var.uniform_(0.5, 2)
        bn_t.weight.uniform_(0.5, 1.5)
        bn_t.bias.uniform_(-1, 1)
    conv = (nn.ConvTranspose2d(3, 4, 3) if transpose else nn.Conv2d(3, 4, 3)).eval()
    bn = nn.BatchNorm2d(4).eval()
    load_torch_state(conv, conv_t)
    load_torch_state(bn, bn_t)
    fused = U.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    fused_t = torch.nn.utils.fuse_conv_bn_eval(conv_t, bn_t, transpose=transpose)
    close(fused.weight, fused_t.weight)
    close(fused.bias, fused_t.bias)
    x = torch.randn(2, 3, 6, 6)
    close(fused(from_torch(x)), fused_t(x), tol=1e-4)
    close(fused(from_torch(x)), bn_t(conv_t(x)), tol=1e-4)
    assert fused.weight is not conv.weight and conv.bias is not None


@pytest.mark.torch
def test_fuse_linear_bn_and_weights_match_torch():
    import torch
    torch.manual_seed(1)
    lin_t, bn_t = torch.nn.Linear(5, 4, bias=False).eval(), torch.nn.BatchNorm1d(4).eval()
    with torch.no_grad():
        bn_t.running_mean.uniform_(-1, 1)
        bn_t.running_var.uniform_(0.5, 2)
    lin, bn = nn.Linear(5, 4, bias=False).eval(), nn.BatchNorm1d(4).eval()
    load_torch_state(lin, lin_t)
    load_torch_state(bn, bn_t)
    fused, fused_t = U.fuse_linear_bn_eval(lin, bn), torch.nn.utils.fuse_linear_bn_eval(lin_t, bn_t)
    close(fused.weight, fused_t.weight)
    close(fused.bias, fused_t.bias)
    x = torch.randn(3, 5)
    close(fused(from_torch(x)), bn_t(lin_t(x)), tol=1e-5)
    w, b = U.fuse_conv_bn_weights(from_torch(lin_t.weight[:, :, None], True), None, bn.running_mean, bn.running_var,
                                  1e-3, None, None)
    wt, bt = torch.nn.utils.fuse_conv_bn_weights(lin_t.weight[:, :, None], None, bn_t.running_mean, bn_t.running_var,
                                                 1e-3, None, None)
    close(w, wt)
    close(b, bt)
    assert isinstance(w, nn.Parameter) and w.requires_grad == wt.requires_grad


@pytest.mark.torch
def test_total_norm_and_clipping_match_torch():
    import torch
    arrays = [RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal(6).astype(np.float32)]
    for p in (2.0, 1.0, math.inf):
        close(U.get_total_norm([T(a) for a in arrays], p), torch.nn.utils.get_total_norm(
            [torch.tensor(a) for a in arrays], p))
    ours = _params_with_grads(arrays)
    theirs = [torch.nn.Parameter(torch.tensor(a)) for a in arrays]
    for t, a in zip(theirs, arrays):
        t.grad = torch.tensor(a * 3 - 1)
    close(U.clip_grad_norm_(ours, 0.7), torch.nn.utils.clip_grad_norm_(theirs, 0.7))
    for o, t in zip(ours, theirs):
        close(o.grad, t.grad)
    close(U.rnn.invert_permutation(ts.tensor([3, 0, 2, 1])),
          torch.nn.utils.rnn.invert_permutation(torch.tensor([3, 0, 2, 1])))


@pytest.mark.torch
def test_dirac_matches_torch():
    import torch
    for shape, groups in [((4, 2, 3), 1), ((6, 3, 3, 3), 3), ((4, 4, 3, 2, 3), 2)]:
        t = torch.empty(*shape)
        torch.nn.init.dirac_(t, groups)
        close(nn.init.dirac_(ts.empty(*shape), groups), t)
