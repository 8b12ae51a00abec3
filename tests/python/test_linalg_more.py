"""The rest of torch.linalg (tessera/_linalg_more.py): triangular solves, LU with its permutation, the *_ex
variants, matrix_power / matrix_exp / matrix_sqrth / polar, cond, multi_dot, tensorinv / tensorsolve, vander,
householder_product. Against PyTorch on the same well-conditioned random inputs (float32, float64, batched),
gradients against PyTorch's and by finite differences, and the errors (LinAlgError where torch raises it)."""
import math
import warnings

import numpy as np
import pytest

import tessera as ts
from tessera.autograd import gradcheck
from conftest import HAVE_TORCH, from_np, to_np

RNG = np.random.default_rng(2026)
LA = ts.linalg
TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-10)}


def well(*shape, dtype=np.float64):
    """Square matrices with a dominant diagonal: invertible and well-conditioned."""
    n = shape[-1]
    return (RNG.standard_normal(shape) + n * np.eye(shape[-2], n)).astype(dtype)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def spd(*shape, dtype=np.float64):
    a = RNG.standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def torch_mod():
    return pytest.importorskip("torch")


def close(ours, theirs, dtype=np.float64, scale=1.0):
    tol = TOL[dtype]
    np.testing.assert_allclose(to_np(ours), theirs.detach().numpy(), rtol=tol["rtol"], atol=tol["atol"] * scale)


