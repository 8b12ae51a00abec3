// nn::utils::rnn and the recurrent layers' forward_with_packed_input. The oracle for a packed run
// is the same module run on each sequence alone (batch of one, its own length): every output row
// and each sequence's final state must match, in the caller's batch order, and so must the
// parameters' gradients. Packing itself is checked against the element positions it must move.
#include "test_util.h"

#include <tessera/tessera.h>

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace ts = tessera;
using tessera::Tensor;
using tessera::testing::expect_close;
using tessera::testing::expect_error;
using tessera::testing::from;
using tessera::testing::randoms;
namespace nn = tessera::nn;
namespace rnn = tessera::nn::utils::rnn;

namespace {

Tensor lengths_tensor(const std::vector<int64_t>& lengths) {
  std::vector<double> v(lengths.begin(), lengths.end());
  return from(v, {int64_t(lengths.size())}, ts::kInt64);
}

std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> out;
  for (double v : t.to_double_vector()) out.push_back(int64_t(v));
  return out;
}

}  // namespace

TEST(CppApiPackedSequences, PackAndPadMoveEachElementWhereTorchPutsIt) {
  const int64_t T = 4, B = 3, F = 2;
  // x[t][b][f] = 100 t + 10 b + f, lengths unsorted
  std::vector<double> values;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t f = 0; f < F; ++f) values.push_back(double(100 * t + 10 * b + f));
  Tensor x = from(values, {T, B, F}, ts::kFloat64);
  const std::vector<int64_t> lengths{2, 4, 3};
  rnn::PackedSequence p = rnn::pack_padded_sequence(x, lengths_tensor(lengths), false, false);
  EXPECT_EQ(ints(p.batch_sizes()), (std::vector<int64_t>{3, 3, 2, 1}));
  EXPECT_EQ(ints(p.sorted_indices()), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(ints(p.unsorted_indices()), (std::vector<int64_t>{2, 0, 1}));
  std::vector<double> expected;  // step by step, sorted batch order (1, 2, 0), running sequences only
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b : {1, 2, 0})
      if (t < lengths[size_t(b)])
        for (int64_t f = 0; f < F; ++f) expected.push_back(double(100 * t + 10 * b + f));
  expect_close(p.data(), expected, 0);
  // back to padded form, in the caller's order, with the padding value where sequences ended
  auto [padded, out_lengths] = rnn::pad_packed_sequence(p, true, -1.0, 6);
  EXPECT_EQ(padded.shape(), (std::vector<int64_t>{B, 6, F}));
  EXPECT_EQ(ints(out_lengths), lengths);
  std::vector<double> want;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < 6; ++t)
      for (int64_t f = 0; f < F; ++f) want.push_back(t < lengths[size_t(b)] ? double(100 * t + 10 * b + f) : -1.0);
  expect_close(padded, want, 0);
  // batch_first packing of the same batch gives the same packed data
  rnn::PackedSequence q = rnn::pack_padded_sequence(x.transpose(0, 1).contiguous(), lengths_tensor(lengths), true, false);
  expect_close(q.data(), expected, 0);
  // pack_sequence / pad_sequence of the sequences themselves
  std::vector<Tensor> seqs;
  for (int64_t b = 0; b < B; ++b) seqs.push_back(x.select(1, b).narrow(0, 0, lengths[size_t(b)]));
  expect_close(rnn::pack_sequence(seqs, false).data(), expected, 0);
  EXPECT_EQ(rnn::pad_sequence(seqs, true).shape(), (std::vector<int64_t>{B, T, F}));
}

TEST(CppApiPackedSequences, BadInputAsTorch) {
  Tensor x = ts::zeros({5, 3, 2});
  expect_error<ts::ValueError>([&] { rnn::pack_padded_sequence(x, lengths_tensor({3, 4, 2})); },
                               {"`lengths` array must be sorted in decreasing order when `enforce_sorted` is True"});
  expect_error<ts::ValueError>([&] { rnn::pack_padded_sequence(x, lengths_tensor({3, 0, 2}), false, false); },
                               {"Length of all samples has to be greater than 0"});
  expect_error<ts::ValueError>([&] { rnn::pack_padded_sequence(x, lengths_tensor({3, 2})); },
                               {"Expected `len(lengths)` to be equal to batch_size, but got 2 (batch_size=3)"});
  expect_error<ts::ValueError>([&] { rnn::pack_padded_sequence(x, lengths_tensor({6, 4, 2})); },
                               {"a sequence of length 6 is longer than the input's 5 time steps"});
  rnn::PackedSequence p = rnn::pack_padded_sequence(x, lengths_tensor({5, 4, 2}));
  expect_error<ts::ValueError>([&] { rnn::pad_packed_sequence(p, false, 0.0, 3); },
                               {"total_length=3 and max sequence length being 5"});
  nn::LSTM lstm(3, 4);
  expect_error<ts::ValueError>([&] { lstm.forward_with_packed_input(p); },
                               {"LSTM: expected input with input_size=3 features (last dim), got 2"});
}

