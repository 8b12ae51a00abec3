"""tessera.distributed.elastic: the parts of torch.distributed.elastic that training scripts import
(the @record decorator); the agent itself is tessera.distributed.run's launcher."""