# ---- names
@pytest.mark.torch
def test_every_torch_linalg_name():
    torch = torch_mod()
    theirs = {k for k in dir(torch.linalg) if not k.startswith("_")}
    ours = {k for k in dir(LA) if not k.startswith("_")}
    assert theirs - ours <= {"common_notes"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ldl_factor_and_solve(dtype):
    # symmetric indefinite matrices (one with a zero corner, so a 2x2 pivot block appears)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 5, 5))
    a = (a + np.swapaxes(a, 1, 2)).astype(dtype)
    a[1, 0, 0] = 0
    b = rng.standard_normal((3, 5, 2)).astype(dtype)
    ld, piv = LA.ldl_factor(from_np(a))
    assert piv.dtype == ts.int32 and np.allclose(np.triu(to_np(ld), 1), 0)
    x = LA.ldl_solve(ld, piv, from_np(b))
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(a.astype(np.float64) @ to_np(x).astype(np.float64), b, rtol=tol, atol=tol)
    if HAVE_TORCH:
        torch = torch_mod()
        tld, tpiv = torch.linalg.ldl_factor(torch.from_numpy(a))
        np.testing.assert_allclose(to_np(ld), tld.numpy(), rtol=tol, atol=tol)
        np.testing.assert_array_equal(to_np(piv), tpiv.numpy())
    # a singular matrix: info names the zero pivot; check_errors raises
    zero = ts.zeros(3, 3, dtype=ts.float64)
    assert LA.ldl_factor_ex(zero).info.item() == 1
    with pytest.raises(ValueError, match="singular"):
        LA.ldl_factor(zero)
    with pytest.raises(ValueError, match="incompatible matrix sizes"):
        LA.ldl_solve(ld, piv, from_np(b[:, :4]))
    # as torch: no derivative
    w = from_np(a).requires_grad_()
    with pytest.raises(RuntimeError, match="derivative of 'linalg_ldl_factor_ex' is not implemented"):
        LA.ldl_factor(w).LD.sum().backward()


def test_lin_alg_error_is_a_runtime_error():
    assert issubclass(LA.LinAlgError, RuntimeError)


# ---- forward values against torch: (name, our call, torch's call, input makers)
def _cases():
    return [
        ("matmul", lambda L, a, b: L.linalg.matmul(a, b),
         (lambda d: rand(2, 3, 4, dtype=d), lambda d: rand(4, 5, dtype=d))),
        ("diagonal", lambda L, a: L.linalg.diagonal(a, offset=1), (lambda d: rand(2, 3, 4, dtype=d),)),
        ("diagonal_dims", lambda L, a: L.linalg.diagonal(a, offset=-1, dim1=0, dim2=2),
         (lambda d: rand(4, 2, 3, dtype=d),)),
        ("matrix_power_5", lambda L, a: L.linalg.matrix_power(a, 5), (lambda d: well(2, 4, 4, dtype=d) / 4,)),
        ("matrix_power_0", lambda L, a: L.linalg.matrix_power(a, 0), (lambda d: well(2, 4, 4, dtype=d),)),
        ("matrix_power_1", lambda L, a: L.linalg.matrix_power(a, 1), (lambda d: well(2, 4, 4, dtype=d),)),
        ("matrix_power_-3", lambda L, a: L.linalg.matrix_power(a, -3), (lambda d: well(2, 4, 4, dtype=d) / 4,)),
        ("matrix_exp_small", lambda L, a: L.linalg.matrix_exp(a), (lambda d: rand(2, 4, 4, dtype=d) * 1e-3,)),
        ("matrix_exp", lambda L, a: L.linalg.matrix_exp(a), (lambda d: rand(3, 4, 4, dtype=d),)),
        ("matrix_exp_scaled", lambda L, a: L.linalg.matrix_exp(a), (lambda d: rand(2, 5, 5, dtype=d) * 3,)),
        ("inv_ex", lambda L, a: L.linalg.inv_ex(a).inverse, (lambda d: well(2, 4, 4, dtype=d),)),
        ("solve_ex", lambda L, a, b: L.linalg.solve_ex(a, b).result,
         (lambda d: well(2, 4, 4, dtype=d), lambda d: rand(2, 4, 3, dtype=d))),
        ("solve_ex_right", lambda L, a, b: L.linalg.solve_ex(a, b, left=False).result,
         (lambda d: well(2, 4, 4, dtype=d), lambda d: rand(2, 3, 4, dtype=d))),
        ("cond", lambda L, a: L.linalg.cond(a), (lambda d: well(2, 4, 4, dtype=d),)),
        ("cond_wide", lambda L, a: L.linalg.cond(a), (lambda d: rand(2, 3, 5, dtype=d),)),
        ("cond_-2", lambda L, a: L.linalg.cond(a, -2), (lambda d: well(2, 4, 4, dtype=d),)),
        ("cond_1", lambda L, a: L.linalg.cond(a, 1), (lambda d: well(2, 4, 4, dtype=d),)),
        ("cond_-1", lambda L, a: L.linalg.cond(a, -1), (lambda d: well(2, 4, 4, dtype=d),)),
        ("cond_inf", lambda L, a: L.linalg.cond(a, math.inf), (lambda d: well(2, 4, 4, dtype=d),)),
        ("cond_fro", lambda L, a: L.linalg.cond(a, "fro"), (lambda d: well(2, 4, 4, dtype=d),)),
        ("cond_nuc", lambda L, a: L.linalg.cond(a, "nuc"), (lambda d: well(2, 4, 4, dtype=d),)),
        ("vander", lambda L, x: L.linalg.vander(x), (lambda d: rand(2, 4, dtype=d),)),
        ("vander_N", lambda L, x: L.linalg.vander(x, N=6), (lambda d: rand(3, dtype=d),)),
        ("tensorinv", lambda L, a: L.linalg.tensorinv(a), (lambda d: well(24, 24, dtype=d).reshape(4, 6, 8, 3),)),
        ("tensorinv_ind1", lambda L, a: L.linalg.tensorinv(a, ind=1),
         (lambda d: well(6, 6, dtype=d).reshape(6, 2, 3),)),
        ("tensorsolve", lambda L, a, b: L.linalg.tensorsolve(a, b),
         (lambda d: well(6, 6, dtype=d).reshape(2, 3, 6), lambda d: rand(2, 3, dtype=d))),
        ("tensorsolve_dims", lambda L, a, b: L.linalg.tensorsolve(a, b, dims=(0,)),
         (lambda d: well(6, 6, dtype=d).T.reshape(6, 2, 3), lambda d: rand(2, 3, dtype=d))),
        ("householder_product", lambda L, a, t: L.linalg.householder_product(a, t),
         (lambda d: rand(2, 5, 3, dtype=d), lambda d: RNG.uniform(0.5, 1.5, (2, 3)).astype(d))),
        ("householder_product_short_tau", lambda L, a, t: L.linalg.householder_product(a, t),
         (lambda d: rand(4, 3, dtype=d), lambda d: RNG.uniform(0.5, 1.5, (2,)).astype(d))),
        ("matrix_sqrth", lambda L, a: L.linalg.matrix_sqrth(a), (lambda d: spd(2, 4, 4, dtype=d),)),
        ("polar_U", lambda L, a: L.linalg.polar(a).U, (lambda d: well(2, 5, 3, dtype=d),)),
        ("polar_H", lambda L, a: L.linalg.polar(a).H, (lambda d: well(2, 5, 3, dtype=d),)),
        ("multi_dot", lambda L, *m: L.linalg.multi_dot(list(m)),
         (lambda d: rand(3, 10, dtype=d), lambda d: rand(10, 2, dtype=d), lambda d: rand(2, 7, dtype=d),
          lambda d: rand(7, 4, dtype=d))),
        ("multi_dot_vectors", lambda L, *m: L.linalg.multi_dot(list(m)),
         (lambda d: rand(3, dtype=d), lambda d: rand(3, 5, dtype=d), lambda d: rand(5, dtype=d))),
        ("multi_dot_two", lambda L, *m: L.linalg.multi_dot(list(m)),
         (lambda d: rand(3, dtype=d), lambda d: rand(3, 2, dtype=d))),
        ("top_matrix_power", lambda L, a: L.matrix_power(a, 3), (lambda d: well(2, 3, 3, dtype=d) / 3,)),
        ("top_matrix_exp", lambda L, a: L.matrix_exp(a), (lambda d: rand(2, 3, 3, dtype=d),)),
        ("top_vander", lambda L, x: L.vander(x, 4, increasing=False), (lambda d: rand(3, dtype=d),)),
    ]


CASES = _cases()


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,fn,makers", CASES, ids=[c[0] for c in CASES])
def test_against_torch(name, fn, makers, dtype):
    torch = torch_mod()
    arrays = [m(dtype) for m in makers]
    ours = fn(ts, *[from_np(a) for a in arrays])
    theirs = fn(torch, *[torch.from_numpy(a) for a in arrays])
    scale = max(1.0, float(theirs.abs().max()))
    close(ours, theirs, dtype, scale)


# ---- solve_triangular over every flag, batched and broadcast
@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular_against_torch(dtype, upper, left, unit):
    torch = torch_mod()
    A = well(2, 1, 4, 4, dtype=dtype)
    B = rand(3, 4, 2, dtype=dtype) if left else rand(3, 2, 4, dtype=dtype)
    ours = LA.solve_triangular(from_np(A), from_np(B), upper=upper, left=left, unitriangular=unit)
    theirs = torch.linalg.solve_triangular(torch.from_numpy(A), torch.from_numpy(B), upper=upper, left=left,
                                           unitriangular=unit)
    assert tuple(ours.shape) == tuple(theirs.shape)
    close(ours, theirs, dtype, 10.0)


@pytest.mark.torch
def test_triangular_solve_shares_solve_triangular():
    torch = torch_mod()
    A, B = well(2, 4, 4), rand(2, 4, 3)
    for upper in (True, False):
        for transpose in (True, False):
            with pytest.warns(UserWarning):
                ours = ts.triangular_solve(from_np(B), from_np(A), upper, transpose)
            with warnings.catch_warnings():  # torch warns once per process
                warnings.simplefilter("ignore")
                theirs = torch.triangular_solve(torch.from_numpy(B), torch.from_numpy(A), upper, transpose)
            close(ours.solution, theirs.solution)


def test_solve_triangular_singular_gives_inf_not_error():
    A = ts.tensor([[1.0, 2.0], [0.0, 0.0]])
    X = LA.solve_triangular(A, ts.ones(2, 1), upper=True)
    assert not np.isfinite(to_np(X)).all()


# ---- LU
@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 4, 4), (3, 5, 3), (3, 3, 5), (4, 4)])
@pytest.mark.parametrize("grad", [False, True])
def test_lu_against_torch(dtype, shape, grad):
    torch = torch_mod()
    a = rand(*shape, dtype=dtype)
    P, L, U = LA.lu(from_np(a).requires_grad_(grad))
    tP, tL, tU = torch.linalg.lu(torch.from_numpy(a))
    for ours, theirs in ((P, tP), (L, tL), (U, tU)):
        assert tuple(ours.shape) == tuple(theirs.shape)
        close(ours, theirs, dtype, 10.0)
    np.testing.assert_allclose(to_np(P @ L @ U), a, **TOL[dtype])
    assert L.requires_grad == grad and U.requires_grad == grad


