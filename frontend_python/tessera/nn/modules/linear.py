"""Identity, Linear and Bilinear."""

__all__ = ["Bilinear", "Identity", "Linear"]
import math

import tessera
from tessera.nn import functional as F, init
from tessera.nn.modules.module import Module
from tessera.nn.parameter import Parameter


def _weight_and_bias(module, weight_shape, bias, dtype, device):
    """Uninitialised `weight` of weight_shape and, when asked, `bias` of weight_shape[0] (else a
    None parameter), as the linear layers declare them before reset_parameters."""
    module.weight = Parameter(tessera.empty(weight_shape, dtype=dtype, device=device))
    if bias:
        module.bias = Parameter(tessera.empty((weight_shape[0],), dtype=dtype, device=device))
    else:
        module.register_parameter("bias", None)


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ W.T + b, W of shape (out_features, in_features); initialised as torch does
    (kaiming_uniform_(a=sqrt(5)) for W, U(-1/sqrt(in), 1/sqrt(in)) for b)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        _weight_and_bias(self, (out_features, in_features), bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """y = x1^T A x2 + b: weight (out_features, in1_features, in2_features), initialised as torch's
    (uniform in +-1/sqrt(in1_features), bias too)."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        _weight_and_bias(self, (out_features, in1_features, in2_features), bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")

