"""Forward-mode AD: ts.autograd.forward_ad (dual_level, make_dual, unpack_dual), the jvp formulas
of autograd/derivatives.yaml (`result:`), and torch.func.jvp/jacfwd over them.

The oracle for every formula is reverse mode, which the autograd tests check against PyTorch and
finite differences: J t is assembled from one vjp per output element (J's rows) and compared with
the tangent forward mode computes, for every sample of every operator that has a formula in the
every-operator sweep (op_samples.py). Where PyTorch is importable, jvp/jacfwd results are also
compared with torch.func's on the same inputs."""

import pathlib

import numpy as np
import pytest
import yaml
from conftest import to_np
from op_samples import SAMPLES, View

import tessera as ts
from tessera.autograd import forward_ad as fwAD

try:
    import torch
except ImportError:  # the comparisons with PyTorch are skipped
    torch = None

DERIVATIVES = pathlib.Path(__file__).resolve().parents[2] / "autograd" / "derivatives.yaml"

# Differentiable primitives whose jvp formula is not written yet: forward mode raises
# NotImplementedError naming them (none now; the set stays for the coverage check).
NO_JVP_YET = set()
# Modes whose forward mode refuses, naming the mode.
UNSUPPORTED_MODES = {"linalg_svd": "full_matrices=True of a non-square", "linalg_qr": "mode='reduced' with rows >= columns"}


def _entries():
    return yaml.safe_load(DERIVATIVES.read_text())


def test_jvp_formula_coverage():
    entries = _entries()
    differentiable = [e["name"] for e in entries if not e.get("nondifferentiable")]
    with_jvp = [e["name"] for e in entries if "result" in e or "results" in e]
    missing = sorted(set(differentiable) - set(with_jvp))
    print(f"\njvp formulas: {len(with_jvp)}/{len(differentiable)} differentiable primitives "
          f"({100.0 * len(with_jvp) / len(differentiable):.1f}%); without: {', '.join(missing)}")
    assert set(missing) == NO_JVP_YET


# ---------------------------------------------------------------------------- the API
def test_make_dual_and_unpack_dual():
    x = ts.tensor([0.5, -1.0, 2.0])
    t = ts.tensor([1.0, 2.0, -0.5])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        y = d.sin() * d
        primal, tangent = fwAD.unpack_dual(y)
        assert isinstance(fwAD.unpack_dual(y), fwAD.UnpackedDualTensor)
        # The primal of the input is a view without the tangent; x itself never got one.
        assert fwAD.unpack_dual(x).tangent is None
        assert fwAD.unpack_dual(fwAD.unpack_dual(d).primal).tangent is None
    xn, tn = to_np(x), to_np(t)
    np.testing.assert_allclose(to_np(primal), np.sin(xn) * xn, rtol=1e-6)
    np.testing.assert_allclose(to_np(tangent), (np.cos(xn) * xn + np.sin(xn)) * tn, rtol=1e-5)
    # Outside the level the tangent is gone.
    assert fwAD.unpack_dual(y).tangent is None


def test_make_dual_is_a_view_sharing_reverse_history():
    x = ts.tensor([1.0, 2.0], requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ts.ones(2))
        y = (d * d).sum()
        dy = fwAD.unpack_dual(y).tangent
    y.backward()
    np.testing.assert_allclose(to_np(x.grad), [2.0, 4.0])
    np.testing.assert_allclose(dy.item(), 6.0)


def test_reverse_over_forward_tangents_are_differentiable():
    # d/dx of the jvp of sum(x^3) in direction v: 6 x v.
    x = ts.tensor([1.0, -2.0, 0.5], requires_grad=True)
    v = ts.tensor([0.3, 1.0, 2.0])
    with fwAD.dual_level():
        y = (fwAD.make_dual(x, v) ** 3).sum()
        jv = fwAD.unpack_dual(y).tangent
    (g,) = ts.autograd.grad(jv, x)
    np.testing.assert_allclose(to_np(g), 6 * to_np(x.detach()) * to_np(v), rtol=1e-5)


