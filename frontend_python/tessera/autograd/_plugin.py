"""Reaching the autograd plugin (libtessera_autograd.so). It loads on first use, so `import
tessera` stays fast and an install without it still runs everything but gradients."""
from tessera import _C

_call = _C.call_op
_E = {}
_state = {"loaded": False}


def loaded():
    return _state["loaded"]


def ensure():
    """Loads the plugin once; raises RuntimeError when it is not installed."""
    if not _state["loaded"]:
        if not _C.plugins_load_named("autograd", "autograd (requires_grad, backward)"):
            raise RuntimeError("autograd is not available: libtessera_autograd.so is not on the plugin search path "
                               f"{_C.plugins_search_path()}")
        _state["loaded"] = True
    return True


def call(op, args):
    if not _state["loaded"]:
        ensure()
    return _call("autograd::" + op, args, _E)
