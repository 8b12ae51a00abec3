// nn::RNN, nn::LSTM, nn::GRU: layers and directions over a padded sequence, each one `_rnn_layer`
// call for float32 CPU tensors (as tessera/nn/_rnn.py's fused path), else per-step cells written
// with ordinary operators (its composite path), or over a packed sequence, one such call per run
// of steps with the same batch; nn::RNNCell, LSTMCell, GRUCell: one such step.
#include <tessera/cpp/autograd.h>
#include <tessera/cpp/nn/functional.h>
#include <tessera/cpp/nn/init.h>
#include <tessera/cpp/nn/rnn.h>
#include <tessera/ops.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace tessera::nn {
namespace {

constexpr int64_t kRnnTanh = 0, kRnnRelu = 1, kLstm = 2, kGru = 3;

int64_t gates(int64_t mode) { return mode == kLstm ? 4 : mode == kGru ? 3 : 1; }

std::string weight_name(const char* kind, int64_t layer, int64_t direction) {
  return fmt::format("{}_l{}{}", kind, layer, direction == 1 ? "_reverse" : "");
}

// One gate block (the i-th of `n`, each h wide) of the last dim.
Tensor gate(const Tensor& t, int64_t i, int64_t h) { return t.narrow(-1, i * h, h); }

// One step from the input's and the state's projections (xp, hp: (N, G*H)): (h', c').
std::tuple<Tensor, Tensor> cell_step(int64_t mode, const Tensor& xp, const Tensor& hp, const Tensor& h, Tensor c,
                                     int64_t H) {
  if (mode == kLstm) {
    Tensor g = xp.add(hp);
    Tensor i = gate(g, 0, H).sigmoid(), f = gate(g, 1, H).sigmoid(), gg = gate(g, 2, H).tanh(), o = gate(g, 3, H).sigmoid();
    c = f.mul(c).add(i.mul(gg));
    return {o.mul(c.tanh()), c};
  }
  if (mode == kGru) {
    Tensor r = gate(xp, 0, H).add(gate(hp, 0, H)).sigmoid();
    Tensor z = gate(xp, 1, H).add(gate(hp, 1, H)).sigmoid();
    Tensor n = gate(xp, 2, H).add(r.mul(gate(hp, 2, H))).tanh();
    return {n.sub(z.mul(n)).add(z.mul(h)), c};  // (1 - z) n + z h
  }
  Tensor pre = xp.add(hp);
  return {mode == kRnnRelu ? pre.relu() : pre.tanh(), c};
}

// One layer and direction, step by step: x (T, N, I) -> (out (T, N, H or proj), h, c). w[4], when
// given, projects an LSTM's h.
std::tuple<Tensor, Tensor, Tensor> composite_direction(int64_t mode, const Tensor& x, Tensor h, Tensor c,
                                                       const std::vector<Tensor>& w, bool reverse) {
  const Tensor &w_ih = w[0], &w_hh = w[1], &b_ih = w[2], &b_hh = w[3];
  const Tensor w_hr = w.size() > 4 ? w[4] : Tensor();
  int64_t T = x.size(0), H = w_hh.size(0) / gates(mode);
  Tensor x_proj = functional::linear(x, w_ih, b_ih);  // every step's input projection at once
  std::vector<Tensor> outs(static_cast<size_t>(T));
  for (int64_t s = 0; s < T; ++s) {
    int64_t t = reverse ? T - 1 - s : s;
    std::tie(h, c) = cell_step(mode, x_proj.select(0, t), functional::linear(h, w_hh, b_hh), h, c, H);
    if (w_hr.defined()) h = functional::linear(h, w_hr, Tensor());
    outs[size_t(t)] = h;
  }
  return {stack(outs, 0), h, c};
}

bool fused_ok(const Tensor& x, const std::vector<Tensor>& w) {
  auto ok = [](const Tensor& t) { return !t.defined() || (t.dtype() == kFloat32 && t.device().is_cpu()); };
  return x.dtype() == kFloat32 && x.device().is_cpu() && std::all_of(w.begin(), w.end(), ok);
}

// One layer and direction over a sequence (T, N, I): (out, h, c), fused when it can be.
std::tuple<Tensor, Tensor, Tensor> direction(int64_t mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                                             const std::vector<Tensor>& w, bool reverse, bool train) {
  if (w.size() == 4 && fused_ok(x, w)) {  // the fused layer has no projection
    auto [out, h, c, workspace] = _rnn_layer(x, w[0], w[1], w[2], w[3], h0.contiguous(),
                                             mode == kLstm ? c0.contiguous() : Tensor(), mode, reverse, train);
    return {out, h, c};
  }
  return composite_direction(mode, x, h0, c0, w, reverse);
}

// A packed sequence's time steps in runs of equal batch size: (first step, end step, batch, first row).
struct Segment {
  int64_t t0, t1, batch, row;
};

std::vector<Segment> segments(const std::vector<int64_t>& batch_sizes) {
  std::vector<Segment> out;
  int64_t row = 0;
  for (size_t t = 0; t < batch_sizes.size();) {
    size_t end = t;
    while (end < batch_sizes.size() && batch_sizes[end] == batch_sizes[t]) ++end;
    out.push_back({int64_t(t), int64_t(end), batch_sizes[t], row});
    row += int64_t(end - t) * batch_sizes[t];
    t = end;
  }
  return out;
}

// One layer and direction over packed rows (rows, I) (as tessera/nn/_rnn.py's run_direction):
// (out rows, h_n, c_n) with each sequence's final state. Left to right, a sequence that ends keeps
// its state; right to left, the segments run last to first and each newly running sequence
// starts from its initial state.
std::tuple<Tensor, Tensor, Tensor> packed_direction(int64_t mode, const Tensor& data, const std::vector<Segment>& segs,
                                                    const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& w,
                                                    bool reverse, bool train) {
  const bool is_lstm = mode == kLstm;
  std::vector<Tensor> outs(segs.size()), finals_h, finals_c;
  Tensor h = h0.narrow(0, 0, 0), c = is_lstm ? c0.narrow(0, 0, 0) : Tensor();
  for (size_t s = 0; s < segs.size(); ++s) {
    const size_t k = reverse ? segs.size() - 1 - s : s;
    const Segment& seg = segs[k];
    if (reverse) {
      if (h.size(0) < seg.batch) {
        h = cat({h, h0.narrow(0, h.size(0), seg.batch - h.size(0))}, 0);
        if (is_lstm) c = cat({c, c0.narrow(0, c.size(0), seg.batch - c.size(0))}, 0);
      }
    } else if (h.size(0) == 0) {
      h = h0.narrow(0, 0, seg.batch);
      if (is_lstm) c = c0.narrow(0, 0, seg.batch);
    } else if (h.size(0) > seg.batch) {
      finals_h.push_back(h.narrow(0, seg.batch, h.size(0) - seg.batch));
      h = h.narrow(0, 0, seg.batch);
      if (is_lstm) {
        finals_c.push_back(c.narrow(0, seg.batch, c.size(0) - seg.batch));
        c = c.narrow(0, 0, seg.batch);
      }
    }
    const int64_t steps = seg.t1 - seg.t0;
    Tensor x = data.narrow(0, seg.row, steps * seg.batch).reshape({steps, seg.batch, data.size(1)});
    Tensor out;
    std::tie(out, h, c) = direction(mode, x, h, c, w, reverse, train);
    outs[k] = out.reshape({steps * seg.batch, out.size(-1)});
  }
  if (!reverse) {  // the sequences that ended first come last in the batch
    finals_h.push_back(h);
    std::reverse(finals_h.begin(), finals_h.end());
    h = finals_h.size() > 1 ? cat(finals_h, 0) : h;
    if (is_lstm) {
      finals_c.push_back(c);
      std::reverse(finals_c.begin(), finals_c.end());
      c = finals_c.size() > 1 ? cat(finals_c, 0) : c;
    }
  }
  return {outs.size() > 1 ? cat(outs, 0) : outs[0], h, c};
}

}  // namespace

