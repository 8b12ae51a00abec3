// The CUDA plugin. On any machine: it loads without a driver or device, reports 0 devices,
// and a CUDA tensor request raises a clear error (the runtime's own reason is reported too).
// On a machine with a GPU: every kernel against the CPU plugin for the same inputs (float32,
// float64, 16-bit floats, integers; broadcast, transposed and sliced inputs; empty tensors);
// GTEST_SKIP says why when there is no device.
#include <tessera/device_registry.h>
#include <tessera/tessera.h>

#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

using namespace tessera;
using tessera::testing::expect_error;

namespace {

std::string plugin_path() { return std::string(TESSERA_PLUGIN_DIR) + "/libtessera_cuda.so"; }

// Loads the plugin once; false when it was not built.
bool cuda_plugin() {
  static bool loaded = [] {
    if (!std::filesystem::exists(plugin_path())) return false;
    load_plugin(plugin_path());
    return true;
  }();
  return loaded;
}

// Calls a cuda:: operator (no generated entry point: it is the plugin's own), returning slot 0.
ts_value call_cuda(const std::string& name, std::vector<ts_value> args = {}) {
  auto op = Dispatcher::instance().find_or_throw("cuda::" + name);
  args.resize(std::max<size_t>(args.size(), 1));
  ts_stack stack{sizeof(ts_stack), args.data(), int32_t(args.size()), int32_t(args.size())};
  if (name == "device_count" || name == "empty_cache" || name == "is_available") stack.size = 0;
  Dispatcher::instance().call(op, &stack);
  return args[0];
}
ts_value int_arg(int64_t i) { ts_value v{TS_VALUE_INT, 0, {}}; v.u.i = i; return v; }
ts_value bool_arg(bool b) { ts_value v{TS_VALUE_BOOL, 0, {}}; v.u.b = b; return v; }

int64_t device_count() { return call_cuda("device_count").u.i; }

#define REQUIRE_PLUGIN() \
  if (!cuda_plugin()) GTEST_SKIP() << "libtessera_cuda.so was not built (TESSERA_BUILD_CUDA=OFF or no nvcc)"
#define REQUIRE_GPU()                                                                                \
  REQUIRE_PLUGIN();                                                                                  \
  if (device_count() == 0)                                                                           \
  GTEST_SKIP() << "no CUDA device on this machine (cuda::device_count() == 0): GPU comparisons skipped"

// ------------------------------------------------------------------ runs everywhere

TEST(CudaPlugin, LoadsAndDefinesItsOperators) {
  REQUIRE_PLUGIN();
  bool found = false;
  for (const PluginInfo& p : loaded_plugins())
    if (p.name == "cuda") {
      found = true;
      EXPECT_EQ(p.devices, std::vector<std::string>{"cuda"});
      for (const char* op : {"cuda::memory_stats", "cuda::empty_cache", "cuda::synchronize", "cuda::device_count",
                             "cuda::set_device", "cuda::set_allow_tf32", "cuda::get_device_properties"})
        EXPECT_NE(std::find(p.operators_defined.begin(), p.operators_defined.end(), op), p.operators_defined.end()) << op;
    }
  EXPECT_TRUE(found);
  EXPECT_GE(device_count(), 0);
  ts_value v = call_cuda("memory_stats", {int_arg(0)});
  ASSERT_EQ(v.tag, TS_VALUE_INT_LIST);
  EXPECT_EQ(v.u.ints.size, 10);  // allocated, reserved, their peaks, four counters, two for record_stream
  call_cuda("empty_cache");
  call_cuda("set_allow_tf32", {bool_arg(false)});
}

// True when the loaded plugin linked cuDNN (then it registers the convolutions).
bool cudnn_loaded() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libcudnn") != std::string::npos) return true;
  return false;
}

// The neural-network operators with a kernel on the CUDA key (from plugin "cuda"), not the CPU
// fallback: checked here on any machine, compared against the CPU below on a GPU machine.
const std::vector<std::string> kCudaNnOperators{
    "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "threshold_backward",
    "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward",
    "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", "native_layer_norm", "native_layer_norm_backward",
    "native_batch_norm", "native_batch_norm_backward", "native_group_norm", "native_group_norm_backward",
    "nll_loss_forward", "nll_loss_backward", "mse_loss", "mse_loss_backward", "l1_loss",
    "binary_cross_entropy_with_logits", "_softmax_backward_data", "_log_softmax_backward_data", "embedding",
    "embedding_dense_backward", "native_dropout", "native_dropout_backward"};

TEST(CudaPlugin, RegistersItsNeuralNetworkKernels) {
  REQUIRE_PLUGIN();
  std::vector<std::string> ops = kCudaNnOperators;
  if (cudnn_loaded()) {  // built without cuDNN, convolutions stay on the CPU fallback
    ops.push_back("convolution");
    ops.push_back("convolution_backward");
  }
  for (const std::string& op : ops) {
    bool found = false;
    for (const KernelInfo& k : Dispatcher::instance().describe(op))
      found = found || (k.key == "CUDA" && k.plugin == "cuda" && k.kind == "kernel");
    EXPECT_TRUE(found) << op << " has no kernel of plugin 'cuda' on key CUDA:\n"
                       << Dispatcher::instance().describe_text(op);
  }
}

// The element-wise, reduction, factory and indexing operators added with elementwise_more.cu,
// reduce_more.cu, factories.cu, indexing.cu and nonzero.cu: a kernel of plugin "cuda" on key CUDA.
const std::vector<std::string> kCudaMoreOperators{
    "div.Tensor_mode", "div_.Tensor_mode", "floor_divide", "floor_divide_", "pow.Tensor_Tensor", "pow_.Tensor_Tensor",
    "pow.Tensor_Scalar", "pow_.Tensor_Scalar", "maximum", "minimum", "logical_and", "logical_or", "logical_not",
    "clamp", "clamp_", "masked_fill.Scalar", "masked_fill_.Scalar", "sign", "sign_", "log1p", "log1p_", "erf", "erf_",
    "prod.dim_IntList", "argmax", "argmin", "var.correction", "std.correction", "logsumexp",
    "arange", "arange.start_step", "linspace", "eye", "rand", "randn", "randint", "randint.low",
    "cat", "stack", "index_select", "gather", "scatter.src", "scatter.value", "scatter_.src", "scatter_.value",
    "scatter_add", "scatter_add_", "index_add", "index_add_", "slice_backward", "select_backward",
    "index.Tensor", "index_put", "index_put_", "nonzero", "masked_select"};

TEST(CudaPlugin, RegistersItsElementwiseReductionFactoryAndIndexingKernels) {
  REQUIRE_PLUGIN();
  for (const std::string& op : kCudaMoreOperators) {
    bool found = false;
    for (const KernelInfo& k : Dispatcher::instance().describe(op))
      found = found || (k.key == "CUDA" && k.plugin == "cuda" && k.kind == "kernel");
    EXPECT_TRUE(found) << op << " has no kernel of plugin 'cuda' on key CUDA:\n"
                       << Dispatcher::instance().describe_text(op);
  }
}

// Binary math, scans, flip/searchsorted/bincount (shared with ROCm), and the CUDA-only sorts (CUB),
// FFTs (cuFFT) and factorizations (cuSOLVER).
const std::vector<std::string> kCudaOrderingAndLibraryOperators{
    "atan2", "atan2_", "copysign.Tensor", "copysign_.Tensor", "fmod.Tensor", "fmod_.Tensor", "remainder.Tensor",
    "remainder_.Tensor", "bitwise_and.Tensor", "bitwise_and_.Tensor", "bitwise_or.Tensor", "bitwise_or_.Tensor",
    "bitwise_xor.Tensor", "bitwise_xor_.Tensor", "bitwise_left_shift.Tensor", "bitwise_left_shift_.Tensor",
    "bitwise_right_shift.Tensor", "bitwise_right_shift_.Tensor", "bitwise_not", "bitwise_not_", "digamma", "digamma_",
    "cumsum", "cumsum_", "cumprod", "cumprod_", "cummax", "cummin", "flip", "searchsorted.Tensor", "bincount",
    "sort.stable", "topk", "_fft_c2c", "_fft_r2c", "_fft_c2r", "linalg_cholesky_ex", "linalg_lu_factor_ex",
    "linalg_lu_solve", "linalg_qr", "linalg_eigh", "linalg_svd"};

TEST(CudaPlugin, RegistersItsBinaryMathScanSortFftAndLinalgKernels) {
  REQUIRE_PLUGIN();
  for (const std::string& op : kCudaOrderingAndLibraryOperators) {
    bool found = false;
    for (const KernelInfo& k : Dispatcher::instance().describe(op))
      found = found || (k.key == "CUDA" && k.plugin == "cuda" && k.kind == "kernel");
    EXPECT_TRUE(found) << op << " has no kernel of plugin 'cuda' on key CUDA:\n"
                       << Dispatcher::instance().describe_text(op);
  }
}

