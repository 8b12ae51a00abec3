"""vmap's batching rules over every operator of the every-operator sweep (op_samples.py).

For each overload and each of its (non-error) samples, a batch of B=3 different samples: the
sample itself, its floating (and complex) tensors scaled by 1.25 (integer and bool tensors
copied), and every tensor's values rolled by one place (a roll keeps a value set: indices in
range, distinct values, positive values); where the loop rejects the rolled sample or gives it
another shape, scaled by 0.75 instead (integers copied). The operator runs under ts.vmap and
its results (and every argument it writes) are compared with the oracle: the same overload
called on each sample in a Python loop, stacked. Factories (no tensor argument) run inside a
function of a batched input and give their result expanded. Three in_dims patterns:

  all    every tensor argument batched at dim 0;
  first  only the first tensor argument batched (the others shared by the batch);
  last   every tensor argument batched at its last dim (in_dims=-1).

In-place overloads (add_.Tensor, ...) write into their batched self, which is compared too;
out= overloads are left out. Random operators are checked separately (randomness="error" raises,
"different"/"same" give the shapes and draws they should), as are data-dependent ones (they
raise), nested vmap (against the double loop), the batching-rule coverage, and a subset against
torch.func.vmap when PyTorch is importable.

Overloads whose batching rule is not written yet run through the for-loop fallback, which warns
"There is a performance drop ..."; that is correct, so the warning is filtered here."""

import numpy as np
import pytest
from conftest import to_np
from op_samples import View, all_overloads, entry_for, variant_of

import tessera as ts
from tessera._functorch.vmap import ensure_plugin
from tessera.utils._pytree import tree_flatten

B = 3

# Overloads whose vmap result is wrong (or raises where the loop does not): strict xfail, so a
# fix turns them into failures to remove from here. A key "name[mode]" marks one in_dims mode.
# In the repros: A = ts.ops.aten, x = ts.arange(6.).reshape(2, 3).
KNOWN_FAILING = {
    "_rnn_layer_backward[last]": "nan/garbage: the CPU kernel reads a non-contiguous uint8 workspace as if it were "
                                 "contiguous, outside vmap too: pass ts.stack([w, w, w], -1).select(-1, 1) for "
                                 "the workspace w of op_samples' first _rnn_layer_backward sample; every result "
                                 "differs",
    "cat": "a legacy-empty [0] sample is not skipped (torch skips it, as cat does outside vmap): ts.vmap(lambda a, "
           "b: A.cat([a, b]))(ts.zeros(2, 0), ts.ones(2, 2, 3)) raises ValueError 'expected tensors of 2 dimensions'",
    "histc": "decomposes through masked_select, which vmap rejects: ts.vmap(lambda a: A.histc(a, 3, 0, 6))(x) "
             "raises RuntimeError (torch runs it)",
    "linalg_qr": "mode 'r': ts.vmap(lambda a: A.linalg_qr(a, 'r'))(ts.tensor([[[1., 2], [3, 4], [5, 7]]] * 2)) "
                 "raises IndexError 'alias: a view of sizes [] ... reaches past its storage of 0 bytes'",
    "masked_scatter": "decomposes through masked_select: ts.vmap(lambda a: A.masked_scatter(a, m, s))(x) with "
                      "m = ts.tensor([True, False, True]), s = ts.ones(3) raises RuntimeError",
    "scatter_reduce.two[all]": "prod/amax/amin with a batched index go through masked_select: ts.vmap(lambda a, i: "
                          "A.scatter_reduce.two(a, 0, i, s, 'prod'))(x, ts.tensor([[0, 0], [1, 2]])) with "
                          "s = ts.ones(2) raises RuntimeError ('sum' is right)",
}
KNOWN_FAILING["scatter_reduce.two[last]"] = KNOWN_FAILING["scatter_reduce.two[all]"]

SKIP = {"empty.memory_format", "mean"}  # reached only by full name (see test_compile_every_operator)
# Data-dependent output shapes or host values: vmap raises (torch: "vmap: We do not support batching
# operators that can output dynamic shape" / ".item() on a Tensor being vmapped").
DATA_DEPENDENT = {"nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive", "_local_scalar_dense"}
# Checked by reconstruction (eigenvectors and singular vectors are unique up to sign), not random.
CHECKED_NOT_RANDOM = {"linalg_eigh", "linalg_eig", "linalg_svd"}
TOL = {"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2), "float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10),
       "complex64": (1e-5, 1e-5), "complex128": (1e-10, 1e-10)}
