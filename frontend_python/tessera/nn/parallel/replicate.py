"""replicate: a module's replicas, one per device. Here one process drives one device, so each
replica is the module itself: the replicas' gradients reach its parameters, as those of torch's
broadcast replicas do, and nothing is copied."""

__all__ = ["replicate"]


def replicate(network, devices, detach=False):
    return [network for _ in devices]
