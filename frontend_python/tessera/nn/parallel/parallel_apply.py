"""parallel_apply: modules[i](*inputs[i], **kwargs_tup[i]) for each i, one after another (torch runs
them in threads, one per device; here there is one device)."""

__all__ = ["parallel_apply"]


def parallel_apply(modules, inputs, kwargs_tup=None, devices=None):
    if len(modules) != len(inputs):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of inputs "
                             f"{len(inputs)}")
    if kwargs_tup is not None:
        if len(modules) != len(kwargs_tup):
            raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of kwargs "
                                 f"{len(kwargs_tup)}")
    else:
        kwargs_tup = ({},) * len(modules)
    outputs = []
    for module, input, kwargs in zip(modules, inputs, kwargs_tup):
        if not isinstance(input, (list, tuple)):
            input = (input,)
        outputs.append(module(*input, **kwargs))
    return outputs
