"""tessera.nn.utils.parametrize, tessera.nn.utils.parametrizations (weight_norm, spectral_norm,
orthogonal) and the old weight_norm / spectral_norm hooks: values and gradients against NumPy
references written here, and against PyTorch on the same inputs (and the same power-iteration
vectors) when it is importable; state_dict keys equal torch's."""
import copy
import pickle
import warnings

import numpy as np
import pytest

import tessera as ts
from conftest import HAVE_TORCH, T, close, from_torch, load_torch_state, to_np
from tessera.nn.utils import parametrizations as PZ
from tessera.nn.utils import parametrize as P

if HAVE_TORCH:
    import torch
else:  # pragma: no cover
    torch = None

RNG = np.random.default_rng(1234)


class Symmetric(ts.nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).mT


class SymmetricWithInverse(Symmetric):
    def right_inverse(self, A):
        return A.triu()


class Scale(ts.nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s

    def forward(self, X):
        return X * self.s

    def right_inverse(self, Y):
        return Y / self.s


class Split(ts.nn.Module):
    """Parametrized by two tensors: weight = A + B (right_inverse: A = W, B = 0)."""

    def forward(self, A, B):
        return A + B

    def right_inverse(self, W):
        return W, ts.zeros_like(W)


# ---------------------------------------------------------------------------- parametrize
def test_register_parametrization_moves_the_tensor_and_computes_it():
    w = RNG.standard_normal((3, 3)).astype(np.float32)
    m = ts.nn.Linear(3, 3)
    m.weight = ts.nn.Parameter(T(w))
    original = m.weight
    P.register_parametrization(m, "weight", Symmetric())
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight") and not P.is_parametrized(m, "bias")
    assert type(m).__name__ == "ParametrizedLinear" and P.type_before_parametrizations(m) is ts.nn.Linear
    assert isinstance(m, ts.nn.Linear) and type(ts.nn.Linear(2, 2)) is ts.nn.Linear  # other instances untouched
    assert isinstance(m.parametrizations, ts.nn.ModuleDict)
    assert isinstance(m.parametrizations.weight, P.ParametrizationList)
    assert m.parametrizations.weight.original is original  # the Parameter object is kept
    close(m.weight, np.triu(w) + np.triu(w, 1).T)
    assert sorted(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert [n for n, _ in m.named_parameters()] == ["bias", "parametrizations.weight.original"]
    # gradients flow to the original: d/dW sum(sym(W) * G) = triu(G) + tril(G, -1)^T
    g = RNG.standard_normal((3, 3)).astype(np.float32)
    (m.weight * T(g)).sum().backward()
    close(original.grad, np.triu(g) + np.triu(g.T, 1))


@pytest.mark.torch
def test_parametrize_state_dict_keys_and_values_match_torch():
    class TorchSymmetric(torch.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT

    class TorchScale(torch.nn.Module):
        def forward(self, X):
            return X * 2.0

        def right_inverse(self, Y):
            return Y / 2.0

    tm = torch.nn.Linear(4, 4)
    sm = ts.nn.Linear(4, 4)
    sm.load_state_dict({k: from_torch(v) for k, v in tm.state_dict().items()})
    torch.nn.utils.parametrize.register_parametrization(tm, "weight", TorchSymmetric())
    torch.nn.utils.parametrize.register_parametrization(tm, "weight", TorchScale())
    P.register_parametrization(sm, "weight", Symmetric())
    P.register_parametrization(sm, "weight", Scale(2.0))
    assert list(sm.state_dict()) == list(tm.state_dict())
    x = torch.randn(5, 4)
    yt, ys = tm(x), sm(from_torch(x))
    close(ys, yt)
    yt.square().sum().backward()
    ys.square().sum().backward()
    close(sm.parametrizations.weight.original.grad, tm.parametrizations.weight.original.grad, 1e-4)
    # assigning runs right_inverse through the chain (Scale's, then none for Symmetric: error)
    with pytest.raises(RuntimeError, match="Symmetric does not implement right_inverse"):
        sm.weight = ts.ones(4, 4)
    with pytest.raises(RuntimeError):
        tm.weight = torch.ones(4, 4)


def test_right_inverse_on_registration_and_on_assignment():
    m = ts.nn.Linear(3, 3)
    a = RNG.standard_normal((3, 3)).astype(np.float32)
    sym = a + a.T
    m.weight = ts.nn.Parameter(T(sym))
    P.register_parametrization(m, "weight", SymmetricWithInverse())
    close(m.parametrizations.weight.original, np.triu(sym))  # right_inverse of the weight
    close(m.weight, sym, 1e-6)
    b = RNG.standard_normal((3, 3)).astype(np.float32)
    m.weight = T(b + b.T)  # a plain tensor assigned: right_inverse sets the original
    close(m.parametrizations.weight.original, np.triu(b + b.T))
    close(m.weight, b + b.T, 1e-6)


def test_sequence_right_inverse_makes_original0_original1():
    m = ts.nn.Linear(2, 3)
    w = to_np(m.weight)
    P.register_parametrization(m, "weight", Split())
    assert sorted(m.state_dict()) == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    close(m.parametrizations.weight.original0, w)
    close(m.parametrizations.weight.original1, np.zeros_like(w))
    assert m.parametrizations.weight.original1.requires_grad
    with pytest.raises(ValueError, match="leave_parametrized=False"):
        P.remove_parametrizations(m, "weight", leave_parametrized=False)
    P.remove_parametrizations(m, "weight")
    assert type(m) is ts.nn.Linear and sorted(m.state_dict()) == ["bias", "weight"]
    close(m.weight, w)


def test_remove_parametrizations_leaves_value_or_original():
    w = RNG.standard_normal((3, 3)).astype(np.float32)
    for leave, expected in ((True, np.triu(w) + np.triu(w, 1).T), (False, w)):
        m = ts.nn.Linear(3, 3)
        m.weight = ts.nn.Parameter(T(w))
        P.register_parametrization(m, "weight", Symmetric())
        P.remove_parametrizations(m, "weight", leave_parametrized=leave)
        assert type(m) is ts.nn.Linear and not hasattr(m, "parametrizations")
        assert isinstance(m.weight, ts.nn.Parameter) and sorted(m.state_dict()) == ["bias", "weight"]
        close(m.weight, expected)
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(m, "weight")


def test_parametrized_buffer_stays_a_buffer():
    m = ts.nn.Module()
    m.register_buffer("table", T(np.arange(4.0).reshape(2, 2)))
    P.register_parametrization(m, "table", Scale(3.0))
    assert list(m.state_dict()) == ["parametrizations.table.original"] and not list(m.parameters())
    close(m.table, np.arange(4.0).reshape(2, 2))  # right_inverse divided by 3, forward multiplies back
    close(m.parametrizations.table.original, np.arange(4.0).reshape(2, 2) / 3)


def test_unsafe_allows_shape_and_dtype_changes_only_when_asked():
    class Flatten(ts.nn.Module):
        def forward(self, X):
            return X.reshape(-1)

    class ToDouble(ts.nn.Module):
        def forward(self, X):
            return X.double()

    m = ts.nn.Linear(2, 3)
    with pytest.raises(ValueError, match=r"may not change the shape.*\nunparametrized shape: \(3, 2\)\n"
                                         r"parametrized shape: \(6,\)"):
        P.register_parametrization(m, "weight", Flatten())
    with pytest.raises(ValueError, match="may not change the dtype"):
        P.register_parametrization(m, "weight", ToDouble())
    assert type(m) is ts.nn.Linear and "weight" in m._parameters  # the failed registrations left it as it was
    P.register_parametrization(m, "weight", Flatten(), unsafe=True)
    assert tuple(m.weight.shape) == (6,) and m.parametrizations.weight.unsafe


@pytest.mark.torch
def test_bad_registrations_raise_torch_exception_types():
    tm, sm = torch.nn.Linear(2, 3), ts.nn.Linear(2, 3)
    with pytest.raises(ValueError) as te:
        torch.nn.utils.parametrize.register_parametrization(tm, "nope", torch.nn.Identity())
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element with name "
                                         "'nope'"):
        P.register_parametrization(sm, "nope", ts.nn.Identity())
    assert "nope" in str(te.value)
    with pytest.raises(ValueError):
        torch.nn.utils.parametrize.remove_parametrizations(tm, "weight")
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(sm, "weight")
    with pytest.raises(ValueError):
        torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(2, 3), orthogonal_map="qr")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                                         "Got: qr"):
        PZ.orthogonal(ts.nn.Linear(2, 3), orthogonal_map="qr")
    with pytest.raises(ValueError):
        torch.nn.utils.parametrizations.orthogonal(torch.nn.BatchNorm1d(3))
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1 dimensions."):
        PZ.orthogonal(ts.nn.BatchNorm1d(3))
    with pytest.raises(ValueError):
        torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(2, 3), n_power_iterations=0)
    with pytest.raises(ValueError, match="n_power_iterations to be positive, but got n_power_iterations=0"):
        PZ.spectral_norm(ts.nn.Linear(2, 3), n_power_iterations=0)
    with pytest.raises(IndexError):
        torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(2, 3), dim=2)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\] but got 2\)"):
        PZ.spectral_norm(ts.nn.Linear(2, 3), dim=2)