TEST(CudaPlugin, WithoutADeviceEveryRequestFailsClearly) {
  REQUIRE_PLUGIN();
  if (device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device: the no-device errors do not apply";
  // Asking for a CUDA tensor: the host refuses the device index, naming the plugin and the count.
  expect_error<ValueError>([] { zeros({2, 3}, kFloat32, Device("cuda")); },
                           {"cuda", "plugin 'cuda'", "0 devices"});
  expect_error<ValueError>([] { to_device(ones({2}), Device("cuda:0")); }, {"0 devices"});
  // The plugin's own operators carry the runtime's reason (cudaGetDeviceCount's error string).
  expect_error<Error>([] { call_cuda("synchronize", {int_arg(0)}); },
                      {"cuda::synchronize", "no cuda driver/device was found", "cudaGetDeviceCount"});
  expect_error<Error>([] { call_cuda("set_device", {int_arg(0)}); }, {"no cuda driver/device was found"});
  expect_error<Error>([] { call_cuda("get_device_properties", {int_arg(0)}); },
                      {"cuda::get_device_properties", "no cuda driver/device was found"});
  EXPECT_FALSE(call_cuda("is_available").u.b);
}

// The device table of ABI 1.3 (streams, events, record_stream, page-locked memory, async
// copies): every function is there, and without a device each fails with the runtime's reason
// (through set_error) instead of crashing.
const ts_device_desc& cuda_desc() {
  const DeviceTypeEntry* entry = DeviceRegistry::instance().find("cuda");
  if (!entry) throw std::runtime_error("the cuda device type is not registered");
  return entry->desc;
}

TEST(CudaPlugin, FillsTheStreamEventAndPinnedMemoryFunctions) {
  REQUIRE_PLUGIN();
  const ts_device_desc& d = cuda_desc();
  ASSERT_TRUE(TS_STRUCT_HAS(&d, ts_device_desc, copy_from_host_async));
  for (const void* fn : {(const void*)d.stream_create, (const void*)d.stream_destroy, (const void*)d.set_current_stream,
                         (const void*)d.stream_synchronize, (const void*)d.stream_query, (const void*)d.stream_wait_event,
                         (const void*)d.event_create, (const void*)d.event_destroy, (const void*)d.event_record,
                         (const void*)d.event_synchronize, (const void*)d.event_query, (const void*)d.event_elapsed_ms,
                         (const void*)d.record_stream, (const void*)d.host_allocate, (const void*)d.host_deallocate,
                         (const void*)d.copy_to_host_async, (const void*)d.copy_from_host_async})
    EXPECT_NE(fn, nullptr);
}

TEST(CudaPlugin, WithoutADeviceStreamAndEventFunctionsFailWithTheReason) {
  REQUIRE_PLUGIN();
  if (device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device: the no-device errors do not apply";
  const ts_device_desc& d = cuda_desc();
  void* dd = d.device_data;
  auto expect_reason = [](ts_status status, const std::string& function) {
    EXPECT_NE(status, TS_OK) << function;
    std::string said = std::exchange(device_function_error(), {});
    EXPECT_NE(said.find(function), std::string::npos) << said;
    EXPECT_NE(said.find("no cuda"), std::string::npos) << said;  // "no cuda driver/device was found: ..."
  };
  ts_stream stream = nullptr;
  expect_reason(d.stream_create(dd, 0, 0, &stream), "stream_create");
  EXPECT_EQ(stream, nullptr);
  expect_reason(d.set_current_stream(dd, 0, nullptr), "set_current_stream");
  expect_reason(d.stream_synchronize(dd, 0, nullptr), "stream_synchronize");
  int32_t done = -1;
  expect_reason(d.stream_query(dd, 0, nullptr, &done), "stream_query");
  expect_reason(d.stream_wait_event(dd, 0, nullptr, nullptr), "stream_wait_event");
  ts_event event = nullptr;
  expect_reason(d.event_create(dd, 0, TS_EVENT_TIMING, &event), "event_create");
  EXPECT_EQ(event, nullptr);
  expect_reason(d.event_record(dd, 0, nullptr, nullptr), "event_record");
  expect_reason(d.event_synchronize(dd, 0, nullptr), "event_synchronize");
  expect_reason(d.event_query(dd, 0, nullptr, &done), "event_query");
  double ms = 0;
  expect_reason(d.event_elapsed_ms(dd, 0, nullptr, nullptr, &ms), "event_elapsed_ms");
  int dummy = 0;
  expect_reason(d.record_stream(dd, 0, &dummy, nullptr), "record_stream");
  expect_reason(d.copy_to_host_async(dd, 0, &dummy, &dummy, sizeof dummy), "copy_to_host_async");
  expect_reason(d.copy_from_host_async(dd, 0, &dummy, &dummy, sizeof dummy), "copy_from_host_async");
  EXPECT_EQ(d.host_allocate(dd, 16), nullptr);
  expect_reason(TS_ERROR, "host_allocate");
  // The void functions have nothing to report and must not crash.
  d.stream_destroy(dd, 0, nullptr);
  d.event_destroy(dd, 0, nullptr);
  d.host_deallocate(dd, nullptr, 0);
}

// ------------------------------------------------------------------ GPU comparisons

Tensor on_gpu(const Tensor& t) { return to_device(t, Device("cuda")); }
Tensor on_cpu(const Tensor& t) { return to_device(t, Device("cpu")); }

double tolerance(ScalarType d) {
  return d == kFloat16 ? 2e-3 : d == kBFloat16 ? 1.6e-2 : d == kFloat32 ? 2e-5 : d == kFloat64 ? 1e-12 : 0;
}

void expect_same(const Tensor& gpu, const Tensor& cpu, const std::string& what, double tol_scale = 1) {
  ASSERT_EQ(gpu.device().type_name(), "cuda") << what;
  Tensor g = on_cpu(gpu);
  ASSERT_EQ(std::vector<int64_t>(g.sizes().begin(), g.sizes().end()),
            std::vector<int64_t>(cpu.sizes().begin(), cpu.sizes().end())) << what;
  ASSERT_EQ(g.dtype(), cpu.dtype()) << what;
  auto gv = g.to_double_vector(), cv = cpu.to_double_vector();
  double tol = tolerance(cpu.dtype()) * tol_scale;
  for (size_t i = 0; i < gv.size(); ++i) {
    if (std::isnan(cv[i])) { EXPECT_TRUE(std::isnan(gv[i])) << what << " at " << i; continue; }
    ASSERT_NEAR(gv[i], cv[i], tol * (1 + std::abs(cv[i]))) << what << " at " << i;
  }
}

Tensor data(const std::vector<int64_t>& shape, ScalarType dt, double lo = -2, double hi = 2) {
  Tensor t = rand(shape, kFloat64);
  t = add(mul(t, hi - lo), lo);
  return to(t, dt);
}

const std::vector<ScalarType> kFloats{kFloat32, kFloat64, kFloat16, kBFloat16};

TEST(CudaKernels, UnaryMatchesCpu) {
  REQUIRE_GPU();
  using F = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<std::string, F>> ops{
      {"neg", [](const Tensor& x) { return neg(x); }},       {"abs", [](const Tensor& x) { return abs(x); }},
      {"exp", [](const Tensor& x) { return exp(x); }},       {"log", [](const Tensor& x) { return log(abs(x)); }},
      {"sqrt", [](const Tensor& x) { return sqrt(abs(x)); }}, {"rsqrt", [](const Tensor& x) { return rsqrt(add(abs(x), 0.5)); }},
      {"sin", [](const Tensor& x) { return sin(x); }},       {"cos", [](const Tensor& x) { return cos(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},     {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},     {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }},
      {"silu", [](const Tensor& x) { return silu(x); }}};
  for (ScalarType dt : kFloats)
    for (auto& [name, f] : ops) {
      Tensor x = data({5, 7}, dt);
      expect_same(f(on_gpu(x)), f(x), name + " " + std::string(tessera::name(dt)), 4);
      Tensor xt = transpose(x, 0, 1);  // non-contiguous
      expect_same(f(transpose(on_gpu(x), 0, 1)), f(xt), name + " transposed");
      Tensor e = data({0, 3}, dt);
      expect_same(f(on_gpu(e)), f(e), name + " empty");
    }
  Tensor i = to(data({4, 4}, kFloat64, -9, 9), kInt64);
  expect_same(neg(on_gpu(i)), neg(i), "neg int64");
  expect_same(abs(on_gpu(i)), abs(i), "abs int64");
  expect_same(exp(on_gpu(i)), exp(i), "exp int64 -> float");
}

// The dense fast path of elementwise.cu (one contiguous run of one floating dtype, 16-byte
// vectors): lengths that are and are not a multiple of the vector, a Scalar right-hand side,
// alpha, in place, and a misaligned view (storage offset 1) that must take the general loop.
TEST(CudaKernels, DenseElementwiseMatchesCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : kFloats)
    for (int64_t n : {1, 7, 8, 9, 4099, 1000003}) {
      const std::string what = std::string(tessera::name(dt)) + " n=" + std::to_string(n);
      Tensor a = data({n}, dt, -3, 3), b = data({n}, dt, 0.5, 3);
      Tensor ga = on_gpu(a), gb = on_gpu(b);
      expect_same(add(ga, gb, 2), add(a, b, 2), "add alpha " + what);
      expect_same(sub(ga, gb), sub(a, b), "sub " + what);
      expect_same(mul(ga, gb), mul(a, b), "mul " + what);
      expect_same(div(ga, gb), div(a, b), "div " + what, 4);
      expect_same(mul(ga, 1.5), mul(a, 1.5), "mul scalar " + what);
      expect_same(exp(ga), exp(a), "exp " + what, 4);
      expect_same(relu(ga), relu(a), "relu " + what);
      if (n > 1) {  // a view at storage offset 1: not 16-byte aligned
        Tensor sa = slice(a, 0, 1, n, 1), sb = slice(b, 0, 1, n, 1);
        expect_same(add(slice(ga, 0, 1, n, 1), slice(gb, 0, 1, n, 1)), add(sa, sb), "add misaligned " + what);
        expect_same(tanh(slice(ga, 0, 1, n, 1)), tanh(sa), "tanh misaligned " + what, 4);
      }
      mul_(ga, gb);
      mul_(a, b);
      expect_same(ga, a, "mul_ " + what);
    }
  // 2-D contiguous operands coalesce to one run; a transposed one does not.
  Tensor x = data({64, 130}, kFloat32), y = data({64, 130}, kFloat32);
  expect_same(add(on_gpu(x), on_gpu(y)), add(x, y), "add 2-D");
  expect_same(add(transpose(on_gpu(x), 0, 1), transpose(on_gpu(y), 0, 1)), add(transpose(x, 0, 1), transpose(y, 0, 1)),
              "add transposed");
}

TEST(CudaKernels, BinaryAndComparisonsMatchCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kInt64, kInt32}) {
    Tensor a = to(data({3, 1, 5}, kFloat64, -5, 5), dt), b = to(data({4, 5}, kFloat64, 1, 5), dt);
    Tensor ga = on_gpu(a), gb = on_gpu(b);
    std::string n = std::string(tessera::name(dt));
    expect_same(add(ga, gb), add(a, b), "add " + n);
    expect_same(add(ga, gb, 3), add(a, b, 3), "add alpha " + n);
    expect_same(sub(ga, gb), sub(a, b), "sub " + n);
    expect_same(mul(ga, gb), mul(a, b), "mul " + n);
    expect_same(div(ga, gb), div(a, b), "div " + n, 4);
    expect_same(add(ga, 2.5), add(a, 2.5), "add scalar " + n);
    expect_same(mul(ga, 3), mul(a, 3), "mul int scalar " + n);
    expect_same(eq(ga, gb), eq(a, b), "eq " + n);
    expect_same(lt(ga, gb), lt(a, b), "lt " + n);
    expect_same(ge(ga, 1), ge(a, 1), "ge scalar " + n);
    expect_same(where(gt(ga, gb), ga, gb), where(gt(a, b), a, b), "where " + n);
    // A 0-dim CPU tensor acts as a scalar.
    Tensor s = to(tensor_from_values(std::vector<double>{2}, {}, kFloat64), kFloat64);
    expect_same(mul(ga, s), mul(a, s), "mul by 0-dim cpu " + n);
  }
  // Mixed dtypes promote like the CPU.
  Tensor i = to(data({6}, kFloat64, -5, 5), kInt32), f = data({6}, kFloat16);
  expect_same(add(on_gpu(i), on_gpu(f)), add(i, f), "int32 + float16");
  // In place, on a strided view.
  Tensor x = data({4, 6}, kFloat32);
  Tensor gx = on_gpu(x);
  Tensor view = slice(gx, 1, 0, 6, 2);
  add_(view, 1.0);
  add_(slice(x, 1, 0, 6, 2), 1.0);
  expect_same(gx, x, "add_ on a strided view");
  expect_error<Error>([&] { add(on_gpu(data({2, 3}, kFloat32)), on_gpu(data({4}, kFloat32))); }, {"add", "size"});
  expect_error<Error>([&] { add(on_gpu(data({2}, kFloat32)), data({2}, kFloat32)); }, {"add", "cpu"});
}

TEST(CudaKernels, CopiesViewsAndFactoriesMatchCpu) {
  REQUIRE_GPU();
  Tensor x = data({2, 3, 4}, kFloat32);
  Tensor g = on_gpu(x);
  expect_same(permute(g, {2, 0, 1}), permute(x, {2, 0, 1}), "permute");
  expect_same(contiguous(permute(g, {2, 0, 1})), contiguous(permute(x, {2, 0, 1})), "contiguous");
  expect_same(reshape(transpose(g, 0, 2), {-1}), reshape(transpose(x, 0, 2), {-1}), "reshape (copy)");
  expect_same(view(g, {6, 4}), view(x, {6, 4}), "view");
  expect_same(expand(unsqueeze(select(g, 0, 1), 0), {3, 3, 4}), expand(unsqueeze(select(x, 0, 1), 0), {3, 3, 4}), "expand");
  expect_same(narrow(g, 2, 1, 2), narrow(x, 2, 1, 2), "narrow");
  expect_same(flatten(g, 1, 2), flatten(x, 1, 2), "flatten");
  expect_same(squeeze(unsqueeze(g, 1)), squeeze(unsqueeze(x, 1)), "squeeze");
  expect_same(clone(transpose(g, 0, 1)), clone(transpose(x, 0, 1)), "clone");
  for (ScalarType dt : {kFloat64, kFloat16, kBFloat16, kInt64, kInt8, kBool})
    expect_same(to(g, dt), to(x, dt), "to " + std::string(tessera::name(dt)));
  expect_same(zeros({3, 2}, kFloat32, Device("cuda")), zeros({3, 2}), "zeros");
  expect_same(ones({3}, kInt64, Device("cuda")), ones({3}, kInt64), "ones");
  expect_same(full({2, 2}, 1.5, std::nullopt, Device("cuda")), full({2, 2}, 1.5), "full");
  Tensor y = zeros({3, 4}, kFloat64, Device("cuda"));
  copy_(y, transpose(data({4, 3}, kFloat32), 0, 1));  // from the CPU, converting, strided
  Tensor yc = zeros({3, 4}, kFloat64);
  fill_(y, 2.0);
  fill_(yc, 2.0);
  expect_same(y, yc, "fill_");
  Tensor host = zeros({4, 3}, kFloat32);
  copy_(host, transpose(select(g, 0, 0), 0, 1));  // to the CPU, strided
  expect_same(on_gpu(host), transpose(select(x, 0, 0), 0, 1), "copy_ to host");
}

TEST(CudaKernels, ReductionsAndSoftmaxMatchCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : kFloats) {
    Tensor x = data({3, 5, 7}, dt);
    Tensor g = on_gpu(x);
    std::string n = std::string(tessera::name(dt));
    double t = dt == kFloat16 || dt == kBFloat16 ? 8 : 4;
    expect_same(sum(g), sum(x), "sum all " + n, t);
    expect_same(sum(g, std::vector<int64_t>{0, 2}, true), sum(x, std::vector<int64_t>{0, 2}, true), "sum dims " + n, t);
    expect_same(mean(g, std::vector<int64_t>{1}), mean(x, std::vector<int64_t>{1}), "mean " + n, t);
    expect_same(amax(g, {2}), amax(x, {2}), "amax " + n);
    expect_same(amin(transpose(g, 0, 2), {0, 1}, true), amin(transpose(x, 0, 2), {0, 1}, true), "amin " + n);
    expect_same(softmax(g, 1), softmax(x, 1), "softmax " + n, t);
    expect_same(log_softmax(g, -1), log_softmax(x, -1), "log_softmax " + n, t);
  }
  Tensor i = to(data({4, 6}, kFloat64, -9, 9), kInt32);
  expect_same(sum(on_gpu(i), std::vector<int64_t>{1}), sum(i, std::vector<int64_t>{1}), "sum int32 -> int64");
  Tensor e = data({0, 4}, kFloat32);
  expect_same(sum(on_gpu(e), std::vector<int64_t>{0}), sum(e, std::vector<int64_t>{0}), "sum over an empty dim");
  expect_error<Error>([&] { amax(on_gpu(e), {0}); }, {"amax"});
}

TEST(CudaKernels, MatmulsMatchCpuWithCublasAndTheTiledKernel) {
  REQUIRE_GPU();
  for (bool vendor : {true, false}) {
    call_cuda("set_use_vendor_blas", {bool_arg(vendor)});
    for (ScalarType dt : kFloats) {
      std::string n = std::string(tessera::name(dt)) + (vendor ? " cublas" : " tiled");
      double t = dt == kFloat16 || dt == kBFloat16 ? 16 : 8;
      Tensor a = data({33, 17}, dt), b = data({17, 9}, dt), c = data({33, 9}, dt);
      expect_same(mm(on_gpu(a), on_gpu(b)), mm(a, b), "mm " + n, t);
      expect_same(mm(transpose(on_gpu(b), 0, 1), transpose(on_gpu(a), 0, 1)), mm(transpose(b, 0, 1), transpose(a, 0, 1)),
                  "mm transposed " + n, t);
      expect_same(addmm(on_gpu(c), on_gpu(a), on_gpu(b), 0.5, 2), addmm(c, a, b, 0.5, 2), "addmm " + n, t);
      Tensor p = data({4, 6, 5}, dt), q = data({4, 5, 3}, dt);
      expect_same(bmm(on_gpu(p), on_gpu(q)), bmm(p, q), "bmm " + n, t);
      Tensor r = data({2, 1, 6, 5}, dt), s = data({3, 5, 2}, dt), v = data({5}, dt);
      expect_same(matmul(on_gpu(r), on_gpu(s)), matmul(r, s), "matmul broadcast " + n, t);
      expect_same(matmul(on_gpu(r), on_gpu(v)), matmul(r, v), "matmul nd x 1d " + n, t);
      expect_same(matmul(on_gpu(v), on_gpu(v)), matmul(v, v), "matmul dot " + n, t);
      Tensor z = data({3, 0}, dt), zz = data({0, 4}, dt);
      expect_same(mm(on_gpu(z), on_gpu(zz)), mm(z, zz), "mm with k = 0 " + n);
    }
  }
  call_cuda("set_use_vendor_blas", {bool_arg(true)});
  expect_error<Error>([] { mm(on_gpu(ones({2, 2}, kInt64)), on_gpu(ones({2, 2}, kInt64))); }, {"mm", "int64"});
  expect_error<Error>([] { mm(on_gpu(ones({2, 3})), on_gpu(ones({2, 3}))); }, {"mm", "cannot be multiplied"});
}

// Issue 23, finding 1: operands cuBLAS cannot read directly are copied and described by the
// GEMM's own batch, rows and cols: a strided 1-D operand, a 4-D one with a non-unit inner stride,
// and one matrix broadcast over a batch.
TEST(CudaKernels, MatmulCopiesUnreadableOperandsWithTheirGeometry) {
  REQUIRE_GPU();
  for (bool vendor : {true, false}) {
    call_cuda("set_use_vendor_blas", {bool_arg(vendor)});
    const std::string n = vendor ? " cublas" : " tiled";
    Tensor v = data({10}, kFloat32), m = data({5, 3}, kFloat32);
    expect_same(matmul(slice(on_gpu(v), 0, 0, 10, 2), on_gpu(m)), matmul(slice(v, 0, 0, 10, 2), m),
                "matmul strided 1-D @ 2-D" + n, 8);
    expect_same(matmul(transpose(on_gpu(m), 0, 1), slice(on_gpu(v), 0, 0, 10, 2)),
                matmul(transpose(m, 0, 1), slice(v, 0, 0, 10, 2)), "matmul 2-D @ strided 1-D" + n, 8);
    Tensor x = data({2, 3, 4, 10}, kFloat32), y = data({5, 6}, kFloat32);
    expect_same(matmul(slice(on_gpu(x), 3, 0, 10, 2), on_gpu(y)), matmul(slice(x, 3, 0, 10, 2), y),
                "matmul 4-D with inner stride 2" + n, 8);
    Tensor a = data({1, 3, 8}, kFloat32), b = data({7, 4, 2}, kFloat32);
    expect_same(matmul(slice(on_gpu(a), 2, 0, 8, 2), on_gpu(b)), matmul(slice(a, 2, 0, 8, 2), b),
                "matmul one strided matrix broadcast over a batch of 7" + n, 8);
  }
  call_cuda("set_use_vendor_blas", {bool_arg(true)});
}