// Each module, packed, against the same module run on every sequence alone.
TEST(CppApiPackedSequences, PackedRunsMatchEachSequenceAlone) {
  const int64_t I = 3, H = 4, B = 4, T = 6;
  const std::vector<int64_t> lengths{3, 6, 1, 4};
  for (ts::ScalarType dt : {ts::kFloat32, ts::kFloat64}) {  // the fused layer, then the step loop
    for (const std::string mode : {"LSTM", "GRU", "RNN"}) {
      for (int64_t layers : {1, 2}) {
        for (bool bidirectional : {false, true}) {
          SCOPED_TRACE(mode + " layers=" + std::to_string(layers) + (bidirectional ? " bidirectional " : " ") +
                       std::string(ts::name(dt)));
          const int64_t D = bidirectional ? 2 : 1;
          nn::RNNOptions o{.num_layers = layers, .batch_first = true, .bidirectional = bidirectional, .dtype = dt};
          std::unique_ptr<nn::RNNBase> m;
          if (mode == "LSTM") m = std::make_unique<nn::LSTM>(I, H, o);
          else if (mode == "GRU") m = std::make_unique<nn::GRU>(I, H, o);
          else m = std::make_unique<nn::RNN>(I, H, o);
          Tensor x = from(randoms(size_t(B * T * I), 3), {B, T, I}, dt);
          Tensor h0 = from(randoms(size_t(layers * D * B * H), 4), {layers * D, B, H}, dt);
          Tensor c0 = from(randoms(size_t(layers * D * B * H), 5), {layers * D, B, H}, dt);
          rnn::PackedSequence packed = rnn::pack_padded_sequence(x, lengths_tensor(lengths), true, false);
          auto run_packed = [&](const rnn::PackedSequence& in) -> std::tuple<rnn::PackedSequence, Tensor, Tensor> {
            if (mode == "LSTM") {
              auto [out, state] = static_cast<nn::LSTM&>(*m).forward_with_packed_input(in, {h0, c0});
              return {out, std::get<0>(state), std::get<1>(state)};
            }
            auto [out, h] = mode == "GRU" ? static_cast<nn::GRU&>(*m).forward_with_packed_input(in, h0)
                                          : static_cast<nn::RNN&>(*m).forward_with_packed_input(in, h0);
            return {out, h, Tensor()};
          };
          auto [out, h_n, c_n] = run_packed(packed);
          auto [padded, out_lengths] = rnn::pad_packed_sequence(out, true);
          EXPECT_EQ(padded.shape(), (std::vector<int64_t>{B, T, D * H}));
          EXPECT_EQ(ints(out_lengths), lengths);
          const double tol = dt == ts::kFloat32 ? 2e-5 : 1e-12;
          for (int64_t b = 0; b < B; ++b) {
            const int64_t L = lengths[size_t(b)];
            Tensor xb = x.narrow(0, b, 1).narrow(1, 0, L);
            Tensor hb = h0.narrow(1, b, 1).contiguous(), cb = c0.narrow(1, b, 1).contiguous();
            Tensor ob, hn, cn;
            if (mode == "LSTM") {
              auto [o_, state] = static_cast<nn::LSTM&>(*m)(xb, {hb, cb});
              ob = o_, hn = std::get<0>(state), cn = std::get<1>(state);
            } else if (mode == "GRU") {
              std::tie(ob, hn) = static_cast<nn::GRU&>(*m)(xb, hb);
            } else {
              std::tie(ob, hn) = static_cast<nn::RNN&>(*m)(xb, hb);
            }
            expect_close(padded.narrow(0, b, 1).narrow(1, 0, L), ob.to_double_vector(), tol);
            expect_close(padded.narrow(0, b, 1).narrow(1, L, T - L), std::vector<double>(size_t((T - L) * D * H), 0.0), 0);
            expect_close(h_n.narrow(1, b, 1), hn.to_double_vector(), tol);
            if (mode == "LSTM") expect_close(c_n.narrow(1, b, 1), cn.to_double_vector(), tol);
          }
        }
      }
    }
  }
}

TEST(CppApiPackedSequences, GradientsMatchEachSequenceAlone) {
  const int64_t I = 3, H = 5, B = 3, T = 5;
  const std::vector<int64_t> lengths{5, 2, 4};
  nn::LSTM lstm(I, H, {.num_layers = 2, .bidirectional = true});
  Tensor x = from(randoms(size_t(T * B * I), 7), {T, B, I});
  auto [out, state] = lstm.forward_with_packed_input(rnn::pack_padded_sequence(x, lengths_tensor(lengths), false, false));
  out.data().square().sum().add(std::get<0>(state).sum()).backward();
  std::vector<std::vector<double>> packed_grads;
  for (Tensor& p : lstm.parameters()) {
    packed_grads.push_back(p.grad().to_double_vector());
    p.set_grad(Tensor());
  }
  for (int64_t b = 0; b < B; ++b) {
    auto [ob, sb] = lstm(x.narrow(1, b, 1).narrow(0, 0, lengths[size_t(b)]), {});
    ob.square().sum().add(std::get<0>(sb).sum()).backward();  // gradients add up over the sequences
  }
  size_t k = 0;
  for (Tensor& p : lstm.parameters()) expect_close(p.grad(), packed_grads[k++], 1e-4);
}
