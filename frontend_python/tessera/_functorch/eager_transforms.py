"""torch.func's autodiff transforms: grad, grad_and_value, vjp, jacrev, jvp, jacfwd, hessian, linearize.

They run the autograd plugin on fresh inputs, so they compose with vmap (the Batched key sits above
Autograd: under vmap, autograd records the physical calls) and with each other (an input that
already requires grad is differentiated through a differentiable alias, keeping the outer graph)."""
import functools

import tessera
from tessera import _C
from tessera._functorch import vmap as _vmap_mod
from tessera.utils._pytree import tree_flatten, tree_map, tree_unflatten

__all__ = ["grad", "grad_and_value", "vjp", "jacrev", "jvp", "jacfwd", "hessian", "linearize"]


def _check_argnums(argnums, args, api):
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        nums = (argnums,)
    elif isinstance(argnums, tuple) and argnums and all(isinstance(a, int) for a in argnums):
        nums = argnums
    else:
        raise RuntimeError(f"{api}: Expected argnums to be int or tuple of ints, got: {argnums}")
    for a in nums:
        if not -len(args) <= a < len(args):
            raise RuntimeError(f"{api}: Got argnums={a}, but only {len(args)} positional inputs")
    if len(set(a % len(args) for a in nums)) != len(nums):
        raise RuntimeError(f"{api}: argnums must be unique, got {argnums}")
    return tuple(a % len(args) for a in nums)


def _prepare(x, api):
    """A tensor to differentiate with respect to: batched at every open vmap level (so gradients are
    per sample), and tracked by autograd without cutting a graph an outer transform is building."""
    if not isinstance(x, _C.Tensor):
        raise RuntimeError(f"{api}: Expected the differentiated inputs to be Tensors (or pytrees of them), "
                           f"got {type(x)}")
    if not (x.is_floating_point() or x.is_complex()):
        raise RuntimeError(f"{api}: only Tensors of floating point or complex dtype can require gradients, "
                           f"got {x.dtype}")
    # Under jvp/jacfwd (forward over reverse) the input keeps its tangent (detach would drop it);
    # primal and tangent are promoted separately, so a dual is batched at one level as a whole.
    from tessera.autograd import forward_ad
    primal, tangent = forward_ad.unpack_dual(x)
    for level in _vmap_mod.active_levels():
        if _vmap_mod.tensor_level(primal) < level:
            primal = _vmap_mod.promote(primal, level)
        if tangent is not None and _vmap_mod.tensor_level(tangent) < level:
            tangent = _vmap_mod.promote(tangent, level)
    leaf = primal.view_as(primal) if primal.requires_grad else primal.detach().requires_grad_()
    return leaf if tangent is None else forward_ad.make_dual(leaf, tangent)


def _needs_graph(leaves):
    """Whether a transform's results must stay differentiable: an input requires grad, or carries a
    tangent (jvp/jacfwd over this transform: detaching would drop it)."""
    if any(isinstance(t, _C.Tensor) and t.requires_grad for t in leaves) and tessera.is_grad_enabled():
        return True
    from tessera.autograd import forward_ad
    return forward_ad._current_level >= 0 and any(
        isinstance(t, _C.Tensor) and forward_ad.unpack_dual(t).tangent is not None for t in leaves)