RNNBase::RNNBase(std::string name, int64_t mode, int64_t input_size, int64_t hidden_size, const RNNOptions& options)
    : Module(std::move(name)), mode_(mode), input_size_(input_size), hidden_size_(hidden_size), options_(options) {
  const std::string& m = this->name();
  if (input_size <= 0) raise<ValueError>("{}: input_size must be greater than zero, got {}", m, input_size);
  if (hidden_size <= 0) raise<ValueError>("{}: hidden_size must be greater than zero, got {}", m, hidden_size);
  if (options.num_layers <= 0) raise<ValueError>("{}: num_layers must be greater than zero, got {}", m, options.num_layers);
  if (!(options.dropout >= 0 && options.dropout <= 1))
    raise<ValueError>("{}: dropout should be a number in range [0, 1], got {}", m, options.dropout);
  const int64_t proj = options.proj_size;  // torch's checks and messages
  if (proj < 0) raise<ValueError>("{}: proj_size should be a positive integer or zero to disable projections", m);
  if (proj >= hidden_size) raise<ValueError>("{}: proj_size has to be smaller than hidden_size", m);
  if (proj != 0 && mode != kLstm) raise<ValueError>("{}: proj_size argument is only supported for LSTM, not RNN or GRU", m);
  int64_t dirs = options.bidirectional ? 2 : 1, gate_size = gates(mode) * hidden_size;
  const int64_t h_size = proj > 0 ? proj : hidden_size;  // the width of h and of each layer's output
  for (int64_t layer = 0; layer < options.num_layers; ++layer)
    for (int64_t d = 0; d < dirs; ++d) {
      int64_t in = layer == 0 ? input_size : h_size * dirs;
      register_parameter(weight_name("weight_ih", layer, d), empty({gate_size, in}, options.dtype, options.device), false);
      register_parameter(weight_name("weight_hh", layer, d), empty({gate_size, h_size}, options.dtype, options.device), false);
      if (options.bias) {
        register_parameter(weight_name("bias_ih", layer, d), empty({gate_size}, options.dtype, options.device), false);
        register_parameter(weight_name("bias_hh", layer, d), empty({gate_size}, options.dtype, options.device), false);
      }
      if (proj > 0)
        register_parameter(weight_name("weight_hr", layer, d), empty({proj, hidden_size}, options.dtype, options.device), false);
    }
  reset_parameters();
  for (Tensor& p : parameters(false)) p.requires_grad_(true);
}

