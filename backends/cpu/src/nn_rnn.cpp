// _rnn_layer and _rnn_layer_backward: one layer, one direction of an RNN (tanh or relu), LSTM or
// GRU over a whole float32 sequence, through oneDNN's RNN primitives (one primitive call runs
// every time step, with its GEMMs batched over the sequence where the recurrence allows).
// tessera.nn's RNN modules stack layers and directions over this; other dtypes and devices go
// through their composite path in Python.
//
// Layouts: input [T, N, I] time-major, hx/cx [N, H], weight_ih [G*H, I], weight_hh [G*H, H] and
// biases [G*H] with PyTorch's gate order (LSTM i, f, g, o; GRU r, z, n). PyTorch's weights are
// oneDNN's "ldgoi" layout; the primitives pick their own and we reorder. oneDNN's GRU is the
// "linear before reset" variant, which is PyTorch's formula, with gates in the order z, r, n and a
// fourth bias for the hidden side of n (b_hn); the gate blocks are permuted on the way in and out.
#include "nn_conv_pool.h"
#include "onednn_support.h"

#include "strided.h"
#include "tensor_iterator.h"

#include <tessera/sdk/rnn_geometry.h>

#include <dnnl.hpp>

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace tessera::cpu {
namespace {

using dnnl::memory;
using sdk::Args;
using sdk::fail;
using sdk::TensorRef;
using strided::str;
using tag = memory::format_tag;
using dt = memory::data_type;

enum Mode : int64_t { kRnnTanh = 0, kRnnRelu = 1, kLstm = 2, kGru = 3 };

int64_t gates_of(int64_t mode) { return mode == kLstm ? 4 : mode == kGru ? 3 : 1; }
int64_t bias_gates_of(int64_t mode) { return mode == kGru ? 4 : gates_of(mode); }

struct Geometry {
  int64_t mode, T, N, I, H;
  bool reverse;
  auto key(int64_t kind) const { return std::array<int64_t, 7>{kind, mode, T, N, I, H, int64_t(reverse)}; }
};


// Our plain buffers' descriptors, and the weights' "any" descriptors that let the primitive choose.
struct Descs {
  memory::desc src_layer, src_iter, src_iter_c, weights_layer, weights_iter, any_weights_layer, any_weights_iter, bias,
      dst_layer, dst_iter, dst_iter_c;
  dnnl::rnn_direction direction;
};

Descs descs(const Geometry& g) {
  const int64_t G = gates_of(g.mode);
  Descs d;
  d.src_layer = memory::desc({g.T, g.N, g.I}, dt::f32, tag::tnc);
  d.src_iter = memory::desc({1, 1, g.N, g.H}, dt::f32, tag::ldnc);
  d.weights_layer = memory::desc({1, 1, g.I, G, g.H}, dt::f32, tag::ldgoi);
  d.weights_iter = memory::desc({1, 1, g.H, G, g.H}, dt::f32, tag::ldgoi);
  d.any_weights_layer = memory::desc({1, 1, g.I, G, g.H}, dt::f32, tag::any);
  d.any_weights_iter = memory::desc({1, 1, g.H, G, g.H}, dt::f32, tag::any);
  d.bias = memory::desc({1, 1, bias_gates_of(g.mode), g.H}, dt::f32, tag::ldgo);
  d.dst_layer = memory::desc({g.T, g.N, g.H}, dt::f32, tag::tnc);
  d.dst_iter = d.src_iter;
  if (g.mode == kLstm) d.src_iter_c = d.dst_iter_c = d.src_iter;  // else zero descriptors: no cell state
  d.direction = g.reverse ? dnnl::rnn_direction::unidirectional_right2left
                          : dnnl::rnn_direction::unidirectional_left2right;
  return d;
}

dnnl::algorithm activation(const Geometry& g) {
  return g.mode == kRnnRelu ? dnnl::algorithm::eltwise_relu : dnnl::algorithm::eltwise_tanh;
}

// A reorder between one of our plain buffers and the layout a primitive chose.
struct Reorder {
  dnnl::reorder::primitive_desc pd;
  dnnl::reorder prim;
  static std::optional<Reorder> between(const memory::desc& from, const memory::desc& to) {
    if (from == to) return std::nullopt;
    dnnl::reorder::primitive_desc pd(onednn_engine(), from, onednn_engine(), to, user_scratchpad_attributes());
    return Reorder{pd, dnnl::reorder(pd)};
  }
  void run(dnnl::stream& s, memory& from, memory& to) const {
    memory scratch(pd.scratchpad_desc(), onednn_engine());
    prim.execute(s, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratch}});
  }
};