MODES = ("all", "first", "last")
# A batched tensor's strides are its storage's (as in torch): with the batch dim last, a sample's
# strides are not a fresh sample's.
# as_strided and view_as_complex read those strides (torch too), _fused_adam_ needs contiguous tensors.
LAYOUT_DEPENDENT = {"sym_stride.int", "sym_storage_offset", "as_strided", "view_as_complex", "_fused_adam_"}

pytestmark = pytest.mark.filterwarnings("ignore:.*There is a performance drop")


@pytest.fixture(scope="module", autouse=True)
def _plugin():
    ensure_plugin()


def _mat(v):
    if isinstance(v, View):
        return v.materialize()
    if isinstance(v, (list, tuple)):
        return type(v)(_mat(x) for x in v)
    return v


def _kind(overload):
    variant = variant_of(overload)
    return variant[0] if variant else "functional"


def _is_random(overload):
    entry = entry_for(overload)
    base = variant_of(overload)[1] if variant_of(overload) else overload
    return entry is not None and entry.random and base not in CHECKED_NOT_RANDOM


def _op(overload):
    name, _, over = overload.partition(".")
    return getattr(getattr(ts.ops.aten, name), over or "default")


def _tensors(v):
    if isinstance(v, ts.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    return []


# ---------------------------------------------------------------------------- batches
def _element(x, b, variant):
    """Batch element b of tensor x: b=0 x, b=1 x scaled by 1.25 (integers and bools: a copy),
    b=2 x's values rolled by one place ("roll") or scaled by 0.75 (integers: a copy) ("scale")."""
    if b == 0 or variant == "copy":
        return x.clone()
    floating = x.dtype.is_floating_point or x.dtype.is_complex
    if b == 1:
        return x * 1.25 if floating else x.clone()
    if variant == "roll" and x.numel() > 1:
        return ts.roll(x.reshape(-1), 1).reshape(list(x.shape)).clone()
    return x * 0.75 if floating else x.clone()


def _map_leaves(v, fn, counter):
    if isinstance(v, ts.Tensor):
        counter[0] += 1
        return fn(v, counter[0] - 1)
    if isinstance(v, (list, tuple)):
        return type(v)(_map_leaves(x, fn, counter) for x in v)
    return v


def _dims_of(v, fn, counter):
    """The in_dims subtree of an argument: fn(tensor, index) for each tensor leaf, None elsewhere."""
    if isinstance(v, ts.Tensor):
        counter[0] += 1
        return fn(v, counter[0] - 1)
    if isinstance(v, (list, tuple)) and _tensors(v):
        return type(v)(_dims_of(x, fn, counter) for x in v)
    return None


class Batch:
    """The arguments of B samples (`elements`), the batched arguments and their in_dims."""

    def __init__(self, args, mode, variant):
        self.mode = mode
        batched = lambda i: mode != "first" or i == 0  # noqa: E731
        self.elements = [_map_leaves(args, lambda x, i, b=b: _element(x, b, variant) if batched(i) else x, [0])
                         for b in range(B)]
        per_leaf = [_tensors(e) for e in self.elements]
        self.pos = lambda x: x.dim() if mode == "last" else 0  # noqa: E731

        def stack(x, i):
            if not batched(i):
                return x
            return ts.stack([p[i] for p in per_leaf], dim=self.pos(x))

        self.args = _map_leaves(args, stack, [0])
        counter = [0]
        self.in_dims = tuple(_dims_of(a, lambda x, i: (-1 if mode == "last" else 0) if batched(i) else None, counter)
                             for a in args)
        self.batched_leaves = [(x, batched(i)) for i, x in enumerate(_tensors(self.args))]

    def unbatch(self, x, i):
        """Batched leaf i of the arguments with its batch dim moved to the front."""
        return x.movedim(-1, 0) if self.mode == "last" else x


def _call(op, args, kwargs):
    try:
        return op(*args, **kwargs), None
    except Exception as e:  # noqa: BLE001 - the error is the result being compared
        return None, e


def _oracle(op, elements, nargs, keys):
    """The loop: each element's outputs, and its arguments after the call (written in place)."""
    outs = []
    for e in elements:
        e = _mat_clone(e)
        r, err = _call(op, e[:nargs], dict(zip(keys, e[nargs:])))
        if err is not None:
            return None, err
        outs.append((r, e))
    return outs, None


def _mat_clone(v):
    return _map_leaves(v, lambda x, i: x.clone(), [0])


def _same_shapes(outs):
    flats = [tree_flatten(o)[0] for o, _ in outs]
    first = flats[0]
    for f in flats[1:]:
        if len(f) != len(first):
            return False
        for a, b in zip(f, first):
            if isinstance(a, ts.Tensor) != isinstance(b, ts.Tensor):
                return False
            if isinstance(a, ts.Tensor) and (tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype):
                return False
    if all(not isinstance(a, ts.Tensor) for a in first):
        return all(tree_flatten(o)[0] == first for o, _ in outs)
    return all(isinstance(a, ts.Tensor) or a is None for a in first)


def _close(got, want, what, tol):
    assert isinstance(got, ts.Tensor), f"{what}: got {type(got)}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    g, w = to_np(got), to_np(want)
    if want.dtype.is_floating_point or want.dtype.is_complex:
        rtol, atol = tol.get(want.dtype.name, TOL.get(want.dtype.name, (0, 0)))
        kind = np.complex128 if want.dtype.is_complex else np.float64
        np.testing.assert_allclose(g.astype(kind), w.astype(kind), rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(g, w, err_msg=what)


def _check_factory(overload, op, args, kwargs):
    """A factory called under vmap (inside a function of a batched input) gives the loop's result,
    unbatched: out_dims=0 expands it to the batch."""
    entry = entry_for(overload)
    want, err = _call(op, args, kwargs)
    if err is not None or not isinstance(want, ts.Tensor):
        return False
    got = ts.vmap(lambda _: op(*args, **kwargs))(ts.zeros(B))
    assert tuple(got.shape) == (B,) + tuple(want.shape) and got.dtype == want.dtype, overload
    if not entry.uninitialised:
        _close(got, ts.stack([want] * B), overload, entry.tol)
    return True


def _refused(overload, mode, args):
    """The message where torch.func refuses to batch a sample (vmap then raises it too): batch
    norm in training with a batched input and running statistics, updated in place, that are not."""
    if overload in ("native_batch_norm", "_native_batch_norm_legit") and mode == "first" and args[5] is True \
            and args[3] is not None:
        return "running_mean or running_var, which will be updated in place, were not batched"
    return None


def check_sample(overload, args, kwargs, mode):
    """vmap of the overload over a batch built from one sample, against the loop. Returns False
    when no batch of this sample has a loop result to compare with (skipped), else True."""
    entry = entry_for(overload)
    op = _op(overload)
    keys = [k for k, v in kwargs.items()]
    flat = tuple(args) + tuple(kwargs[k] for k in keys)
    nargs = len(args)
    if not _tensors(flat):  # a factory: its result, unbatched, expanded to the batch
        return mode == "all" and _check_factory(overload, op, args, kwargs)
    if mode == "first" and len(_tensors(flat)) < 2:
        return False  # the same as "all"
    if mode == "last" and overload in LAYOUT_DEPENDENT:
        return False
    # A rolled matrix is no longer symmetric: checked overloads (eigh) take scaled copies only.
    for variant in ("roll", "scale") if entry.check is None else ("scale",):
        batch = Batch(flat, mode, variant)
        outs, err = _oracle(op, batch.elements, nargs, keys)
        if err is None and _same_shapes(outs):
            break
    else:
        return False

    def fn(*a):
        return op(*a[:nargs], **dict(zip(keys, a[nargs:])))

    where = f"{overload} [{mode}]"
    if all(not isinstance(o, ts.Tensor) for o in tree_flatten(outs[0][0])[0]):
        # sizes and strides (sym_size.int, ...): plain values, the same for every sample
        assert all(o == outs[0][0] for o, _ in outs), f"{where}: the loop's values differ: {[o for o, _ in outs]}"
        got = ts.vmap(fn, in_dims=batch.in_dims, out_dims=None)(*batch.args)
        assert got == outs[0][0], f"{where}: {got!r} under vmap, {outs[0][0]!r} in the loop"
        return True
    refused = _refused(overload, mode, args)
    if refused is not None:
        with pytest.raises(RuntimeError, match=refused):
            ts.vmap(fn, in_dims=batch.in_dims)(*batch.args)
        return True
    got = ts.vmap(fn, in_dims=batch.in_dims)(*batch.args)
    got_flat = tree_flatten(got)[0]
    want_flats = [tree_flatten(o)[0] for o, _ in outs]
    assert len(got_flat) == len(want_flats[0]), f"{where}: {len(got_flat)} outputs, loop {len(want_flats[0])}"
    if entry.uninitialised:
        for k, g in enumerate(got_flat):
            w = want_flats[0][k]
            assert tuple(g.shape) == (B,) + tuple(w.shape) and g.dtype == w.dtype, f"{where}: result {k}"
        return True
    if entry.check is not None:  # unique up to sign: each slice checked by reconstruction
        for b in range(B):
            entry.check(_mat_clone(batch.elements[b])[:nargs], [g[b] for g in got_flat])
        return True
    for k, g in enumerate(got_flat):
        if want_flats[0][k] is None:
            assert g is None, f"{where}: result {k}"
            continue
        want = ts.stack([w[k] for w in want_flats])
        _close(g, want, f"{where}: result {k}", entry.tol)
    # arguments written in place (and the ones that must not be)
    loop_args = [_tensors(e) for _, e in outs]
    for i, (x, batched) in enumerate(batch.batched_leaves):
        if not batched:
            continue
        want = ts.stack([la[i] for la in loop_args])
        _close(batch.unbatch(x, i), want, f"{where}: argument tensor {i} after the call", entry.tol)
    return True


def _cases():
    out = []
    for overload in all_overloads():
        if overload in SKIP or entry_for(overload) is None or _kind(overload) == "out":
            continue
        if overload in DATA_DEPENDENT or _is_random(overload):
            continue
        for mode in MODES:
            reason = KNOWN_FAILING.get(f"{overload}[{mode}]", KNOWN_FAILING.get(overload))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(overload, mode, id=f"{overload}-{mode}", marks=marks))
    return out


@pytest.mark.parametrize("overload,mode", _cases())
def test_vmap_matches_loop(overload, mode):
    entry = entry_for(overload)
    checked = 0
    for sample in entry.make():
        if sample.error is not None:
            continue
        args, kwargs = _mat(sample.args), {k: _mat(v) for k, v in sample.kwargs.items()}
        try:
            checked += check_sample(overload, args, kwargs, mode)
        except Exception as e:  # noqa: BLE001 - names the sample
            raise AssertionError(f"{overload} [{mode}], sample {sample!r}: {type(e).__name__}: {e}") from e
    if checked == 0:
        pytest.skip("no sample with a tensor argument to batch (or one the loop can batch)")


# ---------------------------------------------------------------------------- random operators
def _random_cases():
    out = []
    for overload in all_overloads():
        if overload in SKIP or entry_for(overload) is None or _kind(overload) == "out" or not _is_random(overload):
            continue
        for randomness in ("error", "different", "same"):
            reason = KNOWN_FAILING.get(f"{overload}[{randomness}]", KNOWN_FAILING.get(overload))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(overload, randomness, id=f"{overload}-{randomness}", marks=marks))
    return out


