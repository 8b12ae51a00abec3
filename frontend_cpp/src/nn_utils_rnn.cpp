// nn::utils::rnn: packing padded batches of sequences and padding packed ones (torch's layout and
// messages; see tessera/cpp/nn/utils/rnn.h). The recurrent layers run packed input segment by
// segment (nn_rnn.cpp).
#include <tessera/cpp/nn/utils/rnn.h>
#include <tessera/ops.h>
#include <tessera/runtime.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>

namespace tessera::nn::utils::rnn {
namespace {

std::vector<int64_t> int_values(const Tensor& t) {
  std::vector<int64_t> out;
  for (double v : t.to_double_vector()) out.push_back(int64_t(v));
  return out;
}

Tensor int64_tensor(const std::vector<int64_t>& values, Device device = Device()) {
  std::vector<double> v(values.begin(), values.end());
  Tensor t = tensor_from_values(v, {int64_t(values.size())}, kInt64);
  return device.is_cpu() ? t : t.to(device);
}

}  // namespace

PackedSequence::PackedSequence(Tensor data, Tensor batch_sizes, Tensor sorted_indices, Tensor unsorted_indices)
    : data_(std::move(data)), batch_sizes_(std::move(batch_sizes)), sorted_indices_(std::move(sorted_indices)),
      unsorted_indices_(std::move(unsorted_indices)) {
  if (sorted_indices_.defined() && !unsorted_indices_.defined()) unsorted_indices_ = invert_permutation(sorted_indices_);
}

PackedSequence PackedSequence::to(Device device) const {
  auto moved = [&](const Tensor& t) { return t.defined() ? t.to(device) : t; };
  return PackedSequence(moved(data_), batch_sizes_, moved(sorted_indices_), moved(unsorted_indices_));
}

Tensor invert_permutation(const Tensor& permutation) {
  if (!permutation.defined()) return permutation;
  const std::vector<int64_t> p = int_values(permutation);
  std::vector<int64_t> inverse(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] < 0 || p[i] >= int64_t(p.size()))
      raise<ValueError>("invert_permutation: {} is not an index of a permutation of {} elements", p[i], p.size());
    inverse[size_t(p[i])] = int64_t(i);
  }
  return int64_tensor(inverse, permutation.device());
}

PackedSequence pack_padded_sequence(Tensor input, Tensor lengths, bool batch_first, bool enforce_sorted) {
  if (!input.defined() || input.dim() < 2)
    raise<ValueError>("pack_padded_sequence: expected an input of at least 2 dims (time and batch), got {}",
                      input.defined() ? fmt::format("{}-D", input.dim()) : std::string("an undefined tensor"));
  if (!lengths.defined() || lengths.dim() != 1)
    raise<ValueError>("pack_padded_sequence: expected a 1-D tensor of lengths, got {}",
                      lengths.defined() ? fmt::format("{}-D", lengths.dim()) : std::string("an undefined tensor"));
  const int64_t batch_dim = batch_first ? 0 : 1, batch = input.size(batch_dim);
  std::vector<int64_t> len = int_values(lengths);
  if (int64_t(len.size()) != batch)
    raise<ValueError>("Expected `len(lengths)` to be equal to batch_size, but got {} (batch_size={})", len.size(), batch);
  Tensor sorted_indices;
  if (enforce_sorted) {
    if (!std::is_sorted(len.rbegin(), len.rend()))
      raise<ValueError>("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can "
                        "pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this "
                        "requirement if you do not need ONNX exportability.");
  } else {
    std::vector<int64_t> order(len.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return len[size_t(a)] > len[size_t(b)]; });
    std::vector<int64_t> sorted(len.size());
    for (size_t i = 0; i < order.size(); ++i) sorted[i] = len[size_t(order[i])];
    len = sorted;
    sorted_indices = int64_tensor(order, input.device());
    input = input.index_select(batch_dim, sorted_indices);
  }
  if (batch_first) input = input.transpose(0, 1);  // (T, B, *)
  if (!len.empty() && len.back() <= 0)
    raise<ValueError>("Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0");
  const int64_t steps = len.empty() ? 0 : len.front();
  if (steps > input.size(0))
    raise<ValueError>("pack_padded_sequence: a sequence of length {} is longer than the input's {} time steps", steps,
                      input.size(0));
  std::vector<int64_t> batch_sizes;
  std::vector<Tensor> rows;
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t running = int64_t(std::count_if(len.begin(), len.end(), [t](int64_t l) { return l > t; }));
    batch_sizes.push_back(running);
    rows.push_back(input.select(0, t).narrow(0, 0, running));
  }
  Tensor data = rows.empty() ? input.narrow(0, 0, 0).flatten(0, 1) : cat(rows, 0);
  return PackedSequence(data, int64_tensor(batch_sizes), sorted_indices, invert_permutation(sorted_indices));
}

