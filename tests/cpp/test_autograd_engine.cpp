// The autograd plugin (libtessera_autograd.so) driven from C++ through the dispatcher and its
// autograd:: operators: gradients against hand-derived formulas, backward on separate graphs from
// many threads, plain operators running while other threads record, and a training loop whose
// graphs are built and freed every step (the LeakSanitizer case of scripts/test_asan.sh).
#include "test_util.h"

#include <tessera/runtime.h>

#include <array>
#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

using namespace tessera;
using tessera::testing::expect_error;

namespace {

// ---------------------------------------------------------------- boxed calls of autograd::*

OperatorHandle autograd_op(const char* name) {
  static std::once_flag loaded;
  std::call_once(loaded, [] { load_plugin(std::string(TESSERA_PLUGIN_DIR) + "/libtessera_autograd.so"); });
  return Dispatcher::instance().find_or_throw(std::string("autograd::") + name);
}

// A stack with room for the returns; `size` values are the arguments.
struct Call {
  std::array<ts_value, 8> v{};
  ts_stack stack{sizeof(ts_stack), v.data(), 0, 8};
  void run(const char* name, int size) {
    stack.size = size;
    Dispatcher::instance().call(autograd_op(name), &stack);
  }
};

const Tensor& requires_grad(const Tensor& t) {
  Call c;
  detail::box(c.v[0], t);
  detail::box(c.v[1], true);
  c.run("requires_grad_", 2);
  detail::unbox_tensor(c.v[0]);  // drops the returned reference to `t`
  return t;
}

bool requires_grad_of(const Tensor& t) {
  Call c;
  detail::box(c.v[0], t);
  c.run("requires_grad", 1);
  return c.v[0].u.b != 0;
}

Tensor grad_of(const Tensor& t) {
  Call c;
  detail::box(c.v[0], t);
  c.run("get_grad", 1);
  return c.stack.size >= 1 ? detail::unbox_tensor(c.v[0]) : Tensor();
}

void clear_grad(const Tensor& t) {
  Call c;
  detail::box(c.v[0], t);
  c.v[1].tag = TS_VALUE_NONE;
  c.run("set_grad", 2);
}

void backward(const Tensor& root, bool retain_graph = false, const Tensor& seed = Tensor()) {
  std::vector<Tensor> roots{root};
  std::vector<Tensor> seeds;
  if (seed.defined()) seeds.push_back(seed);
  Call c;
  detail::box(c.v[0], roots);
  detail::box(c.v[1], seeds);  // empty: implicit ones for a scalar root
  detail::box(c.v[2], retain_graph);
  detail::box(c.v[3], false);
  c.v[4].tag = TS_VALUE_NONE;
  c.run("backward", 5);
}

// autograd.grad: the gradients of `outputs` w.r.t. `inputs`, without touching .grad.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         bool create_graph = false) {
  std::vector<Tensor> seeds;
  Call c;
  detail::box(c.v[0], outputs);
  detail::box(c.v[1], inputs);
  detail::box(c.v[2], seeds);
  detail::box(c.v[3], create_graph);  // retain_graph follows create_graph, as in PyTorch
  detail::box(c.v[4], create_graph);
  detail::box(c.v[5], false);
  c.run("grad", 6);
  std::vector<Tensor> out;
  EXPECT_EQ(c.v[0].tag, TS_VALUE_TENSOR_LIST);
  for (int64_t i = 0; i < c.v[0].u.tensors.size; ++i)  // new references: adopt them
    out.push_back(c.v[0].u.tensors.data[i] ? Tensor::adopt(c.v[0].u.tensors.data[i]) : Tensor());
  return out;
}

bool set_grad_enabled(bool enabled) {
  Call c;
  detail::box(c.v[0], enabled);
  c.run("set_grad_enabled", 1);
  return c.v[0].u.b != 0;
}

