"""tessera.Size: torch.Size, a tuple of ints (what `torch.Size([2, 3])` and `sample_shape=torch.Size()`
build). Tensor.shape and size() return plain tuples, which compare equal to a Size."""


class Size(tuple):
    def __new__(cls, sizes=()):
        sizes = tuple(sizes)
        for s in sizes:
            if not isinstance(s, int) and not (hasattr(s, "__index__") and not isinstance(s, float)):
                raise TypeError(f"torch.Size() takes an iterable of 'int' (item {len(sizes)} is "
                                f"'{type(s).__name__}')")
        return super().__new__(cls, (int(s) for s in sizes))

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, item):
        r = super().__getitem__(item)
        return Size(r) if isinstance(item, slice) else r

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))

    def __repr__(self):
        return f"tessera.Size({list(self)})"
