"""vmap: torch.func.vmap over the vmap plugin (libtessera_vmap.so, the Batched key).

Python only checks the arguments, pairs in_dims/out_dims with the pytrees, and opens a level: the
plugin batches every operator the function calls."""
import functools

from tessera import _C
from tessera.autograd import _plugin as _autograd_plugin
from tessera.utils._pytree import tree_flatten, tree_unflatten

_state = {"loaded": False}


def ensure_plugin():
    """Loads libtessera_vmap.so once (after autograd: vmap has rules for autograd's operators)."""
    if not _state["loaded"]:
        _autograd_plugin.ensure()
        if not _C.plugins_load_named("vmap", "vmap (tessera.func)"):
            raise RuntimeError("vmap is not available: libtessera_vmap.so is not on the plugin search path "
                               f"{_C.plugins_search_path()}")
        _state["loaded"] = True


def _call(op, *args):
    return _C.call_op(op, args, {})


def active_levels():
    """The ids of the vmap levels open on this thread, outermost first."""
    if not _state["loaded"]:
        return []
    return list(_call("vmap::levels"))


def tensor_level(t):
    return _call("vmap::level", t) if t._is_batched else 0


def promote(t, level):
    """`t` batched at `level`: itself if it is, else expanded to the level's batch (no copy)."""
    return _call("vmap::promote", t, level)


def batched_repr(t):
    level = _call("vmap::level", t)
    return f"BatchedTensor(lvl={level}, bdim=0, value=\n{_call('vmap::unwrap', t)!r}\n)"


def _func_name(func):
    return getattr(func, "__name__", None) or repr(func)


def _match_dims(d, s, out):
    """Appends to `out` the dim of each leaf of spec `s` that `d` gives; False if `d` does not
    match the structure. (Module-level: a closure calling itself would be a reference cycle.)"""
    if d is None or isinstance(d, int):
        out.extend([d] * s.num_leaves)
        return True
    d_leaves, d_spec = tree_flatten(d)
    if s.is_leaf() or d_spec.type != s.type or d_spec.num_children != s.num_children:
        return False
    children = d if not isinstance(d, dict) else [d[k] for k in s.context]
    if isinstance(d, dict) and list(d.keys()) != list(s.context):
        return False
    return all(_match_dims(c, cs, out) for c, cs in zip(children, s.children_specs))


def _broadcast_dims(dims, spec, what, func, args_text):
    """One in_dim/out_dim per leaf of `spec`: an int or None applies to the whole subtree."""
    if dims is None or isinstance(dims, int):
        return [dims] * spec.num_leaves
    dims_leaves, dims_spec = tree_flatten(dims)
    for d in dims_leaves:
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            if what == "in_dims":
                raise ValueError(f"vmap({_func_name(func)}, {args_text})(<inputs>): Got in_dim={d} for an input but "
                                 "in_dim must be either an integer dimension or None.")
            raise ValueError(f"vmap({_func_name(func)}, {args_text}): `out_dims` must be an int, None or a python "
                             f"collection of ints representing where in the outputs the vmapped dimension should "
                             f"appear. Got {d}")
    out = []
    if not _match_dims(dims, spec, out):
        noun = "inputs" if what == "in_dims" else "outputs"
        raise ValueError(f"vmap({_func_name(func)}, {args_text})(<inputs>): {what} is not compatible with the "
                         f"structure of `{noun}`. {what} has structure {dims_spec} but {noun} has structure {spec}.")
    return out


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.func.vmap: `func` mapped over dimension `in_dims` of its inputs, the results stacked
    along `out_dims`. Pytrees of inputs and outputs; in_dims/out_dims an int, None, or a tree of them."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs)

    return wrapped


