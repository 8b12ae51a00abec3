"""tessera.backends.quantized: torch.backends.quantized's engine switch. Tessera has no quantized
operators; the engine is recorded (checked against torch's names) for programs that set it."""
from tessera.backends._flags import checked_module

supported_engines = ["qnnpack", "onednn", "x86", "fbgemm", "none"]
_state = {"engine": "x86"}


def _set_engine(value):
    if value not in supported_engines:
        raise RuntimeError(f"{value} is not a valid value for quantized engine")
    _state["engine"] = value


checked_module(__name__, {"engine": property(lambda self: _state["engine"], lambda self, v: _set_engine(v))})
