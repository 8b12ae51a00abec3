// tessera::profiler from C++: a profiled forward and backward, read back from its Chrome trace
// with nlohmann::json: the user range, the operators with shapes, backward nodes and memory.
#include "test_util.h"

#include <tessera/tessera.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace ts = tessera;
using tessera::Tensor;
using tessera::testing::expect_error;
using tessera::testing::seq;

namespace {
const nlohmann::json* find_event(const nlohmann::json& trace, const std::string& name) {
  for (const auto& e : trace["traceEvents"])
    if (e.value("name", "") == name && e.value("ph", "") == "X") return &e;
  return nullptr;
}
}  // namespace

TEST(CppProfiler, RecordsRangesOperatorsBackwardAndMemory) {
  Tensor w = seq({3, 4}, ts::kFloat32).requires_grad_();
  Tensor x = seq({2, 3}, ts::kFloat32, 1);
  (ts::matmul(x, w).relu().sum()).backward();  // warm: plugins loaded
  {
    ts::profiler::Profile prof({.record_shapes = true, .profile_memory = true});
    EXPECT_TRUE(ts::profiler::is_active());
    {
      ts::profiler::RecordFunction step("step");
      ts::matmul(x, w).relu().sum().backward();
    }
    prof.stop();
    EXPECT_FALSE(ts::profiler::is_active());
    const auto path = std::filesystem::temp_directory_path() / "tessera_cpp_profiler_trace.json";
    prof.export_chrome_trace(path.string());
    std::ifstream in(path);
    nlohmann::json trace = nlohmann::json::parse(in);
    std::filesystem::remove(path);

    const nlohmann::json* step = find_event(trace, "step");
    ASSERT_NE(step, nullptr) << trace.dump(1);
    EXPECT_EQ((*step)["cat"], "user_annotation");
    const nlohmann::json* relu = find_event(trace, "aten::relu");
    ASSERT_NE(relu, nullptr);
    EXPECT_EQ(relu->at("args").at("Input Dims"), nlohmann::json::parse("[[2, 4]]"));
    EXPECT_GE(relu->at("ts").get<double>(), step->at("ts").get<double>());
    EXPECT_LE(relu->at("ts").get<double>() + relu->at("dur").get<double>(),
              step->at("ts").get<double>() + step->at("dur").get<double>());
    EXPECT_NE(find_event(trace, "autograd::engine::evaluate_function: ReluBackward"), nullptr);
    int memory = 0, flows = 0;
    for (const auto& e : trace["traceEvents"]) {
      memory += e.value("name", "") == "[memory]";
      flows += e.value("ph", "") == "s";
    }
    EXPECT_GT(memory, 0);
    EXPECT_GT(flows, 0);
  }
  // After the profile: nothing records, and a second profile starts clean.
  ts::profiler::start();
  expect_error<ts::RuntimeError>([] { ts::profiler::start(); }, {"already recording"});
  ts::profiler::stop();
  nlohmann::json empty = nlohmann::json::parse(ts::profiler::trace_json());
  EXPECT_EQ(find_event(empty, "step"), nullptr);
  expect_error<ts::RuntimeError>([] { ts::profiler::export_chrome_trace("/nonexistent-dir/trace.json"); },
                                 {"cannot write", "/nonexistent-dir/trace.json"});
}