def _flat_inputs(func, in_dims, args):
    name = _func_name(func)
    if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
                         f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying "
                         "to vmap over a function with no inputs. The latter is unsupported.")
    leaves, spec = tree_flatten(args)
    if isinstance(in_dims, tuple) and len(in_dims) != len(args):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                         f"structure of `inputs`. in_dims has structure {tree_flatten(in_dims)[1]} but inputs has "
                         f"structure {spec}.")
    dims = _broadcast_dims(in_dims, spec, "in_dims", func, f"in_dims={in_dims}, ...")
    sizes = []
    for leaf, d in zip(leaves, dims):
        if d is None:
            continue
        if not isinstance(leaf, _C.Tensor):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but the "
                             f"input is of type {type(leaf)}. We cannot vmap over non-Tensor arguments, please use "
                             "None as the respective in_dim")
        n = leaf.dim()
        if not -n <= d < n:
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some input, but "
                             f"that input is a Tensor of dimensionality {n} so expected in_dim to satisfy "
                             f"-{n} <= in_dim < {n}.")
        sizes.append(leaf.shape[d])
    if not sizes:
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dims={in_dims} but no input is "
                         "a Tensor mapped over: at least one input must be a Tensor with an in_dim that is not None")
    if any(s != sizes[0] for s in sizes):
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return leaves, spec, dims, sizes[0]


def _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs):
    ensure_plugin()
    leaves, spec, dims, batch_size = _flat_inputs(func, in_dims, args)
    if chunk_size is not None and chunk_size < batch_size:
        return _chunked(func, leaves, spec, dims, batch_size, out_dims, randomness, chunk_size, kwargs)
    level = _call("vmap::push_level", batch_size, randomness)
    try:
        batched = [leaf if d is None else _call("vmap::add_batch_dim", leaf, d, level) for leaf, d in zip(leaves, dims)]
        outputs = func(*tree_unflatten(batched, spec), **kwargs)
        return _unbatch_outputs(func, outputs, out_dims, level, batch_size)
    finally:
        _call("vmap::pop_level", level)


def _unbatch_outputs(func, outputs, out_dims, level, batch_size):
    name = _func_name(func)
    flat, out_spec = tree_flatten(outputs)
    if not isinstance(out_dims, (int, tuple, list, dict)) and out_dims is not None:
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                         "collection of ints representing where in the outputs the vmapped dimension should appear.")
    if isinstance(out_dims, (tuple, list, dict)) and (out_spec.is_leaf() or len(out_dims) != out_spec.num_children):
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
                         f"structure of `outputs`. out_dims has structure {tree_flatten(out_dims)[1]} but outputs "
                         f"has structure {out_spec}.")
    dims = _broadcast_dims(out_dims, out_spec, "out_dims", func, f"..., out_dims={out_dims}")
    result = []
    for out, d in zip(flat, dims):
        if d is None:
            if isinstance(out, _C.Tensor) and tensor_level(out) == level:
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            result.append(out)
            continue
        if not isinstance(out, _C.Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(out)}. Did you "
                             "mean to set out_dims= to None for output?")
        result.append(_call("vmap::remove_batch_dim", out, level, batch_size, d))
    return tree_unflatten(result, out_spec)


def _chunked(func, leaves, spec, dims, batch_size, out_dims, randomness, chunk_size, kwargs):
    import tessera
    pieces = []
    rng_state = tessera.get_rng_state() if randomness == "same" else None
    for start in range(0, batch_size, chunk_size):
        if rng_state is not None:  # "same": every chunk draws what the first one drew
            tessera.set_rng_state(rng_state)
        length = min(chunk_size, batch_size - start)
        chunk = [leaf if d is None else leaf.narrow(d, start, length) for leaf, d in zip(leaves, dims)]
        chunk_dims = tree_unflatten(dims, spec)
        pieces.append(_vmap_call(func, chunk_dims, out_dims, randomness, None, tuple(tree_unflatten(chunk, spec)),
                                 kwargs))
    flat0, out_spec = tree_flatten(pieces[0])
    flat_pieces = [tree_flatten(p)[0] for p in pieces]
    dims_out = _broadcast_dims(out_dims, out_spec, "out_dims", func, f"..., out_dims={out_dims}")
    merged = []
    for i, d in enumerate(dims_out):
        merged.append(flat0[i] if d is None else tessera.cat([fp[i] for fp in flat_pieces], dim=d))
    return tree_unflatten(merged, out_spec)

