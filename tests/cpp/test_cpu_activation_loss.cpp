// Tests of the CPU plugin's activations (gelu, silu), element-wise backward formulas
// (gelu/silu/threshold/sigmoid/tanh_backward), softmax backward and losses (nll_loss_forward /
// backward, mse_loss (+ backward), l1_loss, binary_cross_entropy_with_logits). Each result is
// checked against a reference loop in double written here, for float32 and float64 (and the
// 16-bit floats where the kernel supports them), batched and unbatched shapes, strided views,
// empty tensors and the errors.
#include <gtest/gtest.h>

#include "test_util.h"

#include <tessera/runtime.h>
#include <tessera/tessera.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace {

using tessera::testing::expect_error;
using tessera::testing::numel_of;

using namespace tessera;
using Shape = std::vector<int64_t>;

const std::vector<ScalarType> kFloat3264 = {kFloat32, kFloat64};
const std::vector<ScalarType> kFloatAll = {kFloat16, kBFloat16, kFloat32, kFloat64};

// Deterministic values in [lo, hi], multiples of 1/8 (exact in every floating dtype).
std::vector<double> values(int64_t n, int seed, double lo = -4, double hi = 4) {
  std::vector<double> v(static_cast<size_t>(n));
  uint32_t state = 2463534242u + uint32_t(seed) * 7919u;
  const int steps = int((hi - lo) * 8);
  for (double& x : v) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    x = lo + double(state % uint32_t(steps + 1)) / 8.0;
  }
  return v;
}
Tensor make(const Shape& shape, ScalarType dt, int seed = 0, double lo = -4, double hi = 4) {
  return tensor_from_values(values(numel_of(shape), seed, lo, hi), shape, dt);
}
// A view of `shape` whose memory is transposed (last two dims swapped), values as make().
Tensor make_transposed(const Shape& shape, ScalarType dt, int seed = 0, double lo = -4, double hi = 4) {
  Shape s = shape;
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  return transpose(make(s, dt, seed, lo, hi), int64_t(s.size()) - 2, int64_t(s.size()) - 1);
}

double tol_for(ScalarType dt) {
  switch (dt) {
    case kFloat16: return 4e-3;
    case kBFloat16: return 3e-2;
    case kFloat32: return 2e-5;
    default: return 1e-11;
  }
}
// The reference value as the dtype holds it (inputs are rounded before the reference reads them).
double rounded(double v, ScalarType dt) { return tensor_from_values(std::vector<double>{v}, {}, dt).item_double(); }

void expect_close(const Tensor& got, const Shape& shape, const std::vector<double>& want, ScalarType dt,
                  double scale = 1.0, const std::string& what = "") {
  ASSERT_EQ(got.shape(), shape) << what;
  ASSERT_EQ(got.dtype(), dt) << what;
  const auto v = got.to_double_vector();
  ASSERT_EQ(v.size(), want.size()) << what;
  const double tol = tol_for(dt) * scale;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(v[i])) << what << " at " << i;
      continue;
    }
    EXPECT_NEAR(v[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
  }
}

// ---------------------------------------------------------------------------- references
double ref_gelu(double x, bool tanh_form) {
  if (!tanh_form) return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double ref_sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double ref_silu(double x) { return x * ref_sigmoid(x); }
// Derivatives by central differences of the reference, so the backward kernels are checked
// against the forward's definition rather than a copy of their formula.
template <class F> double numeric_derivative(F f, double x) {
  const double h = 1e-5;
  return (f(x + h) - f(x - h)) / (2 * h);
}

std::vector<double> map(const std::vector<double>& v, auto f) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f(v[i]);
  return out;
}
std::vector<double> map2(const std::vector<double>& a, const std::vector<double>& b, auto f) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i]);
  return out;
}

const std::vector<Shape> kShapes = {{}, {0}, {7}, {3, 5}, {2, 3, 4}, {2, 0, 3}};

// ---------------------------------------------------------------------------- activations
TEST(CpuActivation, GeluBothFormsEveryFloatDtype) {
  for (ScalarType dt : kFloatAll)
    for (const Shape& shape : kShapes)
      for (bool tanh_form : {false, true}) {
        Tensor x = make(shape, dt, 1);
        Tensor y = gelu(x, tanh_form ? "tanh" : "none");
        expect_close(y, shape, map(x.to_double_vector(), [&](double v) { return ref_gelu(v, tanh_form); }), dt, 1,
                     std::string(name(dt)) + (tanh_form ? " tanh" : " none"));
      }
}

