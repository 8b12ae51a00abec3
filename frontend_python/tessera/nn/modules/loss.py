"""Loss modules: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss."""

__all__ = ["BCEWithLogitsLoss", "CrossEntropyLoss", "L1Loss", "MSELoss", "NLLLoss", "NLLLoss2d"]
import math

from tessera.nn import functional as F
from tessera.nn.modules.linear import Linear
from tessera.nn.modules.module import Module


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        F._reduction_enum(self.reduction, type(self).__name__)


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """torch's deprecated name for NLLLoss over (N, C, H, W) inputs; NLLLoss itself takes them."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        import warnings
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in replacement",
                      FutureWarning, stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


def _loss_module(name, function, params=(), weighted=False):
    """A loss module over `function(input, target, **its arguments)`; params are (name, default) in
    torch's constructor order after (weight,) size_average/reduce and before reduction."""
    base = _WeightedLoss if weighted else _Loss

    def __init__(self, *args, **kwargs):
        values = dict(params)
        values.update(zip((k for k, _ in params), args))
        for key in list(kwargs):
            if key in values:
                values[key] = kwargs.pop(key)
        base.__init__(self, **kwargs)
        for key, value in values.items():
            setattr(self, key, value)

    def forward(self, *inputs):
        extra = {key: getattr(self, key) for key, _ in params}
        if weighted:
            extra["weight"] = self.weight
        return function(*inputs, reduction=self.reduction, **extra)

    return type(name, (base,), {"__init__": __init__, "forward": forward, "__module__": __name__,
                                "__doc__": f"Module form of tessera.nn.functional.{function.__name__}."})


BCELoss = _loss_module("BCELoss", F.binary_cross_entropy, weighted=True)
SmoothL1Loss = _loss_module("SmoothL1Loss", F.smooth_l1_loss, (("beta", 1.0),))
HuberLoss = _loss_module("HuberLoss", F.huber_loss, (("delta", 1.0),))
KLDivLoss = _loss_module("KLDivLoss", F.kl_div, (("log_target", False),))
SoftMarginLoss = _loss_module("SoftMarginLoss", F.soft_margin_loss)
MarginRankingLoss = _loss_module("MarginRankingLoss", F.margin_ranking_loss, (("margin", 0.0),))
HingeEmbeddingLoss = _loss_module("HingeEmbeddingLoss", F.hinge_embedding_loss, (("margin", 1.0),))
PoissonNLLLoss = _loss_module("PoissonNLLLoss", F.poisson_nll_loss, (("log_input", True), ("full", False), ("eps", 1e-8)))
GaussianNLLLoss = _loss_module("GaussianNLLLoss", F.gaussian_nll_loss, (("full", False), ("eps", 1e-6)))
MultiLabelSoftMarginLoss = _loss_module("MultiLabelSoftMarginLoss", F.multilabel_soft_margin_loss, weighted=True)
CosineEmbeddingLoss = _loss_module("CosineEmbeddingLoss", F.cosine_embedding_loss, (("margin", 0.0),))
TripletMarginLoss = _loss_module("TripletMarginLoss", F.triplet_margin_loss,
                                 (("margin", 1.0), ("p", 2.0), ("eps", 1e-6), ("swap", False)))

__all__ += ["BCELoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "SoftMarginLoss", "MarginRankingLoss",
            "HingeEmbeddingLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MultiLabelSoftMarginLoss",
            "CosineEmbeddingLoss", "TripletMarginLoss"]


class MultiMarginLoss(_WeightedLoss):
    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


MultiLabelMarginLoss = _loss_module("MultiLabelMarginLoss", F.multilabel_margin_loss)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             "instead")
        self.distance_function = distance_function
        self.margin, self.swap = margin, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap, reduction=self.reduction)


class CTCLoss(_Loss):
    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)


__all__ += ["CTCLoss", "MultiLabelMarginLoss", "MultiMarginLoss", "TripletMarginWithDistanceLoss"]


__all__ += ["LinearCrossEntropyLoss"]


class LinearCrossEntropyLoss(_WeightedLoss):
    """A Linear (in_features -> num_classes * prod(out_features), weight stored flat as torch's)
    followed by cross entropy, through F.linear_cross_entropy (chunked when options are given)."""

    def __init__(self, in_features, num_classes, *, out_features=(), bias=False, device=None, dtype=None,
                 reduction="mean", weight=None, ignore_index=None, label_smoothing=0.0, options=None):
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}")
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got {label_smoothing}")
        super().__init__(weight=weight, reduction=reduction)
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.linear = Linear(in_features, math.prod(self.out_features, start=num_classes), bias=bias, device=device,
                             dtype=dtype)
        self.options = options

    def forward(self, input, target):
        weight = self.linear.weight.reshape((self.num_classes, *self.out_features, self.linear.in_features))
        bias = None if self.linear.bias is None else self.linear.bias.reshape((self.num_classes, *self.out_features))
        return F.linear_cross_entropy(input, weight, target, linear_bias=bias, weight=self.weight,
                                      reduction=self.reduction, ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing, options=self.options)

    def extra_repr(self):
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, reduction={self.reduction}, "
                f"ignore_index={self.ignore_index}, label_smoothing={self.label_smoothing}, options={self.options}")
