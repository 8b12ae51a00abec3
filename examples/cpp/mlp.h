#pragma once
// What train_mlp and infer_mlp share: the model and the synthetic data (two interleaved spirals
// labelled 0 and 1, from the global generator, so manual_seed fixes them).
#include <tessera/tessera.h>

#include <cmath>
#include <utility>

namespace mlp {

namespace ts = tessera;

inline ts::nn::Sequential make_model() {
  return ts::nn::Sequential(ts::nn::Linear(2, 32), ts::nn::ReLU(), ts::nn::Linear(32, 32), ts::nn::ReLU(),
                            ts::nn::Linear(32, 2));
}

// n points per class: (x, labels), x (2n, 2) float32, labels (2n) int64.
inline std::pair<ts::Tensor, ts::Tensor> spirals(int64_t n) {
  ts::Tensor t = ts::rand({n}).mul(2 * M_PI).add(0.5);  // angle = radius: one turn of each spiral
  ts::Tensor noise = ts::randn({2 * n, 2}).mul(0.08);
  ts::Tensor a = ts::stack({t.mul(t.cos()), t.mul(t.sin())}, 1);
  ts::Tensor b = a.neg();  // the second spiral: the first turned by pi
  ts::Tensor x = ts::cat({a, b}, 0).div(2 * M_PI + 0.5).add(noise);
  ts::Tensor labels = ts::cat({ts::zeros({n}, ts::kInt64), ts::ones({n}, ts::kInt64)}, 0);
  return {x, labels};
}

// Fraction of rows whose argmax matches the label.
inline double accuracy(const ts::Tensor& logits, const ts::Tensor& labels) {
  return logits.argmax(1).eq(labels).to(ts::kFloat64).mean().item<double>();
}

}  // namespace mlp