def test_cached_computes_once_per_context():
    calls = []

    class Counting(ts.nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 2

    m = ts.nn.Linear(2, 2)
    P.register_parametrization(m, "weight", Counting())
    calls.clear()
    m.weight, m.weight
    assert len(calls) == 2
    with P.cached():
        a = m.weight
        with P.cached():  # nested contexts share the cache
            b = m.weight
        assert m.weight is a and b is a  # the inner context's exit kept the cache
    assert len(calls) == 3
    m.weight
    assert len(calls) == 4  # the cache is gone after the outermost context


def test_parametrized_module_deepcopies_but_does_not_pickle():
    m = ts.nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Symmetric())
    c = copy.deepcopy(m)
    assert type(c).__name__ == "ParametrizedLinear"
    close(c.weight, to_np(m.weight))
    assert c.parametrizations.weight.original is not m.parametrizations.weight.original
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(m)


def test_transfer_parametrizations_and_params_shares_originals():
    a, b = ts.nn.Linear(3, 3), ts.nn.Linear(3, 3)
    P.register_parametrization(a, "weight", Symmetric())
    P.transfer_parametrizations_and_params(a, b)
    assert b.parametrizations.weight.original is a.parametrizations.weight.original
    close(b.weight, to_np(a.weight))


# ---------------------------------------------------------------------------- the linear-algebra pieces
@pytest.mark.torch
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 4, 3)])
def test_geqrf_and_householder_product_match_torch(shape):
    A = torch.randn(*shape, dtype=torch.float64)
    a, tau = torch.geqrf(A)
    b, tb = PZ._geqrf(from_torch(A))
    close(b, a, 1e-10)
    close(tb, tau, 1e-10)
    if shape[-2] < shape[-1]:
        return  # householder_product takes m >= n only
    Q = torch.linalg.householder_product(a, tau)
    a_s = from_torch(a, requires_grad=True)
    tau_s = from_torch(tau, requires_grad=True)
    Qs = PZ._householder_product(a_s, tau_s)
    close(Qs, Q, 1e-10)
    a_t, tau_t = a.clone().requires_grad_(True), tau.clone().requires_grad_(True)
    g = torch.randn(*Q.shape, dtype=torch.float64)
    (torch.linalg.householder_product(a_t, tau_t) * g).sum().backward()
    (Qs * from_torch(g)).sum().backward()
    close(a_s.grad, a_t.grad, 1e-8)
    close(tau_s.grad, tau_t.grad, 1e-8)