void RNNBase::reset_parameters() {
  double stdv = 1.0 / std::sqrt(double(hidden_size_));
  for (Tensor& p : parameters(false)) init::uniform_(p, -stdv, stdv);
}

std::vector<std::vector<Tensor>> RNNBase::all_weights() const {
  std::vector<std::vector<Tensor>> out;
  int64_t dirs = options_.bidirectional ? 2 : 1;
  for (int64_t layer = 0; layer < options_.num_layers; ++layer)
    for (int64_t d = 0; d < dirs; ++d) {
      std::vector<Tensor> w = {param(weight_name("weight_ih", layer, d)), param(weight_name("weight_hh", layer, d)),
                               Tensor(), Tensor()};
      if (options_.bias) {
        w[2] = param(weight_name("bias_ih", layer, d));
        w[3] = param(weight_name("bias_hh", layer, d));
      }
      if (options_.proj_size > 0) w.push_back(param(weight_name("weight_hr", layer, d)));
      out.push_back(std::move(w));
    }
  return out;
}

std::tuple<Tensor, Tensor, Tensor> RNNBase::run(const Tensor& input, Tensor hx, Tensor cx) {
  const std::string& m = name();
  if (!input.defined()) raise<ValueError>("{}: got an undefined input", m);
  if (input.dim() != 2 && input.dim() != 3)
    raise<ValueError>("{}: expected a 2-D (unbatched) or 3-D (batched) input, got {}-D input of shape [{}]", m,
                      input.dim(), fmt::join(input.shape(), ", "));
  if (!is_floating_point(input.dtype())) raise<TypeError>("{}: expected a floating-point input, got {}", m, tessera::name(input.dtype()));
  if (input.size(-1) != input_size_)
    raise<ValueError>("{}: expected input with input_size={} features (last dim), got {} (input of shape [{}])", m,
                      input_size_, input.size(-1), fmt::join(input.shape(), ", "));
  bool batched = input.dim() == 3, is_lstm = mode_ == kLstm;
  int64_t batch_dim = options_.batch_first ? 0 : 1;
  Tensor x = batched ? input : input.unsqueeze(batch_dim);
  if (options_.batch_first) x = x.transpose(0, 1);
  x = x.contiguous();  // (T, N, I)
  int64_t dirs = options_.bidirectional ? 2 : 1, N = x.size(1);
  const int64_t h_size = options_.proj_size > 0 ? options_.proj_size : hidden_size_;
  auto prepare = [&](Tensor s, const char* what) {
    const std::vector<int64_t> state{options_.num_layers * dirs, N, what[0] == 'h' ? h_size : hidden_size_};
    if (!s.defined()) return zeros(state, x.dtype(), x.device());
    if (s.dim() != (batched ? 3 : 2))
      raise<ValueError>("{}: for {} input, {} should be {}-D, got {}-D tensor of shape [{}]", m,
                        batched ? "batched 3-D" : "unbatched 2-D", what, batched ? 3 : 2, s.dim(),
                        fmt::join(s.shape(), ", "));
    if (!batched) s = s.unsqueeze(1);
    if (s.shape() != state)
      raise<ValueError>("{}: expected {} of shape [{}], got [{}]", m, what, fmt::join(state, ", "),
                        fmt::join(batched ? s.shape() : s.squeeze(1).shape(), ", "));
    return s;
  };
  hx = prepare(std::move(hx), "hx");
  if (is_lstm) cx = prepare(std::move(cx), "cx");

  auto [layer_in, h_n, c_n] = run_layers(x, hx, cx, [](int64_t mode, const Tensor& in, const Tensor& h0, const Tensor& c0,
                                                          const std::vector<Tensor>& w, bool reverse, bool train) {
    return direction(mode, in, h0, c0, w, reverse, train);
  });
  Tensor output = options_.batch_first ? layer_in.transpose(0, 1) : layer_in;
  if (!batched) {
    output = output.squeeze(batch_dim);
    h_n = h_n.squeeze(1);
    if (is_lstm) c_n = c_n.squeeze(1);
  }
  return {output, h_n, c_n};
}

