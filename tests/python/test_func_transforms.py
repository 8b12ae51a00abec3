"""tessera.func (vmap, grad, grad_and_value, vjp, jacrev, jacfwd, hessian, jvp, linearize,
functional_call, stack_module_state) checked against torch.func on the same inputs.

Every test also checks an oracle that needs no PyTorch: a Python loop over the batch (vmap), finite
differences in float64 NumPy (the autodiff transforms), or a loop of ordinary autograd / of the
models (per-sample gradients, ensembling). The torch.func comparisons run when PyTorch is importable.
Functions under test are written once against a module `M` (numpy, tessera or torch) so that the
same code runs on all three."""
import numpy as np
import pytest

import tessera as ts
import tessera.func as tsf
from conftest import HAVE_TORCH, to_np

if HAVE_TORCH:
    import torch
    import torch.func as tf
else:  # pragma: no cover
    torch = tf = None

RTOL, ATOL = 1e-4, 1e-5  # tessera vs torch, both float32
FD_RTOL, FD_ATOL = 2e-3, 2e-4  # float32 results vs float64 finite differences


# ---------------------------------------------------------------------------- helpers
def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def T(a):
    return ts.from_numpy(np.array(a, dtype=np.float32, copy=True))


def P(a):
    return torch.from_numpy(np.array(a, dtype=np.float32, copy=True))


def tree_map_np(fn, tree):
    if isinstance(tree, dict):
        return {k: tree_map_np(fn, v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(tree_map_np(fn, v) for v in tree)
    if tree is None:
        return None
    return fn(tree)


def _leaves(tree, path=""):
    if isinstance(tree, dict):
        out = []
        for k in sorted(tree):
            out += _leaves(tree[k], f"{path}[{k!r}]")
        return out or [(path + "{}", None)]
    if isinstance(tree, (tuple, list)):
        out = []
        for i, v in enumerate(tree):
            out += _leaves(v, f"{path}[{i}]")
        return out or [(path + "()", None)]
    return [(path, tree)]


def as_np(x):
    if isinstance(x, ts.Tensor):
        return to_np(x.detach()).astype(np.float64)
    if HAVE_TORCH and isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def assert_tree_close(got, expected, rtol=RTOL, atol=ATOL):
    """Same pytree structure (dict keys, sequence lengths), every tessera leaf a Tensor with the
    expected shape and values."""
    g, e = _leaves(got), _leaves(expected)
    assert [p for p, _ in g] == [p for p, _ in e], ([p for p, _ in g], [p for p, _ in e])
    for (path, a), (_, b) in zip(g, e):
        if b is None:
            assert a is None, path
            continue
        assert isinstance(a, ts.Tensor), (path, type(a))
        a, b = as_np(a), as_np(b)
        assert a.shape == b.shape, (path, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=path)


def to_ts(tree):
    return tree_map_np(T, tree)


def to_torch(tree):
    return tree_map_np(P, tree)


def to_f64(tree):
    return tree_map_np(lambda a: np.array(a, dtype=np.float64), tree)


def fd_jac(f, args, argnum, eps=1e-6):
    """d f(*args) / d args[argnum] by central differences in float64: shape out.shape + in.shape.
    `f` takes and returns NumPy arrays; args[argnum] an array."""
    args = list(to_f64(args))
    x = args[argnum]
    out0 = np.asarray(f(*args))
    jac = np.zeros(out0.shape + x.shape)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        args[argnum] = xp
        fp = np.asarray(f(*args))
        args[argnum] = xm
        fm = np.asarray(f(*args))
        jac[(Ellipsis,) + idx] = (fp - fm) / (2 * eps)
    args[argnum] = x
    return jac


def fd_hessian(f, x, eps=1e-4):
    """The Hessian of scalar f at x (float64 second differences)."""
    x = np.array(x, dtype=np.float64)
    n = x.size
    flat = x.reshape(-1)
    H = np.zeros((n, n))

    def at(d):
        return float(f((flat + d).reshape(x.shape)))

    for i in range(n):
        for j in range(n):
            ei, ej = np.zeros(n), np.zeros(n)
            ei[i] = eps
            ej[j] = eps
            H[i, j] = (at(ei + ej) - at(ei - ej) - at(-ei + ej) + at(-ei - ej)) / (4 * eps * eps)
    return H.reshape(x.shape + x.shape)


def bcast_dims(dims, tree):
    """in_dims/out_dims broadcast to one entry per leaf of `tree` (same nesting)."""
    if dims is None or isinstance(dims, int):
        return tree_map_np(lambda _: dims, tree)
    if isinstance(tree, dict):
        return {k: bcast_dims(dims[k], v) for k, v in tree.items()}
    assert isinstance(tree, (tuple, list)) and len(tree) == len(dims)
    return type(tree)(bcast_dims(d, v) for d, v in zip(dims, tree))


def _zip_leaves(a, b):
    if isinstance(a, dict):
        return [p for k in a for p in _zip_leaves(a[k], b[k])]
    if isinstance(a, (tuple, list)):
        return [p for x, y in zip(a, b) for p in _zip_leaves(x, y)]
    return [(a, b)]


def _rebuild(tree, it):
    if isinstance(tree, dict):
        return {k: _rebuild(v, it) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_rebuild(v, it) for v in tree)
    return next(it)


def loop_vmap(fn, in_dims, out_dims, args, batch, **kwargs):
    """The vmap oracle: fn (on tessera tensors) called once per batch element on NumPy slices, the
    results stacked along out_dims with NumPy."""
    dims = bcast_dims(in_dims, tuple(args))
    results = []
    for b in range(batch):
        sliced = _rebuild(args, iter([a if d is None else np.take(a, b, axis=d)
                                      for a, d in _zip_leaves(tuple(args), dims)]))
        results.append(tree_map_np(as_np, fn(*to_ts(sliced), **kwargs)))
    odims = bcast_dims(out_dims, results[0])
    leaves = [[pair[0] for pair in _zip_leaves(r, odims)] for r in results]
    dims_flat = [pair[1] for pair in _zip_leaves(results[0], odims)]
    stacked = [leaves[0][i] if d is None else np.stack([lv[i] for lv in leaves], axis=d)
               for i, d in enumerate(dims_flat)]
    return _rebuild(results[0], iter(stacked))


# ---------------------------------------------------------------------------- vmap: in_dims / out_dims
# (name, function of module M, input arrays, in_dims, out_dims)
VMAP_CASES = [
    ("pointwise", lambda M: lambda x, y: x * y + M.sin(x), (rand(4, 3), rand(4, 3, seed=1)), 0, 0),
    ("in_dims_1_none", lambda M: lambda x, y: M.exp(x) - y, (rand(3, 5), rand(3, seed=1)), (1, None), 0),
    ("in_dims_negative", lambda M: lambda x, y: (x * y).sum(), (rand(4, 5), rand(5, 4, seed=1)), (-1, 0), 0),
    ("in_dims_both_negative", lambda M: lambda x: M.tanh(x) * 2, (rand(2, 3, 4),), -2, 0),
    ("nested_tuple_input", lambda M: lambda xy, z: xy[0] * z + xy[1],
     ((rand(4, 3), rand(3, 4, seed=1)), rand(3, seed=2)), ((0, 1), None), 0),
    ("nested_tuple_int_subtree", lambda M: lambda xy, z: xy[0] @ z + xy[1].sum(),
     ((rand(4, 2, 3), rand(4, 2, seed=1)), rand(3, seed=2)), (0, None), 0),
    ("dict_input", lambda M: lambda d: d["a"] * d["b"].sum(),
     ({"a": rand(5, 3), "b": rand(2, 5, seed=1)},), ({"a": 0, "b": 1},), 0),
    ("dict_input_int", lambda M: lambda d: d["a"] + d["b"], ({"a": rand(5, 3), "b": rand(5, 3, seed=1)},), 0, 0),
    ("out_dims_1", lambda M: lambda x: x[:, None] * x, (rand(4, 3),), 0, 1),
    ("out_dims_negative", lambda M: lambda x: M.cos(x), (rand(4, 3, 2),), 0, -1),
    ("out_dims_tuple", lambda M: lambda x: (x * 2, x.sum(0)), (rand(4, 3, 2),), 0, (1, 0)),
    ("out_dims_nested", lambda M: lambda x: (x, (x.sum(), x * x)), (rand(3, 4),), 1, (0, (0, 1))),
    ("pytree_output", lambda M: lambda x, y: {"s": x + y, "p": (x * y, M.sin(y))},
     (rand(3, 4), rand(3, 4, seed=1)), 0, 0),
    ("matmul_unbatched_weight", lambda M: lambda x, w: x @ w, (rand(5, 3, 4), rand(4, 2, seed=1)), (0, None), 0),
    ("matmul_weight_dim2", lambda M: lambda x, w: x @ w, (rand(3, 4), rand(4, 2, 6, seed=1)), (None, 2), 0),
    ("reduction_in_dim1", lambda M: lambda x: x.sum(0) * x.mean(), (rand(3, 4, 5),), 1, 0),
]


@pytest.mark.parametrize("name,make,args,in_dims,out_dims", VMAP_CASES, ids=[c[0] for c in VMAP_CASES])
def test_vmap_in_out_dims(name, make, args, in_dims, out_dims):
    dims = bcast_dims(in_dims, tuple(args))
    batch = next(a.shape[d] for a, d in _zip_leaves(tuple(args), dims) if d is not None)
    got = tsf.vmap(make(ts), in_dims=in_dims, out_dims=out_dims)(*to_ts(args))
    assert_tree_close(got, loop_vmap(make(ts), in_dims, out_dims, args, batch))
    if HAVE_TORCH:
        assert_tree_close(got, tf.vmap(make(torch), in_dims=in_dims, out_dims=out_dims)(*to_torch(args)))


def test_ts_vmap_is_func_vmap():
    x = rand(3, 4)
    assert_tree_close(ts.vmap(lambda a: a.sum())(T(x)), x.sum(1))


def test_vmap_nested_two_levels_different_in_dims():
    x, y = rand(3, 5, 4), rand(4, 5, seed=1)  # outer maps x dim 0; inner maps x dim 1 (was 2) and y dim 0

    def make(M):
        return lambda a, b: (a * b).sum()

    def nested(F, M):
        return F.vmap(F.vmap(make(M), in_dims=(1, 0)), in_dims=(0, None))

    got = nested(tsf, ts)(T(x), T(y))
    assert_tree_close(got, np.einsum("ikj,jk->ij", x.astype(np.float64), y), rtol=1e-4, atol=1e-5)
    if HAVE_TORCH:
        assert_tree_close(got, nested(tf, torch)(P(x), P(y)))


def test_vmap_nested_three_levels():
    A, B = rand(2, 5, 3), rand(4, 5, seed=1)

    def nested(F, M):
        dot = lambda a, b: (a * b).sum()  # noqa: E731
        inner = F.vmap(dot, in_dims=(0, None))  # A(m, n), b(n) -> (m)
        middle = F.vmap(inner, in_dims=(None, 0))  # A(m, n), B(p, n) -> (p, m)
        return F.vmap(middle, in_dims=(2, None), out_dims=2)  # A(m, n, q) -> (p, m, q)

    got = nested(tsf, ts)(T(A), T(B))
    assert_tree_close(got, np.einsum("mnq,pn->pmq", A.astype(np.float64), B))
    if HAVE_TORCH:
        assert_tree_close(got, nested(tf, torch)(P(A), P(B)))


def test_vmap_nested_with_unbatched_inner_and_matmul():
    x, w = rand(2, 3, 4), rand(4, 5, seed=1)

    def nested(F, M):
        return F.vmap(F.vmap(lambda r, w: M.tanh(r @ w), in_dims=(0, None)), in_dims=(0, None))

    got = nested(tsf, ts)(T(x), T(w))
    assert_tree_close(got, np.tanh(x.astype(np.float64) @ w))
    if HAVE_TORCH:
        assert_tree_close(got, nested(tf, torch)(P(x), P(w)))


def test_vmap_out_dims_dict():
    x, y = rand(3, 7, 2), rand(7, seed=1)

    def make(M):
        return lambda a, b: {"m": a * b, "s": (a.sum(), M.sin(b))}

    in_dims, out_dims = (1, 0), {"m": 1, "s": (0, 0)}
    got = tsf.vmap(make(ts), in_dims, out_dims)(T(x), T(y))
    assert_tree_close(got, loop_vmap(make(ts), in_dims, out_dims, (x, y), 7))
    if HAVE_TORCH:
        assert_tree_close(got, tf.vmap(make(torch), in_dims, out_dims)(P(x), P(y)))


# ---------------------------------------------------------------------------- chunk_size
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 20])
def test_vmap_chunk_size_equals_unchunked(chunk):
    x, y = rand(3, 7, 2), rand(7, seed=1)

    def make(M):
        return lambda a, b: (a * b, {"s": a.sum(), "t": M.sin(b)})

    in_dims, out_dims = (1, 0), (1, 0)
    full = tsf.vmap(make(ts), in_dims, out_dims)(T(x), T(y))
    got = tsf.vmap(make(ts), in_dims, out_dims, chunk_size=chunk)(T(x), T(y))
    assert_tree_close(got, full, rtol=1e-6, atol=1e-7)  # a one-element chunk may take a scalar path (1 ulp)
    assert_tree_close(got, loop_vmap(make(ts), in_dims, out_dims, (x, y), 7))
    if HAVE_TORCH:
        assert_tree_close(got, tf.vmap(make(torch), in_dims, out_dims, chunk_size=chunk)(P(x), P(y)))