// Issue 23, finding 7: copy_ within one device reads an overlapping source whole before writing.
TEST(CudaKernels, CopyBetweenOverlappingViewsMatchesCpu) {
  REQUIRE_GPU();
  Tensor x = data({4096}, kFloat32), g = on_gpu(x);
  copy_(slice(x, 0, 1, 4096, 1), slice(x, 0, 0, 4095, 1));  // x[1:] = x[:-1]
  copy_(slice(g, 0, 1, 4096, 1), slice(g, 0, 0, 4095, 1));
  expect_same(g, x, "x[1:].copy_(x[:-1])");
  Tensor sq = data({64, 64}, kFloat32), gsq = on_gpu(sq);
  copy_(sq, transpose(sq, 0, 1));
  copy_(gsq, transpose(gsq, 0, 1));
  expect_same(gsq, sq, "x.copy_(x.t())");
  copy_(gsq, gsq);
  expect_same(gsq, sq, "x.copy_(x)");
  expect_error<Error>([&] { copy_(expand(on_gpu(data({1, 3}, kFloat32)), {4, 3}), on_gpu(data({4, 3}, kFloat32))); },
                      {"copy_", "more than one element of the written-to tensor"});
}

// Issue 23, finding 9: addmm's k == 0 fill on a second device launches with that device current.
TEST(CudaKernels, AddmmWithEmptyInnerDimOnASecondDevice) {
  REQUIRE_GPU();
  if (device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  Device second("cuda:1");
  Tensor c = to_device(data({3, 4}, kFloat32), second);
  Tensor a = to_device(data({3, 0}, kFloat32), second), b = to_device(data({0, 4}, kFloat32), second);
  Tensor out = addmm(c, a, b, 0.0, 1.0);
  expect_same(out, zeros({3, 4}), "addmm beta=0, k=0 on cuda:1");
}

// Issue 23, finding 5: reductions with fewer outputs than multiprocessors are split over
// several blocks and a second pass (sum, mean, amax, amin; the mean losses), as the CPU.
TEST(CudaKernels, SplitReductionsMatchCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : {kFloat32, kFloat64}) {
    const std::string n = std::string(tessera::name(dt));
    Tensor x = data({3, 1 << 20}, dt), g = on_gpu(x);
    expect_same(sum(g), sum(x), "sum of 3M elements " + n, 100);
    expect_same(sum(g, std::vector<int64_t>{1}), sum(x, std::vector<int64_t>{1}), "sum of 3 rows of 1M " + n, 100);
    expect_same(mean(transpose(g, 0, 1), std::vector<int64_t>{0}), mean(transpose(x, 0, 1), std::vector<int64_t>{0}),
                "mean over strided columns " + n, 100);
    expect_same(amax(g, {1}), amax(x, {1}), "amax " + n);
    expect_same(amin(g), amin(x), "amin " + n);
    Tensor y = data({3, 1 << 20}, dt);
    expect_same(mse_loss(g, on_gpu(y)), mse_loss(x, y), "mse_loss mean " + n, 100);
  }
  Tensor with_nan = data({1 << 21}, kFloat32);
  fill_(slice(with_nan, 0, (1 << 21) - 1, 1 << 21, 1), std::nan(""));
  EXPECT_TRUE(std::isnan(on_cpu(amax(on_gpu(with_nan))).item_double())) << "NaN in the last split";
  Tensor i = to(data({1 << 21}, kFloat64, -9, 9), kInt64);
  expect_same(sum(on_gpu(i)), sum(i), "sum int64 of 2M");
  // prod, argmax/argmin (first index across splits), var/std, logsumexp: split the same way.
  Tensor x = data({2, 1 << 20}, kFloat64), g = on_gpu(x);
  expect_same(argmax(g), argmax(x), "argmax of 2M");
  expect_same(argmax(g, 1), argmax(x, 1), "argmax of 2 rows of 1M");
  Tensor ties = to(data({1 << 21}, kFloat64, 0, 3), kInt64);  // values 0..2: the first 2 wins
  expect_same(argmax(on_gpu(ties)), argmax(ties), "argmax with ties across splits");
  expect_same(argmin(on_gpu(ties)), argmin(ties), "argmin with ties across splits");
  expect_same(tessera::var(g, std::vector<int64_t>{1}), tessera::var(x, std::vector<int64_t>{1}), "var of 1M", 100);
  expect_same(tessera::std(add(g, 1e3)), tessera::std(add(x, 1e3)), "std of 2M far from 0", 100);
  expect_same(logsumexp(g, {1}), logsumexp(x, {1}), "logsumexp of 1M", 100);
  Tensor near_one = data({1 << 21}, kFloat64, 0.9999995, 1.0000005);
  expect_same(prod(on_gpu(near_one)), prod(near_one), "prod of 2M", 100);
  // softmax / log_softmax of two long rows (split), one of them -inf over its first half.
  for (ScalarType dt : {kFloat32, kFloat64}) {
    Tensor rows = data({2, 1 << 20}, dt, -20, 20);
    expect_same(log_softmax(on_gpu(rows), 1), log_softmax(rows, 1), "log_softmax of long rows", 100);
    expect_same(softmax(transpose(on_gpu(rows), 0, 1), 0), softmax(transpose(rows, 0, 1), 0), "softmax over dim 0", 100);
    fill_(slice(select(rows, 0, 1), 0, 0, 1 << 19, 1), -INFINITY);  // splits whose sum is 0
    expect_same(softmax(on_gpu(rows), 1), softmax(rows, 1), "softmax of long rows " + std::string(tessera::name(dt)), 100);
  }
}

TEST(CudaKernels, CachingAllocatorReusesBlocksAndReportsStats) {
  REQUIRE_GPU();
  call_cuda("synchronize", {int_arg(0)});
  call_cuda("empty_cache");
  auto stats = [] {
    ts_value v = call_cuda("memory_stats", {int_arg(0)});
    return std::vector<int64_t>(v.u.ints.data, v.u.ints.data + v.u.ints.size);
  };
  auto before = stats();
  { Tensor t = empty({1 << 20}, kFloat32, Device("cuda")); }
  auto mid = stats();
  EXPECT_GE(mid[1], before[1] + (4 << 20));  // reserved grew by the rounded block
  { Tensor t = empty({1 << 20}, kFloat32, Device("cuda")); }
  auto after = stats();
  EXPECT_GT(after[5], mid[5]);                // served from the cache
  EXPECT_EQ(after[6], mid[6]);                // no new device allocation
  call_cuda("empty_cache");
  EXPECT_LT(stats()[1], after[1]);
}

// Through the device table: work queued on a side stream (the thread's current one) and timed
// with events; the default stream waits for it; record_stream and page-locked async copies.
TEST(CudaKernels, StreamsEventsAndPinnedCopiesThroughTheDeviceTable) {
  REQUIRE_GPU();
  const ts_device_desc& d = cuda_desc();
  void* dd = d.device_data;
  auto ok = [](ts_status s, const char* what) {
    ASSERT_EQ(s, TS_OK) << what << ": " << std::exchange(device_function_error(), {});
  };
  ts_stream side = nullptr;
  ok(d.stream_create(dd, 0, -100, &side), "stream_create (a priority beyond the range is clamped)");
  ts_event start = nullptr, end = nullptr, untimed = nullptr;
  ok(d.event_create(dd, 0, TS_EVENT_TIMING, &start), "event_create");
  ok(d.event_create(dd, 0, TS_EVENT_TIMING, &end), "event_create");
  ok(d.event_create(dd, 0, TS_EVENT_DEFAULT, &untimed), "event_create");
  Tensor x = data({256, 256}, kFloat32);
  Tensor gx = on_gpu(x);
  ok(d.set_current_stream(dd, 0, side), "set_current_stream");
  ok(d.event_record(dd, 0, start, side), "event_record");
  Tensor gy = gx;
  for (int i = 0; i < 4; ++i) gy = mul(mm(gy, gx), 0.01);
  ok(d.event_record(dd, 0, end, side), "event_record");
  ok(d.record_stream(dd, 0, gy.impl()->storage()->data(), side), "record_stream");
  ok(d.set_current_stream(dd, 0, nullptr), "set_current_stream");
  ok(d.stream_wait_event(dd, 0, nullptr, end), "stream_wait_event");
  Tensor y = x;
  for (int i = 0; i < 4; ++i) y = mul(mm(y, x), 0.01);
  expect_same(gy, y, "mm chain on a side stream", 10);
  ok(d.event_synchronize(dd, 0, end), "event_synchronize");
  int32_t done = 0;
  ok(d.event_query(dd, 0, end, &done), "event_query");
  EXPECT_EQ(done, 1);
  ok(d.stream_query(dd, 0, side, &done), "stream_query");
  EXPECT_EQ(done, 1);
  double ms = -1;
  ok(d.event_elapsed_ms(dd, 0, start, end, &ms), "event_elapsed_ms");
  EXPECT_GT(ms, 0);
  ok(d.event_record(dd, 0, untimed, nullptr), "event_record");
  EXPECT_NE(d.event_elapsed_ms(dd, 0, start, untimed, &ms), TS_OK);
  EXPECT_NE(std::exchange(device_function_error(), {}).find("without timing"), std::string::npos);
  // Page-locked memory: 0 bytes work; an async round trip gives the same bytes.
  void* empty_block = d.host_allocate(dd, 0);
  EXPECT_NE(empty_block, nullptr);
  d.host_deallocate(dd, empty_block, 0);
  std::vector<float> values(1 << 16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i) * 0.5f;
  size_t n = values.size() * sizeof(float);
  auto* pinned = static_cast<float*>(d.host_allocate(dd, n));
  ASSERT_NE(pinned, nullptr);
  std::copy(values.begin(), values.end(), pinned);
  Tensor dev = empty({int64_t(values.size())}, kFloat32, Device("cuda"));
  ok(d.copy_from_host_async(dd, 0, dev.impl()->data(), pinned, n), "copy_from_host_async");
  std::fill(values.begin(), values.end(), 0.f);
  auto* back = static_cast<float*>(d.host_allocate(dd, n));
  ok(d.copy_to_host_async(dd, 0, back, dev.impl()->data(), n), "copy_to_host_async");
  d.host_deallocate(dd, pinned, n);  // still read by the copy: freed once it is done
  ok(d.stream_synchronize(dd, 0, nullptr), "stream_synchronize");
  for (size_t i = 0; i < values.size(); i += 997) ASSERT_EQ(back[i], float(i) * 0.5f) << i;
  d.host_deallocate(dd, back, n);
  for (ts_event e : {start, end, untimed}) d.event_destroy(dd, 0, e);
  d.stream_destroy(dd, 0, side);
}

// ---- neural-network operators: forward and backward against the CPU plugin

TEST(CudaKernels, ActivationBackwardsMatchCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : kFloats) {
    Tensor g = data({5, 7}, dt), x = data({5, 7}, dt), y = data({5, 7}, dt, -0.9, 0.9);
    Tensor gg = on_gpu(g), gx = on_gpu(x), gy = on_gpu(y);
    std::string n = std::string(tessera::name(dt));
    expect_same(gelu_backward(gg, gx), gelu_backward(g, x), "gelu_backward " + n, 4);
    expect_same(gelu_backward(gg, gx, "tanh"), gelu_backward(g, x, "tanh"), "gelu_backward tanh " + n, 4);
    expect_same(silu_backward(gg, gx), silu_backward(g, x), "silu_backward " + n, 4);
    expect_same(sigmoid_backward(gg, gy), sigmoid_backward(g, y), "sigmoid_backward " + n, 4);
    expect_same(tanh_backward(gg, gy), tanh_backward(g, y), "tanh_backward " + n, 4);
    expect_same(threshold_backward(gg, gx, 0), threshold_backward(g, x, 0), "threshold_backward " + n);
    // Broadcast and non-contiguous.
    Tensor row = data({7}, dt), gt = data({7, 5}, dt);
    expect_same(gelu_backward(transpose(on_gpu(gt), 0, 1), on_gpu(row)), gelu_backward(transpose(gt, 0, 1), row),
                "gelu_backward broadcast, transposed " + n, 4);
  }
  Tensor gi = to(data({6}, kFloat64, -9, 9), kInt64), xi = to(data({6}, kFloat64, -9, 9), kInt64);
  expect_same(threshold_backward(on_gpu(gi), on_gpu(xi), 0), threshold_backward(gi, xi, 0), "threshold_backward int64");
  expect_same(threshold_backward(on_gpu(gi), on_gpu(xi), 0.5), threshold_backward(gi, xi, 0.5),
              "threshold_backward int64, fractional threshold");
  expect_error<Error>([&] { gelu_backward(on_gpu(data({2}, kFloat32)), on_gpu(data({2}, kFloat32)), "erf"); },
                      {"gelu_backward", "approximate"});
}

