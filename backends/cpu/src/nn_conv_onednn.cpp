// float32 convolution through oneDNN: forward, backward-data and backward-weights primitives on
// the layouts oneDNN chooses, reordered from and to our plain NCHW / (G)OIHW buffers. Creating a
// primitive costs far more than running a small one, so primitives are cached by geometry: a
// training loop creates each once.
#include "nn_conv.h"
#include "onednn_support.h"

#include "tensor_iterator.h"

#include <dnnl.hpp>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessera::cpu {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;


struct Descs {
  memory::desc src, weights, bias, dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

// 1-D convolutions run as 2-D ones of height 1, 3-D ones on 5-D descriptors (NCDHW, no channels-last).
Descs descs(const ConvGeometry& g, ConvLayout layout = {}) {
  Descs d;
  if (g.spatial == 3) {
    d.src = memory::desc({g.n, g.c_in, g.d, g.h, g.w}, dt::f32, tag::ncdhw);
    d.dst = memory::desc({g.n, g.c_out, g.od, g.oh, g.ow}, dt::f32, tag::ncdhw);
    d.weights = g.groups == 1
                    ? memory::desc({g.c_out, g.c_in, g.kd, g.kh, g.kw}, dt::f32, tag::oidhw)
                    : memory::desc({g.groups, g.cg_out(), g.cg_in(), g.kd, g.kh, g.kw}, dt::f32, tag::goidhw);
    d.strides = {g.sd, g.sh, g.sw};
    d.dilates = {g.dd - 1, g.dh - 1, g.dw - 1};  // oneDNN counts the gaps, not the step
    d.pad_l = {g.pd, g.ph, g.pw};
  } else {
    const tag activations = layout.activations == ActivationLayout::Nhwc ? tag::nhwc : tag::nchw;
    d.src = memory::desc({g.n, g.c_in, g.h, g.w}, dt::f32, activations);
    d.dst = memory::desc({g.n, g.c_out, g.oh, g.ow}, dt::f32, activations);
    const tag weights = layout.weights == WeightLayout::Ohwi ? tag::ohwi : tag::oihw;  // Ohwi: groups == 1
    d.weights = g.groups == 1 ? memory::desc({g.c_out, g.c_in, g.kh, g.kw}, dt::f32, weights)
                              : memory::desc({g.groups, g.cg_out(), g.cg_in(), g.kh, g.kw}, dt::f32, tag::goihw);
    d.strides = {g.sh, g.sw};
    d.dilates = {g.dh - 1, g.dw - 1};
    d.pad_l = {g.ph, g.pw};
  }
  d.bias = memory::desc({g.c_out}, dt::f32, tag::x);
  d.pad_r = d.pad_l;  // symmetric: oneDNN's output size then matches PyTorch's floor formula
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
  return {desc, user_scratchpad_attributes(), onednn_engine()};
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

struct Forward {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  std::optional<Reorder> to_src, to_weights, from_dst;  // empty: the primitive takes the plain layout
};
// The backward primitives run on the layouts oneDNN prefers (blocked, as the forward: on a 3x3
// 64->64 layer about 1.5x faster than on plain NCHW even with the reorders), each with the
// reorders between those layouts and our plain buffers (empty: the primitive takes the plain one).
struct DataPass {  // grad_x from grad_y and the weights
  dnnl::convolution_backward_data::primitive_desc pd;
  dnnl::convolution_backward_data prim;
  std::optional<Reorder> to_grad_y, to_weights, from_grad_x;
};
struct WeightsPass {  // grad_w and grad_bias from grad_y and x
  dnnl::convolution_backward_weights::primitive_desc pd;
  dnnl::convolution_backward_weights prim;
  std::optional<Reorder> to_grad_y, to_src, from_grad_w;
  bool one_gemm;  // weight_grad_one_gemm instead of the primitive (see there)
};
struct Backward {
  DataPass data;
  WeightsPass weights;
  bool grad_y_shared;  // both passes read grad_y in one layout, so it is reordered once
};

// spatial: a 3-D convolution with size-1 depths runs on 5-D descriptors, a 2-D one on 4-D ones.
using Key = std::array<int64_t, 24>;
Key key_of(const ConvGeometry& g, int64_t kind) {
  return {kind, g.spatial, g.n,  g.c_in, g.d,  g.h,  g.w,  g.c_out, g.kd,     g.kh, g.kw, g.sd,
          g.sh, g.sw,      g.pd, g.ph,   g.pw, g.dd, g.dh, g.dw,    g.groups, g.od, g.oh, g.ow};
}

// Keeps the entries of each layout apart in the caches' kind slot.
int64_t layout_key(ConvLayout layout) {
  return (layout.activations == ActivationLayout::Nhwc ? 10 : 0) + (layout.weights == WeightLayout::Ohwi ? 20 : 0);
}

template <class Entry>
using Cache = PrimitiveCache<Key, Entry>;

memory wrap(const memory::desc& d, const float* p) { return memory(d, onednn_engine(), const_cast<float*>(p)); }

memory::desc any_layout(const memory::desc& m) { return memory::desc(m.dims(), dt::f32, tag::any); }

DataPass make_data_pass(const ConvGeometry& g, ConvLayout layout = {}) {
  const Descs d = descs(g, layout);
  auto hint = forward_pd(g, false, dnnl::prop_kind::forward_training, /*any_layout=*/true);
  dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, any_layout(d.src),
                                             any_layout(d.weights), any_layout(d.dst), d.strides, d.dilates,
                                             d.pad_l, d.pad_r);
  dnnl::convolution_backward_data::primitive_desc pd(desc, user_scratchpad_attributes(), onednn_engine(), hint);
  return DataPass{pd, dnnl::convolution_backward_data(pd), Reorder::between(d.dst, pd.diff_dst_desc()),
                  Reorder::between(d.weights, pd.weights_desc()), Reorder::between(pd.diff_src_desc(), d.src)};
}

// oneDNN's GEMM-based weight gradient (its choice where the output planes are small: ResNet-18's
// last stage on CIFAR images runs 3x3 512->512 convolutions on 1x1 planes) multiplies per sample,
// reading and writing the whole weight gradient each time: a matrix-vector product per sample,
// 30 ms for that layer at batch 32. With the batch's columns side by side it is one GEMM per
// group, grad_w[g] (cgo x K) = gy[g] (cgo x N*P) @ cols[g]^T (N*P x K): 2 ms. Used without groups
// only: the groups' GEMMs run one after the other, and oneDNN has direct kernels for depthwise.
constexpr int64_t kMaxOneGemmCols = int64_t(1) << 24;  // 64 MB of unfolded input
int64_t one_gemm_cols(const ConvGeometry& g) { return g.groups * g.patch() * g.n * g.out_plane(); }

// [n][rows][cols] -> [n][cols][rows]: NHWC activations to NCHW (rows = H*W, cols = C), or OHWI
// weights from OIHW (n = O, rows = I, cols = kh*kw).
std::vector<float> transposed(const float* from, int64_t n, int64_t rows, int64_t cols) {
  std::vector<float> to(size_t(n * rows * cols));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) to[size_t((b * cols + c) * rows + r)] = from[(b * rows + r) * cols + c];
  return to;
}