def _draws(overload, args):
    """False for a sample that draws nothing: dropout in eval (torch checks randomness only in training)."""
    return not (overload == "native_dropout" and len(args) > 2 and args[2] is False)


def _slice(result, b):
    return tuple(r[b] for r in result) if isinstance(result, (tuple, list)) else result[b]


@pytest.mark.parametrize("overload,randomness", _random_cases())
def test_random_operator(overload, randomness):
    """A batch of B identical samples: randomness="error" raises, "different" gives B draws that
    are not all equal (where two calls of the loop differ), "same" gives B equal draws; each
    draw passes the sample set's own check (range, distribution)."""
    entry = entry_for(overload)
    op = _op(overload)
    for sample in [s for s in entry.make() if s.error is None][:4]:
        args, kwargs = _mat(sample.args), {k: _mat(v) for k, v in sample.kwargs.items()}
        keys = list(kwargs)
        flat, nargs = tuple(args) + tuple(kwargs[k] for k in keys), len(args)
        if _tensors(flat):
            batch = Batch(flat, "all", "copy")

            def call(r):
                return ts.vmap(lambda *a: op(*a[:nargs], **dict(zip(keys, a[nargs:]))), in_dims=batch.in_dims,
                               randomness=r)(*_mat_clone(batch.args))
        else:
            def call(r):
                return ts.vmap(lambda _: op(*args, **kwargs), randomness=r)(ts.zeros(B))
        loop = [op(*_mat_clone(args), **_mat_clone(kwargs)) for _ in range(2)]
        loop_flat = [tree_flatten(r)[0] for r in loop]
        where = f"{overload} {sample!r} randomness={randomness}"
        if randomness == "error":
            if _draws(overload, args):
                with pytest.raises(RuntimeError, match="randomness"):
                    call("error")
            else:
                got = call("error")
                for g, w in zip(tree_flatten(got)[0], loop_flat[0]):
                    _close(g, ts.stack([w] * B), where, entry.tol)
            continue
        got = call(randomness)
        got_flat = tree_flatten(got)[0]
        assert len(got_flat) == len(loop_flat[0]), where
        for g, w in zip(got_flat, loop_flat[0]):
            assert tuple(g.shape) == (B,) + tuple(w.shape) and g.dtype == w.dtype, \
                f"{where}: {g.dtype}{list(g.shape)} under vmap, {w.dtype}{list(w.shape)} per sample"
        for b in range(B):
            entry.check(_mat_clone(args), _slice(got, b))
        slices = [[to_np(g[b]) for g in got_flat] for b in range(B)]
        equal = all(np.array_equal(sb[k], slices[0][k], equal_nan=True) for sb in slices[1:] for k in range(len(sb)))
        if randomness == "same":
            assert equal, f"{where}: the samples drew different values"
        elif sum(g[0].numel() for g in got_flat) >= 8 and \
                any(not np.array_equal(to_np(a), to_np(c), equal_nan=True) for a, c in zip(*loop_flat)):
            # B draws of 8 values or more, which two loop calls do not repeat: not all equal
            assert not equal, f"{where}: every sample drew the same values"