std::tuple<utils::rnn::PackedSequence, Tensor, Tensor> RNNBase::run_packed(const utils::rnn::PackedSequence& input,
                                                                           Tensor hx, Tensor cx) {
  const std::string& m = name();
  const Tensor& data = input.data();
  if (!input.is_defined()) raise<ValueError>("{}: got an empty PackedSequence", m);
  if (data.dim() != 2)
    raise<ValueError>("{}: expected packed data of 2 dims (rows, input_size), got [{}]", m, fmt::join(data.shape(), ", "));
  if (!is_floating_point(data.dtype())) raise<TypeError>("{}: expected a floating-point input, got {}", m, tessera::name(data.dtype()));
  if (data.size(1) != input_size_)
    raise<ValueError>("{}: expected input with input_size={} features (last dim), got {} (packed data of shape [{}])", m,
                      input_size_, data.size(1), fmt::join(data.shape(), ", "));
  std::vector<int64_t> batch_sizes;
  for (double b : input.batch_sizes().to_double_vector()) batch_sizes.push_back(int64_t(b));
  int64_t rows = 0;
  for (size_t t = 0; t < batch_sizes.size(); ++t) {
    if (batch_sizes[t] <= 0 || (t > 0 && batch_sizes[t] > batch_sizes[t - 1]))
      raise<ValueError>("{}: batch_sizes must be positive and non-increasing, got [{}]", m, fmt::join(batch_sizes, ", "));
    rows += batch_sizes[t];
  }
  if (rows != data.size(0))
    raise<ValueError>("{}: batch_sizes add up to {} rows, but the packed data has {}", m, rows, data.size(0));
  const std::vector<Segment> segs = segments(batch_sizes);
  const bool is_lstm = mode_ == kLstm;
  const int64_t dirs = options_.bidirectional ? 2 : 1, N = batch_sizes.empty() ? 0 : batch_sizes[0];
  const int64_t h_size = options_.proj_size > 0 ? options_.proj_size : hidden_size_;
  auto prepare = [&](Tensor s, const char* what) {  // given in the caller's order: into the sorted one
    const std::vector<int64_t> state{options_.num_layers * dirs, N, what[0] == 'h' ? h_size : hidden_size_};
    if (!s.defined()) return zeros(state, data.dtype(), data.device());
    if (s.shape() != state)
      raise<ValueError>("{}: expected {} of shape [{}], got [{}]", m, what, fmt::join(state, ", "), fmt::join(s.shape(), ", "));
    return input.sorted_indices().defined() ? s.index_select(1, input.sorted_indices()) : s;
  };
  hx = prepare(std::move(hx), "hx");
  if (is_lstm) cx = prepare(std::move(cx), "cx");
  auto [layer_in, h_n, c_n] = run_layers(data, hx, cx, [&segs](int64_t mode, const Tensor& in, const Tensor& h0,
                                                             const Tensor& c0, const std::vector<Tensor>& w, bool reverse,
                                                             bool train) {
    return packed_direction(mode, in, segs, h0, c0, w, reverse, train);
  });
  if (input.unsorted_indices().defined()) {  // back to the caller's order
    h_n = h_n.index_select(1, input.unsorted_indices());
    if (is_lstm) c_n = c_n.index_select(1, input.unsorted_indices());
  }
  return {utils::rnn::PackedSequence(layer_in, input.batch_sizes(), input.sorted_indices(), input.unsorted_indices()),
          h_n, c_n};
}