TEST(CpuActivation, SiluEveryFloatDtype) {
  for (ScalarType dt : kFloatAll)
    for (const Shape& shape : kShapes) {
      Tensor x = make(shape, dt, 2);
      expect_close(silu(x), shape, map(x.to_double_vector(), ref_silu), dt, 1, std::string(name(dt)));
    }
}

TEST(CpuActivation, ExtremeInputsStayFinite) {
  Tensor x = tensor_from_values(std::vector<double>{-1000, -50, 0, 50, 1000}, {5}, kFloat32);
  expect_close(silu(x), {5}, {-0.0, -50 * ref_sigmoid(-50), 0, 50, 1000}, kFloat32);
  expect_close(gelu(x), {5}, {0, 0, 0, 50, 1000}, kFloat32);
  expect_close(gelu(x, "tanh"), {5}, {0, 0, 0, 50, 1000}, kFloat32);
}

TEST(CpuActivation, StridedAndInplace) {
  for (ScalarType dt : kFloat3264) {
    Tensor xt = make_transposed({4, 6}, dt, 3);
    ASSERT_FALSE(xt.is_contiguous());
    const auto xv = xt.to_double_vector();
    expect_close(gelu(xt), {4, 6}, map(xv, [](double v) { return ref_gelu(v, false); }), dt);
    expect_close(silu(xt), {4, 6}, map(xv, ref_silu), dt);
    // In place on a strided view writes through to the base.
    Tensor base = make({6, 4}, dt, 4);
    Tensor view = transpose(base, 0, 1);
    const auto before = view.to_double_vector();
    Tensor r = gelu_(view, "tanh");
    EXPECT_EQ(r.impl(), view.impl());
    expect_close(view, {4, 6}, map(before, [](double v) { return ref_gelu(v, true); }), dt);
    Tensor s = make({5}, dt, 5);
    const auto sv = s.to_double_vector();
    silu_(s);
    expect_close(s, {5}, map(sv, ref_silu), dt);
  }
}

TEST(CpuActivation, LargeInputUsesEveryElement) {
  // Above the parallel grain: each thread's chunk is checked.
  Tensor x = make({300, 1000}, kFloat32, 6);
  expect_close(gelu(x), {300, 1000}, map(x.to_double_vector(), [](double v) { return ref_gelu(v, false); }),
               kFloat32);
}

TEST(CpuActivation, Errors) {
  Tensor xi = tensor_from_values(std::vector<double>{1, 2}, {2}, kInt64);
  expect_error<TypeError>([&] { gelu(xi); }, {"gelu", "floating", "int64"});
  expect_error<TypeError>([&] { silu(xi); }, {"silu", "floating", "int64"});
  expect_error<TypeError>([&] { silu_(xi); }, {"silu_", "int64"});
  Tensor x = make({3}, kFloat32);
  expect_error<ValueError>([&] { gelu(x, "exact"); }, {"gelu", "'none' or 'tanh'", "exact"});
  expect_error<ValueError>([&] { gelu_backward(x, x, "fast"); }, {"gelu_backward", "fast"});
}

// ---------------------------------------------------------------------------- element-wise backward
TEST(CpuActivationBackward, GeluAndSiluMatchNumericDerivatives) {
  for (ScalarType dt : kFloatAll)
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{9}, Shape{3, 4}}) {
      Tensor x = make(shape, dt, 7), g = make(shape, dt, 8, -2, 2);
      const auto xv = x.to_double_vector(), gv = g.to_double_vector();
      const double scale = dt == kFloat64 ? 1e5 : 1;  // the numeric derivative's own error
      for (bool tanh_form : {false, true})
        expect_close(gelu_backward(g, x, tanh_form ? "tanh" : "none"), shape, map2(gv, xv, [&](double gg, double v) {
                       return gg * numeric_derivative([&](double u) { return ref_gelu(u, tanh_form); }, v);
                     }),
                     dt, scale, "gelu_backward");
      expect_close(silu_backward(g, x), shape,
                   map2(gv, xv, [](double gg, double v) { return gg * numeric_derivative(ref_silu, v); }), dt, scale,
                   "silu_backward");
    }
}

