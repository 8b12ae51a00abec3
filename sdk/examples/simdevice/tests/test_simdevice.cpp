// The simulated device against the CPU: every kernel's result is compared with the CPU plugin's
// result for the same inputs. The plugin is loaded by path: $SIMDEV_PLUGIN, or the one built
// next to this program. With $SIMDEV2_PLUGIN set (a second build, -DSIM_DEVICE_NAME=simdev2),
// the two-device tests load it too.
#include <tessera/device_registry.h>
#include <tessera/tessera.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

namespace ts = tessera;

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

const ts::PluginInfo& simdev_plugin() {
  static const ts::PluginInfo& info = ts::load_plugin(env_or("SIMDEV_PLUGIN", SIMDEV_DEFAULT_PLUGIN));
  return info;
}

ts::Device dev(int index = 0) {
  simdev_plugin();
  return ts::Device(ts::Device("simdev").type(), index);
}

ts::Tensor on(const ts::Tensor& t, ts::Device d) { return ts::to_device(t, d); }

// Same shape, dtype and values (to a relative tolerance) as the CPU reference.
void expect_matches(const ts::Tensor& got, const ts::Tensor& want, double rtol = 1e-6) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype()) << ts::name(got.dtype()) << " vs " << ts::name(want.dtype());
  auto g = got.to_double_vector(), w = want.to_double_vector();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) { EXPECT_TRUE(std::isnan(g[i])) << "at " << i; continue; }
    EXPECT_NEAR(g[i], w[i], rtol * (1 + std::fabs(w[i]))) << "at flat index " << i;
  }
}

ts::Tensor randf(std::vector<int64_t> shape) { return ts::randn(shape); }
ts::Tensor randi(std::vector<int64_t> shape) { return ts::randint(-20, 20, shape); }

// Calls a plugin-defined operator by name through the dispatcher (there is no generated entry point).
ts::Tensor fused_axpy(const std::string& ns, const ts::Tensor& x, const ts::Tensor& y, double alpha) {
  auto op = ts::Dispatcher::instance().find_or_throw(ns + "::fused_axpy");
  ts_value values[3];
  ts::detail::box(values[0], x);
  ts::detail::box(values[1], y);
  ts::detail::box(values[2], alpha);
  ts_stack stack{sizeof(ts_stack), values, 3, 3};
  ts::Dispatcher::instance().call(op, &stack);
  return ts::Tensor::adopt(values[0].u.tensor);
}

TEST(SimDevice, LoadsWithItsDeviceAndCustomOp) {
  const auto& info = simdev_plugin();
  EXPECT_EQ(info.name, "simdev");
  EXPECT_EQ(info.devices, std::vector<std::string>{"simdev"});
  EXPECT_EQ(info.operators_defined, (std::vector<std::string>{"simdev::fused_axpy", "simdev::set_kernel_time_us"}));
  EXPECT_GT(info.kernels, 20);
  const auto* entry = ts::DeviceRegistry::instance().find("simdev");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->desc.host_accessible, 0);
  EXPECT_NE(entry->key, int32_t(ts::DispatchKey::CPU));
}

TEST(SimDevice, MemoryIsOpaqueToTheHost) {
  ts::Tensor t = ts::ones({4}, ts::kFloat32, dev());
  uintptr_t handle = reinterpret_cast<uintptr_t>(t.impl()->data());
  EXPECT_NE(handle >> 48, 0u) << "device pointers must not be host addresses";
  EXPECT_THROW(t.data_ptr<float>(), ts::RuntimeError);
  // Host code that ignores host_accessible and dereferences device memory crashes at once.
  EXPECT_DEATH({ std::printf("%f\n", double(*static_cast<volatile float*>(t.impl()->data()))); }, "");
  // The copies go through the plugin and give the values back.
  EXPECT_EQ(t.to_double_vector(), (std::vector<double>{1, 1, 1, 1}));
}

