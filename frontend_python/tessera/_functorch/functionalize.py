"""torch.func.functionalize in eager mode: the function runs on copies of its tensor inputs, so
its in-place operators write into the copies, not into the caller's tensors; an input the function
mutated gets the new value copied back once it returns, and no output aliases an input (as in
PyTorch, whose eager functionalize gives the same observable results)."""
import functools

import tessera
from tessera import _C
from tessera.utils._pytree import tree_flatten, tree_unflatten

_REMOVE_ERROR = (
    "functionalize(f, remove='mutations'): received invalid argument for remove={}. Valid options are:\n"
    "     remove='mutations': all inplace and out= operators will be removed from the program, and replaced with "
    "their out-of-place equivalents.\n"
    "     remove='mutations_and_views': In addition to the above, all aliasing operators {{view}} will be replaced "
    "with their non-aliasing counterparts, {{view}}_copy.\n")


def functionalize(func, *, remove="mutations"):
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(_REMOVE_ERROR.format(remove))

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        leaves, spec = tree_flatten((args, kwargs))
        copies = [x.clone() if isinstance(x, _C.Tensor) else x for x in leaves]
        versions = [c._version if isinstance(c, _C.Tensor) else None for c in copies]
        new_args, new_kwargs = tree_unflatten(copies, spec)
        result = func(*new_args, **new_kwargs)
        for original, copy, version in zip(leaves, copies, versions):
            if isinstance(copy, _C.Tensor) and copy._version != version:
                with tessera.no_grad():
                    original.copy_(copy)  # the mutation reaches the caller's tensor
        return result

    return wrapper
