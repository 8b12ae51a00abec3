"""Element-wise activations, Softmax and MultiheadAttention."""

__all__ = ["GELU", "LogSoftmax", "MultiheadAttention", "ReLU", "SiLU", "Sigmoid", "Softmax", "Tanh"]
import tessera
from tessera.nn import functional as F, init
from tessera.nn.modules.linear import Linear
from tessera.nn.modules.module import Module
from tessera.nn.parameter import Parameter


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class NonDynamicallyQuantizableLinear(Linear):
    """The out-projection of MultiheadAttention (a Linear; the name keeps torch's state_dict layout)."""


class _HeadsError(AssertionError, ValueError):
    """torch raises AssertionError for an embed_dim that num_heads does not divide; earlier Tessera
    raised ValueError, so the error is both."""


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention. With kdim == vdim == embed_dim the q, k, v projections are packed in
    in_proj_weight (3E, E); otherwise q_proj_weight (E, E), k_proj_weight (E, kdim) and v_proj_weight
    (E, vdim) hold them and in_proj_weight is None. in_proj_bias (3E) and out_proj are shared by both
    layouts; add_bias_kv adds bias_k and bias_v (1, 1, E). Inputs are (L, N, E), or (N, L, E) with
    batch_first, or unbatched (L, E). forward returns (output, attention weights averaged over heads,
    or per head, or None)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        super().__init__()
        kw = {"dtype": dtype, "device": device}
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise _HeadsError(f"embed_dim must be divisible by num_heads, got embed_dim={embed_dim} and "
                              f"num_heads={num_heads}")
        # Registration order is torch's, so named_parameters() and state_dict() list the same names.
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(tessera.empty((3 * embed_dim, embed_dim), **kw))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(tessera.empty((embed_dim, embed_dim), **kw))
            self.k_proj_weight = Parameter(tessera.empty((embed_dim, self.kdim), **kw))
            self.v_proj_weight = Parameter(tessera.empty((embed_dim, self.vdim), **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(tessera.empty((3 * embed_dim,), **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(tessera.empty((1, 1, embed_dim), **kw))
            self.bias_v = Parameter(tessera.empty((1, 1, embed_dim), **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        separate = not self._qkv_same_embed_dim
        return F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=separate, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal, batch_first=self.batch_first)


def _activation(name, function, params=(), doc=""):
    """A module class whose forward is `function(input, **its constructor arguments)`; params are
    (name, default) pairs in torch's constructor order, shown by extra_repr."""
    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        if len(args) > len(params):
            raise TypeError(f"{name}.__init__() takes at most {len(params)} arguments ({len(args)} given)")
        values = dict(params)
        for (key, _), value in zip(params, args):
            values[key] = value
        for key, value in kwargs.items():
            if key not in values:
                raise TypeError(f"{name}.__init__() got an unexpected keyword argument '{key}'")
            values[key] = value
        for key, value in values.items():
            setattr(self, key, value)

    def forward(self, input):
        return function(input, **{key: getattr(self, key) for key, _ in params})

    def extra_repr(self):
        # As torch: inplace only when set; the shrink modules show their lambda bare.
        if [key for key, _ in params] == ["lambd"]:
            return str(self.lambd)
        shown = [(key, getattr(self, key)) for key, _ in params if key != "inplace" or getattr(self, key)]
        return ", ".join(f"{key}={value}" for key, value in shown)

    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                  "__doc__": doc or f"Module form of tessera.nn.functional.{function.__name__}.",
                                  "__module__": __name__})


LeakyReLU = _activation("LeakyReLU", F.leaky_relu, (("negative_slope", 0.01), ("inplace", False)))
ELU = _activation("ELU", F.elu, (("alpha", 1.0), ("inplace", False)))
SELU = _activation("SELU", F.selu, (("inplace", False),))
CELU = _activation("CELU", F.celu, (("alpha", 1.0), ("inplace", False)))
Hardtanh = _activation("Hardtanh", F.hardtanh, (("min_val", -1.0), ("max_val", 1.0), ("inplace", False)))
ReLU6 = _activation("ReLU6", F.relu6, (("inplace", False),))
Hardsigmoid = _activation("Hardsigmoid", F.hardsigmoid, (("inplace", False),))
Hardswish = _activation("Hardswish", F.hardswish, (("inplace", False),))
Softplus = _activation("Softplus", F.softplus, (("beta", 1.0), ("threshold", 20.0)))
Mish = _activation("Mish", F.mish, (("inplace", False),))
Softsign = _activation("Softsign", F.softsign)
LogSigmoid = _activation("LogSigmoid", F.logsigmoid)
Tanhshrink = _activation("Tanhshrink", F.tanhshrink)
Softshrink = _activation("Softshrink", F.softshrink, (("lambd", 0.5),))
Hardshrink = _activation("Hardshrink", F.hardshrink, (("lambd", 0.5),))
Threshold = _activation("Threshold", F.threshold, (("threshold", None), ("value", None), ("inplace", False)))
GLU = _activation("GLU", F.glu, (("dim", -1),))
Softmin = _activation("Softmin", F.softmin, (("dim", None),))


class PReLU(Module):
    """x where x > 0, else weight * x; one learnable slope, or one per channel (dim 1)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(tessera.full((num_parameters,), init, device=device, dtype=dtype))

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


__all__ += ["LeakyReLU", "ELU", "SELU", "CELU", "Hardtanh", "ReLU6", "Hardsigmoid", "Hardswish", "Softplus", "Mish",
            "Softsign", "LogSigmoid", "Tanhshrink", "Softshrink", "Hardshrink", "Threshold", "GLU", "Softmin", "PReLU"]


class Softmax2d(Module):
    """Softmax over the channels of each location: dim -3 of a (C, H, W) or (N, C, H, W) input."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3)


__all__ += ["Softmax2d"]


class RReLU(Module):
    """Randomized leaky ReLU: a slope drawn from U(lower, upper) per element in training,
    (lower + upper) / 2 in eval."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


__all__ += ["RReLU"]

