// The CPU fallback, on the fallback_device fixture: a device whose memory the host cannot read
// and which registers only empty, copy_ and add.Tensor. Everything else runs on CPU with copies.
#include <tessera/cpu_fallback.h>
#include <tessera/device_registry.h>

#include "test_util.h"

#include <cstdlib>

using namespace tessera;
using tessera::testing::expect_error;
using tessera::testing::seq;

namespace {
Device fbdev() {
  static bool loaded = [] {
    load_plugin(std::string(TESSERA_FIXTURE_DIR) + "/libtessera_fallback_device.so");
    return true;
  }();
  (void)loaded;
  return Device("fallbackdev");
}
Tensor on_dev(const Tensor& t) { return to_device(t, fbdev()); }
std::vector<double> values(const Tensor& t) { return t.to_double_vector(); }  // reads through copy_to_host

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

class CpuFallback : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("TESSERA_CPU_FALLBACK");
    reset_cpu_fallback();
  }
  void TearDown() override { reset_cpu_fallback(); }
};
}  // namespace

TEST_F(CpuFallback, PluginLearnsItsDeviceTypeIdFromTheHost) {
  Device d = fbdev();
  const ts_host_api* api = host_api();
  EXPECT_EQ(api->device_type_id("fallbackdev"), d.type());  // the fixture's tensors carry this type
  EXPECT_EQ(on_dev(seq({2})).device().type(), d.type());
  EXPECT_EQ(api->device_type_id("cpu"), 0);
  EXPECT_EQ(api->device_type_id("no-such-device"), -1);
  EXPECT_EQ(api->device_type_id(nullptr), -1);
  // Asking reserves nothing: the name is still unknown afterwards.
  EXPECT_EQ(DeviceRegistry::instance().find_type_id("no-such-device"), -1);
}

