"""The functorch transforms (tessera.func): vmap over the vmap plugin, autodiff transforms over
the autograd plugin, functional_call over nn.Module."""