TEST(CpuActivationBackward, SigmoidTanhFromOutputs) {
  for (ScalarType dt : kFloatAll) {
    Tensor y = make({4, 5}, dt, 9, -1, 1), g = make({4, 5}, dt, 10);
    const auto yv = y.to_double_vector(), gv = g.to_double_vector();
    expect_close(sigmoid_backward(g, y), {4, 5}, map2(gv, yv, [](double a, double b) { return a * b * (1 - b); }), dt);
    expect_close(tanh_backward(g, y), {4, 5}, map2(gv, yv, [](double a, double b) { return a * (1 - b * b); }), dt);
  }
  // Against the forward ops: d sigmoid(x) = sigmoid_backward(1, sigmoid(x)).
  Tensor x = make({11}, kFloat64, 11);
  Tensor ones_ = ones({11}, kFloat64);
  expect_close(sigmoid_backward(ones_, sigmoid(x)), {11},
               map(x.to_double_vector(), [](double v) { return numeric_derivative(ref_sigmoid, v); }), kFloat64, 1e5);
  expect_close(tanh_backward(ones_, tanh(x)), {11},
               map(x.to_double_vector(), [](double v) { return numeric_derivative([](double u) { return std::tanh(u); }, v); }),
               kFloat64, 1e5);
}

TEST(CpuActivationBackward, ThresholdBackward) {
  for (ScalarType dt : {kFloat16, kFloat32, kFloat64, kInt64, kInt32})
    for (double th : {0.0, 0.5, -1.0}) {
      Tensor x = make({3, 7}, dt, 12), g = make({3, 7}, dt, 13);
      const auto xv = x.to_double_vector(), gv = g.to_double_vector();
      Tensor r = th == 0.0 ? threshold_backward(g, x, 0) : threshold_backward(g, x, th);
      ASSERT_EQ(r.dtype(), dt);
      const auto rv = r.to_double_vector();
      for (size_t i = 0; i < rv.size(); ++i) EXPECT_EQ(rv[i], xv[i] <= th ? 0.0 : gv[i]) << name(dt) << " " << th;
    }
  // relu's backward: NaN inputs pass the gradient (NaN <= 0 is false), as in PyTorch.
  Tensor x = tensor_from_values(std::vector<double>{-1, 0, 2, std::nan("")}, {4}, kFloat32);
  expect_close(threshold_backward(ones({4}), x, 0), {4}, {0, 0, 1, 1}, kFloat32);
}

TEST(CpuActivationBackward, BroadcastAndStrided) {
  for (ScalarType dt : kFloat3264) {
    Tensor y = make_transposed({4, 6}, dt, 14);
    Tensor g = make({6}, dt, 15);  // broadcast over the rows
    const auto yv = y.to_double_vector(), gv = g.to_double_vector();
    std::vector<double> want(24);
    for (size_t i = 0; i < 24; ++i) want[i] = gv[i % 6] * (1 - yv[i] * yv[i]);
    expect_close(tanh_backward(g, y), {4, 6}, want, dt);
  }
  // Mixed dtypes promote.
  Tensor g32 = make({5}, kFloat32, 16);
  Tensor y64 = make({5}, kFloat64, 17, -1, 1);
  EXPECT_EQ(sigmoid_backward(g32, y64).dtype(), kFloat64);
}

TEST(CpuActivationBackward, Errors) {
  Tensor xi = tensor_from_values(std::vector<double>{1, 2}, {2}, kInt64);
  expect_error<TypeError>([&] { sigmoid_backward(xi, xi); }, {"sigmoid_backward", "floating", "int64"});
  expect_error<TypeError>([&] { tanh_backward(xi, xi); }, {"tanh_backward"});
  expect_error<TypeError>([&] { silu_backward(xi, xi); }, {"silu_backward"});
  Tensor b = tensor_from_values(std::vector<double>{1, 0}, {2}, kBool);
  expect_error<TypeError>([&] { threshold_backward(b, b, 0); }, {"threshold_backward", "bool"});
  expect_error<ValueError>([&] { tanh_backward(make({3}, kFloat32), make({4}, kFloat32)); },
                           {"tanh_backward", "broadcast", "[3]", "[4]"});
}