// torch.no_grad(): thread-local, restores the previous mode.
struct NoGrad {
  bool previous = set_grad_enabled(false);
  ~NoGrad() { set_grad_enabled(previous); }
};

// ---------------------------------------------------------------- reference helpers

// Deterministic pseudo-random values in [lo, hi).
std::vector<double> values(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::vector<double> v(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * double(s >> 11) / double(uint64_t(1) << 53);
  }
  return v;
}

// Row-major matrix product of [n, k] and [k, m].
std::vector<double> matmul_ref(const std::vector<double>& a, const std::vector<double>& b, int64_t n, int64_t k,
                               int64_t m) {
  std::vector<double> c(size_t(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < m; ++j) c[size_t(i * m + j)] += a[size_t(i * k + p)] * b[size_t(p * m + j)];
  return c;
}

std::vector<double> transpose_ref(const std::vector<double>& a, int64_t rows, int64_t cols) {
  std::vector<double> t(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[size_t(j * rows + i)] = a[size_t(i * cols + j)];
  return t;
}

// Number of mismatches of `got` against `want` (rtol + atol); fills `why` with the first.
int mismatches(const Tensor& got, const std::vector<double>& want, double tol, std::string* why = nullptr) {
  if (!got.defined()) {
    if (why) *why = "gradient is undefined";
    return 1;
  }
  std::vector<double> g = got.to_double_vector();
  if (g.size() != want.size()) {
    if (why) *why = fmt::format("size {} != {}", g.size(), want.size());
    return 1;
  }
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - want[i]) <= tol * (1 + std::abs(want[i])))) {
      if (!bad && why) *why = fmt::format("element {}: got {}, expected {}", i, g[i], want[i]);
      ++bad;
    }
  return bad;
}

void expect_close(const Tensor& got, const std::vector<double>& want, double tol) {
  std::string why;
  EXPECT_EQ(mismatches(got, want, tol, &why), 0) << why;
}

double tol_of(ScalarType dtype) { return dtype == kFloat64 ? 1e-10 : 2e-5; }

class AutogradEngine : public ::testing::TestWithParam<ScalarType> {};

}  // namespace

// ---------------------------------------------------------------- gradients vs hand formulas

// f = sum(x*y + sin(x)*exp(y) + log(y)/x):
//   df/dx = y + cos(x) exp(y) - log(y)/x^2,   df/dy = x + sin(x) exp(y) + 1/(x y)
TEST_P(AutogradEngine, ElementwiseGradientsMatchHandFormulas) {
  ScalarType dt = GetParam();
  for (std::vector<int64_t> shape : {std::vector<int64_t>{7}, {2, 3}, {2, 3, 4}}) {
    size_t n = size_t(tessera::testing::numel_of(shape));
    auto xv = values(n, 1, 0.5, 1.5), yv = values(n, 2, 0.5, 2.0);
    Tensor x = requires_grad(tensor_from_values(xv, shape, dt));
    Tensor y = requires_grad(tensor_from_values(yv, shape, dt));
    Tensor f = sum(add(add(mul(x, y), mul(sin(x), exp(y))), div(log(y), x)));
    EXPECT_TRUE(requires_grad_of(f));
    backward(f);
    std::vector<double> dx(n), dy(n);
    for (size_t i = 0; i < n; ++i) {
      dx[i] = yv[i] + std::cos(xv[i]) * std::exp(yv[i]) - std::log(yv[i]) / (xv[i] * xv[i]);
      dy[i] = xv[i] + std::sin(xv[i]) * std::exp(yv[i]) + 1 / (xv[i] * yv[i]);
    }
    Tensor gx = grad_of(x), gy = grad_of(y);
    ASSERT_TRUE(gx.defined() && gy.defined());
    EXPECT_EQ(gx.dtype(), dt);
    EXPECT_EQ(gx.shape(), shape);
    expect_close(gx, dx, tol_of(dt));
    expect_close(gy, dy, tol_of(dt));
  }
}