std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first, double padding_value,
                                               std::optional<int64_t> total_length) {
  if (!sequence.is_defined()) raise<ValueError>("pad_packed_sequence: got an empty PackedSequence");
  const std::vector<int64_t> batch_sizes = int_values(sequence.batch_sizes());
  const int64_t steps = int64_t(batch_sizes.size()), batch = steps ? batch_sizes.front() : 0;
  if (total_length && *total_length < steps)
    raise<ValueError>("Expected total_length to be at least the length of the longest sequence in input, but got "
                      "total_length={} and max sequence length being {}", *total_length, steps);
  const Tensor& data = sequence.data();
  std::vector<int64_t> shape{total_length.value_or(steps), batch};
  for (int64_t d = 1; d < data.dim(); ++d) shape.push_back(data.size(d));
  auto padding = [&](int64_t rows) {  // rows of a step that no sequence reaches
    std::vector<int64_t> step_shape(shape.begin() + 1, shape.end());
    step_shape[0] = rows;
    return full(step_shape, Scalar(padding_value), data.dtype(), data.device());
  };
  std::vector<int64_t> lengths(size_t(batch), 0);
  std::vector<Tensor> steps_out;
  int64_t row = 0;
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t b = batch_sizes[size_t(t)];
    Tensor step = data.narrow(0, row, b);
    steps_out.push_back(b < batch ? cat({step, padding(batch - b)}, 0) : step);  // finished sequences: padding
    for (int64_t i = 0; i < b; ++i) ++lengths[size_t(i)];
    row += b;
  }
  for (int64_t t = steps; t < shape[0]; ++t) steps_out.push_back(padding(batch));  // up to total_length
  Tensor padded = steps_out.empty() ? full(shape, Scalar(padding_value), data.dtype(), data.device()) : stack(steps_out, 0);
  Tensor out_lengths = int64_tensor(lengths);
  if (sequence.unsorted_indices().defined()) {
    padded = padded.index_select(1, sequence.unsorted_indices());
    out_lengths = out_lengths.index_select(0, sequence.unsorted_indices().to(Device()));
  }
  if (batch_first) padded = padded.transpose(0, 1).contiguous();
  return {padded, out_lengths};
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value) {
  if (sequences.empty()) raise<ValueError>("pad_sequence: received an empty list of sequences");
  int64_t longest = 0;
  for (const Tensor& s : sequences) {
    if (!s.defined() || s.dim() < 1) raise<ValueError>("pad_sequence: every sequence needs a time dim");
    if (s.dim() != sequences[0].dim() || !std::equal(s.sizes().begin() + 1, s.sizes().end(), sequences[0].sizes().begin() + 1))
      raise<ValueError>("pad_sequence: the sequences' trailing dims differ: [{}] and [{}]", fmt::join(s.shape(), ", "),
                        fmt::join(sequences[0].shape(), ", "));
    longest = std::max(longest, s.size(0));
  }
  std::vector<Tensor> columns;
  for (const Tensor& s : sequences) {
    Tensor c = s;
    if (s.size(0) < longest) {
      std::vector<int64_t> pad_shape = s.shape();
      pad_shape[0] = longest - s.size(0);
      c = cat({s, full(pad_shape, Scalar(padding_value), s.dtype(), s.device())}, 0);
    }
    columns.push_back(c);
  }
  return stack(columns, batch_first ? 0 : 1);
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  std::vector<int64_t> lengths;
  for (const Tensor& s : sequences) lengths.push_back(s.defined() && s.dim() > 0 ? s.size(0) : 0);
  return pack_padded_sequence(pad_sequence(sequences), int64_tensor(lengths), false, enforce_sorted);
}

}  // namespace tessera::nn::utils::rnn
