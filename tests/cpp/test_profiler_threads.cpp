// The profiler under threads: workers call operators and mark ranges in loops while another
// thread starts and stops the profiler and reads the trace. Every trace must be valid JSON with
// each worker's events strictly nested; scripts/test_tsan.sh runs this under ThreadSanitizer.
#include "test_util.h"

#include <tessera/observer.h>
#include <tessera/tessera.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

using namespace tessera;
using tessera::testing::seq;

namespace {
constexpr int kWorkers = 4;
constexpr int kProfiles = 12;

void call_profiler(const char* name, std::vector<ts_value> args, ts_value* ret = nullptr) {
  std::vector<ts_value> slots = args;
  slots.resize(std::max<size_t>(slots.size(), 1));
  ts_stack stack{sizeof(ts_stack), slots.data(), int32_t(args.size()), int32_t(slots.size())};
  Dispatcher::instance().call(Dispatcher::instance().find_or_throw(name), &stack);
  if (ret) *ret = slots[0];
}

std::string trace_json() {
  ts_value ret{};
  call_profiler("profiler::trace_json", {}, &ret);
  return ret.u.str;
}

// Any two complete events of a thread are disjoint or nested.
void expect_nested(const nlohmann::json& trace) {
  std::map<int64_t, std::vector<std::pair<double, double>>> tracks;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] != "kernel")
      tracks[e["tid"].get<int64_t>()].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
  for (auto& [tid, spans] : tracks) {
    std::sort(spans.begin(), spans.end(), [](auto& a, auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<double> open;
    for (auto [begin, end] : spans) {
      constexpr double kUlp = 1e-6;  // ts + dur is summed in double
      while (!open.empty() && open.back() <= begin + kUlp) open.pop_back();
      ASSERT_TRUE(open.empty() || end <= open.back() + kUlp) << "thread " << tid << ": [" << begin << ", " << end
                                                      << "] crosses its parent's end " << open.back();
      open.push_back(end);
    }
  }
}
}  // namespace

TEST(ProfilerThreads, StartStopAndReadWhileWorkersRecord) {
  init();
  ASSERT_TRUE(load_named_plugin("profiler"));
  std::atomic<bool> done{false};
  std::atomic<int> failures{0}, iterations{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w)
    workers.emplace_back([&, w] {
      Tensor x = seq({8, 8}, kFloat32, w);
      while (!done.load()) {
        observe_range(0, "worker_step", -1);
        Tensor y = sum(matmul(x, x), std::vector<int64_t>{1}, false);
        observe_range(1, "", -1);
        if (y.numel() != 8) failures.fetch_add(1);
        iterations.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // leave the profiling thread a core
      }
    });
  ts_value yes{TS_VALUE_BOOL, 0, {.b = 1}};
  int traces_with_work = 0;
  for (int p = 0; p < kProfiles; ++p) {
    call_profiler("profiler::start", {yes, yes});
    // Recording until the workers completed two more steps each (under TSan this takes longer).
    const int target = iterations.load() + 2 * kWorkers;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    bool timed_out = false;
    while (iterations.load() < target && !timed_out) {
      timed_out = std::chrono::steady_clock::now() > deadline;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (timed_out) {
      ADD_FAILURE() << "timed out after 30 s waiting for the workers' steps while profiling";
      call_profiler("profiler::stop", {});
      break;
    }
    if (p % 2) (void)trace_json();  // read while recording
    call_profiler("profiler::stop", {});
    nlohmann::json trace = nlohmann::json::parse(trace_json());
    expect_nested(trace);
    for (const auto& e : trace["traceEvents"])
      if (e["name"] == "worker_step") {
        ++traces_with_work;
        break;
      }
  }
  done.store(true);
  for (auto& t : workers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(traces_with_work, kProfiles);  // every profile saw complete worker steps
  EXPECT_EQ(observer(), nullptr);
}
