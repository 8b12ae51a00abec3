"""nn.Module's hooks and state API: forward (pre-)hooks, full backward (pre-)hooks, global hooks,
state_dict / load_state_dict hooks and errors, and the Tensor type / new_* methods. Tests taking
the `torch` fixture run the same code on PyTorch and on tessera and compare what the hooks saw;
the others need no PyTorch."""
import copy
import pickle
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import tessera as ts
from tessera.nn.modules import module as ts_module_mod

nn = ts.nn


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def np_of(t):
    return None if t is None else np.asarray(t.detach().cpu().numpy() if hasattr(t, "cpu") else t.numpy())


def same_weights(torch_model, ts_model):
    """Copies torch_model's parameters and buffers into ts_model (same structure)."""
    ts_model.load_state_dict({k: ts.tensor(v.detach().numpy()) for k, v in torch_model.state_dict().items()})


def summary(grads):
    """A hook's gradient tuple as comparable data: None or (shape, values)."""
    return [None if g is None else np_of(g) for g in grads]


def assert_same_records(torch_rec, ts_rec):
    assert len(torch_rec) == len(ts_rec), (torch_rec, ts_rec)
    for a, b in zip(torch_rec, ts_rec):
        assert a[:2] == b[:2], (a, b)
        for ga, gb in zip(a[2:], b[2:]):
            assert len(ga) == len(gb), (a, b)
            for x, y in zip(ga, gb):
                assert (x is None) == (y is None), (a[:2], ga, gb)
                if x is not None:
                    assert x.shape == y.shape
                    np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- the same models on both libraries
def mlp(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))


def two_outputs(lib):
    """A module with a non-tensor argument and outputs: (used tensor, unused tensor, int)."""

    class TwoOut(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(3, 3)

        def forward(self, x, scale, y):
            h = self.lin(x) * scale
            return h, h * y, 7

    return TwoOut()


def pair(torch, builder):
    a, b = builder(torch), builder(ts)
    same_weights(a, b)
    return a, b


def record_backward(lib, model, x_requires_grad):
    rec = []
    for name, sub in model.named_modules():
        sub.register_full_backward_pre_hook(lambda m, go, name=name: rec.append(("pre", name, summary(go))))
        sub.register_full_backward_hook(lambda m, gi, go, name=name: rec.append(("full", name, summary(gi),
                                                                                  summary(go))))
    x = lib.tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3), requires_grad=x_requires_grad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (model(x) ** 2).sum().backward()
    return rec, x


@pytest.mark.parametrize("x_requires_grad", [False, True])
def test_full_backward_hooks_see_what_torch_sees(torch, x_requires_grad):
    a, b = pair(torch, mlp)
    rec_a, xa = record_backward(torch, a, x_requires_grad)
    rec_b, xb = record_backward(ts, b, x_requires_grad)
    assert_same_records(rec_a, rec_b)
    if x_requires_grad:
        np.testing.assert_allclose(np_of(xa.grad), np_of(xb.grad), rtol=1e-5, atol=1e-6)
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert na == nb
        np.testing.assert_allclose(np_of(pa.grad), np_of(pb.grad), rtol=1e-5, atol=1e-6)


def test_backward_hooks_non_tensor_and_unused_entries_are_none(torch):
    a, b = pair(torch, two_outputs)
    recs = []
    for lib, m in ((torch, a), (ts, b)):
        rec = []
        m.register_full_backward_pre_hook(lambda mod, go: rec.append(("pre", "", summary(go))))
        m.register_full_backward_hook(lambda mod, gi, go: rec.append(("full", "", summary(gi), summary(go))))
        x = lib.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], requires_grad=True)
        y = lib.tensor([[2.0, 2.0, 2.0], [1.0, 1.0, 1.0]], requires_grad=True)
        h, _unused, seven = m(x, 3.0, y)
        assert seven == 7
        h.sum().backward()
        recs.append(rec)
    assert_same_records(*recs)
    # grad_output: (h's, None for the unused output, None for the int)
    assert recs[1][0][2][1] is None and recs[1][0][2][2] is None
    # grad_input: (x's, None for the float, zeros for y, which is off the loss's path, as torch)
    assert recs[1][1][2][1] is None and not recs[1][1][2][2].any()