def test_errors_name_the_problem():
    x = ts.ones(3)
    with pytest.raises(RuntimeError, match="no level exists"):
        fwAD.make_dual(x, ts.ones(3))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=r"different size.*size \[3\].*size \[2\]"):
            fwAD.make_dual(x, ts.ones(2))
        with pytest.raises(ValueError, match="Expected primal to be floating point or complex, but got"):
            fwAD.make_dual(ts.ones(3, dtype=ts.int64), ts.ones(3, dtype=ts.int64))
        with pytest.raises(TypeError, match="must be Tensor"):
            fwAD.make_dual(x, 1.0)
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            fwAD.enter_dual_level()
        a = fwAD.make_dual(ts.ones(3, 2), ts.ones(3, 2))
        with pytest.raises(NotImplementedError, match="linalg_svd: forward AD with full_matrices=True"):
            ts.linalg.svd(a, full_matrices=True)


def test_inplace_operator_updates_the_tangent():
    x = ts.tensor([1.0, 2.0, 3.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x.clone(), ts.tensor([1.0, 0.0, -1.0]))
        d.mul_(d)  # x^2: tangent 2 x t
        d.add_(ts.tensor([5.0, 5.0, 5.0]), alpha=2.0)
        tangent = fwAD.unpack_dual(d).tangent
    np.testing.assert_allclose(to_np(tangent), [2.0, 0.0, -6.0])


def test_copy_into_a_plain_tensor_takes_the_source_tangent():
    with fwAD.dual_level():
        dst = ts.zeros(2, 3)
        src = fwAD.make_dual(ts.ones(3), ts.tensor([1.0, 2.0, 3.0]))
        dst.copy_(src)
        tangent = fwAD.unpack_dual(dst).tangent
    np.testing.assert_allclose(to_np(tangent), [[1.0, 2.0, 3.0]] * 2)


def _views_and_inplace_scenarios(lib, fw):
    """Tangents through views written in place, as PyTorch defines them (a view's tangent is the
    same view of its base's tangent). Written once for tessera and torch."""
    out = {}
    with fw.dual_level():
        t = lib.ones(3)
        x = fw.make_dual(lib.tensor([1.0, 2.0, 3.0]), t)
        x[1:].mul_(2)  # through a view of a dual tensor
        out["view of a dual"] = fw.unpack_dual(x).tangent
        out["make_dual's tangent, updated in place"] = t
        b = lib.zeros(3)
        b[0:1].copy_(fw.make_dual(lib.tensor([5.0]), lib.tensor([7.0])))  # a plain base gets one
        out["plain base, view copied into"] = fw.unpack_dual(b).tangent
        b = lib.zeros(3)
        b[1] = fw.make_dual(lib.tensor([5.0]), lib.tensor([7.0]))[0]
        out["setitem"] = fw.unpack_dual(b).tangent
        x = fw.make_dual(lib.tensor([1.0, 2.0, 3.0]), lib.ones(3))
        v = x[:2]
        x.mul_(3)  # the base changes after the view was made
        out["view of a base changed later"] = fw.unpack_dual(v).tangent
        b = lib.zeros(3)
        v = b[:2]
        b.copy_(fw.make_dual(lib.ones(3), lib.ones(3) * 4))
        out["view made before its base had a tangent"] = fw.unpack_dual(v).tangent
        w = lib.zeros(2, 3)
        w.t()[1].copy_(fw.make_dual(lib.ones(2), lib.tensor([3.0, 4.0])))
        out["transposed view"] = fw.unpack_dual(w).tangent
    return out


def test_inplace_through_views_reaches_the_base_tangent():
    got = _views_and_inplace_scenarios(ts, fwAD)
    expected = {"view of a dual": [1, 2, 2], "make_dual's tangent, updated in place": [1, 2, 2],
                "plain base, view copied into": [7, 0, 0], "setitem": [0, 7, 0],
                "view of a base changed later": [3, 3], "view made before its base had a tangent": [4, 4],
                "transposed view": [[0, 3, 0], [0, 4, 0]]}
    for name, want in expected.items():
        np.testing.assert_allclose(to_np(got[name]), want, err_msg=name)
    if torch is not None:
        import torch.autograd.forward_ad as tfw
        for name, value in _views_and_inplace_scenarios(torch, tfw).items():
            np.testing.assert_allclose(to_np(got[name]), value.numpy(), err_msg=f"{name} (against torch)")


# ---------------------------------------------------------------------------- every formula
def _materialize(v):
    if isinstance(v, View):
        return v.materialize()
    if isinstance(v, (list, tuple)):
        return type(v)(_materialize(x) for x in v)
    return v


def _float_leaves(v, out):
    if isinstance(v, ts.Tensor):
        if v.dtype in (ts.float32, ts.float64):
            out.append(v)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _float_leaves(x, out)
    return out


def _replace(v, mapping):
    if isinstance(v, ts.Tensor):
        return mapping.get(id(v), v)
    if isinstance(v, (list, tuple)):
        return type(v)(_replace(x, mapping) for x in v)
    return v


def _has_other_floating(v):
    if isinstance(v, ts.Tensor):
        return (v.dtype.is_floating_point or v.dtype.is_complex) and v.dtype not in (ts.float32, ts.float64)
    if isinstance(v, (list, tuple)):
        return any(_has_other_floating(x) for x in v)
    return False


def _formula_cases():
    cases = []
    for e in _entries():
        if ("result" not in e and "results" not in e) or e["name"] not in SAMPLES:
            continue
        for k, s in enumerate(SAMPLES[e["name"]].make()):
            if s.error is None:
                cases.append(pytest.param(e["name"], k, id=f"{e['name']}-{k}"))
    return cases


def _padding_idx(args, kwargs):
    p = kwargs.get("padding_idx", args[2] if len(args) > 2 else -1)
    return None if p is None or p < 0 else p


def _op(name):
    base, _, over = name.partition(".")
    return getattr(getattr(ts.ops.aten, base), over or "default")


@pytest.mark.parametrize("name,k", _formula_cases())
def test_jvp_formula_matches_reverse_mode(name, k):
    sample = SAMPLES[name].make()[k]
    args = _materialize(sample.args)
    kwargs = {key: _materialize(v) for key, v in sample.kwargs.items()}
    if _has_other_floating((args, list(kwargs.values()))):
        pytest.skip("reduced-precision sample (the formulas are checked in float32/float64)")
    op = _op(name)
    leaves = _float_leaves((args, list(kwargs.values())), [])
    if not leaves:
        pytest.skip("no floating input")
    if any(not np.isfinite(to_np(x)).all() for x in leaves):
        pytest.skip("non-finite inputs")
    rng = np.random.default_rng(k)
    tangents = [ts.tensor(rng.standard_normal(tuple(x.shape)).astype(np.float64), dtype=x.dtype) for x in leaves]

    # Reverse mode: J's rows, one vjp per output element. The leaves enter through a copy (x * 1),
    # so in-place operators (copy_, fill_) write into a non-leaf.
    leaf_of = {id(x): x.detach().clone().requires_grad_() for x in leaves}
    inputs = {key: x * 1.0 for key, x in leaf_of.items()}
    ts.manual_seed(k)  # random operators (dropout) draw the same in both modes
    r = op(*_replace(args, inputs), **{key: _replace(v, inputs) for key, v in kwargs.items()})
    outs = list(r) if isinstance(r, (tuple, list)) else [r]
    if name == "embedding" and _padding_idx(args, kwargs) is not None:
        pytest.skip("padding_idx: the backward gives that row no gradient while its value reaches the output "
                    "(the jvp is auto_linear in PyTorch too)")
    # The outputs checked: real float32/float64, finite, differentiable (complex outputs: the FFT tests).
    checked = [j for j, o in enumerate(outs) if isinstance(o, ts.Tensor) and o.dtype in (ts.float32, ts.float64)
               and o.requires_grad and np.isfinite(to_np(o.detach())).all()]
    if not checked:
        pytest.skip("no finite real floating output that depends differentiably on the inputs")
    leaf_list = [leaf_of[id(x)] for x in leaves]
    expected = {}
    for j in checked:
        flat = outs[j].reshape(-1)
        col = np.zeros(flat.shape[0], dtype=np.float64)
        for i in range(flat.shape[0]):
            try:
                grads = ts.autograd.grad(flat[i], leaf_list, retain_graph=True, allow_unused=True)
            except ValueError as e:  # linalg_qr mode='r': no derivative either way
                pytest.skip(f"reverse mode has no derivative here: {e}")
            col[i] = sum(float((g.double() * t.double()).sum().item()) for g, t in zip(grads, tangents) if g is not None)
        expected[j] = col

    # Forward mode.
    with fwAD.dual_level():
        ts.manual_seed(k)
        duals = {id(x): fwAD.make_dual(x.detach().clone(), t) for x, t in zip(leaves, tangents)}
        try:
            r = op(*_replace(args, duals), **{key: _replace(v, duals) for key, v in kwargs.items()})
        except NotImplementedError as e:
            # Factorisations whose extra outputs are not unique: a clear refusal (PyTorch refuses too).
            assert name in UNSUPPORTED_MODES and UNSUPPORTED_MODES[name] in str(e), str(e)
            return
        unpacked = [fwAD.unpack_dual(o) for o in (list(r) if isinstance(r, (tuple, list)) else [r])]
    for j in checked:
        primal, tangent = unpacked[j]
        out = outs[j]
        np.testing.assert_allclose(to_np(primal), to_np(out.detach()), rtol=1e-6, atol=1e-6)
        assert tangent is not None, f"{name}: no tangent for output {j}"
        assert tuple(tangent.shape) == tuple(out.shape)
        double = out.dtype == ts.float64 and all(x.dtype == ts.float64 for x in leaves)
        tol = 1e-9 if double else 1e-4
        np.testing.assert_allclose(to_np(tangent.double()).reshape(-1), expected[j], rtol=tol, atol=tol,
                                   err_msg=f"output {j}")


# ---------------------------------------------------------------------------- torch.func over it
def _mlp_params(seed=0):
    rng = np.random.default_rng(seed)
    return [ts.tensor(rng.standard_normal(s).astype(np.float64) * 0.5) for s in ((5, 4), (5,), (3, 5), (3,))]


def _mlp(params, x):
    w1, b1, w2, b2 = params
    h = ts.nn.functional.gelu(x @ w1.T + b1)
    return ts.tanh(ts.nn.functional.layer_norm(h, (5,)) @ w2.T + b2).sum(-1)


def test_jacfwd_equals_jacrev_on_a_network():
    params = _mlp_params()
    x = ts.tensor(np.random.default_rng(1).standard_normal((6, 4)))
    jf = ts.func.jacfwd(_mlp)(params, x)
    jr = ts.func.jacrev(_mlp)(params, x)
    for a, b in zip(jf, jr):
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=1e-10, atol=1e-12)


