"""tessera.nn.utils.rnn: padding a list of variable-length sequences into one tensor and back."""
import tessera

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence", "pad_sequence",
           "unpack_sequence", "unpad_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks sequences of shape (L_i, *) into (max L, B, *) (or (B, max L, *) when batch_first),
    filling the missing steps with padding_value on the right (or the left)."""
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    trailing = tuple(sequences[0].shape[1:])
    for i, s in enumerate(sequences):
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"pad_sequence: expected every sequence to have trailing shape {trailing}, but "
                               f"sequence {i} has shape {tuple(s.shape)}")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            fill = tessera.full((missing,) + trailing, padding_value, dtype=s.dtype, device=s.device)
            s = tessera.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return tessera.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of pad_sequence (right padding): a list of the sequences cut to their lengths."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    lengths = lengths.tolist() if isinstance(lengths, tessera.Tensor) else list(lengths)
    return [padded_sequences[i, :int(n)] for i, n in enumerate(lengths)]


class PackedSequence(tuple):
    """A batch of variable-length sequences, time-major and without padding: `data` holds step 0 of
    every sequence, then step 1 of those still running, ...; batch_sizes[t] (an int64 CPU tensor)
    counts the sequences running at step t, longest first. sorted_indices / unsorted_indices map
    between that order and the caller's."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # PackedSequence(*other) form
            data, batch_sizes = data
        if not isinstance(batch_sizes, tessera.Tensor) or batch_sizes.dim() != 1:
            raise ValueError("PackedSequence: batch_sizes should be a 1-D tensor of sequence counts per step")
        return super().__new__(cls, (data, batch_sizes, sorted_indices, unsorted_indices))

    data = property(lambda self: self[0])
    batch_sizes = property(lambda self: self[1])
    sorted_indices = property(lambda self: self[2])
    unsorted_indices = property(lambda self: self[3])

    def _replace_data(self, data):
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        device = data.device
        move = (lambda t: t if t is None else t.to(device))
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def cpu(self):
        return self.to("cpu")

    def cuda(self, *args, **kwargs):
        return self.to("cuda")

    def float(self):
        return self._replace_data(self.data.float())

    def double(self):
        return self._replace_data(self.data.double())

    def half(self):
        return self._replace_data(self.data.half())

    @property
    def is_cuda(self):
        return self.data.device.type == "cuda"

    def is_pinned(self):
        return False

    def __repr__(self):
        return (f"PackedSequence(data={self.data!r}, batch_sizes={self.batch_sizes!r}, "
                f"sorted_indices={self.sorted_indices!r}, unsorted_indices={self.unsorted_indices!r})")


def invert_permutation(permutation):
    """The permutation's inverse (inverse[permutation[i]] = i); None stays None."""
    if permutation is None:
        return None
    inverse = tessera.empty_like(permutation)
    inverse.scatter_(0, permutation, tessera.arange(permutation.numel(), device=permutation.device))
    return inverse


def _lengths_list(lengths):
    if isinstance(lengths, tessera.Tensor):
        if lengths.dim() != 1:
            raise RuntimeError(f"pack_padded_sequence: expected a 1-D lengths tensor, got {lengths.dim()}-D")
        return [int(n) for n in lengths.tolist()]
    return [int(n) for n in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences of the given lengths."""
    lengths = _lengths_list(lengths)
    batch_dim = 0 if batch_first else 1
    if len(lengths) != input.shape[batch_dim]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                           f"(batch_size={input.shape[batch_dim]})")
    if enforce_sorted:
        if any(lengths[i] < lengths[i + 1] for i in range(len(lengths) - 1)):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable, as torch's sort
        sorted_indices = tessera.tensor(order, dtype=tessera.int64, device=input.device)
        input = input.index_select(batch_dim, sorted_indices)
        lengths = [lengths[i] for i in order]
    if lengths and lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if lengths and lengths[0] > input.shape[1 - batch_dim]:
        raise RuntimeError(f"pack_padded_sequence: a length of {lengths[0]} is longer than the padded sequence "
                           f"({input.shape[1 - batch_dim]} steps)")
    if batch_first:
        input = input.transpose(0, 1)
    steps = lengths[0] if lengths else 0
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(steps)]
    # Rows of step t are input[t, :batch_sizes[t]]: gather them segment by segment (a run of steps
    # with one batch size is one contiguous slice).
    pieces = []
    t = 0
    while t < steps:
        b = batch_sizes[t]
        end = t
        while end < steps and batch_sizes[end] == b:
            end += 1
        pieces.append(input[t:end, :b].reshape((end - t) * b, *input.shape[2:]))
        t = end
    data = tessera.cat(pieces, 0) if pieces else input.reshape(0, *input.shape[2:])
    return PackedSequence(data, tessera.tensor(batch_sizes, dtype=tessera.int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: (padded, lengths), lengths in the caller's order."""
    data, batch_sizes, sorted_indices, unsorted_indices = sequence
    sizes = [int(b) for b in batch_sizes.tolist()]
    steps, batch = len(sizes), (sizes[0] if sizes else 0)
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
    else:
        total_length = steps
    padded = tessera.full((total_length, batch) + tuple(data.shape[1:]), padding_value, dtype=data.dtype,
                          device=data.device)
    row = 0
    for t, b in enumerate(sizes):
        padded[t, :b] = data[row:row + b]
        row += b
    lengths = [sum(1 for b in sizes if b > i) for i in range(batch)]
    lengths = tessera.tensor(lengths, dtype=tessera.int64)
    if unsorted_indices is not None:
        padded = padded.index_select(1, unsorted_indices)
        lengths = lengths[unsorted_indices.cpu()]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, lengths


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of sequences (L_i, *)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences a PackedSequence holds, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
