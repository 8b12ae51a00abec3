#pragma once
// Recurrent layers over whole sequences, torch's parameters, gates and shapes: nn::RNN (tanh or
// relu), nn::LSTM (gates i, f, g, o) and nn::GRU (gates r, z, n; n = tanh(W_in x + b_in +
// r * (W_hn h + b_hn))). Stacked (num_layers), bidirectional, batch_first; parameters
// weight_ih_l{k}[_reverse] (gates * H, in), weight_hh_l{k}[_reverse] (gates * H, H), bias_ih_l{k},
// bias_hh_l{k}, all initialised U(-1/sqrt(H), 1/sqrt(H)).
//
// Input (T, N, input_size) (or (N, T, input_size) with batch_first), or unbatched (T, input_size);
// states (num_layers * num_directions, N, H), or unbatched (num_layers * num_directions, H), zeros
// when not given (h is proj_size wide for an LSTM with proj_size). Each layer and direction of a
// float32 CPU sequence is one call of the fused `_rnn_layer` operator (as the Python frontend runs
// it); other dtypes and devices, and projected LSTMs, run the same
// equations step by step with ordinary operators.
//
//   nn::LSTM lstm(8, 16, {.num_layers = 2, .batch_first = true});
//   auto [out, state] = lstm(x, {});          // out (N, T, 16); state = (h_n, c_n)
//   Tensor last = lstm(x);                    // the output alone (so it can sit in a Sequential)
//
// The cells take one step: nn::RNNCell, nn::LSTMCell, nn::GRUCell with parameters weight_ih,
// weight_hh, bias_ih, bias_hh (same shapes and initialisation), input (N, input_size) or
// unbatched (input_size), states (N, H) or (H), zeros when undefined.
//
//   nn::LSTMCell cell(8, 16);
//   auto [h, c] = cell(x_t, {h, c});
//
// Sequences of different lengths go in packed (nn/utils/rnn.h), as libtorch's
// forward_with_packed_input: each run of time steps with the same number of running sequences is
// one fused call (or a step loop), each sequence's final state is the one of its own last step,
// and states given or returned are in the caller's batch order.
//
//   auto [packed_out, state] = lstm.forward_with_packed_input(packed, {});
#include <tessera/cpp/nn/module.h>
#include <tessera/cpp/nn/utils/rnn.h>

#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tessera::nn {

struct RNNOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;  // on every layer's output but the last, when training
  bool bidirectional = false;
  std::string nonlinearity = "tanh";  // RNN only: "tanh" or "relu"
  // LSTM only, as torch's: h_t = weight_hr_l{k}[_reverse] (proj_size, hidden_size) @ (o * tanh(c_t)),
  // so h, the output and weight_hh's second dim are proj_size wide (c stays hidden_size wide).
  int64_t proj_size = 0;
  std::optional<ScalarType> dtype;
  std::optional<Device> device;
};
using LSTMOptions = RNNOptions;
using GRUOptions = RNNOptions;

class RNNBase : public Module {
 public:
  void reset_parameters();
  // The output sequence alone, from zero states.
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  // [w_ih, w_hh, b_ih, b_hh] of each layer and direction (layer-major, forward first); biases
  // undefined with bias = false; an LSTM with proj_size adds w_hr.
  std::vector<std::vector<Tensor>> all_weights() const;
  int64_t proj_size() const { return options_.proj_size; }

 protected:
  // mode: the _rnn_layer operator's (0 RNN_TANH, 1 RNN_RELU, 2 LSTM, 3 GRU).
  RNNBase(std::string name, int64_t mode, int64_t input_size, int64_t hidden_size, const RNNOptions& options);
  // (output, h_n, c_n); c_n / cx only for LSTM. hx, cx undefined: zeros.
  std::tuple<Tensor, Tensor, Tensor> run(const Tensor& input, Tensor hx, Tensor cx);
  // The same over a packed sequence (states in the caller's batch order).
  std::tuple<utils::rnn::PackedSequence, Tensor, Tensor> run_packed(const utils::rnn::PackedSequence& input, Tensor hx,
                                                                    Tensor cx);
  // One layer and direction: (mode, input, h0, c0, weights, reverse, train) -> (output, h_n, c_n).
  using DirectionFn = std::function<std::tuple<Tensor, Tensor, Tensor>(int64_t, const Tensor&, const Tensor&,
                                                                       const Tensor&, const std::vector<Tensor>&, bool, bool)>;
  // Every layer and direction over `input` (dropout between layers when training): (last layer's
  // output, h_n, c_n) with states stacked layer-major.
  std::tuple<Tensor, Tensor, Tensor> run_layers(const Tensor& input, const Tensor& hx, const Tensor& cx,
                                                const DirectionFn& run_direction);