// The typed forward primitive descriptor of a cell (the backward needs it as its hint).
template <class F>
auto with_forward_pd(const Geometry& g, dnnl::prop_kind kind, F&& use) {
  const Descs d = descs(g);
  switch (g.mode) {
    case kLstm: {
      dnnl::lstm_forward::desc desc(kind, d.direction, d.src_layer, d.src_iter, d.src_iter_c, d.any_weights_layer,
                                    d.any_weights_iter, d.bias, d.dst_layer, d.dst_iter, d.dst_iter_c);
      return use(dnnl::lstm_forward::primitive_desc(desc, user_scratchpad_attributes(), onednn_engine()));
    }
    case kGru: {
      dnnl::lbr_gru_forward::desc desc(kind, d.direction, d.src_layer, d.src_iter, d.any_weights_layer,
                                       d.any_weights_iter, d.bias, d.dst_layer, d.dst_iter);
      return use(dnnl::lbr_gru_forward::primitive_desc(desc, user_scratchpad_attributes(), onednn_engine()));
    }
    default: {
      dnnl::vanilla_rnn_forward::desc desc(kind, activation(g), d.direction, d.src_layer, d.src_iter,
                                           d.any_weights_layer, d.any_weights_iter, d.bias, d.dst_layer, d.dst_iter);
      return use(dnnl::vanilla_rnn_forward::primitive_desc(desc, user_scratchpad_attributes(), onednn_engine()));
    }
  }
}

struct Forward {
  dnnl::primitive prim;
  memory::desc weights_layer, weights_iter, workspace, scratchpad;
  std::optional<Reorder> to_weights_layer, to_weights_iter;
};

struct Backward {
  dnnl::primitive prim;
  memory::desc weights_layer, weights_iter, diff_weights_layer, diff_weights_iter, workspace, scratchpad;
  std::optional<Reorder> to_weights_layer, to_weights_iter, from_diff_weights_layer, from_diff_weights_iter;
};

Forward make_forward(const Geometry& g, bool train) {
  const Descs d = descs(g);
  auto kind = train ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  return with_forward_pd(g, kind, [&](const auto& pd) {
    return Forward{dnnl::primitive(pd),
                   pd.weights_layer_desc(),
                   pd.weights_iter_desc(),
                   pd.workspace_desc(),
                   pd.scratchpad_desc(),
                   Reorder::between(d.weights_layer, pd.weights_layer_desc()),
                   Reorder::between(d.weights_iter, pd.weights_iter_desc())};
  });
}

template <class PD>
Backward pack_backward(const Descs& d, const PD& pd) {
  return Backward{dnnl::primitive(pd),
                  pd.weights_layer_desc(),
                  pd.weights_iter_desc(),
                  pd.diff_weights_layer_desc(),
                  pd.diff_weights_iter_desc(),
                  pd.workspace_desc(),
                  pd.scratchpad_desc(),
                  Reorder::between(d.weights_layer, pd.weights_layer_desc()),
                  Reorder::between(d.weights_iter, pd.weights_iter_desc()),
                  Reorder::between(pd.diff_weights_layer_desc(), d.weights_layer),
                  Reorder::between(pd.diff_weights_iter_desc(), d.weights_iter)};
}

