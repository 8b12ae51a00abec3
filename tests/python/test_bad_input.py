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
    # Not even an int64: Python's OverflowError (as int() -> C long), naming operator and value.
    raises(OverflowError, lambda: ts.empty(2**70), "empty()", "argument 'size'", str(2**70), "int64")


def test_negative_sizes():
    raises(ValueError, lambda: ts.empty(-1), "empty", "non-negative", "[-1]")
    raises(ValueError, lambda: ts.zeros(2, -3), "zeros", "non-negative", "[2, -3]")
    raises(ValueError, lambda: ts.ones((-(2**63),)), "ones", "non-negative")


def test_too_large_to_allocate():
    # Larger than RAM + swap: the CPU allocator returns NULL and the host raises, no abort.
    raises(MemoryError, lambda: ts.empty(2**45), "empty", "out of memory", "bytes on cpu")
    raises(MemoryError, lambda: ts.zeros(2**44, dtype=ts.float64), "zeros", "out of memory")
    assert ts.add(ts.ones(2), ts.ones(2)).tolist() == [2.0, 2.0]


def test_integers_too_large_for_int64():
    raises(OverflowError, lambda: ts.zeros(2**63), "zeros()", "'size' element 0", str(2**63), "does not fit in int64")
    raises(OverflowError, lambda: ts.ones(-(2**63) - 1), "ones()", str(-(2**63) - 1))
    raises(OverflowError, lambda: ts.full((3, 2**64), 1.0), "full()", "element 1", str(2**64))
    raises(OverflowError, lambda: ts.empty([2**70]), "empty()", str(2**70))
    raises(OverflowError, lambda: ts.ones(6).view(2**70), "view()", "'size'", str(2**70))
    raises(OverflowError, lambda: ts.ones(2, 3).reshape(1, 2**64), "reshape()", "'shape' element 1")
    raises(OverflowError, lambda: ts.ones(3).select(0, 2**70), "select()", "'index'", str(2**70))
    # Still a TypeError when the type is wrong, not the value.
    raises(TypeError, lambda: ts.empty(2.5), "empty()", "size")


def test_element_count_and_byte_size_overflow():
    raises(ValueError, lambda: ts.eye(2**32), "eye", "number of elements", "overflows int64")
    raises(ValueError, lambda: ts.ones(3).expand(2**62, 3), "expand", "overflows int64")
    raises(ValueError, lambda: ts.ones(1).expand(2**40, 2**40), "expand", "overflows int64")
    raises(ValueError, lambda: ts.empty(2**61), "empty", "float32", "overflow the byte size")
    raises(ValueError, lambda: ts.arange(2**62), "arange", "int64", "overflow the byte size")


def test_zero_size_with_huge_dimensions_is_fine():
    # A zero anywhere makes numel 0, whatever the order of the dimensions.
    for shape in [(2**62, 2, 0), (0, 2**62, 4), (2**40, 0, 2**40)]:
        t = ts.zeros(*shape)
        assert t.shape == shape
        assert t.numel() == 0
        assert t.sum().item() == 0.0


def test_more_negative_and_invalid_sizes():
    raises(ValueError, lambda: ts.zeros(-1, 0), "zeros", "non-negative", "[-1, 0]")
    raises(ValueError, lambda: ts.ones(2, 3).view(-2, 3), "view", "invalid size -2")
    raises(ValueError, lambda: ts.ones(2, 3).reshape(-1, -1), "reshape", "only one dimension can be inferred")


def test_out_of_memory_is_memory_error_not_abort():
    # 4 TiB and more: more than RAM + swap, so the allocator returns NULL and the host raises.
    raises(MemoryError, lambda: ts.empty(2**40), "empty", "out of memory", "4398046511104 bytes on cpu", "plugin 'cpu'")
    raises(MemoryError, lambda: ts.full((2**40,), 1.0), "full", "out of memory")
    raises(MemoryError, lambda: ts.randn(2**40), "randn", "out of memory")
    raises(MemoryError, lambda: ts.empty(2**31, 2**31, dtype=ts.uint8), "empty", "out of memory")
    assert ts.add(ts.ones(2), ts.ones(2)).tolist() == [2.0, 2.0]


def test_device_index_past_the_device_count():
    raises(ValueError, lambda: ts.device("cpu:1"), "cpu:1", "device index 1 is out of range", "has 1 device")
    raises(ValueError, lambda: ts.empty(3, device="cpu:5"), "cpu:5", "out of range", "valid indices are 0..0")
    raises(ValueError, lambda: ts.ones(2).to("cpu:2"), "cpu:2", "out of range")
    ts.plugins.load(os.path.join(FIXTURE_DIR, "libtessera_good.so"))
    assert ts.empty(3, device="testdev:1").device == ts.device("testdev:1")
    raises(ValueError, lambda: ts.empty(3, device="testdev:2"), "device index 2 is out of range", "'testdev'",
           "plugin 'good'", "2 devices", "0..1")
    raises(ValueError, lambda: ts.device("testdev:7"), "testdev:7", "out of range")
    # The host is untouched: valid indices still work.
    assert ts.zeros(2, device="cpu:0").tolist() == [0.0, 0.0]