// f = sum(tanh(A @ B + b)) with A a transposed (non-contiguous) view of a leaf A0:
//   G = 1 - tanh(Z)^2,  dA = G B^T (so dA0 = (G B^T)^T),  dB = A^T G,  db = column sums of G.
TEST_P(AutogradEngine, MatmulThroughAViewWithBroadcastBias) {
  ScalarType dt = GetParam();
  const int64_t n = 3, k = 4, m = 2;
  auto a0v = values(size_t(k * n), 3), bv = values(size_t(k * m), 4), biasv = values(size_t(m), 5);
  Tensor a0 = requires_grad(tensor_from_values(a0v, {k, n}, dt));
  Tensor b = requires_grad(tensor_from_values(bv, {k, m}, dt));
  Tensor bias = requires_grad(tensor_from_values(biasv, {m}, dt));
  Tensor a = transpose(a0, 0, 1);
  ASSERT_FALSE(a.is_contiguous());
  backward(sum(tanh(add(mm(a, b), bias))));

  auto av = transpose_ref(a0v, k, n);
  auto z = matmul_ref(av, bv, n, k, m);
  std::vector<double> g(z.size()), dbias(size_t(m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double t = std::tanh(z[size_t(i * m + j)] + biasv[size_t(j)]);
      g[size_t(i * m + j)] = 1 - t * t;
      dbias[size_t(j)] += 1 - t * t;
    }
  auto da = matmul_ref(g, transpose_ref(bv, k, m), n, m, k);  // [n, k]
  expect_close(grad_of(a0), transpose_ref(da, n, k), tol_of(dt));
  expect_close(grad_of(b), matmul_ref(transpose_ref(av, n, k), g, k, n, m), tol_of(dt));
  expect_close(grad_of(bias), dbias, tol_of(dt));
}

// Batched matmul [batch, n, k] @ [k, m]: dA[b] = G B^T, dB = sum_b A[b]^T G with G = 1 (sum).
TEST_P(AutogradEngine, BatchedMatmulSumsTheSharedOperandsGradient) {
  ScalarType dt = GetParam();
  const int64_t batch = 3, n = 2, k = 4, m = 5;
  auto av = values(size_t(batch * n * k), 6), bv = values(size_t(k * m), 7);
  Tensor a = requires_grad(tensor_from_values(av, {batch, n, k}, dt));
  Tensor b = requires_grad(tensor_from_values(bv, {k, m}, dt));
  backward(sum(matmul(a, b)));
  std::vector<double> da(av.size()), db(bv.size(), 0.0);
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < k; ++p) {
        double row_sum = 0;
        for (int64_t j = 0; j < m; ++j) row_sum += bv[size_t(p * m + j)];
        da[size_t((s * n + i) * k + p)] = row_sum;
        for (int64_t j = 0; j < m; ++j) db[size_t(p * m + j)] += av[size_t((s * n + i) * k + p)];
      }
  expect_close(grad_of(a), da, tol_of(dt));
  expect_close(grad_of(b), db, tol_of(dt));
}

TEST_P(AutogradEngine, ZeroSizeLeafGetsAZeroSizeGradient) {
  ScalarType dt = GetParam();
  Tensor x = requires_grad(zeros({0, 3}, dt));
  backward(sum(mul(x, 2.0)));
  Tensor g = grad_of(x);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.shape(), (std::vector<int64_t>{0, 3}));
}

// Gradients accumulate over backward calls; retain_graph keeps the saved tensors for a second
// pass; without it the second pass is a clear error.
TEST_P(AutogradEngine, AccumulationAndRetainGraph) {
  ScalarType dt = GetParam();
  auto xv = values(5, 8);
  Tensor x = requires_grad(tensor_from_values(xv, {5}, dt));
  Tensor f = sum(mul(x, x));  // df/dx = 2x
  backward(f, /*retain_graph=*/true);
  backward(f);
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) want[i] = 4 * xv[i];
  expect_close(grad_of(x), want, tol_of(dt));
  expect_error<Error>([&] { backward(f); }, {"backward through the graph a second time", "retain_graph=True"});
  clear_grad(x);
  EXPECT_FALSE(grad_of(x).defined());
}