// ---------------------------------------------------------------------------- softmax backward
// Reference over row-major values: rows along `dim` of `shape`.
std::vector<double> ref_softmax_backward(const std::vector<double>& g, const std::vector<double>& y, const Shape& shape,
                                         int64_t dim, bool log) {
  std::vector<double> out(g.size());
  if (g.empty()) return out;
  const int64_t len = shape.empty() ? 1 : shape[size_t(dim)];
  int64_t inner = 1;
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t outer = int64_t(g.size()) / std::max<int64_t>(1, len * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t i) { return size_t(o * len * inner + i * inner + in); };
      double sum = 0;
      for (int64_t i = 0; i < len; ++i) sum += log ? g[at(i)] : g[at(i)] * y[at(i)];
      for (int64_t i = 0; i < len; ++i)
        out[at(i)] = log ? g[at(i)] - std::exp(y[at(i)]) * sum : y[at(i)] * (g[at(i)] - sum);
    }
  return out;
}

TEST(CpuSoftmaxBackward, MatchesReferenceEveryDim) {
  const std::vector<Shape> shapes = {{}, {5}, {4, 6}, {3, 4, 5}, {2, 0, 3}, {3, 100, 70}};
  for (ScalarType dt : kFloatAll)
    for (const Shape& shape : shapes)
      for (int64_t dim = -1; dim < int64_t(std::max<size_t>(shape.size(), 1)); ++dim)
        for (bool log : {false, true}) {
          if (dt != kFloat32 && numel_of(shape) > 1000) continue;
          const int64_t d = dim < 0 ? dim + int64_t(std::max<size_t>(shape.size(), 1)) : dim;
          Tensor x = make(shape, dt, 20);
          Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
          Tensor g = make(shape, dt, 21);
          Tensor r = log ? _log_softmax_backward_data(g, y, dim, dt) : _softmax_backward_data(g, y, dim, dt);
          const double scale = numel_of(shape) > 1000 ? 10 : 1;
          expect_close(r, shape,
                       ref_softmax_backward(g.to_double_vector(), y.to_double_vector(), shape, shape.empty() ? 0 : d, log),
                       dt, scale,
                       std::string(name(dt)) + (log ? " log" : "") + " dim " + std::to_string(dim) + " of " +
                           std::to_string(shape.size()) + "-d");
        }
}

TEST(CpuSoftmaxBackward, StridedInputs) {
  for (ScalarType dt : kFloat3264)
    for (int64_t dim : {0, 1})
      for (bool log : {false, true}) {
        Tensor g = make_transposed({5, 130}, dt, 22);
        Tensor y = make_transposed({5, 130}, dt, 23, 0, 1);
        Tensor r = log ? _log_softmax_backward_data(g, y, dim, dt) : _softmax_backward_data(g, y, dim, dt);
        expect_close(r, {5, 130}, ref_softmax_backward(g.to_double_vector(), y.to_double_vector(), {5, 130}, dim, log),
                     dt);
        // One strided, one contiguous.
        Tensor yc = contiguous(y);
        Tensor r2 = log ? _log_softmax_backward_data(g, yc, dim, dt) : _softmax_backward_data(g, yc, dim, dt);
        expect_close(r2, {5, 130}, r.to_double_vector(), dt);
      }
}

TEST(CpuSoftmaxBackward, InputDtypeConvertsTheResult) {
  // softmax(x16, dim, dtype=float32) keeps a float32 output; its backward returns float16.
  Tensor g = make({3, 4}, kFloat32, 24), y = softmax(make({3, 4}, kFloat32, 25), 1);
  Tensor r = _softmax_backward_data(g, y, 1, kFloat16);
  EXPECT_EQ(r.dtype(), kFloat16);
  auto want = ref_softmax_backward(g.to_double_vector(), y.to_double_vector(), {3, 4}, 1, false);
  for (double& v : want) v = rounded(v, kFloat16);
  expect_close(r, {3, 4}, want, kFloat16);
}

TEST(CpuSoftmaxBackward, Errors) {
  Tensor a = make({3, 4}, kFloat32), b = make({4, 3}, kFloat32);
  expect_error<ValueError>([&] { _softmax_backward_data(a, b, 1, kFloat32); },
                           {"_softmax_backward_data", "same shape", "[3, 4]", "[4, 3]"});
  expect_error<IndexError>([&] { _log_softmax_backward_data(a, a, 2, kFloat32); },
                           {"_log_softmax_backward_data", "dimension 2 out of range"});
  Tensor i = tensor_from_values(std::vector<double>{1, 2}, {2}, kInt64);
  expect_error<TypeError>([&] { _softmax_backward_data(i, i, 0, kFloat32); }, {"_softmax_backward_data", "int64"});
  expect_error<TypeError>([&] { _softmax_backward_data(a, a, 0, kInt32); }, {"input_dtype", "int32"});
}