void weight_grad_one_gemm(const char* op, const ConvGeometry& g, ConvLayout layout, const float* grad_y,
                          const float* x, float* grad_w, float* grad_bias) {
  const int64_t P = g.out_plane(), NP = g.n * P, K = g.patch(), cgo = g.cg_out();
  const int64_t plane_in = g.cg_in() * g.in_plane();
  // Used where the planes are small, so bringing NHWC operands to NCHW costs little.
  std::vector<float> grad_y_nchw, x_nchw, grad_w_oihw;
  if (layout.activations == ActivationLayout::Nhwc) {
    grad_y_nchw = transposed(grad_y, g.n, P, g.c_out);
    x_nchw = transposed(x, g.n, g.h * g.w, g.c_in);
    grad_y = grad_y_nchw.data();
    x = x_nchw.data();
  }
  float* const grad_w_out = grad_w;
  if (layout.weights == WeightLayout::Ohwi) {
    grad_w_oihw.resize(size_t(g.c_out * K));
    grad_w = grad_w_oihw.data();
  }
  std::vector<float> cols(size_t(g.groups * K * NP)), gy_rows(size_t(g.c_out * NP));
  // cols[gi][k][n * P + p]: every sample's unfolded input, side by side
  parallel_for(g.n * g.groups, 1, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      const int64_t n = t / g.groups, gi = t % g.groups;
      im2col_float(g, x + (n * g.groups + gi) * plane_in, cols.data() + gi * K * NP + n * P, NP);
    }
  });
  // gy_rows[oc][n * P + p] = grad_y[n][oc][p]; grad_bias is each row's sum
  parallel_for(g.c_out, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t oc = cb; oc < ce; ++oc) {
      float* row = gy_rows.data() + oc * NP;
      for (int64_t n = 0; n < g.n; ++n) std::copy_n(grad_y + (n * g.c_out + oc) * P, P, row + n * P);
      float sum = 0;
      for (int64_t i = 0; i < NP; ++i) sum += row[i];
      grad_bias[oc] = sum;
    }
  });
  for (int64_t gi = 0; gi < g.groups; ++gi) {
    const dnnl_status_t status = dnnl_sgemm('N', 'T', cgo, K, NP, 1.0f, gy_rows.data() + gi * cgo * NP, NP,
                                            cols.data() + gi * K * NP, NP, 0.0f, grad_w + gi * cgo * K, K);
    if (status != dnnl_success)
      sdk::fail(TS_ERROR, op, ": oneDNN sgemm failed with status ", int(status), " (convolution weight gradient)");
  }
  if (layout.weights == WeightLayout::Ohwi) {
    const std::vector<float> ohwi = transposed(grad_w, g.c_out, g.c_in, g.kh * g.kw);
    std::copy(ohwi.begin(), ohwi.end(), grad_w_out);
  }
}