# ---------------------------------------------------------------------------- data-dependent operators
def _xfail(key):
    return [pytest.mark.xfail(strict=True, reason=KNOWN_FAILING[key])] if key in KNOWN_FAILING else []


@pytest.mark.parametrize("overload", [pytest.param(o, marks=_xfail(o)) for o in sorted(DATA_DEPENDENT)])
def test_data_dependent_operator_raises(overload):
    """Operators whose result's shape (or a host value) depends on the values raise under vmap,
    after the loop (each sample alone) has succeeded."""
    entry = entry_for(overload)
    op = _op(overload)
    sample = next(s for s in entry.make() if s.error is None and _tensors(list(s.args)))
    args, kwargs = _mat(sample.args), {k: _mat(v) for k, v in sample.kwargs.items()}
    batch = Batch(tuple(args), "all", "roll")
    for e in batch.elements:
        op(*_mat_clone(e), **kwargs)
    with pytest.raises(RuntimeError):
        ts.vmap(lambda *a: op(*a, **kwargs), in_dims=batch.in_dims)(*batch.args)


@pytest.mark.parametrize("call", [lambda x: x.sum().item(), lambda x: x.tolist(), lambda x: float(x.sum()),
                                  lambda x: ts.nonzero(x), lambda x: x[x > 0]],
                         ids=["item", "tolist", "float", "nonzero", "mask_index"])
