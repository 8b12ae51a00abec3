// Faulty plugins the host must survive: an init that lets a C++ exception escape, a host table
// smaller than the plugin's header (an older host, simulated by handing a plugin a truncated copy
// of the table), kernels that fail with and without a message, an allocator that runs out.
// Each refusal names the plugin, registers nothing, and leaves the host and other plugins working.
// (A failing init, a kernel for an unknown operator and duplicate kernels: test_plugins.cpp.)
#include "test_util.h"

#include <tessera/device_registry.h>
#include <tessera/runtime.h>

#include <dlfcn.h>

#include <cstring>
#include <memory>
#include <stdexcept>

using namespace tessera;
using tessera::testing::expect_error;

namespace {
std::string fixture(const char* name) { return std::string(TESSERA_FIXTURE_DIR) + "/libtessera_" + name + ".so"; }

bool is_loaded(const std::string& name) {
  for (const PluginInfo& p : loaded_plugins())
    if (p.name == name) return true;
  return false;
}

// The host and another plugin still work: the CPU plugin adds, the good fixture's operator runs.
void expect_host_still_works() {
  EXPECT_EQ(add(ones({3}), ones({3})).to_double_vector(), (std::vector<double>{2, 2, 2}));
  load_plugin(fixture("good"));
  Tensor x = tensor_from_values(std::vector<double>{1, 2, 3}, {3});
  ts_value v[1];
  detail::box(v[0], x);
  ts_stack stack{sizeof(ts_stack), v, 1, 1};
  Dispatcher::instance().call(Dispatcher::instance().find_or_throw("test::double_it"), &stack);
  EXPECT_EQ(detail::unbox_tensor(v[0]).to_double_vector(), (std::vector<double>{2, 4, 6}));
}

// A fixture's entry point, without registering it (the library stays open for the process).
ts_plugin_init_fn entry_of(const char* name) {
  void* lib = dlopen(fixture(name).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw std::runtime_error(dlerror());
  return reinterpret_cast<ts_plugin_init_fn>(dlsym(lib, TESSERA_PLUGIN_ENTRY_NAME));
}

// load_plugin_from_entry through a wrapper that hands the plugin a copy of the host table holding
// only its first `size` bytes, reporting ABI 1.`minor`: what an older host would pass.
struct Truncation {
  ts_plugin_init_fn real = nullptr;
  size_t size = 0;
  int32_t minor = 0;
};
Truncation truncation;

ts_status init_with_truncated_table(const ts_host_api* host, ts_registrar reg, ts_plugin_info* info) {
  static std::vector<std::unique_ptr<char[]>> tables;  // a loaded plugin keeps using its table
  auto copy = std::make_unique<char[]>(truncation.size);  // exactly `size` bytes: ASan sees over-reads
  std::memcpy(copy.get(), host, truncation.size);
  auto* table = reinterpret_cast<ts_host_api*>(copy.get());
  table->struct_size = truncation.size;
  if (TS_STRUCT_HAS(table, ts_host_api, abi_minor)) table->abi_minor = truncation.minor;
  tables.push_back(std::move(copy));
  return truncation.real(table, reg, info);
}

const PluginInfo& load_with_truncated_table(const char* name, size_t size, int32_t minor) {
  truncation = {entry_of(name), size, minor};
  return load_plugin_from_entry(init_with_truncated_table, fixture(name));
}

// Table sizes of the earlier minors: everything before the first function each minor added.
constexpr size_t kTable_1_0 = offsetof(ts_host_api, default_float_dtype);
constexpr size_t kTable_1_1 = offsetof(ts_host_api, tensor_get_slot);

// Calls operator `name` with boxed arguments; the stack holds its returns afterwards.
std::vector<ts_value> call_boxed(const char* name, std::vector<ts_value> args) {
  int32_t n = int32_t(args.size());
  args.resize(4);
  ts_stack stack{sizeof(ts_stack), args.data(), n, 4};
  Dispatcher::instance().call(Dispatcher::instance().find_or_throw(name), &stack);
  args.resize(size_t(stack.size));
  return args;
}
Tensor call_op(const char* name, std::vector<ts_value> args) {
  auto returns = call_boxed(name, std::move(args));
  return returns.empty() ? Tensor() : detail::unbox_tensor(returns[0]);
}

struct DefaultDtypeGuard {
  ScalarType saved = get_default_dtype();
  explicit DefaultDtypeGuard(ScalarType dtype) { set_default_dtype(dtype); }
  ~DefaultDtypeGuard() { set_default_dtype(saved); }
};
}  // namespace

// ---------------------------------------------------------------- exceptions out of init

TEST(FaultPlugins, InitThatThrowsIsRefusedAndKeepsNothing) {
  for (int attempt = 0; attempt < 2; ++attempt) {  // refused the same way every time
    expect_error<PluginError>([] { load_plugin(fixture("init_throws")); },
                              {"plugin 'init_throws'", "failed to initialise", "exception escaped tessera_plugin_init",
                               "simulated driver crash while probing devices"});
    EXPECT_EQ(Dispatcher::instance().find("throwing::op"), nullptr);
    EXPECT_EQ(DeviceRegistry::instance().find("throwdev"), nullptr);
    EXPECT_FALSE(is_loaded("init_throws"));
  }
  auto names = DeviceRegistry::instance().names();
  EXPECT_EQ(std::find(names.begin(), names.end(), "throwdev"), names.end());
  expect_host_still_works();
}

// Thrown before the plugin described itself: the message is about the exception (named after
// the file), not a bogus "ABI 0.0" version mismatch.
TEST(FaultPlugins, InitThatThrowsBeforeDescribingItself) {
  auto early = [](const ts_host_api*, ts_registrar, ts_plugin_info*) -> ts_status {
    throw std::logic_error("no device configuration file");
  };
  expect_error<PluginError>([&] { load_plugin_from_entry(+early, "/opt/x/libtessera_early_throw.so"); },
                            {"plugin 'early_throw'", "exception escaped", "no device configuration file"});
  try {
    load_plugin_from_entry(+early, "/opt/x/libtessera_early_throw.so");
  } catch (const PluginError& e) {
    EXPECT_EQ(std::string(e.what()).find("major versions differ"), std::string::npos) << e.what();
  }
  auto odd = [](const ts_host_api* host, ts_registrar reg, ts_plugin_info* info) -> ts_status {
    info->name = "throws_an_int";
    info->abi_major = TESSERA_ABI_MAJOR;
    host->set_error(nullptr, "about to give up");
    host->def_operator(reg, "odd::op(Tensor self) -> Tensor");
    throw 42;
  };
  expect_error<PluginError>([&] { load_plugin_from_entry(+odd, "<test>/odd"); },
                            {"plugin 'throws_an_int'", "not a std::exception", "about to give up"});
  EXPECT_EQ(Dispatcher::instance().find("odd::op"), nullptr);
  expect_host_still_works();
}

// ---------------------------------------------------------------- a smaller host table

// On a 1.0-sized table the probe sees neither default_float_dtype nor the transform functions, and
// its kernel falls back to float32 although the host's default is float64.
TEST(FaultPlugins, PluginAdaptsToAHostTableOfAnOlderMinor) {
  DefaultDtypeGuard float64_default(kFloat64);
  const PluginInfo& info = load_with_truncated_table("host_table_probe", kTable_1_0, 0);
  EXPECT_EQ(info.name, "host_table_probe");
  auto features = call_boxed("probe::features", {});
  ASSERT_EQ(features.size(), 1u);
  EXPECT_EQ(features[0].u.i, 0) << "the probe saw functions past a 1.0 table";
  std::vector<int64_t> size{2, 2};
  ts_value arg{};
  detail::box(arg, size);
  Tensor t = call_op("probe::ones_default", {arg});
  EXPECT_EQ(t.dtype(), kFloat32);
  EXPECT_EQ(t.to_double_vector(), (std::vector<double>{1, 1, 1, 1}));
  expect_host_still_works();
}

// A plugin that needs ABI 1.2 (autograd) handed a 1.1 table refuses itself, saying what it needs.
TEST(FaultPlugins, PluginNeedingANewerTableRefusesCleanly) {
  truncation = {nullptr, kTable_1_1, 1};
  void* lib = dlopen((std::string(TESSERA_PLUGIN_DIR) + "/libtessera_autograd.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  truncation.real = reinterpret_cast<ts_plugin_init_fn>(dlsym(lib, TESSERA_PLUGIN_ENTRY_NAME));
  expect_error<PluginError>([] { load_plugin_from_entry(init_with_truncated_table, "<test>/libtessera_autograd.so"); },
                            {"plugin 'autograd'", "failed to initialise", "needs host ABI 1.2", "got 1.1"});
  EXPECT_EQ(Dispatcher::instance().find("autograd::backward"), nullptr);
  EXPECT_FALSE(is_loaded("autograd"));
  expect_host_still_works();
}

// A table too small to hold even set_error: the plugin can only return a status; the host still
// names it.
TEST(FaultPlugins, TableTooSmallForSetErrorIsRefusedByStatus) {
  expect_error<PluginError>([] { load_with_truncated_table("faulty_kernels", sizeof(size_t), 0); },
                            {"plugin 'faulty_kernels'", "failed to initialise", "no message"});
  EXPECT_EQ(Dispatcher::instance().find("faulty::silent"), nullptr);
  EXPECT_EQ(DeviceRegistry::instance().find("faultydev"), nullptr);
  expect_host_still_works();
}

// ---------------------------------------------------------------- failing kernels and devices

TEST(FaultPlugins, KernelErrorsNamePluginOperatorAndDevice) {
  load_plugin(fixture("faulty_kernels"));
  ts_value arg{};
  Tensor on_cpu = ones({3});
  Tensor on_dev = to_device(on_cpu, Device("faultydev:0"));
  for (const Tensor& x : {on_cpu, on_dev}) {
    std::string device = x.device().str();
    detail::box(arg, x);
    expect_error<IndexError>([&] { call_op("faulty::index_error", {arg}); },
                             {"index_error", "index 7 is out of range", "plugin 'faulty_kernels'", "device " + device});
    // No message: the host still says who failed, where, and with which status.
    expect_error<ValueError>([&] { call_op("faulty::silent", {arg}); },
                             {"faulty::silent", "no message", "plugin 'faulty_kernels'", "device " + device});
  }
  expect_host_still_works();
}

// Device 1 of faultydev has no memory: an allocation there is an OutOfMemoryError naming the
// device and the plugin; device 0 keeps working.
TEST(FaultPlugins, AllocatorFailureIsOutOfMemoryNamingThePlugin) {
  load_plugin(fixture("faulty_kernels"));
  expect_error<OutOfMemoryError>([] { empty({16}, kFloat32, Device("faultydev:1")); },
                                 {"out of memory", "faultydev:1", "plugin 'faulty_kernels'"});
  expect_error<OutOfMemoryError>([] { to_device(ones({4}), Device("faultydev:1")); }, {"out of memory", "faultydev:1"});
  Tensor ok = to_device(ones({4}), Device("faultydev:0"));
  EXPECT_EQ(to_device(ok, Device("cpu")).to_double_vector(), (std::vector<double>{1, 1, 1, 1}));
  // An index past the plugin's two devices is refused before its allocator sees it.
  expect_error<ValueError>([] { empty({16}, kFloat32, Device("faultydev:2")); },
                           {"device index 2 is out of range", "'faultydev'", "plugin 'faulty_kernels'", "2 devices"});
  expect_host_still_works();
}