def _grads(outputs, inputs, seeds, create_graph):
    grads = tessera.autograd.grad(outputs, inputs, seeds, retain_graph=True, create_graph=create_graph,
                                  allow_unused=True)
    return [tessera.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value: (gradient of func's scalar output w.r.t. args[argnums], output)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        api = "grad_and_value(f)(*args)"
        nums = _check_argnums(argnums, args, api)
        originals = [args[i] for i in nums]
        leaves, spec = tree_flatten(tuple(originals))
        create_graph = _needs_graph(leaves)
        with tessera.enable_grad():
            prepared = [_prepare(x, api) for x in leaves]
            new_args = list(args)
            for i, sub in zip(nums, tree_unflatten(prepared, spec)):
                new_args[i] = sub
            output = func(*new_args, **kwargs)
            aux = None
            if has_aux:
                if not (isinstance(output, tuple) and len(output) == 2):
                    raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux "
                                       "is True")
                output, aux = output
            if not isinstance(output, _C.Tensor):
                raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(output)}")
            if output.dim() != 0:
                raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got tensor with "
                                   f"{output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
            if output.requires_grad:
                grads = _grads([output], prepared, None, create_graph)
            else:  # the output does not depend on the inputs
                grads = [tessera.zeros_like(x) for x in prepared]
        if not create_graph:
            grads = [g.detach() for g in grads]
            output = output.detach()
        grads = tree_unflatten(grads, spec)
        grads = grads[0] if isinstance(argnums, int) else grads
        return (grads, (output, aux)) if has_aux else (grads, output)

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: the gradient of func's scalar output with respect to args[argnums]."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: (func(*primals), vjp_fn[, aux]); vjp_fn(cotangents) gives one gradient per primal."""
    api = "vjp(f, *primals)"
    leaves, spec = tree_flatten(primals)
    create_graph = _needs_graph(leaves)
    with tessera.enable_grad():
        prepared = [_prepare(x, api) for x in leaves]
        output = func(*tree_unflatten(prepared, spec))
        aux = None
        if has_aux:
            if not (isinstance(output, tuple) and len(output) == 2):
                raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True")
            output, aux = output
    out_leaves, out_spec = tree_flatten(output)
    for o in out_leaves:
        if not isinstance(o, _C.Tensor):
            raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output and returns only "
                               f"Tensors (or pytrees of them), got {type(o)}")

    def vjp_fn(cotangents):
        ct_leaves, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function. cotangents: {ct_spec}, primal output: {out_spec}")
        for ct, o in zip(ct_leaves, out_leaves):
            if tuple(ct.shape) != tuple(o.shape):
                raise RuntimeError(f"vjp: a cotangent of shape {tuple(ct.shape)} does not match its output's shape "
                                   f"{tuple(o.shape)}")
        pairs = [(o, ct) for o, ct in zip(out_leaves, ct_leaves) if o.requires_grad]
        graph = create_graph or any(ct.requires_grad for ct in ct_leaves)
        with tessera.enable_grad():
            if pairs:
                grads = _grads([o for o, _ in pairs], prepared, [ct for _, ct in pairs], graph)
            else:
                grads = [tessera.zeros_like(x) for x in prepared]
        if not graph:
            grads = [g.detach() for g in grads]
        return tree_unflatten(grads, spec)

    if not create_graph:
        output = tree_map(lambda t: t.detach() if isinstance(t, _C.Tensor) else t, output)
    return (output, vjp_fn, aux) if has_aux else (output, vjp_fn)


def _basis(leaves):
    """One-hot cotangents (or tangents) for the flattened elements of `leaves`: per leaf, a tensor of
    shape [total, *leaf.shape]."""
    total = sum(t.numel() for t in leaves)
    dtype = leaves[0].dtype if leaves else None
    eye = tessera.eye(total, dtype=dtype, device=leaves[0].device)
    out, start = [], 0
    for t in leaves:
        n = t.numel()
        out.append(eye[:, start:start + n].reshape(total, *t.shape).to(t.dtype))
        start += n
    return out, total