// ---------------------------------------------------------------------------- nll_loss
struct NllRef {
  std::vector<double> out;  // per element (none) or one value
  double total_weight = 0;
  std::vector<double> grad;  // d loss / d input, for a grad_output of ones (or the given one)
};
// self of shape (C), (N, C) or (N, C, S...) as row-major values; target per element.
NllRef ref_nll(const std::vector<double>& x, const Shape& shape, const std::vector<double>& target,
               const std::vector<double>* weight, int64_t reduction, int64_t ignore, const std::vector<double>& gout) {
  const bool unbatched = shape.size() == 1;
  const int64_t C = unbatched ? shape[0] : shape[1];
  const int64_t N = unbatched ? 1 : shape[0];
  int64_t S = 1;
  for (size_t d = 2; d < shape.size(); ++d) S *= shape[d];
  NllRef r;
  r.grad.assign(x.size(), 0.0);
  double sum = 0;
  std::vector<double> per(size_t(N * S), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t t = int64_t(target[size_t(n * S + s)]);
      if (t == ignore) continue;
      const double w = weight ? (*weight)[size_t(t)] : 1.0;
      per[size_t(n * S + s)] = -w * x[size_t((n * C + t) * S + s)];
      sum += per[size_t(n * S + s)];
      r.total_weight += w;
    }
  if (reduction == 0) r.out = per;
  else r.out = {reduction == 1 ? sum / r.total_weight : sum};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t t = int64_t(target[size_t(n * S + s)]);
      if (t == ignore) continue;
      const double w = weight ? (*weight)[size_t(t)] : 1.0;
      const double go = reduction == 0 ? gout[size_t(n * S + s)] : gout[0];
      r.grad[size_t((n * C + t) * S + s)] = -w * go / (reduction == 1 ? r.total_weight : 1.0);
    }
  return r;
}