def test_matrix_exp_against_numpy_series():
    # exp of a skew-symmetric matrix is orthogonal; of a diagonal one, the exponentials
    a = RNG.standard_normal((4, 4)) * 3
    skew = a - a.T
    E = to_np(PZ._matrix_exp(T(skew, dtype=np.float64)))
    np.testing.assert_allclose(E.T @ E, np.eye(4), atol=1e-10)
    d = np.diag([-2.0, 0.5, 3.0, 7.0])
    np.testing.assert_allclose(to_np(PZ._matrix_exp(T(d, dtype=np.float64))), np.diag(np.exp(np.diag(d))), rtol=1e-12)


@pytest.mark.torch
def test_matrix_exp_value_and_gradient_match_torch():
    A = torch.randn(2, 5, 5, dtype=torch.float64) * 2
    At = A.clone().requires_grad_(True)
    As = from_torch(A, requires_grad=True)
    Et, Es = torch.matrix_exp(At), PZ._matrix_exp(As)
    close(Es, Et, 1e-9)
    g = torch.randn(2, 5, 5, dtype=torch.float64)
    (Et * g).sum().backward()
    (Es * from_torch(g)).sum().backward()
    close(As.grad, At.grad, 1e-8)


# ---------------------------------------------------------------------------- orthogonal
@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_orthogonal_is_orthogonal(orthogonal_map, shape):
    m = ts.nn.Linear(shape[1], shape[0], bias=False)
    PZ.orthogonal(m, orthogonal_map=orthogonal_map)
    W = to_np(m.weight).astype(np.float64)
    gram = W.T @ W if shape[0] >= shape[1] else W @ W.T
    np.testing.assert_allclose(gram, np.eye(min(shape)), atol=1e-5)
    base = "parametrizations.weight.original"
    assert sorted(m.state_dict()) == ["parametrizations.weight.0.base", base]
    # assigning an orthogonal matrix stores it (as base) and reads it back
    q, _ = np.linalg.qr(RNG.standard_normal((max(shape), min(shape))))
    q = (q if shape[0] >= shape[1] else q.T).astype(np.float32)
    m.weight = T(q)
    close(m.weight, q, 1e-5)