Backward make_backward(const Geometry& g) {
  const Descs d = descs(g);
  const auto back = dnnl::prop_kind::backward;
  return with_forward_pd(g, dnnl::prop_kind::forward_training, [&](const auto& hint) -> Backward {
    switch (g.mode) {
      case kLstm: {
        dnnl::lstm_backward::desc desc(back, d.direction, d.src_layer, d.src_iter, d.src_iter_c, d.any_weights_layer,
                                       d.any_weights_iter, d.bias, d.dst_layer, d.dst_iter, d.dst_iter_c, d.src_layer,
                                       d.src_iter, d.src_iter_c, d.any_weights_layer, d.any_weights_iter, d.bias,
                                       d.dst_layer, d.dst_iter, d.dst_iter_c);
        if constexpr (std::is_same_v<std::decay_t<decltype(hint)>, dnnl::lstm_forward::primitive_desc>)
          return pack_backward(d, dnnl::lstm_backward::primitive_desc(desc, user_scratchpad_attributes(), onednn_engine(), hint));
        break;
      }
      case kGru: {
        dnnl::lbr_gru_backward::desc desc(back, d.direction, d.src_layer, d.src_iter, d.any_weights_layer,
                                          d.any_weights_iter, d.bias, d.dst_layer, d.dst_iter, d.src_layer, d.src_iter,
                                          d.any_weights_layer, d.any_weights_iter, d.bias, d.dst_layer, d.dst_iter);
        if constexpr (std::is_same_v<std::decay_t<decltype(hint)>, dnnl::lbr_gru_forward::primitive_desc>)
          return pack_backward(d, dnnl::lbr_gru_backward::primitive_desc(desc, user_scratchpad_attributes(), onednn_engine(), hint));
        break;
      }
      default: {
        dnnl::vanilla_rnn_backward::desc desc(back, activation(g), d.direction, d.src_layer, d.src_iter,
                                              d.any_weights_layer, d.any_weights_iter, d.bias, d.dst_layer,
                                              d.dst_iter, d.src_layer, d.src_iter, d.any_weights_layer,
                                              d.any_weights_iter, d.bias, d.dst_layer, d.dst_iter);
        if constexpr (std::is_same_v<std::decay_t<decltype(hint)>, dnnl::vanilla_rnn_forward::primitive_desc>)
          return pack_backward(d, dnnl::vanilla_rnn_backward::primitive_desc(desc, user_scratchpad_attributes(), onednn_engine(), hint));
        break;
      }
    }
    throw std::logic_error("rnn: the forward hint does not match the cell");
  });
}

// Sequence lengths vary more than convolution shapes: a smaller bound.
template <class Entry>
using Cache = PrimitiveCache<std::array<int64_t, 7>, Entry, 128>;

memory wrap(const memory::desc& d, const void* p) { return memory(d, onednn_engine(), const_cast<void*>(p)); }

// A buffer for `d` from tessera's caching allocator (the tensor owns it): a workspace copy is
// tens of MB, and memory fresh from the system costs a page fault per 4 KB at every call.
memory cached_buffer(ts_call call, const memory::desc& d, TensorRef& owner) {
  const std::array<int64_t, 1> bytes{int64_t(std::max<size_t>(d.get_size(), 1))};
  owner = sdk::empty(call, bytes, TS_UINT8, kCpuDevice);
  return wrap(d, owner.data<uint8_t>());
}

// The scratchpad for `d`: one buffer per calling thread, zeroed when it grows. The primitives
// read lanes of their scratchpad (and workspace) that they never write: stale bytes there can be
// denormals, which made a forward a hundred times slower; memory fresh from the system would
// cost a page fault per 4 KB at every call instead. A scratchpad over kKeepBytes is not kept:
// it comes zeroed from calloc for the call.
struct Scratchpad {
  memory mem;
  std::unique_ptr<void, void (*)(void*)> owned{nullptr, std::free};
};

