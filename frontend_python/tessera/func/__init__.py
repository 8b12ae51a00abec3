"""torch.func: composable function transforms (vmap, grad, vjp, jvp, jacrev, jacfwd, hessian,
functional_call, functionalize). vmap runs on the vmap plugin (libtessera_vmap.so), loaded on first use."""
from tessera._functorch.eager_transforms import (  # noqa: F401
    grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp,
)
from tessera._functorch.functional_call import functional_call, stack_module_state  # noqa: F401
from tessera._functorch.functionalize import functionalize  # noqa: F401
from tessera._functorch.vmap import vmap  # noqa: F401

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize",
           "functional_call", "stack_module_state", "functionalize"]
