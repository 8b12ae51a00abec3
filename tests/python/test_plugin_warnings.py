"""Plugins' warnings in Python: a kernel's warning is a UserWarning at the calling Python frame
(filters and `-W error` apply); what a plugin says while loading is quiet (test_cuda.py covers
the CUDA plugin on a machine without a GPU). The host warns once per operator and device in a
process, so each case runs in a fresh interpreter."""
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import BUILD_PYTHON, FIXTURE_DIR

FIXTURE = os.path.join(FIXTURE_DIR, "libtessera_fallback_device.so")


def _run(body):
    if not os.path.exists(FIXTURE):
        pytest.skip(f"the fixture plugin {FIXTURE} is not built")
    code = "import warnings\nimport tessera as ts\n" + f"ts.plugins.load({FIXTURE!r})\n" + textwrap.dedent(body)
    env = dict(os.environ)
    if BUILD_PYTHON:
        env["PYTHONPATH"] = BUILD_PYTHON + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_a_kernel_warning_is_a_python_warning():
    # The fixture device has no atan2 kernel: the host runs it on the CPU with copies, and says so.
    r = _run("""
        a = ts.ones(3).to("fallbackdev")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ts.atan2(a, a)
        texts = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        assert any("atan2" in t and "running it on CPU with copies" in t for t in texts), texts
        print("OK")
    """)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
    assert "[tessera warning]" not in r.stderr  # it went to Python's warnings, not to stderr


def test_warnings_as_errors_do_not_break_the_call():
    r = _run("""
        a = ts.ones(2).to("fallbackdev")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = ts.hypot(a, a)  # warns, and still returns its result
        print(out.to("cpu").tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert "1.414" in r.stdout
    assert "running it on CPU with copies" in r.stderr  # the error it became is shown
