// Fused scaled dot-product attention for float32 (PyTorch's _scaled_dot_product_flash_attention_for_cpu
// and its backward): softmax(q k^T * scale) v computed a block of queries at a time against a block
// of keys at a time, with the softmax kept online (a running max and sum per row), so the L x S
// score matrix never exists; under is_causal the key blocks past a query block's last row are
// skipped; an additive float attn_mask (any broadcast) is added to each scores block. The block products are oneDNN sgemm calls reading q, k, v and grad_out in place
// (any strides with a contiguous last dim); exp goes through the SIMD table.
//
// Shapes: query [B, H, L, E], key [B, H, S, E], value [B, H, S, Ev]. The output and the gradients
// are [B, H, ., .] tensors laid out [B, ., H, .] in memory, as PyTorch's kernel lays them out:
// attention's usual next step, transpose(1, 2) then view(B, L, H * Ev), is then free.
#include "kernels.h"
#include "nn_conv_pool.h"  // dense
#include "simd_table.h"
#include "strided.h"
#include "tensor_iterator.h"

#include <tessera/sdk/attention_geometry.h>

#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::fail;
using sdk::TensorRef;

// Block sizes, the fastest of 32..512 (first on AVX2, the query blocks again on AVX-512). The
// forward's key blocks are wider than the backward's: half the online-softmax rescales, and its
// one scores block still fits in L2. Under is_causal the forward takes 64 queries a block (a
// finer diagonal skips more keys: 8x6x256x64 forward 4.4 -> 3.6 ms), else 128 (larger products).
constexpr int64_t kQueryBlock = 128, kCausalForwardQueryBlock = 64, kForwardKeyBlock = 256;
// The backward's key blocks: 128 under is_causal (a finer diagonal skips more), else 256 (fewer,
// larger products: 8x6x256x64 backward 18 -> 15 ms).
constexpr int64_t kCausalKeyBlock = 128, kKeyBlock = 256;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One [B, H, rows, cols] float32 operand read in place: element (b, h, r, c) at
// data + b * sb + h * sh + r * sr + c.
struct Operand {
  const float* data;
  int64_t sb, sh, sr;
  const float* row(int64_t b, int64_t h, int64_t r) const { return data + b * sb + h * sh + r * sr; }
};

// t itself when sgemm can read its rows in place (last dim contiguous, rows no closer than their
// length), else a dense copy.
TensorRef readable(ts_call call, const TensorRef& t) {
  const bool in_place = t.stride(3) == 1 && (t.size(2) <= 1 || t.stride(2) >= t.size(3));
  return in_place ? t : dense(call, t);
}

// A single row's stride is any number; sgemm wants a leading dimension no less than the row length.
Operand operand_of(const TensorRef& t) {
  return {t.data<float>(), t.stride(0), t.stride(1), t.size(2) <= 1 ? t.size(3) : t.stride(2)};
}

// A [B, H, rows, cols] float32 tensor laid out [B, rows, H, cols].
TensorRef empty_heads_inner(ts_call call, int64_t b, int64_t h, int64_t rows, int64_t cols) {
  const int64_t shape[4] = {b, h, rows, cols};
  const int64_t strides[4] = {rows * h * cols, cols, h * cols, 1};
  return sdk::empty(call, shape, TS_FLOAT32, kCpuDevice, strides);
}


// An additive float32 attn_mask broadcast to [B, H, L, S] (its missing and size-1 dims read with
// stride 0): element (b, h, r, c) at data + b * sb + h * sh + r * sr + c * sc. Empty: no mask.
struct Mask {
  const float* data = nullptr;
  int64_t sb = 0, sh = 0, sr = 0, sc = 0;

  // Adds the mask's [rows, cols] block at (b, h, q0, k0) to the scores block (row stride ld).
  void add_to(float* scores, int64_t ld, int64_t b, int64_t h, int64_t q0, int64_t rows, int64_t k0,
              int64_t cols) const {
    if (!data) return;
    const simd::Table& vec = simd::vec();
    for (int64_t r = 0; r < rows; ++r) {
      float* s = scores + r * ld;
      const float* m = data + b * sb + h * sh + (q0 + r) * sr + k0 * sc;
      if (sc == 1) vec.binary_vv[int(simd::Binary::Add)](s, s, m, cols);
      else if (sc == 0) vec.binary_vs[int(simd::Binary::Add)](s, s, *m, cols);
      else
        for (int64_t c = 0; c < cols; ++c) s[c] += m[c * sc];
    }
  }
};