Scratchpad thread_scratchpad(const memory::desc& d) {
  constexpr size_t kKeepBytes = size_t(64) << 20;
  struct Buffer {
    void* data = nullptr;
    size_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffer;
  const size_t bytes = (std::max<size_t>(d.get_size(), 1) + 63) / 64 * 64;
  Scratchpad s;
  if (bytes > kKeepBytes) {
    s.owned.reset(std::calloc(bytes, 1));
    if (!s.owned) fail(TS_ERROR, "rnn: could not allocate a ", bytes, "-byte scratchpad");
    s.mem = wrap(d, s.owned.get());
    return s;
  }
  if (buffer.size < bytes) {
    std::free(buffer.data);
    buffer.data = std::aligned_alloc(64, bytes);
    buffer.size = buffer.data ? bytes : 0;
    if (!buffer.data) fail(TS_ERROR, "rnn: could not allocate a ", bytes, "-byte scratchpad");
    std::memset(buffer.data, 0, bytes);
  }
  s.mem = wrap(d, buffer.data);
  return s;
}

template <class F>
void guarded(const char* op, F&& f) {
  try {
    f();
  } catch (const dnnl::error& e) {
    fail(TS_ERROR, op, ": oneDNN RNN primitive failed: ", e.what(), " (status ", int(e.status), ")");
  }
}

TensorRef zeros(ts_call call, std::span<const int64_t> shape, int32_t dtype = TS_FLOAT32) {
  TensorRef t = sdk::empty(call, shape, dtype, kCpuDevice);
  if (t.numel() > 0) std::memset(t.data<char>(), 0, size_t(t.numel()) * t.itemsize());
  return t;
}

// GRU: PyTorch's gate blocks r, z, n are oneDNN's z, r, n: swapping the first two blocks of
// rows maps either way.
void swap_first_gates(float* dst, const float* src, int64_t H, int64_t cols) {
  const size_t block = size_t(H * cols);
  std::memcpy(dst, src + block, block * sizeof(float));
  std::memcpy(dst + block, src, block * sizeof(float));
  std::memcpy(dst + 2 * block, src + 2 * block, block * sizeof(float));
}

// Arguments checked and made dense float32.
struct Operands {
  Geometry g;
  TensorRef input, w_ih, w_hh, b_ih, b_hh, hx, cx;  // b_*, cx may be undefined
};

// The forward's seven tensors sit at 0..6 in both operators; mode and reverse where given. The
// shape rules are the SDK's (every device's kernel checks the same); dtype and device are ours.
Operands operands(Args& a, const char* op, int mode_at, int reverse_at) {
  Operands o;
  TensorRef input = a.tensor(0), w_ih = a.tensor(1), w_hh = a.tensor(2), hx = a.tensor(5);
  std::optional<TensorRef> b_ih = a.optional_tensor(3), b_hh = a.optional_tensor(4), cx = a.optional_tensor(6);
  std::vector<const TensorRef*> all{&input, &w_ih, &w_hh, &hx};
  for (auto* t : {&b_ih, &b_hh, &cx})
    if (*t) all.push_back(&**t);
  check_cpu(op, all);
  for (const TensorRef* t : all)
    if (t->dtype() != TS_FLOAT32)
      fail(TS_ERROR_TYPE, op, ": expected float32 tensors (other dtypes take the composite path), got ",
           sdk::dtype_name(t->dtype()));
  const sdk::RnnGeometry rg =
      sdk::rnn_geometry(op, input, w_ih, w_hh, b_ih, b_hh, hx, cx, a.to_int(mode_at), a.to_bool(reverse_at));
  const int64_t mode = rg.mode;
  o.g = Geometry{rg.mode, rg.T, rg.N, rg.I, rg.H, rg.reverse};
  o.input = dense(a.call(), input);
  o.w_ih = dense(a.call(), w_ih);
  o.w_hh = dense(a.call(), w_hh);
  o.hx = dense(a.call(), hx);
  if (b_ih) o.b_ih = dense(a.call(), *b_ih);
  if (b_hh) o.b_hh = dense(a.call(), *b_hh);
  if (mode == kLstm) o.cx = dense(a.call(), *cx);
  return o;
}

// The weights in oneDNN's gate order (a copy for GRU; the tensors themselves otherwise).
struct CellWeights {
  TensorRef w_ih, w_hh, bias;
};

CellWeights cell_weights(ts_call call, const Operands& o) {
  const Geometry& g = o.g;
  CellWeights w{o.w_ih, o.w_hh, TensorRef()};
  if (g.mode == kGru) {
    w.w_ih = sdk::empty(call, o.w_ih.sizes(), TS_FLOAT32, kCpuDevice);
    w.w_hh = sdk::empty(call, o.w_hh.sizes(), TS_FLOAT32, kCpuDevice);
    swap_first_gates(w.w_ih.data<float>(), o.w_ih.data<float>(), g.H, g.I);
    swap_first_gates(w.w_hh.data<float>(), o.w_hh.data<float>(), g.H, g.H);
  }
  const int64_t GH = gates_of(g.mode) * g.H, bias_len = bias_gates_of(g.mode) * g.H;
  w.bias = zeros(call, std::array<int64_t, 1>{bias_len});
  float* b = w.bias.data<float>();
  const float* bi = o.b_ih.defined() ? o.b_ih.data<float>() : nullptr;
  const float* bh = o.b_hh.defined() ? o.b_hh.data<float>() : nullptr;
  if (g.mode == kGru) {
    const int64_t H = g.H;
    // oneDNN: [z, r, n (input side), n (hidden side)]; PyTorch blocks: r 0, z 1, n 2.
    for (int64_t j = 0; j < H; ++j) {
      b[j] = (bi ? bi[H + j] : 0.f) + (bh ? bh[H + j] : 0.f);
      b[H + j] = (bi ? bi[j] : 0.f) + (bh ? bh[j] : 0.f);
      b[2 * H + j] = bi ? bi[2 * H + j] : 0.f;
      b[3 * H + j] = bh ? bh[2 * H + j] : 0.f;
    }
  } else {
    for (int64_t j = 0; j < GH; ++j) b[j] = (bi ? bi[j] : 0.f) + (bh ? bh[j] : 0.f);
  }
  return w;
}

// _rnn_layer(input, weight_ih, weight_hh, bias_ih?, bias_hh?, hx, cx?, mode, reverse, train)
//   -> (output [T, N, H], hy [N, H], cy [N, H] or [0], workspace (uint8, empty unless train))
void rnn_layer_kernel(Args& a) {
  const char* op = "_rnn_layer";
  Operands o = operands(a, op, 7, 8);
  const Geometry& g = o.g;
  const bool train = a.to_bool(9);
  const std::array<int64_t, 3> out_shape{g.T, g.N, g.H};
  const std::array<int64_t, 2> state_shape{g.N, g.H};
  const std::array<int64_t, 1> none{0};
  TensorRef output = sdk::empty(a.call(), out_shape, TS_FLOAT32, kCpuDevice);
  TensorRef hy = sdk::empty(a.call(), state_shape, TS_FLOAT32, kCpuDevice);
  TensorRef cy = g.mode == kLstm ? sdk::empty(a.call(), state_shape, TS_FLOAT32, kCpuDevice)
                                 : sdk::empty(a.call(), none, TS_FLOAT32, kCpuDevice);
  if (g.T == 0 || g.N == 0) {  // nothing to run: the state passes through
    if (hy.numel()) std::memcpy(hy.data<float>(), o.hx.data<float>(), size_t(hy.numel()) * sizeof(float));
    if (g.mode == kLstm && cy.numel())
      std::memcpy(cy.data<float>(), o.cx.data<float>(), size_t(cy.numel()) * sizeof(float));
    a.returns({Args::tensor_value(std::move(output)), Args::tensor_value(std::move(hy)),
               Args::tensor_value(std::move(cy)), Args::tensor_value(sdk::empty(a.call(), none, TS_UINT8, kCpuDevice))});
    return;
  }
  CellWeights w = cell_weights(a.call(), o);
  static Cache<Forward> cache;
  TensorRef workspace;
  guarded(op, [&] {
    auto f = cache.get(g.key(train ? 1 : 0), [&] { return make_forward(g, train); });
    const Descs d = descs(g);
    const std::array<int64_t, 1> ws_shape{int64_t(f->workspace.get_size())};
    workspace = sdk::empty(a.call(), train ? std::span<const int64_t>(ws_shape) : std::span<const int64_t>(none),
                           TS_UINT8, kCpuDevice);
    dnnl::stream s(onednn_engine());
    memory w_layer = wrap(d.weights_layer, w.w_ih.data<float>()), w_iter = wrap(d.weights_iter, w.w_hh.data<float>());
    memory w_layer_in = f->to_weights_layer ? memory(f->weights_layer, onednn_engine()) : w_layer;
    memory w_iter_in = f->to_weights_iter ? memory(f->weights_iter, onednn_engine()) : w_iter;
    if (f->to_weights_layer) f->to_weights_layer->run(s, w_layer, w_layer_in);
    if (f->to_weights_iter) f->to_weights_iter->run(s, w_iter, w_iter_in);
    Scratchpad scratch = thread_scratchpad(f->scratchpad);
    if (train) std::memset(workspace.data<uint8_t>(), 0, f->workspace.get_size());  // see thread_scratchpad
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC_LAYER, wrap(d.src_layer, o.input.data<float>())},
                                         {DNNL_ARG_SRC_ITER, wrap(d.src_iter, o.hx.data<float>())},
                                         {DNNL_ARG_WEIGHTS_LAYER, w_layer_in},
                                         {DNNL_ARG_WEIGHTS_ITER, w_iter_in},
                                         {DNNL_ARG_BIAS, wrap(d.bias, w.bias.data<float>())},
                                         {DNNL_ARG_DST_LAYER, wrap(d.dst_layer, output.data<float>())},
                                         {DNNL_ARG_DST_ITER, wrap(d.dst_iter, hy.data<float>())},
                                         {DNNL_ARG_SCRATCHPAD, scratch.mem}};
    if (g.mode == kLstm) {
      args.emplace(DNNL_ARG_SRC_ITER_C, wrap(d.src_iter_c, o.cx.data<float>()));
      args.emplace(DNNL_ARG_DST_ITER_C, wrap(d.dst_iter_c, cy.data<float>()));
    }
    if (train) args.emplace(DNNL_ARG_WORKSPACE, wrap(f->workspace, workspace.data<uint8_t>()));
    f->prim.execute(s, args);
    s.wait();
  });
  a.returns({Args::tensor_value(std::move(output)), Args::tensor_value(std::move(hy)), Args::tensor_value(std::move(cy)),
             Args::tensor_value(std::move(workspace))});
}