TEST(CudaKernels, ConvolutionMatchesCpu) {
  REQUIRE_GPU();
  if (!cudnn_loaded()) GTEST_SKIP() << "the CUDA plugin was built without cuDNN: convolution runs on the CPU";
  struct Case {
    std::vector<int64_t> x, w, stride, padding, dilation;
    int64_t groups;
    bool bias;
  };
  std::vector<Case> cases{
      {{2, 4, 9, 8}, {6, 4, 3, 3}, {1}, {1}, {1}, 1, true},         // 2-D, same padding
      {{2, 4, 11, 10}, {6, 2, 3, 2}, {2, 1}, {1, 0}, {2, 1}, 2, true},  // strides, dilation, groups
      {{3, 9, 8}, {4, 3, 3, 3}, {1}, {0}, {1}, 1, false},           // unbatched 2-D
      {{2, 4, 17}, {8, 4, 5}, {2}, {2}, {1}, 1, true},              // 1-D
      {{4, 13}, {4, 1, 3}, {1}, {1}, {2}, 4, false},                // unbatched 1-D, depthwise
      {{0, 4, 6, 6}, {2, 4, 3, 3}, {1}, {0}, {1}, 1, true},         // empty batch
  };
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16}) {
    double tol = dt == kFloat16 ? 8 : 20;  // sums of many products
    for (const Case& c : cases) {
      Tensor x = data(c.x, dt), w = data(c.w, dt), b = c.bias ? data({c.w[0]}, dt) : Tensor();
      std::string n = std::string(tessera::name(dt)) + " x" + std::to_string(c.x.size()) + "-D groups " +
                      std::to_string(c.groups);
      Tensor y = convolution(x, w, b, c.stride, c.padding, c.dilation, c.groups);
      Tensor gy = convolution(on_gpu(x), on_gpu(w), c.bias ? on_gpu(b) : Tensor(), c.stride, c.padding, c.dilation,
                              c.groups);
      expect_same(gy, y, "convolution " + n, tol);
      Tensor go = data(y.shape(), dt);
      auto [dx, dw, db] = convolution_backward(go, x, w, c.stride, c.padding, c.dilation, c.groups);
      auto [gdx, gdw, gdb] =
          convolution_backward(on_gpu(go), on_gpu(x), on_gpu(w), c.stride, c.padding, c.dilation, c.groups);
      expect_same(gdx, dx, "convolution_backward grad_input " + n, tol);
      expect_same(gdw, dw, "convolution_backward grad_weight " + n, tol);
      expect_same(gdb, db, "convolution_backward grad_bias " + n, tol);
    }
  }
  // Non-contiguous input.
  Tensor x = data({2, 8, 3, 7}, kFloat32), w = data({5, 3, 2, 2}, kFloat32);
  expect_same(convolution(permute(on_gpu(x), {0, 2, 1, 3}), on_gpu(w), Tensor(), {1}, {0}, {1}, 1),
              convolution(permute(x, {0, 2, 1, 3}), w, Tensor(), {1}, {0}, {1}, 1), "convolution permuted", 20);
  expect_error<Error>([&] { convolution(on_gpu(data({1, 3, 5, 5}, kFloat32)), on_gpu(data({4, 2, 3, 3}, kFloat32)),
                                        Tensor(), {1}, {0}, {1}, 1); }, {"convolution", "channels"});
  expect_error<Error>([&] { convolution(on_gpu(data({1, 2, 5, 5}, kFloat32)), on_gpu(data({4, 2, 3, 3}, kFloat64)),
                                        Tensor(), {1}, {0}, {1}, 1); }, {"convolution", "dtype"});
}

TEST(CudaKernels, PoolingMatchesCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : kFloats) {
    std::string n = std::string(tessera::name(dt));
    Tensor x = data({2, 3, 9, 10}, dt);
    Tensor g = on_gpu(x);
    for (bool ceil : {false, true}) {
      std::string c = n + (ceil ? " ceil" : "");
      auto [y, idx] = max_pool2d_with_indices(x, {3, 2}, {2, 2}, {1, 1}, {1, 2}, ceil);
      auto [gy, gidx] = max_pool2d_with_indices(g, {3, 2}, {2, 2}, {1, 1}, {1, 2}, ceil);
      expect_same(gy, y, "max_pool2d " + c);
      expect_same(gidx, idx, "max_pool2d indices " + c);
      Tensor go = data(y.shape(), dt);
      expect_same(max_pool2d_with_indices_backward(on_gpu(go), g, {3, 2}, {2, 2}, {1, 1}, {1, 2}, ceil, gidx),
                  max_pool2d_with_indices_backward(go, x, {3, 2}, {2, 2}, {1, 1}, {1, 2}, ceil, idx),
                  "max_pool2d backward " + c, 4);
      for (bool include_pad : {true, false})
        for (std::optional<int64_t> divisor : {std::optional<int64_t>(), std::optional<int64_t>(5)}) {
          std::string d = c + (include_pad ? " include_pad" : "") + (divisor ? " divisor" : "");
          Tensor a = avg_pool2d(x, {3, 3}, {2, 3}, {1, 1}, ceil, include_pad, divisor);
          expect_same(avg_pool2d(g, {3, 3}, {2, 3}, {1, 1}, ceil, include_pad, divisor), a, "avg_pool2d " + d, 4);
          Tensor ga = data(a.shape(), dt);
          expect_same(avg_pool2d_backward(on_gpu(ga), g, {3, 3}, {2, 3}, {1, 1}, ceil, include_pad, divisor),
                      avg_pool2d_backward(ga, x, {3, 3}, {2, 3}, {1, 1}, ceil, include_pad, divisor),
                      "avg_pool2d backward " + d, 4);
        }
    }
    for (std::vector<int64_t> out : {std::vector<int64_t>{4, 3}, {1, 1}, {9, 10}, {12, 7}}) {
      std::string o = n + " " + std::to_string(out[0]) + "x" + std::to_string(out[1]);
      Tensor a = adaptive_avg_pool2d(x, out);
      expect_same(adaptive_avg_pool2d(g, out), a, "adaptive_avg_pool2d " + o, 4);
      Tensor ga = data(a.shape(), dt);
      expect_same(adaptive_avg_pool2d_backward(on_gpu(ga), g), adaptive_avg_pool2d_backward(ga, x),
                  "adaptive_avg_pool2d backward " + o, 4);
    }
    // Unbatched and non-contiguous.
    Tensor xt = transpose(data({3, 10, 9}, dt), 1, 2);
    expect_same(std::get<0>(max_pool2d_with_indices(on_gpu(xt), {2})), std::get<0>(max_pool2d_with_indices(xt, {2})),
                "max_pool2d unbatched transposed " + n);
  }
  expect_error<Error>([&] { avg_pool2d(on_gpu(data({1, 2, 4, 4}, kFloat32)), {2}, {}, {2}); },
                      {"avg_pool2d", "padding"});
}

TEST(CudaKernels, LayerNormMatchesCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : kFloats) {
    std::string n = std::string(tessera::name(dt));
    for (bool affine : {true, false}) {
      Tensor x = data({4, 3, 10}, dt);
      Tensor w = affine ? data({3, 10}, dt) : Tensor(), b = affine ? data({3, 10}, dt) : Tensor();
      auto gpu = [&](const Tensor& t) { return t.defined() ? on_gpu(t) : Tensor(); };
      auto [y, mean, rstd] = native_layer_norm(x, {3, 10}, w, b, 1e-5);
      auto [gy, gmean, grstd] = native_layer_norm(on_gpu(x), {3, 10}, gpu(w), gpu(b), 1e-5);
      expect_same(gy, y, "native_layer_norm " + n, 8);
      expect_same(gmean, mean, "native_layer_norm mean " + n, 8);
      expect_same(grstd, rstd, "native_layer_norm rstd " + n, 8);
      Tensor go = data(y.shape(), dt);
      auto [dx, dw, db] = native_layer_norm_backward(go, x, {3, 10}, mean, rstd, w, b);
      auto [gdx, gdw, gdb] = native_layer_norm_backward(on_gpu(go), on_gpu(x), {3, 10}, gmean, grstd, gpu(w), gpu(b));
      expect_same(gdx, dx, "native_layer_norm_backward grad_input " + n, 8);
      expect_same(gdw, dw, "native_layer_norm_backward grad_weight " + n, 8);
      expect_same(gdb, db, "native_layer_norm_backward grad_bias " + n, 8);
    }
  }
  // Issue 23, finding 6: 64 columns over 8192 rows: grad_weight / grad_bias split by rows.
  for (ScalarType dt : {kFloat32, kFloat64}) {
    Tensor x = data({8192, 64}, dt), w = data({64}, dt), b = data({64}, dt), go = data({8192, 64}, dt);
    auto [y, mean, rstd] = native_layer_norm(x, {64}, w, b, 1e-5);
    auto [dx, dw, db] = native_layer_norm_backward(go, x, {64}, mean, rstd, w, b);
    auto [gdx, gdw, gdb] =
        native_layer_norm_backward(on_gpu(go), on_gpu(x), {64}, on_gpu(mean), on_gpu(rstd), on_gpu(w), on_gpu(b));
    const std::string n = std::string(tessera::name(dt)) + " (rows split)";
    expect_same(gdx, dx, "native_layer_norm_backward grad_input " + n, 8);
    expect_same(gdw, dw, "native_layer_norm_backward grad_weight " + n, 100);
    expect_same(gdb, db, "native_layer_norm_backward grad_bias " + n, 100);
  }
  expect_error<Error>([&] { native_layer_norm(on_gpu(data({2, 5}, kFloat32)), {4}, Tensor(), Tensor(), 1e-5); },
                      {"native_layer_norm", "normalized_shape"});
}

Tensor gpu_or_none(const Tensor& t) { return t.defined() ? on_gpu(t) : Tensor(); }
ScalarType stat_type(ScalarType dt) { return dt == kFloat16 || dt == kBFloat16 ? kFloat32 : dt; }

TEST(CudaKernels, BatchNormMatchesCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : kFloats) {
    for (bool affine : {true, false}) {
      std::string n = std::string(tessera::name(dt)) + (affine ? " affine" : "");
      Tensor x = data({4, 3, 5, 2}, dt), go = data({4, 3, 5, 2}, dt);
      Tensor w = affine ? data({3}, dt) : Tensor(), b = affine ? data({3}, dt) : Tensor();
      // Training: output, saved statistics, and the running estimates updated in place.
      Tensor rm = data({3}, stat_type(dt)), rv = data({3}, stat_type(dt), 0.5, 2);
      Tensor grm = on_gpu(rm), grv = on_gpu(rv);
      auto [y, sm, si] = native_batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
      auto [gy, gsm, gsi] = native_batch_norm(on_gpu(x), gpu_or_none(w), gpu_or_none(b), grm, grv, true, 0.1, 1e-5);
      expect_same(gy, y, "native_batch_norm " + n, 8);
      expect_same(gsm, sm, "native_batch_norm save_mean " + n, 8);
      expect_same(gsi, si, "native_batch_norm save_invstd " + n, 8);
      expect_same(grm, rm, "native_batch_norm running_mean " + n, 8);
      expect_same(grv, rv, "native_batch_norm running_var " + n, 8);
      auto [dx, dw, db] = native_batch_norm_backward(go, x, w, rm, rv, sm, si, true, 1e-5);
      auto [gdx, gdw, gdb] =
          native_batch_norm_backward(on_gpu(go), on_gpu(x), gpu_or_none(w), grm, grv, gsm, gsi, true, 1e-5);
      expect_same(gdx, dx, "native_batch_norm_backward grad_input " + n, 8);
      expect_same(gdw, dw, "native_batch_norm_backward grad_weight " + n, 8);
      expect_same(gdb, db, "native_batch_norm_backward grad_bias " + n, 8);
      // Evaluation: the running statistics; save_mean / save_invstd are empty.
      auto [ye, sme, sie] = native_batch_norm(x, w, b, rm, rv, false, 0.1, 1e-5);
      auto [gye, gsme, gsie] = native_batch_norm(on_gpu(x), gpu_or_none(w), gpu_or_none(b), grm, grv, false, 0.1, 1e-5);
      expect_same(gye, ye, "native_batch_norm eval " + n, 8);
      expect_same(gsme, sme, "native_batch_norm eval save_mean " + n);
      auto [dxe, dwe, dbe] = native_batch_norm_backward(go, x, w, rm, rv, Tensor(), Tensor(), false, 1e-5);
      auto [gdxe, gdwe, gdbe] = native_batch_norm_backward(on_gpu(go), on_gpu(x), gpu_or_none(w), grm, grv, Tensor(),
                                                           Tensor(), false, 1e-5);
      expect_same(gdxe, dxe, "native_batch_norm_backward eval grad_input " + n, 8);
      expect_same(gdwe, dwe, "native_batch_norm_backward eval grad_weight " + n, 8);
      expect_same(gdbe, dbe, "native_batch_norm_backward eval grad_bias " + n, 8);
    }
  }
  // A transposed input, running statistics that are strided views (updated through the view),
  // no running statistics, and an empty batch (running statistics unchanged).
  Tensor xt = transpose(data({3, 4, 6}, kFloat64), 0, 2), base = data({4, 2}, kFloat64), gbase = on_gpu(base);
  auto [y, sm, si] = native_batch_norm(xt, Tensor(), Tensor(), select(base, 1, 0), select(base, 1, 1), true, 0.2, 1e-5);
  auto [gy, gsm, gsi] =
      native_batch_norm(on_gpu(xt), Tensor(), Tensor(), select(gbase, 1, 0), select(gbase, 1, 1), true, 0.2, 1e-5);
  expect_same(gy, y, "native_batch_norm transposed", 8);
  expect_same(gbase, base, "native_batch_norm strided running statistics", 8);
  expect_same(std::get<0>(native_batch_norm(on_gpu(xt), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5)),
              std::get<0>(native_batch_norm(xt, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5)),
              "native_batch_norm without running statistics", 8);
  Tensor rm = data({3}, kFloat32), grm = on_gpu(rm);
  auto [ey, em, ei] = native_batch_norm(zeros({0, 3, 2}), Tensor(), Tensor(), rm, Tensor(), true, 0.1, 1e-5);
  auto [gey, gem, gei] = native_batch_norm(on_gpu(zeros({0, 3, 2})), Tensor(), Tensor(), grm, Tensor(), true, 0.1, 1e-5);
  expect_same(gey, ey, "native_batch_norm empty batch");
  expect_same(gem, em, "native_batch_norm empty batch save_mean");
  expect_same(grm, rm, "native_batch_norm empty batch running_mean");
  Tensor x = on_gpu(data({4, 3}, kFloat32));
  expect_error<Error>([&] { native_batch_norm(on_gpu(zeros({1, 3})), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1,
                                              1e-5); }, {"native_batch_norm", "more than 1 value per channel"});
  expect_error<Error>([&] { native_batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false, 0.1, 1e-5); },
                      {"native_batch_norm", "running_mean", "evaluation"});
  expect_error<Error>([&] { native_batch_norm(x, on_gpu(zeros({4})), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); },
                      {"native_batch_norm", "weight", "[3]", "[4]"});
  expect_error<Error>([&] { native_batch_norm_backward(x, x, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), true,
                                                       1e-5); }, {"native_batch_norm_backward", "save_mean"});
}