struct Problem {
  int64_t B, H, L, S, E, Ev;
  float scale;
  bool causal;
  Mask mask;
  // Keys a block of queries ending (exclusive) at row q_end may see: causal attention is
  // top-left aligned (row i sees keys 0..i), as PyTorch's is_causal.
  int64_t key_end(int64_t q_end) const { return causal ? std::min(S, q_end) : S; }
};

int64_t backward_key_block(const Problem& p) { return p.causal ? kCausalKeyBlock : kKeyBlock; }
int64_t forward_query_block(const Problem& p) { return p.causal ? kCausalForwardQueryBlock : kQueryBlock; }

// -inf where key column c is past query row r (only in blocks that cross the diagonal).
void mask_causal(float* scores, int64_t ld, int64_t q0, int64_t rows, int64_t k0, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = std::max<int64_t>(0, q0 + r + 1 - k0); c < cols; ++c) scores[r * ld + c] = kNegInf;
}

// The scores block S = q k^T * scale (+ mask; -inf past the causal diagonal) of query rows
// [q0, q0 + rows) against keys [k0, k0 + cols), into `scores` with row stride ld.
void scores_block(const char* op, const Problem& p, const Operand& q, const Operand& k, int64_t b, int64_t h,
                  int64_t q0, int64_t rows, int64_t k0, int64_t cols, float* scores, int64_t ld) {
  sgemm(op, 'N', 'T', rows, cols, p.E, p.scale, q.row(b, h, q0), q.sr, k.row(b, h, k0), k.sr, 0.0f, scores, ld);
  if (p.causal && k0 + cols > q0 + 1) mask_causal(scores, ld, q0, rows, k0, cols);
  p.mask.add_to(scores, ld, b, h, q0, rows, k0, cols);
}

// The CPU's dtype rule (float32), then the shared shape rules (tessera/sdk/attention_geometry.h)
// and the mask: float32 (as PyTorch's kernel, which takes a bool mask only converted, 0 where
// allowed and -inf elsewhere), broadcastable to [B, H, L, S].
Problem problem_of(const char* op, const TensorRef& q, const TensorRef& k, const TensorRef& v, double dropout_p,
                   bool causal, const std::optional<TensorRef>& attn_mask, std::optional<double> scale) {
  const TensorRef* ts[] = {&q, &k, &v};
  check_cpu(op, ts);
  const char* names[] = {"query", "key", "value"};
  for (int i = 0; i < 3; ++i)
    if (ts[i]->dtype() != TS_FLOAT32)
      fail(TS_ERROR_TYPE, op, ": expected float32 ", names[i], ", got ", sdk::dtype_name(ts[i]->dtype()),
           " (scaled_dot_product_attention computes other dtypes without this kernel)");
  const sdk::AttentionShape s = sdk::attention_shape(op, q, k, v, dropout_p, scale);
  Problem p{s.B, s.H, s.L, s.S, s.E, s.Ev, float(s.scale), causal, {}};
  if (attn_mask) {
    const TensorRef& m = *attn_mask;
    const TensorRef* on_cpu[] = {&m};
    check_cpu(op, on_cpu);
    if (m.dtype() != TS_FLOAT32)
      fail(TS_ERROR_TYPE, op, ": expected a float32 attn_mask (the dtype of query; a bool mask goes in as 0 where "
           "allowed and -inf elsewhere), got ", sdk::dtype_name(m.dtype()));
    const sdk::AttentionMaskStrides ms = sdk::attention_mask_strides(op, m, s);
    p.mask = {m.data<float>(), ms.sb, ms.sh, ms.sr, ms.sc};
  }
  return p;
}

// ---- forward

