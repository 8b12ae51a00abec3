"""Bad input at every boundary, from Python: each class of mistake raises the matching Python
exception, whose message names the operator and what was expected and received."""
import os

import pytest

import tessera as ts
from conftest import FIXTURE_DIR


def raises(exc, fn, *fragments):
    """Calls fn, expects `exc`, and checks every fragment is in the message."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in: {msg}"


def test_shape_mismatches():
    x = ts.ones(2, 3)
    raises(ValueError, lambda: ts.add(x, ts.ones(4)), "add", "broadcast", "[2, 3]", "[4]")
    raises(ValueError, lambda: x + ts.ones(4), "add", "[2, 3]", "[4]")
    raises(ValueError, lambda: ts.mm(x, ts.ones(4, 5)), "mm", "(3)", "(4)", "[4, 5]")
    raises(ValueError, lambda: x @ ts.ones(4), "matmul", "(3)", "(4)")
    raises(ValueError, lambda: ts.cat([x, ts.ones(3)]), "cat", "2 dimensions", "got 1")
    raises(ValueError, lambda: ts.cat([x, ts.ones(2, 4)]), "cat", "expected size 3", "got size 4")
    raises(ValueError, lambda: x.view(4), "view", "[4]", "size 6")
    raises(ValueError, lambda: x.reshape(7), "reshape", "[7]", "size 6")


def test_unsupported_dtypes():
    b = ts.ones(2, 2, dtype=ts.bool)
    i = ts.ones(3, dtype=ts.int64)
    raises(TypeError, lambda: ts.relu(b), "relu", "numeric", "bool")
    raises(TypeError, lambda: ts.matmul(b, b), "matmul", "numeric", "bool")
    raises(TypeError, lambda: i.mean(), "mean", "floating point", "int64")
    raises(TypeError, lambda: ts.softmax(i, 0), "softmax", "floating point", "int64")


def test_out_of_range_indices_and_dims():
    x = ts.ones(2, 3)
    raises(IndexError, lambda: x.select(0, 5), "select", "index 5", "size 2")
    raises(IndexError, lambda: ts.index_select(x, 0, ts.tensor([0, 7])), "index_select", "index 7", "size 2")
    raises(IndexError, lambda: ts.gather(x, 1, ts.tensor([[0, 9], [0, 0]])), "gather", "index 9", "size 3")
    raises(IndexError, lambda: x.transpose(0, 3), "transpose", "dimension 3", "[-2, 1]")
    raises(IndexError, lambda: ts.sum(x, dim=5), "sum", "dimension 5", "[-2, 1]")
    raises(IndexError, lambda: x[10], "select", "index 10", "size 2")
    raises(IndexError, lambda: x[-3], "select", "index -3", "size 2")


def test_device_mismatches():
    ts.plugins.load(os.path.join(FIXTURE_DIR, "libtessera_good.so"))
    on_dev = ts.empty(3, device="testdev")
    on_cpu = ts.ones(3)
    ts._C.set_cpu_fallback(False)  # otherwise a mixed call runs on CPU with copies
    try:
        raises(NotImplementedError, lambda: ts.add(on_cpu, on_dev), "add.Tensor", "testdev", "kernels for: [CPU")
        raises(NotImplementedError, lambda: on_dev * on_cpu, "mul.Tensor", "testdev")
        raises(NotImplementedError, lambda: ts.mm(ts.ones(3, 3), ts.empty(3, 3, device="testdev")), "'mm'", "testdev")
    finally:
        ts._C.set_cpu_fallback(True)
    raises(ValueError, lambda: ts.empty(3, device="nosuchdev"), "nosuchdev", "unknown device type")


def test_wrong_argument_types():
    x = ts.ones(2, 3)
    raises(TypeError, lambda: ts.add(x, "a"), "add()", "'other' must be Tensor, not str")
    raises(TypeError, lambda: ts.sum(x, dim="0"), "sum()", "'dim' must be int[1]?", "not str")
    raises(TypeError, lambda: x.view("a"), "view()", "'size' must be int[]", "not str")
    raises(TypeError, lambda: ts.mm(x, 3.5), "mm()", "not float")
    raises(TypeError, lambda: ts.cat(x), "cat()", "Tensor[]")


def test_sizes_that_overflow_int64():
    raises(ValueError, lambda: ts.empty(2**62, 4), "empty", "number of elements", "overflows int64")
    raises(ValueError, lambda: ts.zeros((2**40, 2**40)), "zeros", "overflows int64")
    raises(ValueError, lambda: ts.empty(2**61, dtype=ts.float64), "empty", "float64", "overflow the byte size")
    raises(TypeError, lambda: ts.empty(2**70), "empty()", "size")  # not even an int64


def test_negative_sizes():
    raises(ValueError, lambda: ts.empty(-1), "empty", "non-negative", "[-1]")
    raises(ValueError, lambda: ts.zeros(2, -3), "zeros", "non-negative", "[2, -3]")
    raises(ValueError, lambda: ts.ones((-(2**63),)), "ones", "non-negative")


def test_too_large_to_allocate():
    # Larger than RAM + swap: the CPU allocator returns NULL and the host raises, no abort.
    raises(MemoryError, lambda: ts.empty(2**45), "empty", "out of memory", "bytes on cpu")
    raises(MemoryError, lambda: ts.zeros(2**44, dtype=ts.float64), "zeros", "out of memory")
    assert ts.add(ts.ones(2), ts.ones(2)).tolist() == [2.0, 2.0]