# ---------------------------------------------------------------------------- randomness
def _rows_distinct(a):
    return all(not np.allclose(a[i], a[j]) for i in range(len(a)) for j in range(i + 1, len(a)))


def _rows_equal(a):
    return all(np.array_equal(a[0], a[i]) for i in range(len(a)))


RANDOM_FUNCS = [
    ("rand", lambda M: lambda x: x + M.rand(40)),
    ("randn", lambda M: lambda x: x * 0 + M.randn(40)),
    ("rand_like", lambda M: lambda x: M.rand_like(x)),
    ("dropout", lambda M: lambda x: M.nn.functional.dropout(x, 0.5, training=True)),
]


@pytest.mark.parametrize("name,make", RANDOM_FUNCS, ids=[c[0] for c in RANDOM_FUNCS])
def test_vmap_randomness_different_and_same(name, make):
    x = np.ones((5, 40), np.float32)
    libs = [(tsf, ts, T)] + ([(tf, torch, P)] if HAVE_TORCH else [])
    for F, M, conv in libs:
        diff = as_np(F.vmap(make(M), randomness="different")(conv(x)))
        same = as_np(F.vmap(make(M), randomness="same")(conv(x)))
        assert diff.shape == same.shape == (5, 40), (M.__name__, diff.shape, same.shape)
        assert _rows_distinct(diff), (M.__name__, diff)
        assert _rows_equal(same), (M.__name__, same)


@pytest.mark.parametrize("name,make", RANDOM_FUNCS, ids=[c[0] for c in RANDOM_FUNCS])
def test_vmap_randomness_error(name, make):
    x = np.ones((5, 40), np.float32)
    with pytest.raises(RuntimeError, match="randomness error mode") as ts_err:
        tsf.vmap(make(ts))(T(x))
    if HAVE_TORCH:
        with pytest.raises(RuntimeError) as torch_err:
            tf.vmap(make(torch))(P(x))
        assert "randomness error mode" in str(torch_err.value) and "randomness error mode" in str(ts_err.value)


@pytest.mark.parametrize("randomness", [
    "different",
    pytest.param("same"),
])
def test_vmap_randomness_with_chunk_size(randomness):
    x = np.ones((6, 40), np.float32)
    libs = [(tsf, ts, T)] + ([(tf, torch, P)] if HAVE_TORCH else [])
    for F, M, conv in libs:
        got = as_np(F.vmap(lambda v: v * M.rand(40), randomness=randomness, chunk_size=2)(conv(x)))
        assert got.shape == (6, 40)
        assert (_rows_distinct if randomness == "different" else _rows_equal)(got), (M.__name__, got)


def test_vmap_randomness_same_matches_unbatched_draw_shape_and_differs_across_calls():
    x = ts.ones(4, 3)
    a = to_np(tsf.vmap(lambda v: v * ts.rand(3), randomness="same")(x))
    b = to_np(tsf.vmap(lambda v: v * ts.rand(3), randomness="same")(x))
    assert _rows_equal(a) and _rows_equal(b)
    assert not np.array_equal(a, b)  # the generator advances


def test_vmap_no_random_op_in_error_mode_is_fine():
    x = rand(3, 2)
    assert_tree_close(tsf.vmap(lambda v: v * 2, randomness="error")(T(x)), x * 2)


# ---------------------------------------------------------------------------- kwargs, constants, identity
def test_vmap_kwargs_pass_through_unbatched():
    x, bias = rand(4, 3), rand(4, 3, seed=1)

    def make(M):
        def f(v, scale=1.0, bias=None):
            return v * scale + bias  # bias (4, 3) is not mapped: it broadcasts against v (3,)
        return f

    got = tsf.vmap(make(ts))(T(x), scale=2.0, bias=T(bias))
    assert tuple(got.shape) == (4, 4, 3)  # bias was not mapped over
    assert_tree_close(got, np.stack([x[b] * 2.0 + bias for b in range(4)]))
    if HAVE_TORCH:
        assert_tree_close(got, tf.vmap(make(torch))(P(x), scale=2.0, bias=P(bias)))