def test_host_values_raise(call):
    x = ts.tensor(np.arange(12.0).reshape(3, 4) - 5)
    call(x[0])
    with pytest.raises(RuntimeError):
        ts.vmap(call)(x)


# ---------------------------------------------------------------------------- nested vmap
NESTED = ["add.Tensor", "mul.Tensor", "sum.dim_IntList", "mean.dim", "softmax.int", "matmul", "mm", "bmm",
          "transpose.int", "permute", "reshape", "view", "expand", "cat", "stack", "index_select", "gather",
          "where.self", "native_layer_norm", "convolution", "max_pool2d_with_indices"]


def _nested_element(x, i, j, role):
    """Element (i, j) of a [2, 3] batch: a leaf varying with both indices, the outer (i) only
    or the inner (j) only; floating values scaled, integers and bools copied."""
    k = {"both": 3 * i + j, "outer": i, "inner": j}[role]
    return x * (1 + k / 8) if x.dtype.is_floating_point and k else x.clone()


@pytest.mark.parametrize("split", [False, True], ids=["both_levels", "split_levels"])
@pytest.mark.parametrize("overload", NESTED)
def test_nested_vmap_matches_double_loop(overload, split):
    """vmap(vmap(op)) over a [2, 3] batch against the double loop. both_levels: every tensor
    batched at both levels; split_levels: the first tensor at the outer level only, the others
    at the inner level only (result (i, j) = op(first_i, others_j))."""
    entry = entry_for(overload)
    op = _op(overload)
    checked = 0
    for sample in [s for s in entry.make() if s.error is None][:3]:
        args, kwargs = _mat(sample.args), {k: _mat(v) for k, v in sample.kwargs.items()}
        n = len(_tensors(list(args)))
        if split and n < 2:
            continue
        role = lambda t: "both" if not split else ("outer" if t == 0 else "inner")  # noqa: E731
        try:
            loop = [[op(*_map_leaves(args, lambda x, t, i=i, j=j: _nested_element(x, i, j, role(t)), [0]), **kwargs)
                     for j in range(3)] for i in range(2)]
        except Exception:  # noqa: BLE001 - a sample the scaled batch makes invalid
            continue

        def stacked(x, t):
            r = role(t)
            if r == "both":
                return ts.stack([ts.stack([_nested_element(x, i, j, r) for j in range(3)]) for i in range(2)])
            return ts.stack([_nested_element(x, k, k, r) for k in range(2 if r == "outer" else 3)])

        batched = _map_leaves(args, stacked, [0])
        outer_count, inner_count = [0], [0]
        outer = tuple(_dims_of(a, lambda x, t: None if role(t) == "inner" else 0, outer_count) for a in args)
        inner = tuple(_dims_of(a, lambda x, t: None if role(t) == "outer" else 0, inner_count) for a in args)
        fn = ts.vmap(ts.vmap(lambda *a: op(*a, **kwargs), in_dims=inner), in_dims=outer)
        got = tree_flatten(fn(*batched))[0]
        per = [[tree_flatten(loop[i][j])[0] for j in range(3)] for i in range(2)]
        assert len(got) == len(per[0][0]), overload
        for k, g in enumerate(got):
            w = ts.stack([ts.stack([per[i][j][k] for j in range(3)]) for i in range(2)])
            _close(g, w, f"{overload} {sample!r} result {k}", entry.tol)
        checked += 1
    if split and not checked and all(len(_tensors(list(s.args))) < 2 for s in entry.make()):
        pytest.skip("one tensor argument: nothing to split between the levels")
    assert checked, f"{overload}: no sample checked"


