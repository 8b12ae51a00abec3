// Derivatives of _scaled_dot_product_flash_attention_for_cpu (see formulas.h). With
// P = softmax(S), S = q k^T * scale + attn_mask (-inf where causal attention hides a key; a row
// that sees no key has P = 0) and out = P v:
// dv = P^T dout, dP = dout v^T, dS = P * (dP - rowsum(dP * P)), dq = dS k * scale, dk = dS^T q * scale.
#include "formulas.h"
#include "meta.h"

#include <cmath>
#include <limits>

namespace tessera::autograd::formulas {
namespace {

double scale_of(const TensorRef& query, const std::optional<double>& scale) {
  const int64_t e = query.size(query.dim() - 1);
  return scale ? *scale : (e > 0 ? 1.0 / std::sqrt(double(e)) : 1.0);
}

TensorRef key_transposed(const TensorRef& t) { return ops::transpose(t, -2, -1); }

// The probabilities P, from operators; a row that sees no key (all -inf) gets zeros, as the
// kernel's (and PyTorch's) rows do.
TensorRef attention_probs(const TensorRef& query, const TensorRef& key, const TensorRef& attn_mask, bool is_causal,
                          double scale) {
  TensorRef scores = ops::mul(ops::matmul(query, key_transposed(key)), Scalar(scale));
  if (attn_mask.defined()) {
    scores = ops::add(scores, attn_mask);
    const TensorRef visible = ops::ne(scores, Scalar(-std::numeric_limits<double>::infinity()));
    const TensorRef row_hidden = ops::logical_not(ops::any(visible, int64_t(-1), true));
    // (the hidden rows' scores zeroed first, so their softmax and its gradients stay finite)
    return ops::masked_fill(ops::softmax(ops::masked_fill(scores, row_hidden, Scalar(0.0)), -1), row_hidden,
                            Scalar(0.0));
  }
  if (is_causal) {  // top-left aligned: query row i sees keys 0..i
    const int64_t L = query.size(query.dim() - 2), S = key.size(key.dim() - 2);
    TensorRef rows = ops::unsqueeze(ops::arange(Scalar(L), TS_INT64, query.device()), 1);
    TensorRef cols = ops::unsqueeze(ops::arange(Scalar(S), TS_INT64, query.device()), 0);
    scores = ops::masked_fill(scores, ops::logical_not(ops::ge(rows, cols)),
                              Scalar(-std::numeric_limits<double>::infinity()));
  }
  return ops::softmax(scores, -1);
}

// dS from P and dP.
TensorRef softmax_grad(const TensorRef& probs, const TensorRef& grad_probs) {
  return ops::mul(probs, ops::sub(grad_probs, ops::sum(ops::mul(grad_probs, probs), IntList{-1}, true)));
}

}  // namespace

std::tuple<TensorRef, TensorRef, TensorRef> flash_attention_backward(
    const TensorRef& grad, const TensorRef& query, const TensorRef& key, const TensorRef& value, const TensorRef& out,
    const TensorRef& logsumexp, double dropout_p, bool is_causal, const TensorRef& attn_mask,
    const std::optional<double>& scale) {
  if (!grad_mode_enabled())
    return ops::_scaled_dot_product_flash_attention_for_cpu_backward(grad, query, key, value, out, logsumexp,
                                                                     dropout_p, is_causal, attn_mask, scale);
  const double s = scale_of(query, scale);
  TensorRef probs = attention_probs(query, key, attn_mask, is_causal, s);
  TensorRef grad_value = ops::matmul(key_transposed(probs), grad);
  TensorRef grad_scores = softmax_grad(probs, ops::matmul(grad, key_transposed(value)));
  TensorRef grad_query = ops::mul(ops::matmul(grad_scores, key), Scalar(s));
  TensorRef grad_key = ops::mul(ops::matmul(key_transposed(grad_scores), query), Scalar(s));
  return {grad_query, grad_key, grad_value};
}

TensorRef flash_attention_jvp(const TensorRef& query_t, const TensorRef& key_t, const TensorRef& value_t,
                              const TensorRef& query, const TensorRef& key, const TensorRef& value,
                              const TensorRef& attn_mask, bool is_causal, const std::optional<double>& scale) {
  const double s = scale_of(query, scale);
  TensorRef probs = attention_probs(query, key, attn_mask, is_causal, s);
  // dS = (dq k^T + q dk^T) * scale; masked entries have P = 0, so softmax_grad zeroes them.
  TensorRef scores_t;
  if (query_t.defined()) scores_t = ops::matmul(query_t, key_transposed(key));
  if (key_t.defined()) {
    TensorRef term = ops::matmul(query, key_transposed(key_t));
    scores_t = scores_t.defined() ? ops::add(scores_t, term) : term;
  }
  TensorRef out_t;
  if (scores_t.defined()) out_t = ops::matmul(softmax_grad(probs, ops::mul(scores_t, Scalar(s))), value);
  if (value_t.defined()) {
    TensorRef term = ops::matmul(probs, value_t);
    out_t = out_t.defined() ? ops::add(out_t, term) : term;
  }
  return out_t;
}

}  // namespace tessera::autograd::formulas