// Issue 23, finding 6: two channels of 64 x 4096 elements: each channel's statistics split over
// many blocks and combined (forward and backward), as the CPU.
TEST(CudaKernels, BatchNormWithFewChannelsSplitsItsStatistics) {
  REQUIRE_GPU();
  for (ScalarType dt : {kFloat32, kFloat64}) {
    const std::string n = std::string(tessera::name(dt)) + " (split statistics)";
    Tensor x = add(data({64, 2, 64, 64}, dt), 3.0), go = data({64, 2, 64, 64}, dt);  // a mean far from 0
    Tensor w = data({2}, dt), b = data({2}, dt);
    Tensor rm = data({2}, dt), rv = data({2}, dt, 0.5, 2), grm = on_gpu(rm), grv = on_gpu(rv);
    auto [y, sm, si] = native_batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
    auto [gy, gsm, gsi] = native_batch_norm(on_gpu(x), on_gpu(w), on_gpu(b), grm, grv, true, 0.1, 1e-5);
    expect_same(gy, y, "native_batch_norm " + n, 50);
    expect_same(gsm, sm, "native_batch_norm save_mean " + n, 50);
    expect_same(gsi, si, "native_batch_norm save_invstd " + n, 50);
    expect_same(grv, rv, "native_batch_norm running_var " + n, 50);
    auto [dx, dw, db] = native_batch_norm_backward(go, x, w, rm, rv, sm, si, true, 1e-5);
    auto [gdx, gdw, gdb] = native_batch_norm_backward(on_gpu(go), on_gpu(x), on_gpu(w), grm, grv, gsm, gsi, true, 1e-5);
    expect_same(gdx, dx, "native_batch_norm_backward grad_input " + n, 50);
    expect_same(gdw, dw, "native_batch_norm_backward grad_weight " + n, 100);
    expect_same(gdb, db, "native_batch_norm_backward grad_bias " + n, 100);
  }
}

TEST(CudaKernels, GroupNormMatchesCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : kFloats) {
    for (bool affine : {true, false}) {
      std::string n = std::string(tessera::name(dt)) + (affine ? " affine" : "");
      Tensor x = data({3, 6, 4, 2}, dt), go = data({3, 6, 4, 2}, dt);
      Tensor w = affine ? data({6}, dt) : Tensor(), b = affine ? data({6}, dt) : Tensor();
      for (int64_t groups : {1, 3, 6}) {
        std::string g = n + " groups " + std::to_string(groups);
        auto [y, mean, rstd] = native_group_norm(x, w, b, 3, 6, 8, groups, 1e-5);
        auto [gy, gmean, grstd] = native_group_norm(on_gpu(x), gpu_or_none(w), gpu_or_none(b), 3, 6, 8, groups, 1e-5);
        expect_same(gy, y, "native_group_norm " + g, 8);
        expect_same(gmean, mean, "native_group_norm mean " + g, 8);
        expect_same(grstd, rstd, "native_group_norm rstd " + g, 8);
        auto [dx, dw, db] = native_group_norm_backward(go, x, mean, rstd, w, 3, 6, 8, groups);
        auto [gdx, gdw, gdb] =
            native_group_norm_backward(on_gpu(go), on_gpu(x), gmean, grstd, gpu_or_none(w), 3, 6, 8, groups);
        expect_same(gdx, dx, "native_group_norm_backward grad_input " + g, 8);
        expect_same(gdw, dw, "native_group_norm_backward grad_weight " + g, 8);
        expect_same(gdb, db, "native_group_norm_backward grad_bias " + g, 8);
      }
    }
  }
  Tensor xt = transpose(data({5, 4, 2}, kFloat32), 0, 2);  // (2, 4, 5), non-contiguous
  expect_same(std::get<0>(native_group_norm(on_gpu(xt), Tensor(), Tensor(), 2, 4, 5, 2, 1e-5)),
              std::get<0>(native_group_norm(xt, Tensor(), Tensor(), 2, 4, 5, 2, 1e-5)), "native_group_norm transposed", 8);
  expect_error<Error>([&] { native_group_norm(on_gpu(data({2, 6, 3}, kFloat32)), Tensor(), Tensor(), 2, 6, 3, 4,
                                              1e-5); }, {"native_group_norm", "group", "divide"});
}

TEST(CudaKernels, LossesMatchCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : kFloats) {
    std::string n = std::string(tessera::name(dt));
    // nll_loss over (N, C), (N, C, d) and (C) inputs; targets include the ignored class 1.
    for (std::vector<int64_t> shape : {std::vector<int64_t>{6, 4}, {3, 4, 5}, {4}}) {
      Tensor x = data(shape, dt);
      std::vector<int64_t> batch = shape;
      batch.erase(batch.begin() + (shape.size() == 1 ? 0 : 1));
      Tensor t = to(data(batch, kFloat64, 0, 3.99), kInt64), gt = on_gpu(t);
      for (bool weighted : {false, true})
        for (int64_t ignore : {-100, 1})
          for (int64_t reduction : {0, 1, 2}) {
            std::string c = n + " " + std::to_string(shape.size()) + "-D reduction " + std::to_string(reduction) +
                            (weighted ? " weighted" : "") + " ignore " + std::to_string(ignore);
            Tensor w = weighted ? data({4}, dt, 0.5, 2) : Tensor();
            auto [out, total] = nll_loss_forward(x, t, w, reduction, ignore);
            auto [gout, gtotal] = nll_loss_forward(on_gpu(x), gt, gpu_or_none(w), reduction, ignore);
            expect_same(gout, out, "nll_loss_forward " + c, 8);
            expect_same(gtotal, total, "nll_loss_forward total_weight " + c, 8);
            Tensor up = data(out.shape(), dt);
            expect_same(nll_loss_backward(on_gpu(up), on_gpu(x), gt, gpu_or_none(w), reduction, ignore, gtotal),
                        nll_loss_backward(up, x, t, w, reduction, ignore, total), "nll_loss_backward " + c, 8);
          }
    }
    // Element-wise losses, broadcast target.
    Tensor x = data({4, 5}, dt), y = data({5}, dt), gx = on_gpu(x), gy = on_gpu(y);
    for (int64_t reduction : {0, 1, 2}) {
      std::string c = n + " reduction " + std::to_string(reduction);
      expect_same(mse_loss(gx, gy, reduction), mse_loss(x, y, reduction), "mse_loss " + c, 8);
      expect_same(l1_loss(gx, gy, reduction), l1_loss(x, y, reduction), "l1_loss " + c, 8);
      Tensor up = reduction == 0 ? data({4, 5}, dt) : data({}, dt);
      expect_same(mse_loss_backward(on_gpu(up), gx, gy, reduction), mse_loss_backward(up, x, y, reduction),
                  "mse_loss_backward " + c, 8);
      Tensor t = data({4, 5}, dt, 0, 1), w = data({5}, dt, 0.5, 2), pw = data({5}, dt, 0.5, 3);
      for (int k = 0; k < 4; ++k) {
        Tensor wk = k & 1 ? w : Tensor(), pwk = k & 2 ? pw : Tensor();
        expect_same(binary_cross_entropy_with_logits(gx, on_gpu(t), gpu_or_none(wk), gpu_or_none(pwk), reduction),
                    binary_cross_entropy_with_logits(x, t, wk, pwk, reduction),
                    "binary_cross_entropy_with_logits " + c + " case " + std::to_string(k), 8);
      }
    }
    // softmax backwards along every dim, and a transposed gradient.
    Tensor s = data({3, 4, 5}, dt), g = data({3, 4, 5}, dt);
    for (int64_t dim : {0, 1, 2}) {
      Tensor p = softmax(s, dim), lp = log_softmax(s, dim);
      std::string c = n + " dim " + std::to_string(dim);
      expect_same(_softmax_backward_data(on_gpu(g), on_gpu(p), dim, dt), _softmax_backward_data(g, p, dim, dt),
                  "_softmax_backward_data " + c, 8);
      expect_same(_log_softmax_backward_data(on_gpu(g), on_gpu(lp), dim, dt),
                  _log_softmax_backward_data(g, lp, dim, dt), "_log_softmax_backward_data " + c, 8);
    }
    Tensor gt = transpose(data({5, 4, 3}, dt), 0, 2), p = softmax(s, 1);
    expect_same(_softmax_backward_data(on_gpu(gt), on_gpu(p), 1, dt), _softmax_backward_data(gt, p, 1, dt),
                "_softmax_backward_data transposed " + n, 8);
  }
  Tensor p32 = softmax(data({3, 6}, kFloat32), 1), g32 = data({3, 6}, kFloat32);
  expect_same(_softmax_backward_data(on_gpu(g32), on_gpu(p32), 1, kFloat16), _softmax_backward_data(g32, p32, 1, kFloat16),
              "_softmax_backward_data to float16");
  // Every target ignored (mean: NaN), an empty batch, and the errors.
  Tensor x = data({2, 3}, kFloat32), all1 = to(full({2}, 1.0), kInt64);
  expect_same(std::get<0>(nll_loss_forward(on_gpu(x), on_gpu(all1), Tensor(), 1, 1)),
              std::get<0>(nll_loss_forward(x, all1, Tensor(), 1, 1)), "nll_loss_forward all ignored");
  Tensor ex = zeros({0, 3}), et = to(zeros({0}), kInt64);
  for (int64_t reduction : {0, 1, 2})
    expect_same(std::get<0>(nll_loss_forward(on_gpu(ex), on_gpu(et), Tensor(), reduction, -100)),
                std::get<0>(nll_loss_forward(ex, et, Tensor(), reduction, -100)), "nll_loss_forward empty");
  expect_same(mse_loss(on_gpu(ex), on_gpu(ex), 1), mse_loss(ex, ex, 1), "mse_loss empty mean");
  Tensor bad = to(full({2}, 3.0), kInt64);
  expect_error<Error>([&] { nll_loss_forward(on_gpu(x), on_gpu(bad), Tensor(), 1, -100); },
                      {"nll_loss_forward", "target 3", "out of bounds"});
  expect_error<Error>([&] { nll_loss_forward(on_gpu(x), on_gpu(to(bad, kInt32)), Tensor(), 1, -100); },
                      {"nll_loss_forward", "int64", "int32"});
  expect_error<Error>([&] { mse_loss(on_gpu(x), on_gpu(x), 3); }, {"mse_loss", "reduction"});
  expect_error<Error>([&] { binary_cross_entropy_with_logits(on_gpu(x), on_gpu(data({3}, kFloat32)), Tensor(), Tensor(),
                                                             1); }, {"binary_cross_entropy_with_logits", "shape"});
}

TEST(CudaKernels, EmbeddingMatchesCpu) {
  REQUIRE_GPU();
  Tensor idx = to(data({3, 4}, kFloat64, 0, 6.99), kInt64);
  for (ScalarType dt : kFloats) {
    std::string n = std::string(tessera::name(dt));
    Tensor w = data({7, 5}, dt);
    expect_same(embedding(on_gpu(w), on_gpu(idx)), embedding(w, idx), "embedding " + n);
    expect_same(embedding(on_gpu(w), on_gpu(to(idx, kInt32))), embedding(w, to(idx, kInt32)), "embedding int32 " + n);
    Tensor wt = transpose(data({5, 7}, dt), 0, 1);
    expect_same(embedding(on_gpu(wt), on_gpu(idx)), embedding(wt, idx), "embedding transposed weight " + n);
    Tensor go = data({3, 4, 5}, dt);
    for (int64_t padding : {-1, 2})
      for (bool freq : {false, true})
        expect_same(embedding_dense_backward(on_gpu(go), on_gpu(idx), 7, padding, freq),
                    embedding_dense_backward(go, idx, 7, padding, freq),
                    "embedding_dense_backward " + n + " padding " + std::to_string(padding) + (freq ? " freq" : ""), 4);
  }
  Tensor wi = to(data({7, 3}, kFloat64, -50, 50), kInt64);
  expect_same(embedding(on_gpu(wi), on_gpu(idx)), embedding(wi, idx), "embedding int64 weight");
  Tensor w = data({7, 5}, kFloat32);
  expect_same(embedding(on_gpu(w), on_gpu(to(full({}, 3.0), kInt64))), embedding(w, to(full({}, 3.0), kInt64)),
              "embedding 0-d index");
  expect_same(embedding(on_gpu(w), on_gpu(to(zeros({0}), kInt64))), embedding(w, to(zeros({0}), kInt64)),
              "embedding no index");
  expect_error<Error>([&] { embedding(on_gpu(w), on_gpu(to(full({1}, 7.0), kInt64))); }, {"embedding", "index 7"});
  expect_error<Error>([&] { embedding(on_gpu(w), on_gpu(to(full({1}, -1.0), kInt64))); }, {"embedding", "index -1"});
  expect_error<Error>([&] { embedding(on_gpu(w), on_gpu(zeros({2}))); }, {"embedding", "int64 or int32", "float32"});
  expect_error<Error>([&] { embedding_dense_backward(on_gpu(data({1, 5}, kFloat32)), on_gpu(to(full({1}, 9.0), kInt64)),
                                                     7, -1, false); }, {"embedding_dense_backward", "index 9"});
}

TEST(CudaKernels, DropoutKeepsTheCpuSemantics) {
  REQUIRE_GPU();
  for (ScalarType dt : kFloats) {
    std::string n = std::string(tessera::name(dt));
    Tensor x = data({100, 50}, dt, 0.5, 2), gx = on_gpu(x);
    // p = 0 and evaluation mode: the input and an all-true mask.
    for (auto [p, train] : {std::pair{0.0, true}, std::pair{0.5, false}}) {
      auto [y, mask] = native_dropout(gx, p, train);
      expect_same(y, x, "native_dropout identity " + n);
      expect_same(mask, to(ones({100, 50}), kBool), "native_dropout identity mask " + n);
    }
    // p = 1: everything dropped.
    auto [z, zmask] = native_dropout(gx, 1.0, true);
    expect_same(z, zeros({100, 50}, dt), "native_dropout p=1 " + n);
    expect_same(zmask, to(zeros({100, 50}), kBool), "native_dropout p=1 mask " + n);
    // p = 0.3: about 70% kept, kept elements scaled by 1 / 0.7; the backward uses the mask.
    auto [y, mask] = native_dropout(gx, 0.3, std::nullopt);
    Tensor m = on_cpu(mask);
    const double kept = sum(to(m, kFloat64)).item_double() / 5000.0;
    EXPECT_NEAR(kept, 0.7, 0.03) << "native_dropout keep rate " << n;
    expect_same(y, to(mul(mul(to(x, kFloat64), to(m, kFloat64)), 1 / 0.7), dt), "native_dropout p=0.3 " + n, 2);
    Tensor g = data({100, 50}, dt);
    expect_same(native_dropout_backward(on_gpu(g), mask, 1 / 0.7), native_dropout_backward(g, m, 1 / 0.7),
                "native_dropout_backward " + n, 2);
    // Another call draws another mask.
    auto [y2, mask2] = native_dropout(gx, 0.3, true);
    EXPECT_NE(on_cpu(mask2).to_double_vector(), m.to_double_vector()) << "native_dropout drew the same mask twice";
  }
  auto [t, tm] = native_dropout(transpose(on_gpu(data({4, 6}, kFloat32)), 0, 1), 0.5, true);
  EXPECT_EQ(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), (std::vector<int64_t>{6, 4}));
  expect_error<Error>([&] { native_dropout(on_gpu(zeros({3})), 1.5, true); }, {"native_dropout", "[0, 1]", "1.5"});
  expect_error<Error>([&] { native_dropout_backward(on_gpu(zeros({3})), on_gpu(zeros({3})), 2.0); },
                      {"native_dropout_backward", "bool", "float32"});
}