TEST_F(CpuFallback, DeviceMemoryIsNotHostReadable) {
  Tensor x = on_dev(seq({2, 3}));
  EXPECT_EQ(x.device(), fbdev());
  EXPECT_THROW(x.host_data(), RuntimeError);
  EXPECT_EQ(values(x), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  // Its own kernel, no fallback.
  EXPECT_EQ(values(add(x, x)), (std::vector<double>{0, 2, 4, 6, 8, 10}));
}

TEST_F(CpuFallback, OperatorsTheDeviceLacksRunOnCpuAndStayOnTheDevice) {
  Tensor a = on_dev(seq({2, 3}, kFloat32, 1)), b = on_dev(seq({2, 3}, kFloat32, 2));
  Tensor m = mul(a, b);
  EXPECT_EQ(m.device(), fbdev());
  EXPECT_EQ(values(m), (std::vector<double>{2, 6, 12, 20, 30, 42}));

  Tensor e = exp(on_dev(tensor_from_values(std::vector<double>{0, 1}, {2}, kFloat64)));
  EXPECT_EQ(e.device(), fbdev());
  EXPECT_EQ(e.dtype(), kFloat64);
  EXPECT_NEAR(values(e)[1], 2.718281828459045, 1e-12);

  Tensor s = sum(a, std::vector<int64_t>{1});
  EXPECT_EQ(s.device(), fbdev());
  EXPECT_EQ(s.shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(values(s), (std::vector<double>{6, 15}));

  Tensor mm = matmul(a, on_dev(seq({3, 2})));  // [[1,2,3],[4,5,6]] @ [[0,1],[2,3],[4,5]]
  EXPECT_EQ(mm.device(), fbdev());
  EXPECT_EQ(values(mm), (std::vector<double>{16, 22, 34, 49}));

  Tensor idx = on_dev(tensor_from_values(std::vector<double>{2, 0}, {2}, kInt64));
  Tensor sel = index_select(a, 1, idx);
  EXPECT_EQ(sel.device(), fbdev());
  EXPECT_EQ(values(sel), (std::vector<double>{3, 1, 6, 4}));
}

TEST_F(CpuFallback, TensorListsAreCopiedIncludingOptionalEntries) {
  Tensor a = on_dev(seq({2}, kFloat32, 0)), b = on_dev(seq({3}, kFloat32, 10));
  Tensor c = cat({a, b});
  EXPECT_EQ(c.device(), fbdev());
  EXPECT_EQ(values(c), (std::vector<double>{0, 1, 10, 11, 12}));

  Tensor x = on_dev(seq({2, 3}));
  Tensor rows = on_dev(tensor_from_values(std::vector<double>{1}, {1}, kInt64));
  Tensor picked = index(x, {rows});  // Tensor?[] indices
  EXPECT_EQ(picked.device(), fbdev());
  EXPECT_EQ(values(picked), (std::vector<double>{3, 4, 5}));
}

TEST_F(CpuFallback, InPlaceAndOutVariantsWriteIntoTheDeviceTensor) {
  Tensor a = on_dev(seq({3}, kFloat32, 1));
  uint64_t version = a.version();
  Tensor r = mul_(a, on_dev(seq({3}, kFloat32, 2)));  // mul_.Tensor: not on the device
  EXPECT_EQ(r.impl(), a.impl());  // the in-place result is the argument itself
  EXPECT_EQ(a.device(), fbdev());
  EXPECT_EQ(values(a), (std::vector<double>{2, 6, 12}));
  EXPECT_GT(a.version(), version);

  // out= of the right shape: written in place.
  Tensor out = on_dev(seq({3}));
  Tensor ret = mul_out(out, on_dev(seq({3}, kFloat32, 1)), on_dev(seq({3}, kFloat32, 1)));
  EXPECT_EQ(ret.impl(), out.impl());
  EXPECT_EQ(values(out), (std::vector<double>{1, 4, 9}));

  // out= of the wrong shape: resized on the device, then written.
  Tensor grow = empty({0}, kFloat32, fbdev());
  add_out(grow, on_dev(seq({2, 2})), on_dev(seq({2, 2})));
  EXPECT_EQ(grow.device(), fbdev());
  EXPECT_EQ(grow.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values(grow), (std::vector<double>{0, 2, 4, 6}));
}

// add.Tensor has a device kernel, add_.Tensor and add.out do not: they run on the device as
// add.Tensor plus the device's copy_, so they work with the CPU fallback switched off.
TEST_F(CpuFallback, VariantsOfADeviceKernelAreDerivedOnTheDevice) {
  Tensor b = on_dev(seq({3}));
  set_cpu_fallback(false);
  uint64_t version = b.version();
  Tensor r = add_(b, b, Scalar(2.0));
  EXPECT_EQ(r.impl(), b.impl());
  EXPECT_GT(b.version(), version);
  EXPECT_EQ(values(b), (std::vector<double>{0, 3, 6}));

  Tensor grow = empty({0}, kFloat32, fbdev());
  Tensor ret = add_out(grow, on_dev(seq({2, 2})), on_dev(seq({2, 2})));
  EXPECT_EQ(ret.impl(), grow.impl());
  EXPECT_EQ(grow.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values(grow), (std::vector<double>{0, 2, 4, 6}));

  // The out tensor may alias an input: the result is computed before it is written.
  Tensor x = on_dev(seq({3}));
  add_out(x, x, on_dev(seq({3}, kFloat32, 1)));
  EXPECT_EQ(values(x), (std::vector<double>{1, 3, 5}));

  // PyTorch's rules for the target: no broadcast of self, no cast to a lower category.
  expect_error<RuntimeError>([&] { add_(on_dev(seq({1})), on_dev(seq({3}))); },
                             {"add_.Tensor", "output with shape [1] doesn't match the broadcast shape [3]"});
  Tensor ints = on_dev(seq({2}, kInt64));
  expect_error<TypeError>([&] { add_out(ints, on_dev(seq({2})), on_dev(seq({2}))); },
                          {"add.out", "result type float32 can't be cast to the desired output type int64"});
  // describe() says where the variant comes from.
  std::string text = Dispatcher::instance().describe_text("add_.Tensor");
  EXPECT_NE(text.find("fallbackdev"), std::string::npos) << text;
  EXPECT_NE(text.find("derived"), std::string::npos) << text;
}

TEST_F(CpuFallback, FactoriesRunOnCpuAndMoveToTheDevice) {
  Tensor z = ones({2, 2}, kFloat64, fbdev());
  EXPECT_EQ(z.device(), fbdev());
  EXPECT_EQ(z.dtype(), kFloat64);
  EXPECT_EQ(values(z), (std::vector<double>{1, 1, 1, 1}));
  Tensor r = arange(Scalar(int64_t(4)), std::nullopt, fbdev());
  EXPECT_EQ(r.device(), fbdev());
  EXPECT_EQ(values(r), (std::vector<double>{0, 1, 2, 3}));
}

TEST_F(CpuFallback, WarnsOncePerOperatorAndDevice) {
  Tensor a = on_dev(seq({2})), b = on_dev(seq({2}));
  ::testing::internal::CaptureStderr();
  maximum(a, b);
  maximum(a, b);
  minimum(a, b);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "[tessera warning] maximum: no kernel for device 'fallbackdev', running it on CPU with copies "
                       "(set TESSERA_CPU_FALLBACK=0 or tessera::set_cpu_fallback(false) to make this an error)"),
            1u)
      << err;
  EXPECT_EQ(count(err, "[tessera warning] minimum: no kernel for device 'fallbackdev'"), 1u) << err;
}

