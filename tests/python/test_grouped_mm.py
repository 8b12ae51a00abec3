"""F.grouped_mm / torch._grouped_mm (torch 2.15): every operand layout against per-group NumPy
products, gradients by the same oracle, torch's values and errors when torch is importable, and
the rows past the last offset (zeros here; torch leaves them uninitialised)."""
import numpy as np
import pytest
from conftest import HAVE_TORCH, to_np

import tessera as ts
import tessera.nn.functional as F

RNG = np.random.default_rng(15)


def ends(*values):
    return ts.tensor(list(values), dtype=ts.int32)


def grouped_numpy(a, b, offs):
    """The oracle: per-group products in float64."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    if offs is None:
        return a @ b
    bounds = list(zip([0] + list(offs[:-1]), offs))
    if a.ndim == 2 and b.ndim == 3:
        out = np.zeros((a.shape[0], b.shape[-1]))
        for g, (s, e) in enumerate(bounds):
            out[s:e] = a[s:e] @ b[g]
        return out
    if a.ndim == 3:
        out = np.zeros((a.shape[1], b.shape[1]))
        for g, (s, e) in enumerate(bounds):
            out[:, s:e] = a[g] @ b[:, s:e]
        return out
    return np.stack([a[:, s:e] @ b[s:e] for s, e in bounds])


CASES = {  # name: (shape of a, shape of b, offsets)
    "2d-3d": ((10, 16), (3, 16, 8), (3, 7, 9)),
    "2d-3d-empty-group": ((6, 8), (3, 8, 5), (2, 2, 6)),
    "3d-3d": ((3, 5, 16), (3, 16, 8), None),
    "2d-2d": ((8, 16), (16, 8), (4, 12, 16)),
    "3d-2d": ((3, 5, 16), (16, 24), (8, 16, 20)),
}


@pytest.mark.parametrize("dtype", [ts.float32, ts.bfloat16], ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("case", list(CASES), ids=str)
def test_grouped_mm_matches_per_group_products(case, dtype):
    sa, sb, offs = CASES[case]
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    ta, tb = ts.tensor(a, dtype=dtype, requires_grad=True), ts.tensor(b, dtype=dtype, requires_grad=True)
    out = F.grouped_mm(ta, tb, offs=ends(*offs) if offs else None)
    assert out.dtype == dtype
    # the oracle from the operands as rounded to dtype
    ra, rb = to_np(ta.detach().float()), to_np(tb.detach().float())
    want = grouped_numpy(ra, rb, offs)
    tol = 1e-5 if dtype == ts.float32 else 3e-2
    np.testing.assert_allclose(to_np(out.float()), want, rtol=tol, atol=tol * 4)
    # gradients: of sum(out * w), which the per-group products give by hand
    w = RNG.standard_normal(want.shape)
    (out.float() * ts.tensor(w, dtype=ts.float32)).sum().backward()
    # each product is linear in each operand: its gradient is the other operand times w
    ga, gb = np.zeros_like(ra, dtype=np.float64), np.zeros_like(rb, dtype=np.float64)
    if offs is None:
        ga, gb = w @ np.swapaxes(rb, -1, -2), np.swapaxes(ra, -1, -2) @ w
    else:
        bounds = list(zip([0] + list(offs[:-1]), offs))
        for g, (s, e) in enumerate(bounds):
            if ra.ndim == 2 and rb.ndim == 3:
                ga[s:e] = w[s:e] @ rb[g].T
                gb[g] = ra[s:e].T @ w[s:e]
            elif ra.ndim == 3:
                ga[g] = w[:, s:e] @ rb[:, s:e].T
                gb[:, s:e] = ra[g].T @ w[:, s:e]
            else:
                ga[:, s:e] = w[g] @ rb[s:e].T
                gb[s:e] = ra[:, s:e].T @ w[g]
    np.testing.assert_allclose(to_np(ta.grad.float()), ga, rtol=tol, atol=tol * 4)
    np.testing.assert_allclose(to_np(tb.grad.float()), gb, rtol=tol, atol=tol * 4)


def test_rows_past_the_last_offset_are_zero():
    out = F.grouped_mm(ts.ones(7, 2), ts.ones(2, 2, 3), offs=ends(2, 5))
    np.testing.assert_array_equal(to_np(out[5:]), np.zeros((2, 3)))
    np.testing.assert_array_equal(to_np(out[:5]), np.full((5, 3), 2.0))
    assert ts._grouped_mm is F.grouped_mm


@pytest.mark.parametrize("call,message", [
    (lambda: F.grouped_mm(ts.ones(2, 3, 4, 5), ts.ones(3, 5, 2), offs=ends(1, 2, 3)), "mat_a has to be 2 or 3d"),
    (lambda: F.grouped_mm(ts.ones(6, 4), ts.ones(3, 5, 2), offs=ends(1, 2, 3)),
     "contraction dimension of mat_a and mat_b must match"),
    (lambda: F.grouped_mm(ts.ones(6, 4), ts.ones(3, 4, 2, dtype=ts.bfloat16), offs=ends(1, 2, 3)),
     "Expected mat_a and mat_b to have the same dtype, got Float and BFloat16"),
    (lambda: F.grouped_mm(ts.ones(6, 4), ts.ones(3, 4, 2), offs=ts.tensor([1, 2, 3])), "Offsets have to be int32"),
    (lambda: F.grouped_mm(ts.ones(6, 4), ts.ones(3, 4, 2)), "Have to provide offsets if there is a 2d matrix"),
    (lambda: F.grouped_mm(ts.ones(3, 6, 4), ts.ones(3, 4, 2), offs=ends(1, 2, 3)), "no offset if both matrices are 3d"),
    (lambda: F.grouped_mm(ts.ones(2, 6, 4), ts.ones(3, 4, 2)), "batched dimension has to match"),
    (lambda: F.grouped_mm(ts.ones(6, 4), ts.ones(2, 4, 2), offs=ends(1, 2, 3)), "matrix batch sizes have to match"),
    (lambda: F.grouped_mm(ts.ones(6, 4, dtype=ts.int32), ts.ones(3, 4, 2, dtype=ts.int32), offs=ends(1, 2, 3)),
     "Expected mat_a to be Float32, BFloat16 or Float16 matrix, got Int"),
    (lambda: F.grouped_mm(ts.ones(6, 4), ts.ones(3, 4, 2), offs=ends(1, 2, 3), bias=ts.ones(3, 2)),
     "Bias not supported yet"),
    (lambda: F.grouped_mm(ts.ones(6, 4), ts.ones(3, 4, 2), offs=ends(1, 2, 3), out_dtype=ts.float64),
     "output dtype must match `mat_a` dtype"),
    (lambda: F.grouped_mm(ts.ones(6, 4), ts.ones(3, 4, 2), offs=ends(4, 2, 6)), "offs must be non-decreasing"),
    (lambda: F.grouped_mm(ts.ones(6, 4), ts.ones(3, 4, 2), offs=ends(1, 2, 9)), "offs must be non-decreasing"),
], ids=range(13))
def test_errors_as_torch(call, message):
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


@pytest.mark.skipif(not HAVE_TORCH, reason="torch not importable")
@pytest.mark.parametrize("case", list(CASES), ids=str)
def test_against_torch(case):
    import torch
    sa, sb, offs = CASES[case]
    a, b = RNG.standard_normal(sa).astype(np.float32), RNG.standard_normal(sb).astype(np.float32)
    ours = F.grouped_mm(ts.tensor(a, dtype=ts.bfloat16), ts.tensor(b, dtype=ts.bfloat16),
                        offs=ends(*offs) if offs else None)
    tb = torch.tensor(b, dtype=torch.bfloat16)
    tb = tb.transpose(-2, -1).contiguous().transpose(-2, -1)  # torch's CPU kernel wants b column-major
    theirs = torch.nn.functional.grouped_mm(torch.tensor(a, dtype=torch.bfloat16), tb,
                                            offs=torch.tensor(offs, dtype=torch.int32) if offs else None)
    rows = offs[-1] if offs and len(sa) == 2 and len(sb) == 3 else None  # torch leaves the rest uninitialised
    cols = offs[-1] if offs and len(sa) == 3 and len(sb) == 2 else None
    o, t = to_np(ours.float()), theirs.float().numpy()
    if rows is not None:
        o, t = o[:rows], t[:rows]
    if cols is not None:
        o, t = o[:, :cols], t[:, :cols]
    np.testing.assert_allclose(o, t, rtol=2e-2, atol=5e-2)