@pytest.mark.torch
def test_lu_of_singular_and_empty_matrices_as_torch():
    torch = torch_mod()
    for a in (np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 2.0], [1.0, 1.0, 1.0]]), np.ones((2, 3, 3)), np.zeros((3, 0)),
              np.zeros((0, 2))):
        theirs = torch.linalg.lu(torch.from_numpy(a))
        for grad in (False, True):
            ours = LA.lu(from_np(a).requires_grad_(grad))
            for o, t in zip(ours, theirs):
                assert tuple(o.shape) == tuple(t.shape)
                close(o, t)


@pytest.mark.torch
@pytest.mark.parametrize("shape", [(2, 4, 4), (5, 3), (3, 5)])
def test_lu_factor_gradients_against_torch(shape):
    torch = torch_mod()
    a = rand(*shape)
    W = rand(*shape)
    x = from_np(a).requires_grad_()
    LU, piv = LA.lu_factor(x)
    assert LU.requires_grad
    (LU * from_np(W)).sum().backward()
    tx = torch.from_numpy(a).requires_grad_()
    tLU, tpiv = torch.linalg.lu_factor(tx)
    (tLU * torch.from_numpy(W)).sum().backward()
    close(LU, tLU)
    np.testing.assert_array_equal(to_np(piv), tpiv.numpy())
    np.testing.assert_allclose(to_np(x.grad), tx.grad.numpy(), rtol=1e-8, atol=1e-9)


