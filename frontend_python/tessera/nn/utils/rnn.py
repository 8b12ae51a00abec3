"""tessera.nn.utils.rnn: padding a list of variable-length sequences into one tensor and back."""
import tessera

__all__ = ["pad_sequence", "unpad_sequence"]


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
