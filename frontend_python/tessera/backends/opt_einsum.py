"""tessera.backends.opt_einsum: torch.backends.opt_einsum's switches (enabled, strategy), checked
as torch checks them. is_available() says whether the opt_einsum package is importable, as
torch's does."""
import importlib.util

from tessera.backends._flags import checked_module, flags_context

_STRATEGIES = ("auto", "greedy", "optimal")
_state = {}


def is_available():
    return importlib.util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The opt_einsum package, or None."""
    if not is_available():
        return None
    import opt_einsum
    return opt_einsum


def _set_enabled(value):
    if value and not is_available():
        raise ValueError(f"opt_einsum is not available, so setting `enabled` to {value} will not reap the benefits "
                         "of calculating an optimal path for einsum. torch.einsum will fall back to contracting from "
                         "left to right. To enable this optimal path calculation, please install opt-einsum.")
    _state["enabled"] = value


def _set_strategy(value):
    if not is_available():
        raise ValueError(f"opt_einsum is not available, so setting `strategy` to {value} will not be meaningful. "
                         "torch.einsum will bypass path calculation and simply contract from left to right. Please "
                         "install opt_einsum or unset `strategy`.")
    if not _state["enabled"]:
        raise ValueError(f"opt_einsum is not enabled, so setting a `strategy` to {value} will not be meaningful. "
                         "torch.einsum will bypass path calculation and simply contract from left to right. Please "
                         "set `enabled` to `True` as well or unset `strategy`.")
    if value not in _STRATEGIES:
        raise ValueError(f"`strategy` must be one of the following: [auto, greedy, optimal] but is {value}")
    _state["strategy"] = value


_state["enabled"] = is_available()
_state["strategy"] = "auto" if is_available() else None


def set_flags(_enabled=None, _strategy=None):
    orig = (_state["enabled"], _state["strategy"] if is_available() else None)
    if _enabled is not None:
        _set_enabled(_enabled)
    if _strategy is not None:
        _set_strategy(_strategy)
    return orig


def flags(enabled=None, strategy=None):
    return flags_context(set_flags, (enabled, strategy), lambda orig: _state.update(enabled=orig[0], strategy=orig[1]))


checked_module(__name__, {
    "enabled": property(lambda self: _state["enabled"], lambda self, v: _set_enabled(v)),
    "strategy": property(lambda self: _state["strategy"], lambda self, v: _set_strategy(v)),
})