// One block of queries of one head: out rows and their logsumexp.
void forward_block(const char* op, const Problem& p, const Operand& q, const Operand& k, const Operand& v,
                   float* out, int64_t out_ld, float* lse, int64_t b, int64_t h, int64_t q0, int64_t rows,
                   std::vector<float>& scores, std::vector<float>& acc) {
  const simd::Table& vec = simd::vec();
  std::fill_n(acc.begin(), rows * p.Ev, 0.0f);
  float row_max[kQueryBlock], row_sum[kQueryBlock];
  std::fill_n(row_max, rows, kNegInf);
  std::fill_n(row_sum, rows, 0.0f);
  const int64_t keys = p.key_end(q0 + rows);
  for (int64_t k0 = 0; k0 < keys; k0 += kForwardKeyBlock) {
    const int64_t cols = std::min(kForwardKeyBlock, keys - k0);
    scores_block(op, p, q, k, b, h, q0, rows, k0, cols, scores.data(), kForwardKeyBlock);
    for (int64_t r = 0; r < rows; ++r) {
      float* s = scores.data() + r * kForwardKeyBlock;
      const float m = std::max(row_max[r], vec.row_max(s, cols));
      if (m == kNegInf) {  // nothing visible yet in this row
        std::fill_n(s, cols, 0.0f);
        continue;
      }
      const float correction = std::exp(row_max[r] - m);  // 0 on the first block (exp(-inf))
      row_sum[r] = row_sum[r] * correction + vec.exp_sum_fast(s, s, m, cols);
      row_max[r] = m;
      if (correction != 1.0f) vec.binary_vs[int(simd::Binary::Mul)](acc.data() + r * p.Ev, acc.data() + r * p.Ev,
                                                                      correction, p.Ev);
    }
    sgemm(op, 'N', 'N', rows, p.Ev, cols, 1.0f, scores.data(), kForwardKeyBlock, v.row(b, h, k0), v.sr, 1.0f, acc.data(),
          p.Ev);
  }
  for (int64_t r = 0; r < rows; ++r) {
    // A row that saw no key (S == 0) gets zeros and logsumexp -inf.
    const float inv = row_sum[r] > 0 ? 1.0f / row_sum[r] : 0.0f;
    vec.binary_vs[int(simd::Binary::Mul)](out + r * out_ld, acc.data() + r * p.Ev, inv, p.Ev);
    lse[r] = row_sum[r] > 0 ? row_max[r] + std::log(row_sum[r]) : kNegInf;
  }
}

// _scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, float dropout_p=0.0,
//   bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) -> (Tensor output, Tensor logsumexp)
void flash_attention_kernel(Args& a) {
  const char* op = "_scaled_dot_product_flash_attention_for_cpu";
  const TensorRef query = a.tensor(0), key = a.tensor(1), value = a.tensor(2);
  const std::optional<TensorRef> attn_mask = a.optional_tensor(5);
  const Problem p = problem_of(op, query, key, value, a.to_double(3), a.to_bool(4), attn_mask, a.optional_double(6));
  const TensorRef q = readable(a.call(), query), k = readable(a.call(), key), v = readable(a.call(), value);
  TensorRef out = empty_heads_inner(a.call(), p.B, p.H, p.L, p.Ev);
  const int64_t lse_shape[3] = {p.B, p.H, p.L};
  TensorRef lse = sdk::empty(a.call(), lse_shape, TS_FLOAT32, kCpuDevice);
  const Operand qo = operand_of(q), ko = operand_of(k), vo = operand_of(v);
  const int64_t query_block = forward_query_block(p);
  const int64_t q_blocks = (p.L + query_block - 1) / query_block;
  float* out_data = out.data<float>();
  float* lse_data = lse.data<float>();
  parallel_for(p.B * p.H * q_blocks, 1, [&](int64_t tb, int64_t te) {
    std::vector<float> scores(size_t(query_block * kForwardKeyBlock)), acc(size_t(query_block * p.Ev));
    for (int64_t t = tb; t < te; ++t) {
      const int64_t bh = t / q_blocks, b = bh / p.H, h = bh % p.H, q0 = t % q_blocks * query_block;
      const int64_t rows = std::min(query_block, p.L - q0);
      forward_block(op, p, qo, ko, vo, out_data + b * out.stride(0) + h * out.stride(1) + q0 * out.stride(2),
                    out.stride(2), lse_data + bh * p.L + q0, b, h, q0, rows, scores, acc);
    }
  });
  a.returns({Args::tensor_value(std::move(out)), Args::tensor_value(std::move(lse))});
}

