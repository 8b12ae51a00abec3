// The fused attention operators on the GPU: _scaled_dot_product_flash_attention_for_cpu and its
// backward (one operator, a kernel per device plugin: the CPU's in backends/cpu/src/nn_attention.cpp,
// with the same schema, checks, output layout and semantics). Inputs float32, float16 or bfloat16
// read in place through their strides, computed in float32 (attention.cu); head sizes up to
// kAttentionMaxHeadDim. The output and the gradients are [B, H, ., .] laid out [B, ., H, .], as
// PyTorch's kernels: attention's next step, transpose(1, 2).view(B, L, H * Ev), is then free.
#include "cuda_plugin.h"
#include "nn_launch.h"

#include <tessera/sdk/attention_geometry.h>

#include <optional>
#include <tuple>

namespace tessera::gpu {
namespace {

HeadTensor head_tensor(const TensorRef& t) {
  return {first_element(t), t.dtype(), t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

// A [B, H, rows, cols] tensor of `dtype` laid out [B, rows, H, cols].
TensorRef empty_heads_inner(ts_call call, int64_t b, int64_t h, int64_t rows, int64_t cols, int32_t dtype,
                            ts_device device) {
  const int64_t dense_shape[4] = {b, rows, h, cols};
  TensorRef base = empty_on(call, dense_shape, dtype, device);
  const int64_t shape[4] = {b, h, rows, cols};
  const int64_t strides[4] = {rows * h * cols, cols, h * cols, 1};
  return restride(call, base, shape, strides, 0);
}

bool is_attention_dtype(int32_t dtype) { return dtype == TS_FLOAT32 || dtype == TS_FLOAT16 || dtype == TS_BFLOAT16; }

// The dtype rules of this kernel, the shared shape rules (tessera/sdk/attention_geometry.h), then
// the arguments every kernel shares.
AttentionArgs problem_of(const char* op, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                         double dropout_p, bool causal, const std::optional<TensorRef>& attn_mask,
                         std::optional<double> scale) {
  common_device(op, {&q, &k, &v});
  const char* names[] = {"query", "key", "value"};
  const TensorRef* ts[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    TS_SDK_CHECK(is_attention_dtype(ts[i]->dtype()), TS_ERROR_TYPE, op, ": expected float32, float16 or bfloat16 ",
                 names[i], ", got ", sdk::dtype_name(ts[i]->dtype()),
                 " (scaled_dot_product_attention computes other dtypes without this kernel)");
    TS_SDK_CHECK(ts[i]->dtype() == q.dtype(), TS_ERROR_TYPE, op, ": expected ", names[i], " of query's dtype ",
                 sdk::dtype_name(q.dtype()), ", got ", sdk::dtype_name(ts[i]->dtype()));
  }
  const sdk::AttentionShape s = sdk::attention_shape(op, q, k, v, dropout_p, scale);
  TS_SDK_CHECK(s.E <= kAttentionMaxHeadDim && s.Ev <= kAttentionMaxHeadDim, TS_ERROR_VALUE, op,
               ": expected head sizes of at most ", kAttentionMaxHeadDim, " on ", kName, ", got ", s.E,
               " (query, key) and ", s.Ev, " (value)");
  AttentionArgs a;
  a.B = s.B, a.H = s.H, a.L = s.L, a.S = s.S, a.E = s.E, a.Ev = s.Ev;
  a.scale = float(s.scale);
  a.causal = causal;
  a.tile = attention_tile(a.E, a.Ev);
  a.q = head_tensor(q), a.k = head_tensor(k), a.v = head_tensor(v);
  if (attn_mask) {
    const TensorRef& m = *attn_mask;
    common_device(op, {&q, &m});
    TS_SDK_CHECK(m.dtype() == q.dtype(), TS_ERROR_TYPE, op, ": expected an attn_mask of query's dtype ",
                 sdk::dtype_name(q.dtype()), " (a bool mask goes in as 0 where allowed and -inf elsewhere), got ",
                 sdk::dtype_name(m.dtype()));
    const sdk::AttentionMaskStrides ms = sdk::attention_mask_strides(op, m, s);
    a.mask = {first_element(m), m.dtype(), ms.sb, ms.sh, ms.sr, ms.sc};
  }
  return a;
}

// _scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, float dropout_p=0.0,
//   bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) -> (Tensor output, Tensor logsumexp)
void attention_k(sdk::Args& a) {
  const char* op = "_scaled_dot_product_flash_attention_for_cpu";
  const TensorRef query = a.tensor(0), key = a.tensor(1), value = a.tensor(2);
  const std::optional<TensorRef> attn_mask = a.optional_tensor(5);
  AttentionArgs args = problem_of(op, query, key, value, a.to_double(3), a.to_bool(4), attn_mask, a.optional_double(6));
  const ts_device device = query.device();
  DeviceGuard guard(device.index);
  TensorRef out = empty_heads_inner(a.call(), args.B, args.H, args.L, args.Ev, query.dtype(), device);
  const int64_t lse_shape[3] = {args.B, args.H, args.L};
  TensorRef lse = empty_on(a.call(), lse_shape, TS_FLOAT32, device);
  args.out = head_tensor(out);
  args.lse = static_cast<float*>(lse.data());
  launch_attention_forward(args, stream_for(device.index));
  a.returns({sdk::Args::tensor_value(std::move(out)), sdk::Args::tensor_value(std::move(lse))});
}

// _scaled_dot_product_flash_attention_for_cpu_backward(Tensor grad_out, Tensor query, Tensor key,
//   Tensor value, Tensor out, Tensor logsumexp, float dropout_p, bool is_causal, *, Tensor? attn_mask=None,
//   float? scale=None) -> (Tensor grad_query, Tensor grad_key, Tensor grad_value)
void attention_backward_k(sdk::Args& a) {
  const char* op = "_scaled_dot_product_flash_attention_for_cpu_backward";
  const TensorRef grad_out = a.tensor(0), query = a.tensor(1), key = a.tensor(2), value = a.tensor(3);
  const TensorRef out = a.tensor(4), logsumexp = a.tensor(5);
  const std::optional<TensorRef> attn_mask = a.optional_tensor(8);
  AttentionArgs args = problem_of(op, query, key, value, a.to_double(6), a.to_bool(7), attn_mask, a.optional_double(9));
  common_device(op, {&query, &grad_out, &out, &logsumexp});
  const std::vector<int64_t> out_shape{args.B, args.H, args.L, args.Ev}, lse_shape{args.B, args.H, args.L};
  for (const auto& [name, t, shape, dtype] :
       {std::tuple{"grad_out", &grad_out, &out_shape, query.dtype()}, std::tuple{"out", &out, &out_shape, query.dtype()},
        std::tuple{"logsumexp", &logsumexp, &lse_shape, int32_t(TS_FLOAT32)}}) {
    TS_SDK_CHECK(t->dtype() == dtype && t->shape_vector() == *shape, TS_ERROR_VALUE, op, ": expected ",
                 sdk::dtype_name(dtype), " ", name, " of shape ", shape_text(*shape), ", got ",
                 sdk::dtype_name(t->dtype()), shape_text(t->sizes()));
  }
  const ts_device device = query.device();
  DeviceGuard guard(device.index);
  const TensorRef lse = contiguous(a.call(), logsumexp, TS_FLOAT32);
  TensorRef delta = empty_on(a.call(), lse_shape, TS_FLOAT32, device);
  TensorRef gq = empty_heads_inner(a.call(), args.B, args.H, args.L, args.E, query.dtype(), device);
  TensorRef gk = empty_heads_inner(a.call(), args.B, args.H, args.S, args.E, query.dtype(), device);
  TensorRef gv = empty_heads_inner(a.call(), args.B, args.H, args.S, args.Ev, query.dtype(), device);
  args.grad_out = head_tensor(grad_out), args.out = head_tensor(out);
  args.lse = static_cast<float*>(lse.data());
  args.delta = static_cast<float*>(delta.data());
  args.grad_q = head_tensor(gq), args.grad_k = head_tensor(gk), args.grad_v = head_tensor(gv);
  launch_attention_backward(args, stream_for(device.index));
  a.returns({sdk::Args::tensor_value(std::move(gq)), sdk::Args::tensor_value(std::move(gk)),
             sdk::Args::tensor_value(std::move(gv))});
}

}  // namespace

void register_attention_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("_scaled_dot_product_flash_attention_for_cpu", key, attention_k);
  reg.kernel("_scaled_dot_product_flash_attention_for_cpu_backward", key, attention_backward_k);
}

}  // namespace tessera::gpu