std::tuple<Tensor, Tensor, Tensor> RNNBase::run_layers(const Tensor& input, const Tensor& hx, const Tensor& cx,
                                                       const DirectionFn& run_direction) {
  const bool is_lstm = mode_ == kLstm, grad = autograd::is_grad_enabled();
  const int64_t dirs = options_.bidirectional ? 2 : 1;
  auto weights = all_weights();
  std::vector<Tensor> hs, cs;
  Tensor layer_in = input;
  for (int64_t layer = 0; layer < options_.num_layers; ++layer) {
    std::vector<Tensor> outs;
    for (int64_t d = 0; d < dirs; ++d) {
      int64_t k = layer * dirs + d;
      const std::vector<Tensor>& w = weights[size_t(k)];
      bool train = grad && (layer_in.requires_grad() || hx.requires_grad() || (is_lstm && cx.requires_grad()) ||
                            std::any_of(w.begin(), w.end(), [](const Tensor& t) { return t.defined() && t.requires_grad(); }));
      auto [out, h, c] = run_direction(mode_, layer_in, hx.select(0, k), is_lstm ? cx.select(0, k) : Tensor(), w, d == 1,
                                       train);
      outs.push_back(out);
      hs.push_back(h);
      if (is_lstm) cs.push_back(c);
    }
    layer_in = dirs == 2 ? cat(outs, -1) : outs[0];
    if (options_.dropout > 0 && is_training() && layer < options_.num_layers - 1)
      layer_in = functional::dropout(layer_in, options_.dropout, true);
  }
  return {layer_in, stack(hs, 0), is_lstm ? stack(cs, 0) : Tensor()};
}

Tensor RNNBase::forward(const Tensor& input) { return std::get<0>(run(input, Tensor(), Tensor())); }