TEST_F(CpuFallback, SwitchedOffTheErrorListsWhatTheDeviceRegisters) {
  Tensor a = on_dev(seq({2}));
  set_cpu_fallback(false);
  EXPECT_FALSE(cpu_fallback_enabled());
  expect_error<NotImplementedError>([&] { mul(a, a); },
                                    {"operator 'mul.Tensor' has no kernel for dispatch key 'fallbackdev'",
                                     "it has kernels for: [CPU]", "registers kernels for: [add.Tensor, copy_, empty]",
                                     "set_cpu_fallback(false)"});
  EXPECT_EQ(values(add(a, a)), (std::vector<double>{0, 2}));  // its own kernels still run
  set_cpu_fallback(true);
  EXPECT_EQ(values(mul(a, a)), (std::vector<double>{0, 1}));
}

TEST_F(CpuFallback, EnvironmentVariableTurnsItOff) {
  Tensor a = on_dev(seq({2}));
  setenv("TESSERA_CPU_FALLBACK", "0", 1);
  EXPECT_FALSE(cpu_fallback_enabled());
  expect_error<NotImplementedError>([&] { neg(a); }, {"neg", "fallbackdev", "TESSERA_CPU_FALLBACK=0"});
  set_cpu_fallback(true);  // an explicit call overrides the environment
  EXPECT_EQ(values(neg(a)), (std::vector<double>{-0.0, -1}));
  unsetenv("TESSERA_CPU_FALLBACK");
}

TEST_F(CpuFallback, ViewOperatorsDoNotFallBackButCopiesMay) {
  Tensor a = on_dev(seq({2, 3}));
  expect_error<NotImplementedError>([&] { transpose(a, 0, 1); }, {"transpose.int", "view operator", "fallbackdev"});
  Tensor r = reshape(a, {3, 2});  // reshape may copy by contract
  EXPECT_EQ(r.device(), fbdev());
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values(r), (std::vector<double>{0, 1, 2, 3, 4, 5}));
}

TEST_F(CpuFallback, NoCpuKernelEitherIsTheUsualError) {
  Tensor a = on_dev(seq({2}));
  // A custom operator with no CPU kernel at all raises rather than falling back.
  OperatorHandle op = Dispatcher::instance().def("fbtest::nowhere(Tensor self) -> Tensor", "test");
  ts_value v[1];
  v[0] = {TS_VALUE_TENSOR, 0, {.tensor = a.handle()}};
  ts_stack stack{sizeof(ts_stack), v, 1, 1};
  expect_error<NotImplementedError>([&] { Dispatcher::instance().call(op, &stack); },
                                    {"fbtest::nowhere", "fallbackdev", "The CPU has no kernel for it either"});
}