// ---- element-wise, reductions, factories and indexing (elementwise_more.cu ... indexing.cu)

Tensor ints(const std::vector<int64_t>& shape, ScalarType dt, double lo, double hi) {
  return to(data(shape, kFloat64, lo, hi), dt);
}

TEST(CudaKernels, MoreElementwiseMatchCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
    const bool fl = dt == kFloat32 || dt == kFloat64 || dt == kFloat16 || dt == kBFloat16;
    Tensor a = fl ? data({3, 1, 5}, dt, -5, 5) : ints({3, 1, 5}, dt, -9, 9);
    Tensor b = fl ? data({4, 5}, dt, 0.5, 3) : ints({4, 5}, dt, 1, 5);  // no zero divisor
    Tensor ga = on_gpu(a), gb = on_gpu(b);
    std::string n = std::string(tessera::name(dt));
    expect_same(div(ga, gb, std::string("trunc")), div(a, b, std::string("trunc")), "div trunc " + n, 4);
    expect_same(div(ga, gb, std::string("floor")), div(a, b, std::string("floor")), "div floor " + n, 4);
    expect_same(div(ga, gb, std::nullopt), div(a, b, std::nullopt), "div None " + n, 4);
    expect_same(floor_divide(ga, gb), floor_divide(a, b), "floor_divide " + n, 4);
    Tensor base = fl ? data({4, 5}, dt, 0.5, 2) : ints({4, 5}, dt, -3, 3);
    Tensor ex = fl ? data({4, 5}, dt, -2, 2) : ints({4, 5}, dt, 0, 4);
    expect_same(pow(on_gpu(base), on_gpu(ex)), pow(base, ex), "pow " + n, 8);
    expect_same(pow(on_gpu(base), 2), pow(base, 2), "pow scalar " + n, 8);
    expect_same(pow(on_gpu(base), 0.5), pow(base, 0.5), "pow float scalar " + n, 8);
    expect_same(maximum(ga, gb), maximum(a, b), "maximum " + n);
    expect_same(minimum(ga, gb), minimum(a, b), "minimum " + n);
    expect_same(logical_and(ga, gb), logical_and(a, b), "logical_and " + n);
    expect_same(logical_or(ga, gb), logical_or(a, b), "logical_or " + n);
    expect_same(logical_not(ga), logical_not(a), "logical_not " + n);
    expect_same(clamp(ga, -1, 2), clamp(a, -1, 2), "clamp " + n);
    expect_same(clamp(ga, std::nullopt, 0.5), clamp(a, std::nullopt, 0.5), "clamp max only " + n);
    expect_same(clamp(ga, 3, -3), clamp(a, 3, -3), "clamp min > max " + n);
    Tensor mask = gt(b, 2.0);
    expect_same(masked_fill(on_gpu(b), on_gpu(mask), 7), masked_fill(b, mask, 7), "masked_fill " + n);
    expect_same(masked_fill(ga, on_gpu(mask), -1), masked_fill(a, mask, -1), "masked_fill broadcast " + n);
    expect_same(sign(ga), sign(a), "sign " + n);
    expect_same(log1p(on_gpu(abs(a))), log1p(abs(a)), "log1p " + n, 4);
    expect_same(erf(ga), erf(a), "erf " + n, 4);
    // Non-contiguous and empty operands.
    expect_same(maximum(transpose(gb, 0, 1), transpose(gb, 0, 1)), maximum(transpose(b, 0, 1), transpose(b, 0, 1)),
                "maximum transposed " + n);
    Tensor e = fl ? data({0, 5}, dt) : ints({0, 5}, dt, 1, 5);
    Tensor d = ints({5}, dt, 1, 5);
    expect_same(floor_divide(on_gpu(e), on_gpu(d)), floor_divide(e, d), "floor_divide empty " + n);
  }
  // NaN propagates through maximum/minimum; sign of bool; in-place variants on strided views.
  Tensor nan = tensor_from_values(std::vector<double>{NAN, 1, -2}, {3}, kFloat32);
  Tensor one = tensor_from_values(std::vector<double>{0, NAN, 5}, {3}, kFloat32);
  expect_same(maximum(on_gpu(nan), on_gpu(one)), maximum(nan, one), "maximum NaN");
  expect_same(minimum(on_gpu(nan), on_gpu(one)), minimum(nan, one), "minimum NaN");
  Tensor bools = gt(data({6}, kFloat32), 0.0);
  expect_same(sign(on_gpu(bools)), sign(bools), "sign bool");
  Tensor x = data({4, 6}, kFloat32), gx = on_gpu(x);
  clamp_(slice(gx, 1, 0, 6, 2), -0.5, 0.5);
  clamp_(slice(x, 1, 0, 6, 2), -0.5, 0.5);
  expect_same(gx, x, "clamp_ on a strided view");
  pow_(gx, 2);
  pow_(x, 2);
  expect_same(gx, x, "pow_");
  Tensor i = ints({5}, kInt64, -9, 9), gi = on_gpu(i);
  expect_same(clamp(gi, 0.5), clamp(i, 0.5), "clamp int64 by a float bound -> float");
  expect_error<Error>([&] { floor_divide(gi, on_gpu(zeros({5}, kInt64))); }, {"floor_divide", "ZeroDivisionError"});
  expect_error<Error>([&] { div(gi, gi, std::string("round")); }, {"div", "rounding_mode"});
  expect_error<Error>([&] { pow(gi, -1); }, {"pow", "negative"});
  expect_error<Error>([&] { clamp(gi, std::optional<Scalar>(), std::optional<Scalar>()); }, {"clamp", "min", "max"});
  expect_error<Error>([&] { masked_fill(gx, on_gpu(ones({4, 6})), 1); }, {"masked_fill", "bool"});
  expect_error<Error>([&] { maximum(on_gpu(data({2, 3}, kFloat32)), on_gpu(data({4}, kFloat32))); }, {"maximum"});
}

TEST(CudaKernels, MoreReductionsMatchCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : kFloats) {
    Tensor x = data({3, 5, 7}, dt, 0.5, 1.5);
    Tensor g = on_gpu(x);
    std::string n = std::string(tessera::name(dt));
    double t = dt == kFloat16 || dt == kBFloat16 ? 8 : 4;
    expect_same(prod(g), prod(x), "prod all " + n, t);
    expect_same(prod(g, std::vector<int64_t>{1}, true), prod(x, std::vector<int64_t>{1}, true), "prod dim " + n, t);
    expect_same(argmax(g), argmax(x), "argmax all " + n);
    expect_same(argmax(g, 1), argmax(x, 1), "argmax dim " + n);
    expect_same(argmin(transpose(g, 0, 2), 0, true), argmin(transpose(x, 0, 2), 0, true), "argmin " + n);
    expect_same(tessera::var(g, std::vector<int64_t>{2}), tessera::var(x, std::vector<int64_t>{2}), "var " + n, t);
    expect_same(tessera::var(g, std::vector<int64_t>{0, 2}, 0, true), tessera::var(x, std::vector<int64_t>{0, 2}, 0, true),
                "var correction 0 " + n, t);
    expect_same(tessera::std(g), tessera::std(x), "std all " + n, t);
    expect_same(logsumexp(g, {1}), logsumexp(x, {1}), "logsumexp " + n, t);
    expect_same(logsumexp(transpose(g, 0, 1), {0, 2}, true), logsumexp(transpose(x, 0, 1), {0, 2}, true),
                "logsumexp transposed " + n, t);
  }
  Tensor i = ints({4, 6}, kInt32, -4, 4);
  expect_same(prod(on_gpu(i), std::vector<int64_t>{1}), prod(i, std::vector<int64_t>{1}), "prod int32 -> int64");
  expect_same(argmax(on_gpu(i), 0), argmax(i, 0), "argmax int32 (ties: the first)");
  expect_same(logsumexp(on_gpu(i), {1}), logsumexp(i, {1}), "logsumexp int -> float", 4);
  Tensor nan = tensor_from_values(std::vector<double>{1, NAN, 3, NAN}, {4}, kFloat32);
  expect_same(argmax(on_gpu(nan)), argmax(nan), "argmax NaN: the first NaN");
  Tensor e = data({0, 4}, kFloat32);
  expect_same(prod(on_gpu(e), std::vector<int64_t>{0}), prod(e, std::vector<int64_t>{0}), "prod over an empty dim");
  expect_same(argmax(on_gpu(e), 1), argmax(e, 1), "argmax of an empty tensor along a non-empty dim");
  expect_error<Error>([&] { argmax(on_gpu(e)); }, {"argmax", "empty"});
  expect_error<Error>([&] { argmax(on_gpu(e), 0); }, {"argmax", "non-zero size"});
  expect_error<Error>([&] { tessera::var(on_gpu(i)); }, {"var", "floating"});
  expect_error<Error>([&] { argmax(on_gpu(gt(e, 0.0))); }, {"argmax", "bool"});
}

TEST(CudaKernels, MoreFactoriesMatchCpu) {
  REQUIRE_GPU();
  const Device cuda("cuda");
  expect_same(arange(10, std::nullopt, cuda), arange(10), "arange int");
  expect_same(arange(1, 4, 0.25, std::nullopt, cuda), arange(1, 4, 0.25), "arange float step");
  expect_same(arange(5, -5, -3, kFloat16, cuda), arange(5, -5, -3, kFloat16), "arange negative step float16");
  expect_same(linspace(-1, 2, 7, std::nullopt, cuda), linspace(-1, 2, 7), "linspace");
  expect_same(linspace(0, 10, 4, kInt64, cuda), linspace(0, 10, 4, kInt64), "linspace int64");
  expect_same(linspace(3, 5, 0, std::nullopt, cuda), linspace(3, 5, 0), "linspace empty");
  expect_same(eye(3, std::nullopt, std::nullopt, cuda), eye(3), "eye");
  expect_same(eye(2, 5, kBool, cuda), eye(2, 5, kBool), "eye bool 2x5");
  // Random: ranges and moments (values need not match the CPU's).
  manual_seed(7);
  for (ScalarType dt : kFloats) {
    Tensor u = on_cpu(rand({4000}, dt, cuda));
    EXPECT_EQ(u.dtype(), dt);
    auto v = to(u, kFloat64).to_double_vector();
    double mean_u = 0;
    for (double x : v) {
      EXPECT_GE(x, 0.0);
      EXPECT_LT(x, 1.0);
      mean_u += x / double(v.size());
    }
    EXPECT_NEAR(mean_u, 0.5, 0.03) << tessera::name(dt);
    auto w = to(on_cpu(randn({4000}, dt, cuda)), kFloat64).to_double_vector();
    double m = 0, m2 = 0;
    for (double x : w) m += x / double(w.size());
    for (double x : w) m2 += (x - m) * (x - m) / double(w.size());
    EXPECT_NEAR(m, 0.0, 0.08) << tessera::name(dt);
    EXPECT_NEAR(m2, 1.0, 0.1) << tessera::name(dt);
  }
  auto r = on_cpu(randint(-3, 4, {3000}, kInt32, cuda));
  EXPECT_EQ(r.dtype(), kInt32);
  std::vector<int> seen(7, 0);
  for (double x : r.to_double_vector()) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    seen[size_t(x + 3)]++;
  }
  for (int c : seen) EXPECT_GT(c, 300);
  EXPECT_EQ(on_cpu(randint(5, {2, 3}, std::nullopt, cuda)).dtype(), kInt64);
  // Same seed, same values; another seed, other values.
  manual_seed(11);
  Tensor s1 = on_cpu(rand({16}, std::nullopt, cuda));
  manual_seed(11);
  Tensor s2 = on_cpu(rand({16}, std::nullopt, cuda));
  EXPECT_EQ(s1.to_double_vector(), s2.to_double_vector());
  expect_error<Error>([&] { rand({2}, kInt64, cuda); }, {"rand", "floating"});
  expect_error<Error>([&] { randint(3, 3, {2}, std::nullopt, cuda); }, {"randint", "low < high"});
  expect_error<Error>([&] { randint(0, 300, {2}, kInt8, cuda); }, {"randint", "int8"});
  expect_error<Error>([&] { arange(0, 5, 0, std::nullopt, cuda); }, {"arange", "step"});
  expect_error<Error>([&] { eye(-1, std::nullopt, std::nullopt, cuda); }, {"eye"});
}