def test_backward_hook_replacements_take_effect(torch):
    a, b = pair(torch, mlp)
    grads = []
    for lib, m in ((torch, a), (ts, b)):
        # the pre-hook doubles grad_output of the last layer; the full hook of the first layer
        # replaces its grad_input by ones
        m[2].register_full_backward_pre_hook(lambda mod, go: tuple(g * 2 for g in go))
        m[0].register_full_backward_hook(lambda mod, gi, go: (lib.ones_like(gi[0]),))
        x = lib.tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3), requires_grad=True)
        m(x).sum().backward()
        grads.append((np_of(x.grad), [np_of(p.grad) for p in m.parameters()]))
    np.testing.assert_array_equal(grads[1][0], np.ones((5, 3), np.float32))
    np.testing.assert_allclose(grads[0][0], grads[1][0])
    for ga, gb in zip(grads[0][1], grads[1][1]):
        np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-6)


def test_forward_hooks_order_and_arguments_match_torch(torch):
    logs = []
    for lib in (torch, ts):
        log = []
        m = mlp(lib)
        mm = lib.nn.modules.module
        handles = [
            mm.register_module_forward_pre_hook(lambda mod, args: log.append(("gpre", type(mod).__name__))),
            mm.register_module_forward_hook(lambda mod, args, out: log.append(("gpost", type(mod).__name__))),
            m.register_forward_pre_hook(lambda mod, args: log.append(("pre1", len(args)))),
            m.register_forward_pre_hook(lambda mod, args, kw: log.append(("pre_kw", sorted(kw))), with_kwargs=True),
            m.register_forward_pre_hook(lambda mod, args: log.append(("pre0",)), prepend=True),
            m.register_forward_hook(lambda mod, args, out: log.append(("post1", tuple(out.shape)))),
            m.register_forward_hook(lambda mod, args, kw, out: log.append(("post_kw", sorted(kw))),
                                    with_kwargs=True, prepend=True),
        ]
        try:
            m(lib.ones(2, 3))
        finally:
            for h in handles:
                h.remove()
        m(lib.ones(2, 3))  # removed: nothing more is logged
        logs.append(log)
    assert logs[0] == logs[1]


def test_forward_hook_replacements_match_torch(torch):
    outs = []
    for lib in (torch, ts):
        m = lib.nn.Linear(2, 2)
        with lib.no_grad():
            m.weight.copy_(lib.tensor([[1.0, 2.0], [3.0, 4.0]]))
            m.bias.zero_()
        m.register_forward_pre_hook(lambda mod, args: args[0] * 10)  # a single value: wrapped in a tuple
        m.register_forward_hook(lambda mod, args, out: out + 1)
        outs.append(np_of(m(lib.ones(1, 2))))
        h = m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 0,), kwargs), with_kwargs=True)
        outs.append(np_of(m(lib.ones(1, 2))))
        h.remove()
        m.register_forward_pre_hook(lambda mod, args, kwargs: 5, with_kwargs=True)
        with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple of"):
            m(lib.ones(1, 2))
    np.testing.assert_allclose(outs[0], outs[2])
    np.testing.assert_allclose(outs[1], outs[3])
    np.testing.assert_allclose(outs[2], [[31.0, 71.0]])


def test_always_call_hooks_match_torch(torch):
    logs = []
    for lib in (torch, ts):
        log = []

        class Boom(lib.nn.Module):
            def forward(self, x):
                raise ValueError("boom")

        m = Boom()
        m.register_forward_hook(lambda mod, args, out: log.append(("always", out)), always_call=True)
        m.register_forward_hook(lambda mod, args, out: log.append(("normal", out)))
        m.register_forward_hook(lambda mod, args, kw, out: log.append(("always_kw", out)), with_kwargs=True,
                                always_call=True)

        def bad(mod, args, out):
            raise KeyError("hook")

        m.register_forward_hook(bad, always_call=True)
        with pytest.raises(ValueError, match="boom"), pytest.warns(UserWarning, match="always_call=True"):
            m(lib.ones(1))
        logs.append(log)
    assert logs[0] == logs[1] == [("always", None), ("always_kw", None)]


def test_always_call_hook_runs_once_when_a_later_hook_raises():
    log = []
    m = nn.Identity()
    m.register_forward_hook(lambda mod, args, out: log.append("always"), always_call=True)

    def bad(mod, args, out):
        raise KeyError("second")

    m.register_forward_hook(bad)
    with pytest.raises(KeyError):
        m(ts.ones(1))
    assert log == ["always"]