  int64_t mode_, input_size_, hidden_size_;
  RNNOptions options_;
};

class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, const RNNOptions& options = {});
  using RNNBase::forward;
  using Module::operator();
  // (output, h_n); hx undefined: zeros.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx);
  std::tuple<Tensor, Tensor> operator()(const Tensor& input, const Tensor& hx) { return forward(input, hx); }
  std::tuple<utils::rnn::PackedSequence, Tensor> forward_with_packed_input(const utils::rnn::PackedSequence& input,
                                                                           const Tensor& hx = Tensor());
};

class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, const LSTMOptions& options = {});
  using RNNBase::forward;
  using Module::operator();
  // (output, (h_n, c_n)); hx = (h_0, c_0), either undefined: zeros.
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(const Tensor& input, const std::tuple<Tensor, Tensor>& hx);
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> operator()(const Tensor& input, const std::tuple<Tensor, Tensor>& hx) {
    return forward(input, hx);
  }
  std::tuple<utils::rnn::PackedSequence, std::tuple<Tensor, Tensor>> forward_with_packed_input(
      const utils::rnn::PackedSequence& input, const std::tuple<Tensor, Tensor>& hx = {});
};

class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, const GRUOptions& options = {});
  using RNNBase::forward;
  using Module::operator();
  // (output, h_n); hx undefined: zeros.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx);
  std::tuple<Tensor, Tensor> operator()(const Tensor& input, const Tensor& hx) { return forward(input, hx); }
  std::tuple<utils::rnn::PackedSequence, Tensor> forward_with_packed_input(const utils::rnn::PackedSequence& input,
                                                                           const Tensor& hx = Tensor());
};

struct RNNCellOptions {
  bool bias = true;
  std::string nonlinearity = "tanh";  // RNNCell only: "tanh" or "relu"
  std::optional<ScalarType> dtype;
  std::optional<Device> device;
};
using LSTMCellOptions = RNNCellOptions;
using GRUCellOptions = RNNCellOptions;

class RNNCellBase : public Module {
 public:
  void reset_parameters();
  std::string extra_repr() const override;
  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }

 protected:
  RNNCellBase(std::string name, int64_t mode, int64_t input_size, int64_t hidden_size, const RNNCellOptions& options);
  // One step: (h', c'), c' only for an LSTM cell; hx, cx undefined: zeros.
  std::tuple<Tensor, Tensor> step(const Tensor& input, Tensor hx, Tensor cx);

  int64_t mode_, input_size_, hidden_size_;
  RNNCellOptions options_;
};

class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, const RNNCellOptions& options = {});
  using Module::operator();
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  Tensor forward(const Tensor& input, const Tensor& hx);  // h'
  Tensor operator()(const Tensor& input, const Tensor& hx) { return forward(input, hx); }
};

class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, const LSTMCellOptions& options = {});
  using Module::operator();
  Tensor forward(const Tensor& input) override { return std::get<0>(forward(input, {})); }  // h' alone
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const std::tuple<Tensor, Tensor>& hx);  // (h', c')
  std::tuple<Tensor, Tensor> operator()(const Tensor& input, const std::tuple<Tensor, Tensor>& hx) {
    return forward(input, hx);
  }
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, const GRUCellOptions& options = {});
  using Module::operator();
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  Tensor forward(const Tensor& input, const Tensor& hx);  // h'
  Tensor operator()(const Tensor& input, const Tensor& hx) { return forward(input, hx); }
};

}  // namespace tessera::nn
