"""skip_init: building a module whose parameter values do not matter (torch leaves them uninitialised)."""
import inspect

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) whose parameters torch leaves uninitialised. Tessera has no
    meta device to build on, so the module is built on its device directly; its values are then
    whatever the initialisers drew (uninitialised memory may hold anything, so that conforms)."""
    from tessera.nn import Module
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)