# ---------------------------------------------------------------- state dict hooks and loading
def hooked_state_dict_log(lib):
    log = []
    m = mlp(lib)
    m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("pre", prefix, keep_vars)))
    m[0].register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("pre0", prefix, keep_vars)))

    def post(mod, sd, prefix, meta):
        log.append(("post", prefix, sorted(sd), meta))
        sd["extra"] = lib.zeros(1)

    m.register_state_dict_post_hook(post)
    m[2]._register_state_dict_hook(lambda mod, sd, prefix, meta: log.append(("post2", prefix, sorted(sd))))
    sd = m.state_dict()
    log.append(("keys", list(sd), dict(sd._metadata)))
    m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: sd)
    with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
        m.state_dict()
    return log


def test_state_dict_hooks_match_torch(torch):
    assert hooked_state_dict_log(torch) == hooked_state_dict_log(ts)


def test_private_state_dict_hook_may_replace_the_result(torch):
    for lib in (torch, ts):
        m = lib.nn.Linear(2, 2)
        m._register_state_dict_hook(lambda mod, sd, prefix, meta: OrderedDict(only=1))
        assert m.state_dict() == {"only": 1}

        def public(mod, sd, prefix, meta):
            pass

        m.register_state_dict_post_hook(public)
        with pytest.raises(RuntimeError, match="Cannot register the same function"):
            m._register_state_dict_hook(public)


def load_log(lib, sd_from, strict=True, post_clears=False):
    log = []
    m = mlp(lib)

    def pre(mod, sd, prefix, meta, strict, missing, unexpected, errors):
        log.append(("pre", type(mod).__name__, prefix, sorted(sd), strict))
        if "old_bias" in sd:  # a renamed entry, as checkpoint-upgrading hooks do
            sd[prefix + "0.bias"] = sd.pop("old_bias")

    def post(mod, keys):
        log.append(("post", type(mod).__name__, list(keys.missing_keys), list(keys.unexpected_keys)))
        if post_clears:
            keys.missing_keys.clear()
            keys.unexpected_keys.clear()

    m.register_load_state_dict_pre_hook(pre)
    m[0].register_load_state_dict_pre_hook(pre)
    m[0].register_load_state_dict_post_hook(post)
    m.register_load_state_dict_post_hook(post)
    try:
        result = m.load_state_dict(sd_from(lib), strict=strict)
        log.append(("result", list(result.missing_keys), list(result.unexpected_keys), repr(result)))
    except Exception as e:  # noqa: BLE001
        log.append(("error", type(e).__name__, str(e).replace("torch.Size", "tessera.Size")))
    return log


def sd_renamed(lib):
    return {"0.weight": lib.ones(4, 3), "old_bias": lib.zeros(4), "2.weight": lib.ones(2, 4),
            "2.bias": lib.zeros(2)}


def sd_bad(lib):
    return {"0.weight": lib.ones(4, 3), "2.weight": lib.ones(3, 4), "2.bias": lib.zeros(2), "9.weight": lib.ones(1),
            "junk": lib.ones(1)}


@pytest.mark.parametrize("case", [
    dict(sd_from=sd_renamed),
    dict(sd_from=sd_bad),
    dict(sd_from=sd_bad, strict=False),
    dict(sd_from=lambda lib: {k: v for k, v in sd_bad(lib).items() if k != "2.weight"}, strict=False),
    dict(sd_from=lambda lib: {k: v for k, v in sd_bad(lib).items() if k != "2.weight"}, post_clears=True),
])
def test_load_state_dict_hooks_and_errors_match_torch(torch, case):
    assert load_log(torch, **case) == load_log(ts, **case)


def test_load_state_dict_messages_match_torch(torch):
    msgs = []
    for lib in (torch, ts):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Linear(3, 1))
        with pytest.raises(RuntimeError) as e:
            m.load_state_dict({"0.weight": lib.ones(3, 3), "0.bias": lib.ones(3), "1.weight": lib.ones(1, 3),
                               "1.extra": lib.ones(1), "1.bias": "not a tensor"})
        msgs.append(str(e.value).replace("torch.Size", "tessera.Size").replace("torch.Tensor", "Tensor"))
        with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
            m.load_state_dict([1, 2])
        r = m.load_state_dict({}, strict=False)
        msgs.append(repr(r))
        r = m.load_state_dict(m.state_dict())
        msgs.append(repr(r))
    assert msgs[:3] == msgs[3:]
    assert "size mismatch for 0.weight" in msgs[3] and 'Unexpected key(s) in state_dict: "1.extra"' in msgs[3]


