"""The import paths real PyTorch programs use resolve under tessera, and name the same objects as
the short paths."""
import importlib

import pytest

import tessera as ts

PATHS = [
    ("tessera.nn.modules.conv", "Conv2d", "tessera.nn", "Conv2d"),
    ("tessera.nn.modules.activation", "LeakyReLU", "tessera.nn", "LeakyReLU"),
    ("tessera.nn.modules.loss", "BCELoss", "tessera.nn", "BCELoss"),
    ("tessera.nn.modules.batchnorm", "BatchNorm2d", "tessera.nn", "BatchNorm2d"),
    ("tessera.nn.modules.sparse", "Embedding", "tessera.nn", "Embedding"),
    ("tessera.nn.modules.padding", "ReflectionPad2d", "tessera.nn", "ReflectionPad2d"),
    ("tessera.nn.modules.upsampling", "Upsample", "tessera.nn", "Upsample"),
    ("tessera.nn.modules.pixelshuffle", "PixelShuffle", "tessera.nn", "PixelShuffle"),
    ("tessera.nn.modules.module", "Module", "tessera.nn", "Module"),
    ("tessera.nn.parallel", "DataParallel", "tessera.nn", "DataParallel"),
    ("tessera.nn.modules.adaptive", "AdaptiveLogSoftmaxWithLoss", "tessera.nn", "AdaptiveLogSoftmaxWithLoss"),
    ("tessera.nn.modules.linear", "LazyLinear", "tessera.nn", "LazyLinear"),
    ("tessera.nn.modules.conv", "LazyConv2d", "tessera.nn", "LazyConv2d"),
    ("tessera.nn.modules.batchnorm", "LazyBatchNorm1d", "tessera.nn", "LazyBatchNorm1d"),
    ("tessera.nn.modules.lazy", "LazyModuleMixin", "tessera.nn.modules.lazy", None),
    ("tessera.nn.modules.pooling", "FractionalMaxPool2d", "tessera.nn", "FractionalMaxPool2d"),
    ("tessera.nn.modules.pooling", "AdaptiveMaxPool3d", "tessera.nn", "AdaptiveMaxPool3d"),
    ("tessera.nn.modules.normalization", "CrossMapLRN2d", "tessera.nn", "CrossMapLRN2d"),
    ("tessera.nn.parameter", "UninitializedParameter", "tessera.nn", "UninitializedParameter"),
    ("tessera.nn.utils.parametrize", "register_parametrization", "tessera.nn.utils.parametrize", None),
    ("tessera.nn.utils.parametrizations", "orthogonal", "tessera.nn.utils.parametrizations", None),
    ("tessera.nn.utils.spectral_norm", "spectral_norm", "tessera.nn.utils", "spectral_norm"),
    ("tessera.nn.utils.weight_norm", "remove_weight_norm", "tessera.nn.utils", "remove_weight_norm"),
    ("tessera.nn.functional", "fractional_max_pool2d", "tessera.nn.functional", None),
    ("tessera.utils.data.dataloader", "DataLoader", "tessera.utils.data", "DataLoader"),
    ("tessera.utils.data.dataset", "TensorDataset", "tessera.utils.data", "TensorDataset"),
    ("tessera.utils.data.sampler", "RandomSampler", "tessera.utils.data", "RandomSampler"),
    ("tessera.optim.lr_scheduler", "OneCycleLR", "tessera.optim", None),
    ("tessera.testing", "assert_close", "tessera", None),
]


@pytest.mark.parametrize("module,name,short,short_name", PATHS, ids=[f"{p[0]}.{p[1]}" for p in PATHS])
def test_path_resolves(module, name, short, short_name):
    obj = getattr(importlib.import_module(module), name)
    if short_name:
        assert getattr(importlib.import_module(short), short_name) is obj


def test_data_parallel_wraps_one_device():
    model = ts.nn.Linear(3, 2)
    wrapped = ts.nn.DataParallel(model)
    assert wrapped.module is model
    assert sorted(wrapped.state_dict()) == ["module.bias", "module.weight"]
    x = ts.ones(4, 3)
    assert wrapped(x).tolist() == model(x).tolist()


@pytest.mark.torch
def test_every_torch_nn_module_name_we_define_is_a_torch_name():
    import torch
    missing = [n for n in ts.nn.modules.__all__ if not hasattr(torch.nn, n)]
    assert missing == []