std::string RNNBase::extra_repr() const {
  std::string s = fmt::format("{}, {}", input_size_, hidden_size_);
  if (options_.num_layers != 1) s += fmt::format(", num_layers={}", options_.num_layers);
  if (!options_.bias) s += ", bias=false";
  if (options_.batch_first) s += ", batch_first=true";
  if (options_.dropout != 0) s += fmt::format(", dropout={}", options_.dropout);
  if (options_.bidirectional) s += ", bidirectional=true";
  if (options_.proj_size != 0) s += fmt::format(", proj_size={}", options_.proj_size);
  if (mode_ == kRnnRelu) s += ", nonlinearity=relu";
  return s;
}

namespace {
int64_t rnn_mode(const std::string& nonlinearity) {
  if (nonlinearity == "tanh") return kRnnTanh;
  if (nonlinearity == "relu") return kRnnRelu;
  raise<ValueError>("RNN: unknown nonlinearity '{}', select from 'tanh' or 'relu'", nonlinearity);
}
const RNNOptions& no_nonlinearity(const RNNOptions& o, const char* module) {
  if (o.nonlinearity != "tanh")
    raise<ValueError>("{}: nonlinearity is an RNN option, got '{}'", module, o.nonlinearity);
  return o;
}
}  // namespace

RNN::RNN(int64_t input_size, int64_t hidden_size, const RNNOptions& options)
    : RNNBase("RNN", rnn_mode(options.nonlinearity), input_size, hidden_size, options) {}

std::tuple<Tensor, Tensor> RNN::forward(const Tensor& input, const Tensor& hx) {
  auto [out, h, c] = run(input, hx, Tensor());
  return {out, h};
}

std::tuple<utils::rnn::PackedSequence, Tensor> RNN::forward_with_packed_input(const utils::rnn::PackedSequence& input,
                                                                              const Tensor& hx) {
  auto [out, h, c] = run_packed(input, hx, Tensor());
  return {out, h};
}

