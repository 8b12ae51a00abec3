"""How DistributedDataParallel groups gradients into buckets (torch's
dist._compute_bucket_assignment_by_size): tensors are taken in a given order, one open bucket per
dtype and device; a bucket closes once its bytes reach the current limit, and each close moves the
limit on to the next one in the list (the last one then holds). With no explicit order the buckets
come back sorted by the smallest parameter index they hold."""
import sys


def _key(tensor):
    return (str(tensor.dtype), str(tensor.device))


def compute_bucket_assignment_by_size(tensors, bucket_size_limits, tensor_indices=None):
    """[(parameter indices, size limit)] for `tensors` (a list), walked in `tensor_indices` order
    (indices into `tensors`; default: 0, 1, ...)."""
    if not bucket_size_limits:
        raise ValueError("compute_bucket_assignment_by_size: expected at least one bucket size limit, got none")
    order = list(range(len(tensors))) if tensor_indices is None else list(tensor_indices)
    open_buckets = {}  # key -> [indices, bytes, limit]
    limit_position = {}
    result = []
    for index in order:
        tensor = tensors[index]
        key = _key(tensor)
        bucket = open_buckets.setdefault(key, [[], 0, None])
        position = limit_position.setdefault(key, 0)
        bucket[0].append(index)
        bucket[1] += tensor.numel() * tensor.element_size()
        bucket[2] = bucket_size_limits[position]
        if bucket[1] >= bucket[2]:
            result.append((bucket[0], bucket[2]))
            open_buckets[key] = [[], 0, None]
            limit_position[key] = min(position + 1, len(bucket_size_limits) - 1)
    result.extend((indices, limit) for indices, _, limit in open_buckets.values() if indices)
    if tensor_indices is None:
        result.sort(key=lambda bucket: min(bucket[0]))
    return result


UNLIMITED = sys.maxsize
