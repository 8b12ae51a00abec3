"""torch.compiler.set_stance: what compiled functions do, process-wide, as a call, a context
manager or a decorator.
  "default"             compile, recompile on guard misses (up to the limit);
  "force_eager"         every compiled function runs its Python eagerly;
  "eager_on_recompile"  a call that would capture (compile or recompile) runs eagerly; compiled
                        graphs whose guards hold are still used;
  "fail_on_recompile"   a call that would capture raises RuntimeError;
  "eager_then_compile"  (and "aot_eager_then_compile") a function's first call runs eagerly,
                        later calls compile."""
import functools

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile", "eager_then_compile",
           "aot_eager_then_compile")
current = "default"


class set_stance:  # noqa: N801 - torch's name; a function, a context manager and a decorator at once
    def __init__(self, stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
        global current
        del skip_guard_eval_unsafe  # every guard is checked either way
        from tessera.compiler._capture import is_compiling
        if is_compiling():
            raise RuntimeError("attempted to set_stance in a torch.compile region")
        if stance not in STANCES:
            raise RuntimeError(f"invalid torch.compile stance '{stance}' (known: {', '.join(STANCES)})")
        if force_backend is not None and force_backend != "eager":
            raise RuntimeError(f"set_stance: force_backend={force_backend!r} is not supported (only 'eager', which "
                               "is what stance 'force_eager' does)")
        self.stance = "force_eager" if force_backend == "eager" else stance
        self.previous = current
        current = self.stance

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        global current
        current = self.previous
        return False

    def __call__(self, fn):
        """As a decorator: the stance holds during each call of fn only."""
        global current
        current = self.previous
        stance = self.stance

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            global current
            before, current = current, stance
            try:
                return fn(*args, **kwargs)
            finally:
                current = before
        return wrapper