LSTM::LSTM(int64_t input_size, int64_t hidden_size, const LSTMOptions& options)
    : RNNBase("LSTM", kLstm, input_size, hidden_size, no_nonlinearity(options, "LSTM")) {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTM::forward(const Tensor& input, const std::tuple<Tensor, Tensor>& hx) {
  auto [out, h, c] = run(input, std::get<0>(hx), std::get<1>(hx));
  return {out, {h, c}};
}

std::tuple<utils::rnn::PackedSequence, std::tuple<Tensor, Tensor>> LSTM::forward_with_packed_input(
    const utils::rnn::PackedSequence& input, const std::tuple<Tensor, Tensor>& hx) {
  auto [out, h, c] = run_packed(input, std::get<0>(hx), std::get<1>(hx));
  return {out, {h, c}};
}

GRU::GRU(int64_t input_size, int64_t hidden_size, const GRUOptions& options)
    : RNNBase("GRU", kGru, input_size, hidden_size, no_nonlinearity(options, "GRU")) {}

std::tuple<Tensor, Tensor> GRU::forward(const Tensor& input, const Tensor& hx) {
  auto [out, h, c] = run(input, hx, Tensor());
  return {out, h};
}

std::tuple<utils::rnn::PackedSequence, Tensor> GRU::forward_with_packed_input(const utils::rnn::PackedSequence& input,
                                                                              const Tensor& hx) {
  auto [out, h, c] = run_packed(input, hx, Tensor());
  return {out, h};
}

// ---- cells
RNNCellBase::RNNCellBase(std::string name, int64_t mode, int64_t input_size, int64_t hidden_size,
                         const RNNCellOptions& options)
    : Module(std::move(name)), mode_(mode), input_size_(input_size), hidden_size_(hidden_size), options_(options) {
  const std::string& m = this->name();
  if (input_size <= 0) raise<ValueError>("{}: input_size must be greater than zero, got {}", m, input_size);
  if (hidden_size <= 0) raise<ValueError>("{}: hidden_size must be greater than zero, got {}", m, hidden_size);
  const int64_t gate_size = gates(mode) * hidden_size;
  register_parameter("weight_ih", empty({gate_size, input_size}, options.dtype, options.device), false);
  register_parameter("weight_hh", empty({gate_size, hidden_size}, options.dtype, options.device), false);
  if (options.bias) {
    register_parameter("bias_ih", empty({gate_size}, options.dtype, options.device), false);
    register_parameter("bias_hh", empty({gate_size}, options.dtype, options.device), false);
  }
  reset_parameters();
  for (Tensor& p : parameters(false)) p.requires_grad_(true);
}

void RNNCellBase::reset_parameters() {
  double stdv = 1.0 / std::sqrt(double(hidden_size_));
  for (Tensor& p : parameters(false)) init::uniform_(p, -stdv, stdv);
}

std::tuple<Tensor, Tensor> RNNCellBase::step(const Tensor& input, Tensor hx, Tensor cx) {
  const std::string& m = name();
  if (!input.defined()) raise<ValueError>("{}: got an undefined input", m);
  if (input.dim() != 1 && input.dim() != 2)
    raise<ValueError>("{}: Expected input to be 1D or 2D, got {}D instead", m, input.dim());
  if (input.size(-1) != input_size_)
    raise<ValueError>("{}: input has inconsistent input_size: got {} expected {}", m, input.size(-1), input_size_);
  const bool batched = input.dim() == 2, is_lstm = mode_ == kLstm;
  Tensor x = batched ? input : input.unsqueeze(0);
  const std::vector<int64_t> state{x.size(0), hidden_size_};
  auto prepare = [&](Tensor s, const char* what) {
    if (!s.defined()) return zeros(state, x.dtype(), x.device());
    if (s.dim() != input.dim())
      raise<ValueError>("{}: Expected {} to be {}D, got {}D instead", m, what, input.dim(), s.dim());
    if (!batched) s = s.unsqueeze(0);
    if (s.shape() != state)
      raise<ValueError>("{}: expected {} of shape [{}], got [{}]", m, what, fmt::join(state, ", "),
                        fmt::join(batched ? s.shape() : s.squeeze(0).shape(), ", "));
    return s;
  };
  hx = prepare(std::move(hx), "hx");
  if (is_lstm) cx = prepare(std::move(cx), "cx");
  Tensor b_ih = options_.bias ? param("bias_ih") : Tensor(), b_hh = options_.bias ? param("bias_hh") : Tensor();
  auto [h, c] = cell_step(mode_, functional::linear(x, param("weight_ih"), b_ih),
                          functional::linear(hx, param("weight_hh"), b_hh), hx, cx, hidden_size_);
  if (!batched) {
    h = h.squeeze(0);
    if (is_lstm) c = c.squeeze(0);
  }
  return {h, c};
}

std::string RNNCellBase::extra_repr() const {
  std::string s = fmt::format("{}, {}", input_size_, hidden_size_);
  if (!options_.bias) s += ", bias=false";
  if (mode_ == kRnnRelu) s += ", nonlinearity=relu";
  return s;
}

namespace {
const RNNCellOptions& tanh_only(const RNNCellOptions& o, const char* module) {
  if (o.nonlinearity != "tanh")
    raise<ValueError>("{}: nonlinearity is an RNNCell option, got '{}'", module, o.nonlinearity);
  return o;
}
}  // namespace

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, const RNNCellOptions& options)
    : RNNCellBase("RNNCell", rnn_mode(options.nonlinearity), input_size, hidden_size, options) {}
Tensor RNNCell::forward(const Tensor& input, const Tensor& hx) { return std::get<0>(step(input, hx, Tensor())); }

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, const LSTMCellOptions& options)
    : RNNCellBase("LSTMCell", kLstm, input_size, hidden_size, tanh_only(options, "LSTMCell")) {}
std::tuple<Tensor, Tensor> LSTMCell::forward(const Tensor& input, const std::tuple<Tensor, Tensor>& hx) {
  return step(input, std::get<0>(hx), std::get<1>(hx));
}

GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, const GRUCellOptions& options)
    : RNNCellBase("GRUCell", kGru, input_size, hidden_size, tanh_only(options, "GRUCell")) {}
Tensor GRUCell::forward(const Tensor& input, const Tensor& hx) { return std::get<0>(step(input, hx, Tensor())); }

}  // namespace tessera::nn