// ---- backward

// One head: with P = exp(q k^T * scale - lse) recomputed block by block, dv = P^T dO,
// dP = dO v^T, dS = P * (dP - rowsum(dO * O)), dq = dS k * scale, dk = dS^T q * scale. The key
// blocks are the outer loop, so dk and dv of a block are complete when it ends; dq accumulates.
void backward_head(const char* op, const Problem& p, const Operand& q, const Operand& k, const Operand& v,
                   const Operand& grad_out, const float* lse, const float* delta, float* gq, int64_t gq_ld, float* gk,
                   int64_t gk_ld, float* gv, int64_t gv_ld, std::vector<float>& probs, std::vector<float>& grad_probs, int64_t b, int64_t h) {
  const simd::Table& vec = simd::vec();
  const int64_t kb = backward_key_block(p);  // also the row stride of probs and grad_probs
  for (int64_t k0 = 0; k0 < p.S; k0 += kb) {
    const int64_t cols = std::min(kb, p.S - k0);
    // Causal: query rows before k0 see none of these keys.
    const int64_t first_q = p.causal ? k0 / kQueryBlock * kQueryBlock : 0;
    bool first = true;
    for (int64_t q0 = first_q; q0 < p.L; q0 += kQueryBlock) {
      const int64_t rows = std::min(kQueryBlock, p.L - q0);
      scores_block(op, p, q, k, b, h, q0, rows, k0, cols, probs.data(), kb);
      for (int64_t r = 0; r < rows; ++r) {
        float* s = probs.data() + r * kb;
        if (lse[q0 + r] == kNegInf) {
          std::fill_n(s, cols, 0.0f);
          continue;
        }
        vec.exp_sum_fast(s, s, lse[q0 + r], cols);  // P = exp(S - lse); the sum is not needed
      }
      // dv[k block] += P^T dO
      sgemm(op, 'T', 'N', cols, p.Ev, rows, 1.0f, probs.data(), kb, grad_out.row(b, h, q0), grad_out.sr,
            first ? 0.0f : 1.0f, gv + k0 * gv_ld, gv_ld);
      // dP = dO v^T, then dS = P * (dP - delta) in place
      sgemm(op, 'N', 'T', rows, cols, p.Ev, 1.0f, grad_out.row(b, h, q0), grad_out.sr, v.row(b, h, k0), v.sr, 0.0f,
            grad_probs.data(), kb);
      for (int64_t r = 0; r < rows; ++r) {
        float* ds = grad_probs.data() + r * kb;
        vec.binary_vs[int(simd::Binary::Sub)](ds, ds, delta[q0 + r], cols);
        vec.binary_vv[int(simd::Binary::Mul)](ds, ds, probs.data() + r * kb, cols);
      }
      // dq[q block] += dS k * scale; dk[k block] += dS^T q * scale
      sgemm(op, 'N', 'N', rows, p.E, cols, p.scale, grad_probs.data(), kb, k.row(b, h, k0), k.sr, 1.0f,
            gq + q0 * gq_ld, gq_ld);
      sgemm(op, 'T', 'N', cols, p.E, rows, p.scale, grad_probs.data(), kb, q.row(b, h, q0), q.sr,
            first ? 0.0f : 1.0f, gk + k0 * gk_ld, gk_ld);
      first = false;
    }
    if (first) {  // no query saw these keys (L == 0): their gradients are zero
      for (int64_t c = 0; c < cols; ++c) {
        std::fill_n(gv + (k0 + c) * gv_ld, p.Ev, 0.0f);
        std::fill_n(gk + (k0 + c) * gk_ld, p.E, 0.0f);
      }
    }
  }
}

