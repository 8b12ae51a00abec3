// float32 convolution through oneDNN: forward, backward-data and backward-weights primitives
// on plain NCHW / (G)OIHW buffers. Creating a primitive costs far more than running a small
// one, so primitives are cached by geometry: a training loop creates each once.
#include "nn_conv.h"

#include <dnnl.hpp>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace tessera::cpu {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Primitives run concurrently from several threads, so each call brings its own scratchpad.
dnnl::primitive_attr attributes() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

struct Descs {
  memory::desc src, weights, bias, dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

Descs descs(const ConvGeometry& g) {
  Descs d;
  d.src = memory::desc({g.n, g.c_in, g.h, g.w}, dt::f32, tag::nchw);
  d.dst = memory::desc({g.n, g.c_out, g.oh, g.ow}, dt::f32, tag::nchw);
  d.weights = g.groups == 1 ? memory::desc({g.c_out, g.c_in, g.kh, g.kw}, dt::f32, tag::oihw)
                            : memory::desc({g.groups, g.cg_out(), g.cg_in(), g.kh, g.kw}, dt::f32, tag::goihw);
  d.bias = memory::desc({g.c_out}, dt::f32, tag::x);
  d.strides = {g.sh, g.sw};
  d.dilates = {g.dh - 1, g.dw - 1};  // oneDNN counts the gaps, not the step
  d.pad_l = {g.ph, g.pw};
  d.pad_r = {g.ph, g.pw};  // symmetric: oneDNN's output size then matches PyTorch's floor formula
  return d;
}

// any_layout: oneDNN chooses the layouts of src, weights and dst, which lets it pick its direct
// convolution on blocked layouts (on a 3x3 64->64 layer about twice as fast as the GEMM-based one
// it must use on plain NCHW); the caller then reorders in and out.
dnnl::convolution_forward::primitive_desc forward_pd(const ConvGeometry& g, bool with_bias, dnnl::prop_kind kind,
                                                     bool any_layout = false) {
  Descs d = descs(g);
  if (any_layout) {
    d.src = memory::desc(d.src.dims(), dt::f32, tag::any);
    d.weights = memory::desc(d.weights.dims(), dt::f32, tag::any);
    d.dst = memory::desc(d.dst.dims(), dt::f32, tag::any);
  }
  auto desc = with_bias ? dnnl::convolution_forward::desc(kind, dnnl::algorithm::convolution_direct, d.src, d.weights,
                                                          d.bias, d.dst, d.strides, d.dilates, d.pad_l, d.pad_r)
                        : dnnl::convolution_forward::desc(kind, dnnl::algorithm::convolution_direct, d.src, d.weights,
                                                          d.dst, d.strides, d.dilates, d.pad_l, d.pad_r);
  return {desc, attributes(), engine()};
}

// A reorder between one of our plain buffers and the layout a primitive chose.
struct Reorder {
  dnnl::reorder::primitive_desc pd;
  dnnl::reorder prim;
  static std::optional<Reorder> between(const memory::desc& from, const memory::desc& to) {
    if (from == to) return std::nullopt;
    dnnl::reorder::primitive_desc pd(engine(), from, engine(), to, attributes());
    return Reorder{pd, dnnl::reorder(pd)};
  }
  void run(dnnl::stream& s, memory& from, memory& to) const {
    memory scratch(pd.scratchpad_desc(), engine());
    prim.execute(s, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratch}});
  }
};

struct Forward {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  std::optional<Reorder> to_src, to_weights, from_dst;  // empty: the primitive takes the plain layout
};
struct Backward {
  dnnl::convolution_backward_data::primitive_desc data_pd;
  dnnl::convolution_backward_data data;
  dnnl::convolution_backward_weights::primitive_desc weights_pd;
  dnnl::convolution_backward_weights weights;
};

using Key = std::array<int64_t, 17>;
Key key_of(const ConvGeometry& g, int64_t kind) {
  return {kind, g.n, g.c_in, g.h, g.w, g.c_out, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.groups, g.oh, g.ow};
}

// A bounded cache: cleared when full (shapes of one model are few; a shape sweep must not grow
// it without bound).
template <class Entry>
class Cache {
 public:
  template <class Make>
  std::shared_ptr<const Entry> get(const Key& key, Make&& make) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    }
    auto entry = std::make_shared<const Entry>(make());  // outside the lock: creation is slow
    std::lock_guard lock(mutex_);
    if (entries_.size() >= kMaxEntries) entries_.clear();
    return entries_.emplace(key, entry).first->second;
  }

 private:
  static constexpr size_t kMaxEntries = 256;
  std::mutex mutex_;
  std::map<Key, std::shared_ptr<const Entry>> entries_;
};

memory wrap(const memory::desc& d, const float* p) { return memory(d, engine(), const_cast<float*>(p)); }

// Runs f; a geometry oneDNN has no implementation for returns false (the caller falls back to
// the generic path), any other oneDNN failure raises.
template <class F>
bool guarded(const char* op, F&& f) {
  try {
    f();
    return true;
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_unimplemented) return false;
    sdk::fail(TS_ERROR, op, ": oneDNN convolution failed: ", e.what(), " (status ", int(e.status), ")");
  }
}

}  // namespace