# ---- gradients against torch
GRADS = [
    ("solve_triangular", lambda L, a, b: L.linalg.solve_triangular(a, b, upper=True), (2, 4, 4), (2, 4, 3)),
    ("solve_triangular_lower_right_unit", lambda L, a, b: L.linalg.solve_triangular(
        a, b, upper=False, left=False, unitriangular=True), (2, 4, 4), (2, 3, 4)),
    ("lu", lambda L, a, b: (lambda r: r.L * 2 + r.U.sum(-1, keepdim=True) * b)(L.linalg.lu(a)), (2, 4, 4), (2, 4, 4)),
    ("matrix_exp", lambda L, a, b: L.linalg.matrix_exp(a) * b, (2, 4, 4), (2, 4, 4)),
    ("matrix_exp_scaled", lambda L, a, b: L.linalg.matrix_exp(a / 2) * b, (2, 4, 4), (2, 4, 4)),
    ("matrix_power", lambda L, a, b: L.linalg.matrix_power(a / 4, 3) * b, (2, 4, 4), (2, 4, 4)),
    ("matrix_power_neg", lambda L, a, b: L.linalg.matrix_power(a, -2) * b, (2, 4, 4), (2, 4, 4)),
    ("inv_ex", lambda L, a, b: L.linalg.inv_ex(a).inverse * b, (2, 4, 4), (2, 4, 4)),
    ("solve_ex", lambda L, a, b: L.linalg.solve_ex(a, b).result, (2, 4, 4), (2, 4, 3)),
    ("cond", lambda L, a, b: L.linalg.cond(a) * b.sum(), (2, 4, 4), (3,)),
    ("multi_dot", lambda L, a, b: L.linalg.multi_dot([a[0], b, a[1], b]), (2, 4, 4), (4, 4)),
    ("tensorinv", lambda L, a, b: L.linalg.tensorinv(a.reshape(2, 2, 2, 2, 2)[0]) * b, (2, 4, 4), (2, 2, 2, 2)),
    ("tensorsolve", lambda L, a, b: L.linalg.tensorsolve(a[0].reshape(2, 2, 4), b), (2, 4, 4), (2, 2)),
    ("vander", lambda L, a, b: L.linalg.vander(a[..., 0]) * b, (2, 4, 4), (2, 4, 4)),
    ("householder_product", lambda L, a, b: L.linalg.householder_product(a[..., :3], b[..., :3]), (2, 4, 4), (2, 4)),
    ("matrix_sqrth", lambda L, a, b: L.linalg.matrix_sqrth(a @ a.mT) * b, (2, 4, 4), (2, 4, 4)),
    ("polar", lambda L, a, b: (lambda r: r.U * b + r.H.sum())(L.linalg.polar(a)), (2, 4, 4), (2, 4, 4)),
]


