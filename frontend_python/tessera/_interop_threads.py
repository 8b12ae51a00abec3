"""set_num_interop_threads / get_num_interop_threads, with torch's rules.

PyTorch keeps a second thread pool for running independent operators concurrently (jit.fork,
some autograd work). Tessera has none: an operator runs on the calling thread, parallel inside
through the CPU plugin's OpenMP threads (set_num_threads), and Python threads or processes give
concurrency between operators. The setting is kept so that programs written for torch run and
read back what they set; as in torch it may be set once, before it is read.
"""
import os

_interop_threads = None  # None: not set (torch's default is the number of cores)
_frozen = False          # set once, or read: later sets are refused, as torch's


def get_num_interop_threads():
    global _frozen
    _frozen = True
    return _interop_threads if _interop_threads is not None else (os.cpu_count() or 1)


def set_num_interop_threads(num):
    global _interop_threads, _frozen
    if isinstance(num, bool) or not isinstance(num, int) or num <= 0:
        raise RuntimeError(f"set_num_interop_threads: expected a positive number of threads, got {num!r}")
    if _frozen:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started or "
                           "set_num_interop_threads called")
    _interop_threads = num
    _frozen = True