// autograd.grad leaves .grad alone; create_graph makes the gradient differentiable again:
// d/dx sum(x^3) = 3x^2, and d/dx sum(3x^2) = 6x.
TEST_P(AutogradEngine, GradAndSecondOrderWithCreateGraph) {
  ScalarType dt = GetParam();
  auto xv = values(6, 9);
  Tensor x = requires_grad(tensor_from_values(xv, {2, 3}, dt));
  Tensor f = sum(mul(mul(x, x), x));
  auto first = grad({f}, {x}, /*create_graph=*/true);
  ASSERT_EQ(first.size(), 1u);
  std::vector<double> d1(xv.size()), d2(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    d1[i] = 3 * xv[i] * xv[i];
    d2[i] = 6 * xv[i];
  }
  expect_close(first[0], d1, tol_of(dt));
  EXPECT_TRUE(requires_grad_of(first[0]));
  auto second = grad({sum(first[0])}, {x});
  expect_close(second[0], d2, tol_of(dt));
  EXPECT_FALSE(grad_of(x).defined());  // grad() does not accumulate
}

TEST_P(AutogradEngine, NoGradRecordsNothingAndIsPerThread) {
  ScalarType dt = GetParam();
  Tensor x = requires_grad(ones({3}, dt));
  {
    NoGrad guard;
    EXPECT_FALSE(requires_grad_of(mul(x, x)));
    bool other_thread_records = false;
    std::thread([&] { other_thread_records = requires_grad_of(mul(x, 2.0)); }).join();
    EXPECT_TRUE(other_thread_records);  // grad mode is thread-local
  }
  EXPECT_TRUE(requires_grad_of(mul(x, x)));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AutogradEngine, ::testing::Values(kFloat32, kFloat64),
                         [](const auto& info) { return std::string(name(info.param)); });

// Misuse is a clear error, never a crash (counted among the bad-input cases).
TEST(AutogradEngineErrors, MisuseIsAClearError) {
  Tensor plain = ones({3});
  expect_error<Error>([&] { backward(sum(plain)); }, {"does not require grad"});
  expect_error<Error>([] { requires_grad(ones({3}, kInt64)); }, {"requires_grad_", "floating point", "int64"});
  Tensor x = requires_grad(ones({2, 2}));
  expect_error<Error>([&] { backward(mul(x, 2.0)); }, {"implicitly created only for scalar outputs", "[2, 2]"});
  expect_error<Error>([&] { grad({sum(x)}, {}); }, {"grad requires at least one input"});
  Call c;
  detail::box(c.v[0], x);
  Tensor wrong = ones({3});
  detail::box(c.v[1], wrong);
  expect_error<ValueError>([&] { c.run("set_grad", 2); }, {"set_grad", "different size"});
  // Still usable afterwards.
  backward(sum(x));
  expect_close(grad_of(x), {1, 1, 1, 1}, 0);
}

// ---------------------------------------------------------------- threads