@pytest.mark.torch
@pytest.mark.parametrize("name,fn,sa,sb", GRADS, ids=[g[0] for g in GRADS])
def test_gradients_against_torch(name, fn, sa, sb):
    torch = torch_mod()
    a, b = well(*sa), rand(*sb)
    xa, xb = from_np(a).requires_grad_(), from_np(b).requires_grad_()
    out = fn(ts, xa, xb)
    W = rand(*out.shape)
    (out * from_np(W)).sum().backward()
    ta, tb = torch.from_numpy(a).requires_grad_(), torch.from_numpy(b).requires_grad_()
    (fn(torch, ta, tb) * torch.from_numpy(W)).sum().backward()
    np.testing.assert_allclose(to_np(xa.grad), ta.grad.numpy(), rtol=1e-7, atol=1e-8, err_msg=name)
    np.testing.assert_allclose(to_np(xb.grad), tb.grad.numpy(), rtol=1e-7, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("name,fn", [
    ("lu", lambda A: tuple(LA.lu(A))[1:]), ("lu_factor", lambda A: LA.lu_factor(A).LU),
    ("matrix_exp", lambda A: LA.matrix_exp(A / 3)),
    ("solve_triangular", lambda A: LA.solve_triangular(A, A[..., :2], upper=False)),
    # torch's own backward of these fails (inv_ex's output modified in place): finite differences only
    ("cond_1", lambda A: LA.cond(A, 1)), ("cond_fro", lambda A: LA.cond(A, "fro")),
], ids=["lu", "lu_factor", "matrix_exp", "solve_triangular", "cond_1", "cond_fro"])
def test_gradcheck(name, fn):
    A = from_np(well(2, 4, 4)).requires_grad_()
    assert gradcheck(fn, (A,))


# ---- matrix_exp precision
def test_matrix_exp_of_a_rotation_generator_and_of_commuting_sums():
    t = 2.5
    R = LA.matrix_exp(ts.tensor([[0.0, -t], [t, 0.0]], dtype=ts.float64))
    np.testing.assert_allclose(to_np(R), [[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]], atol=1e-14)
    D = np.diag([1.0, -2.0, 30.0])
    np.testing.assert_allclose(to_np(LA.matrix_exp(from_np(D))), np.diag(np.exp([1.0, -2.0, 30.0])), rtol=1e-13)
    N = np.triu(np.ones((4, 4)), 1)  # nilpotent: exp is the finite series
    expected = np.eye(4) + N + N @ N / 2 + N @ N @ N / 6
    np.testing.assert_allclose(to_np(LA.matrix_exp(from_np(N))), expected, atol=1e-15)
    assert LA.matrix_exp(ts.zeros(2, 0, 0)).shape == (2, 0, 0)
    assert LA.matrix_exp(ts.zeros(3, 3)).dtype == ts.float32


def test_multi_dot_takes_the_cheapest_order():
    from tessera._linalg_more import _chain_order
    # (A (B C)) costs 10*100*5 + 10*5*... : the classic 10x100, 100x5, 5x50 chain is cheapest as ((A B) C)
    assert _chain_order([10, 100, 5, 50])[0][2] == 1
    assert _chain_order([50, 5, 100, 10])[0][2] == 0


# ---- the *_ex variants and errors
def test_ex_variants_report_instead_of_raising():
    S = ts.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 4.0]]])
    inverse, info = LA.inv_ex(S)
    assert info.tolist() == [0, 2] and info.dtype == ts.int32
    np.testing.assert_allclose(to_np(inverse[0]), np.eye(2))
    result, info = LA.solve_ex(S, ts.ones(2, 2, 1))
    assert info.tolist() == [0, 2]
    with pytest.raises(LA.LinAlgError, match=r"linalg.inv_ex: \(Batch element 1\): The diagonal element 2 is zero"):
        LA.inv_ex(S, check_errors=True)
    with pytest.raises(LA.LinAlgError, match="solve_ex: .*singular"):
        LA.solve_ex(S, ts.ones(2, 2, 1), check_errors=True)


@pytest.mark.torch
def test_singular_errors_as_torch():
    torch = torch_mod()
    S = np.ones((2, 3, 3))
    S[0] = np.eye(3)
    for name, ours, theirs in [
        ("inv", lambda: LA.inv(from_np(S)), lambda: torch.linalg.inv(torch.from_numpy(S))),
        ("solve", lambda: LA.solve(from_np(S), ts.ones(2, 3, 1, dtype=ts.float64)),
         lambda: torch.linalg.solve(torch.from_numpy(S), torch.ones(2, 3, 1, dtype=torch.float64))),
        ("matrix_power", lambda: LA.matrix_power(from_np(S[1]), -1),
         lambda: torch.linalg.matrix_power(torch.from_numpy(S[1]), -1)),
        ("tensorinv", lambda: LA.tensorinv(from_np(S[1]), ind=1),
         lambda: torch.linalg.tensorinv(torch.from_numpy(S[1]), ind=1)),
        ("tensorsolve", lambda: LA.tensorsolve(from_np(S[1]), ts.ones(3, dtype=ts.float64)),
         lambda: torch.linalg.tensorsolve(torch.from_numpy(S[1]), torch.ones(3, dtype=torch.float64))),
    ]:
        with pytest.raises(torch.linalg.LinAlgError) as theirs_err:
            theirs()
        with pytest.raises(LA.LinAlgError) as ours_err:
            ours()
        assert str(ours_err.value).startswith(str(theirs_err.value)), name
    with pytest.raises(RuntimeError) as theirs_err:
        torch.linalg.lu_factor(torch.from_numpy(S))
    with pytest.raises(RuntimeError) as ours_err:
        LA.lu_factor(from_np(S))
    assert str(ours_err.value) == str(theirs_err.value)
    assert math.isinf(LA.cond(from_np(S[1]), 1).item()) and math.isinf(LA.cond(from_np(S[1]), "fro").item())