@pytest.mark.torch
@pytest.mark.parametrize("use_trivialization", [True, False])
@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
def test_orthogonal_matches_torch(shape, orthogonal_map, use_trivialization):
    w0 = torch.randn(*shape)
    tm = torch.nn.Module()
    tm.weight = torch.nn.Parameter(w0.clone())
    sm = ts.nn.Module()
    sm.weight = ts.nn.Parameter(from_torch(w0))
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=orthogonal_map,
                                               use_trivialization=use_trivialization)
    PZ.orthogonal(sm, orthogonal_map=orthogonal_map, use_trivialization=use_trivialization)
    if orthogonal_map == "householder" or use_trivialization:  # registration's own result (QR / geqrf of w0)
        close(sm.weight, tm.weight, 1e-4)
    load_torch_state(sm, tm)
    close(sm.weight, tm.weight, 2e-5)
    g = torch.randn(*shape)
    (tm.weight * g).sum().backward()
    (sm.weight * from_torch(g)).sum().backward()
    close(sm.parametrizations.weight.original.grad, tm.parametrizations.weight.original.grad, 1e-4)


def test_orthogonal_right_inverse_without_trivialization_is_not_possible_for_matrix_exp():
    m = ts.nn.Linear(3, 3, bias=False)
    PZ.orthogonal(m, orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        m.weight = ts.eye(3)
    with pytest.raises(ValueError, match=r"Expected a matrix or batch of matrices of shape \(3, 3\). Got a tensor of "
                                         r"shape \(2, 2\)"):
        m.parametrizations.weight[0].right_inverse(ts.eye(2))


# ---------------------------------------------------------------------------- weight_norm
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization_numpy(dim):
    m = ts.nn.Linear(4, 3)
    w = to_np(m.weight).astype(np.float64)
    PZ.weight_norm(m, dim=dim)
    assert sorted(m.state_dict()) == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    g = to_np(m.parametrizations.weight.original0)
    if dim is None:
        np.testing.assert_allclose(g, np.linalg.norm(w), rtol=1e-5)
    else:
        np.testing.assert_allclose(g, np.linalg.norm(w, axis=1 - dim, keepdims=True), rtol=1e-5)
    close(m.weight, w)  # g * v / ||v|| is the weight
    with ts.no_grad():
        m.parametrizations.weight.original0.mul_(2.0)
    close(m.weight, 2 * w, 1e-5)


@pytest.mark.torch
@pytest.mark.parametrize("dim", [0, 1, -1, None, -2])
def test_weight_norm_parametrization_matches_torch(dim):
    tm = torch.nn.Conv2d(3, 4, 3)
    sm = ts.nn.Conv2d(3, 4, 3)
    sm.load_state_dict({k: from_torch(v) for k, v in tm.state_dict().items()})
    torch.nn.utils.parametrizations.weight_norm(tm, dim=dim)
    PZ.weight_norm(sm, dim=dim)
    assert list(sm.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        close(sm.state_dict()[k], v, 1e-5)
    x = torch.randn(2, 3, 6, 6)
    yt, ys = tm(x), sm(from_torch(x))
    close(ys, yt, 1e-4)
    yt.square().sum().backward()
    ys.square().sum().backward()
    for i in (0, 1):
        close(getattr(sm.parametrizations.weight, f"original{i}").grad,
              getattr(tm.parametrizations.weight, f"original{i}").grad, 2e-3)


def test_weight_norm_parametrization_loads_the_old_hooks_state_dict():
    old = ts.nn.Linear(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ts.nn.utils.weight_norm(old)
    new = PZ.weight_norm(ts.nn.Linear(3, 2))
    new.load_state_dict(old.state_dict())
    close(new.parametrizations.weight.original0, to_np(old.weight_g))
    x = T(RNG.standard_normal((4, 3)))
    close(new(x), to_np(old(x)))


# ---------------------------------------------------------------------------- spectral_norm
def test_spectral_norm_parametrization_numpy():
    m = ts.nn.Linear(6, 5)
    w = to_np(m.weight).astype(np.float64)
    PZ.spectral_norm(m, n_power_iterations=50)
    assert sorted(m.state_dict()) == ["bias", "parametrizations.weight.0._u", "parametrizations.weight.0._v",
                                      "parametrizations.weight.original"]
    sigma = np.linalg.svd(w, compute_uv=False)[0]
    close(m.weight, w / sigma, 1e-4)
    m.eval()  # no power iteration: the same value again
    close(m.weight, w / sigma, 1e-4)


@pytest.mark.torch
@pytest.mark.parametrize("kind", ["linear", "conv_transpose"])
def test_spectral_norm_parametrization_matches_torch(kind):
    if kind == "linear":
        tm, sm, x = torch.nn.Linear(5, 4), ts.nn.Linear(5, 4), torch.randn(3, 5)
    else:  # dim 1 by default
        tm, sm, x = torch.nn.ConvTranspose2d(3, 4, 3), ts.nn.ConvTranspose2d(3, 4, 3), torch.randn(2, 3, 5, 5)
    sm.load_state_dict({k: from_torch(v) for k, v in tm.state_dict().items()})
    torch.nn.utils.parametrizations.spectral_norm(tm)
    PZ.spectral_norm(sm)
    assert sm.parametrizations.weight[0].dim == tm.parametrizations.weight[0].dim
    load_torch_state(sm, tm)  # the same u and v
    for _ in range(2):  # each training-mode read takes one power-iteration step
        yt, ys = tm(x), sm(from_torch(x))
        close(ys, yt, 1e-4)
        close(sm.parametrizations.weight[0]._u, tm.parametrizations.weight[0]._u, 1e-5)
    yt.square().sum().backward()
    ys.square().sum().backward()
    close(sm.parametrizations.weight.original.grad, tm.parametrizations.weight.original.grad, 1e-3)
    tm.eval()
    sm.eval()
    close(sm(from_torch(x)), tm(x), 1e-4)


# ---------------------------------------------------------------------------- the old hooks
def test_old_weight_norm_hook_numpy_and_remove():
    m = ts.nn.Linear(4, 3)
    w = to_np(m.weight).astype(np.float64)
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        ts.nn.utils.weight_norm(m)
    assert sorted(m.state_dict()) == ["bias", "weight_g", "weight_v"]
    np.testing.assert_allclose(to_np(m.weight_g), np.linalg.norm(w, axis=1, keepdims=True), rtol=1e-5)
    with ts.no_grad():
        m.weight_g.mul_(3.0)
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    close(m(T(x)), x @ (3 * w).T + to_np(m.bias), 1e-4)  # the pre-hook recomputed weight
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks on the same parameter weight"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            ts.nn.utils.weight_norm(m)
    ts.nn.utils.remove_weight_norm(m)
    assert sorted(m.state_dict()) == ["bias", "weight"] and isinstance(m.weight, ts.nn.Parameter)
    close(m.weight, 3 * w, 1e-5)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in"):
        ts.nn.utils.remove_weight_norm(m)


@pytest.mark.torch
@pytest.mark.parametrize("dim", [0, 1, None])
def test_old_weight_norm_hook_matches_torch(dim):
    tm, sm = torch.nn.Conv1d(3, 4, 3), ts.nn.Conv1d(3, 4, 3)
    sm.load_state_dict({k: from_torch(v) for k, v in tm.state_dict().items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.nn.utils.weight_norm(tm, dim=dim)
        ts.nn.utils.weight_norm(sm, dim=dim)
    assert list(sm.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        close(sm.state_dict()[k], v, 1e-5)
    x = torch.randn(2, 3, 8)
    yt, ys = tm(x), sm(from_torch(x))
    close(ys, yt, 1e-4)
    yt.square().sum().backward()
    ys.square().sum().backward()
    close(sm.weight_g.grad, tm.weight_g.grad, 2e-3)
    close(sm.weight_v.grad, tm.weight_v.grad, 2e-3)
    torch.nn.utils.remove_weight_norm(tm)
    ts.nn.utils.remove_weight_norm(sm)
    assert list(sm.state_dict()) == list(tm.state_dict())
    close(sm.weight, tm.weight, 1e-5)


@pytest.mark.torch
def test_old_weight_norm_on_a_buffer_raises_keyerror_like_torch():
    tm, sm = torch.nn.Module(), ts.nn.Module()
    tm.register_buffer("weight", torch.ones(2, 2))
    sm.register_buffer("weight", ts.ones(2, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.raises(KeyError):
            torch.nn.utils.weight_norm(tm)
        with pytest.raises(KeyError, match="weight_norm: expected 'weight' to be a parameter of Module, got a buffer"):
            ts.nn.utils.weight_norm(sm)


def test_old_spectral_norm_hook_numpy_keys_and_remove():
    m = ts.nn.Linear(6, 5)
    w = to_np(m.weight).astype(np.float64)
    ts.nn.utils.spectral_norm(m, n_power_iterations=60)
    assert sorted(m.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert m.state_dict()._metadata[""]["spectral_norm"] == {"weight.version": 1}
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    sigma = np.linalg.svd(w, compute_uv=False)[0]
    close(m(T(x)), x @ (w / sigma).T + to_np(m.bias), 1e-4)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks on the same parameter weight"):
        ts.nn.utils.spectral_norm(m)
    ts.nn.utils.remove_spectral_norm(m)
    assert sorted(m.state_dict()) == ["bias", "weight"]
    close(m.weight, w / sigma, 1e-4)
    m.load_state_dict(m.state_dict())  # no spectral-norm hook is left behind
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in"):
        ts.nn.utils.remove_spectral_norm(m)


@pytest.mark.torch
@pytest.mark.parametrize("kind", ["linear", "conv_transpose"])
def test_old_spectral_norm_hook_matches_torch(kind):
    if kind == "linear":
        tm, sm, x = torch.nn.Linear(5, 4), ts.nn.Linear(5, 4), torch.randn(3, 5)
    else:
        tm, sm, x = torch.nn.ConvTranspose1d(3, 4, 3), ts.nn.ConvTranspose1d(3, 4, 3), torch.randn(2, 3, 7)
    sm.load_state_dict({k: from_torch(v) for k, v in tm.state_dict().items()})
    torch.nn.utils.spectral_norm(tm)
    ts.nn.utils.spectral_norm(sm)
    sd = tm.state_dict()
    assert list(sm.state_dict()) == list(sd)
    assert sm.state_dict()._metadata == dict(sd._metadata)
    sm.load_state_dict({k: from_torch(v) for k, v in sd.items()})
    for _ in range(2):
        yt, ys = tm(x), sm(from_torch(x))
        close(ys, yt, 1e-4)
        close(sm.weight_u, tm.weight_u, 1e-5)
        close(sm.weight_v, tm.weight_v, 1e-5)
    yt.square().sum().backward()
    ys.square().sum().backward()
    close(sm.weight_orig.grad, tm.weight_orig.grad, 1e-3)
    torch.nn.utils.remove_spectral_norm(tm)
    ts.nn.utils.remove_spectral_norm(sm)
    assert list(sm.state_dict()) == list(tm.state_dict())
    close(sm.weight, tm.weight, 1e-5)


@pytest.mark.torch
def test_old_spectral_norm_loads_a_version_none_state_dict_like_torch():
    """A state_dict saved before v was a buffer (weight kept, no weight_v): v is solved from it
    (W^T W must be invertible: a tall weight)."""
    tm, sm = torch.nn.Linear(3, 5), ts.nn.Linear(3, 5)
    torch.nn.utils.spectral_norm(tm)
    ts.nn.utils.spectral_norm(sm)
    tm(torch.randn(2, 3))  # computes tm.weight
    with torch.no_grad():
        tm.weight_u.copy_(torch.nn.functional.normalize(torch.randn(5), dim=0))  # not W's own singular vector
    old = {k: v for k, v in tm.state_dict().items() if k != "weight_v"}
    old["weight"] = tm.weight.detach()
    torch_old = dict(old)
    tm.load_state_dict(torch_old, strict=False)
    sm.load_state_dict({k: from_torch(v) for k, v in old.items()}, strict=False)
    close(sm.weight_v, tm.weight_v, 1e-4)
    tm.eval()
    sm.eval()
    x = torch.randn(2, 3)
    close(sm(from_torch(x)), tm(x), 1e-4)
