"""tessera.nn: PyTorch-shaped neural-network modules, functional API and initialisers, written in
Python over Tessera's operators (autograd, when its plugin is loaded, differentiates them)."""
from tessera.nn.parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter
from tessera.nn.modules import *  # noqa: F401,F403
from tessera.nn.modules import __all__ as _modules_all
from tessera.nn import functional, init, parallel, utils  # noqa: E402
from tessera.nn.parallel import DataParallel  # noqa: E402

__all__ = ["Buffer", "DataParallel", "Parameter", "UninitializedBuffer", "UninitializedParameter", "functional", "init",
           "parallel", "utils"] + list(_modules_all)