BAD = [
    ("solve_triangular_rank", lambda L: L.linalg.solve_triangular(L.ones(3), L.ones(3, 2), upper=True)),
    ("solve_triangular_square", lambda L: L.linalg.solve_triangular(L.ones(3, 2), L.ones(3, 2), upper=True)),
    ("solve_triangular_B_rank", lambda L: L.linalg.solve_triangular(L.ones(3, 3), L.ones(3), upper=True)),
    ("solve_triangular_shapes", lambda L: L.linalg.solve_triangular(L.ones(3, 3), L.ones(4, 2), upper=True)),
    ("solve_triangular_shapes_right", lambda L: L.linalg.solve_triangular(L.ones(3, 3), L.ones(2, 2), upper=True,
                                                                           left=False)),
    ("matrix_exp_square", lambda L: L.linalg.matrix_exp(L.ones(2, 3))),
    ("matrix_exp_rank", lambda L: L.linalg.matrix_exp(L.ones(3))),
    ("matrix_power_square", lambda L: L.linalg.matrix_power(L.ones(2, 3), 2)),
    ("matrix_power_rank", lambda L: L.linalg.matrix_power(L.ones(3), 2)),
    ("matrix_power_float", lambda L: L.linalg.matrix_power(L.eye(2), 2.0)),
    ("lu_rank", lambda L: L.linalg.lu(L.ones(3))),
    ("lu_no_pivot", lambda L: L.linalg.lu(L.eye(3), pivot=False)),
    ("inv_ex_square", lambda L: L.linalg.inv_ex(L.ones(3, 2))),
    ("cond_rank", lambda L: L.linalg.cond(L.ones(3))),
    ("cond_square", lambda L: L.linalg.cond(L.ones(2, 3), 1)),
    ("cond_ord", lambda L: L.linalg.cond(L.eye(3), 3)),
    ("multi_dot_one", lambda L: L.linalg.multi_dot([L.ones(2, 3)])),
    ("multi_dot_first", lambda L: L.linalg.multi_dot([L.ones(2, 3, 3), L.ones(3, 3)])),
    ("multi_dot_middle", lambda L: L.linalg.multi_dot([L.ones(3, 3), L.ones(3, 3, 3), L.ones(3)])),
    ("multi_dot_last", lambda L: L.linalg.multi_dot([L.ones(3, 3), L.ones(3, 3, 3)])),
    ("multi_dot_shapes", lambda L: L.linalg.multi_dot([L.ones(2, 3), L.ones(4, 3)])),
    ("multi_dot_vector_shapes", lambda L: L.linalg.multi_dot([L.ones(3), L.ones(4, 3)])),
    ("multi_dot_dtypes", lambda L: L.linalg.multi_dot([L.ones(3, 3), L.ones(3, 3, dtype=L.float64)])),
    ("tensorinv_ind", lambda L: L.linalg.tensorinv(L.ones(4, 6), ind=0)),
    ("tensorinv_shape", lambda L: L.linalg.tensorinv(L.ones(4, 6), ind=1)),
    ("tensorsolve_shape", lambda L: L.linalg.tensorsolve(L.ones(2, 3, 6), L.ones(5))),
    ("vander_N", lambda L: L.linalg.vander(L.ones(3), N=1)),
    ("vander_0d", lambda L: L.linalg.vander(L.tensor(2.0))),
    ("vander_bool", lambda L: L.linalg.vander(L.tensor([True, False]))),
    ("householder_wide", lambda L: L.linalg.householder_product(L.ones(3, 4), L.ones(2))),
    ("householder_tau", lambda L: L.linalg.householder_product(L.ones(4, 3), L.ones(4))),
    ("polar_wide", lambda L: L.linalg.polar(L.ones(2, 3))),
]


@pytest.mark.torch
@pytest.mark.parametrize("name,fn", BAD, ids=[b[0] for b in BAD])
def test_bad_input_as_torch(name, fn):
    torch = torch_mod()
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(type(theirs.value) if type(theirs.value).__module__ == "builtins" else Exception) as ours:
        fn(ts)
    assert str(ours.value) == str(theirs.value)