def test_vmap_output_independent_of_input_is_expanded():
    x, c = rand(5, 2), rand(3, seed=1)

    def make(M, const):
        return lambda v: (const * 2, v.sum())

    got = tsf.vmap(make(ts, T(c)), out_dims=(1, 0))(T(x))
    assert_tree_close(got, (np.stack([c * 2] * 5, axis=1), x.sum(1)))
    if HAVE_TORCH:
        assert_tree_close(got, tf.vmap(make(torch, P(c)), out_dims=(1, 0))(P(x)))


def test_vmap_factory_without_tensor_arguments():
    x = rand(5, 2)
    ones = tsf.vmap(lambda v: (ts.ones(3), ts.zeros(2, 2) + 1))(T(x))
    assert_tree_close(ones, (np.ones((5, 3)), np.ones((5, 2, 2))))
    if HAVE_TORCH:
        assert_tree_close(ones, tf.vmap(lambda v: (torch.ones(3), torch.zeros(2, 2) + 1))(P(x)))


def test_vmap_out_dims_none_for_unbatched_output():
    x, c = rand(5, 2), rand(3, seed=1)
    got = tsf.vmap(lambda v, k: (v * 3, k + 1), in_dims=(0, None), out_dims=(0, None))(T(x), T(c))
    assert_tree_close(got, (x * 3, c + 1))
    if HAVE_TORCH:
        assert_tree_close(got, tf.vmap(lambda v, k: (v * 3, k + 1), in_dims=(0, None), out_dims=(0, None))(P(x), P(c)))


@pytest.mark.parametrize("in_dim,out_dim", [(0, 0), (1, 0), (1, 1), (2, -1), (-1, 1)])
def test_vmap_returns_batched_input_as_is(in_dim, out_dim):
    x, y = rand(3, 4, 5), rand(6, seed=1)
    got = tsf.vmap(lambda a, b: (a, b), in_dims=(in_dim, None), out_dims=out_dim)(T(x), T(y))
    n = x.shape[in_dim]
    exp_a = np.moveaxis(x, in_dim, out_dim)
    exp_b = np.stack([y] * n, axis=out_dim)
    assert_tree_close(got, (exp_a, exp_b), rtol=0, atol=0)
    if HAVE_TORCH:
        assert_tree_close(got, tf.vmap(lambda a, b: (a, b), in_dims=(in_dim, None), out_dims=out_dim)(P(x), P(y)),
                          rtol=0, atol=0)


# ---------------------------------------------------------------------------- errors (torch's types and messages)
X34 = rand(3, 4)


def _bad_vjp_structure(F, M, conv):
    _, fn = F.vjp(lambda a: (a * 2, a * 3), conv(X34))
    return fn(conv(X34))


def _bad_vjp_dict(F, M, conv):
    _, fn = F.vjp(lambda a: {"a": a * 2}, conv(X34))
    return fn({"b": conv(X34)})


# (name, call(F, M, conv), exception type, phrase in both messages or None (type only))
ERROR_CASES = [
    ("in_dims_wrong_length", lambda F, M, c: F.vmap(lambda a, b: a + b, in_dims=(0,))(c(X34), c(X34)),
     ValueError, "in_dims is not compatible with the structure of `inputs`"),
    ("in_dim_out_of_range", lambda F, M, c: F.vmap(lambda a: a, in_dims=2)(c(X34)),
     ValueError, "so expected in_dim to satisfy -2 <= in_dim < 2"),
    ("in_dim_negative_out_of_range", lambda F, M, c: F.vmap(lambda a: a, in_dims=-3)(c(X34)),
     ValueError, "so expected in_dim to satisfy -2 <= in_dim < 2"),
    ("in_dims_float", lambda F, M, c: F.vmap(lambda a: a, in_dims=0.5)(c(X34)),
     ValueError, "expected `in_dims` to be int or a (potentially nested) tuple"),
    ("in_dims_list", lambda F, M, c: F.vmap(lambda a: a, in_dims=[0])(c(X34)),
     ValueError, "expected `in_dims` to be int or a (potentially nested) tuple"),
    pytest.param("in_dims_leaf_str", lambda F, M, c: F.vmap(lambda a: a, in_dims=("a",))(c(X34)),
                 ValueError, "in_dim must be either an integer dimension or None"),
    ("mismatched_batch_sizes", lambda F, M, c: F.vmap(lambda a, b: a + b)(c(rand(3)), c(rand(4))),
     ValueError, "Expected all tensors to have the same size in the mapped dimension"),
    ("no_inputs", lambda F, M, c: F.vmap(lambda: M.ones(3))(), ValueError, "got no inputs"),
    ("non_tensor_with_in_dim", lambda F, M, c: F.vmap(lambda a, b: a * b, in_dims=(0, 0))(c(X34), 2.0),
     ValueError, "We cannot vmap over non-Tensor arguments"),
    ("non_tensor_output", lambda F, M, c: F.vmap(lambda a: 1.0)(c(X34)),
     ValueError, "must only return Tensors, got type <class 'float'>"),
    ("non_tensor_in_output_tree", lambda F, M, c: F.vmap(lambda a: (a, "s"))(c(X34)),
     ValueError, "must only return Tensors, got type <class 'str'>"),
    ("out_dims_wrong_length", lambda F, M, c: F.vmap(lambda a: (a, a), out_dims=(0,))(c(X34)),
     ValueError, "out_dims is not compatible with the structure of `outputs`"),
    ("out_dim_out_of_range", lambda F, M, c: F.vmap(lambda a: a, out_dims=2)(c(X34)),
     IndexError, None),
    pytest.param("out_dims_none_batched", lambda F, M, c: F.vmap(lambda a: a, out_dims=None)(c(X34)),
                 ValueError, "can not return a BatchedTensor when out_dim is None"),
    pytest.param("out_dims_str", lambda F, M, c: F.vmap(lambda a: a, out_dims="x")(c(X34)),
                 ValueError, "`out_dims` must be an int, None or a python collection of ints"),
    ("item_inside_vmap", lambda F, M, c: F.vmap(lambda a: a.sum().item())(c(X34)),
     RuntimeError, "It looks like you're calling .item() on a Tensor"),
    ("tolist_inside_vmap", lambda F, M, c: F.vmap(lambda a: a.tolist())(c(X34)), RuntimeError, None),
    ("randomness_invalid", lambda F, M, c: F.vmap(lambda a: a, randomness="foo")(c(X34)),
     RuntimeError, "Only allowed values for randomness are 'error', 'different', or 'same'. Got foo"),
    ("chunk_size_zero", lambda F, M, c: F.vmap(lambda a: a, chunk_size=0)(c(X34)),
     ValueError, "chunk_size should be None or greater than 0. (got 0)"),
    ("chunk_size_negative", lambda F, M, c: F.vmap(lambda a: a, chunk_size=-2)(c(X34)),
     ValueError, "chunk_size should be None or greater than 0. (got -2)"),
    ("grad_non_scalar", lambda F, M, c: F.grad(lambda a: a * 2)(c(X34)),
     RuntimeError, "Expected f(*args) to return a scalar Tensor, got tensor with 2 dims"),
    ("grad_non_tensor", lambda F, M, c: F.grad(lambda a: 1.0)(c(X34)),
     RuntimeError, "Expected f(*args) to return a Tensor"),
    ("grad_has_aux_not_tuple", lambda F, M, c: F.grad(lambda a: a.sum(), has_aux=True)(c(X34)),
     RuntimeError, "output of function f should be a tuple: (output, aux) if has_aux is True"),
    ("grad_argnums_out_of_range", lambda F, M, c: F.grad(lambda a: a.sum(), argnums=3)(c(X34)),
     RuntimeError, "but only 1 positional inputs"),
    ("grad_argnums_list", lambda F, M, c: F.grad(lambda a: a.sum(), argnums=[0])(c(X34)), RuntimeError, "argnums"),
    ("grad_integer_input", lambda F, M, c: F.grad(lambda a: a.sum())(M.ones(3, dtype=M.int64)),
     RuntimeError, "can require gradients"),
    ("vjp_cotangent_structure", lambda F, M, c: _bad_vjp_structure(F, M, c),
     RuntimeError, "Expected pytree structure of cotangents to be the same as pytree structure of outputs"),
    ("vjp_cotangent_dict_keys", lambda F, M, c: _bad_vjp_dict(F, M, c),
     RuntimeError, "Expected pytree structure of cotangents to be the same as pytree structure of outputs"),
    ("vjp_cotangent_shape", lambda F, M, c: F.vjp(lambda a: a * 2, c(X34))[1](c(rand(3, 5))), RuntimeError, None),
    ("jvp_primals_not_tuple", lambda F, M, c: F.jvp(lambda a: a, [c(X34)], [c(X34)]),
     RuntimeError, "Expected primals to be a tuple"),
    ("jvp_tangent_shape", lambda F, M, c: F.jvp(lambda a: a, (c(X34),), (c(rand(2)),)), RuntimeError, None),
    ("functional_call_strict_missing", lambda F, M, c: F.functional_call(
        M.nn.Linear(4, 2), {"weight": M.ones(2, 4)}, (M.ones(4),), strict=True),
     RuntimeError, "Missing key(s): 'bias'"),
    ("functional_call_strict_unexpected", lambda F, M, c: F.functional_call(
        M.nn.Linear(4, 2), {"weight": M.ones(2, 4), "bias": M.ones(2), "extra": M.ones(1)}, (M.ones(4),),
        strict=True),
     RuntimeError, "Unexpected key(s): 'extra'"),
    ("stack_module_state_empty", lambda F, M, c: F.stack_module_state([]),
     RuntimeError, "Expected at least one model, got 0"),
]