TEST(CudaKernels, JoinAndIndexingMatchCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt8, kBool}) {
    std::string n = std::string(tessera::name(dt));
    Tensor x = to(data({4, 5}, kFloat64, -5, 5), dt), y = to(data({2, 5}, kFloat64, -5, 5), dt);
    Tensor gx = on_gpu(x), gy = on_gpu(y);
    expect_same(cat({gx, gy}), cat({x, y}), "cat " + n);
    expect_same(cat({transpose(gx, 0, 1), transpose(gy, 0, 1)}, 1), cat({transpose(x, 0, 1), transpose(y, 0, 1)}, 1),
                "cat transposed " + n);
    expect_same(stack({gx, gx, transpose(transpose(gx, 0, 1), 0, 1)}, 1), stack({x, x, x}, 1), "stack " + n);
    Tensor idx = tensor_from_values(std::vector<double>{3, 0, 0, 2}, {4}, kInt64);
    Tensor gidx = on_gpu(idx);
    expect_same(index_select(gx, 0, gidx), index_select(x, 0, idx), "index_select " + n);
    expect_same(index_select(transpose(gx, 0, 1), 1, gidx), index_select(transpose(x, 0, 1), 1, idx),
                "index_select transposed " + n);
    Tensor gi = tensor_from_values(std::vector<double>{0, 3, 1, 2, 2, 1, 0, 3}, {2, 4}, kInt64);
    expect_same(gather(gx, 0, on_gpu(gi)), gather(x, 0, gi), "gather " + n);
    expect_same(gather(gx, 1, on_gpu(gi)), gather(x, 1, gi), "gather dim 1 " + n);
    // scatter with distinct indices per column (the result of duplicates is unspecified on CUDA)
    Tensor si = tensor_from_values(std::vector<double>{0, 3, 1, 2, 2, 1, 0, 3}, {2, 4}, kInt64);
    expect_same(scatter(gx, 0, on_gpu(si), gy), scatter(x, 0, si, y), "scatter src " + n);
    expect_same(scatter(gx, 0, on_gpu(si), Scalar(1)), scatter(x, 0, si, Scalar(1)), "scatter value " + n);
    if (dt != kBool) {
      const double t = dt == kFloat16 || dt == kBFloat16 ? 4 : 1;
      Tensor dup = tensor_from_values(std::vector<double>{0, 0, 1, 1, 0, 0, 1, 1}, {2, 4}, kInt64);
      expect_same(scatter_add(gx, 0, on_gpu(dup), gy), scatter_add(x, 0, dup, y), "scatter_add " + n, t);
      Tensor src = to(data({4, 4}, kFloat64, -5, 5), dt);
      expect_same(index_add(gx, 1, on_gpu(idx), on_gpu(src)), index_add(x, 1, idx, src), "index_add " + n, t);
      expect_same(index_add(gx, 1, on_gpu(idx), on_gpu(src), 2), index_add(x, 1, idx, src, 2), "index_add alpha " + n,
                  t);
    }
    expect_same(slice_backward(gy, {6, 5}, 0, 1, 6, 3), slice_backward(y, {6, 5}, 0, 1, 6, 3), "slice_backward " + n);
    expect_same(select_backward(select(gx, 1, 2), {4, 5}, 1, -3), select_backward(select(x, 1, 2), {4, 5}, 1, -3),
                "select_backward " + n);
  }
  // In place; int32 indices; empty inputs; errors.
  Tensor x = data({4, 5}, kFloat32), gx = on_gpu(x);
  Tensor si = tensor_from_values(std::vector<double>{3, 1, 0, 2}, {1, 4}, kInt32);
  Tensor v = data({1, 4}, kFloat32);
  scatter_(gx, 0, on_gpu(si), on_gpu(v));
  scatter_(x, 0, si, v);
  expect_same(gx, x, "scatter_ int32 index");
  scatter_add_(gx, 0, on_gpu(si), on_gpu(v));
  scatter_add_(x, 0, si, v);
  expect_same(gx, x, "scatter_add_");
  Tensor ii = tensor_from_values(std::vector<double>{1, 1}, {2}, kInt64);
  Tensor s = data({2, 5}, kFloat32);
  index_add_(gx, 0, on_gpu(ii), on_gpu(s));
  index_add_(x, 0, ii, s);
  expect_same(gx, x, "index_add_ duplicates");
  Tensor e = data({0, 5}, kFloat32);
  expect_same(cat({on_gpu(e), gx}), cat({e, x}), "cat with an empty tensor");
  Tensor no_idx = zeros({0}, kInt64);
  expect_same(index_select(gx, 0, on_gpu(no_idx)), index_select(x, 0, no_idx), "index_select no index");
  Tensor bad = tensor_from_values(std::vector<double>{0, 4}, {2}, kInt64);
  expect_error<Error>([&] { index_select(gx, 0, on_gpu(bad)); }, {"index_select", "index 4", "out of range"});
  expect_error<Error>([&] { gather(gx, 0, on_gpu(reshape(bad, {2, 1}))); }, {"gather", "index 4"});
  expect_error<Error>([&] { index_add(gx, 0, on_gpu(bad), on_gpu(data({2, 5}, kFloat32))); }, {"index_add", "index 4"});
  Tensor before = on_cpu(gx);
  expect_error<Error>([&] { scatter_(gx, 0, on_gpu(reshape(bad, {2, 1})), 1.0); }, {"scatter_", "index 4"});
  expect_same(gx, before, "a refused scatter_ leaves self as it was");
  expect_error<Error>([&] { index_select(gx, 0, on_gpu(to(bad, kFloat32))); }, {"index_select", "int64 or int32"});
  expect_error<Error>([&] { cat({gx, on_gpu(data({2, 4}, kFloat32))}); }, {"cat", "sizes of tensors must match"});
  expect_error<Error>([&] { stack({gx, on_gpu(data({2, 4}, kFloat32))}); }, {"stack", "same shape"});
  expect_error<Error>([&] { cat({gx, data({1, 5}, kFloat32)}); }, {"cat", "cpu"});
}

// ---- advanced indexing (advanced_index_ops.cpp, nonzero.cu)

std::vector<Tensor> on_gpu_list(const std::vector<Tensor>& indices) {
  std::vector<Tensor> out;
  for (const Tensor& t : indices) out.push_back(t.defined() ? on_gpu(t) : t);
  return out;
}

TEST(CudaKernels, AdvancedIndexingMatchesCpu) {
  REQUIRE_GPU();
  const Tensor none;
  auto ids = [](std::vector<double> v, std::vector<int64_t> shape) { return tensor_from_values(v, shape, kInt64); };
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt8, kBool}) {
    const std::string n(tessera::name(dt));
    Tensor x = to(data({4, 5, 6}, kFloat64, -5, 5), dt), gx = on_gpu(x);
    // i has a duplicate row (-1 is 3): fine to read, summed by accumulate.
    Tensor i = ids({3, 0, -1, 2}, {2, 2}), j = ids({4, -5}, {2}), k = ids({5}, {});
    for (const std::vector<Tensor>& idx : std::vector<std::vector<Tensor>>{
             {i}, {none, j}, {i, j}, {i, none, j}, {none, none, k}, {none}, {ids({2}, {}), none, j}})
      expect_same(index(gx, on_gpu_list(idx)), index(x, idx), "index " + n);
    expect_same(index(transpose(gx, 0, 2), on_gpu_list({j})), index(transpose(x, 0, 2), {j}), "index transposed " + n);
    expect_same(index(gx, {none, j}), index(x, {none, j}), "index by cpu index tensors " + n);
    expect_same(index(gx, on_gpu_list({to(i, kInt32)})), index(x, {to(i, kInt32)}), "index int32 " + n);
    // Masks: of self's shape, of leading dims, of a middle dim, uint8, and 0-d.
    Tensor full = gt(to(x, kFloat32), 0.0), rows = gt(data({4}, kFloat32), 0.0), cols = gt(data({5}, kFloat32), 0.0);
    expect_same(index(gx, on_gpu_list({full})), index(x, {full}), "index by a full mask " + n);
    expect_same(index(gx, on_gpu_list({rows})), index(x, {rows}), "index by a row mask " + n);
    expect_same(index(gx, on_gpu_list({none, cols})), index(x, {none, cols}), "index by a column mask " + n);
    expect_same(index(gx, on_gpu_list({none, to(cols, kUInt8), k})), index(x, {none, to(cols, kUInt8), k}),
                "index by a uint8 mask and an index " + n);
    Tensor yes = tensor_from_values(std::vector<double>{1}, {}, kBool);
    expect_same(index(gx, on_gpu_list({yes})), index(x, {yes}), "index by a 0-d mask " + n);
    expect_same(nonzero(gx), nonzero(x), "nonzero " + n);
    expect_same(nonzero(transpose(gx, 0, 2)), nonzero(transpose(x, 0, 2)), "nonzero transposed " + n);
    expect_same(masked_select(gx, on_gpu(full)), masked_select(x, full), "masked_select " + n);
    Tensor bcast = reshape(cols, {5, 1});
    expect_same(masked_select(gx, on_gpu(bcast)), masked_select(x, bcast), "masked_select broadcast mask " + n);
    expect_same(masked_select(select(gx, 0, 1), on_gpu(full)), masked_select(select(x, 0, 1), full),
                "masked_select broadcast self " + n);
    // index_put: distinct positions (duplicates keep an unspecified value); accumulate sums them.
    Tensor rows_v = to(data({4, 2, 6}, kFloat64, -5, 5), dt), row_v = to(data({6}, kFloat64, -5, 5), dt);
    expect_same(index_put(gx, on_gpu_list({none, j}), on_gpu(rows_v)), index_put(x, {none, j}, rows_v), "index_put " + n);
    expect_same(index_put(gx, on_gpu_list({none, j}), on_gpu(row_v)), index_put(x, {none, j}, row_v),
                "index_put broadcast values " + n);
    expect_same(index_put(gx, on_gpu_list({full}), on_gpu(to(ones({}), dt))), index_put(x, {full}, to(ones({}), dt)),
                "index_put by a mask " + n);
    if (dt != kBool) {
      const double t = dt == kFloat16 || dt == kBFloat16 ? 8 : 1;
      Tensor v = to(data({2, 2, 5, 6}, kFloat64, -5, 5), dt);
      expect_same(index_put(gx, on_gpu_list({i}), on_gpu(v), true), index_put(x, {i}, v, true), "index_put accumulate " + n,
                  t);
    }
    // In place, on a strided view; then values that alias the target (read before written).
    Tensor cx = clone(x), gcx = on_gpu(x), w = to(data({2, 5, 4}, kFloat64, -5, 5), dt);
    index_put_(transpose(gcx, 0, 2), on_gpu_list({j}), on_gpu(w));
    index_put_(transpose(cx, 0, 2), {j}, w);
    expect_same(gcx, cx, "index_put_ on a transposed view " + n);
    index_put_(gcx, on_gpu_list({none, j}), slice(gcx, 1, 0, 2, 1));
    index_put_(cx, {none, j}, slice(cx, 1, 0, 2, 1));
    expect_same(gcx, cx, "index_put_ of values that alias self " + n);
  }
  // Sizes that span many tiles of the compaction (and more than one tile per scan thread).
  Tensor big = data({3, 1000, 1001}, kFloat32), gbig = on_gpu(big);
  Tensor big_mask = gt(big, 1.5);
  expect_same(nonzero(gbig), nonzero(big), "nonzero of 3M elements");
  expect_same(masked_select(gbig, on_gpu(big_mask)), masked_select(big, big_mask), "masked_select of 3M elements");
  expect_same(index(gbig, on_gpu_list({big_mask})), index(big, {big_mask}), "index by a 3M-element mask");
  // Empty results and inputs.
  Tensor z = zeros({3, 4}), gz = on_gpu(z);
  expect_same(nonzero(gz), nonzero(z), "nonzero of zeros");
  expect_same(nonzero(on_gpu(zeros({0, 3}))), nonzero(zeros({0, 3})), "nonzero of an empty tensor");
  expect_same(nonzero(on_gpu(ones({}))), nonzero(ones({})), "nonzero of a 0-d tensor");
  expect_same(masked_select(gz, on_gpu(gt(z, 0.0))), masked_select(z, gt(z, 0.0)), "masked_select of nothing");
  expect_same(index(gz, on_gpu_list({none, zeros({0}, kInt64)})), index(z, {none, zeros({0}, kInt64)}),
              "index by an empty index");
  // Errors, raised before anything is written.
  Tensor x = data({4, 5}, kFloat32), gx = on_gpu(x);
  Tensor before = on_cpu(gx);
  expect_error<IndexError>([&] { index(gx, on_gpu_list({none, ids({0, 5}, {2})})); },
                           {"index", "index 5", "dimension 1", "size 5"});
  expect_error<IndexError>([&] { index_put_(gx, on_gpu_list({ids({1, -5}, {2})}), on_gpu(zeros({5}))); },
                           {"index_put_", "index -5", "dimension 0", "size 4"});
  expect_same(gx, before, "a refused index_put_ leaves self as it was");
  expect_error<IndexError>([&] { index(gx, on_gpu_list({none, none, ids({0}, {1})})); }, {"index", "too many indices"});
  expect_error<IndexError>([&] { index(gx, on_gpu_list({gt(data({5}, kFloat32), 0.0)})); },
                           {"index", "shape of the mask", "[5]", "[4, 5]"});
  expect_error<IndexError>([&] { index(gx, on_gpu_list({ids({0, 1}, {2}), ids({0, 1, 2}, {3})})); },
                           {"index", "could not be broadcast", "[2], [3]"});
  expect_error<TypeError>([&] { index(gx, on_gpu_list({to(ids({0}, {1}), kFloat32)})); },
                          {"index", "int64, int32, uint8 or bool", "float32"});
  expect_error<ValueError>([&] { index_put(gx, on_gpu_list({ids({0, 1}, {2})}), on_gpu(zeros({3}))); },
                           {"index_put", "shape mismatch", "[3]", "[2, 5]"});
  expect_error<TypeError>([&] { index_put(gx, on_gpu_list({ids({0}, {1})}), on_gpu(zeros({5}, kFloat64))); },
                          {"index_put", "float32", "float64"});
  expect_error<TypeError>([&] { masked_select(gx, on_gpu(x)); }, {"masked_select", "bool", "float32"});
  expect_error<ValueError>([&] { masked_select(gx, on_gpu(gt(data({3}, kFloat32), 0.0))); },
                           {"masked_select", "[3]", "[4, 5]"});
  expect_error<ValueError>([&] { masked_select(gx, gt(x, 0.0)); }, {"masked_select", "mask", "cpu"});
}


// ---- binary math, scans, flip / searchsorted / bincount, sorts, FFTs, factorizations

Tensor values_of(std::vector<double> v, ScalarType dt) {
  const int64_t n = int64_t(v.size());
  return tensor_from_values(v, {n}, dt);
}