// A gradient argument as a dense float32 buffer of `shape`: zeros when it is None (that output
// was not used).
TensorRef grad_or_zeros(Args& a, int i, std::span<const int64_t> shape, const char* op, const char* what) {
  std::optional<TensorRef> g = a.optional_tensor(i);
  if (!g || !g->defined()) return zeros(a.call(), shape);
  if (g->dtype() != TS_FLOAT32) fail(TS_ERROR_TYPE, op, ": expected ", what, " of dtype float32, got ", sdk::dtype_name(g->dtype()));
  if (g->shape_vector() != std::vector<int64_t>(shape.begin(), shape.end()))
    fail(TS_ERROR_VALUE, op, ": expected ", what, " of shape ", str(std::vector<int64_t>(shape.begin(), shape.end())),
         ", got ", str(g->sizes()));
  return dense(a.call(), *g);
}

// _rnn_layer_backward(input, weight_ih, weight_hh, bias_ih?, bias_hh?, hx, cx?, output, hy, cy,
//   workspace, grad_output?, grad_hy?, grad_cy?, mode, reverse)
//   -> (grad_input, grad_weight_ih, grad_weight_hh, grad_bias_ih, grad_bias_hh, grad_hx, grad_cx)
void rnn_layer_backward_kernel(Args& a) {
  const char* op = "_rnn_layer_backward";
  Operands ops = operands(a, op, 14, 15);
  const Geometry& g = ops.g;
  const int64_t mode = g.mode, G = gates_of(mode), H = g.H;
  TensorRef input = ops.input, w_ih = ops.w_ih, w_hh = ops.w_hh;
  const std::array<int64_t, 3> out_shape{g.T, g.N, H};
  const std::array<int64_t, 2> state_shape{g.N, H};
  const std::array<int64_t, 1> none{0}, bias_shape{G * H};
  TensorRef output = dense(a.call(), a.tensor(7)), hy = dense(a.call(), a.tensor(8)), workspace = a.tensor(10);
  TensorRef cy = mode == kLstm ? dense(a.call(), a.tensor(9)) : TensorRef();
  TensorRef g_out = grad_or_zeros(a, 11, out_shape, op, "grad_output");
  TensorRef g_hy = grad_or_zeros(a, 12, state_shape, op, "grad_hy");
  TensorRef g_cy = mode == kLstm ? grad_or_zeros(a, 13, state_shape, op, "grad_cy") : TensorRef();

  TensorRef g_input = zeros(a.call(), input.sizes()), g_w_ih = zeros(a.call(), w_ih.sizes()),
            g_w_hh = zeros(a.call(), w_hh.sizes()), g_b_ih = zeros(a.call(), bias_shape),
            g_b_hh = zeros(a.call(), bias_shape), g_hx = zeros(a.call(), state_shape),
            g_cx = mode == kLstm ? zeros(a.call(), state_shape) : zeros(a.call(), none);
  auto finish = [&] {
    a.returns({Args::tensor_value(std::move(g_input)), Args::tensor_value(std::move(g_w_ih)),
               Args::tensor_value(std::move(g_w_hh)), Args::tensor_value(std::move(g_b_ih)),
               Args::tensor_value(std::move(g_b_hh)), Args::tensor_value(std::move(g_hx)),
               Args::tensor_value(std::move(g_cx))});
  };
  if (g.T == 0 || g.N == 0) {  // the state passed through
    if (g_hx.numel()) std::memcpy(g_hx.data<float>(), g_hy.data<float>(), size_t(g_hx.numel()) * sizeof(float));
    if (mode == kLstm && g_cx.numel())
      std::memcpy(g_cx.data<float>(), g_cy.data<float>(), size_t(g_cx.numel()) * sizeof(float));
    return finish();
  }
  CellWeights w = cell_weights(a.call(), ops);
  static Cache<Backward> cache;
  guarded(op, [&] {
    auto b = cache.get(g.key(2), [&] { return make_backward(g); });
    if (workspace.dtype() != TS_UINT8 || size_t(workspace.numel()) != b->workspace.get_size())
      fail(TS_ERROR_VALUE, op, ": the workspace holds ", workspace.numel(), " bytes; the primitive needs ",
           b->workspace.get_size(), " (was the forward run with train=True, at these sizes?)");
    const Descs d = descs(g);
    // The primitive writes into its workspace as it goes: a copy keeps the saved one intact for
    // a second backward (retain_graph) and for the caller.
    TensorRef ws_owner;
    memory ws = cached_buffer(a.call(), b->workspace, ws_owner);
    std::memcpy(ws.get_data_handle(), workspace.data<uint8_t>(), b->workspace.get_size());
    dnnl::stream s(onednn_engine());
    memory w_layer = wrap(d.weights_layer, w.w_ih.data<float>()), w_iter = wrap(d.weights_iter, w.w_hh.data<float>());
    memory w_layer_in = b->to_weights_layer ? memory(b->weights_layer, onednn_engine()) : w_layer;
    memory w_iter_in = b->to_weights_iter ? memory(b->weights_iter, onednn_engine()) : w_iter;
    if (b->to_weights_layer) b->to_weights_layer->run(s, w_layer, w_layer_in);
    if (b->to_weights_iter) b->to_weights_iter->run(s, w_iter, w_iter_in);
    // The diff weights in the primitive's layouts, zeroed: the primitive accumulates into them.
    TensorRef gw_ih_cell = mode == kGru ? zeros(a.call(), w_ih.sizes()) : g_w_ih;
    TensorRef gw_hh_cell = mode == kGru ? zeros(a.call(), w_hh.sizes()) : g_w_hh;
    memory dw_layer_user = wrap(d.weights_layer, gw_ih_cell.data<float>());
    memory dw_iter_user = wrap(d.weights_iter, gw_hh_cell.data<float>());
    memory dw_layer = b->from_diff_weights_layer ? memory(b->diff_weights_layer, onednn_engine()) : dw_layer_user;
    memory dw_iter = b->from_diff_weights_iter ? memory(b->diff_weights_iter, onednn_engine()) : dw_iter_user;
    if (b->from_diff_weights_layer) std::memset(dw_layer.get_data_handle(), 0, b->diff_weights_layer.get_size());
    if (b->from_diff_weights_iter) std::memset(dw_iter.get_data_handle(), 0, b->diff_weights_iter.get_size());
    TensorRef diff_bias = zeros(a.call(), std::array<int64_t, 1>{bias_gates_of(mode) * H});
    Scratchpad scratch = thread_scratchpad(b->scratchpad);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC_LAYER, wrap(d.src_layer, ops.input.data<float>())},
                                         {DNNL_ARG_SRC_ITER, wrap(d.src_iter, ops.hx.data<float>())},
                                         {DNNL_ARG_WEIGHTS_LAYER, w_layer_in},
                                         {DNNL_ARG_WEIGHTS_ITER, w_iter_in},
                                         {DNNL_ARG_BIAS, wrap(d.bias, w.bias.data<float>())},
                                         {DNNL_ARG_DST_LAYER, wrap(d.dst_layer, output.data<float>())},
                                         {DNNL_ARG_DST_ITER, wrap(d.dst_iter, hy.data<float>())},
                                         {DNNL_ARG_WORKSPACE, ws},
                                         {DNNL_ARG_DIFF_SRC_LAYER, wrap(d.src_layer, g_input.data<float>())},
                                         {DNNL_ARG_DIFF_SRC_ITER, wrap(d.src_iter, g_hx.data<float>())},
                                         {DNNL_ARG_DIFF_WEIGHTS_LAYER, dw_layer},
                                         {DNNL_ARG_DIFF_WEIGHTS_ITER, dw_iter},
                                         {DNNL_ARG_DIFF_BIAS, wrap(d.bias, diff_bias.data<float>())},
                                         {DNNL_ARG_DIFF_DST_LAYER, wrap(d.dst_layer, g_out.data<float>())},
                                         {DNNL_ARG_DIFF_DST_ITER, wrap(d.dst_iter, g_hy.data<float>())},
                                         {DNNL_ARG_SCRATCHPAD, scratch.mem}};
    if (mode == kLstm) {
      args.emplace(DNNL_ARG_SRC_ITER_C, wrap(d.src_iter_c, ops.cx.data<float>()));
      args.emplace(DNNL_ARG_DST_ITER_C, wrap(d.dst_iter_c, cy.data<float>()));
      args.emplace(DNNL_ARG_DIFF_SRC_ITER_C, wrap(d.src_iter_c, g_cx.data<float>()));
      args.emplace(DNNL_ARG_DIFF_DST_ITER_C, wrap(d.dst_iter_c, g_cy.data<float>()));
    }
    b->prim.execute(s, args);
    if (b->from_diff_weights_layer) b->from_diff_weights_layer->run(s, dw_layer, dw_layer_user);
    if (b->from_diff_weights_iter) b->from_diff_weights_iter->run(s, dw_iter, dw_iter_user);
    s.wait();
    if (mode == kGru) {
      swap_first_gates(g_w_ih.data<float>(), gw_ih_cell.data<float>(), H, g.I);
      swap_first_gates(g_w_hh.data<float>(), gw_hh_cell.data<float>(), H, H);
    }
    // The bias gradient: both biases of a gate get the gate's (GRU's n gate has one each).
    const float* db = diff_bias.data<float>();
    float *gbi = g_b_ih.data<float>(), *gbh = g_b_hh.data<float>();
    if (mode == kGru) {
      for (int64_t j = 0; j < H; ++j) {
        gbi[j] = gbh[j] = db[H + j];       // r
        gbi[H + j] = gbh[H + j] = db[j];   // z
        gbi[2 * H + j] = db[2 * H + j];    // n, input side
        gbh[2 * H + j] = db[3 * H + j];    // n, hidden side
      }
    } else {
      std::memcpy(gbi, db, size_t(G * H) * sizeof(float));
      std::memcpy(gbh, db, size_t(G * H) * sizeof(float));
    }
  });
  finish();
}

}  // namespace

void register_rnn_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("_rnn_layer", key, rnn_layer_kernel);
  reg.kernel("_rnn_layer_backward", key, rnn_layer_backward_kernel);
}

}  // namespace tessera::cpu