# ---------------------------------------------------------------------------- coverage
def test_batching_rule_coverage():
    """The share of primitive operators with a batching rule (the others take the for-loop fallback)."""
    ensure_plugin()
    covered, total, missing = (ts._C.call_op("vmap::coverage", (), {}).split(" ", 2) + [""])[:3]
    covered, total = int(covered), int(total)
    print(f"\nvmap batching-rule coverage: {covered}/{total} = {covered / total:.1%} of the primitive operators; "
          f"without a rule: {missing}")
    assert 0 < covered <= total
    assert covered / total >= 0.95, f"{covered}/{total}: missing {missing}"


# ---------------------------------------------------------------------------- against torch.func.vmap
def _rng_array(rng, shape):
    return np.round(rng.uniform(-2, 2, shape) * 8) / 8


def _torch_cases():
    """(name, overload, arguments as NumPy arrays or plain values, in_dims): the same aten
    overload under tessera's vmap and torch.func.vmap (tessera's convolution has the arguments
    of torch's conv2d)."""
    rng = np.random.default_rng(7)
    a = lambda *s: _rng_array(rng, s).astype(np.float32)  # noqa: E731
    i64 = lambda *v: np.asarray(v, dtype=np.int64)  # noqa: E731
    return [
        ("matmul", "matmul", (a(3, 2, 4), a(4, 5)), (0, None)),
        ("matmul_both", "matmul", (a(3, 2, 4), a(3, 4, 5)), (0, 0)),
        ("matmul_vec_dim1", "matmul", (a(4, 3), a(3, 4, 2)), (1, 0)),
        ("matmul_last", "matmul", (a(2, 4, 3), a(4, 5, 3)), (-1, -1)),
        ("conv2d", "convolution", (a(3, 2, 3, 6, 6), a(4, 3, 3, 3), a(4), [1, 1], [1, 1], [1, 1], 1),
         (0, None, None, None, None, None, None)),
        ("conv2d_weight_batched", "convolution",
         (a(2, 3, 6, 6), a(3, 4, 3, 3, 3), a(3, 4), [2, 1], [0, 1], [1, 1], 1), (None, 0, 0, None, None, None, None)),
        ("conv2d_all_dim1", "convolution",
         (a(2, 3, 2, 5, 5), a(4, 3, 1, 3, 3), None, [1, 1], [0, 0], [1, 1], 2), (1, 1, None, None, None, None, None)),
        ("softmax", "softmax.int", (a(3, 4, 5), 1), (0, None)),
        ("softmax_last", "softmax.int", (a(4, 5, 3), -1), (-1, None)),
        ("sum", "sum.dim_IntList", (a(3, 4, 5), [0], True), (0, None, None)),
        ("sum_dim1", "sum.dim_IntList", (a(4, 3, 5), [-1]), (1, None)),
        ("layer_norm", "native_layer_norm", (a(3, 2, 5), [5], a(5), a(5), 1e-5), (0, None, None, None, None)),
        ("layer_norm_affine_batched", "native_layer_norm", (a(3, 2, 5), [5], a(3, 5), a(5, 3), 1e-5),
         (0, None, 0, 1, None)),
        ("index_select", "index_select", (a(3, 5, 4), 0, i64([4, 0, 2], [1, 1, 3], [0, 2, 4])), (0, None, 0)),
        ("index_select_shared_index", "index_select", (a(5, 3, 4), 1, i64(3, 0)), (1, None, None)),
        ("gather", "gather", (a(3, 4, 5), 1, rng.integers(0, 5, (3, 4, 2))), (0, None, 0)),
        ("index_tensor", "index.Tensor", (a(3, 5, 4), [rng.integers(0, 5, (3, 2, 2))]), (0, [0])),
        ("scatter_src", "scatter.src", (a(3, 4, 5), 1, rng.integers(0, 5, (3, 4, 2)), a(3, 4, 2)), (0, None, 0, 0)),
        ("index_add", "index_add", (a(3, 5, 4), 0, i64([4, 0], [1, 1], [0, 2]), a(3, 2, 4)), (0, None, 0, 0)),
        ("embedding", "embedding", (a(6, 3), rng.integers(0, 6, (3, 4))), (None, 0)),
    ]


