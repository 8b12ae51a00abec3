"""torch.distributed.elastic.multiprocessing's import path: errors.record lives below."""
