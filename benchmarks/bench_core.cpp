// Core benchmarks, each printed beside its peer in the same run:
//   dispatcher overhead of a no-op kernel    (target <= 40 ns)
//   add on 4-element tensors, end to end      (target <= 300 ns)
//   add on 16M floats vs a plain C loop       (target >= 80% of the loop)
//   mm 1024 / 2048 vs dnnl_sgemm called directly (target >= 90%)
// Run: build/release/bin/bench_core   (add --benchmark_filter=... to select)
#include <tessera/tessera.h>

#include <benchmark/benchmark.h>
#include <dnnl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

using namespace tessera;

namespace {

// ---- dispatcher overhead: a kernel that returns its argument
ts_status noop_kernel(void*, ts_call, ts_keyset, ts_stack* stack) {
  host_api()->tensor_retain(stack->values[0].u.tensor);
  stack->size = 1;
  return TS_OK;
}

OperatorHandle noop_operator() {
  static OperatorHandle op = [] {
    init();
    auto* o = Dispatcher::instance().def("bench::noop(Tensor self) -> Tensor", "bench");
    Dispatcher::instance().register_kernel("bench::noop", int32_t(DispatchKey::CPU),
                                           KernelEntry{noop_kernel, nullptr, "bench", false});
    return o;
  }();
  return op;
}

void BM_dispatch_noop(benchmark::State& state) {
  OperatorHandle op = noop_operator();
  Tensor x = zeros({1});
  for (auto _ : state) {
    ts_value v[1];
    detail::box(v[0], x);
    ts_stack stack{sizeof(ts_stack), v, 1, 1};
    Dispatcher::instance().call(op, &stack);
    Tensor y = detail::unbox_tensor(v[0]);
    benchmark::DoNotOptimize(y.impl());
  }
}
BENCHMARK(BM_dispatch_noop);

// The same with the profiler plugin loaded: inactive (no observer: the figure must not move)
// and recording (operator events with shapes; a fixed count keeps the buffer bounded).
void call_profiler(const char* op, std::vector<ts_value> args) {
  ts_value returns[1];
  std::copy(args.begin(), args.end(), returns);
  ts_stack stack{sizeof(ts_stack), args.empty() ? returns : args.data(), int32_t(args.size()), 1};
  Dispatcher::instance().call(Dispatcher::instance().find_or_throw(op), &stack);
}
void load_profiler() {
  static bool loaded = load_named_plugin("profiler");
  if (!loaded) throw std::runtime_error("bench_core: libtessera_profiler.so was not found");
}

void BM_dispatch_noop_profiler_inactive(benchmark::State& state) {
  load_profiler();
  BM_dispatch_noop(state);
}
BENCHMARK(BM_dispatch_noop_profiler_inactive);

void BM_dispatch_noop_profiler_recording(benchmark::State& state) {
  load_profiler();
  ts_value yes{TS_VALUE_BOOL, 0, {.b = 1}}, no{TS_VALUE_BOOL, 0, {.b = 0}};
  call_profiler("profiler::start", {yes, no});
  BM_dispatch_noop(state);
  call_profiler("profiler::stop", {});
}
BENCHMARK(BM_dispatch_noop_profiler_recording)->Iterations(200000);

// Peer: a direct call through a function pointer with the same boxing.
void BM_direct_call_peer(benchmark::State& state) {
  Tensor x = zeros({1});
  volatile ts_kernel_fn fn = noop_kernel;
  for (auto _ : state) {
    ts_value v[1];
    detail::box(v[0], x);
    ts_stack stack{sizeof(ts_stack), v, 1, 1};
    fn(nullptr, nullptr, 0, &stack);
    Tensor y = detail::unbox_tensor(v[0]);
    benchmark::DoNotOptimize(y.impl());
  }
}
BENCHMARK(BM_direct_call_peer);

// ---- add, 4 elements, end to end (allocation included)
void BM_add_4(benchmark::State& state) {
  Tensor a = ones({4}), b = ones({4});
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
}
BENCHMARK(BM_add_4);

// ---- add, 16M floats
constexpr int64_t kBig = int64_t(1) << 24;

void BM_add_16M(benchmark::State& state) {
  Tensor a = ones({kBig}), b = ones({kBig});
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  state.SetBytesProcessed(state.iterations() * kBig * 12);
}
BENCHMARK(BM_add_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_add_out_16M(benchmark::State& state) {
  Tensor a = ones({kBig}), b = ones({kBig}), c = empty({kBig});
  for (auto _ : state) {
    add_out(c, a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  state.SetBytesProcessed(state.iterations() * kBig * 12);
}
BENCHMARK(BM_add_out_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

// Peer: a plain C loop over preallocated buffers, on as many threads as the kernel may use.
void BM_c_loop_add_16M(benchmark::State& state) {
  std::vector<float> a(kBig, 1.f), b(kBig, 1.f), c(kBig);
  for (auto _ : state) {
    float* __restrict pc = c.data();
    const float* __restrict pa = a.data();
    const float* __restrict pb = b.data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kBig; ++i) pc[i] = pa[i] + pb[i];
    benchmark::DoNotOptimize(c.data());
  }
  state.SetBytesProcessed(state.iterations() * kBig * 12);
}
BENCHMARK(BM_c_loop_add_16M)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- mm against dnnl_sgemm
void BM_mm(benchmark::State& state) {
  int64_t n = state.range(0);
  Tensor a = rand({n, n}), b = rand({n, n}), c = empty({n, n});
  for (auto _ : state) {
    mm_out(c, a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(n) * n * n * double(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_mm)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_dnnl_sgemm(benchmark::State& state) {
  int64_t n = state.range(0);
  std::vector<float> a(size_t(n * n), 0.5f), b(size_t(n * n), 0.25f), c(size_t(n * n));
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(n) * n * n * double(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_dnnl_sgemm)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

// Collects the median of each benchmark so the summary can print ratios.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (auto& r : runs)
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name == "median")
        ns[strip(r.run_name.str())] = r.GetAdjustedRealTime() * unit_to_ns(r.time_unit);
  }
  static std::string strip(std::string name) {
    const std::string suffix = "/real_time";
    if (name.size() > suffix.size() && name.ends_with(suffix)) name.resize(name.size() - suffix.size());
    return name;
  }
  static double unit_to_ns(benchmark::TimeUnit u) {
    switch (u) {
      case benchmark::kMillisecond: return 1e6;
      case benchmark::kMicrosecond: return 1e3;
      case benchmark::kSecond: return 1e9;
      default: return 1;
    }
  }
  std::map<std::string, double> ns;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  std::string reps = "--benchmark_repetitions=5", agg = "--benchmark_report_aggregates_only=true";
  args.push_back(reps.data());
  args.push_back(agg.data());
  int n = int(args.size());
  benchmark::Initialize(&n, args.data());
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  auto& t = reporter.ns;
  auto row = [&](const char* what, const std::string& ours, const std::string& peer, const char* target,
                 bool higher_is_better_ratio) {
    if (!t.count(ours)) return;
    if (peer.empty()) {
      fmt::print("{:<34} {:>12.1f} ns {:>26} {}\n", what, t[ours], "", target);
      return;
    }
    if (!t.count(peer)) return;
    double ratio = higher_is_better_ratio ? t[peer] / t[ours] : t[ours] / t[peer];
    fmt::print("{:<34} {:>12.1f} ns  peer {:>12.1f} ns  ratio {:>5.2f}  {}\n", what, t[ours], t[peer], ratio, target);
  };
  fmt::print("\nSummary (medians of 5 repetitions; ratio = peer time / Tessera time, higher is better)\n");
  row("dispatch no-op (vs direct call)", "BM_dispatch_noop", "BM_direct_call_peer", "target: Tessera <= 40 ns", true);
  row("  profiler loaded, inactive", "BM_dispatch_noop_profiler_inactive", "BM_dispatch_noop",
      "vs no profiler; target: ratio 1.00", true);
  row("  profiler recording (with shapes)", "BM_dispatch_noop_profiler_recording/iterations:200000", "BM_dispatch_noop",
      "vs no profiler; target: <= 1 us more", true);
  row("add 4 elements end to end", "BM_add_4", "", "target: <= 300 ns", true);
  row("add 16M allocating (vs C loop)", "BM_add_16M", "BM_c_loop_add_16M", "target: ratio >= 0.80", true);
  row("add_out 16M (vs C loop)", "BM_add_out_16M", "BM_c_loop_add_16M", "", true);
  row("mm 1024 (vs dnnl_sgemm)", "BM_mm/1024", "BM_dnnl_sgemm/1024", "", true);
  row("mm 2048 (vs dnnl_sgemm)", "BM_mm/2048", "BM_dnnl_sgemm/2048", "target: ratio >= 0.90", true);
  benchmark::Shutdown();
  return 0;
}