bool onednn_conv_forward(const char* op, const ConvGeometry& g, const float* x, const float* w, const float* bias,
                         float* y) {
  static Cache<Forward> cache;
  return guarded(op, [&] {
    auto f = cache.get(key_of(g, bias ? 1 : 0), [&] {
      const Descs d = descs(g);
      auto pd = forward_pd(g, bias != nullptr, dnnl::prop_kind::forward_training, /*any_layout=*/true);
      return Forward{pd, dnnl::convolution_forward(pd), Reorder::between(d.src, pd.src_desc()),
                     Reorder::between(d.weights, pd.weights_desc()), Reorder::between(pd.dst_desc(), d.dst)};
    });
    const Descs d = descs(g);
    dnnl::stream s(engine());
    memory src = wrap(d.src, x), weights = wrap(d.weights, w), dst = wrap(d.dst, y);
    // Our buffers in the primitive's layouts where it chose others.
    memory src_in = f->to_src ? memory(f->pd.src_desc(), engine()) : src;
    memory weights_in = f->to_weights ? memory(f->pd.weights_desc(), engine()) : weights;
    memory dst_out = f->from_dst ? memory(f->pd.dst_desc(), engine()) : dst;
    if (f->to_src) f->to_src->run(s, src, src_in);
    if (f->to_weights) f->to_weights->run(s, weights, weights_in);
    memory scratch(f->pd.scratchpad_desc(), engine());
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src_in},
                                         {DNNL_ARG_WEIGHTS, weights_in},
                                         {DNNL_ARG_DST, dst_out},
                                         {DNNL_ARG_SCRATCHPAD, scratch}};
    if (bias) args.emplace(DNNL_ARG_BIAS, wrap(d.bias, bias));
    f->prim.execute(s, args);
    if (f->from_dst) f->from_dst->run(s, dst_out, dst);
    s.wait();
  });
}

bool onednn_conv_backward(const char* op, const ConvGeometry& g, const float* grad_y, const float* x, const float* w,
                          float* grad_x, float* grad_w, float* grad_bias) {
  static Cache<Backward> cache;
  return guarded(op, [&] {
    auto b = cache.get(key_of(g, 2), [&] {
      const Descs d = descs(g);
      auto hint = forward_pd(g, true, dnnl::prop_kind::forward_training);
      dnnl::convolution_backward_data::desc data_desc(dnnl::algorithm::convolution_direct, d.src, d.weights, d.dst,
                                                      d.strides, d.dilates, d.pad_l, d.pad_r);
      dnnl::convolution_backward_data::primitive_desc data_pd(data_desc, attributes(), engine(), hint);
      dnnl::convolution_backward_weights::desc weights_desc(dnnl::algorithm::convolution_direct, d.src, d.weights,
                                                            d.bias, d.dst, d.strides, d.dilates, d.pad_l, d.pad_r);
      dnnl::convolution_backward_weights::primitive_desc weights_pd(weights_desc, attributes(), engine(), hint);
      return Backward{data_pd, dnnl::convolution_backward_data(data_pd), weights_pd,
                      dnnl::convolution_backward_weights(weights_pd)};
    });
    const Descs d = descs(g);
    dnnl::stream s(engine());
    {
      memory scratch(b->data_pd.scratchpad_desc(), engine());
      b->data.execute(s, {{DNNL_ARG_DIFF_DST, wrap(d.dst, grad_y)},
                          {DNNL_ARG_WEIGHTS, wrap(d.weights, w)},
                          {DNNL_ARG_DIFF_SRC, wrap(d.src, grad_x)},
                          {DNNL_ARG_SCRATCHPAD, scratch}});
    }
    {
      memory scratch(b->weights_pd.scratchpad_desc(), engine());
      b->weights.execute(s, {{DNNL_ARG_DIFF_DST, wrap(d.dst, grad_y)},
                             {DNNL_ARG_SRC, wrap(d.src, x)},
                             {DNNL_ARG_DIFF_WEIGHTS, wrap(d.weights, grad_w)},
                             {DNNL_ARG_DIFF_BIAS, wrap(d.bias, grad_bias)},
                             {DNNL_ARG_SCRATCHPAD, scratch}});
    }
    s.wait();
  });
}

bool onednn_conv_backward_data(const char* op, const ConvGeometry& g, const float* grad_y, const float* w,
                               float* grad_x) {
  struct Data {
    dnnl::convolution_backward_data::primitive_desc pd;
    dnnl::convolution_backward_data prim;
  };
  static Cache<Data> cache;
  return guarded(op, [&] {
    auto b = cache.get(key_of(g, 3), [&] {
      const Descs d = descs(g);
      auto hint = forward_pd(g, false, dnnl::prop_kind::forward_training);
      dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, d.src, d.weights, d.dst,
                                                 d.strides, d.dilates, d.pad_l, d.pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(desc, attributes(), engine(), hint);
      return Data{pd, dnnl::convolution_backward_data(pd)};
    });
    const Descs d = descs(g);
    dnnl::stream s(engine());
    memory scratch(b->pd.scratchpad_desc(), engine());
    b->prim.execute(s, {{DNNL_ARG_DIFF_DST, wrap(d.dst, grad_y)},
                        {DNNL_ARG_WEIGHTS, wrap(d.weights, w)},
                        {DNNL_ARG_DIFF_SRC, wrap(d.src, grad_x)},
                        {DNNL_ARG_SCRATCHPAD, scratch}});
    s.wait();
  });
}

}  // namespace tessera::cpu
