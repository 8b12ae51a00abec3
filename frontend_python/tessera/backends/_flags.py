"""What the flag modules (cudnn, mkldnn, opt_einsum, quantized) share: their settings are module
attributes that programs assign (`torch.backends.cudnn.benchmark = True`), a property-backed
module class where an assignment must be checked, and the `flags(...)` context that sets some and
restores them all on exit."""
import contextlib
import sys
import types


def checked_module(name, properties):
    """Gives module `name` a class with `properties` (name -> property), so reads and assignments
    of those attributes go through their getters and setters."""
    module = sys.modules[name]
    module.__class__ = type(f"{name.rsplit('.', 1)[-1]}_module", (types.ModuleType,), dict(properties))


@contextlib.contextmanager
def flags_context(set_flags, values, restore=None):
    """Calls set_flags(*values) (a None leaves that flag as it is) for the block, then puts back
    what it returned, with restore(original) where re-setting would be refused."""
    original = set_flags(*values)
    try:
        yield
    finally:
        (restore or (lambda orig: set_flags(*orig)))(original)