def test_forward_over_reverse_hessian():
    def f(x):
        return (x.sin() * x.exp()).sum() + (x[:2] * x[1:3]).prod()

    x = ts.tensor([0.3, -0.7, 1.1, 0.2], dtype=ts.float64)
    h_fr = ts.func.jacfwd(ts.func.jacrev(f))(x)
    h_rr = ts.func.jacrev(ts.func.jacrev(f))(x)
    np.testing.assert_allclose(to_np(h_fr), to_np(h_rr), rtol=1e-10, atol=1e-12)


def test_vmap_of_jvp_with_batched_primals_and_tangents():
    xs = ts.tensor(np.random.default_rng(2).standard_normal((4, 3)))
    ts_ = ts.tensor(np.random.default_rng(3).standard_normal((4, 3)))
    f = lambda x: (x.softmax(-1) * x.cumprod(0)).sum()  # noqa: E731
    out, tangent = ts.func.vmap(lambda x, t: ts.func.jvp(f, (x,), (t,)))(xs, ts_)
    for i in range(4):
        o, tg = ts.func.jvp(f, (xs[i],), (ts_[i],))
        np.testing.assert_allclose(to_np(out[i]), to_np(o), rtol=1e-12)
        np.testing.assert_allclose(to_np(tangent[i]), to_np(tg), rtol=1e-10)