namespace {
struct Failures {
  std::atomic<int> count{0};
  std::mutex mutex;
  std::string first;
  void add(const std::string& why) {
    if (count.fetch_add(1) == 0) {
      std::lock_guard lock(mutex);
      first = why;
    }
  }
};

// One iteration of a thread's own graph: loss = sum(sin(x*w) + x*x) + sum(X @ W), checked:
//   dx = w cos(xw) + 2x, dw = x cos(xw), dX[i][p] = sum_j W[p][j], dW[p][j] = sum_i X[i][p].
void one_graph(ScalarType dt, uint64_t seed, Failures& failures) {
  const int64_t n = 16, r = 4, k = 5, m = 3;
  auto xv = values(n, seed), wv = values(n, seed + 1), Xv = values(r * k, seed + 2), Wv = values(k * m, seed + 3);
  Tensor x = requires_grad(tensor_from_values(xv, {n}, dt));
  Tensor w = requires_grad(tensor_from_values(wv, {n}, dt));
  Tensor X = requires_grad(tensor_from_values(Xv, {r, k}, dt));
  Tensor W = requires_grad(tensor_from_values(Wv, {k, m}, dt));
  Tensor xw = mul(x, w);
  backward(add(sum(add(sin(xw), mul(x, x))), sum(mm(X, W))));
  std::vector<double> dx(n), dw(n), dX(size_t(r * k)), dW(size_t(k * m));
  for (int64_t i = 0; i < n; ++i) {
    double c = std::cos(xv[size_t(i)] * wv[size_t(i)]);
    dx[size_t(i)] = wv[size_t(i)] * c + 2 * xv[size_t(i)];
    dw[size_t(i)] = xv[size_t(i)] * c;
  }
  for (int64_t p = 0; p < k; ++p) {
    double row = 0, col = 0;
    for (int64_t j = 0; j < m; ++j) row += Wv[size_t(p * m + j)];
    for (int64_t i = 0; i < r; ++i) col += Xv[size_t(i * k + p)];
    for (int64_t i = 0; i < r; ++i) dX[size_t(i * k + p)] = row;
    for (int64_t j = 0; j < m; ++j) dW[size_t(p * m + j)] = col;
  }
  std::string why;
  double tol = tol_of(dt);
  if (mismatches(grad_of(x), dx, tol, &why) || mismatches(grad_of(w), dw, tol, &why) ||
      mismatches(grad_of(X), dX, tol, &why) || mismatches(grad_of(W), dW, tol, &why))
    failures.add(fmt::format("seed {}: {}", seed, why));
}
}  // namespace

// Found here: when the first use of "cpu" came from 8 threads at once, the threads that waited
// while one loaded the CPU plugin got "operator 'empty' has no kernel for dispatch key 'CPU'; it
// has kernels for: [CPU]". Meaningful only in a fresh process (ctest runs each test in its own).
TEST(AutogradEngineThreads, FirstUseOfTheCpuPluginFromEightThreads) {
  for (const PluginInfo& p : loaded_plugins())
    if (p.name == "cpu") GTEST_SKIP() << "the CPU plugin is loaded already (run this test alone)";
  Failures failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      try {
        std::vector<double> want(4, double(t));
        if (ones({4}).to_double_vector() != std::vector<double>(4, 1.0) ||
            add(zeros({4}, kFloat64), double(t)).to_double_vector() != want)
          failures.add("wrong values");
      } catch (const std::exception& e) {
        failures.add(e.what());
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.count.load(), 0) << failures.first;
}

// Eight threads, each backward-ing its own graphs, all at once.
TEST(AutogradEngineThreads, BackwardFromEightThreadsOnSeparateGraphs) {
  autograd_op("backward");  // load the plugin before the threads start
  constexpr int kThreads = 8, kIterations = 150;
  Failures failures;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int it = 0; it < kIterations; ++it) {
        try {
          one_graph(t % 2 ? kFloat64 : kFloat32, uint64_t(t * 100000 + it * 10), failures);
          done.fetch_add(1);
        } catch (const std::exception& e) {
          failures.add(e.what());
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.count.load(), 0) << failures.first;
  EXPECT_EQ(done.load(), kThreads * kIterations);
  ::testing::Test::RecordProperty("threads_x_backwards", kThreads * kIterations);
}

