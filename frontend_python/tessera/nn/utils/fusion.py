"""Folding an eval-mode BatchNorm into the convolution or linear layer before it: the layer's
weight scaled per output channel by gamma / sqrt(var + eps), its bias shifted to match."""
import copy

import tessera
from tessera.nn.parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _check_eval(layer, bn):
    if layer.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("Fusion needs the BatchNorm's running statistics (track_running_stats=True)")


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of conv computing bn(conv(x)) with bn's running statistics."""
    _check_eval(conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps,
                                                    bn.weight, bn.bias, transpose)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(weight, bias) Parameters of the fused convolution; a transposed convolution's output
    channels are its weight's dim 1. Results keep the convolution's dtypes."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    with tessera.no_grad():
        conv_b = tessera.zeros_like(bn_rm) if conv_b is None else conv_b
        bn_w = tessera.ones_like(bn_rm) if bn_w is None else bn_w
        bn_b = tessera.zeros_like(bn_rm) if bn_b is None else bn_b
        scale = bn_w * tessera.rsqrt(bn_rv + bn_eps)
        shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.ndim - 2)
        fused_w = (conv_w * scale.reshape(shape)).to(w_dtype)
        fused_b = ((conv_b - bn_rm) * scale + bn_b).to(b_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of linear computing bn(linear(x)) with bn's running statistics."""
    _check_eval(linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError("To fuse, linear.out_features == bn.num_features or bn.num_features == 1")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) Parameters of the fused linear layer."""
    with tessera.no_grad():
        linear_b = tessera.zeros_like(bn_rm) if linear_b is None else linear_b
        scale = bn_w * tessera.rsqrt(bn_rv + bn_eps)
        fused_w = linear_w * scale.unsqueeze(-1)
        fused_b = (linear_b - bn_rm) * scale + bn_b
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)