Tensor targets(const Shape& shape, int64_t C, int seed, int64_t ignore = -100) {
  std::vector<double> v(size_t(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double((i * 7 + size_t(seed)) % size_t(C));
  if (v.size() > 2) v[1] = double(ignore);  // one ignored element
  return tensor_from_values(v, shape, kInt64);
}

TEST(CpuNllLoss, ForwardAndBackwardMatchReference) {
  struct Case {
    Shape input;
    Shape target;
  };
  const std::vector<Case> cases = {{{5}, {}}, {{4, 5}, {4}}, {{3, 4, 2, 3}, {3, 2, 3}}, {{0, 3}, {0}},
                                   {{2, 3, 5}, {2, 5}}, {{257, 10}, {257}}};
  for (ScalarType dt : kFloatAll)
    for (const Case& c : cases)
      for (int64_t reduction : {0, 1, 2})
        for (bool weighted : {false, true})
          for (int64_t ignore : {int64_t(-100), int64_t(2)}) {
            const int64_t C = c.input.size() == 1 ? c.input[0] : c.input[1];
            Tensor x = log_softmax(make(c.input, dt, 30), c.input.size() == 1 ? 0 : 1);
            Tensor t = targets(c.target, C, 31, ignore);
            Tensor w = weighted ? make({C}, dt, 32, 0.25, 2) : Tensor();
            const auto wv = weighted ? w.to_double_vector() : std::vector<double>{};
            const Shape out_shape = reduction == 0 ? c.target : Shape{};
            Tensor gout = reduction == 0 ? make(c.target, dt, 33) : full({}, 0.75, dt);
            const NllRef ref = ref_nll(x.to_double_vector(), c.input, t.to_double_vector(), weighted ? &wv : nullptr,
                                       reduction, ignore, gout.to_double_vector());
            const std::string what = std::string(name(dt)) + " " + std::to_string(c.input.size()) + "-d r" +
                                     std::to_string(reduction) + (weighted ? " w" : "") + " ignore " +
                                     std::to_string(ignore);
            auto [out, total] = nll_loss_forward(x, t, w, reduction, ignore);
            const double scale = numel_of(c.input) > 100 ? 10 : 1;
            expect_close(out, out_shape, ref.out, dt, scale, what);
            expect_close(total, {}, {ref.total_weight}, dt, scale, what + " total_weight");
            Tensor gi = nll_loss_backward(gout, x, t, w, reduction, ignore, total);
            expect_close(gi, c.input, ref.grad, dt, scale, what + " backward");
          }
}

TEST(CpuNllLoss, StridedInputAndTarget) {
  for (ScalarType dt : kFloat3264) {
    Tensor x = make_transposed({6, 4}, dt, 34);  // (N=6, C=4), class dim strided
    Tensor tbase = targets({12}, 4, 35);
    Tensor t = slice(tbase, 0, 0, 12, 2);  // every other element
    ASSERT_FALSE(t.is_contiguous());
    for (int64_t reduction : {0, 1, 2}) {
      Tensor gout = reduction == 0 ? make({6}, dt, 36) : ones({}, dt);
      const NllRef ref =
          ref_nll(x.to_double_vector(), {6, 4}, t.to_double_vector(), nullptr, reduction, -100, gout.to_double_vector());
      auto [out, total] = nll_loss_forward(x, t, Tensor(), reduction, -100);
      expect_close(out, reduction == 0 ? Shape{6} : Shape{}, ref.out, dt);
      expect_close(nll_loss_backward(gout, x, t, Tensor(), reduction, -100, total), {6, 4}, ref.grad, dt);
    }
  }
}

TEST(CpuNllLoss, EmptyAndAllIgnored) {
  Tensor x = make({0, 3}, kFloat32), t = tensor_from_values(std::vector<double>{}, {0}, kInt64);
  EXPECT_TRUE(std::isnan(std::get<0>(nll_loss_forward(x, t, Tensor(), 1, -100)).item_double()));
  EXPECT_EQ(std::get<0>(nll_loss_forward(x, t, Tensor(), 2, -100)).item_double(), 0.0);
  EXPECT_EQ(std::get<0>(nll_loss_forward(x, t, Tensor(), 0, -100)).shape(), Shape{0});
  Tensor x2 = make({2, 3}, kFloat32), t2 = tensor_from_values(std::vector<double>{-1, -1}, {2}, kInt64);
  auto [m, tw] = nll_loss_forward(x2, t2, Tensor(), 1, -1);
  EXPECT_TRUE(std::isnan(m.item_double()));  // 0 / 0, as PyTorch
  EXPECT_EQ(tw.item_double(), 0.0);
  EXPECT_EQ(std::get<0>(nll_loss_forward(x2, t2, Tensor(), 2, -1)).item_double(), 0.0);
  expect_close(nll_loss_backward(ones({}), x2, t2, Tensor(), 1, -1, tw), {2, 3}, std::vector<double>(6, 0.0), kFloat32);
}

TEST(CpuNllLoss, Errors) {
  Tensor x = make({2, 3}, kFloat32);
  Tensor t = tensor_from_values(std::vector<double>{0, 2}, {2}, kInt64);
  Tensor t32 = tensor_from_values(std::vector<double>{0, 2}, {2}, kInt32);
  expect_error<TypeError>([&] { nll_loss_forward(x, t32, Tensor(), 1, -100); },
                          {"nll_loss_forward", "int64", "int32"});
  Tensor bad = tensor_from_values(std::vector<double>{0, 3}, {2}, kInt64);
  expect_error<IndexError>([&] { nll_loss_forward(x, bad, Tensor(), 1, -100); },
                           {"nll_loss_forward", "target 3 is out of bounds", "[0, 3)"});
  Tensor neg = tensor_from_values(std::vector<double>{-5, 0}, {2}, kInt64);
  expect_error<IndexError>([&] { nll_loss_forward(x, neg, Tensor(), 0, -100); }, {"target -5"});
  expect_error<IndexError>([&] { nll_loss_backward(ones({}), x, bad, Tensor(), 2, -100, ones({})); },
                           {"nll_loss_backward", "target 3"});
  expect_error<ValueError>([&] { nll_loss_forward(x, make({3}, kInt64), Tensor(), 1, -100); },
                           {"nll_loss_forward", "target of shape [2]", "got [3]"});
  expect_error<ValueError>([&] { nll_loss_forward(x, t, ones({4}), 1, -100); },
                           {"nll_loss_forward", "weight of shape [3]", "[4]"});
  expect_error<ValueError>([&] { nll_loss_forward(x, t, Tensor(), 3, -100); }, {"nll_loss_forward", "reduction", "3"});
  expect_error<ValueError>([&] { nll_loss_forward(full({}, 1.0), tensor_from_values(std::vector<double>{0}, {}, kInt64), Tensor(), 1, -100); },
                           {"nll_loss_forward", "0-dim"});
  expect_error<TypeError>([&] { nll_loss_forward(t, t, Tensor(), 1, -100); }, {"nll_loss_forward", "floating"});
  expect_error<ValueError>([&] { nll_loss_backward(ones({3}), x, t, Tensor(), 0, -100, ones({})); },
                           {"nll_loss_backward", "grad_output of shape [2]", "[3]"});
  expect_error<ValueError>([&] { nll_loss_backward(ones({}), x, t, Tensor(), 1, -100, ones({2})); },
                           {"nll_loss_backward", "total_weight"});
}

// ---------------------------------------------------------------------------- element-wise losses
double reduce_ref(const std::vector<double>& v, int64_t reduction, std::vector<double>* none_out) {
  if (reduction == 0) {
    *none_out = v;
    return 0;
  }
  double s = 0;
  for (double x : v) s += x;
  return reduction == 1 ? (v.empty() ? std::nan("") : s / double(v.size())) : s;
}

void check_loss(const Tensor& got, const std::vector<double>& elems, const Shape& shape, int64_t reduction, ScalarType dt,
                const std::string& what, double scale = 1) {
  std::vector<double> none;
  const double r = reduce_ref(elems, reduction, &none);
  if (reduction == 0) expect_close(got, shape, none, dt, scale, what);
  else expect_close(got, {}, {r}, dt, scale * (elems.size() > 100 ? 10 : 1), what);
}

TEST(CpuLoss, MseAndL1) {
  for (ScalarType dt : kFloatAll)
    for (const Shape& shape : kShapes)
      for (int64_t reduction : {0, 1, 2}) {
        Tensor x = make(shape, dt, 40), y = make(shape, dt, 41);
        const auto xv = x.to_double_vector(), yv = y.to_double_vector();
        const std::string what = std::string(name(dt)) + " r" + std::to_string(reduction);
        check_loss(mse_loss(x, y, reduction), map2(xv, yv, [](double a, double b) { return (a - b) * (a - b); }), shape,
                   reduction, dt, "mse " + what);
        check_loss(l1_loss(x, y, reduction), map2(xv, yv, [](double a, double b) { return std::abs(a - b); }), shape,
                   reduction, dt, "l1 " + what);
        // Backward: grad * 2 (x - y) [/ n].
        Tensor g = reduction == 0 ? make(shape, dt, 42) : full({}, 1.5, dt);
        const auto gv = g.to_double_vector();
        const double n = double(numel_of(shape));
        std::vector<double> want(xv.size());
        for (size_t i = 0; i < want.size(); ++i)
          want[i] = (reduction == 0 ? gv[i] : gv[0]) * 2 * (xv[i] - yv[i]) / (reduction == 1 ? n : 1);
        expect_close(mse_loss_backward(g, x, y, reduction), shape, want, dt, 1, "mse_backward " + what);
      }
}

TEST(CpuLoss, MseBroadcastStridedAndLarge) {
  Tensor x = make_transposed({3, 4}, kFloat64, 43), y = make({4}, kFloat64, 44);
  const auto xv = x.to_double_vector(), yv = y.to_double_vector();
  std::vector<double> e(12);
  for (size_t i = 0; i < 12; ++i) e[i] = (xv[i] - yv[i % 4]) * (xv[i] - yv[i % 4]);
  check_loss(mse_loss(x, y, 0), e, {3, 4}, 0, kFloat64, "broadcast none");
  check_loss(mse_loss(x, y, 1), e, {3, 4}, 1, kFloat64, "broadcast mean");
  // Above the parallel grain, summed in double: close to the double reference.
  Tensor a = make({1000, 300}, kFloat32, 45), b = make({1000, 300}, kFloat32, 46);
  check_loss(mse_loss(a, b, 2), map2(a.to_double_vector(), b.to_double_vector(), [](double u, double v) { return (u - v) * (u - v); }),
             {}, 2, kFloat32, "large sum");
}

double ref_bce(double x, double t, double w, double pw) {
  const double s = ref_sigmoid(x);
  // The textbook form, in long double so that it is accurate in the range tested.
  const long double ls = std::log((long double)s), l1s = std::log1p(-(long double)s);
  return double(-(long double)w * ((long double)pw * t * ls + (1 - t) * l1s));
}

TEST(CpuLoss, BinaryCrossEntropyWithLogits) {
  for (ScalarType dt : kFloatAll)
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{6}, Shape{3, 4}})
      for (int64_t reduction : {0, 1, 2})
        for (int variant = 0; variant < 4; ++variant) {
          const bool has_w = variant & 1, has_pw = variant & 2;
          Tensor x = make(shape, dt, 50, -6, 6), t = make(shape, dt, 51, 0, 1);
          const int64_t last = shape.empty() ? 1 : shape.back();
          Tensor w = has_w ? make(shape, dt, 52, 0.5, 2) : Tensor();
          Tensor pw = has_pw ? make(shape.empty() ? Shape{} : Shape{last}, dt, 53, 0.5, 3) : Tensor();
          const auto xv = x.to_double_vector(), tv = t.to_double_vector();
          const auto wv = has_w ? w.to_double_vector() : std::vector<double>{};
          const auto pwv = has_pw ? pw.to_double_vector() : std::vector<double>{};
          std::vector<double> e(xv.size());
          for (size_t i = 0; i < e.size(); ++i)
            e[i] = ref_bce(xv[i], tv[i], has_w ? wv[i] : 1, has_pw ? pwv[i % size_t(last)] : 1);
          check_loss(binary_cross_entropy_with_logits(x, t, w, pw, reduction), e, shape, reduction, dt,
                     std::string(name(dt)) + " r" + std::to_string(reduction) + " v" + std::to_string(variant),
                     4);
        }
}