// Plain operators (on tensors that need no grad, some shared by every thread), under no_grad or
// not, run while other threads record and run backward.
TEST(AutogradEngineThreads, OperatorsFromOtherThreadsWhileAutogradRecords) {
  autograd_op("backward");
  constexpr int kRecorders = 4, kPlain = 3, kIterations = 400;
  auto sv = values(12, 77);
  const Tensor shared = tensor_from_values(sv, {3, 4}, kFloat64);  // read by all threads
  Failures failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kRecorders; ++t)
    threads.emplace_back([&, t] {
      for (int it = 0; it < kIterations; ++it) {
        try {
          // Uses `shared` as a constant inside a recorded graph: d/dx sum(x * shared) = shared.
          Tensor x = requires_grad(tensor_from_values(values(12, uint64_t(t * 1000 + it)), {3, 4}, kFloat64));
          backward(sum(mul(x, shared)));
          std::string why;
          if (mismatches(grad_of(x), sv, 1e-12, &why)) failures.add("recorder: " + why);
        } catch (const std::exception& e) {
          failures.add(e.what());
        }
      }
    });
  for (int t = 0; t < kPlain; ++t)
    threads.emplace_back([&, t] {
      auto want = matmul_ref(sv, transpose_ref(sv, 3, 4), 3, 4, 3);
      for (int it = 0; it < kIterations; ++it) {
        try {
          std::optional<NoGrad> guard;
          if (t == 0) guard.emplace();  // one thread in no_grad, the others with grad mode on
          Tensor p = mm(shared, transpose(shared, 0, 1));
          std::string why;
          if (mismatches(p, want, 1e-12, &why)) failures.add("plain: " + why);
          if (requires_grad_of(p)) failures.add("plain: a result of tensors without grad requires grad");
        } catch (const std::exception& e) {
          failures.add(e.what());
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.count.load(), 0) << failures.first;
}

// ---------------------------------------------------------------- training loop

// A 2-layer MLP (4 -> 16 -> 1, tanh) fitted to y = sin(x0) + x1*x2 - x3/2 by SGD for 300 steps.
// Every step builds a graph, runs backward and drops it; parameters are updated in place under
// no_grad and their .grad cleared. Under the asan preset LeakSanitizer checks nothing leaks.
TEST(AutogradEngineTraining, MlpTrainingLoopConvergesAndReleasesItsGraphs) {
  const int64_t batch = 32, in = 4, hidden = 16;
  auto xv = values(size_t(batch * in), 11);
  std::vector<double> yv(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) {
    const double* r = &xv[size_t(i * in)];
    yv[size_t(i)] = std::sin(r[0]) + r[1] * r[2] - r[3] / 2;
  }
  Tensor X = tensor_from_values(xv, {batch, in});
  Tensor Y = tensor_from_values(yv, {batch, 1});
  auto scaled = [](std::vector<double> v, double s) {
    for (auto& e : v) e *= s;
    return v;
  };
  Tensor W1 = requires_grad(tensor_from_values(scaled(values(size_t(in * hidden), 12), 0.5), {in, hidden}));
  Tensor b1 = requires_grad(zeros({hidden}));
  Tensor W2 = requires_grad(tensor_from_values(scaled(values(size_t(hidden), 13), 0.5), {hidden, 1}));
  Tensor b2 = requires_grad(zeros({1}));
  const std::vector<Tensor> params{W1, b1, W2, b2};
  auto forward_loss = [&] { return mse_loss(add(mm(tanh(add(mm(X, W1), b1)), W2), b2), Y); };

  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    Tensor loss = forward_loss();
    if (step == 0) first = loss.item_double();
    backward(loss);
    NoGrad guard;
    for (const Tensor& p : params) {
      Tensor g = grad_of(p);
      ASSERT_TRUE(g.defined()) << "step " << step;
      sub_(p, g, 0.2);
      clear_grad(p);
    }
  }
  {
    NoGrad guard;
    last = forward_loss().item_double();
  }
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_LT(last, 0.2 * first) << "first loss " << first << ", last " << last;
  for (const Tensor& p : params) EXPECT_EQ(p.impl()->use_count(), 2) << "a graph still holds a parameter";
}
