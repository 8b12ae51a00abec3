// Threads: workers call operators in loops (the dispatcher's call path takes no lock) while
// another thread loads plugins, defines operators and registers kernels. Results are checked;
// scripts/test_tsan.sh runs this under ThreadSanitizer.
#include "test_util.h"

#include <tessera/boxing.h>
#include <tessera/tessera.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

using namespace tessera;
using tessera::testing::seq;

namespace {
constexpr int kWorkers = 4;
constexpr int kIterations = 100;  // per worker; each iteration runs kOpsPerIteration operators
constexpr int kOpsPerIteration = 8;
constexpr int kNewOperators = 20;

std::string fixture(const char* name) { return std::string(TESSERA_FIXTURE_DIR) + "/libtessera_" + name + ".so"; }

// The kernel the loader thread registers for its new operators: returns its input.
ts_status identity_kernel(void*, ts_call, ts_keyset, ts_stack* stack) {
  host_api()->tensor_retain(stack->values[0].u.tensor);
  stack->size = 1;
  return TS_OK;
}

// Runs add, matmul, sum, softmax on a small and a medium tensor and checks each result.
int run_worker(int seed) {
  int failures = 0;
  Tensor small = seq({4, 4}, kFloat32, seed);
  Tensor medium = ones({64, 64});
  for (int i = 0; i < kIterations; ++i) {
    auto check = [&](bool ok) { failures += ok ? 0 : 1; };
    check(add(small, small).to_double_vector()[5] == 2 * (seed + 5));
    check(add(medium, medium).to_double_vector()[4095] == 2);
    check(matmul(medium, medium).to_double_vector()[0] == 64);
    check(matmul(small, ones({4, 1})).to_double_vector()[0] == 4 * seed + 6);
    check(sum(medium).to_double_vector()[0] == 4096);
    check(sum(small, std::vector<int64_t>{1}).to_double_vector()[0] == 4 * seed + 6);
    check(std::abs(softmax(medium, 1).to_double_vector()[0] - 1.0 / 64) < 1e-6);
    auto s = softmax(small, 0).to_double_vector();
    check(std::abs(s[0] + s[4] + s[8] + s[12] - 1) < 1e-5);
  }
  return failures;
}
}  // namespace

TEST(Threads, OperatorsWhilePluginsLoadAndKernelsRegister) {
  init();
  ones({1});  // the CPU plugin is in before the race starts; the rest loads during it
  std::atomic<int> failures{0};
  std::atomic<bool> started{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w)
    workers.emplace_back([&, w] {
      while (!started.load()) std::this_thread::yield();
      failures += run_worker(w);
    });

  std::thread loader([&] {
    started = true;
    EXPECT_EQ(load_plugin(fixture("good")).name, "good");
    EXPECT_EQ(load_plugin(fixture("lazydev")).name, "lazydev");
    auto& d = Dispatcher::instance();
    for (int i = 0; i < kNewOperators; ++i) {
      std::string name = fmt::format("threads::op{}", i);
      d.def(name + "(Tensor self) -> Tensor", "threads-test");
      d.register_kernel(name, int32_t(DispatchKey::CPU), KernelEntry{identity_kernel, nullptr, "threads-test", false});
      // Call it at once, through the same lock-free path the workers use.
      Tensor x = ones({2});
      ts_value v[1];
      detail::box(v[0], x);
      ts_stack stack{sizeof(ts_stack), v, 1, 1};
      d.call(d.find_or_throw(name), &stack);
      Tensor out = detail::unbox_tensor(v[0]);
      EXPECT_EQ(out.to_double_vector(), (std::vector<double>{1, 1}));
    }
  });

  loader.join();
  for (auto& t : workers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_NE(Dispatcher::instance().find("test::double_it"), nullptr);
  EXPECT_NE(Dispatcher::instance().find(fmt::format("threads::op{}", kNewOperators - 1)), nullptr);
  // The figure scripts/test_tsan.sh reports.
  RecordProperty("threads_x_operations",
                 fmt::format("{}x{}", kWorkers, kIterations * kOpsPerIteration));
}

// Generators: a thread's current generator (GeneratorGuard) feeds only that thread's kernels; a
// generator shared by threads hands out each seed once (its mutex), so reseeding reproduces the
// whole set of draws whatever the interleaving.
TEST(Threads, GeneratorsAreThreadLocalAndShareSafely) {
  auto draws = [](uint64_t seed) {
    Generator g;
    g.manual_seed(seed);
    GeneratorGuard use(g);
    std::vector<double> out;
    for (int i = 0; i < 20; ++i) out.push_back(sum(rand({4})).item_double());
    return out;
  };
  const std::vector<double> alone = draws(7);
  std::vector<std::vector<double>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { results[size_t(t)] = draws(t == 0 ? 7 : 100 + t); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(results[0], alone);  // other threads' generators did not touch this one's stream

  Generator shared;
  shared.manual_seed(11);
  std::vector<uint64_t> seen[2];
  std::thread a([&] { for (int i = 0; i < 500; ++i) seen[0].push_back(shared.next()); });
  std::thread b([&] { for (int i = 0; i < 500; ++i) seen[1].push_back(shared.next()); });
  a.join();
  b.join();
  shared.manual_seed(11);
  std::vector<uint64_t> expected, got;
  for (int i = 0; i < 1000; ++i) expected.push_back(shared.next());
  got = seen[0];
  got.insert(got.end(), seen[1].begin(), seen[1].end());
  std::sort(got.begin(), got.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(got, expected);
  std::string state = shared.state();
  uint64_t next = shared.next();
  shared.set_state(state);
  EXPECT_EQ(shared.next(), next);
  EXPECT_THROW(shared.set_state("not a state"), ValueError);
}