# ---- the general eigendecomposition (LAPACK geev) and complex LU (solve, inv, det)
def complex_rand(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def sorted_eigenvalues(w, n):
    """Each matrix's eigenvalues in one order (by rounded real part, then imaginary part), so
    that two solvers' conjugate pairs line up."""
    rows = np.asarray(w, dtype=np.complex128).reshape(-1, n)
    return np.array([sorted(r, key=lambda z: (round(z.real, 3), z.imag)) for r in rows])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (1, 1), (0, 3, 3)], ids=str)
def test_eig_reconstructs_and_matches_numpy(dtype, shape):
    a = (complex_rand(*shape) if np.dtype(dtype).kind == "c" else rand(*shape)).astype(dtype)
    w, v = LA.eig(from_np(a))
    complex_dtype = {np.float32: ts.complex64, np.float64: ts.complex128}.get(dtype, from_np(a).dtype)
    assert w.dtype == v.dtype == complex_dtype and w.shape == shape[:-1] and v.shape == shape
    wn, vn = to_np(w), to_np(v)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    np.testing.assert_allclose(a @ vn, vn * wn[..., None, :], rtol=tol, atol=tol)  # A V = V diag(w)
    np.testing.assert_allclose(np.linalg.norm(vn, axis=-2), 1.0, rtol=tol) if vn.size else None
    expected = np.linalg.eigvals(a.astype(np.complex128)) if a.size else np.zeros(shape[:-1])
    np.testing.assert_allclose(sorted_eigenvalues(wn, shape[-1]), sorted_eigenvalues(expected, shape[-1]),
                               rtol=tol * 10, atol=tol * 10)
    np.testing.assert_array_equal(to_np(LA.eigvals(from_np(a))), wn)


