"""tessera.autograd.functional: torch.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp).

Higher-level autodiff over the autograd plugin: every product is one or more `tessera.autograd.grad`
calls (jvp and hvp by the double-backward trick). vectorize=True batches the rows of a Jacobian
with tessera.func's vmap (one batched grad call instead of one call per row), and
strategy="forward-mode" computes the Jacobian with tessera.func.jacfwd. Inputs, outputs, nesting,
strict-mode checks and error messages follow torch.autograd.functional."""
import tessera
from tessera import _C

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]

_Tensor = _C.Tensor


# Utility functions (as torch.autograd.functional's)


def _as_tuple_nocheck(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _as_tuple(inp, arg_name=None, fn_name=None):
    """(whether `inp` was a tuple, `inp` as a tuple of Tensors); TypeError for anything else."""
    if arg_name is None and fn_name is None:
        return _as_tuple_nocheck(inp)
    is_inp_tuple = True
    if not isinstance(inp, tuple):
        inp = (inp,)
        is_inp_tuple = False
    for i, el in enumerate(inp):
        if not isinstance(el, _Tensor):
            if is_inp_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors "
                                f"but the value at index {i} has type {type(el)}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                            f"the given {arg_name} has type {type(el)}.")
    return is_inp_tuple, inp


def _tuple_postprocess(res, to_unpack):
    """Undoes _as_tuple (to_unpack: one flag, or (outer, inner) flags for a tuple of tuples)."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph, need_graph):
    """New tensor objects for the inputs (so the function's own captures of the same tensors are not
    differentiated), differentiable aliases when the caller builds a graph through them."""
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(inp.view_as(inp))
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs, create_graph):
    """Detaches results unless create_graph (recursing into a tuple of tuples)."""
    if isinstance(inputs[0], _Tensor):
        if not create_graph:
            return tuple(inp.detach() for inp in inputs)
        return inputs
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _size(t):
    return tessera.Size(tuple(t.shape))


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if tuple(el_v.shape) != tuple(el_other.shape):
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {_size(el_other)} but got {_size(el_v)}.")


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    if input_type not in ("outputs", "grad_inputs", "jacobian", "hessian"):
        raise RuntimeError("Invalid input_type to _check_requires_grad")
    for i, inp in enumerate(inputs):
        if inp is None:  # only for grad_inputs
            raise RuntimeError(f"The output of the user-provided function is independent of input {i}."
                               " This is not allowed in strict mode.")
        if not inp.requires_grad:
            if input_type == "hessian":
                raise RuntimeError(f"The hessian of the user-provided function with respect to input {i}"
                                   " is independent of the input. This is not allowed in strict mode."
                                   " You should ensure that your function is thrice differentiable and that"
                                   " the hessian depends on the inputs.")
            if input_type == "jacobian":
                raise RuntimeError("While computing the hessian, found that the jacobian of the user-provided"
                                   f" function with respect to input {i} is independent of the input. This is not"
                                   " allowed in strict mode. You should ensure that your function is twice"
                                   " differentiable and that the jacobian depends on the inputs (this would be"
                                   " violated by a linear function for example).")
            if input_type == "grad_inputs":
                raise RuntimeError(f"The gradient with respect to input {i} is independent of the inputs of the"
                                   " user-provided function. This is not allowed in strict mode.")
            raise RuntimeError(f"Output {i} of the user-provided function does not require gradients."
                               " The outputs must be computed in a differentiable manner from the input"
                               " when running in strict mode.")


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad that skips None and non-differentiable outputs (None for every input when none is left)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs, new_grad_outputs = [], []
    for out, grad_out in zip(outputs, grad_outputs):
        if out is not None and out.requires_grad:
            new_outputs.append(out)
            new_grad_outputs.append(grad_out)
    if not new_outputs:
        return (None,) * len(inputs)
    return tessera.autograd.grad(new_outputs, list(inputs), new_grad_outputs, allow_unused=True,
                                 create_graph=create_graph, retain_graph=retain_graph)


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    """Zeros for the None gradients, or torch's strict-mode errors."""
    if stage not in ("back", "back_trick", "double_back", "double_back_trick"):
        raise RuntimeError(f"Invalid stage argument '{stage}' to _fill_in_zeros")
    res = []
    for i, grads_i in enumerate(grads):
        if grads_i is None:
            if strict:
                if stage == "back":
                    raise RuntimeError("The output of the user-provided function is independent of "
                                       f"input {i}. This is not allowed in strict mode.")
                if stage == "back_trick":
                    raise RuntimeError(f"The gradient with respect to the input is independent of entry {i}"
                                       " in the grad_outputs when using the double backward trick to compute"
                                       " forward mode gradients. This is not allowed in strict mode.")
                if stage == "double_back":
                    raise RuntimeError("The jacobian of the user-provided function is independent of "
                                       f"input {i}. This is not allowed in strict mode.")
                raise RuntimeError("The hessian of the user-provided function is independent of "
                                   f"entry {i} in the grad_jacobian. This is not allowed in strict "
                                   "mode as it prevents from using the double backward trick to "
                                   "replace forward mode AD.")
            grads_i = tessera.zeros_like(refs[i])
        elif strict and create_graph and not grads_i.requires_grad:
            if "double" not in stage:
                raise RuntimeError("The jacobian of the user-provided function is independent of "
                                   f"input {i}. This is not allowed in strict mode when create_graph=True.")
            raise RuntimeError("The hessian of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when create_graph=True.")
        res.append(grads_i)
    return tuple(res)


def _check_v(v, others, is_others_tuple, create_graph, fn_name, none_message):
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, others, is_others_tuple)
        return v
    if len(others) != 1 or others[0].nelement() != 1:
        raise RuntimeError(none_message)
    return None