@pytest.mark.torch
@pytest.mark.parametrize("case", _torch_cases(), ids=lambda c: c[0])
def test_matches_torch_func_vmap(case):
    import torch
    from torch.func import vmap as torch_vmap

    name, overload, values, in_dims = case
    base, _, over = overload.partition(".")

    def convert(v, to_tensor):
        if isinstance(v, np.ndarray):
            return to_tensor(v)
        if isinstance(v, list) and v and isinstance(v[0], np.ndarray):
            return [to_tensor(x) for x in v]
        return v

    ts_args = [convert(v, lambda x: ts.tensor(x.tolist(), dtype=ts.int64 if x.dtype == np.int64 else ts.float32))
               for v in values]
    torch_args = [convert(v, torch.from_numpy) for v in values]
    ts_op = _op(overload)
    torch_op = getattr(getattr(torch.ops.aten, "conv2d" if base == "convolution" else base), over or "default")
    got = tree_flatten(ts.vmap(ts_op, in_dims=in_dims)(*ts_args))[0]
    want = torch_vmap(torch_op, in_dims=in_dims)(*torch_args)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    assert len(got) == len(want), name
    for k, (g, w) in enumerate(zip(got, want)):
        w = w.detach().numpy()
        assert tuple(g.shape) == w.shape, f"{name} result {k}: {tuple(g.shape)} vs torch {w.shape}"
        np.testing.assert_allclose(to_np(g), w, rtol=1e-5, atol=1e-5, err_msg=f"{name} result {k}")
