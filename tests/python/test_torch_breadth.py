"""torch.* functions and Tensor methods beyond the core operators (tessera/_torch_functions_more.py,
_elementwise_more.py, _tensor_methods_more.py, _global_flags.py): values, dtypes, shapes and
gradients against torch on the same inputs, and the errors torch raises."""
import math
import warnings

import numpy as np
import pytest

import tessera as ts

RNG = np.random.default_rng(7)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _dt(torch, t):
    return getattr(torch, t.dtype.name)


def _as_torch(torch, x, requires_grad=False):
    if isinstance(x, ts.Tensor):
        t = torch.tensor(x.detach().numpy()) if x.dtype.name != "bfloat16" else None
        return t.requires_grad_(True) if requires_grad else t
    if isinstance(x, (list, tuple)):
        return type(x)(_as_torch(torch, v, requires_grad) for v in x)
    return x


def _as_ts(x, requires_grad=False):
    if isinstance(x, np.ndarray):
        return ts.tensor(x, requires_grad=requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(_as_ts(v, requires_grad) for v in x)
    return x


def _compare(got, exp, rtol=1e-5, atol=1e-6):
    if isinstance(exp, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(exp), (got, exp)
        for g, e in zip(got, exp):
            _compare(g, e, rtol, atol)
        return
    if not hasattr(exp, "numpy"):
        assert got == exp, (got, exp)
        return
    assert isinstance(got, ts.Tensor), type(got)
    assert tuple(got.shape) == tuple(exp.shape), (tuple(got.shape), tuple(exp.shape))
    assert got.dtype.name == str(exp.dtype).replace("torch.", ""), (got.dtype, exp.dtype)
    e = exp.detach().numpy()
    g = got.detach().numpy()
    if e.dtype.kind in "fc":
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, e)


def check(torch, name, *args, grad=False, rtol=1e-5, atol=1e-6, ts_fn=None, torch_fn=None, nograd=(), **kwargs):
    """ts.<name>(*args) against torch.<name>(*args) (NumPy arrays become tensors of each); with grad,
    the gradients of the sum of the (first) output with respect to every float array argument (but
    the positions in nograd)."""
    tf = ts_fn or getattr(ts, name)
    pf = torch_fn or getattr(torch, name)
    wants = [grad and isinstance(a, np.ndarray) and a.dtype.kind == "f" and i not in nograd for i, a in enumerate(args)]
    targs = [_as_ts(a, w) for a, w in zip(args, wants)]
    pargs = [torch.tensor(a, requires_grad=w) if isinstance(a, np.ndarray) else a for a, w in zip(args, wants)]
    got = tf(*targs, **{k: _as_ts(v) for k, v in kwargs.items()})
    exp = pf(*pargs, **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()})
    _compare(got, exp, rtol, atol)
    if grad:
        g0 = got[0] if isinstance(got, tuple) else got
        e0 = exp[0] if isinstance(exp, tuple) else exp
        g0.sum().backward()
        e0.sum().backward()
        for ta, pa in zip(targs, pargs):
            if isinstance(ta, ts.Tensor) and ta.requires_grad:
                np.testing.assert_allclose(ta.grad.numpy(), pa.grad.numpy(), rtol=rtol * 10, atol=atol * 10)
    return got


