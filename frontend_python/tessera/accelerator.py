"""tessera.accelerator: torch.accelerator's device-agnostic questions (is there an accelerator,
which, how many), answered from the CUDA plugin without printing anything when there is none."""
from tessera import _C, cuda


def is_available():
    return cuda.is_available()


def current_accelerator(check_available=False):
    """The accelerator's device type (`device("cuda")`), or None when there is none."""
    if cuda.is_available():
        return _C.device("cuda")
    return None


def device_count():
    return cuda.device_count() if cuda.is_available() else 0


def current_device_index():
    if not cuda.is_available():
        raise RuntimeError("accelerator.current_device_index: no accelerator is available")
    return cuda.current_device()


def set_device_index(device):
    if not cuda.is_available():
        raise RuntimeError("accelerator.set_device_index: no accelerator is available")
    cuda.set_device(device)


def synchronize(device=None):
    if cuda.is_available():
        cuda.synchronize(device)


current_device_idx = current_device_index
set_device_idx = set_device_index