def _case_id(c):
    return c.values[0] if hasattr(c, "values") else c[0]


@pytest.mark.parametrize("name,call,exc,phrase", ERROR_CASES, ids=[_case_id(c) for c in ERROR_CASES])
def test_errors_match_torch(name, call, exc, phrase):
    with pytest.raises(Exception) as ts_err:
        call(tsf, ts, T)
    assert type(ts_err.value) is exc, (type(ts_err.value), ts_err.value)
    if phrase is not None:
        assert phrase in str(ts_err.value), str(ts_err.value)
    if HAVE_TORCH:
        with pytest.raises(Exception) as torch_err:
            call(tf, torch, P)
        assert type(torch_err.value) is type(ts_err.value), (torch_err.value, ts_err.value)
        if phrase is not None:
            assert phrase in str(torch_err.value), str(torch_err.value)


def test_vmap_levels_closed_after_an_error():
    from tessera._functorch import vmap as vm
    with pytest.raises(RuntimeError):
        tsf.vmap(lambda a: a.sum().item())(T(X34))
    with pytest.raises(ValueError):
        tsf.vmap(lambda a: 1.0)(T(X34))
    assert vm.active_levels() == []
    assert_tree_close(tsf.vmap(lambda a: a * 2)(T(X34)), X34 * 2)


# ---------------------------------------------------------------------------- grad / grad_and_value
def f2(M):
    return lambda x, y: (M.sin(x) * y).sum() + (x * x).mean() * M.exp(y).sum()


GRAD_ARGS = (rand(3, 4), rand(3, 4, seed=1) * 0.5)


@pytest.mark.parametrize("argnums", [0, 1, -1, (0, 1), (1,)])
def test_grad_argnums(argnums):
    got = tsf.grad(f2(ts), argnums=argnums)(*to_ts(GRAD_ARGS))
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    fd = tuple(fd_jac(f2(np), GRAD_ARGS, n % 2) for n in nums)
    assert_tree_close(got, fd if isinstance(argnums, tuple) else fd[0], FD_RTOL, FD_ATOL)
    if HAVE_TORCH:
        assert_tree_close(got, tf.grad(f2(torch), argnums=argnums)(*to_torch(GRAD_ARGS)))


def test_grad_and_value_has_aux():
    def make(M):
        def f(x, y):
            loss = f2(M)(x, y)
            return loss, {"sum": x.sum(), "parts": (y * 2,)}
        return f

    (g, (value, aux)) = tsf.grad_and_value(make(ts), argnums=(0, 1), has_aux=True)(*to_ts(GRAD_ARGS))
    x, y = to_f64(GRAD_ARGS)
    assert_tree_close(value, f2(np)(x, y), 1e-5, 1e-5)
    assert_tree_close(aux, {"sum": x.sum(), "parts": (y * 2,)})
    assert_tree_close(g, (fd_jac(f2(np), (x, y), 0), fd_jac(f2(np), (x, y), 1)), FD_RTOL, FD_ATOL)
    g2, aux2 = tsf.grad(make(ts), has_aux=True)(*to_ts(GRAD_ARGS))
    assert_tree_close(g2, g[0], 0, 0)
    assert_tree_close(aux2, aux, 0, 0)
    if HAVE_TORCH:
        assert_tree_close((g, (value, aux)),
                          tf.grad_and_value(make(torch), argnums=(0, 1), has_aux=True)(*to_torch(GRAD_ARGS)))


def test_grad_pytree_argument_and_kwargs():
    def make(M):
        return lambda p, x, scale=1.0: ((x @ p["w"] + p["b"]) ** 2).sum() * scale

    params = {"w": rand(3, 2), "b": rand(2, seed=1)}
    x = rand(4, 3, seed=2)
    got = tsf.grad(make(ts))(to_ts(params), T(x), scale=0.5)
    w_fd = fd_jac(lambda w, b: make(np)({"w": w, "b": b}, x.astype(np.float64), 0.5), (params["w"], params["b"]), 0)
    b_fd = fd_jac(lambda w, b: make(np)({"w": w, "b": b}, x.astype(np.float64), 0.5), (params["w"], params["b"]), 1)
    assert_tree_close(got, {"w": w_fd, "b": b_fd}, FD_RTOL, FD_ATOL)
    assert not got["w"].requires_grad
    if HAVE_TORCH:
        assert_tree_close(got, tf.grad(make(torch))(to_torch(params), P(x), scale=0.5))


def test_grad_output_independent_of_input_is_zero():
    x = rand(3)
    got = tsf.grad(lambda a, b: (b * 2).sum())(T(x), T(x))
    assert_tree_close(got, np.zeros(3))
    if HAVE_TORCH:
        assert_tree_close(got, tf.grad(lambda a, b: (b * 2).sum())(P(x), P(x)))


# ---------------------------------------------------------------------------- vjp
def test_vjp_pytrees_and_has_aux():
    def make(M):
        def f(x, yz):
            y, z = yz
            return {"a": x * y, "b": (M.exp(z) * x.sum(),)}, x.mean()
        return f

    x, y, z = rand(3), rand(3, seed=1), rand(2, seed=2)
    cts = {"a": rand(3, seed=3), "b": (rand(2, seed=4),)}
    out, fn, aux = tsf.vjp(make(ts), T(x), (T(y), T(z)), has_aux=True)
    got = fn(to_ts(cts))
    assert isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], tuple)

    def scalar(xx, yy, zz):
        o = make(np)(xx, (yy, zz))[0]
        return (o["a"] * cts["a"]).sum() + (o["b"][0] * cts["b"][0]).sum()

    fd = (fd_jac(scalar, (x, y, z), 0), (fd_jac(scalar, (x, y, z), 1), fd_jac(scalar, (x, y, z), 2)))
    assert_tree_close(got, fd, FD_RTOL, FD_ATOL)
    assert_tree_close(out, make(np)(*to_f64((x, (y, z))))[0], 1e-5, 1e-5)
    assert_tree_close(aux, x.mean(), 1e-5, 1e-6)
    got_again = fn(to_ts(cts))  # vjp_fn can be called more than once
    assert_tree_close(got_again, got, 0, 0)
    if HAVE_TORCH:
        t_out, t_fn, t_aux = tf.vjp(make(torch), P(x), (P(y), P(z)), has_aux=True)
        assert_tree_close((out, aux), (t_out, t_aux))
        assert_tree_close(got, t_fn(to_torch(cts)))


# ---------------------------------------------------------------------------- jacrev / jacfwd
def fj(M):
    return lambda x, y: (M.sin(x) * y.sum(), (x[:, None] * y).sum(0) + M.tanh(y))


JAC_ARGS = (rand(3), rand(4, seed=1))


def _fd_jac_multi(make, args, argnums):
    """Per output, per argnum: the finite-difference Jacobian."""
    n_out = len(make(np)(*to_f64(args)))
    out = []
    for k in range(n_out):
        blocks = tuple(fd_jac(lambda *a: make(np)(*a)[k], args, n) for n in argnums)
        out.append(blocks)
    return tuple(out)