TEST(CpuLoss, BceWithLogitsIsStableForLargeLogits) {
  Tensor x = tensor_from_values(std::vector<double>{-200, -40, 40, 200}, {4}, kFloat32);
  Tensor t = tensor_from_values(std::vector<double>{1, 0, 0, 1}, {4}, kFloat32);
  // -log(sigmoid(-200)) = 200; -log(1 - sigmoid(-40)) ~ 4e-18; -log(1 - sigmoid(40)) ~ 40.
  expect_close(binary_cross_entropy_with_logits(x, t, Tensor(), Tensor(), 0), {4}, {200, 4.248354255291589e-18, 40, 0},
               kFloat32);
  // Strided logits.
  Tensor xs = make_transposed({3, 5}, kFloat64, 54), ts = make({3, 5}, kFloat64, 55, 0, 1);
  const auto xv = xs.to_double_vector(), tv = ts.to_double_vector();
  std::vector<double> e(15);
  for (size_t i = 0; i < 15; ++i) e[i] = ref_bce(xv[i], tv[i], 1, 1);
  check_loss(binary_cross_entropy_with_logits(xs, ts, Tensor(), Tensor(), 1), e, {3, 5}, 1, kFloat64, "strided", 100);
}

TEST(CpuLoss, Errors) {
  Tensor a = make({3}, kFloat32), b = make({4}, kFloat32);
  Tensor i = tensor_from_values(std::vector<double>{1, 2, 3}, {3}, kInt64);
  expect_error<ValueError>([&] { mse_loss(a, b); }, {"mse_loss", "broadcast"});
  expect_error<TypeError>([&] { mse_loss(i, i); }, {"mse_loss", "floating", "int64"});
  expect_error<TypeError>([&] { l1_loss(i, i); }, {"l1_loss", "floating"});
  expect_error<ValueError>([&] { l1_loss(a, a, 5); }, {"l1_loss", "reduction", "5"});
  expect_error<ValueError>([&] { mse_loss_backward(ones({3}), a, a, 1); }, {"mse_loss_backward", "one element"});
  expect_error<ValueError>([&] { binary_cross_entropy_with_logits(a, b); },
                           {"binary_cross_entropy_with_logits", "[3]", "[4]"});
  expect_error<ValueError>([&] { binary_cross_entropy_with_logits(a, a, Tensor(), b); },
                           {"binary_cross_entropy_with_logits", "broadcast"});
  expect_error<TypeError>([&] { binary_cross_entropy_with_logits(i, i); }, {"binary_cross_entropy_with_logits", "int64"});
  expect_error<ValueError>([&] { binary_cross_entropy_with_logits(a, a, Tensor(), Tensor(), -1); }, {"reduction"});
}

}  // namespace