# Public API


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`, shaped as the inputs."""
    with tessera.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        v = _check_v(v, outputs, is_outputs_tuple, create_graph, "vjp",
                     "The vector v can only be None if the user-provided function returns a single Tensor with "
                     "a single element.")
    with tessera.set_grad_enabled(True if create_graph else tessera.is_grad_enabled()):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product at `inputs`, shaped as the outputs (by the
    double-backward trick, as torch.autograd.functional.jvp)."""
    with tessera.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _check_v(v, inputs, is_inputs_tuple, create_graph, "jvp",
                     "The vector v can only be None if the input to the user-provided function is a single "
                     "Tensor with a single element.")
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        # The backward is linear in grad_outputs: their value does not matter (zeros, never inf/nan).
        grad_outputs = tuple(tessera.zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    with tessera.set_grad_enabled(True if create_graph else tessera.is_grad_enabled()):
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_outputs_tuple)


def _construct_standard_basis_for(tensors, tensor_numels):
    """Per tensor, the [sum(numels), numel] block of the identity matrix its elements own."""
    total = sum(tensor_numels)
    chunks = tuple(t.new_zeros(total, n) for t, n in zip(tensors, tensor_numels))
    start = 0
    for chunk, n in zip(chunks, tensor_numels):
        chunk.diagonal(start).fill_(1)
        start -= n
    return chunks


def _jacfwd(func, inputs, strict=False, vectorize=False):
    if strict:
        raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` "
                           'and `strategy="forward-mode"` are not supported together (yet). '
                           "Please either set `strict=False` or "
                           '`strategy="reverse-mode"`.')
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    if not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
                                  "only implemented for `vectorize=True`.")
    from tessera._functorch.eager_transforms import jacfwd

    info = []

    def tupled(*inp):
        is_out_tuple, out = _as_tuple(func(*inp), "outputs")
        if not info:
            info.append(is_out_tuple)
        return out

    jac = jacfwd(tupled, argnums=tuple(range(len(inputs))))(*inputs)  # [output][input]
    jac = tuple(tuple(j.detach() for j in row) for row in jac)
    return _tuple_postprocess(jac, (info[0], is_inputs_tuple))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func at `inputs`: J[i][j] of shape outputs[i].shape + inputs[j].shape (a
    tensor, a tuple, or a tuple of tuples as the inputs and outputs are tensors or tuples)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                             'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                             'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError("torch.autograd.functional.jacobian: `create_graph=True` "
                                      'and `strategy="forward-mode"` are not supported together (yet). '
                                      "Please either set `create_graph=False` or "
                                      '`strategy="reverse-mode"`.')
        return _jacfwd(func, inputs, strict, vectorize)

    with tessera.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)

        if vectorize:
            if strict:
                raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` "
                                   "and `vectorized=True` are not supported together. "
                                   "Please either set `strict=False` or "
                                   "`vectorize=False`.")
            from tessera._functorch.vmap import vmap

            # One batched vjp: the standard basis of the flattened outputs as the cotangents.
            output_numels = tuple(out.nelement() for out in outputs)
            grad_outputs = _construct_standard_basis_for(outputs, output_numels)
            flat_outputs = tuple(out.reshape(-1) for out in outputs)

            def batched_vjp(*grad_output):
                vj = _autograd_grad(flat_outputs, inputs, grad_output, create_graph=create_graph,
                                    retain_graph=True)
                # an unused input: zeros, expanded along the batch by vmap
                return tuple(tessera.zeros_like(inp) if g is None else g for g, inp in zip(vj, inputs))

            jacobians_of_flat_output = vmap(batched_vjp)(*grad_outputs)  # per input: [total, *in.shape]
            jacobian_input_output = []
            for jac_input_i, input_i in zip(jacobians_of_flat_output, inputs):
                row = [jac.reshape(tuple(output_j.shape) + tuple(input_i.shape))
                       for jac, output_j in zip(jac_input_i.split(output_numels, dim=0), outputs)]
                jacobian_input_output.append(row)
            jacobian_output_input = tuple(zip(*jacobian_input_output))
            jacobian_output_input = _grad_postprocess(jacobian_output_input, create_graph)
            return _tuple_postprocess(jacobian_output_input, (is_outputs_tuple, is_inputs_tuple))

        jac = []
        for i, out in enumerate(outputs):
            jac_i = tuple([] for _ in range(len(inputs)))
            flat = out.reshape(-1)
            for j in range(out.nelement()):
                vj = _autograd_grad((flat[j],), inputs, retain_graph=True, create_graph=create_graph)
                for el_idx, (jac_i_el, vj_el, inp_el) in enumerate(zip(jac_i, vj, inputs)):
                    if vj_el is not None:
                        if strict and create_graph and not vj_el.requires_grad:
                            raise RuntimeError("The jacobian of the user-provided function is "
                                               f"independent of input {i}. This is not allowed in "
                                               "strict mode when create_graph=True.")
                        jac_i_el.append(vj_el)
                    else:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is "
                                               f"independent of input {el_idx}. This is not allowed in "
                                               "strict mode.")
                        jac_i_el.append(tessera.zeros_like(inp_el))
            jac.append(tuple(
                (tessera.stack(jac_i_el, dim=0) if jac_i_el
                 else inputs[el_idx].new_zeros((0,) + tuple(inputs[el_idx].shape))).reshape(tuple(out.shape) + tuple(inputs[el_idx].shape))
                for el_idx, jac_i_el in enumerate(jac_i)))
        jac = _grad_postprocess(tuple(jac), create_graph)
        return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar func at `inputs`: H[i][j] of shape inputs[i].shape + inputs[j].shape."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, _Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.nelement() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return out.squeeze()

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t if t.requires_grad else t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_double_backward_setup(func, inputs, v, create_graph, strict, fn_name):
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    v = _check_v(v, inputs, is_inputs_tuple, create_graph, fn_name,
                 "The vector v can only be None if the input to the user-provided function is a single Tensor "
                 "with a single element.")
    outputs = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    if is_outputs_tuple or not isinstance(outputs[0], _Tensor):
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].nelement() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain a single element")
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): the vector-Hessian product of a scalar function, shaped as the inputs."""
    with tessera.enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_double_backward_setup(
            func, inputs, v, create_graph, strict, "vhp")
    with tessera.set_grad_enabled(True if create_graph else tessera.is_grad_enabled()):
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): the Hessian-vector product of a scalar function, shaped as the inputs (by
    the double-backward trick on the gradient, as torch.autograd.functional.hvp)."""
    with tessera.enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_double_backward_setup(
            func, inputs, v, create_graph, strict, "hvp")
        grad_jac = tuple(tessera.zeros_like(inp, requires_grad=True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with tessera.set_grad_enabled(True if create_graph else tessera.is_grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)