def test_load_post_hook_must_not_return():
    m = nn.Linear(2, 2)
    m.register_load_state_dict_post_hook(lambda mod, keys: keys)
    with pytest.raises(AssertionError, match="not expected to return new values"):
        m.load_state_dict(m.state_dict())


def test_load_state_dict_assign_takes_the_tensors():
    m = nn.Linear(2, 2)
    m.register_buffer("buf", ts.zeros(2))
    w, b, buf = ts.ones(2, 2), ts.zeros(2), ts.full((2,), 3.0)
    m.load_state_dict({"weight": w, "bias": b, "buf": buf}, assign=True)
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad
    assert m.buf is buf
    np.testing.assert_array_equal(m.weight.numpy(), np.ones((2, 2)))


def test_overridden_load_and_save_and_extra_state():
    class Custom(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.count = 0

        def get_extra_state(self):
            return {"count": self.count}

        def set_extra_state(self, state):
            self.count = state["count"]

        def _save_to_state_dict(self, destination, prefix, keep_vars):
            super()._save_to_state_dict(destination, prefix, keep_vars)
            destination[prefix + "note"] = "saved"

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                  error_msgs):
            state_dict.pop(prefix + "note", None)
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                          error_msgs)

    a = Custom()
    a.count = 5
    sd = a.state_dict()
    assert sd["_extra_state"] == {"count": 5} and sd["note"] == "saved"
    assert sd._metadata[""] == {"version": 1} and sd._metadata["lin"] == {"version": 1}
    b = Custom()
    assert repr(b.load_state_dict(sd)) == "<All keys matched successfully>"
    assert b.count == 5
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "_extra_state"'):
        b.load_state_dict({k: v for k, v in sd.items() if k != "_extra_state"})
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "_extra_state"'):
        nn.Linear(2, 2).load_state_dict({"weight": ts.ones(2, 2), "bias": ts.ones(2), "_extra_state": 1})


def test_old_scalar_checkpoints_load():
    m = nn.Module()
    m.register_buffer("step", ts.tensor(0.0))
    m.load_state_dict({"step": ts.tensor([4.0])})
    assert float(m.step) == 4.0


# ---------------------------------------------------------------- hooks without torch
def test_handles_remove_and_context_manager():
    m = nn.Identity()
    log = []
    with m.register_forward_hook(lambda mod, args, out: log.append("a")):
        m(ts.ones(1))
    m(ts.ones(1))
    h = m.register_forward_pre_hook(lambda mod, args: log.append("b"), with_kwargs=False)
    h.remove()
    h.remove()  # twice is fine
    m(ts.ones(1))
    assert log == ["a"]
    h = m.register_forward_hook(lambda mod, args, kw, out: None, with_kwargs=True, always_call=True)
    assert h.id in m._forward_hooks_with_kwargs and h.id in m._forward_hooks_always_called
    h.remove()
    assert not m._forward_hooks and not m._forward_hooks_with_kwargs and not m._forward_hooks_always_called


def test_global_hooks_run_first_and_for_every_module():
    log = []
    m = nn.Sequential(nn.Identity(), nn.Identity())
    m[0].register_forward_pre_hook(lambda mod, args: log.append("local0"))
    handles = [ts_module_mod.register_module_forward_pre_hook(lambda mod, args: log.append(type(mod).__name__)),
               ts_module_mod.register_module_forward_hook(lambda mod, args, kw, out: log.append(sorted(kw)),
                                                          with_kwargs=True)]
    try:
        m(ts.ones(1))
    finally:
        for h in handles:
            h.remove()
    assert log == ["Sequential", "Identity", "local0", [], "Identity", [], []]
    log.clear()
    m(ts.ones(1))
    assert log == ["local0"]


def test_global_full_backward_hooks():
    seen = []
    hs = [ts_module_mod.register_module_full_backward_pre_hook(lambda mod, go: seen.append(("pre", mod._get_name()))),
          ts_module_mod.register_module_full_backward_hook(lambda mod, gi, go: seen.append(("full", mod._get_name())))]
    try:
        m = nn.Linear(2, 2)
        m(ts.ones(1, 2, requires_grad=True)).sum().backward()
    finally:
        for h in hs:
            h.remove()
    assert seen == [("pre", "Linear"), ("full", "Linear")]


