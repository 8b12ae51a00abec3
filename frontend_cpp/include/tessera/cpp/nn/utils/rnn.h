#pragma once
// Variable-length sequences for the recurrent layers, as libtorch's torch::nn::utils::rnn.
// A PackedSequence holds a batch of sequences time step by time step: data's first
// batch_sizes[0] rows are step 0 of every sequence (longest first), the next batch_sizes[1] rows
// step 1 of those still running, and so on; sorted_indices / unsorted_indices map the caller's
// batch order to that sorted order and back (undefined when the batch came sorted).
//
//   auto packed = nn::utils::rnn::pack_padded_sequence(x, lengths, /*batch_first=*/true,
//                                                      /*enforce_sorted=*/false);
//   auto [out, state] = lstm.forward_with_packed_input(packed);
//   auto [padded, out_lengths] = nn::utils::rnn::pad_packed_sequence(out, /*batch_first=*/true);
#include <tessera/device.h>
#include <tessera/tensor.h>

#include <optional>
#include <tuple>
#include <vector>

namespace tessera::nn::utils::rnn {

class PackedSequence {
 public:
  PackedSequence() = default;
  // batch_sizes: int64, on the CPU, one count per time step, non-increasing.
  PackedSequence(Tensor data, Tensor batch_sizes, Tensor sorted_indices = Tensor(), Tensor unsorted_indices = Tensor());
  const Tensor& data() const { return data_; }
  const Tensor& batch_sizes() const { return batch_sizes_; }
  const Tensor& sorted_indices() const { return sorted_indices_; }
  const Tensor& unsorted_indices() const { return unsorted_indices_; }
  bool is_defined() const { return data_.defined(); }
  // The same sequence with its data (and index tensors) on `device`; batch_sizes stays on the CPU.
  PackedSequence to(Device device) const;

 private:
  Tensor data_, batch_sizes_, sorted_indices_, unsorted_indices_;
};

// The inverse of a permutation of 0..n-1 (undefined in, undefined out).
Tensor invert_permutation(const Tensor& permutation);

// input (T, B, *) or (B, T, *) with batch_first; lengths (B) of int64 values in [1, T]. With
// enforce_sorted the lengths must not increase; otherwise the batch is sorted here and the
// permutation kept in the result.
PackedSequence pack_padded_sequence(Tensor input, Tensor lengths, bool batch_first = false, bool enforce_sorted = true);

// The inverse of pack_padded_sequence: (padded (T, B, *) or (B, T, *), lengths (B) int64), in the
// caller's batch order, T the longest length or total_length when given (not less).
std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first = false,
                                               double padding_value = 0.0,
                                               std::optional<int64_t> total_length = std::nullopt);

// Sequences (L_i, *) padded with padding_value into (max L, B, *) or (B, max L, *).
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false, double padding_value = 0.0);

// Sequences (L_i, *) packed (pad_sequence, then pack_padded_sequence with their lengths).
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);

}  // namespace tessera::nn::utils::rnn