// _scaled_dot_product_flash_attention_for_cpu_backward(Tensor grad_out, Tensor query, Tensor key,
//   Tensor value, Tensor out, Tensor logsumexp, float dropout_p, bool is_causal, *, Tensor? attn_mask=None,
//   float? scale=None) -> (Tensor grad_query, Tensor grad_key, Tensor grad_value)
void flash_attention_backward_kernel(Args& a) {
  const char* op = "_scaled_dot_product_flash_attention_for_cpu_backward";
  const TensorRef grad_out = a.tensor(0), query = a.tensor(1), key = a.tensor(2), value = a.tensor(3);
  const TensorRef out = a.tensor(4), logsumexp = a.tensor(5);
  const std::optional<TensorRef> attn_mask = a.optional_tensor(8);
  const Problem p = problem_of(op, query, key, value, a.to_double(6), a.to_bool(7), attn_mask, a.optional_double(9));
  const std::vector<int64_t> out_shape{p.B, p.H, p.L, p.Ev}, lse_shape{p.B, p.H, p.L};
  for (const auto& [name, t, shape] : {std::tuple{"grad_out", &grad_out, &out_shape}, std::tuple{"out", &out, &out_shape},
                                       std::tuple{"logsumexp", &logsumexp, &lse_shape}}) {
    if (t->dtype() != TS_FLOAT32 || t->shape_vector() != *shape)
      fail(TS_ERROR_VALUE, op, ": expected float32 ", name, " of shape ", strided::str(*shape), ", got ",
           sdk::dtype_name(t->dtype()), strided::str(t->sizes()));
  }
  const TensorRef q = readable(a.call(), query), k = readable(a.call(), key), v = readable(a.call(), value);
  const TensorRef go = readable(a.call(), grad_out), o = readable(a.call(), out), lse = dense(a.call(), logsumexp);
  // The gradients laid out [B, ., H, .]: a head's rows are H * features apart.
  TensorRef gq = empty_heads_inner(a.call(), p.B, p.H, p.L, p.E), gk = empty_heads_inner(a.call(), p.B, p.H, p.S, p.E),
            gv = empty_heads_inner(a.call(), p.B, p.H, p.S, p.Ev);
  const Operand qo = operand_of(q), ko = operand_of(k), vo = operand_of(v), goo = operand_of(go), oo = operand_of(o);
  parallel_for(p.B * p.H, 1, [&](int64_t tb, int64_t te) {
    const size_t block = size_t(kQueryBlock * backward_key_block(p));
    std::vector<float> probs(block), grad_probs(block);
    std::vector<float> delta(size_t(p.L));
    for (int64_t bh = tb; bh < te; ++bh) {
      const int64_t b = bh / p.H, h = bh % p.H;
      for (int64_t r = 0; r < p.L; ++r) {  // delta = rowsum(dO * O)
        const float *x = goo.row(b, h, r), *y = oo.row(b, h, r);
        float s = 0;
        for (int64_t c = 0; c < p.Ev; ++c) s += x[c] * y[c];
        delta[size_t(r)] = s;
      }
      float* gq_head = gq.data<float>() + b * gq.stride(0) + h * gq.stride(1);
      for (int64_t r = 0; r < p.L; ++r) std::fill_n(gq_head + r * gq.stride(2), p.E, 0.0f);  // dq accumulates
      backward_head(op, p, qo, ko, vo, goo, lse.data<float>() + bh * p.L, delta.data(), gq_head, gq.stride(2),
                    gk.data<float>() + b * gk.stride(0) + h * gk.stride(1), gk.stride(2),
                    gv.data<float>() + b * gv.stride(0) + h * gv.stride(1), gv.stride(2), probs, grad_probs, b, h);
    }
  });
  a.returns({Args::tensor_value(std::move(gq)), Args::tensor_value(std::move(gk)), Args::tensor_value(std::move(gv))});
}

}  // namespace

void sgemm(const char* op, char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t status = dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) fail(TS_ERROR, op, ": oneDNN sgemm failed with status ", int(status));
}

void register_attention_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("_scaled_dot_product_flash_attention_for_cpu", key, flash_attention_kernel);
  reg.kernel("_scaled_dot_product_flash_attention_for_cpu_backward", key, flash_attention_backward_kernel);
}

}  // namespace tessera::cpu
