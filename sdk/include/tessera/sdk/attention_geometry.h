#pragma once
// The shape rules of the fused attention operator (_scaled_dot_product_flash_attention_for_cpu
// and its backward), shared by every device's kernel so that they accept the same arguments and
// refuse bad ones with the same messages. Dtype rules stay with each kernel (the CPU's takes
// float32, a GPU's also the 16-bit floats).
#include <tessera/sdk/plugin.h>

#include <cmath>
#include <optional>

namespace tessera::sdk {

// query [B, H, L, E], key [B, H, S, E], value [B, H, S, Ev]; scale defaults to 1 / sqrt(E).
struct AttentionShape {
  int64_t B = 0, H = 0, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1.0;
};

inline AttentionShape attention_shape(const char* op, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                      double dropout_p, std::optional<double> scale) {
  const char* names[] = {"query", "key", "value"};
  const TensorRef* ts[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i)
    TS_SDK_CHECK(ts[i]->dim() == 4, TS_ERROR_VALUE, op, ": expected a 4-D ", names[i],
                 " [batch, heads, positions, features], got ", ts[i]->dim(), "-D");
  TS_SDK_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) && v.size(1) == q.size(1),
               TS_ERROR_VALUE, op, ": expected query, key and value with the same batch and heads, got ",
               shape_text(q.sizes()), ", ", shape_text(k.sizes()), " and ", shape_text(v.sizes()));
  TS_SDK_CHECK(k.size(3) == q.size(3), TS_ERROR_VALUE, op, ": query's embedding size ", q.size(3),
               " does not match key's ", k.size(3));
  TS_SDK_CHECK(v.size(2) == k.size(2), TS_ERROR_VALUE, op, ": key has ", k.size(2), " positions but value has ",
               v.size(2));
  TS_SDK_CHECK(dropout_p == 0.0, TS_ERROR_VALUE, op, ": expected dropout_p=0, got ", dropout_p,
               " (scaled_dot_product_attention computes dropout without this kernel)");
  AttentionShape s{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3), 1.0};
  s.scale = scale ? *scale : (s.E > 0 ? 1.0 / std::sqrt(double(s.E)) : 1.0);
  return s;
}

// The element strides of an attn_mask read as [B, H, L, S]: at most 4-D, each dim of the
// target's size or 1 (its missing and size-1 dims read with stride 0).
struct AttentionMaskStrides {
  int64_t sb = 0, sh = 0, sr = 0, sc = 0;
};

inline AttentionMaskStrides attention_mask_strides(const char* op, const TensorRef& mask, const AttentionShape& s) {
  const int64_t target[4] = {s.B, s.H, s.L, s.S};
  const int64_t lead = 4 - mask.dim();
  bool ok = lead >= 0;
  for (int64_t d = 0; ok && d < mask.dim(); ++d) ok = mask.size(d) == 1 || mask.size(d) == target[lead + d];
  TS_SDK_CHECK(ok, TS_ERROR_VALUE, op, ": expected an attn_mask broadcastable to [", s.B, ", ", s.H, ", ", s.L, ", ",
               s.S, "] (batch, heads, queries, keys), got shape ", shape_text(mask.sizes()));
  int64_t strides[4] = {0, 0, 0, 0};
  for (int64_t d = 0; d < mask.dim(); ++d) strides[lead + d] = mask.size(d) == 1 ? 0 : mask.stride(d);
  return {strides[0], strides[1], strides[2], strides[3]};
}

}  // namespace tessera::sdk
