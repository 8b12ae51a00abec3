"""gradcheck / gradgradcheck: autograd's gradients against central finite differences (float64).
NumPy is imported on first use (importing tessera stays NumPy-free)."""

from tessera import _C

Tensor = _C.Tensor


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _flat_outputs(func, inputs):
    return [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)]


def _numerical_jacobians(func, inputs, eps):
    import numpy as np

    """One (n_in x n_out) matrix per input requiring grad, by central differences."""
    import tessera as ts

    jacobians = []
    for k, x in enumerate(inputs):
        if not (isinstance(x, Tensor) and x.requires_grad):
            continue
        base = x.detach().numpy().astype(np.float64).copy()
        flat = base.reshape(-1)
        cols = []
        for i in range(flat.size):
            outs = []
            for sign in (1.0, -1.0):
                pert = flat.copy()
                pert[i] += sign * eps
                xs = list(inputs)
                # Still requiring grad: the function may itself differentiate (gradgradcheck).
                xs[k] = ts.tensor(pert.reshape(base.shape), dtype=x.dtype, requires_grad=True)
                outs.append(np.concatenate([o.detach().numpy().astype(np.float64).reshape(-1)
                                            for o in _flat_outputs(func, xs)] or [np.zeros(0)]))
            cols.append((outs[0] - outs[1]) / (2 * eps))
        n_out = cols[0].size if cols else 0
        jacobians.append(np.stack(cols) if cols else np.zeros((0, n_out)))
    return jacobians


def _analytical_jacobians(func, inputs):
    import numpy as np

    import tessera as ts

    diff_inputs = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    outputs = _flat_outputs(func, inputs)
    sizes = [o.numel() for o in outputs]
    n_out = sum(sizes)
    jac = [np.zeros((x.numel(), n_out)) for x in diff_inputs]
    col = 0
    for o, size in zip(outputs, sizes):
        for j in range(size):
            if not o.requires_grad:
                col += 1
                continue
            onehot = np.zeros(size)
            onehot[j] = 1.0
            g = ts.tensor(onehot.reshape(o.shape), dtype=o.dtype)
            grads = ts.autograd.grad([o], diff_inputs, [g], retain_graph=True, allow_unused=True)
            for k, gk in enumerate(grads):
                if gk is not None:
                    jac[k][:, col] = gk.detach().numpy().astype(np.float64).reshape(-1)
            col += 1
    return jac


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, **_ignored):
    """True when the analytical Jacobian matches the numerical one for every input requiring grad."""
    import numpy as np

    inputs = _as_tuple(inputs)
    for x in inputs:
        if isinstance(x, Tensor) and x.requires_grad and str(x.dtype) != "tessera.float64":
            raise ValueError(f"gradcheck expects float64 inputs requiring grad, got {x.dtype}")
    numerical = _numerical_jacobians(func, inputs, eps)
    analytical = _analytical_jacobians(func, inputs)
    for k, (n, a) in enumerate(zip(numerical, analytical)):
        if not np.allclose(a, n, atol=atol, rtol=rtol):
            if raise_exception:
                worst = np.unravel_index(np.argmax(np.abs(a - n)), a.shape)
                raise RuntimeError(f"Jacobian mismatch for input {k}: analytical {a[worst]:.8g} vs numerical "
                                   f"{n[worst]:.8g} at {worst}\nanalytical:\n{a}\nnumerical:\n{n}")
            return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
                  **_ignored):
    """gradcheck of the first-order gradients (computed with create_graph=True)."""
    import numpy as np

    import tessera as ts

    inputs = _as_tuple(inputs)
    outputs = _flat_outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = [ts.tensor(rng.standard_normal(o.shape), dtype=o.dtype, requires_grad=True) for o in outputs]
    grad_outputs = list(_as_tuple(grad_outputs))
    n_in = len(inputs)
    diff_positions = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def first_order(*args):
        xs, gos = args[:n_in], args[n_in:]
        outs = _flat_outputs(func, xs)
        diff = [xs[i] for i in diff_positions]
        grads = ts.autograd.grad(outs, diff, list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_order, inputs + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