def test_eig_pairs_of_a_real_matrix_are_conjugate():
    rotation = np.array([[0.0, -2.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    w, v = LA.eig(ts.tensor(rotation))
    wn = to_np(w)
    np.testing.assert_allclose(sorted_eigenvalues(wn, 3)[0], [-2j, 2j, 3], atol=1e-14)
    k = int(np.argmax(wn.imag))
    np.testing.assert_allclose(to_np(v)[:, k], np.conj(to_np(v)[:, np.argmin(wn.imag)]), atol=1e-15)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eig_against_torch(dtype):
    torch = torch_mod()
    a = (complex_rand(2, 5, 5) if dtype == np.complex128 else rand(2, 5, 5)).astype(dtype)
    w, v = LA.eig(from_np(a))
    tw, tv = torch.linalg.eig(torch.from_numpy(a))
    # the same LAPACK routine: the same order, normalisation and phases
    np.testing.assert_allclose(to_np(w), tw.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(to_np(v), tv.numpy(), rtol=1e-8, atol=1e-8)


def _eig_loss(lib, a):
    # depends on the eigenvalues and on |V| only, so not on the eigenvectors' phases
    w, v = lib.linalg.eig(a)
    weights = lib.arange(a.shape[-1], dtype=lib.float64) + 1
    return (w.abs() ** 2).sum() + (w.real * 0.5).sum() + ((v.abs() ** 2) * weights).sum()


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eig_gradient_against_torch(dtype):
    torch = torch_mod()
    a = (complex_rand(3, 4, 4) if dtype == np.complex128 else rand(3, 4, 4)).astype(dtype)
    x = ts.tensor(a, requires_grad=True)
    _eig_loss(ts, x).backward()
    tx = torch.tensor(a, requires_grad=True)
    _eig_loss(torch, tx).backward()
    np.testing.assert_allclose(to_np(x.grad), tx.grad.numpy(), rtol=1e-8, atol=1e-9)
    x.grad = None
    LA.eigvals(x).real.sum().backward()
    tx.grad = None
    torch.linalg.eigvals(tx).real.sum().backward()
    np.testing.assert_allclose(to_np(x.grad), tx.grad.numpy(), rtol=1e-8, atol=1e-9)


def test_eig_gradient_by_finite_differences():
    a = rand(4, 4)
    x = ts.tensor(a, requires_grad=True)
    _eig_loss(ts, x).backward()
    numeric = np.zeros_like(a)
    for i in range(4):
        for j in range(4):
            e = np.zeros_like(a)
            e[i, j] = 1e-6
            up, down = (float(_eig_loss(ts, ts.tensor(a + s * e))) for s in (1, -1))
            numeric[i, j] = (up - down) / 2e-6
    np.testing.assert_allclose(to_np(x.grad), numeric, rtol=1e-5, atol=1e-6)


def test_eig_errors_as_torch():
    with pytest.raises(ValueError, match="square matrices"):
        LA.eig(ts.ones(3, 4, dtype=ts.float64))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        LA.eig(ts.ones(3, dtype=ts.float64))
    with pytest.raises(ValueError, match="should not contain infs or NaNs"):
        LA.eig(ts.tensor([[1.0, float("nan")], [0.0, 1.0]]))
    with pytest.raises(TypeError, match="linalg.eig.*int64"):
        LA.eig(ts.ones(2, 2, dtype=ts.int64))
    x = ts.tensor([[0.5, -2.0, 0.1], [2.0, 0.2, 0.0], [0.3, 0.0, 3.0]], requires_grad=True)  # a complex pair
    w, v = LA.eig(x)
    with pytest.raises(RuntimeError, match="specified up to multiplication by e\\^\\{i phi\\}"):
        v.real.sum().backward()  # depends on the phases: no gradient, as torch


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_solve_inv_det_match_numpy(dtype):
    a = (complex_rand(2, 4, 4) + 4 * np.eye(4)).astype(dtype)
    b = complex_rand(2, 4, 3).astype(dtype)
    tol = 1e-4 if dtype == np.complex64 else 1e-10
    np.testing.assert_allclose(to_np(LA.solve(from_np(a), from_np(b))), np.linalg.solve(a, b), rtol=tol, atol=tol)
    np.testing.assert_allclose(to_np(LA.inv(from_np(a))), np.linalg.inv(a), rtol=tol, atol=tol)
    np.testing.assert_allclose(to_np(LA.det(from_np(a))), np.linalg.det(a), rtol=tol, atol=tol)
    lu, piv = LA.lu_factor(from_np(a))
    x = LA.lu_solve(lu, piv, from_np(b), adjoint=True)  # A^H X = B
    np.testing.assert_allclose(to_np(x), np.linalg.solve(np.conj(np.swapaxes(a, -1, -2)), b), rtol=tol, atol=tol)


@pytest.mark.torch
def test_complex_solve_inv_det_gradients_against_torch():
    torch = torch_mod()
    a, b = complex_rand(2, 4, 4) + 3 * np.eye(4), complex_rand(2, 4, 2)

    def loss(lib, a, b):
        x, i, d = lib.linalg.solve(a, b), lib.linalg.inv(a), lib.linalg.det(a)
        return (x.abs() ** 2).sum() + (i.real * 0.3).sum() + (d * d.conj()).real.sum() + x.imag.sum()
    x, y = ts.tensor(a, requires_grad=True), ts.tensor(b, requires_grad=True)
    loss(ts, x, y).backward()
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    loss(torch, tx, ty).backward()
    np.testing.assert_allclose(to_np(x.grad), tx.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(to_np(y.grad), ty.grad.numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eig_forward_ad_against_finite_differences_and_torch(dtype):
    import tessera.autograd.forward_ad as fwAD
    a = (complex_rand(4, 4) if dtype == np.complex128 else rand(4, 4)).astype(dtype)
    t = (complex_rand(4, 4) if dtype == np.complex128 else rand(4, 4)).astype(dtype)
    with fwAD.dual_level():
        w, v = LA.eig(fwAD.make_dual(ts.tensor(a), ts.tensor(t)))
        dw, dv = to_np(fwAD.unpack_dual(w).tangent), to_np(fwAD.unpack_dual(v).tangent)
    # eigenvalues by central differences (paired by position: a small step keeps LAPACK's order)
    h = 1e-6
    up, down = (to_np(LA.eigvals(ts.tensor(a + s * h * t))) for s in (1, -1))
    np.testing.assert_allclose(dw, (up - down) / (2 * h), rtol=1e-5, atol=1e-6)
    # the eigenvectors keep unit norm: re(v^H dv) = 0 column by column
    vn = to_np(v)
    np.testing.assert_allclose(np.real(np.sum(np.conj(vn) * dv, axis=0)), 0, atol=1e-10)
    if HAVE_TORCH:
        import torch
        (_, _), (tw, tv) = torch.func.jvp(torch.linalg.eig, (torch.from_numpy(a),), (torch.from_numpy(t),))
        np.testing.assert_allclose(dw, tw.numpy(), rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(dv, tv.numpy(), rtol=1e-8, atol=1e-9)
