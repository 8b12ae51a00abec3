"""convert_conv2d/3d_weight_memory_format: the convolutions' weights of a module tree in a memory
format (channels_last / channels_last_3d), so their convolutions take that layout's path."""
import tessera
from tessera.nn.parameter import Parameter

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, memory_format, classes):
    if isinstance(module, classes):
        # A new Parameter: assigning .data here copies values into the old strides, keeping its layout.
        weight = module.weight
        with tessera.no_grad():
            module.weight = Parameter(weight.detach().contiguous(memory_format=memory_format), weight.requires_grad)
    for child in module.children():
        _convert(child, memory_format, classes)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """The Conv2d and ConvTranspose2d weights of module and its descendants in memory_format;
    returns module (changed in place)."""
    from tessera.nn import Conv2d, ConvTranspose2d
    return _convert(module, memory_format, (Conv2d, ConvTranspose2d))


def convert_conv3d_weight_memory_format(module, memory_format):
    """The Conv3d and ConvTranspose3d weights of module and its descendants in memory_format."""
    from tessera.nn import Conv3d, ConvTranspose3d
    return _convert(module, memory_format, (Conv3d, ConvTranspose3d))