def rand(*shape, dtype=np.float32, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(dtype)


# ============================================================================ creation
def test_range_is_inclusive_and_warns(torch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(torch, "range", 0, 3)
        check(torch, "range", 1, 4, 0.5)
        check(torch, "range", 0, 3, dtype=torch.int64, ts_fn=lambda *a, **k: ts.range(*a, dtype=ts.int64))
        check(torch, "range", 5, 1, -2)
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        ts.range(0, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="step must be nonzero"):
            ts.range(0, 1, 0)
        with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step sign"):
            ts.range(0, 1, -1)


def test_logspace(torch):
    check(torch, "logspace", 0, 2, 5)
    check(torch, "logspace", -1, 1, 4, 2.0)
    check(torch, "logspace", 0, 3, 4, dtype=torch.float64, ts_fn=lambda *a, **k: ts.logspace(*a, dtype=ts.float64))


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows(torch, name, n, periodic):
    check(torch, name, n, periodic, atol=1e-6)
    got = getattr(ts, name)(n, periodic, dtype=ts.float64)
    _compare(got, getattr(torch, name)(n, periodic, dtype=torch.float64), rtol=1e-10, atol=1e-12)


def test_window_errors():
    with pytest.raises(RuntimeError, match="hann_window expects floating point dtypes"):
        ts.hann_window(4, dtype=ts.int64)
    with pytest.raises(RuntimeError, match="hann_window requires non-negative window_length, got window_length=-1"):
        ts.hann_window(-1)


def test_asarray_and_frombuffer(torch):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ts.asarray(a)
    a[0, 0] = 9.0  # shares memory with the array, as torch
    assert t[0, 0].item() == 9.0 and t.dtype == ts.float32
    assert ts.asarray(a, copy=True).numpy()[0, 0] == 9.0
    assert ts.asarray([1, 2]).dtype == ts.int64 and ts.asarray([1.0]).dtype == ts.float32
    x = ts.ones(3)
    assert ts.asarray(x) is x
    assert ts.asarray(x, dtype=ts.float64).dtype == ts.float64
    with pytest.raises(ValueError):
        ts.asarray(x, dtype=ts.float64, copy=False)
    b = bytearray(np.arange(4, dtype=np.int32).tobytes())
    _compare(ts.frombuffer(b, dtype=ts.int32), torch.frombuffer(bytearray(b), dtype=torch.int32))
    _compare(ts.frombuffer(b, dtype=ts.int32, count=2, offset=4),
             torch.frombuffer(bytearray(b), dtype=torch.int32, count=2, offset=4))
    with pytest.raises(ValueError, match=r"both buffer length \(0\) and count \(-1\) must not be 0"):
        ts.frombuffer(b"", dtype=ts.uint8)
    with pytest.raises(ValueError, match=r"offset \(5 bytes\) must be non-negative"):
        ts.frombuffer(bytearray(4), dtype=ts.uint8, offset=5)
    with pytest.raises(ValueError, match=r"must be a multiple of element size \(4\)"):
        ts.frombuffer(bytearray(3), dtype=ts.int32)
    with pytest.raises(ValueError, match=r"requested buffer length \(2 \* 4 bytes\)"):
        ts.frombuffer(bytearray(4), dtype=ts.int32, count=2)


def test_broadcast_shapes(torch):
    for shapes in [((2, 1), (3,)), ((1,), (4, 1, 5), (5,)), (3, (2, 1)), ((),), ()]:
        assert tuple(ts.broadcast_shapes(*shapes)) == tuple(torch.broadcast_shapes(*shapes))
    assert isinstance(ts.broadcast_shapes((2, 1), (3,)), ts.Size)
    with pytest.raises(RuntimeError, match="Attempting to broadcast a dimension of length 4 at -2"):
        ts.broadcast_shapes((2, 3), (4, 3))
    with pytest.raises(ValueError, match="negative length"):
        ts.broadcast_shapes((2, -1))


# ============================================================================ global flags
def test_matmul_precision_and_deterministic_flags():
    assert ts.get_float32_matmul_precision() == "highest"
    try:
        ts.set_float32_matmul_precision("high")
        assert ts.get_float32_matmul_precision() == "high"
        with pytest.warns(UserWarning, match="bad is not one of 'highest', 'high', or 'medium'"):
            ts.set_float32_matmul_precision("bad")
        assert ts.get_float32_matmul_precision() == "high"
    finally:
        ts.set_float32_matmul_precision("highest")
    try:
        ts.use_deterministic_algorithms(True, warn_only=True)
        assert ts.are_deterministic_algorithms_enabled() and ts.is_deterministic_algorithms_warn_only_enabled()
        assert ts.get_deterministic_debug_mode() == 1
        ts.set_deterministic_debug_mode("error")
        assert ts.get_deterministic_debug_mode() == 2 and not ts.is_deterministic_algorithms_warn_only_enabled()
        with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`, but got bad"):
            ts.set_deterministic_debug_mode("bad")
        with pytest.raises(RuntimeError, match="expected 0, 1, or 2, but got 5"):
            ts.set_deterministic_debug_mode(5)
        with pytest.raises(TypeError, match="must be bool"):
            ts.use_deterministic_algorithms("x")
    finally:
        ts.use_deterministic_algorithms(False)
    assert ts.get_deterministic_debug_mode() == 0


def test_default_device_and_tensor_type():
    assert ts.get_default_device() == ts.device("cpu")
    ts.set_default_device("cpu")
    try:
        assert ts.zeros(2).device == ts.device("cpu") and ts.tensor([1.0]).device.type == "cpu"
    finally:
        ts.set_default_device(None)
    with pytest.warns(UserWarning, match="set_default_tensor_type\\(\\) is deprecated"):
        ts.set_default_tensor_type(ts.DoubleTensor)
    assert ts.get_default_dtype() == ts.float64 and ts.ones(1).dtype == ts.float64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts.set_default_tensor_type("torch.FloatTensor")
        assert ts.get_default_dtype() == ts.float32
        with pytest.raises(TypeError, match="only floating-point types"):
            ts.set_default_tensor_type(ts.LongTensor)


def test_misc_switches():
    assert ts.set_flush_denormal(False) is False
    ts.set_warn_always(True)
    assert ts.is_warn_always_enabled()
    ts.set_warn_always(False)
    assert not ts.is_warn_always_enabled()
    assert not ts.is_anomaly_enabled()
    ts.set_anomaly_enabled(True)
    try:
        assert ts.is_anomaly_enabled()
    finally:
        ts.set_anomaly_enabled(False)
    assert not ts.is_inference_mode_enabled()
    with ts.inference_mode():
        assert ts.is_inference_mode_enabled()
        with ts.inference_mode(False):
            assert not ts.is_inference_mode_enabled()
    assert not ts.is_inference_mode_enabled()


# ============================================================================ predicates and trivial functions
def test_predicates(torch):
    x = ts.tensor([1.0, 2.0])
    assert ts.is_complex(x) is False and ts.is_signed(x) and not ts.is_signed(ts.ones(1, dtype=ts.uint8))
    assert ts.is_nonzero(ts.tensor([3])) and not ts.is_nonzero(ts.tensor(0.0))
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        ts.is_nonzero(x)
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with no values is ambiguous"):
        ts.is_nonzero(ts.ones(0))
    assert ts.is_same_size(x, ts.zeros(2)) and not x.is_same_size(ts.zeros(3))
    assert not ts.is_conj(x) and not x.is_neg() and not ts.is_inference(x)
    _compare(ts.isreal(x), torch.isreal(torch.tensor([1.0, 2.0])))
    c = ts.tensor(np.array([1 + 0j, 1 + 1j], dtype=np.complex64))
    _compare(ts.isreal(c), torch.isreal(torch.tensor(np.array([1 + 0j, 1 + 1j], dtype=np.complex64))))
    assert ts.get_device(x) == -1 and x.get_device() == -1
    assert ts.positive(x) is x
    with pytest.raises(RuntimeError, match="on a bool tensor is not supported"):
        ts.positive(ts.ones(1, dtype=ts.bool))
    assert ts.typename(x) == x.type() and ts.typename(1) == "int"
    d = ts.detach(ts.ones(2, requires_grad=True))
    assert not d.requires_grad
    assert ts.can_cast(ts.int32, ts.float32) and not ts.can_cast(ts.float32, ts.int32)
    assert ts.can_cast(ts.float64, ts.float32) == torch.can_cast(torch.float64, torch.float32)
    assert ts.can_cast(ts.int64, ts.bool) == torch.can_cast(torch.int64, torch.bool)


def test_rsub_ravel_argwhere_diagflat(torch):
    a, b = rand(3, 4), rand(3, 4)
    check(torch, "rsub", a, b, grad=True)
    check(torch, "rsub", a, b, alpha=2.0)
    check(torch, "rsub", a, 2.5)
    check(torch, "ravel", a.T.copy())
    check(torch, "argwhere", (a > 0).astype(np.float32))
    check(torch, "diagflat", rand(2, 2), grad=True)
    check(torch, "diagflat", rand(3), 1)
    check(torch, "diagflat", rand(3), -2)


# ============================================================================ linear algebra
def _spd(n, batch=()):
    m = RNG.standard_normal(batch + (n, n))
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(np.float64)


def test_det_family(torch):
    a = RNG.standard_normal((3, 4, 4))
    check(torch, "det", a, grad=True, rtol=1e-10, atol=1e-10)
    check(torch, "logdet", _spd(4, (2,)), grad=True, rtol=1e-10, atol=1e-10)
    check(torch, "logdet", np.diag([-1.0, 2.0]))  # a negative determinant: nan
    check(torch, "slogdet", a, rtol=1e-10, atol=1e-10)
    check(torch, "inverse", a, grad=True, rtol=1e-9, atol=1e-9)
    check(torch, "pinverse", RNG.standard_normal((3, 5)), rtol=1e-9, atol=1e-9)
    x = ts.tensor(a)
    _compare(x.det(), torch.tensor(a).det(), rtol=1e-10, atol=1e-10)
    _compare(x.inverse(), torch.tensor(a).inverse(), rtol=1e-9, atol=1e-9)
    _compare(x.logdet(), torch.tensor(a).logdet(), rtol=1e-10, atol=1e-10)
    _compare(tuple(x.slogdet()), tuple(torch.tensor(a).slogdet()), rtol=1e-10, atol=1e-10)


def test_matrix_power_and_exp(torch):
    a = RNG.standard_normal((2, 3, 3))
    for n in (0, 1, 2, 3, 5, -1, -2):
        check(torch, "matrix_power", a, n, rtol=1e-9, atol=1e-9)
    check(torch, "matrix_power", a, 3, grad=True, rtol=1e-9, atol=1e-9)
    check(torch, "matrix_exp", a, grad=True, rtol=1e-9, atol=1e-9)
    check(torch, "matrix_exp", (a * 10).astype(np.float32), rtol=1e-4, atol=1e-3)
    _compare(ts.tensor(a).matrix_power(2), torch.tensor(a).matrix_power(2), rtol=1e-10, atol=1e-10)
    with pytest.raises(RuntimeError, match="linalg.matrix_power: A must be batches of square matrices, but they "
                                           "are 2 by 3 matrices"):
        ts.matrix_power(ts.ones(2, 3), 2)
    with pytest.raises(RuntimeError, match="linalg.matrix_exp: A must be batches of square matrices"):
        ts.matrix_exp(ts.ones(2, 3))
    with pytest.raises(RuntimeError, match="must have at least 2 dimensions"):
        ts.matrix_power(ts.ones(3), 2)


def test_svd_and_cholesky_solvers(torch):
    a = RNG.standard_normal((2, 5, 3))
    U, S, V = ts.svd(ts.tensor(a))
    tU, tS, tV = torch.svd(torch.tensor(a))
    assert U.shape == tuple(tU.shape) and V.shape == tuple(tV.shape)
    np.testing.assert_allclose(S.numpy(), tS.numpy(), rtol=1e-10)
    np.testing.assert_allclose((U.numpy() * S.numpy()[..., None, :]) @ np.swapaxes(V.numpy(), -1, -2), a, atol=1e-10)
    U, S, V = ts.svd(ts.tensor(a), some=False)
    assert U.shape == (2, 5, 5) and V.shape == (2, 3, 3)
    U, S, V = ts.tensor(a).svd(compute_uv=False)
    assert U.shape == (2, 5, 5) and float(U.abs().sum()) == 0.0 and V.shape == (2, 3, 3)
    spd = _spd(4)
    L = np.linalg.cholesky(spd)
    b = RNG.standard_normal((4, 2))
    check(torch, "cholesky_solve", b, L, rtol=1e-9, atol=1e-9)
    check(torch, "cholesky_solve", b, L.T.copy(), True, rtol=1e-9, atol=1e-9)
    check(torch, "cholesky_inverse", L, rtol=1e-9, atol=1e-9)
    _compare(ts.tensor(b).cholesky_solve(ts.tensor(L)), torch.tensor(b).cholesky_solve(torch.tensor(L)),
             rtol=1e-9, atol=1e-9)
    # batch dims broadcast: one B against a batch of factors and the other way round
    Ls = np.stack([np.linalg.cholesky(_spd(4)) for _ in range(3)])
    check(torch, "cholesky_solve", np.eye(4), Ls, rtol=1e-9, atol=1e-9)
    check(torch, "cholesky_solve", RNG.standard_normal((2, 1, 4, 2)), Ls, rtol=1e-9, atol=1e-9)
    check(torch, "cholesky_solve", RNG.standard_normal((3, 4, 2)), L, rtol=1e-9, atol=1e-9)
    with pytest.raises(RuntimeError, match="b should have at least 2 dimensions"):
        ts.cholesky_solve(ts.ones(4, dtype=ts.float64), ts.tensor(L))


def test_triangular_solve_and_lu(torch):
    A = np.triu(RNG.standard_normal((3, 3))) + 3 * np.eye(3)
    b = RNG.standard_normal((3, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(torch, "triangular_solve", b, A, rtol=1e-10, atol=1e-10)
        check(torch, "triangular_solve", b, A.T.copy(), False, True, rtol=1e-10, atol=1e-10)
    with pytest.warns(UserWarning, match="triangular_solve is deprecated"):
        ts.triangular_solve(ts.tensor(b), ts.tensor(A))
    M = RNG.standard_normal((3, 3))
    LU, piv = ts.lu(ts.tensor(M))
    tLU, tpiv = torch.linalg.lu_factor(torch.tensor(M))
    np.testing.assert_allclose(LU.numpy(), tLU.numpy(), rtol=1e-10, atol=1e-12)
    x = ts.lu_solve(ts.tensor(b), LU, piv)
    np.testing.assert_allclose(M @ x.numpy(), b, atol=1e-10)


def test_removed_functions_raise_as_torch():
    for name in ("solve", "lstsq", "eig", "symeig", "matrix_rank", "cholesky", "qr"):
        with pytest.raises(RuntimeError, match="deprecated since version 1.9 and is now removed"):
            getattr(ts, name)(ts.eye(2), ts.eye(2)) if name in ("solve", "lstsq") else getattr(ts, name)(ts.eye(2))
        if name != "matrix_rank":
            with pytest.raises(RuntimeError, match="deprecated since version 1.9 and is now removed"):
                getattr(ts.eye(2), name)(ts.eye(2)) if name in ("solve", "lstsq") else getattr(ts.eye(2), name)()


def test_chain_matmul_inner_dist(torch):
    a, b, c = rand(2, 3), rand(3, 4), rand(4, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(torch, "chain_matmul", a, b, c, grad=True, rtol=1e-5, atol=1e-5)
    with pytest.warns(UserWarning, match="chain_matmul is deprecated"):
        ts.chain_matmul(ts.ones(2, 2), ts.ones(2, 2))
    check(torch, "inner", rand(2, 3), rand(4, 3), grad=True)
    check(torch, "inner", rand(3), rand(3))
    check(torch, "inner", np.array(2.0, dtype=np.float32), rand(2, 3))
    with pytest.raises(RuntimeError, match="inner\\(\\) the last dimension must match"):
        ts.inner(ts.ones(2), ts.ones(3))
    for p in (2, 1, 0, math.inf, 3.5):
        check(torch, "dist", rand(3, 4), rand(4), p, rtol=1e-5)
    check(torch, "dist", rand(3, 4), rand(3, 4), grad=True)


# ============================================================================ statistics
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile(torch, interpolation):
    x = rand(4, 7, dtype=np.float64)
    q = np.array([0.0, 0.25, 0.5, 0.9, 1.0])
    check(torch, "quantile", x, 0.3, interpolation=interpolation)
    check(torch, "quantile", x, q, dim=1, interpolation=interpolation)
    check(torch, "quantile", x, q, dim=0, keepdim=True, interpolation=interpolation)
    check(torch, "quantile", x, 0.7, dim=-1, keepdim=True, interpolation=interpolation)
    check(torch, "quantile", x, q, keepdim=True, interpolation=interpolation)
    xn = x.copy()
    xn[1, 3] = np.nan
    xn[2, :] = np.nan
    check(torch, "quantile", xn, q, dim=1, interpolation=interpolation)
    check(torch, "nanquantile", xn, q, dim=1, interpolation=interpolation)
    check(torch, "nanquantile", xn, 0.4, interpolation=interpolation)


def test_quantile_grad_method_and_errors(torch):
    x = rand(3, 5)
    check(torch, "quantile", x, np.array([0.1, 0.5], dtype=np.float32), dim=1, grad=True)
    _compare(ts.tensor(x).quantile(0.5), torch.tensor(x).quantile(0.5))
    _compare(ts.tensor(x).nanquantile(0.5, dim=0), torch.tensor(x).nanquantile(0.5, dim=0))
    with pytest.raises(RuntimeError, match="quantile\\(\\) input tensor must be either float or double dtype"):
        ts.quantile(ts.ones(3, dtype=ts.int64), 0.5)
    with pytest.raises(RuntimeError, match="q must be in the range \\[0, 1\\] but got 1.5"):
        ts.quantile(ts.ones(3), 1.5)
    with pytest.raises(RuntimeError, match="q values must be in the range \\[0, 1\\]"):
        ts.quantile(ts.ones(3), ts.tensor([0.5, 1.5]))
    with pytest.raises(RuntimeError, match="q tensor must be same dtype as the input tensor"):
        ts.quantile(ts.ones(3), ts.tensor([0.5], dtype=ts.float64))
    with pytest.raises(RuntimeError, match="input tensor must be non-empty"):
        ts.quantile(ts.ones(0), 0.5)
    with pytest.raises(RuntimeError, match="interpolation must be one of linear, lower, higher, midpoint or nearest, "
                                           "but got bad"):
        ts.quantile(ts.ones(3), 0.5, interpolation="bad")
    with pytest.raises(RuntimeError, match="q must be a scalar or 1D tensor"):
        ts.quantile(ts.ones(3), ts.ones(2, 2))


def test_cov_corrcoef(torch):
    x = rand(3, 6, dtype=np.float64)
    check(torch, "cov", x, grad=True, rtol=1e-10, atol=1e-12)
    check(torch, "cov", x, correction=0, rtol=1e-10, atol=1e-12)
    check(torch, "cov", rand(6, dtype=np.float64), rtol=1e-10, atol=1e-12)
    fw = np.array([1, 2, 1, 3, 1, 1])
    aw = RNG.uniform(0.1, 1.0, 6)
    check(torch, "cov", x, fweights=fw, rtol=1e-10, atol=1e-12)
    check(torch, "cov", x, aweights=aw, rtol=1e-10, atol=1e-12)
    check(torch, "cov", x, fweights=fw, aweights=aw, correction=2, rtol=1e-10, atol=1e-12)
    check(torch, "cov", np.array([[1, 2, 3], [2, 4, 7]]))
    check(torch, "corrcoef", x, grad=True, rtol=1e-10, atol=1e-12)
    check(torch, "corrcoef", rand(5))
    _compare(ts.tensor(x).cov(), torch.tensor(x).cov(), rtol=1e-10, atol=1e-12)
    with pytest.raises(RuntimeError, match="cov\\(\\): expected input to have two or fewer dimensions but got an "
                                           "input with 3 dimensions"):
        ts.cov(ts.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match="expected fweights to have integral dtype but got fweights with Float"):
        ts.cov(ts.ones(2, 3), fweights=ts.ones(3))
    with pytest.raises(RuntimeError, match="expected aweights to have floating point dtype but got aweights with "
                                           "Long dtype"):
        ts.cov(ts.ones(2, 3), aweights=ts.ones(3, dtype=ts.int64))
    with pytest.raises(RuntimeError, match="fweights cannot be negative"):
        ts.cov(ts.ones(2, 3), fweights=-ts.ones(3, dtype=ts.int64))
    with pytest.raises(RuntimeError, match="but got 2 != 3"):
        ts.cov(ts.ones(2, 3), fweights=ts.ones(2, dtype=ts.int64))
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        ts.cov(ts.ones(2, 1))


def test_histogram(torch):
    x = rand(50)
    check(torch, "histogram", x, 5)
    check(torch, "histogram", x, 4, range=(-1.0, 1.0))
    check(torch, "histogram", x, 6, weight=rand(50, low=0.0), density=True)
    check(torch, "histogram", x, np.array([-2.0, -0.5, 0.0, 3.0], dtype=np.float32))
    check(torch, "histogram", np.array([1.0, 1.0], dtype=np.float32), 3)
    h = ts.tensor(x).histogram(3)
    assert h.hist.shape == (3,) and h.bin_edges.shape == (4,)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        ts.histogram(ts.tensor([1, 2]), 3)


def test_renorm(torch):
    x = rand(3, 4, 2)
    for p, dim, maxnorm in [(2, 0, 1.0), (1, 1, 0.5), (3, -1, 2.0)]:
        check(torch, "renorm", x, p, dim, maxnorm, grad=True, rtol=1e-5)
    with pytest.raises(RuntimeError, match="renorm: input needs at least 2 dimensions, got 1 dimensions"):
        ts.renorm(ts.ones(3), 2, 0, 1.0)
    with pytest.raises(RuntimeError, match="non-positive-norm not supported"):
        ts.renorm(ts.ones(3, 3), -1, 0, 1.0)
    t = ts.tensor(x)
    t.renorm_(2, 0, 1.0)
    _compare(t, torch.tensor(x).renorm(2, 0, 1.0))


# ============================================================================ shapes and indices
def test_directional_splits(torch):
    x = rand(4, 6, 2)
    for name in ("hsplit", "vsplit", "dsplit"):
        check(torch, name, x, 2)
        check(torch, name, x, [1, 3])
        got = getattr(ts.tensor(x), name)(2)
        assert len(got) == 2
    check(torch, "hsplit", rand(6), 3)
    with pytest.raises(RuntimeError, match="torch.hsplit attempted to split along dimension 1, but the size of the "
                                           "dimension 4 is not divisible by the split_size 3!"):
        ts.hsplit(ts.ones(2, 4), 3)
    with pytest.raises(RuntimeError, match="torch.vsplit requires a tensor with at least 2 dimension, but got a "
                                           "tensor with 1 dimensions!"):
        ts.vsplit(ts.ones(4), 2)
    with pytest.raises(RuntimeError, match="torch.dsplit requires a tensor with at least 3 dimension"):
        ts.dsplit(ts.ones(4, 2), 2)


def test_row_stack_cartesian_combinations(torch):
    check(torch, "row_stack", [rand(3), rand(3)], ts_fn=lambda xs: ts.row_stack(_as_ts(xs)),
          torch_fn=lambda xs: torch.row_stack(_as_torch(torch, _as_ts(xs))))
    a, b, c = np.array([1, 2, 3]), np.array([4, 5]), np.array([6, 7])
    check(torch, "cartesian_prod", a, b, c)
    check(torch, "cartesian_prod", a)
    x = np.array([3, 1, 4, 1])
    for r in (0, 1, 2, 3, 5):
        for wr in (False, True):
            check(torch, "combinations", x, r, wr)
    with pytest.raises(RuntimeError, match="Expect a 1D vector, but got shape \\[2, 2\\]"):
        ts.combinations(ts.ones(2, 2))
    with pytest.raises(RuntimeError, match="Expect a non-negative number, but got -1"):
        ts.combinations(ts.arange(3), r=-1)


def test_unravel_index(torch):
    idx = np.array([0, 5, 7, -1, 11])
    check(torch, "unravel_index", idx, (3, 4))
    check(torch, "unravel_index", np.array(4), (2, 3))
    check(torch, "unravel_index", np.array([[1, 2], [3, 4]]), (5,))
    with pytest.raises(TypeError, match="expected 'indices' to be integer dtype, but got tessera.float32"):
        ts.unravel_index(ts.tensor([1.5]), (2, 3))
    with pytest.raises(ValueError, match="'shape' cannot have negative values"):
        ts.unravel_index(ts.tensor([4]), (2, -3))


def test_vander(torch):
    check(torch, "vander", np.array([1, 2, 3]))
    check(torch, "vander", np.array([1.5, -2.0, 3.0], dtype=np.float32), 4, True)  # torch's backward fails
    check(torch, "vander", np.array([True, False]))
    check(torch, "vander", np.array([1.0, 2.0]), 0)
    with pytest.raises(RuntimeError, match="x must be a one-dimensional tensor."):
        ts.vander(ts.ones(2, 2))
    with pytest.raises(RuntimeError, match="N must be non-negative."):
        ts.vander(ts.ones(3), N=-1)


def test_trapezoid_family(torch):
    y = rand(3, 5)
    x = np.sort(rand(5))
    for name in ("trapezoid", "trapz", "cumulative_trapezoid"):
        check(torch, name, y, grad=True)
        check(torch, name, y, x, grad=True)
        check(torch, name, y, dim=0)
        check(torch, name, y, dx=0.5)
        check(torch, name, y, np.sort(rand(3, 5), axis=1))


def test_scatter_variants(torch):
    x = rand(3, 4)
    check(torch, "diagonal_scatter", x, rand(3), grad=True)
    check(torch, "diagonal_scatter", x, rand(2), 2)
    check(torch, "diagonal_scatter", rand(2, 3, 3), rand(2, 3), 0, 1, 2)
    check(torch, "diagonal_scatter", rand(3, 2, 3), rand(2, 3), 0, 0, 2, grad=True)
    check(torch, "as_strided_scatter", x, rand(2, 2), (2, 2), (4, 1), 1)
    check(torch, "as_strided_scatter", x, rand(3), (3,), (5,))
    # gradients by hand (torch's as_strided_scatter backward sends input's to the written positions)
    t, s = ts.tensor(x, requires_grad=True), ts.tensor(rand(3), requires_grad=True)
    ts.as_strided_scatter(t, s, (3,), (5,)).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy().ravel(), [0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1])
    np.testing.assert_array_equal(s.grad.numpy(), [1, 1, 1])
    with pytest.raises(RuntimeError, match="expected src to have a size equal to the slice of self"):
        ts.diagonal_scatter(ts.ones(3, 3), ts.ones(2))


def test_copy_variants_and_unsafe(torch):
    x = ts.arange(6.0).reshape(2, 3)
    y = ts.permute_copy(x, (1, 0))
    assert y.is_contiguous() and y.tolist() == x.T.tolist()
    assert ts.narrow_copy(x, 1, 0, 2).tolist() == [[0.0, 1.0], [3.0, 4.0]]
    assert [t.tolist() for t in ts.unsafe_chunk(x, 2, 1)] == [t.tolist() for t in x.chunk(2, 1)]


# ============================================================================ element-wise composites
def test_fmax_fmin(torch):
    a = np.array([1.0, np.nan, 3.0, np.nan, -0.5], dtype=np.float32)
    b = np.array([2.0, 1.0, np.nan, np.nan, -1.0], dtype=np.float32)
    for name in ("fmax", "fmin"):
        check(torch, name, a, b)
        check(torch, name, np.array([1, 5, 3]), np.array([4, 2, 3]))
        check(torch, name, np.array([1, 5, 3]), b[:3])
        check(torch, name, rand(3, 1), rand(4), grad=True)
        _compare(getattr(ts.tensor(a), name)(ts.tensor(b)), getattr(torch.tensor(a), name)(torch.tensor(b)))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.uint8])  # torch's int8 gcd keeps signs
def test_gcd_lcm(torch, dtype):
    lo = 0 if dtype == np.uint8 else -30
    a = RNG.integers(lo, 30, (40,)).astype(dtype)
    b = RNG.integers(lo, 30, (40,)).astype(dtype)
    a[:3] = 0
    b[1:4] = 0
    check(torch, "gcd", a, b)
    check(torch, "lcm", a, b)
    t = ts.tensor(a)
    t.gcd_(ts.tensor(b))
    _compare(t, torch.tensor(a).gcd(torch.tensor(b)))


def test_gcd_errors():
    with pytest.raises(NotImplementedError, match='"gcd_cpu" not implemented for \'Float\''):
        ts.gcd(ts.ones(3), ts.ones(3))


def test_float_power_ldexp(torch):
    a = rand(3, 4, low=0.1)
    check(torch, "float_power", a, 2, grad=True, rtol=1e-10)
    check(torch, "float_power", a, rand(4), rtol=1e-10)
    check(torch, "float_power", np.array([1, 2, 3]), 0.5, rtol=1e-10)
    check(torch, "float_power", 2.0, np.array([1, 2, 3]), rtol=1e-10)
    t = ts.tensor(a.astype(np.float64))
    t.float_power_(2)
    _compare(t, torch.tensor(a.astype(np.float64)).float_power(2), rtol=1e-10)
    with pytest.raises(RuntimeError, match="the base given to float_power_ has dtype Float but the operation's "
                                           "result requires dtype Double"):
        ts.ones(3).float_power_(2)
    check(torch, "ldexp", a, np.array([1, -2, 3, 0]), grad=True)
    check(torch, "ldexp", np.array([1, 2]), np.array([1, 2]))
    check(torch, "ldexp", a.astype(np.float64), np.array([3]))


def test_frexp_nextafter(torch):
    f = np.array([0.0, -0.0, 1.0, 0.75, -3.5, 1e-40, 1e30, np.inf, -np.inf, np.nan, 2.0 ** -126, 0.5, 3e-45],
                 dtype=np.float32)
    check(torch, "frexp", f)
    check(torch, "frexp", f.astype(np.float64) * 1e-280)
    check(torch, "frexp", rand(20, dtype=np.float64))
    m, e = ts.tensor(f).frexp()
    assert e.dtype == ts.int32
    with pytest.raises(RuntimeError, match="torch.frexp\\(\\) only supports floating-point dtypes"):
        ts.frexp(ts.ones(3, dtype=ts.int64))
    y = np.array([1.0, 1.0, 0.0, 2.0, -4.0, 0.0, np.inf, 0.0, 0.0, 1.0, 0.0, 0.0, -1.0], dtype=np.float32)
    for dt in (np.float32, np.float64):
        check(torch, "nextafter", f.astype(dt), y.astype(dt), rtol=0, atol=0)
        check(torch, "nextafter", rand(30, dtype=dt), rand(30, dtype=dt), rtol=0, atol=0)
    t = ts.tensor([1.0])
    t.nextafter_(ts.tensor([2.0]))
    assert t.item() == np.nextafter(np.float32(1.0), np.float32(2.0))


def test_special_composites(torch):
    x = np.array([0.0, 0.1, 0.5, 1.0, 2.5, 7.9, 8.0, 8.5, 20.0, 50.0, -3.0, -9.5])
    check(torch, "i0", x, rtol=1e-12, atol=0)
    check(torch, "i0", x.astype(np.float32), rtol=1e-5)
    check(torch, "i0", np.array([1, 2, 3]))
    check(torch, "i0", rand(5), grad=True, rtol=1e-5)
    q = np.array([0.3, 1.0, 2.5, 10.0, 100.0, -2.5, -0.5, 0.0])
    for n in (0, 1, 2, 3, 6):
        check(torch, "polygamma", n, q, rtol=1e-9, atol=1e-12)
        _compare(ts.tensor(q).polygamma(n), torch.tensor(q).polygamma(n), rtol=1e-9, atol=1e-12)
    check(torch, "polygamma", 1, rand(5, low=0.5), grad=True, rtol=1e-4)
    with pytest.raises(RuntimeError, match="polygamma\\(n, x\\) does not support negative n."):
        ts.polygamma(-1, ts.ones(1))
    for p in (1, 2, 4):
        check(torch, "mvlgamma", rand(6, low=2.0, high=5.0), p, grad=True, rtol=1e-5)


# ============================================================================ nn functions under torch.*
def test_conv_and_norm_aliases(torch):
    check(torch, "conv1d", rand(2, 3, 8), rand(4, 3, 3), rand(4), 1, 1, grad=True, rtol=1e-4, atol=1e-5)
    check(torch, "conv2d", rand(1, 2, 5, 5), rand(3, 2, 3, 3), None, 2, 1, grad=True, rtol=1e-4, atol=1e-5)
    check(torch, "conv3d", rand(1, 2, 4, 4, 4), rand(2, 2, 2, 2, 2), rtol=1e-4, atol=1e-5)
    check(torch, "conv_transpose1d", rand(1, 2, 5), rand(2, 3, 3), rtol=1e-4, atol=1e-5)
    check(torch, "conv_transpose2d", rand(1, 2, 4, 4), rand(2, 3, 3, 3), None, 2, rtol=1e-4, atol=1e-5)
    check(torch, "conv_transpose3d", rand(1, 2, 3, 3, 3), rand(2, 1, 2, 2, 2), rtol=1e-4, atol=1e-5)
    x = rand(4, 6, 5)
    check(torch, "layer_norm", x, [5], rand(5), rand(5), 1e-5, grad=True, rtol=1e-4, atol=1e-5)
    check(torch, "group_norm", x, 3, rand(6), rand(6), 1e-5, grad=True, rtol=1e-4, atol=1e-5)
    check(torch, "rms_norm", x, [5], rand(5), grad=True, rtol=1e-4, atol=1e-5)
    w, b = rand(6), rand(6)
    rm, rv = rand(6), rand(6, low=0.5)
    check(torch, "batch_norm", x, w, b, rm, rv, False, 0.1, 1e-5, False, rtol=1e-4, atol=1e-5)
    tm, tv = ts.tensor(rm), ts.tensor(rv)
    pm, pv = torch.tensor(rm), torch.tensor(rv)
    got = ts.batch_norm(ts.tensor(x), ts.tensor(w), ts.tensor(b), tm, tv, True, 0.1, 1e-5, False)
    exp = torch.batch_norm(torch.tensor(x), torch.tensor(w), torch.tensor(b), pm, pv, True, 0.1, 1e-5, False)
    _compare(got, exp, rtol=1e-4, atol=1e-5)
    _compare(tm, pm, rtol=1e-5)
    _compare(tv, pv, rtol=1e-5)
    check(torch, "instance_norm", x, w, b, None, None, True, 0.1, 1e-5, False, rtol=1e-4, atol=1e-5)


def test_dropout_aliases(torch):
    x = ts.ones(1000)
    assert ts.dropout(x, 0.5, False) is x
    y = ts.dropout(x, 0.5, True)
    vals = set(np.unique(y.numpy()).tolist())
    assert vals <= {0.0, 2.0} and 300 < int((y == 0).sum()) < 700
    z = ts.ones(8, 16, 5)
    f = ts.feature_dropout(z, 0.5, True).numpy()
    assert np.all((f == f[:, :, :1]))  # whole planes kept or zeroed
    assert set(np.unique(f).tolist()) <= {0.0, 2.0}
    assert ts.alpha_dropout(x, 0.5, False) is x
    assert ts.feature_alpha_dropout(z, 0.3, True).shape == z.shape
    w = ts.ones(100)
    ts.dropout_(w, 0.5, True)
    assert set(np.unique(w.numpy()).tolist()) <= {0.0, 2.0}
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        ts.feature_dropout(z, 1.5, True)


def test_activation_aliases(torch):
    x = rand(3, 4)
    check(torch, "threshold", x, 0.1, -1.0, grad=True)
    check(torch, "celu", x, 0.7, grad=True)
    check(torch, "selu", x, grad=True)
    check(torch, "hardshrink", x, 0.4, grad=True)
    check(torch, "rrelu", x, rtol=1e-6)  # eval mode: a fixed slope
    check(torch, "prelu", rand(2, 3, 4), np.array([0.25, 0.1, 0.3], dtype=np.float32), grad=True)
    for name, args in (("threshold_", (0.1, -1.0)), ("celu_", (0.7,)), ("selu_", ())):
        t, p = ts.tensor(x), torch.tensor(x)
        assert getattr(ts, name)(t, *args) is t
        getattr(torch, name)(p, *args)
        _compare(t, p)
    check(torch, "pixel_shuffle", rand(1, 8, 2, 3), 2)
    check(torch, "pixel_unshuffle", rand(1, 2, 4, 6), 2)
    check(torch, "channel_shuffle", rand(1, 6, 2, 2), 3)


def test_distance_and_loss_aliases(torch):
    a, b = rand(5, 4), rand(5, 4)
    check(torch, "cosine_similarity", a, b, grad=True)
    check(torch, "pairwise_distance", a, b, 1.5, grad=True)
    check(torch, "pdist", a, grad=True, rtol=1e-4)
    check(torch, "bilinear", rand(3, 2), rand(3, 4), rand(5, 2, 4), rand(5), grad=True, rtol=1e-4, atol=1e-5)
    t = np.sign(rand(5)).astype(np.float32)
    for red in (0, 1, 2):
        check(torch, "kl_div", np.log(rand(5, 4, low=0.1, high=1.0)), rand(5, 4, low=0.0, high=1.0), red, grad=True)
        check(torch, "margin_ranking_loss", rand(5), rand(5), t, 0.1, red, grad=True, nograd=(2,))
        check(torch, "hinge_embedding_loss", a, np.sign(b), 0.5, red, grad=True, nograd=(1,))
        check(torch, "triplet_margin_loss", a, b, rand(5, 4), 1.0, 2, 1e-6, False, red, grad=True, rtol=1e-4)
        check(torch, "poisson_nll_loss", a, rand(5, 4, low=0.0), True, False, 1e-8, red, grad=True, rtol=1e-4,
              nograd=(1,))
        check(torch, "cosine_embedding_loss", a, b, t, 0.0, red, grad=True, rtol=1e-4, nograd=(2,))
    lp = np.log(np.random.default_rng(1).dirichlet(np.ones(5), size=(6, 2))).astype(np.float32)
    tg = np.array([[1, 2, 3], [2, 2, 4]])
    check(torch, "ctc_loss", lp, tg, [6, 5], [3, 2], 0, 1, False, rtol=1e-4,
          torch_fn=lambda *a: torch.ctc_loss(*a), ts_fn=lambda *a: ts.ctc_loss(*a))


def test_pool_aliases(torch):
    x = rand(2, 3, 9)
    check(torch, "max_pool1d", x, 3, grad=True)
    check(torch, "max_pool1d", x, 3, 2, 1)
    check(torch, "max_pool1d_with_indices", x, 2)
    check(torch, "avg_pool1d", x, 3, 2, grad=True)
    check(torch, "adaptive_avg_pool1d", x, 4, grad=True)
    check(torch, "adaptive_max_pool1d", x, 4)
    check(torch, "max_pool2d", rand(1, 2, 6, 6), 2, grad=True)
    check(torch, "max_pool3d", rand(1, 2, 4, 4, 4), 2)


def test_rnn_cells_and_layers(torch):
    x, h, c = rand(3, 4), rand(3, 5), rand(3, 5)
    check(torch, "rnn_tanh_cell", x, h, rand(5, 4), rand(5, 5), rand(5), rand(5), grad=True, rtol=1e-4)
    check(torch, "rnn_relu_cell", x, h, rand(5, 4), rand(5, 5), grad=True, rtol=1e-4)
    check(torch, "gru_cell", x, h, rand(15, 4), rand(15, 5), rand(15), rand(15), grad=True, rtol=1e-4)
    w_ih, w_hh, b_ih, b_hh = rand(20, 4), rand(20, 5), rand(20), rand(20)
    got = ts.lstm_cell(ts.tensor(x), (ts.tensor(h), ts.tensor(c)), *map(ts.tensor, (w_ih, w_hh, b_ih, b_hh)))
    exp = torch.lstm_cell(torch.tensor(x), (torch.tensor(h), torch.tensor(c)),
                          *map(torch.tensor, (w_ih, w_hh, b_ih, b_hh)))
    _compare(got, exp, rtol=1e-5)
    # whole layers: two layers, bidirectional, batch_first
    inp = rand(2, 6, 4)
    for kind, gates in (("lstm", 4), ("gru", 3), ("rnn_tanh", 1), ("rnn_relu", 1)):
        params = []
        for layer in range(2):
            size_in = 4 if layer == 0 else 10
            for _ in range(2):
                params += [rand(gates * 5, size_in), rand(gates * 5, 5), rand(gates * 5), rand(gates * 5)]
        h0 = rand(4, 2, 5)
        hx_ts = (ts.tensor(h0), ts.tensor(h0 * 0.5)) if kind == "lstm" else ts.tensor(h0)
        hx_pt = (torch.tensor(h0), torch.tensor(h0 * 0.5)) if kind == "lstm" else torch.tensor(h0)
        got = getattr(ts, kind)(ts.tensor(inp), hx_ts, [ts.tensor(p) for p in params], True, 2, 0.0, False, True, True)
        exp = getattr(torch, kind)(torch.tensor(inp), hx_pt, [torch.tensor(p) for p in params], True, 2, 0.0, False,
                                   True, True)
        _compare(tuple(got), tuple(exp), rtol=1e-4, atol=1e-5)


def test_embedding_renorm(torch):
    w = rand(5, 3) * 3
    t, p = ts.tensor(w), torch.tensor(w)
    ts.embedding_renorm_(t, ts.tensor([0, 2, 2]), 1.0, 2.0)
    torch.embedding_renorm_(p, torch.tensor([0, 2, 2]), 1.0, 2.0)
    _compare(t, p, rtol=1e-5)


# ============================================================================ top-level in-place forms
@pytest.mark.parametrize("name", ["abs_", "exp_", "relu_", "sigmoid_", "tanh_", "sin_", "neg_", "round_", "trunc_",
                                  "square_", "ceil_", "floor_", "frac_", "sqrt_", "rsqrt_", "log1p_"])
def test_inplace_top_level(torch, name):
    x = rand(3, 4, low=0.1)
    t, p = ts.tensor(x), torch.tensor(x)
    assert getattr(ts, name)(t) is t
    getattr(torch, name)(p)
    _compare(t, p, rtol=1e-5)


def test_inplace_top_level_with_arguments(torch):
    x = rand(3, 4)
    for name, args in (("clamp_", (-0.5, 0.5)), ("fill_", (2.0,)), ("zero_", ()), ("xlogy_", (2.0,))):
        t, p = ts.tensor(np.abs(x)), torch.tensor(np.abs(x))
        getattr(ts, name)(t, *args)
        getattr(torch, name)(p, *args)
        _compare(t, p, rtol=1e-5)


# ============================================================================ Tensor methods
@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
                                "not_equal"])
def test_inplace_comparisons(torch, op):
    a, b = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]], dtype=np.float32), np.array([2.0, 2.0, 2.0], np.float32)
    for other_np in (b, 2.0):
        t, p = ts.tensor(a), torch.tensor(a)
        other_t = ts.tensor(other_np) if isinstance(other_np, np.ndarray) else other_np
        other_p = torch.tensor(other_np) if isinstance(other_np, np.ndarray) else other_np
        assert getattr(t, op + "_")(other_t) is t
        getattr(p, op + "_")(other_p)
        _compare(t, p)
    i = ts.tensor([1, 2, 3])
    getattr(i, op + "_")(2)
    _compare(i, getattr(torch.tensor([1, 2, 3]), op + "_")(2))
    with pytest.raises(RuntimeError, match="output with shape \\[3\\] doesn't match the broadcast shape \\[2, 3\\]"):
        getattr(ts.ones(3), op + "_")(ts.ones(2, 3))


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_inplace_logical(torch, op):
    a, b = np.array([0.0, 1.0, 2.0, 0.0], np.float32), np.array([0.0, 0.0, 3.0, 1.0], np.float32)
    t, p = ts.tensor(a), torch.tensor(a)
    getattr(t, op + "_")(ts.tensor(b))
    getattr(p, op + "_")(torch.tensor(b))
    _compare(t, p)
    t, p = ts.tensor(a > 0), torch.tensor(a > 0)
    getattr(t, op + "_")(ts.tensor(b > 0))
    getattr(p, op + "_")(torch.tensor(b > 0))
    _compare(t, p)
    t, p = ts.tensor(a), torch.tensor(a)
    t.logical_not_()
    p.logical_not_()
    _compare(t, p)


def test_inplace_blas(torch):
    m = rand(3, 4)
    t, p = ts.tensor(m), torch.tensor(m)
    a, b = rand(3, 5), rand(5, 4)
    t.addmm_(ts.tensor(a), ts.tensor(b), beta=0.5, alpha=2.0)
    p.addmm_(torch.tensor(a), torch.tensor(b), beta=0.5, alpha=2.0)
    _compare(t, p, rtol=1e-5)
    v = rand(3)
    t, p = ts.tensor(v), torch.tensor(v)
    t.addmv_(ts.tensor(a), ts.tensor(rand(5) * 0 + 1))
    p.addmv_(torch.tensor(a), torch.ones(5))
    _compare(t, p, rtol=1e-5)
    t, p = ts.tensor(m), torch.tensor(m)
    x1, x2 = rand(3), rand(4)
    t.addr_(ts.tensor(x1), ts.tensor(x2))
    p.addr_(torch.tensor(x1), torch.tensor(x2))
    _compare(t, p, rtol=1e-5)
    bm = rand(2, 3, 4)
    b1, b2 = rand(2, 3, 5), rand(2, 5, 4)
    t, p = ts.tensor(bm), torch.tensor(bm)
    t.baddbmm_(ts.tensor(b1), ts.tensor(b2))
    p.baddbmm_(torch.tensor(b1), torch.tensor(b2))
    _compare(t, p, rtol=1e-5)
    t, p = ts.tensor(m), torch.tensor(m)
    t.addbmm_(ts.tensor(b1), ts.tensor(b2))
    p.addbmm_(torch.tensor(b1), torch.tensor(b2))
    _compare(t, p, rtol=1e-5, atol=1e-5)
    # autograd through an in-place addmm_ on a non-leaf
    w = ts.tensor(a, requires_grad=True)
    pw = torch.tensor(a, requires_grad=True)
    out = ts.zeros(3, 4) * 1.0
    out.addmm_(w, ts.tensor(b))
    out.sum().backward()
    pout = torch.zeros(3, 4) * 1.0
    pout.addmm_(pw, torch.tensor(b))
    pout.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), pw.grad.numpy(), rtol=1e-5)


def test_fill_diagonal(torch):
    for shape, wrap in (((3, 3), False), ((5, 3), False), ((7, 3), True), ((3, 5), True), ((3, 3, 3), False),
                        ((0, 2), False)):
        t, p = ts.zeros(*shape), torch.zeros(*shape)
        assert t.fill_diagonal_(2.5, wrap) is t
        p.fill_diagonal_(2.5, wrap)
        _compare(t, p)
    t = ts.zeros(4, 4).T  # a non-contiguous view
    p = torch.zeros(4, 4).T
    t.fill_diagonal_(1.0)
    p.fill_diagonal_(1.0)
    _compare(t, p)
    with pytest.raises(RuntimeError, match="dimensions must larger than 1"):
        ts.ones(3).fill_diagonal_(1)
    with pytest.raises(RuntimeError, match="all dimensions of input must be of equal length"):
        ts.ones(3, 4, 3).fill_diagonal_(1)


def test_masked_scatter_scatter_reduce_index_reduce(torch):
    x = rand(3, 4)
    mask = rand(3, 4) > 0
    src = rand(12)
    t, p = ts.tensor(x), torch.tensor(x)
    t.masked_scatter_(ts.tensor(mask), ts.tensor(src))
    p.masked_scatter_(torch.tensor(mask), torch.tensor(src))
    _compare(t, p)
    idx = np.array([[0, 1, 0, 2], [2, 2, 1, 0]])
    s = rand(2, 4)
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            t, p = ts.tensor(x), torch.tensor(x)
            t.scatter_reduce_(0, ts.tensor(idx), ts.tensor(s), reduce, include_self=include_self)
            p.scatter_reduce_(0, torch.tensor(idx), torch.tensor(s), reduce, include_self=include_self)
            _compare(t, p, rtol=1e-5)
    index = np.array([0, 2, 0])
    source = rand(3, 3)
    for reduce in ("prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            got = ts.tensor(x).index_reduce(1, ts.tensor(index), ts.tensor(source), reduce, include_self=include_self)
            exp = torch.tensor(x).index_reduce(1, torch.tensor(index), torch.tensor(source), reduce,
                                               include_self=include_self)
            _compare(got, exp, rtol=1e-5)
            t = ts.tensor(x.T.copy())
            t.index_reduce_(0, ts.tensor(index), ts.tensor(source.T.copy()), reduce, include_self=include_self)
            _compare(t, torch.tensor(x.T.copy()).index_reduce_(0, torch.tensor(index), torch.tensor(source.T.copy()),
                                                               reduce, include_self=include_self), rtol=1e-5)
    with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax or amin but got sum"):
        ts.ones(3).index_reduce(0, ts.tensor([0]), ts.ones(1), "sum")


def test_put(torch):
    x = rand(3, 4)
    idx = np.array([0, 5, -1, 5])
    src = rand(4)
    for acc in (False, True):
        got = ts.tensor(x).put(ts.tensor(idx[:3]), ts.tensor(src[:3]), acc)
        _compare(got, torch.tensor(x).put(torch.tensor(idx[:3]), torch.tensor(src[:3]), acc))
        t = ts.tensor(x)
        t.put_(ts.tensor(idx), ts.tensor(src), accumulate=True)
        p = torch.tensor(x)
        p.put_(torch.tensor(idx), torch.tensor(src), accumulate=True)
        _compare(t, p, rtol=1e-6)
    _compare(ts.put(ts.tensor(x), ts.tensor([1]), ts.tensor([9.0])),
             torch.put(torch.tensor(x), torch.tensor([1]), torch.tensor([9.0])))
    with pytest.raises(IndexError, match="out of range: tried to access index 5 on a tensor of 3 elements."):
        ts.ones(3).put_(ts.tensor([5]), ts.tensor([1.0]))
    with pytest.raises(IndexError, match="Expected source and index to have the same number of elements"):
        ts.ones(3).put_(ts.tensor([1]), ts.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="put_\\(\\): Expected a long tensor for index, but got Float"):
        ts.ones(3).put_(ts.tensor([1.0]), ts.tensor([1.0]))


def test_inplace_aliases_and_clamps(torch):
    x = rand(3, 4, low=-0.9, high=0.9)
    for name, args in (("clamp_min_", (0.1,)), ("clamp_max_", (0.2,)), ("arctanh_", ()), ("arcsinh_", ()),
                       ("heaviside_", (ts.tensor(0.5),))):
        t, p = ts.tensor(x), torch.tensor(x)
        getattr(t, name)(*args)
        targs = tuple(torch.tensor(a.numpy()) if isinstance(a, ts.Tensor) else a for a in args)
        getattr(p, name)(*targs)
        _compare(t, p, rtol=1e-5)
    y = rand(3, 4)
    t, p = ts.tensor(x), torch.tensor(x)
    t.arctan2_(ts.tensor(y))
    p.arctan2_(torch.tensor(y))
    _compare(t, p, rtol=1e-5)
    t, p = ts.tensor(x + 2), torch.tensor(x + 2)
    t.arccosh_()
    p.arccosh_()
    _compare(t, p, rtol=1e-5)


def test_sum_to_size_new_and_adjoints(torch):
    x = rand(2, 3, 4)
    for size in ((3, 4), (1, 4), (2, 1, 4), (1, 1, 1), (4,)):
        _compare(ts.tensor(x).sum_to_size(*size), torch.tensor(x).sum_to_size(*size), rtol=1e-5)
    _compare(ts.tensor(x).sum_to_size((3, 1)), torch.tensor(x).sum_to_size((3, 1)), rtol=1e-5)
    with pytest.raises(RuntimeError, match="size \\{\\[3, 3\\]\\} is not expandable to size \\{\\[2, 3\\]\\}."):
        ts.ones(2, 3).sum_to_size(3, 3)
    t = ts.ones(2, dtype=ts.int32)
    n = t.new(2, 3)
    assert n.shape == (2, 3) and n.dtype == ts.int32
    assert t.new([1, 2]).tolist() == [1, 2] and t.new([1, 2]).dtype == ts.int32
    assert t.new().shape == (0,) and t.new(ts.Size([4])).shape == (4,)
    m = rand(2, 3, 4)
    _compare(ts.tensor(m).mH, torch.tensor(m).mH)
    _compare(ts.tensor(m[0]).H, torch.tensor(m[0]).H)
    _compare(ts.tensor(m).adjoint(), torch.tensor(m).adjoint())
    _compare(ts.adjoint(ts.tensor(m)), torch.adjoint(torch.tensor(m)))
    c = (rand(2, 2) + 1j * rand(2, 2)).astype(np.complex64)
    _compare(ts.tensor(c).mH, torch.tensor(c).mH.resolve_conj())
    with pytest.raises(RuntimeError, match="tensor.H is only supported on matrices \\(2-D tensors\\). Got 1-D"):
        ts.ones(3).H
    with pytest.raises(RuntimeError, match="tensor.mH is only supported on matrices or batches of matrices"):
        ts.ones(3).mH


def test_method_spellings(torch):
    x = rand(4, 4, dtype=np.float64)
    t, p = ts.tensor(x), torch.tensor(x)
    _compare(t.matrix_exp(), p.matrix_exp(), rtol=1e-9, atol=1e-9)
    _compare(t.pinverse(), p.pinverse(), rtol=1e-8, atol=1e-8)
    _compare(t.corrcoef(), p.corrcoef(), rtol=1e-9, atol=1e-9)
    _compare(t.dist(ts.zeros(4)), p.dist(torch.zeros(4)), rtol=1e-10)
    _compare(t.inner(t), p.inner(p), rtol=1e-10)
    _compare(t.argwhere(), p.argwhere())
    _compare(t.diagflat(), p.diagflat())
    _compare(t.fmax(ts.zeros(4)), p.fmax(torch.zeros(4)))
    _compare(t.i0(), p.i0(), rtol=1e-12)
    _compare((t.abs() + 1).mvlgamma(2), (p.abs() + 1).mvlgamma(2), rtol=1e-10)
    _compare(t.float_power(2), p.float_power(2), rtol=1e-12)
    _compare(t.ldexp(ts.tensor([1])), p.ldexp(torch.tensor([1])))
    _compare(t.nonzero_static(size=20), p.nonzero_static(size=20))
    _compare(t.nonzero_static(size=3, fill_value=-5), p.nonzero_static(size=3, fill_value=-5))
    u = ts.tensor(np.array([1.5, 2.0]))
    u.i0_()
    _compare(u, torch.tensor(np.array([1.5, 2.0])).i0_(), rtol=1e-12)
    u = ts.tensor(np.array([1.5, 2.0]))
    u.polygamma_(1)
    _compare(u, torch.tensor(np.array([1.5, 2.0])).polygamma_(1), rtol=1e-10)


def test_every_top_level_inplace_form_has_its_method():
    from tessera import _torch_functions_more
    missing = [n for n in _torch_functions_more._INPLACE_METHODS if not hasattr(ts.Tensor, n)]
    assert not missing, missing


def test_igamma_igammac(torch):
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.uniform(0, 5, 40), rng.uniform(5, 500, 40), [0, 0, 1, 2, np.inf, 3, -1, 0.5, np.nan]])
    x = np.concatenate([rng.uniform(0, 10, 40), rng.uniform(0, 800, 40), [1, 0, 0, np.inf, 2, 1e-300, 1, 1e-3, 1]])
    for name in ("igamma", "igammac"):
        check(torch, name, a, x, rtol=1e-8, atol=1e-300)
        check(torch, name, a[:80].astype(np.float32), x[:80].astype(np.float32), rtol=1e-5, atol=1e-12)
        _compare(getattr(ts.tensor(a), name)(ts.tensor(x)), getattr(torch.tensor(a), name)(torch.tensor(x)),
                 rtol=1e-8, atol=1e-300)
    t = ts.tensor(a[:5])
    t.igamma_(ts.tensor(x[:5]))
    _compare(t, torch.tensor(a[:5]).igamma_(torch.tensor(x[:5])), rtol=1e-8)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        ts.igamma(ts.tensor([1]), ts.tensor([1]))