def _split_rows(jac, out_leaves, in_shape):
    """Rows of a [total, *in_shape] block, split per output leaf and shaped [*out.shape, *in_shape]."""
    pieces, start = [], 0
    for o in out_leaves:
        n = o.numel()
        pieces.append(jac[start:start + n].reshape(*o.shape, *in_shape))
        start += n
    return pieces


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """torch.func.jacrev: the Jacobian by reverse mode, one vjp per output element under vmap."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _check_argnums(argnums, args, "jacrev")

        def restricted(*diff):
            new_args = list(args)
            for i, a in zip(nums, diff):
                new_args[i] = a
            return func(*new_args, **kwargs)

        result = vjp(restricted, *[args[i] for i in nums], has_aux=has_aux)
        output, vjp_fn = result[0], result[1]
        out_leaves, out_spec = tree_flatten(output)
        basis, _ = _basis(out_leaves)
        cotangent_batch = tree_unflatten(basis, out_spec)
        grads = _vmap_mod.vmap(vjp_fn, chunk_size=chunk_size)(cotangent_batch)  # per primal: [total, *shape]
        in_leaves, in_spec = tree_flatten(grads)
        prim_leaves = tree_flatten(tuple(args[i] for i in nums))[0]
        # per output leaf: the input structure with each leaf's block
        per_input = [_split_rows(g, out_leaves, tuple(p.shape)) for g, p in zip(in_leaves, prim_leaves)]
        per_output = []
        for k in range(len(out_leaves)):
            tree = tree_unflatten([blocks[k] for blocks in per_input], in_spec)
            per_output.append(tree[0] if isinstance(argnums, int) else tree)
        jac = tree_unflatten(per_output, out_spec)
        return (jac, result[2]) if has_aux else jac

    return wrapper


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """torch.func.jvp: (func(*primals), the Jacobian-vector product with `tangents`).
    Forward mode: the primals become dual tensors (tessera.autograd.forward_ad) and each operator
    computes its output's tangent with its jvp formula. Inside another jvp (a dual level is already
    open: forward mode has one level at a time) it is the transpose of a vjp instead."""
    if not isinstance(primals, tuple):
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid "
                           f"to call f(*primals). Got {type(primals)}")
    if not isinstance(tangents, tuple) or len(tangents) != len(primals):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           "structure. For example, if primals is a tuple of 3 tensors, tangents also must be.")
    p_leaves, p_spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           f"structure, got {p_spec} and {t_spec}")
    for p, t in zip(p_leaves, t_leaves):
        if not isinstance(p, _C.Tensor) or not isinstance(t, _C.Tensor):
            raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be tuples of Tensors")
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the same shape; "
                               f"got {tuple(p.shape)} and {tuple(t.shape)}")
    from tessera.autograd import forward_ad
    if forward_ad._current_level >= 0:
        return _jvp_by_double_vjp(func, primals, t_leaves, has_aux)
    with forward_ad.dual_level():
        duals = [forward_ad.make_dual(p, t) for p, t in zip(p_leaves, t_leaves)]
        result = func(*tree_unflatten(duals, p_spec))
        if has_aux:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError("jvp(f, primals, tangents): output of function f should be a tuple: (output, aux) "
                                   "if has_aux is True")
            result, aux = result
        out_leaves, out_spec = tree_flatten(result)
        primals_out, tangents_out = [], []
        for o in out_leaves:
            if not isinstance(o, _C.Tensor):
                raise RuntimeError(f"jvp(f, primals, tangents): Expected f(*primals) to return only tensors, got "
                                   f"unsupported type {type(o)}")
            primal, tangent = forward_ad.unpack_dual(o)
            primals_out.append(primal)
            tangents_out.append(tessera.zeros_like(primal) if tangent is None else tangent)
    out = (tree_unflatten(primals_out, out_spec), tree_unflatten(tangents_out, out_spec))
    if has_aux:
        return out + (tree_map(lambda a: forward_ad.unpack_dual(a).primal if isinstance(a, _C.Tensor) else a, aux),)
    return out


def _jvp_by_double_vjp(func, primals, t_leaves, has_aux):
    """The jvp as the transpose of a vjp (a vjp of the vjp): for jvp nested in jvp."""
    p_leaves = tree_flatten(primals)[0]
    with tessera.enable_grad():
        result = vjp(func, *primals, has_aux=has_aux)
        output, vjp_fn = result[0], result[1]
        out_leaves, out_spec = tree_flatten(output)
        dummies = [tessera.zeros_like(o).requires_grad_() for o in out_leaves]
        grads = tree_flatten(vjp_fn(tree_unflatten(dummies, out_spec)))[0]
        pairs = [(g, t) for g, t in zip(grads, t_leaves) if g.requires_grad]
        if pairs:
            tangent_out = tessera.autograd.grad([g for g, _ in pairs], dummies, [t for _, t in pairs],
                                                create_graph=_needs_graph(p_leaves + t_leaves),
                                                allow_unused=True)
        else:
            tangent_out = [None] * len(dummies)
    tangent_out = [tessera.zeros_like(o) if t is None else t for t, o in zip(tangent_out, out_leaves)]
    if not _needs_graph(p_leaves + t_leaves):
        tangent_out = [t.detach() for t in tangent_out]
    out = (output, tree_unflatten(tangent_out, out_spec))
    return out + (result[2],) if has_aux else out


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the Jacobian by forward mode, one jvp per input element under vmap."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _check_argnums(argnums, args, "jacfwd")
        primals = tuple(args[i] for i in nums)
        p_leaves, p_spec = tree_flatten(primals)
        basis, total = _basis(p_leaves)

        def restricted(*diff):
            new_args = list(args)
            for i, a in zip(nums, diff):
                new_args[i] = a
            return func(*new_args, **kwargs)

        def push(*tangent_leaves):
            return jvp(restricted, primals, tree_unflatten(list(tangent_leaves), p_spec), has_aux=has_aux)

        results = _vmap_mod.vmap(push, randomness=randomness)(*basis)
        output_b, tangents = results[0], results[1]
        output = tree_map(lambda t: t[0] if isinstance(t, _C.Tensor) else t, output_b)
        out_leaves, out_spec = tree_flatten(output)
        t_leaves = tree_flatten(tangents)[0]
        per_output = []
        for o, tcol in zip(out_leaves, t_leaves):  # tcol: [total, *o.shape]
            moved = tcol.movedim(0, -1) if tcol.dim() > 1 else tcol
            blocks, start = [], 0
            for p in p_leaves:
                n = p.numel()
                blocks.append(moved[..., start:start + n].reshape(*o.shape, *p.shape))
                start += n
            tree = tree_unflatten(blocks, p_spec)
            per_output.append(tree[0] if isinstance(argnums, int) else tree)
        jac = tree_unflatten(per_output, out_spec)
        if has_aux:
            aux = tree_map(lambda t: t[0] if isinstance(t, _C.Tensor) else t, results[2])
            return jac, aux
        return jac

    return wrapper


def hessian(func, argnums=0):
    """torch.func.hessian: the Jacobian of the Jacobian (reverse over reverse here)."""
    return jacrev(jacrev(func, argnums), argnums)


def linearize(func, *primals):
    """torch.func.linearize: (func(*primals), jvp_fn) where jvp_fn(*tangents) is the jvp at primals."""
    output = func(*primals)

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]

    return output, jvp_fn