def test_backward_hook_errors():
    m = nn.Linear(2, 2)
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        m(ts.ones(1, 2, requires_grad=True)).sum().backward()
    m = nn.Linear(2, 2)
    m.register_full_backward_pre_hook(lambda mod, go: (go[0], go[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_output, got 2, but expected 1"):
        m(ts.ones(1, 2, requires_grad=True)).sum().backward()
    m = nn.Linear(2, 2)  # no input requires grad: the hook may only return Nones
    m.register_full_backward_hook(lambda mod, gi, go: (ts.ones(1, 2),))
    with pytest.raises(RuntimeError, match="no input requires gradient should always return None"), \
            pytest.warns(UserWarning, match="no inputs require gradients"):
        m(ts.ones(1, 2)).sum().backward()


def test_backward_hooks_not_called_without_grad_and_after_removal():
    calls = []
    m = nn.Linear(2, 2)
    h = m.register_full_backward_hook(lambda mod, gi, go: calls.append(1))
    with ts.no_grad():
        y = m(ts.ones(1, 2, requires_grad=True))
    assert not y.requires_grad
    x = ts.ones(1, 2, requires_grad=True)
    m(x).sum().backward()
    assert calls == [1]
    h.remove()
    m(x).sum().backward()
    assert calls == [1]


def test_backward_hook_on_a_module_used_twice_and_retained_graph():
    seen = []
    m = nn.Linear(2, 2)
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(np_of(go[0]).copy()))
    x = ts.ones(1, 2, requires_grad=True)
    loss = (m(x) * 2).sum() + (m(x) * 3).sum()
    loss.backward(retain_graph=True)
    assert sorted(float(s.sum()) for s in seen) == [4.0, 6.0]
    loss.backward()
    assert len(seen) == 4


def test_deprecated_backward_hook_runs_as_full_hook():
    seen = []
    m = nn.Linear(2, 2)
    with pytest.warns(FutureWarning, match="register_full_backward_hook"):
        m.register_backward_hook(lambda mod, gi, go: seen.append(len(gi)))
    m(ts.ones(1, 2, requires_grad=True)).sum().backward()
    assert seen == [1]


def test_registration_hooks():
    seen = []
    hs = [ts_module_mod.register_module_parameter_registration_hook(lambda m, n, p: seen.append(("param", n))),
          ts_module_mod.register_module_buffer_registration_hook(lambda m, n, b: seen.append(("buffer", n))),
          ts_module_mod.register_module_module_registration_hook(lambda m, n, s: seen.append(("module", n)))]
    try:
        m = nn.Module()
        m.w = nn.Parameter(ts.ones(1))
        m.register_buffer("b", ts.ones(1))
        m.sub = nn.Identity()
        m.add_module("other", nn.Identity())
    finally:
        for h in hs:
            h.remove()
    assert seen == [("param", "w"), ("buffer", "b"), ("module", "sub"), ("module", "other")]


def test_hooks_survive_deepcopy_and_pickle_of_old_modules():
    m = nn.Linear(2, 2)
    m.register_forward_hook(_double)
    c = copy.deepcopy(m)
    np.testing.assert_allclose(c(ts.ones(1, 2)).numpy(), m(ts.ones(1, 2)).numpy())
    p = pickle.loads(pickle.dumps(m))
    np.testing.assert_allclose(p(ts.ones(1, 2)).numpy(), m(ts.ones(1, 2)).numpy())
    # a module pickled before the hook tables existed gets empty ones
    state = m.__getstate__()
    for key in ("_forward_hooks", "_backward_hooks", "_state_dict_hooks", "_load_state_dict_post_hooks",
                "_forward_hooks_always_called", "_non_persistent_buffers_set"):
        del state[key]
    old = nn.Linear.__new__(nn.Linear)
    old.__setstate__(state)
    assert old(ts.ones(1, 2)).shape == (1, 2) and old.state_dict().keys() == m.state_dict().keys()


def _double(mod, args, out):
    return out * 2


# ---------------------------------------------------------------- the other Module methods
def test_submodule_parameter_buffer_lookup(torch):
    for lib in (torch, ts):
        m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2))
        assert m.get_submodule("1") is m[1] and m.get_parameter("0.weight") is m[0].weight
        assert m.get_buffer("1.running_mean") is m[1].running_mean
        errors = []
        for call in (lambda: m.get_submodule("0.nope"), lambda: m.get_parameter("1.running_mean"),
                     lambda: m.get_buffer("0.weight"), lambda: m.get_parameter("0.zzz"),
                     lambda: m.set_submodule("", lib.nn.Identity()), lambda: m.set_submodule("0", 3),
                     lambda: m.set_submodule("0.new", lib.nn.Identity(), strict=True)):
            with pytest.raises((AttributeError, ValueError)) as e:
                call()
            errors.append((type(e.value).__name__, str(e.value).split(",")[0]))
        m.set_submodule("0", lib.nn.Identity())
        assert type(m[0]).__name__ == "Identity"
        assert m.register_module("extra", lib.nn.ReLU()) is None and type(m.extra).__name__ == "ReLU"
        if lib is torch:
            torch_errors = errors
    assert [e[0] for e in errors] == [e[0] for e in torch_errors]
    assert [e[1] for e in errors] == [e[1] for e in torch_errors]


