"""A plugin's own operators under vmap: one with a batching rule (the SDK's batching.h, in the
fixture plugin tests/fixtures/batching_rule.cpp) runs once on the whole batch; one without runs
once per sample through vmap's fallback, with a one-time performance warning. Both agree with a
loop over samples."""
import os
import warnings

import numpy as np
import pytest
from conftest import FIXTURE_DIR

import tessera as ts
from tessera.func import vmap


@pytest.fixture(scope="module")
def vendor():
    path = os.path.join(FIXTURE_DIR, "libtessera_batching_rule.so")
    if not os.path.exists(path):
        pytest.skip("the test fixture plugin `batching_rule` is not built")
    ts.plugins.load(path)
    return ts.ops.vendor


def _data(seed, *shape):
    return ts.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _loop(op, xs, ss):
    return ts.stack([op(x, s) for x, s in zip(xs, ss)])


def test_rule_runs_once_for_the_batch(vendor):
    xs, ss = _data(0, 5, 4, 3), _data(1, 5, 4)
    before = vendor.rule_calls()
    got = vmap(vendor.scale_rows)(xs, ss)
    assert vendor.rule_calls() == before + 1
    np.testing.assert_allclose(got.numpy(), _loop(vendor.scale_rows, xs, ss).numpy(), rtol=1e-6)


def test_rule_with_an_unbatched_argument_and_nested_vmap(vendor):
    xs, s = _data(2, 5, 4, 3), _data(3, 4)
    got = vmap(vendor.scale_rows, in_dims=(0, None))(xs, s)
    np.testing.assert_allclose(got.numpy(), _loop(vendor.scale_rows, xs, [s] * 5).numpy(), rtol=1e-6)
    xss, sss = _data(4, 2, 3, 4, 3), _data(5, 3, 2, 4)  # s batched at dim 1 on the outer level
    got = vmap(vmap(vendor.scale_rows), in_dims=(0, 1))(xss, sss)
    want = ts.stack([_loop(vendor.scale_rows, xss[i], sss[:, i]) for i in range(2)])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_rule_is_passed_by_when_nothing_is_batched(vendor):
    x, s = _data(6, 4, 3), _data(7, 4)
    before = vendor.rule_calls()
    got = vmap(lambda b: vendor.scale_rows(x, s) + b)(_data(8, 2, 4, 3))
    assert vendor.rule_calls() == before
    np.testing.assert_allclose(got[1].numpy(), (vendor.scale_rows(x, s) + _data(8, 2, 4, 3)[1]).numpy(), rtol=1e-6)


def test_operator_without_rule_loops_over_samples_and_warns_once(vendor):
    xs, ss = _data(9, 3, 4, 3), _data(10, 3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = vmap(vendor.scale_rows_loop)(xs, ss)
        vmap(vendor.scale_rows_loop)(xs, ss)
    drops = [w for w in caught if "performance drop" in str(w.message) and "scale_rows_loop" in str(w.message)]
    assert len(drops) <= 1
    np.testing.assert_allclose(got.numpy(), _loop(vendor.scale_rows_loop, xs, ss).numpy(), rtol=1e-6)


def test_kernel_errors_name_the_operator_under_vmap(vendor):
    with pytest.raises(ValueError, match="scale_rows"):
        vmap(vendor.scale_rows)(_data(11, 3, 4, 3), _data(12, 3, 5))
