"""tessera.optim: optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD,
Rprop, LBFGS, SparseAdam, Adafactor), lr_scheduler and swa_utils, with torch's update rules, defaults and
state_dict format. Updates run in place under no_grad."""
from tessera.optim.optimizer import Optimizer
from tessera.optim.sgd import SGD
from tessera.optim.adam import Adam
from tessera.optim.adamw import AdamW
from tessera.optim.rmsprop import RMSprop
from tessera.optim.adagrad import Adagrad
from tessera.optim.adadelta import Adadelta
from tessera.optim.adamax import Adamax
from tessera.optim.nadam import NAdam
from tessera.optim.radam import RAdam
from tessera.optim.asgd import ASGD
from tessera.optim.rprop import Rprop
from tessera.optim.lbfgs import LBFGS
from tessera.optim.sparse_adam import SparseAdam
from tessera.optim.adafactor import Adafactor
from tessera.optim import lr_scheduler
from tessera.optim import swa_utils

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
           "ASGD", "Rprop", "LBFGS", "SparseAdam", "Adafactor", "lr_scheduler", "swa_utils"]
