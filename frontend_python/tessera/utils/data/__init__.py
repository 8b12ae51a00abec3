"""tessera.utils.data: datasets, samplers, collation and DataLoader, in torch.utils.data's files
(dataset, sampler, dataloader) so torch's import paths resolve."""
from tessera.utils.data.dataset import (  # noqa: F401
    ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset, TensorDataset, random_split,
)
from tessera.utils.data.sampler import (  # noqa: F401
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler,
)
from tessera.utils.data._collate import default_collate, default_convert  # noqa: F401
from tessera.utils.data.dataloader import DataLoader  # noqa: F401
from tessera.utils.data._worker import WorkerInfo, get_worker_info  # noqa: F401
from tessera.utils.data.distributed import DistributedSampler  # noqa: F401

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
           "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset",
           "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler", "WorkerInfo", "default_collate",
           "default_convert", "get_worker_info", "random_split"]
