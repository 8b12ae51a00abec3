"""Plugins' warnings in Python: a kernel's warning is a UserWarning at the calling Python frame (filters
and `-W error` apply, and it shows once per line as Python's warnings do); what a plugin says
while loading is quiet (test_cuda.py covers the CUDA plugin on a machine without a GPU)."""
import os
import warnings

import pytest

import tessera as ts
from conftest import FIXTURE_DIR


@pytest.fixture(scope="module")
def fallbackdev():
    path = os.path.join(FIXTURE_DIR, "libtessera_fallback_device.so")
    if not os.path.exists(path):
        pytest.skip(f"the fixture plugin {path} is not built")
    ts.plugins.load(path)
    return "fallbackdev"


def test_a_kernel_warning_is_a_python_warning(fallbackdev):
    # The fixture device has no `atan2` kernel: the host runs it on the CPU with copies, and says so once.
    a = ts.ones(3).to(fallbackdev)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ts.atan2(a, a)
    texts = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert any("atan2" in t and "running it on CPU with copies" in t for t in texts), texts


def test_warnings_as_errors_do_not_break_the_call(fallbackdev):
    a = ts.ones(2).to(fallbackdev)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ts.hypot(a, a)  # warns (first hypot call on this device), and still returns
    assert out.to("cpu").tolist() == pytest.approx([2 ** 0.5] * 2)
