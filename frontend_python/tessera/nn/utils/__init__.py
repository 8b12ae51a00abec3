"""tessera.nn.utils: gradient clipping, parameter/vector conversion, BatchNorm fusion, weight memory
formats, skip_init, parametrizations (parametrize, parametrizations) and the old weight_norm /
spectral_norm hooks, in torch.nn.utils' files."""
from tessera.nn.utils import clip_grad, convert_parameters, fusion, init, memory_format, stateless  # noqa: F401
from tessera.nn.utils.clip_grad import (  # noqa: F401
    clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm,
)
from tessera.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from tessera.nn.utils.fusion import (  # noqa: F401
    fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights,
)
from tessera.nn.utils.init import skip_init  # noqa: F401
from tessera.nn.utils.memory_format import (  # noqa: F401
    convert_conv2d_weight_memory_format, convert_conv3d_weight_memory_format,
)
from tessera.nn.utils import rnn  # noqa: E402,F401  (torch.nn.utils.rnn)
from tessera.nn.utils import parametrizations, parametrize  # noqa: E402,F401
# As in torch, the functions shadow their submodules' names (torch.nn.utils.weight_norm is the function).
from tessera.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm  # noqa: E402,F401
from tessera.nn.utils.weight_norm import remove_weight_norm, weight_norm  # noqa: E402,F401