WeightsPass make_weights_pass(const ConvGeometry& g, ConvLayout layout) {
  const Descs d = descs(g, layout);
  auto hint = forward_pd(g, true, dnnl::prop_kind::forward_training, /*any_layout=*/true);
  dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, any_layout(d.src),
                                                any_layout(d.weights), d.bias, any_layout(d.dst), d.strides,
                                                d.dilates, d.pad_l, d.pad_r);
  dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad_attributes(), onednn_engine(), hint);
  // Not for 3-D: there oneDNN's own GEMM pass is the faster (2x32x8x28x28, 3x3x3 to 64: 18 ms
  // against 40 ms for the batch-wide GEMM, whose unfolded columns are 27x the input).
  const bool one_gemm = g.spatial != 3 && g.groups == 1 && one_gemm_cols(g) <= kMaxOneGemmCols &&
                        std::string_view(pd.impl_info_str()).find("gemm") != std::string_view::npos;
  return WeightsPass{pd,
                     dnnl::convolution_backward_weights(pd),
                     Reorder::between(d.dst, pd.diff_dst_desc()),
                     Reorder::between(d.src, pd.src_desc()),
                     Reorder::between(pd.diff_weights_desc(), d.weights),
                     one_gemm};
}


// `plain` itself, or a new buffer in `layout` filled from it by `to`.
memory reordered_in(dnnl::stream& s, const std::optional<Reorder>& to, const memory::desc& layout, memory plain) {
  if (!to) return plain;
  memory blocked(layout, onednn_engine());
  to->run(s, plain, blocked);
  return blocked;
}

// Where a primitive writes an output: `plain` itself, or a new buffer in `layout` that the caller
// reorders into `plain` afterwards.
memory output_buffer(const std::optional<Reorder>& from, const memory::desc& layout, memory plain) {
  return from ? memory(layout, onednn_engine()) : plain;
}

// grad_x from grad_y (already in the pass's layout) and the plain weights.
void run_data_pass(dnnl::stream& s, const DataPass& p, const Descs& d, memory grad_y, const float* w, float* grad_x) {
  memory weights = reordered_in(s, p.to_weights, p.pd.weights_desc(), wrap(d.weights, w));
  memory grad_x_plain = wrap(d.src, grad_x);
  memory grad_x_out = output_buffer(p.from_grad_x, p.pd.diff_src_desc(), grad_x_plain);
  memory scratch(p.pd.scratchpad_desc(), onednn_engine());
  p.prim.execute(s, {{DNNL_ARG_DIFF_DST, grad_y},
                     {DNNL_ARG_WEIGHTS, weights},
                     {DNNL_ARG_DIFF_SRC, grad_x_out},
                     {DNNL_ARG_SCRATCHPAD, scratch}});
  if (p.from_grad_x) p.from_grad_x->run(s, grad_x_out, grad_x_plain);
}

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

