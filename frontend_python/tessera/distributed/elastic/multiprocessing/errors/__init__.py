"""@record: what torchrun scripts wrap their main in. An exception escaping the function is written
as JSON to the file named by TORCHELASTIC_ERROR_FILE (when the launcher sets one), in torch's
format, then raised again, so the launcher can report the worker's own error."""
import functools
import json
import os
import time
import traceback

__all__ = ["ChildFailedError", "ErrorHandler", "record"]


class ChildFailedError(Exception):
    """Raised by an elastic launch when a worker failed; `failures` maps rank -> description."""

    def __init__(self, name, failures):
        self.name = name
        self.failures = dict(failures)
        super().__init__(f"{name} FAILED: " + "; ".join(f"rank {r}: {f}" for r, f in sorted(self.failures.items())))


class ErrorHandler:
    """Writes an exception to TORCHELASTIC_ERROR_FILE (torch's error-file JSON)."""

    def initialize(self):
        pass

    def record_exception(self, e):
        path = os.environ.get("TORCHELASTIC_ERROR_FILE")
        if not path:
            return
        data = {"message": {"message": f"{type(e).__name__}: {e}",
                            "extraInfo": {"py_callstack": traceback.format_exc(), "timestamp": str(int(time.time()))}}}
        try:
            with open(path, "w") as f:
                json.dump(data, f)
        except OSError:
            pass  # the error itself is what matters: it is raised again below


def record(fn=None, error_handler=None):
    """Decorator: records an exception that escapes `fn`, then re-raises it."""
    handler = error_handler or ErrorHandler()

    def wrap(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            handler.initialize()
            try:
                return f(*args, **kwargs)
            except SystemExit as e:
                if e.code not in (None, 0):
                    handler.record_exception(e)
                raise
            except Exception as e:
                handler.record_exception(e)
                raise
        return wrapper

    return wrap(fn) if fn is not None else wrap
