"""tessera.testing: assert_close with torch.testing's default tolerances by dtype and its messages.
NumPy is imported on first use: `import tessera` stays NumPy-free."""
import tessera

# (rtol, atol) by dtype, as torch.testing.assert_close; integers and bool compare exactly.
_DEFAULT_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
                       "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


def _as_numpy(value):
    import numpy as np

    if isinstance(value, tessera.Tensor):
        value = value.detach()
        if value.dtype.name == "bfloat16":
            value = value.float()
        return value.cpu().numpy()
    return np.asarray(value)


def assert_close(actual, expected, *, rtol=None, atol=None, equal_nan=False, check_device=True, check_dtype=True,
                 check_layout=True, check_stride=False, msg=None):
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {'rtol' if rtol is None else 'atol'}.")
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            raise AssertionError(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
        for a, e in zip(actual, expected):
            assert_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device,
                         check_dtype=check_dtype, msg=msg)
        return
    if isinstance(actual, dict) and isinstance(expected, dict):
        if set(actual) != set(expected):
            raise AssertionError(f"The keys of the mappings do not match: {sorted(actual)} != {sorted(expected)}")
        for k in actual:
            assert_close(actual[k], expected[k], rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device,
                         check_dtype=check_dtype, msg=msg)
        return
    both_tensors = isinstance(actual, tessera.Tensor) and isinstance(expected, tessera.Tensor)
    if both_tensors:
        if tuple(actual.shape) != tuple(expected.shape):
            raise AssertionError(msg or f"The values for attribute 'shape' do not match: {tuple(actual.shape)} != "
                                        f"{tuple(expected.shape)}.")
        if check_dtype and actual.dtype != expected.dtype:
            raise AssertionError(msg or f"The values for attribute 'dtype' do not match: {actual.dtype} != "
                                        f"{expected.dtype}.")
        if check_device and actual.device != expected.device:
            raise AssertionError(msg or f"The values for attribute 'device' do not match: {actual.device} != "
                                        f"{expected.device}.")
        dtype_name = actual.dtype.name
    else:
        dtype_name = _as_numpy(actual).dtype.name
    if rtol is None:
        rtol, atol = _DEFAULT_TOLERANCES.get(dtype_name, (0.0, 0.0))
    import numpy as np

    a, e = _as_numpy(actual), _as_numpy(expected)
    if a.shape != e.shape:
        raise AssertionError(msg or f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.")
    close = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if close.all():
        return
    bad = int((~close).sum())
    diff = np.abs(a.astype(np.float64) - e.astype(np.float64)) if a.dtype.kind != "c" else np.abs(a - e)
    worst = np.unravel_index(int(np.nanargmax(np.where(close, -np.inf, diff))), a.shape) if a.ndim else ()
    raise AssertionError(msg or (
        f"Tensor-likes are not close!\n\nMismatched elements: {bad} / {a.size} ({100.0 * bad / max(a.size, 1):.1f}%)\n"
        f"Greatest absolute difference: {diff[worst]} at index {tuple(int(i) for i in worst)} "
        f"(up to {atol} allowed)\nrtol={rtol}, atol={atol}"))


assert_allclose = assert_close
__all__ = ["assert_close"]