bool onednn_conv_forward(const char* op, const ConvGeometry& g, ConvLayout layout, const float* x, const float* w,
                         const float* bias, float* y) {
  static Cache<Forward> cache;
  return guarded(op, [&] {
    auto f = cache.get(key_of(g, (bias ? 1 : 0) + layout_key(layout)), [&] {
      const Descs d = descs(g, layout);
      auto pd = forward_pd(g, bias != nullptr, dnnl::prop_kind::forward_training, /*any_layout=*/true);
      return Forward{pd, dnnl::convolution_forward(pd), Reorder::between(d.src, pd.src_desc()),
                     Reorder::between(d.weights, pd.weights_desc()), Reorder::between(pd.dst_desc(), d.dst)};
    });
    const Descs d = descs(g, layout);
    dnnl::stream s(onednn_engine());
    memory src_in = reordered_in(s, f->to_src, f->pd.src_desc(), wrap(d.src, x));
    memory weights_in = reordered_in(s, f->to_weights, f->pd.weights_desc(), wrap(d.weights, w));
    memory dst = wrap(d.dst, y);
    memory dst_out = output_buffer(f->from_dst, f->pd.dst_desc(), dst);
    memory scratch(f->pd.scratchpad_desc(), onednn_engine());
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

bool onednn_conv_backward(const char* op, const ConvGeometry& g, ConvLayout layout, const float* grad_y,
                          const float* x, const float* w, float* grad_x, float* grad_w, float* grad_bias) {
  static Cache<Backward> cache;
  return guarded(op, [&] {
    auto b = cache.get(key_of(g, 2 + layout_key(layout)), [&] {
      DataPass data = make_data_pass(g, layout);
      WeightsPass weights = make_weights_pass(g, layout);
      const bool shared = data.pd.diff_dst_desc() == weights.pd.diff_dst_desc();
      return Backward{std::move(data), std::move(weights), shared};
    });
    const Descs d = descs(g, layout);
    dnnl::stream s(onednn_engine());
    memory grad_y_plain = wrap(d.dst, grad_y);
    memory grad_y_data = reordered_in(s, b->data.to_grad_y, b->data.pd.diff_dst_desc(), grad_y_plain);
    run_data_pass(s, b->data, d, grad_y_data, w, grad_x);

    const WeightsPass& p = b->weights;
    if (p.one_gemm) {
      weight_grad_one_gemm(op, g, layout, grad_y, x, grad_w, grad_bias);
      s.wait();
      return;
    }
    memory grad_y_weights =
        b->grad_y_shared ? grad_y_data : reordered_in(s, p.to_grad_y, p.pd.diff_dst_desc(), grad_y_plain);
    memory src = reordered_in(s, p.to_src, p.pd.src_desc(), wrap(d.src, x));
    memory grad_w_plain = wrap(d.weights, grad_w);
    memory grad_w_out = output_buffer(p.from_grad_w, p.pd.diff_weights_desc(), grad_w_plain);
    memory scratch(p.pd.scratchpad_desc(), onednn_engine());
    p.prim.execute(s, {{DNNL_ARG_DIFF_DST, grad_y_weights},
                       {DNNL_ARG_SRC, src},
                       {DNNL_ARG_DIFF_WEIGHTS, grad_w_out},
                       {DNNL_ARG_DIFF_BIAS, wrap(d.bias, grad_bias)},
                       {DNNL_ARG_SCRATCHPAD, scratch}});
    if (p.from_grad_w) p.from_grad_w->run(s, grad_w_out, grad_w_plain);
    s.wait();
  });
}

bool onednn_conv_backward_data(const char* op, const ConvGeometry& g, const float* grad_y, const float* w,
                               float* grad_x) {
  static Cache<DataPass> cache;
  return guarded(op, [&] {
    auto p = cache.get(key_of(g, 3), [&] { return make_data_pass(g); });
    const Descs d = descs(g);
    dnnl::stream s(onednn_engine());
    memory grad_y_in = reordered_in(s, p->to_grad_y, p->pd.diff_dst_desc(), wrap(d.dst, grad_y));
    run_data_pass(s, *p, d, grad_y_in, w, grad_x);
    s.wait();
  });
}

}  // namespace tessera::cpu
