"""Tensor.register_post_accumulate_grad_hook and Variable._execution_engine.queue_callback: the
autograd hooks that DDP's gradient buckets and optimizers-in-backward are built on."""
import pytest

import tessera as ts


def test_post_accumulate_hook_sees_the_accumulated_grad():
    w = ts.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
    (w * 3).sum().backward()
    (w * 2).sum().backward()
    assert seen == [[3.0, 3.0], [5.0, 5.0]]  # after accumulation, each time
    handle.remove()
    (w * 1).sum().backward()
    assert len(seen) == 2


def test_post_accumulate_hook_may_step_in_backward():
    w = ts.tensor([1.0, 2.0], requires_grad=True)

    def sgd_in_backward(p):
        with ts.no_grad():
            p.sub_(0.5 * p.grad)
        p.grad = None
    w.register_post_accumulate_grad_hook(sgd_in_backward)
    (w * w).sum().backward()
    assert w.tolist() == [0.0, 0.0] and w.grad is None


def test_post_accumulate_hook_refuses_non_leaves():
    w = ts.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ts.tensor([1.0]).register_post_accumulate_grad_hook(lambda p: None)


def test_queue_callback_runs_after_every_gradient():
    a = ts.tensor([1.0], requires_grad=True)
    b = ts.tensor([2.0], requires_grad=True)
    order = []

    def hook(p):
        order.append("hook")
        if len(order) == 1:
            ts.autograd.Variable._execution_engine.queue_callback(
                lambda: order.append(("final", a.grad.item(), b.grad.item())))
    a.register_post_accumulate_grad_hook(hook)
    b.register_post_accumulate_grad_hook(hook)
    (a * b).sum().backward()
    assert order == ["hook", "hook", ("final", 2.0, 1.0)]
    with pytest.raises(RuntimeError, match="no backward pass is running"):
        ts.autograd.Variable._execution_engine.queue_callback(lambda: None)


@pytest.mark.torch
def test_matches_torch_order():
    import torch
    for lib in (torch, ts):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        log = []
        w.register_hook(lambda g: log.append("pre") or None)
        w.register_post_accumulate_grad_hook(lambda p: log.append("post"))
        (w * 2).sum().backward()
        assert log == ["pre", "post"]
