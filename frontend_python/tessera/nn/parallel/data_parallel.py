"""DataParallel: runs the wrapped module on one device, so code written for torch's DataParallel
(model.module, "module."-prefixed state_dict keys, device_ids) runs unchanged."""
from tessera.nn.modules.module import Module


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device = output_device if output_device is not None else (self.device_ids[:1] or [None])[0]
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