TEST(CudaKernels, BinaryMathMatchesCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : kFloats) {
    Tensor a = data({3, 1, 5}, dt, -5, 5), b = data({4, 5}, dt, -3, 3);
    Tensor ga = on_gpu(a), gb = on_gpu(b);
    std::string n = std::string(tessera::name(dt));
    expect_same(atan2(ga, gb), atan2(a, b), "atan2 " + n, 4);
    expect_same(copysign(ga, gb), copysign(a, b), "copysign " + n);
    expect_same(fmod(ga, gb), fmod(a, b), "fmod " + n, 8);
    expect_same(remainder(ga, gb), remainder(a, b), "remainder " + n, 8);
    expect_same(digamma(ga), digamma(a), "digamma " + n, 8);
  }
  Tensor special = values_of({0.0, -0.0, -1, -2.5, NAN, INFINITY, 1e-3, 12.5}, kFloat64);
  expect_same(digamma(on_gpu(special)), digamma(special), "digamma at poles, NaN, inf");
  expect_same(atan2(on_gpu(to(special, kInt64)), on_gpu(special)), atan2(to(special, kInt64), special),
              "atan2 int64 with float64");
  for (ScalarType dt : {kInt64, kInt32, kInt8, kUInt8}) {
    const bool sign = dt != kUInt8;
    Tensor a = ints({3, 1, 5}, dt, sign ? -100 : 0, 100), b = ints({4, 5}, dt, 1, 7);
    if (sign) b = mul(b, values_of({1, -1, 1, -1, 1}, dt));  // negative divisors too
    Tensor ga = on_gpu(a), gb = on_gpu(b);
    std::string n = std::string(tessera::name(dt));
    expect_same(fmod(ga, gb), fmod(a, b), "fmod " + n);
    expect_same(remainder(ga, gb), remainder(a, b), "remainder " + n);
    expect_same(bitwise_and(ga, gb), bitwise_and(a, b), "bitwise_and " + n);
    expect_same(bitwise_or(ga, gb), bitwise_or(a, b), "bitwise_or " + n);
    expect_same(bitwise_xor(ga, gb), bitwise_xor(a, b), "bitwise_xor " + n);
    expect_same(bitwise_not(ga), bitwise_not(a), "bitwise_not " + n);
    Tensor shifts = ints({4, 5}, dt, sign ? -3 : 0, 70);  // past the width too
    expect_same(bitwise_left_shift(ga, on_gpu(shifts)), bitwise_left_shift(a, shifts), "left shift " + n);
    expect_same(bitwise_right_shift(ga, on_gpu(shifts)), bitwise_right_shift(a, shifts), "right shift " + n);
  }
  Tensor p = gt(data({6}, kFloat32), 0.0), q = gt(data({6}, kFloat32), 0.0);
  expect_same(bitwise_xor(on_gpu(p), on_gpu(q)), bitwise_xor(p, q), "bitwise_xor bool");
  expect_same(bitwise_not(on_gpu(p)), bitwise_not(p), "bitwise_not bool");
  Tensor x = data({4, 6}, kFloat32), y = data({4, 3}, kFloat32), gx = on_gpu(x);
  atan2_(slice(gx, 1, 0, 6, 2), on_gpu(y));
  atan2_(slice(x, 1, 0, 6, 2), y);
  expect_same(gx, x, "atan2_ on a strided view");
  Tensor i = ints({5}, kInt32, -50, 50), gi = on_gpu(i);
  bitwise_left_shift_(gi, on_gpu(ints({5}, kInt32, 0, 40)));
  bitwise_left_shift_(i, ints({5}, kInt32, 0, 40));
  expect_error<Error>([&] { fmod(gi, on_gpu(zeros({5}, kInt32))); }, {"fmod", "ZeroDivisionError"});
  expect_error<Error>([&] { bitwise_and(gx, gx); }, {"bitwise_and", "integer and boolean", "float32"});
  expect_error<Error>([&] { bitwise_left_shift(on_gpu(p), on_gpu(q)); }, {"bitwise_left_shift", "Bool"});
  expect_error<Error>([&] { bitwise_not(gx); }, {"bitwise_not", "float32"});
  expect_error<Error>([&] { atan2_(gi, gi); }, {"atan2_", "can't be cast"});
}

TEST(CudaKernels, ScansMatchCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kBool}) {
    const bool fl = dt != kInt32 && dt != kInt64 && dt != kBool;
    Tensor x = fl ? data({4, 6, 5}, dt, 0.5, 1.5) : dt == kBool ? gt(data({4, 6, 5}, kFloat32), 0.0)
                                                              : ints({4, 6, 5}, dt, -3, 4);
    Tensor gx = on_gpu(x);
    std::string n = std::string(tessera::name(dt));
    for (int64_t dim : {0, 1, 2, -1}) {
      const std::string d = n + " dim " + std::to_string(dim);
      expect_same(cumsum(gx, dim), cumsum(x, dim), "cumsum " + d);
      expect_same(cumprod(gx, dim), cumprod(x, dim), "cumprod " + d);
      auto [gv, gi] = cummax(gx, dim);
      auto [cv, ci] = cummax(x, dim);
      expect_same(gv, cv, "cummax values " + d);
      expect_same(gi, ci, "cummax indices " + d);
      auto [gv2, gi2] = cummin(transpose(gx, 0, 2), dim);
      auto [cv2, ci2] = cummin(transpose(x, 0, 2), dim);
      expect_same(gv2, cv2, "cummin values transposed " + d);
      expect_same(gi2, ci2, "cummin indices transposed " + d);
    }
  }
  Tensor row = data({2, 5000}, kFloat32);  // long rows: a block per row
  expect_same(cumsum(on_gpu(row), 1), cumsum(row, 1), "cumsum long rows", 50);
  Tensor i = ints({3, 4}, kInt32, -9, 9);
  expect_same(cumsum(on_gpu(i), 0, kFloat64), cumsum(i, 0, kFloat64), "cumsum int32 -> float64");
  Tensor ties = values_of({1, 3, 3, NAN, 2, 5}, kFloat32);
  auto [tv, ti] = cummax(on_gpu(ties), 0);
  auto [cv, ci] = cummax(ties, 0);
  expect_same(tv, cv, "cummax NaN stays");
  expect_same(ti, ci, "cummax ties take the later index");
  Tensor f = data({3, 4}, kFloat64), gf = on_gpu(f);
  cumsum_(gf, 1);
  cumsum_(f, 1);
  expect_same(gf, f, "cumsum_");
  expect_error<Error>([&] { cumsum(gf, 2); }, {"cumsum", "dimension out of range"});
}

TEST(CudaKernels, FlipSearchsortedBincountMatchCpu) {
  REQUIRE_GPU();
  Tensor x = data({3, 4, 5}, kFloat32), gx = on_gpu(x);
  for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{0}, {-1}, {0, 2}, {0, 1, 2}, {}})
    expect_same(flip(gx, dims), flip(x, dims), "flip");
  expect_same(flip(transpose(gx, 0, 2), {1}), flip(transpose(x, 0, 2), {1}), "flip transposed");
  expect_error<Error>([&] { flip(gx, {1, -2}); }, {"flip", "multiple times"});

  Tensor seq = std::get<0>(sort(data({3, 8}, kFloat32), false, -1, false));
  Tensor vals = data({3, 6}, kFloat32, -3, 3);
  for (bool right : {false, true}) {
    expect_same(searchsorted(on_gpu(seq), on_gpu(vals), false, right), searchsorted(seq, vals, false, right),
                "searchsorted batched");
    Tensor flat = slice(seq, 0, 0, 1);
    Tensor one = reshape(flat, {8});
    expect_same(searchsorted(on_gpu(one), on_gpu(vals), true, right), searchsorted(one, vals, true, right),
                "searchsorted 1-D out_int32");
  }
  Tensor unsorted = data({8}, kFloat64), order = std::get<1>(sort(unsorted, false, -1, false));
  Tensor v64 = data({5}, kFloat64);
  expect_same(searchsorted(on_gpu(unsorted), on_gpu(v64), false, false, std::string("right"), on_gpu(order)),
              searchsorted(unsorted, v64, false, false, std::string("right"), order), "searchsorted sorter, side");
  expect_error<Error>([&] { searchsorted(on_gpu(seq), on_gpu(vals), false, true, std::string("left")); },
                      {"searchsorted", "opposites"});

  Tensor idx = ints({50}, kInt64, 0, 9), w = data({50}, kFloat32);
  expect_same(bincount(on_gpu(idx)), bincount(idx), "bincount");
  expect_same(bincount(on_gpu(idx), on_gpu(w), 12), bincount(idx, w, 12), "bincount weights, minlength", 10);
  expect_same(bincount(on_gpu(to(idx, kUInt8)), on_gpu(to(w, kFloat64))), bincount(to(idx, kUInt8), to(w, kFloat64)),
              "bincount uint8, float64 weights");
  expect_same(bincount(on_gpu(zeros({0}, kInt64)), Tensor(), 3), bincount(zeros({0}, kInt64), Tensor(), 3),
              "bincount empty");
  expect_error<Error>([&] { bincount(on_gpu(values_of({1, -4, 2, -1}, kInt64))); }, {"bincount", "-4"});
}

TEST(CudaKernels, SortAndTopkMatchCpu) {
  REQUIRE_GPU();
  // Duplicates, NaN, -0.0 and +0.0: values and indices must match exactly (stable order).
  Tensor f = values_of({3, NAN, -0.0, 1, 0.0, 3, -INFINITY, NAN, 1, 2}, kFloat32);
  Tensor fx = reshape(f, {2, 5});
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool}) {
    Tensor x = dt == kFloat32 ? fx : dt == kFloat64 || dt == kFloat16 || dt == kBFloat16 ? to(fx, dt)
               : dt == kBool ? gt(data({4, 9}, kFloat32), 0.0) : ints({4, 9}, dt, 0, 5);
    Tensor gx = on_gpu(x);
    std::string n = std::string(tessera::name(dt));
    for (int64_t dim : {0, 1, -1})
      for (bool descending : {false, true}) {
        auto [gv, gi] = sort(gx, true, dim, descending);
        auto [cv, ci] = sort(x, true, dim, descending);
        expect_same(gv, cv, "sort values " + n);
        expect_same(gi, ci, "sort indices " + n);
      }
    for (bool largest : {true, false})
      for (bool sorted : {true, false}) {
        auto [gv, gi] = topk(gx, 2, 1, largest, sorted);
        auto [cv, ci] = topk(x, 2, 1, largest, sorted);
        expect_same(gv, cv, "topk values " + n);
        expect_same(gi, ci, "topk indices " + n);
      }
  }
  Tensor big = data({1, 20000}, kFloat32), gbig = on_gpu(big);  // one long row: DeviceRadixSort
  expect_same(std::get<0>(sort(gbig, true, 1, true)), std::get<0>(sort(big, true, 1, true)), "sort one long row");
  expect_same(std::get<1>(topk(gbig, 7, 1, true, false)), std::get<1>(topk(big, 7, 1, true, false)),
              "topk unsorted one long row");
  expect_error<Error>([&] { topk(gbig, 20001, 1); }, {"topk", "out of range"});
}

TEST(CudaKernels, FftMatchesCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : {kFloat32, kFloat64}) {
    Tensor x = data({4, 6, 5}, dt), y = data({4, 6, 5}, dt);
    Tensor z = complex(x, y), gz = on_gpu(z);
    const double tol = dt == kFloat32 ? 20 : 1e3;  // transforms of a few dozen points
    std::string n = std::string(tessera::name(dt));
    for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{{2}, {1}, {0, 2}, {0, 1, 2}})
      for (int64_t norm : {0, 1, 2}) {
        expect_same(_fft_c2c(gz, dims, norm, true), _fft_c2c(z, dims, norm, true), "c2c forward " + n, tol);
        expect_same(_fft_c2c(gz, dims, norm, false), _fft_c2c(z, dims, norm, false), "c2c inverse " + n, tol);
        for (bool onesided : {true, false})
          expect_same(_fft_r2c(on_gpu(x), dims, norm, onesided), _fft_r2c(x, dims, norm, onesided), "r2c " + n, tol);
        // A Hermitian half-spectrum: r2c's own output.
        Tensor half = _fft_r2c(x, dims, 0, true);
        const int64_t last = dims.back(), length = x.size(last);
        expect_same(_fft_c2r(on_gpu(half), dims, norm, length), _fft_c2r(half, dims, norm, length), "c2r " + n, tol);
      }
    expect_same(_fft_c2c(transpose(gz, 0, 2), {1}, 0, true), _fft_c2c(transpose(z, 0, 2), {1}, 0, true),
                "c2c transposed " + n, tol);
  }
  expect_error<Error>([&] { _fft_c2c(on_gpu(data({4}, kFloat32)), {0}, 0, true); }, {"_fft_c2c", "complex"});
}

TEST(CudaKernels, LinalgMatchesCpu) {
  REQUIRE_GPU();
  for (ScalarType dt : {kFloat64, kFloat32}) {
    const double tol = dt == kFloat32 ? 200 : 1e4;
    Tensor a = data({2, 4, 4}, dt), spd = add(matmul(a, transpose(a, 1, 2)), mul(eye(4, std::nullopt, dt), 4.0));
    std::string n = std::string(tessera::name(dt));
    for (bool upper : {false, true}) {
      auto [gl, ginfo] = linalg_cholesky_ex(on_gpu(spd), upper, false);
      auto [cl, cinfo] = linalg_cholesky_ex(spd, upper, false);
      expect_same(gl, cl, "cholesky " + n, tol);
      expect_same(ginfo, cinfo, "cholesky info " + n);
    }
    auto [glu, gpiv, ginfo] = linalg_lu_factor_ex(on_gpu(a), true, false);
    auto [clu, cpiv, cinfo] = linalg_lu_factor_ex(a, true, false);
    expect_same(glu, clu, "lu_factor " + n, tol);
    expect_same(gpiv, cpiv, "lu_factor pivots " + n);
    expect_same(ginfo, cinfo, "lu_factor info " + n);
    Tensor b = data({2, 4, 3}, dt);
    for (bool adjoint : {false, true})
      expect_same(linalg_lu_solve(glu, gpiv, on_gpu(b), true, adjoint), linalg_lu_solve(clu, cpiv, b, true, adjoint),
                  "lu_solve " + n, tol);
    for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{2, 5, 3}, {2, 3, 5}, {4, 4}}) {
      Tensor m = data(shape, dt);
      for (std::string mode : {"reduced", "complete", "r"}) {
        auto [gq, gr] = linalg_qr(on_gpu(m), mode);
        auto [cq, cr] = linalg_qr(m, mode);
        expect_same(abs(gr), abs(cr), "qr R " + mode + " " + n, tol);
        if (mode != "r") expect_same(matmul(gq, gr), matmul(cq, cr), "qr Q R " + mode + " " + n, tol);
      }
      for (bool full : {false, true}) {
        auto [gu, gs, gvh] = linalg_svd(on_gpu(m), full);
        auto [cu, cs, cvh] = linalg_svd(m, full);
        expect_same(gs, cs, "svd S " + n, tol);
        auto shape_of = [](const Tensor& t) { return std::vector<int64_t>(t.sizes().begin(), t.sizes().end()); };
        ASSERT_EQ(shape_of(gu), shape_of(cu)) << "svd U " << n;
        ASSERT_EQ(shape_of(gvh), shape_of(cvh)) << "svd Vh " << n;
        if (!full) expect_same(matmul(mul(gu, unsqueeze(gs, -2)), gvh), m, "svd U S Vh " + n, tol);
      }
    }
    for (std::string uplo : {"L", "U"}) {
      auto [gw, gv] = linalg_eigh(on_gpu(spd), uplo);
      auto [cw, cv] = linalg_eigh(spd, uplo);
      expect_same(gw, cw, "eigh values " + n, tol);
      expect_same(abs(gv), abs(cv), "eigh vectors " + n, tol);
    }
  }
  Tensor not_spd = on_gpu(values_of({1, 2, 2, 1}, kFloat64));
  expect_error<Error>([&] { linalg_cholesky_ex(reshape(not_spd, {2, 2}), false, true); },
                      {"cholesky_ex", "positive-definite", "order 2"});
  expect_error<Error>([&] { linalg_qr(on_gpu(data({3, 3}, kFloat32)), "thin"); }, {"linalg.qr", "thin"});
}

}  // namespace
