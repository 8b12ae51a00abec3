#pragma once
// The shape rules of the fused recurrent layer (_rnn_layer and _rnn_layer_backward), shared by
// every device's kernel so that they accept the same arguments and refuse bad ones with the same
// messages. Dtype and device rules stay with each kernel.
//
// input [T, N, I] time-major, hx/cx [N, H], weight_ih [G*H, I], weight_hh [G*H, H], biases [G*H]
// with PyTorch's gate order (LSTM i, f, g, o; GRU r, z, n); mode 0 RNN_TANH, 1 RNN_RELU, 2 LSTM
// (cx given), 3 GRU.
#include <tessera/sdk/plugin.h>

#include <optional>
#include <vector>

namespace tessera::sdk {

enum RnnMode : int64_t { kRnnTanh = 0, kRnnRelu = 1, kRnnLstm = 2, kRnnGru = 3 };

inline int64_t rnn_gates(int64_t mode) { return mode == kRnnLstm ? 4 : mode == kRnnGru ? 3 : 1; }

struct RnnGeometry {
  int64_t mode = 0, T = 0, N = 0, I = 0, H = 0;
  bool reverse = false;
};

inline void rnn_expect_shape(const char* op, const char* what, const TensorRef& t, const std::vector<int64_t>& shape,
                             const char* meaning) {
  TS_SDK_CHECK(t.shape_vector() == shape, TS_ERROR_VALUE, op, ": expected ", what, " of shape ", shape_text(shape),
               " (", meaning, "), got ", shape_text(t.sizes()));
}

inline RnnGeometry rnn_geometry(const char* op, const TensorRef& input, const TensorRef& w_ih, const TensorRef& w_hh,
                                const std::optional<TensorRef>& b_ih, const std::optional<TensorRef>& b_hh,
                                const TensorRef& hx, const std::optional<TensorRef>& cx, int64_t mode, bool reverse) {
  TS_SDK_CHECK(mode >= kRnnTanh && mode <= kRnnGru, TS_ERROR_VALUE, op,
               ": expected mode 0 (RNN_TANH), 1 (RNN_RELU), 2 (LSTM) or 3 (GRU), got ", mode);
  TS_SDK_CHECK(input.dim() == 3, TS_ERROR_VALUE, op,
               ": expected input of rank 3 [seq_len, batch, input_size], got shape ", shape_text(input.sizes()));
  TS_SDK_CHECK(w_hh.dim() == 2, TS_ERROR_VALUE, op,
               ": expected weight_hh of rank 2 [gates * hidden_size, hidden_size], got shape ",
               shape_text(w_hh.sizes()));
  const int64_t G = rnn_gates(mode);
  RnnGeometry g{mode, input.size(0), input.size(1), input.size(2), w_hh.size(1), reverse};
  TS_SDK_CHECK(g.H > 0 && g.I > 0, TS_ERROR_VALUE, op, ": hidden_size and input_size must be positive, got ", g.H,
               " and ", g.I);
  rnn_expect_shape(op, "weight_ih", w_ih, {G * g.H, g.I}, "gates * hidden_size, input_size");
  rnn_expect_shape(op, "weight_hh", w_hh, {G * g.H, g.H}, "gates * hidden_size, hidden_size");
  if (b_ih) rnn_expect_shape(op, "bias_ih", *b_ih, {G * g.H}, "gates * hidden_size");
  if (b_hh) rnn_expect_shape(op, "bias_hh", *b_hh, {G * g.H}, "gates * hidden_size");
  rnn_expect_shape(op, "hx", hx, {g.N, g.H}, "batch, hidden_size");
  if (mode == kRnnLstm) {
    TS_SDK_CHECK(cx.has_value(), TS_ERROR_VALUE, op, ": an LSTM needs cx");
    rnn_expect_shape(op, "cx", *cx, {g.N, g.H}, "batch, hidden_size");
  }
  return g;
}

}  // namespace tessera::sdk
