"""tessera.distributed.algorithms: DDP communication hooks (torch.distributed.algorithms)."""
