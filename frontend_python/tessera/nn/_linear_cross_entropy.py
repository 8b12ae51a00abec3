"""F.linear_cross_entropy (torch 2.15): cross_entropy(linear(input, W, b), target) without the
caller building the logits. With options=None it is exactly that composition (differentiable
again, compilable). With a LinearCrossEntropyOptions, the batch goes chunk by chunk: each chunk's
logits, their log-sum-exp, its loss and its gradients (input, weight, bias) are computed and the
logits dropped, so the (batch, classes) matrix of a large vocabulary never exists whole; backward
scales the gradients by the incoming one. Configurations the chunked path does not cover warn and
take the composition, as torch's do."""
import warnings

import tessera
from tessera.autograd import Function

__all__ = ["linear_cross_entropy"]


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    from tessera.nn import functional as F
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.dim()}")
    batch, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError("expected equal input and linear_weight last dimensions (in_features), got "
                           f"{in_features} and {linear_weight.shape[-1]}, respectively")
    num_classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not batch:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} "
                           f"requires batched input, (N, {in_features}), got unbatched input with shape "
                           f"{tuple(input.shape)}")
    logits_shape = (*batch, num_classes, *out_features)
    probabilities = tuple(target.shape) == logits_shape
    if probabilities and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    ignore = -100 if ignore_index is None else ignore_index
    if options is not None:
        why = _chunked_refusal(input, target, out_features, probabilities, reduction, label_smoothing)
        if why is None:
            return _ChunkedLinearCrossEntropy.apply(input, linear_weight, linear_bias, target, weight, reduction,
                                                    ignore, options)
        warnings.warn(f"linear_cross_entropy: the chunked path does not support {why}; using the reference "
                      "implementation", stacklevel=2)
    logits = F.linear(input, linear_weight.reshape(-1, in_features),
                      None if linear_bias is None else linear_bias.reshape(-1))
    return F.cross_entropy(logits.reshape(logits_shape), target, weight=weight, ignore_index=ignore,
                           reduction=reduction, label_smoothing=label_smoothing)


def _chunked_refusal(input, target, out_features, probabilities, reduction, label_smoothing):
    """Why the chunked path cannot run this call, or None."""
    if not input.dtype.is_floating_point:
        return f"a {input.dtype} input"
    if probabilities:
        return "class-probability targets"
    if out_features:
        return "a K-dimensional loss (linear_weight with out_features)"
    if input.dim() != 2:
        return "an unbatched input"
    if reduction not in ("mean", "sum"):
        return f"reduction={reduction!r}"
    if label_smoothing != 0.0:
        return "label_smoothing"
    if target.dtype != tessera.int64:
        return f"a {target.dtype} target"
    return None


class _ChunkedLinearCrossEntropy(Function):
    @staticmethod
    def forward(ctx, input, linear_weight, linear_bias, target, weight, reduction, ignore_index, options):
        rows, in_features = input.shape
        num_classes = linear_weight.shape[0]
        chunk = options.chunk_rows(rows, in_features, num_classes)
        valid = target != ignore_index
        safe_target = tessera.where(valid, target, 0)
        low, high = (int(safe_target.min()), int(safe_target.max())) if safe_target.numel() else (0, 0)
        if low < 0 or high >= num_classes:
            raise IndexError(f"linear_cross_entropy: target {low if low < 0 else high} is out of bounds for "
                             f"{num_classes} classes")
        # Each row's weight: its class's (or 1), 0 where ignored; "mean" divides by their sum.
        row_weight = valid.to(input.dtype) if weight is None else tessera.where(valid, weight[safe_target], 0.0)
        scale = row_weight / row_weight.sum() if reduction == "mean" else row_weight
        grad_input = tessera.empty_like(input)
        grad_weight = tessera.zeros_like(linear_weight)
        grad_bias = None if linear_bias is None else tessera.zeros_like(linear_bias)
        total = input.new_zeros(())
        for start in range(0, rows, chunk):
            x = input[start:start + chunk]
            t = safe_target[start:start + chunk].unsqueeze(1)
            s = scale[start:start + chunk].unsqueeze(1)
            logits = x @ linear_weight.t()
            if linear_bias is not None:
                logits = logits + linear_bias
            lse = logits.logsumexp(1, keepdim=True)
            total = total + ((lse - logits.gather(1, t)) * s).sum()
            # d loss / d logits = scale (softmax - one_hot(target))
            d_logits = (logits - lse).exp()
            d_logits.scatter_add_(1, t, tessera.full_like(lse, -1.0))
            d_logits = d_logits * s
            grad_input[start:start + chunk] = d_logits @ linear_weight
            grad_weight += d_logits.t() @ x
            if grad_bias is not None:
                grad_bias += d_logits.sum(0)
        ctx.grads = [grad_input, grad_weight, grad_bias]
        ctx.allow_retain_graph = options.allow_retain_graph
        return total

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.grads is None:
            raise RuntimeError("linear_cross_entropy: the chunked path's gradients were used by an earlier "
                               "backward; pass LinearCrossEntropyOptions(allow_retain_graph=True) to allow another")
        grad_input, grad_weight, grad_bias = [None if g is None else g * grad_output for g in ctx.grads]
        if not ctx.allow_retain_graph:
            ctx.grads = None
        return grad_input, grad_weight, grad_bias, None, None, None, None, None