TEST(SimDevice, Factories) {
  expect_matches(ts::zeros({2, 3}, std::nullopt, dev()), ts::zeros({2, 3}));
  expect_matches(ts::ones({3}, ts::kInt64, dev()), ts::ones({3}, ts::kInt64));
  expect_matches(ts::full({2, 2}, 2.5, std::nullopt, dev()), ts::full({2, 2}, 2.5));
  expect_matches(ts::full({2}, int64_t(7), std::nullopt, dev()), ts::full({2}, int64_t(7)));
  ts::Tensor e = ts::empty({0, 5}, ts::kFloat32, dev());
  EXPECT_EQ(e.shape(), (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(e.device(), dev());
  EXPECT_EQ(ts::zeros({2}, std::nullopt, dev(1)).device(), dev(1));
}

TEST(SimDevice, RoundTripThroughTheCpu) {
  ts::Tensor x = randf({3, 4});
  ts::Tensor d = on(x, dev());
  EXPECT_EQ(d.device(), dev());
  expect_matches(on(d, ts::Device("cpu")), x, 0);
  expect_matches(on(on(d, dev(1)), ts::Device("cpu")), x, 0);  // index 0 -> index 1 via the host
}

TEST(SimDevice, BinaryOpsMatchCpuWithBroadcasting) {
  for (auto dtype : {ts::kFloat32, ts::kInt64}) {
    ts::Tensor a = dtype == ts::kFloat32 ? randf({3, 4}) : randi({3, 4});
    ts::Tensor b = dtype == ts::kFloat32 ? randf({1, 4}) : randi({1, 4});
    ts::Tensor c = dtype == ts::kFloat32 ? randf({3, 1}) : randi({3, 1});
    ts::Tensor da = on(a, dev()), db = on(b, dev()), dc = on(c, dev());
    expect_matches(ts::add(da, db), ts::add(a, b));
    expect_matches(ts::add(da, dc, 3), ts::add(a, c, 3));
    expect_matches(ts::sub(db, dc), ts::sub(b, c));  // [1,4] with [3,1] -> [3,4]
    expect_matches(ts::mul(da, db), ts::mul(a, b));
    if (dtype == ts::kFloat32) expect_matches(ts::div(da, ts::add(ts::mul(db, db), 1.0)), ts::div(a, ts::add(ts::mul(b, b), 1.0)));
    else expect_matches(ts::div(da, ts::add(ts::mul(db, db), int64_t(1))), ts::div(a, ts::add(ts::mul(b, b), int64_t(1))));
  }
  ts::Tensor f = randf({5}), i = randi({5});
  expect_matches(ts::add(on(i, dev()), on(f, dev())), ts::add(i, f));  // int64 + float32 -> float32
  expect_matches(ts::mul(on(i, dev()), 0.5), ts::mul(i, 0.5));         // wrapped number
  expect_matches(ts::sub(on(f, dev()), int64_t(2)), ts::sub(f, int64_t(2)));
  ts::Tensor m = randf({2, 3}), s = ts::full({}, 2.0);  // a 0-dim operand broadcasts
  expect_matches(ts::add(on(m, dev()), on(s, dev())), ts::add(m, s));
}

TEST(SimDevice, UnaryOpsMatchCpu) {
  ts::Tensor x = randf({4, 5});
  ts::Tensor d = on(x, dev());
  expect_matches(ts::neg(d), ts::neg(x));
  expect_matches(ts::exp(d), ts::exp(x), 1e-6);
  expect_matches(ts::relu(d), ts::relu(x));
  ts::Tensor i = randi({6});
  expect_matches(ts::neg(on(i, dev())), ts::neg(i));
  expect_matches(ts::relu(on(i, dev())), ts::relu(i));
}

TEST(SimDevice, ReductionsMatchCpu) {
  ts::Tensor x = randf({3, 4, 5});
  ts::Tensor d = on(x, dev());
  expect_matches(ts::sum(d), ts::sum(x), 1e-5);
  for (int64_t dim : {0, 1, 2, -1})
    for (bool keep : {false, true}) {
      expect_matches(ts::sum(d, std::vector<int64_t>{dim}, keep), ts::sum(x, std::vector<int64_t>{dim}, keep), 1e-5);
      expect_matches(ts::mean(d, std::vector<int64_t>{dim}, keep), ts::mean(x, std::vector<int64_t>{dim}, keep), 1e-5);
    }
  expect_matches(ts::sum(d, std::vector<int64_t>{0, 2}), ts::sum(x, std::vector<int64_t>{0, 2}), 1e-5);
  expect_matches(ts::mean(d), ts::mean(x), 1e-5);
  ts::Tensor i = randi({4, 3});
  expect_matches(ts::sum(on(i, dev()), std::vector<int64_t>{1}), ts::sum(i, std::vector<int64_t>{1}));
  EXPECT_THROW(ts::mean(on(i, dev())), ts::TypeError);
  EXPECT_THROW(ts::sum(d, std::vector<int64_t>{3}), ts::IndexError);
}

TEST(SimDevice, MatmulMatchesCpu) {
  ts::Tensor a = randf({7, 5}), b = randf({5, 3});
  expect_matches(ts::mm(on(a, dev()), on(b, dev())), ts::mm(a, b), 1e-5);
  EXPECT_THROW(ts::mm(on(a, dev()), on(a, dev())), ts::ValueError);
}

TEST(SimDevice, CopiesAndViews) {
  ts::Tensor x = randf({2, 6});
  ts::Tensor d = on(x, dev());
  ts::Tensor v = ts::view(d, {3, -1});
  EXPECT_EQ(v.shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(v.impl()->storage().get(), d.impl()->storage().get()) << "a view shares the arena block";
  expect_matches(v, ts::view(x, {3, 4}), 0);
  expect_matches(ts::reshape(d, {12}), ts::reshape(x, {12}), 0);
  ts::Tensor c = ts::clone(d);
  EXPECT_NE(c.impl()->storage().get(), d.impl()->storage().get());
  expect_matches(c, x, 0);
  expect_matches(ts::contiguous(d), x, 0);
  ts::Tensor z = ts::zeros({2, 6}, std::nullopt, dev());
  ts::copy_(z, d);
  expect_matches(z, x, 0);
  ts::copy_(z, ts::ones({6}));  // from the CPU, broadcast
  expect_matches(z, ts::ones({2, 6}), 0);
  EXPECT_THROW(ts::view(d, {5, 5}), ts::ValueError);
}

TEST(SimDevice, CustomOpOnDeviceAndCpu) {
  ts::Tensor x = randf({4}), y = randf({4});
  ts::Tensor want = ts::add(ts::mul(x, 2.0), y);
  expect_matches(fused_axpy("simdev", x, y, 2.0), want, 1e-6);                          // CPU kernel
  expect_matches(on(fused_axpy("simdev", on(x, dev()), on(y, dev()), 2.0), "cpu"), want, 1e-6);  // device kernel
}

TEST(SimDevice, ErrorsAreClearNotCrashes) {
  ts::Tensor d = ts::ones({3}, std::nullopt, dev());
  try {
    ts::add(d, ts::ones({3}));
    FAIL() << "mixing devices must fail";
  } catch (const ts::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected all tensors on simdev:0"), std::string::npos) << e.what();
  }
  // An operator the plugin lacks: with the host's CPU fallback it runs on the CPU with copies
  // (the device memory is reached only through the plugin's copies); without it, a clear error.
  ts::Tensor x = randf({3});
  try {
    expect_matches(ts::sin(on(x, dev())), ts::sin(x));
  } catch (const ts::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sin"), std::string::npos) << e.what();
  }
  // The arena is 1 GiB per device index: a bigger tensor is an out-of-memory error.
  EXPECT_THROW(ts::empty({int64_t(1) << 29}, ts::kFloat32, dev()), ts::OutOfMemoryError);
}

// ---- two simulated devices at once (a second build of the same plugin)
bool have_simdev2() { return std::getenv("SIMDEV2_PLUGIN") != nullptr; }

TEST(TwoDevices, EachHasItsOwnKeyAndTensorsMoveThroughTheCpu) {
  if (!have_simdev2()) GTEST_SKIP() << "SIMDEV2_PLUGIN not set";
  simdev_plugin();
  const auto& info2 = ts::load_plugin(std::getenv("SIMDEV2_PLUGIN"));
  EXPECT_EQ(info2.devices, std::vector<std::string>{"simdev2"});
  const auto* e1 = ts::DeviceRegistry::instance().find("simdev");
  const auto* e2 = ts::DeviceRegistry::instance().find("simdev2");
  ASSERT_TRUE(e1 && e2);
  EXPECT_NE(e1->key, e2->key);
  auto kernels = ts::Dispatcher::instance().describe_text("add.Tensor");
  EXPECT_NE(kernels.find("simdev2"), std::string::npos) << kernels;

  ts::Tensor x = randf({3, 3}), y = randf({3, 3});
  ts::Tensor a = on(x, dev());
  ts::Tensor b = on(a, ts::Device("simdev2"));  // simdev -> host -> simdev2
  EXPECT_EQ(b.device().type_name(), "simdev2");
  expect_matches(b, x, 0);
  ts::Tensor r2 = ts::mm(b, on(y, "simdev2"));
  ts::Tensor r1 = ts::mm(a, on(y, dev()));
  expect_matches(on(r2, dev()), r1, 1e-6);  // back the other way
  expect_matches(r1, ts::mm(x, y), 1e-5);
  expect_matches(fused_axpy("simdev2", b, b, 1.0), ts::mul(x, 2.0), 1e-6);
  EXPECT_THROW(ts::add(a, b), ts::Error);  // two devices in one call: a clear error
}

}  // namespace
