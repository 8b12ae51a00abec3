"""The layers of tessera.nn."""
from tessera.nn.modules.module import Module
from tessera.nn.modules.linear import Identity, Linear
from tessera.nn.modules.conv import Conv1d, Conv2d
from tessera.nn.modules.pooling import (
    AdaptiveAvgPool2d, AdaptiveAvgPool3d, AvgPool2d, AvgPool3d, MaxPool2d, MaxPool3d,
)
from tessera.nn.modules.fold import Fold, Unfold
from tessera.nn.modules.normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from tessera.nn.modules.activation import (
    GELU, LogSoftmax, MultiheadAttention, ReLU, SiLU, Sigmoid, Softmax, Tanh,
)
from tessera.nn.modules.misc import Dropout, Embedding, EmbeddingBag, Flatten, Unflatten
from tessera.nn.modules.container import ModuleDict, ModuleList, Sequential
from tessera.nn.modules.loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from tessera.nn.modules.transformer import TransformerEncoder, TransformerEncoderLayer

__all__ = [
    "Module", "Identity", "Linear", "Conv1d", "Conv2d", "AdaptiveAvgPool2d", "AvgPool2d", "MaxPool2d",
    "AdaptiveAvgPool3d", "AvgPool3d", "MaxPool3d", "Fold", "Unfold", "BatchNorm1d", "BatchNorm2d", "GroupNorm",
    "LayerNorm", "GELU", "LogSoftmax", "MultiheadAttention", "ReLU", "SiLU", "Sigmoid", "Softmax", "Tanh", "Dropout",
    "Embedding", "EmbeddingBag", "Flatten", "Unflatten", "ModuleDict", "ModuleList", "Sequential",
    "BCEWithLogitsLoss", "CrossEntropyLoss", "L1Loss", "MSELoss", "NLLLoss", "TransformerEncoder",
    "TransformerEncoderLayer",
]