def test_jvp_against_finite_differences():
    def f(x, w):
        return ts.nn.functional.max_pool2d(ts.nn.functional.conv2d(x, w, padding=1).relu(), 2).logsumexp((1, 2, 3))

    rng = np.random.default_rng(4)
    x = ts.tensor(rng.standard_normal((2, 3, 6, 6)))
    w = ts.tensor(rng.standard_normal((4, 3, 3, 3)))
    tx = ts.tensor(rng.standard_normal((2, 3, 6, 6)))
    tw = ts.tensor(rng.standard_normal((4, 3, 3, 3)))
    _, tangent = ts.func.jvp(f, (x, w), (tx, tw))
    eps = 1e-6
    fd = (to_np(f(x + eps * tx, w + eps * tw)) - to_np(f(x - eps * tx, w - eps * tw))) / (2 * eps)
    np.testing.assert_allclose(to_np(tangent), fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", ["RNN_TANH", "RNN_RELU", "LSTM", "GRU"])
@pytest.mark.parametrize("reverse", [False, True])
def test_fused_rnn_layer_jvp_equals_the_step_by_step_cells(mode, reverse):
    """_rnn_layer's formula (the recurrence replayed with tangents) against the same layer built from
    the per-step cells, whose operators carry their own jvps; every input has a tangent except one
    bias, which is None."""
    from tessera.nn import _rnn
    gates = {"LSTM": 4, "GRU": 3}.get(mode, 1)
    T, N, I, H = 5, 3, 4, 6
    rng = np.random.default_rng(7)

    def r(*shape):
        return ts.tensor(rng.standard_normal(shape).astype(np.float32) * 0.5)
    primals = [r(T, N, I), r(gates * H, I), r(gates * H, H), r(gates * H), r(N, H)] + ([r(N, H)] if mode == "LSTM" else [])
    tangents = [r(*p.shape) for p in primals]
    code = _rnn.MODES[mode]

    def fused(x, w_ih, w_hh, b_ih, h, c=None):
        out, hy, cy, _ = ts.ops.aten._rnn_layer(x, w_ih, w_hh, b_ih, None, h, c, code, reverse, True)
        return (out, hy, cy) if mode == "LSTM" else (out, hy)

    def cells(x, w_ih, w_hh, b_ih, h, c=None):
        out, hy, cy = _rnn._composite_segment(mode, x, h, c, w_ih, w_hh, b_ih, None, None, reverse)
        return (out, hy, cy) if mode == "LSTM" else (out, hy)

    got_out, got_t = ts.func.jvp(fused, tuple(primals), tuple(tangents))
    want_out, want_t = ts.func.jvp(cells, tuple(primals), tuple(tangents))
    for g, w in zip(got_out + got_t, want_out + want_t):
        np.testing.assert_allclose(to_np(g), to_np(w), rtol=1e-4, atol=1e-5)


def test_jvp_has_aux_and_outputs_without_tangent():
    def f(x):
        return {"y": x * 2, "const": ts.ones(2)}, x.sum()

    x = ts.tensor([1.0, 2.0])
    (out, tangents, aux) = ts.func.jvp(f, (x,), (ts.tensor([1.0, -1.0]),), has_aux=True)
    np.testing.assert_allclose(to_np(tangents["y"]), [2.0, -2.0])
    np.testing.assert_allclose(to_np(tangents["const"]), [0.0, 0.0])
    assert aux.item() == 3.0


@pytest.mark.skipif(torch is None, reason="PyTorch is not importable")
def test_against_torch_func():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4))
    t = rng.standard_normal((3, 4))
    w = rng.standard_normal((4, 4))

    def make(lib):
        def f(x, w):
            h = lib.nn.functional.silu(x @ w)
            return lib.nn.functional.log_softmax(h, -1).var(0) + h.amax(-1).sum()
        return f

    out_ts, jvp_ts = ts.func.jvp(make(ts), (ts.tensor(x), ts.tensor(w)), (ts.tensor(t), ts.zeros(4, 4, dtype=ts.float64)))
    out_pt, jvp_pt = torch.func.jvp(make(torch), (torch.tensor(x), torch.tensor(w)), (torch.tensor(t), torch.zeros(4, 4, dtype=torch.float64)))
    np.testing.assert_allclose(to_np(out_ts), out_pt.numpy(), rtol=1e-10)
    np.testing.assert_allclose(to_np(jvp_ts), jvp_pt.numpy(), rtol=1e-9)
    j_ts = ts.func.jacfwd(make(ts), argnums=(0, 1))(ts.tensor(x), ts.tensor(w))
    j_pt = torch.func.jacfwd(make(torch), argnums=(0, 1))(torch.tensor(x), torch.tensor(w))
    for a, b in zip(j_ts, j_pt):
        np.testing.assert_allclose(to_np(a), b.numpy(), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------- functionalize
def test_functionalize_keeps_results_and_input_mutations_without_aliasing():
    def f(a, scale):
        a.add_(1)
        b = a.view(-1)
        b.mul_(scale)
        return b, a * 2

    x = ts.zeros(2, 2)
    y = ts.zeros(2, 2)
    want_b, want_2a = f(y, 3.0)
    got_b, got_2a = ts.func.functionalize(f)(x, 3.0)
    np.testing.assert_allclose(to_np(got_b), to_np(want_b))
    np.testing.assert_allclose(to_np(got_2a), to_np(want_2a))
    np.testing.assert_allclose(to_np(x), to_np(y))  # the input mutation reached the caller's tensor
    got_b.fill_(-1.0)  # the output does not alias the input
    np.testing.assert_allclose(to_np(x), to_np(y))
    with pytest.raises(RuntimeError, match="received invalid argument for remove=views"):
        ts.func.functionalize(f, remove="views")


def test_functionalize_composes_with_grad_and_vmap():
    def f(a):
        b = a.clone()
        b.mul_(a)
        return b.sin().sum()

    x = ts.tensor([0.5, -1.0, 2.0], dtype=ts.float64)
    g = ts.func.grad(ts.func.functionalize(f))(x)
    np.testing.assert_allclose(to_np(g), np.cos(to_np(x) ** 2) * 2 * to_np(x), rtol=1e-12)
    xs = ts.tensor(np.random.default_rng(6).standard_normal((4, 3)))
    np.testing.assert_allclose(to_np(ts.func.vmap(ts.func.functionalize(f))(xs)),
                               [to_np(f(xs[i].clone())) for i in range(4)], rtol=1e-12)
    if torch is not None:
        got = ts.func.jacrev(ts.func.functionalize(f))(x)
        want = torch.func.jacrev(torch.func.functionalize(lambda a: (a.clone() * a).sin().sum()))(torch.tensor(to_np(x)))
        np.testing.assert_allclose(to_np(got), want.numpy(), rtol=1e-12)
