"""tessera.optim: optimizers (SGD, Adam, AdamW, RMSprop) and lr_scheduler, with torch's update
rules, defaults and state_dict format. Updates run in place under no_grad."""
from tessera.optim.optimizer import Optimizer
from tessera.optim.sgd import SGD
from tessera.optim.adam import Adam
from tessera.optim.adamw import AdamW
from tessera.optim.rmsprop import RMSprop
from tessera.optim import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