@pytest.mark.parametrize("api", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_jacobians_multiple_outputs(api, argnums):
    got = getattr(tsf, api)(fj(ts), argnums=argnums)(*to_ts(JAC_ARGS))
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    fd = _fd_jac_multi(fj, JAC_ARGS, nums)
    if not isinstance(argnums, tuple):
        fd = tuple(b[0] for b in fd)
    assert_tree_close(got, fd, FD_RTOL, FD_ATOL)
    if HAVE_TORCH:
        assert_tree_close(got, getattr(tf, api)(fj(torch), argnums=argnums)(*to_torch(JAC_ARGS)))


@pytest.mark.parametrize("api", ["jacrev", "jacfwd"])
def test_jacobians_has_aux_and_matrix_input(api):
    def make(M):
        return lambda w, x: (M.tanh(x @ w), {"norm": (w * w).sum()})

    w, x = rand(3, 2), rand(4, 3, seed=1)
    jac, aux = getattr(tsf, api)(make(ts), has_aux=True)(T(w), T(x))
    fd = fd_jac(lambda ww, xx: make(np)(ww, xx)[0], (w, x), 0)
    assert tuple(jac.shape) == (4, 2, 3, 2)
    assert_tree_close(jac, fd, FD_RTOL, FD_ATOL)
    assert_tree_close(aux, {"norm": (w.astype(np.float64) ** 2).sum()}, 1e-5, 1e-5)
    if HAVE_TORCH:
        assert_tree_close((jac, aux), getattr(tf, api)(make(torch), has_aux=True)(P(w), P(x)))


@pytest.mark.parametrize("chunk", [1, 2, 5, 100])
def test_jacrev_chunk_size(chunk):
    w, x = rand(3, 2), rand(4, 3, seed=1)
    f = lambda ww, xx: ts.sin(xx @ ww)  # noqa: E731
    full = tsf.jacrev(f, argnums=(0, 1))(T(w), T(x))
    got = tsf.jacrev(f, argnums=(0, 1), chunk_size=chunk)(T(w), T(x))
    assert_tree_close(got, full, 1e-6, 1e-7)
    if HAVE_TORCH:
        assert_tree_close(got, tf.jacrev(lambda ww, xx: torch.sin(xx @ ww), argnums=(0, 1),
                                         chunk_size=chunk)(P(w), P(x)))


def test_jacrev_of_scalar_output_is_gradient():
    x = rand(5)
    got = tsf.jacrev(lambda a: (a ** 3).sum())(T(x))
    assert_tree_close(got, 3 * x.astype(np.float64) ** 2, 1e-5, 1e-5)


# ---------------------------------------------------------------------------- hessian
HESS_FUNCS = [
    ("sin_times_square", lambda M: lambda x: M.sin(x).sum() * (x * x).sum()),
    pytest.param("exp_slices", lambda M: lambda x: M.exp(x[:2] * x[1:]).sum()),
    pytest.param("select", lambda M: lambda x: M.sin(x[0]) * x[1] * x[2]),
    ("exp_dot", lambda M: lambda x: M.exp(x * M.flip(x, (0,))).sum()),
    ("tanh_quadratic", lambda M: lambda x: M.tanh((x[:, None] * x).sum(0)).sum()),
]


@pytest.mark.parametrize("name,make", HESS_FUNCS, ids=[_case_id(c) for c in HESS_FUNCS])
def test_hessian_small_functions(name, make):
    x = rand(3) * 0.7
    got = tsf.hessian(make(ts))(T(x))
    assert_tree_close(got, fd_hessian(make(np), x), 2e-3, 5e-4)
    if HAVE_TORCH:
        assert_tree_close(got, tf.hessian(make(torch))(P(x)), 1e-4, 1e-5)


def mlp_loss(M):
    def loss(p, x, y):
        h = M.tanh(x @ p["w1"] + p["b1"])
        return ((h @ p["w2"] - y) ** 2).mean()
    return loss


def test_hessian_of_mlp_loss_wrt_weights():
    p = {"w1": rand(3, 4) * 0.5, "b1": rand(4, seed=1) * 0.1, "w2": rand(4, 1, seed=2) * 0.5}
    x, y = rand(6, 3, seed=3), rand(6, 1, seed=4)
    got = tsf.hessian(mlp_loss(ts))(to_ts(p), T(x), T(y))
    names = list(p)
    assert set(got) == set(names) and all(set(got[k]) == set(names) for k in names)
    for a in names:
        for b in names:
            assert tuple(got[a][b].shape) == p[a].shape + p[b].shape
    # finite differences over the flattened parameters
    sizes = [p[k].size for k in names]
    flat = np.concatenate([p[k].reshape(-1) for k in names]).astype(np.float64)

    def unflat(v):
        out, s = {}, 0
        for k, n in zip(names, sizes):
            out[k] = v[s:s + n].reshape(p[k].shape)
            s += n
        return out

    H = fd_hessian(lambda v: mlp_loss(np)(unflat(v), x.astype(np.float64), y.astype(np.float64)), flat)
    offs = np.cumsum([0] + sizes)
    expected = {a: {b: H[offs[i]:offs[i + 1], offs[j]:offs[j + 1]].reshape(p[a].shape + p[b].shape)
                    for j, b in enumerate(names)} for i, a in enumerate(names)}
    assert_tree_close(got, expected, 2e-3, 5e-4)
    if HAVE_TORCH:
        assert_tree_close(got, tf.hessian(mlp_loss(torch))(to_torch(p), P(x), P(y)), 1e-4, 1e-5)


# ---------------------------------------------------------------------------- jvp / linearize
def test_jvp_pytree_outputs_and_has_aux():
    def make(M):
        return lambda x, y: ((x * y, M.sin(x) @ y[:, None]), x.sum())

    x, y = rand(3), rand(3, seed=1)
    tx, ty = rand(3, seed=2), rand(3, seed=3)

    def plain(M):
        return lambda a, b: make(M)(a, b)[0]

    out, tangent = tsf.jvp(plain(ts), (T(x), T(y)), (T(tx), T(ty)))
    out2, tangent2, aux = tsf.jvp(make(ts), (T(x), T(y)), (T(tx), T(ty)), has_aux=True)
    eps = 1e-6
    xd, yd, txd, tyd = to_f64((x, y, tx, ty))
    plus = plain(np)(xd + eps * txd, yd + eps * tyd)
    minus = plain(np)(xd - eps * txd, yd - eps * tyd)
    fd = tuple((p_ - m_) / (2 * eps) for p_, m_ in zip(plus, minus))
    assert_tree_close(tangent, fd, FD_RTOL, FD_ATOL)
    assert_tree_close(out, plain(np)(xd, yd), 1e-5, 1e-5)
    assert_tree_close((out2, tangent2), (out, tangent), 1e-6, 1e-7)
    assert_tree_close(aux, x.sum(), 1e-5, 1e-6)
    if HAVE_TORCH:
        t_out, t_tan = tf.jvp(plain(torch), (P(x), P(y)), (P(tx), P(ty)))
        assert_tree_close((out, tangent), (t_out, t_tan))
        assert_tree_close(aux, tf.jvp(make(torch), (P(x), P(y)), (P(tx), P(ty)), has_aux=True)[2])


def test_linearize_matches_jvp():
    def make(M):
        return lambda x: M.tanh(x) * x.sum()

    x = rand(4)
    out, jvp_fn = tsf.linearize(make(ts), T(x))
    assert_tree_close(out, make(np)(x.astype(np.float64)), 1e-5, 1e-5)
    J = fd_jac(make(np), (x,), 0)
    for seed in (1, 2):
        t = rand(4, seed=seed)
        got = jvp_fn(T(t))
        assert_tree_close(got, J @ t.astype(np.float64), FD_RTOL, FD_ATOL)
        assert_tree_close(got, tsf.jvp(make(ts), (T(x),), (T(t),))[1], 1e-6, 1e-7)
        if HAVE_TORCH:
            assert_tree_close(got, tf.linearize(make(torch), P(x))[1](P(t)))


# ---------------------------------------------------------------------------- compositions
def make_mlp(nn, seed=0, din=5, dh=8, dout=3):
    m = nn.Sequential(nn.Linear(din, dh), nn.Tanh(), nn.Linear(dh, dout))
    rng = np.random.default_rng(seed)
    return m, {k: (rng.standard_normal(tuple(v.shape)) * 0.4).astype(np.float32) for k, v in m.named_parameters()}


def load(module, values, conv, no_grad):
    with no_grad():
        for k, v in module.named_parameters():
            v.copy_(conv(values[k]))
    return module


def test_vmap_grad_per_sample_gradients_mlp():
    model, values = make_mlp(ts.nn)
    load(model, values, T, ts.no_grad)
    x, y = rand(6, 5, seed=1), rand(6, 3, seed=2)

    def make(F, M, module):
        def loss(params, buffers, xi, yi):
            out = F.functional_call(module, (params, buffers), (xi.unsqueeze(0),))
            return M.nn.functional.mse_loss(out, yi.unsqueeze(0))
        return F.vmap(F.grad(loss), in_dims=(None, None, 0, 0))

    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    got = make(tsf, ts, model)(params, buffers, T(x), T(y))
    assert set(got) == set(values)
    # a Python loop of ordinary autograd
    loop = {k: [] for k in values}
    for i in range(6):
        model.zero_grad()
        ts.nn.functional.mse_loss(model(T(x[i:i + 1])), T(y[i:i + 1])).backward()
        for k, v in model.named_parameters():
            loop[k].append(to_np(v.grad))
    assert_tree_close(got, {k: np.stack(v) for k, v in loop.items()}, 1e-4, 1e-6)
    if HAVE_TORCH:
        tmodel, _ = make_mlp(torch.nn)
        load(tmodel, values, P, torch.no_grad)
        tparams = {k: v.detach() for k, v in tmodel.named_parameters()}
        assert_tree_close(got, make(tf, torch, tmodel)(tparams, {}, P(x), P(y)), 1e-4, 1e-6)


@pytest.mark.parametrize("groups, dims", [(1, 2), (2, 2), (1, 1)])
def test_per_sample_gradients_of_a_cnn_batch_the_convolutions(groups, dims):
    """vmap(grad) through convolutions: the weight gradients come from one grouped
    convolution_backward (the batch as groups), not a per-sample loop (warned, so made an error
    here); checked against ordinary autograd per sample and against torch.func."""
    import warnings
    spatial = (7, 6)[:dims]
    w1 = rand(4, 4 // groups, *(3,) * dims, seed=3) * 0.3
    b1 = rand(4, seed=4)
    w2 = rand(2, 4, *(2,) * dims, seed=5) * 0.3
    x = rand(5, 4, *spatial, seed=6)

    def make(M):
        conv = getattr(M.nn.functional, f"conv{dims}d")

        def loss(p, xi):
            h = conv(xi.unsqueeze(0), p[0], p[1], padding=1, groups=groups).tanh()
            return (conv(h, p[2], stride=2) ** 2).mean()
        return loss

    loss = make(ts)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the per-sample loop's performance warning
        got = tsf.vmap(tsf.grad(loss), in_dims=(None, 0))([T(w1), T(b1), T(w2)], T(x))
        got_x = tsf.vmap(tsf.grad(lambda xi: loss([T(w1), T(b1), T(w2)], xi)))(T(x))
    for i in range(5):
        params = [T(w1).requires_grad_(), T(b1).requires_grad_(), T(w2).requires_grad_()]
        xi = T(x[i]).requires_grad_()
        ts.autograd.backward(loss(params, xi))
        for g, p in zip(got, params):
            np.testing.assert_allclose(to_np(g)[i], to_np(p.grad), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(to_np(got_x)[i], to_np(xi.grad), rtol=1e-4, atol=1e-6)
    if HAVE_TORCH:
        want = tf.vmap(tf.grad(make(torch)), in_dims=(None, 0))([P(w1), P(b1), P(w2)], P(x))
        for g, w in zip(got, want):
            np.testing.assert_allclose(to_np(g), w.numpy(), rtol=1e-4, atol=1e-6)


def test_per_sample_gradients_of_a_token_model_need_no_loop():
    """Embedding, layer norm, a linear layer and cross entropy (with an ignored token) under
    vmap(grad): their backwards batch (no per-sample loop warning), equal to autograd per sample
    and to torch.func."""
    import warnings
    emb, ln_w, ln_b = rand(11, 6, seed=11), rand(6, seed=12), rand(6, seed=13)
    w, b = rand(11, 6, seed=14), rand(11, seed=15)
    tokens = np.random.default_rng(16).integers(0, 11, (4, 5))
    targets = np.random.default_rng(17).integers(0, 11, (4, 5))
    targets[1, 2] = 3

    def make(M):
        F = M.nn.functional

        def loss(p, tok, tgt):
            h = F.embedding(tok, p[0], padding_idx=0)
            h = F.layer_norm(h, (6,), p[1], p[2])
            logits = F.linear(h.tanh(), p[3], p[4])
            return F.cross_entropy(logits, tgt, ignore_index=3) + 0.1 * F.mse_loss(h, h.detach() * 0.5)
        return loss

    loss = make(ts)
    params = [T(emb), T(ln_w), T(ln_b), T(w), T(b)]
    tok, tgt = ts.tensor(tokens), ts.tensor(targets)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = tsf.vmap(tsf.grad(loss), in_dims=(None, 0, 0))(params, tok, tgt)
    for i in range(4):
        leaves = [p.detach().requires_grad_() for p in params]
        ts.autograd.backward(loss(leaves, tok[i], tgt[i]))
        for g, p in zip(got, leaves):
            np.testing.assert_allclose(to_np(g)[i], to_np(p.grad), rtol=1e-4, atol=1e-6)
    if HAVE_TORCH:
        tparams = [P(emb), P(ln_w), P(ln_b), P(w), P(b)]
        want = tf.vmap(tf.grad(make(torch)), in_dims=(None, 0, 0))(tparams, torch.tensor(tokens), torch.tensor(targets))
        for g, wv in zip(got, want):
            np.testing.assert_allclose(to_np(g), wv.numpy(), rtol=1e-4, atol=1e-6)


def test_per_sample_gradients_through_batch_and_group_norm():
    """Batch norm (no running statistics: each sample's own batch statistics, as torch.func) and
    group norm under vmap(grad): batched rules (no loop warning), equal to autograd per sample and
    to torch.func."""
    import warnings
    w, gw, gb, bw, bb = rand(4, 2, 3, 3, seed=20) * 0.4, rand(4, seed=21), rand(4, seed=22), rand(4, seed=23), rand(4, seed=24)
    x = rand(3, 2, 2, 5, 5, seed=25)  # 3 samples, each a batch of 2 images

    def make(M):
        F = M.nn.functional

        def loss(p, xi):
            h = F.conv2d(xi, p[0], padding=1)
            h = F.group_norm(h, 2, p[1], p[2])
            h = F.batch_norm(h, None, None, p[3], p[4], training=True)
            return (h.tanh() ** 2).mean()
        return loss

    loss = make(ts)
    params = [T(w), T(gw), T(gb), T(bw), T(bb)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = tsf.vmap(tsf.grad(loss), in_dims=(None, 0))(params, T(x))
    for i in range(3):
        leaves = [p.detach().requires_grad_() for p in params]
        ts.autograd.backward(loss(leaves, T(x[i])))
        for g, p in zip(got, leaves):
            np.testing.assert_allclose(to_np(g)[i], to_np(p.grad), rtol=1e-4, atol=1e-5)
    if HAVE_TORCH:
        want = tf.vmap(tf.grad(make(torch)), in_dims=(None, 0))([P(a) for a in (w, gw, gb, bw, bb)], P(x))
        for g, wv in zip(got, want):
            np.testing.assert_allclose(to_np(g), wv.numpy(), rtol=1e-4, atol=1e-5)


def test_ensemble_of_batch_norm_models_updates_each_models_running_stats():
    nn = ts.nn
    models = [nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3)) for _ in range(4)]
    x = T(rand(5, 2, 6, 6, seed=26))
    params, buffers = tsf.stack_module_state(models)
    base = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3))
    out = tsf.vmap(lambda p, b: tsf.functional_call(base, (p, b), (x,)), in_dims=(0, 0))(params, buffers)
    for i, m in enumerate(models):
        np.testing.assert_allclose(to_np(out)[i], to_np(m(x)), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(to_np(buffers["1.running_mean"])[i], to_np(m[1].running_mean), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(to_np(buffers["1.running_var"])[i], to_np(m[1].running_var), rtol=1e-5, atol=1e-6)
    # Shared (unbatched) running statistics cannot take every sample's update: torch.func's error.
    shared = nn.BatchNorm2d(2)
    with pytest.raises(RuntimeError, match="running_mean or running_var, which will be updated in place"):
        tsf.vmap(shared)(T(rand(4, 5, 2, 3, 3, seed=27)))
    shared.eval()  # in eval mode they are only read
    got = tsf.vmap(shared)(T(rand(4, 5, 2, 3, 3, seed=27)))
    np.testing.assert_allclose(to_np(got), to_np(shared(T(rand(4, 5, 2, 3, 3, seed=27)).reshape(20, 2, 3, 3))).reshape(4, 5, 2, 3, 3),
                               rtol=1e-5, atol=1e-6)


def test_ensemble_of_convolutions_and_transposed_convolutions():
    import warnings
    x = T(rand(3, 4, 6, 6, seed=7))
    w, b, wt = T(rand(5, 6, 2, 3, 3, seed=8)), T(rand(5, 6, seed=9)), T(rand(5, 4, 3, 3, 3, seed=10))
    F = ts.nn.functional
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = tsf.vmap(lambda w_, b_: F.conv2d(x, w_, b_, padding=1, groups=2))(w, b)
        out_t = tsf.vmap(lambda w_: F.conv_transpose2d(x, w_, stride=2, padding=1))(wt)
    for i in range(5):
        np.testing.assert_allclose(to_np(out)[i], to_np(F.conv2d(x, w[i], b[i], padding=1, groups=2)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(to_np(out_t)[i], to_np(F.conv_transpose2d(x, wt[i], stride=2, padding=1)),
                                   rtol=1e-5, atol=1e-5)


def test_grad_of_vmap():
    def make(F, M):
        return lambda w, X: F.vmap(lambda x: M.tanh(x @ w).sum())(X).sum()

    w, X = rand(3, 2), rand(5, 3, seed=1)
    got = tsf.grad(make(tsf, ts))(T(w), T(X))
    fd = fd_jac(lambda ww, XX: np.tanh(XX @ ww).sum(), (w, X), 0)
    assert_tree_close(got, fd, FD_RTOL, FD_ATOL)
    if HAVE_TORCH:
        assert_tree_close(got, tf.grad(make(tf, torch))(P(w), P(X)))


def _vmap_jac(api):
    def make(M):
        return lambda x: M.sin(x) * x.sum()

    X = rand(4, 3)
    got = tsf.vmap(getattr(tsf, api)(make(ts)))(T(X))
    fd = np.stack([fd_jac(make(np), (X[i],), 0) for i in range(4)])
    loop = np.stack([to_np(getattr(tsf, api)(make(ts))(T(X[i]))) for i in range(4)])
    assert_tree_close(got, fd, FD_RTOL, FD_ATOL)
    assert_tree_close(got, loop, 1e-5, 1e-6)
    if HAVE_TORCH:
        assert_tree_close(got, tf.vmap(getattr(tf, api)(make(torch)))(P(X)))


def test_vmap_of_jacrev():
    _vmap_jac("jacrev")


def test_vmap_of_jacfwd():
    _vmap_jac("jacfwd")


def test_vmap_of_vjp():
    def make(F, M):
        return lambda x, ct: F.vjp(lambda a: M.sin(a) * a.sum(), x)[1](ct)[0]

    X, CT = rand(4, 3), rand(4, 3, seed=1)
    got = tsf.vmap(make(tsf, ts))(T(X), T(CT))
    fd = np.stack([fd_jac(lambda a: (np.sin(a) * a.sum() * CT[i]).sum(), (X[i],), 0) for i in range(4)])
    assert_tree_close(got, fd, FD_RTOL, FD_ATOL)
    if HAVE_TORCH:
        assert_tree_close(got, tf.vmap(make(tf, torch))(P(X), P(CT)))


def test_jacrev_of_jacrev():
    def make(M):
        return lambda x: M.sin(x) * (x * x).sum()

    x = rand(3)
    got = tsf.jacrev(tsf.jacrev(make(ts)))(T(x))
    assert tuple(got.shape) == (3, 3, 3)
    expected = np.stack([fd_hessian(lambda v, k=k: make(np)(v)[k], x) for k in range(3)])
    assert_tree_close(got, expected, 2e-3, 5e-4)
    if HAVE_TORCH:
        assert_tree_close(got, tf.jacrev(tf.jacrev(make(torch)))(P(x)))


def test_jacfwd_of_jacrev():
    def make(M):
        return lambda x: M.sin(x) * (x * x).sum()

    x = rand(3)
    got = tsf.jacfwd(tsf.jacrev(make(ts)))(T(x))
    assert_tree_close(got, tsf.jacrev(tsf.jacrev(make(ts)))(T(x)), 1e-5, 1e-6)
    if HAVE_TORCH:
        assert_tree_close(got, tf.jacfwd(tf.jacrev(make(torch)))(P(x)))


def test_vmap_of_hessian():
    def make(M):
        return lambda x: (M.exp(x) * x).sum()

    X = rand(3, 2)
    got = tsf.vmap(tsf.hessian(make(ts)))(T(X))
    assert_tree_close(got, np.stack([fd_hessian(make(np), X[i]) for i in range(3)]), 2e-3, 5e-4)
    if HAVE_TORCH:
        assert_tree_close(got, tf.vmap(tf.hessian(make(torch)))(P(X)))


# ---------------------------------------------------------------------------- model ensembling
def test_model_ensembling_stack_module_state():
    n_models = 5
    models, values = [], []
    for s in range(n_models):
        m, v = make_mlp(ts.nn, seed=10 + s, din=4, dh=6, dout=2)
        models.append(load(m, v, T, ts.no_grad))
        values.append(v)
    params, buffers = tsf.stack_module_state(models)
    assert set(params) == set(values[0])
    for k, v in params.items():
        assert tuple(v.shape) == (n_models,) + values[0][k].shape
        assert v.requires_grad and v.is_leaf
        assert_tree_close(v, np.stack([vals[k] for vals in values]), 0, 0)

    base = models[0]

    def fmodel(p, b, x):
        return tsf.functional_call(base, (p, b), (x,))

    x_same = rand(7, 4, seed=1)
    x_each = rand(n_models, 7, 4, seed=2)
    same = tsf.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, T(x_same))
    each = tsf.vmap(fmodel)(params, buffers, T(x_each))
    with ts.no_grad():
        assert_tree_close(same, np.stack([to_np(m(T(x_same))) for m in models]), 1e-5, 1e-6)
        assert_tree_close(each, np.stack([to_np(m(T(x_each[i]))) for i, m in enumerate(models)]), 1e-5, 1e-6)
    # the base model's own parameters are untouched
    for k, v in base.named_parameters():
        assert_tree_close(v, values[0][k], 0, 0)
    if HAVE_TORCH:
        tmodels = [load(make_mlp(torch.nn, din=4, dh=6, dout=2)[0], v, P, torch.no_grad) for v in values]
        tparams, tbuffers = tf.stack_module_state(tmodels)
        tbase = tmodels[0]

        def tfmodel(p, b, x):
            return tf.functional_call(tbase, (p, b), (x,))

        assert_tree_close(same, tf.vmap(tfmodel, in_dims=(0, 0, None))(tparams, tbuffers, P(x_same)))
        assert_tree_close(each, tf.vmap(tfmodel)(tparams, tbuffers, P(x_each)))


def test_stack_module_state_rejects_mixed_training_modes():
    a, b = ts.nn.Linear(2, 2), ts.nn.Linear(2, 2)
    b.eval()
    with pytest.raises(RuntimeError, match="same training/eval mode"):
        tsf.stack_module_state([a, b])
    if HAVE_TORCH:
        ta, tb = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
        tb.eval()
        with pytest.raises(RuntimeError, match="same training/eval mode"):
            tf.stack_module_state([ta, tb])


# ---------------------------------------------------------------------------- functional_call
def test_functional_call_batchnorm_eval_buffers():
    def build(nn, conv, no_grad):
        bn = nn.BatchNorm1d(3)
        with no_grad():
            bn.weight.copy_(conv(rand(3, seed=1)))
            bn.bias.copy_(conv(rand(3, seed=2)))
        bn.eval()
        return bn

    bn = build(ts.nn, T, ts.no_grad)
    x = rand(4, 3, seed=3)
    rm, rv = rand(3, seed=4), np.abs(rand(3, seed=5)) + 0.5
    got = tsf.functional_call(bn, {"running_mean": T(rm), "running_var": T(rv)}, (T(x),))
    w, b = rand(3, seed=1).astype(np.float64), rand(3, seed=2).astype(np.float64)
    expected = (x - rm) / np.sqrt(rv.astype(np.float64) + bn.eps) * w + b
    assert_tree_close(got, expected, 1e-5, 1e-5)
    # the module's own buffers are back (and were not updated: eval mode)
    assert_tree_close(bn.running_mean, np.zeros(3), 0, 0)
    assert_tree_close(bn.running_var, np.ones(3), 0, 0)
    assert_tree_close(bn(T(x)), (x - 0) / np.sqrt(1 + bn.eps) * w + b, 1e-5, 1e-5)
    # parameters and buffers given as two dicts, and grad through the buffers-free parameters
    params = {"weight": T(w), "bias": T(b)}
    got2 = tsf.functional_call(bn, (params, {"running_mean": T(rm), "running_var": T(rv)}), T(x))
    assert_tree_close(got2, expected, 1e-5, 1e-5)
    if HAVE_TORCH:
        tbn = build(torch.nn, P, torch.no_grad)
        assert_tree_close(got, tf.functional_call(tbn, {"running_mean": P(rm), "running_var": P(rv)}, (P(x),)))


def test_functional_call_duplicate_keys_across_dicts():
    lin = ts.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        tsf.functional_call(lin, ({"weight": ts.ones(2, 2)}, {"weight": ts.ones(2, 2)}), (ts.ones(2),))
    if HAVE_TORCH:
        with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
            tf.functional_call(torch.nn.Linear(2, 2), ({"weight": torch.ones(2, 2)}, {"weight": torch.ones(2, 2)}),
                               (torch.ones(2),))


def test_functional_call_strict_full_dict_works():
    lin, v = ts.nn.Linear(3, 2), {"weight": rand(2, 3), "bias": rand(2, seed=1)}
    x = rand(4, 3, seed=2)
    got = tsf.functional_call(lin, to_ts(v), (T(x),), strict=True)
    assert_tree_close(got, x.astype(np.float64) @ v["weight"].T + v["bias"], 1e-5, 1e-5)
    if HAVE_TORCH:
        assert_tree_close(got, tf.functional_call(torch.nn.Linear(3, 2), to_torch(v), (P(x),), strict=True))


def _tied(nn):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3, bias=False)
            self.b = nn.Linear(3, 3, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    return Tied()


@pytest.mark.parametrize("tie_weights", [True, False])
def test_functional_call_tie_weights(tie_weights):
    W0, W = rand(3, 3), rand(3, 3, seed=1)
    x = rand(2, 3, seed=2)
    m = _tied(ts.nn)
    with ts.no_grad():
        m.a.weight.copy_(T(W0))
    got = tsf.functional_call(m, {"a.weight": T(W)}, (T(x),), tie_weights=tie_weights)
    second = W if tie_weights else W0
    expected = (x.astype(np.float64) @ W.T) @ second.T
    assert_tree_close(got, expected, 1e-5, 1e-5)
    assert m.b.weight is m.a.weight
    assert_tree_close(m.a.weight, W0, 0, 0)
    if HAVE_TORCH:
        tm = _tied(torch.nn)
        with torch.no_grad():
            tm.a.weight.copy_(P(W0))
        assert_tree_close(got, tf.functional_call(tm, {"a.weight": P(W)}, (P(x),), tie_weights=tie_weights))


def test_grad_through_functional_call_params():
    model, values = make_mlp(ts.nn, seed=3, din=3, dh=4, dout=1)
    x, y = rand(5, 3, seed=1), rand(5, 1, seed=2)

    def loss(F, M, module):
        return lambda p, xx, yy: ((F.functional_call(module, p, (xx,)) - yy) ** 2).mean()

    got = tsf.grad(loss(tsf, ts, model))(to_ts(values), T(x), T(y))
    load(model, values, T, ts.no_grad)
    model.zero_grad()
    ((model(T(x)) - T(y)) ** 2).mean().backward()
    assert_tree_close(got, {k: to_np(v.grad) for k, v in model.named_parameters()}, 1e-5, 1e-6)
    if HAVE_TORCH:
        tmodel, _ = make_mlp(torch.nn, din=3, dh=4, dout=1)
        assert_tree_close(got, tf.grad(loss(tf, torch, tmodel))(to_torch(values), P(x), P(y)))


# ---------------------------------------------------------------------------- more compositions (vs torch.func only)
# (name, function of (F, M, x) where x is a [4, 3] tensor)
TORCH_CASES = [
    ("vmap_inplace_on_batched_clone", lambda F, M, x: F.vmap(lambda a: a.clone().add_(1).mul_(2))(x)),
    ("vmap_inplace_on_input", lambda F, M, x: F.vmap(lambda a: a.mul_(2))(x.clone())),
    ("vmap_non_contiguous_input", lambda F, M, x: F.vmap(lambda a: a * M.exp(a))(x.t())),
    ("vmap_0d_outputs_out_dims_negative", lambda F, M, x: F.vmap(lambda a: a.sum(), out_dims=-1)(x)),
    ("vmap_softmax", lambda F, M, x: F.vmap(lambda a: M.softmax(a, 0))(x)),
    ("vmap_cross_entropy", lambda F, M, x: F.vmap(
        lambda a: M.nn.functional.cross_entropy(a[None], M.tensor([1])))(x)),
    ("vmap_slicing", lambda F, M, x: F.vmap(lambda a: a[1:] * a[0])(x)),
    ("vmap_index_tensor", lambda F, M, x: F.vmap(lambda a: a[M.tensor([2, 0])])(x)),
    ("vmap_where", lambda F, M, x: F.vmap(lambda a: M.where(a > 0, a, a * 0.1))(x)),
    ("vmap_cat", lambda F, M, x: F.vmap(lambda a: M.cat([a, a * 2]))(x)),
    ("vmap_stack_batched_unbatched", lambda F, M, x: F.vmap(lambda a, b: M.stack([a, b]), in_dims=(0, None))(x, x[0])),
    ("vmap_reshape_expand", lambda F, M, x: F.vmap(lambda a: a.reshape(3, 1).expand(3, 2).sum(1))(x)),
    ("vmap_outer_matmul", lambda F, M, x: F.vmap(lambda a, b: a @ b)(x[:, :, None], x[:, None, :])),
    ("vmap_dot", lambda F, M, x: F.vmap(M.dot)(x, x)),
    ("vmap_grad_has_aux", lambda F, M, x: F.vmap(F.grad(lambda a: ((a ** 2).sum(), a.mean()), has_aux=True))(x)),
    ("vmap_grad_and_value", lambda F, M, x: F.vmap(F.grad_and_value(lambda a: M.sin(a).sum()))(x)),
    ("vmap_grad_argnums_1", lambda F, M, x: F.vmap(F.grad(lambda a, b: (a * M.sin(b)).sum(), argnums=1),
                                                   in_dims=(None, 0))(x[0], x)),
    ("vmap_jvp", lambda F, M, x: F.vmap(lambda a: F.jvp(M.sin, (a,), (M.ones_like(a),))[1])(x)),
    ("vmap_vmap_grad", lambda F, M, x: F.vmap(F.vmap(F.grad(lambda a: (a ** 3).sum())))(x[:, :, None])),
    ("vmap_vmap_grad_two_in_dims", lambda F, M, x: F.vmap(F.vmap(F.grad(lambda a, w: (a * w).sum() ** 2, argnums=1),
                                                                 in_dims=(0, None)), in_dims=(None, 0))(x, x)),
    ("grad_of_grad_two_args", lambda F, M, x: F.grad(lambda a, b: F.grad(lambda c, d: (c * c * d).sum())(a, b).sum(),
                                                     argnums=(0, 1))(x[0], x[1])),
    ("hessian_argnums_tuple", lambda F, M, x: F.hessian(lambda a, b: (M.sin(a) * b).sum(), argnums=(0, 1))(x[0], x[1])),
    ("jacfwd_dict_input", lambda F, M, x: F.jacfwd(lambda d: d["a"] * d["b"].sum())({"a": x[0], "b": x[1]})),
    ("jacrev_dict_output", lambda F, M, x: F.jacrev(lambda a: {"s": a.sin(), "c": a.cos()})(x[0])),
    ("jacrev_chunk_1_argnums", lambda F, M, x: F.jacrev(lambda a, b: a * b, argnums=(0, 1), chunk_size=1)(x[0], x[1])),
    ("linearize_two_primals", lambda F, M, x: F.linearize(lambda a, b: a * M.sin(b), x[0], x[1])[1](x[2], x[3])),
    ("vjp_list_primal", lambda F, M, x: F.vjp(lambda l: l[0] * l[1], [x[0], x[1]])[1](x[2])),
    ("jvp_constant_output", lambda F, M, x: F.jvp(lambda a: M.ones(3), (x[0],), (x[1],))),
    ("grad_of_max", lambda F, M, x: F.grad(lambda a: a.max())(x[0])),
]


@pytest.mark.torch
@pytest.mark.parametrize("name,call", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_more_compositions_match_torch(name, call):
    x = rand(4, 3, seed=7)
    got = call(tsf, ts, T(x))
    assert_tree_close(got, call(tf, torch, P(x)))


def test_vmap_calls_a_module_directly():
    w, b, x = rand(2, 3), rand(2, seed=1), rand(5, 3, seed=2)
    lin = ts.nn.Linear(3, 2)
    with ts.no_grad():
        lin.weight.copy_(T(w))
        lin.bias.copy_(T(b))
    got = tsf.vmap(lin)(T(x))
    assert_tree_close(got, x.astype(np.float64) @ w.T + b, 1e-5, 1e-5)


# ---------------------------------------------------------------------------- memory
def test_transforms_leave_no_reference_cycles():
    """A transform's results and temporaries are freed when their last reference goes, not at the
    next cyclic garbage collection: a cycle through the pytree walk kept every vmap input and
    output (a 100 MB per-sample gradient) alive, so each call faulted in fresh pages."""
    import gc
    w = T(rand(4, 3))
    model = ts.nn.Linear(3, 2)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = T(rand(5, 3, seed=1))
    calls = {
        "vmap": lambda: tsf.vmap(lambda a: (a @ w.t()).relu(), in_dims=0, out_dims=0)(x),
        "vmap nested dims": lambda: tsf.vmap(lambda d: {"y": d["a"] * 2}, in_dims=({"a": 0},))({"a": x}),
        "vmap(grad)": lambda: tsf.vmap(tsf.grad(lambda a, b: (a @ b.t()).sin().sum()), in_dims=(0, None))(x, w),
        "jacrev": lambda: tsf.jacrev(lambda a: (a @ w.t()).tanh())(x[0]),
        "jacfwd": lambda: tsf.jacfwd(lambda a: (a @ w.t()).tanh())(x[0]),
        "hessian": lambda: tsf.hessian(lambda a: a.sin().sum())(x[0]),
        "functional_call": lambda: tsf.functional_call(model, params, (x,)),
    }
    for name, call in calls.items():
        call()
        gc.collect()
        gc.disable()
        try:
            for _ in range(3):
                call()
            unreachable = gc.collect()
        finally:
            gc.enable()
        assert unreachable == 0, f"{name}: {unreachable} objects were left in reference cycles"