def test_to_empty_share_memory_and_recurse():
    m = nn.Sequential(nn.Linear(2, 3))
    w = m[0].weight
    assert m.share_memory() is m
    assert m.to_empty(device="cpu") is m
    assert m[0].weight is not w and m[0].weight.shape == (3, 2) and isinstance(m[0].weight, nn.Parameter)
    w = m[0].weight
    m.to_empty(device="cpu", recurse=False)
    assert m[0].weight is w


def test_named_modules_remove_duplicate_zero_grad_requires_grad():
    shared = nn.Linear(2, 2)
    m = nn.Sequential(shared, shared)
    assert len(list(m.named_modules())) == 2
    assert [n for n, _ in m.named_modules(remove_duplicate=False)] == ["", "0", "1"]
    m(ts.ones(1, 2)).sum().backward()
    m.zero_grad(set_to_none=False)
    assert float(shared.weight.grad.abs().sum()) == 0.0
    m.zero_grad()
    assert shared.weight.grad is None
    assert m.requires_grad_(False) is m and not shared.weight.requires_grad


# ---------------------------------------------------------------- Tensor type / new_*
def test_tensor_type_strings_match_torch(torch):
    for name in ("float32", "float64", "int64", "int32", "int16", "int8", "uint8", "bool", "float16"):
        a = torch.zeros(2, dtype=getattr(torch, name)).type()
        b = ts.zeros(2, dtype=getattr(ts, name)).type()
        assert a.replace("torch.", "tessera.") == b
        for target in ("torch.LongTensor", "torch.DoubleTensor", "torch.BoolTensor"):
            assert str(torch.zeros(2, dtype=getattr(torch, name)).type(target).dtype).replace("torch", "tessera") == \
                str(ts.zeros(2, dtype=getattr(ts, name)).type(target).dtype)
    z = ts.tensor([1 + 2j])
    assert z.type() == "tessera.ComplexFloatTensor"


def test_tensor_type_conversions():
    x = ts.ones(2, 3)
    assert x.type() == "tessera.FloatTensor"
    assert x.type(ts.float32) is x and x.type("torch.FloatTensor") is x
    assert x.type(ts.int64).dtype == ts.int64
    assert x.type("tessera.LongTensor").dtype == ts.int64 and x.type(ts.LongTensor).dtype == ts.int64
    assert x.type_as(ts.tensor([1], dtype=ts.int16)).dtype == ts.int16
    with pytest.raises(ValueError, match="invalid type 'torch.Foo'"):
        x.type("torch.Foo")
    with pytest.raises(TypeError, match="expected a dtype or a tensor type name"):
        x.type(3)


def test_new_factories_match_torch(torch):
    for lib in (torch, ts):
        x = lib.ones(2, 3, dtype=lib.float64)
        for t in (x.new_zeros(2, 2), x.new_zeros((2, 2)), x.new_ones([4]), x.new_empty(3, 1),
                  x.new_full((2,), 7.0), x.new_tensor([1, 2])):
            assert t.dtype == lib.float64
        assert x.new_zeros(2, dtype=lib.int32).dtype == lib.int32
        assert x.new_ones(2, requires_grad=True).requires_grad
        assert x.new_full((1,), 2.0, requires_grad=True).requires_grad
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch recommends clone().detach()
            src = lib.ones(2, requires_grad=True)
            c = x.new_tensor(src)
        assert c is not src and not c.requires_grad and c.dtype == lib.float64
        np.testing.assert_array_equal(np_of(x.new_full((2,), 7.0)), [7.0, 7.0])
