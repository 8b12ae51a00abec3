"""F.grouped_mm (torch 2.15): the matrix products of a mixture of experts, one per group, where
groups share weight shapes and token counts vary. Written over ordinary operators (a slice and a
matmul per group), so autograd, every dtype matmul takes and every device work; torch's CPU kernel
also wants column-major, 16-byte-aligned operands, which this does not need.

Operands, as torch's:
  2-D a (M, K), 3-D b (G, K, N), offs (G): rows offs[g-1]:offs[g] of a times b[g] -> (M, N)
  3-D a (G, M, K), 3-D b (G, K, N), no offs: a batched product -> (G, M, N)
  2-D a (M, K), 2-D b (K, N), offs (G) over K: a[:, s:e] @ b[s:e] per group -> (G, M, N)
  3-D a (G, M, K), 2-D b (K, N), offs (G) over N: a[g] @ b[:, s:e] -> (M, N)
Rows (or columns) past offs[-1] are zeros (torch leaves them uninitialised)."""
import tessera

_FLOATS = ("float32", "bfloat16", "float16")


def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None):
    a, b = mat_a, mat_b
    if a.dim() not in (2, 3):
        raise RuntimeError("mat_a has to be 2 or 3d")
    if b.dim() not in (2, 3):
        raise RuntimeError("mat_b has to be 2 or 3d")
    for name, t in (("mat_a", a), ("mat_b", b)):
        if str(t.dtype).split(".")[-1] not in _FLOATS:
            raise RuntimeError(f"Expected {name} to be Float32, BFloat16 or Float16 matrix, got "
                               f"{_torch_name(t.dtype)}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"Expected mat_a and mat_b to have the same dtype, got {_torch_name(a.dtype)} and "
                           f"{_torch_name(b.dtype)}")
    if bias is not None:
        raise RuntimeError("Bias not supported yet")
    if out_dtype is not None and out_dtype != a.dtype:
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")
    both_3d = a.dim() == 3 and b.dim() == 3
    if (offs is None) != both_3d:
        raise RuntimeError("Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d")
    contraction_b = b.shape[-2] if b.dim() == 3 or a.dim() == 3 else b.shape[0]
    if a.shape[-1] != contraction_b:
        raise RuntimeError("contraction dimension of mat_a and mat_b must match")
    if both_3d:
        if a.shape[0] != b.shape[0]:
            raise RuntimeError("batched dimension has to match")
        return tessera.matmul(a, b)
    ends = _offsets(offs)
    if a.dim() == 2 and b.dim() == 3:
        _check_groups(len(ends), b.shape[0])
        _check_ends(ends, a.shape[0], "the rows of mat_a")
        pieces = [a[s:e] @ b[g] for g, (s, e) in enumerate(zip([0] + ends[:-1], ends))]
        if ends[-1] < a.shape[0]:
            pieces.append(a.new_zeros((a.shape[0] - ends[-1], b.shape[-1])))
        return tessera.cat(pieces, 0)
    if a.dim() == 3:  # 3-D a, 2-D b: groups of b's columns
        _check_groups(len(ends), a.shape[0])
        _check_ends(ends, b.shape[1], "the columns of mat_b")
        pieces = [a[g] @ b[:, s:e] for g, (s, e) in enumerate(zip([0] + ends[:-1], ends))]
        if ends[-1] < b.shape[1]:
            pieces.append(a.new_zeros((a.shape[1], b.shape[1] - ends[-1])))
        return tessera.cat(pieces, 1)
    _check_ends(ends, a.shape[1], "the contraction dimension")  # 2-D x 2-D: groups of K
    return tessera.stack([a[:, s:e] @ b[s:e] for s, e in zip([0] + ends[:-1], ends)], 0)


def _torch_name(dtype):
    return {"float32": "Float", "bfloat16": "BFloat16", "float16": "Half", "float64": "Double", "int32": "Int",
            "int64": "Long"}.get(str(dtype).split(".")[-1], str(dtype))


def _offsets(offs):
    if offs.dtype != tessera.int32:
        raise RuntimeError("Offsets have to be int32")
    if offs.dim() != 1 or offs.shape[0] == 0:
        raise RuntimeError(f"grouped_mm: expected offs to be a non-empty 1-D tensor, got shape {tuple(offs.shape)}")
    return [int(e) for e in offs.tolist()]


def _check_groups(n_offsets, groups):
    if n_offsets != groups:
        raise RuntimeError("matrix batch sizes have to match")


def _check_ends(ends, limit, what):
    previous = 0
    for e in ends:
        if e < previous or e > limit:
            raise RuntimeError(f"grouped_mm: offs must be non-decreasing and within {what} ({limit}), got {ends}")
        previous = e
