// Plugin loading: lazy discovery, listing, the handshake's refusals (one fixture plugin per
// refusal), transactional registration, custom operators and devices from plugins.
#include <tessera/cpu_fallback.h>
#include <tessera/device_registry.h>
#include <tessera/process_group_backend.h>
#include <tessera/tessera.h>

#include <gtest/gtest.h>

#include <cstdlib>

using namespace tessera;

namespace {
std::string fixture(const char* name) { return std::string(TESSERA_FIXTURE_DIR) + "/libtessera_" + name + ".so"; }

// Expects load_plugin(path) to be refused with a PluginError containing every fragment.
void expect_refused(const std::string& path, std::vector<std::string> fragments) {
  try {
    load_plugin(path);
    ADD_FAILURE() << "expected " << path << " to be refused";
  } catch (const PluginError& e) {
    std::string msg = e.what();
    for (auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
  }
  // The host is still usable.
  Tensor x = ones({3});
  EXPECT_EQ(add(x, x).to_double_vector(), (std::vector<double>{2, 2, 2}));
}

const PluginInfo* find_plugin(const std::string& name) {
  static std::vector<PluginInfo> cache;
  cache = loaded_plugins();
  for (auto& p : cache)
    if (p.name == name) return &p;
  return nullptr;
}
}  // namespace

TEST(Plugins, CpuPluginIsLoadedLazilyAndListed) {
  Tensor x = zeros({2, 2});  // first use of "cpu" loads libtessera_cpu.so from lib/tessera/plugins
  const PluginInfo* cpu = find_plugin("cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->abi_major, TESSERA_ABI_MAJOR);
  EXPECT_EQ(cpu->devices, std::vector<std::string>{"cpu"});
  EXPECT_GT(cpu->kernels, 100);
  EXPECT_NE(cpu->path.find("libtessera_cpu.so"), std::string::npos);
  EXPECT_NE(describe_plugins().find("cpu"), std::string::npos);
  // Loading the same file again is a no-op.
  EXPECT_EQ(load_plugin(cpu->path).name, "cpu");
}

TEST(Plugins, SearchPathHasEnvironmentThenInstallFolder) {
  setenv("TESSERA_PLUGIN_PATH", "/tmp/a:/tmp/b", 1);
  auto paths = plugin_search_path();
  unsetenv("TESSERA_PLUGIN_PATH");
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(paths[0], "/tmp/a");
  EXPECT_EQ(paths[1], "/tmp/b");
  EXPECT_NE(paths[2].find("tessera/plugins"), std::string::npos);
}

TEST(Plugins, RefusesAFileThatIsNotAPlugin) {
  expect_refused(std::string(TESSERA_FIXTURE_DIR) + "/libnot_a_plugin.so",
                 {"is not a Tessera plugin", "tessera_plugin_init"});
  expect_refused("/nonexistent/libtessera_x.so", {"no such file"});
}

TEST(Plugins, RefusesAbiMajorMismatchNamingBothVersions) {
  expect_refused(fixture("abi_major_mismatch"),
                 {"future_major", fmt::format("ABI {}.0", TESSERA_ABI_MAJOR + 1),
                  fmt::format("ABI {}.{}", TESSERA_ABI_MAJOR, TESSERA_ABI_MINOR), "major versions differ"});
}

TEST(Plugins, RefusesNewerMinorAndKeepsNothingItRegistered) {
  expect_refused(fixture("newer_minor"),
                 {"future_minor", fmt::format("ABI {}.{}", TESSERA_ABI_MAJOR, TESSERA_ABI_MINOR + 1), "newer"});
  EXPECT_EQ(Dispatcher::instance().find("future::op"), nullptr);
}

TEST(Plugins, PluginBuiltAgainstAnOlderMinorLoads) {
  const PluginInfo& info = load_plugin(fixture("built_against_1_0"));
  EXPECT_EQ(info.abi_major, 1);
  EXPECT_EQ(info.abi_minor, 0);
  EXPECT_NE(Dispatcher::instance().find("old::identity"), nullptr);
  EXPECT_NE(describe_plugins().find("built_against_1_0"), std::string::npos);
}

TEST(Plugins, ProcessGroupBackendOfAbi17IsAcceptedWithoutItsNewerFields) {
  load_plugin(fixture("pg_backend_1_7"));
  const ProcessGroupBackendEntry& entry = process_group_backend("oldpg");
  EXPECT_EQ(entry.device_types, std::vector<std::string>{"cpu"});
  EXPECT_NE(entry.desc.work_release, nullptr);
  EXPECT_EQ(entry.desc.work_source_rank, nullptr) << "a field past the plugin's struct_size must read as NULL";
  EXPECT_EQ(entry.desc.struct_size, sizeof(ts_process_group_backend));
}

TEST(Plugins, PluginRefusingAnOlderHostIsReported) {
  expect_refused(fixture("needs_newer_host"), {"needs_newer_host", "needs a host of ABI"});
}

TEST(Plugins, InitFailureCarriesThePluginsMessage) {
  expect_refused(fixture("init_fails"), {"init_fails", "failed to initialise", "the simulated accelerator was not found"});
  EXPECT_EQ(Dispatcher::instance().find("failing::op"), nullptr);
  EXPECT_EQ(find_plugin("init_fails"), nullptr);
}

TEST(Plugins, KernelForUnknownOperatorRefusesTheWholePlugin) {
  expect_refused(fixture("unknown_op"), {"unknown_op", "no_such_operator.Tensor", "does not exist"});
  EXPECT_EQ(Dispatcher::instance().find("unknown_op_plugin::valid"), nullptr);
  EXPECT_EQ(find_plugin("unknown_op"), nullptr);
}

TEST(Plugins, SecondKernelForSameOperatorAndKeyIsRefused) {
  zeros({1});  // the CPU plugin owns (add.Tensor, CPU)
  expect_refused(fixture("duplicate_kernel"), {"duplicate_kernel", "add.Tensor", "CPU", "plugin 'cpu'"});
  auto rows = Dispatcher::instance().describe("add.Tensor");
  for (auto& r : rows)
    if (r.key == "CPU") EXPECT_EQ(r.plugin, "cpu");
}

TEST(Plugins, GoodPluginAddsCustomOperatorAndDevice) {
  const PluginInfo& info = load_plugin(fixture("good"));
  EXPECT_EQ(info.name, "good");
  EXPECT_EQ(info.version, "1.2.3");
  EXPECT_EQ(info.devices, std::vector<std::string>{"testdev"});
  EXPECT_EQ(info.operators_defined.size(), 2u);
  EXPECT_EQ(info.kernels, 4);

  auto op = Dispatcher::instance().find_or_throw("test::double_it");
  Tensor x = tensor_from_values(std::vector<double>{1, 2, 3}, {3});
  ts_value v[1];
  detail::box(v[0], x);
  ts_stack stack{sizeof(ts_stack), v, 1, 1};
  Dispatcher::instance().call(op, &stack);
  EXPECT_EQ(detail::unbox_tensor(v[0]).to_double_vector(), (std::vector<double>{2, 4, 6}));

  // The device is usable by name, with its own dispatch key.
  Device dev("testdev:1");
  EXPECT_EQ(dev.str(), "testdev:1");
  Tensor t = empty({2, 3}, kFloat32, dev);
  EXPECT_EQ(t.device(), dev);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  // Tensors move between devices through the plugins' copy functions.
  Tensor on_dev = to_device(x, dev);
  EXPECT_EQ(on_dev.device(), dev);
  EXPECT_EQ(to_device(on_dev, Device("cpu")).to_double_vector(), (std::vector<double>{1, 2, 3}));
  // With the CPU fallback off, an operator testdev lacks names the key and what is registered.
  set_cpu_fallback(false);
  try {
    add(t, t);
    FAIL();
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("testdev"), std::string::npos) << e.what();
  }
  reset_cpu_fallback();
  // A failing kernel of a plugin names the plugin.
  auto fails = Dispatcher::instance().find_or_throw("test::always_fails");
  detail::box(v[0], x);
  ts_stack stack2{sizeof(ts_stack), v, 1, 1};
  try {
    Dispatcher::instance().call(fails, &stack2);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("plugin 'good'"), std::string::npos) << e.what();
  }
}

TEST(Plugins, DevicePluginIsLoadedOnFirstUseOfItsName) {
  setenv("TESSERA_PLUGIN_PATH", TESSERA_FIXTURE_DIR, 1);
  EXPECT_EQ(find_plugin("lazydev"), nullptr);
  Tensor t = zeros({4}, kFloat32, Device("lazydev"));
  unsetenv("TESSERA_PLUGIN_PATH");
  EXPECT_NE(find_plugin("lazydev"), nullptr);
  EXPECT_EQ(t.device().type_name(), "lazydev");
  EXPECT_EQ(t.to_double_vector(), (std::vector<double>{0, 0, 0, 0}));
}

TEST(Plugins, UnknownDeviceNameIsAClearError) {
  // The message lists the folders searched: TESSERA_PLUGIN_PATH's, then the install's.
  setenv("TESSERA_PLUGIN_PATH", "/nonexistent/vendor-a:/nonexistent/vendor-b", 1);
  try {
    Device d("nosuchdevice");
    FAIL();
  } catch (const ValueError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown device type 'nosuchdevice'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("libtessera_nosuchdevice.so"), std::string::npos) << msg;
    EXPECT_NE(msg.find("searched: /nonexistent/vendor-a, /nonexistent/vendor-b, "), std::string::npos) << msg;
    EXPECT_NE(msg.find("tessera/plugins"), std::string::npos) << msg;
  }
  unsetenv("TESSERA_PLUGIN_PATH");
  EXPECT_THROW(Device("cpu:x"), ValueError);
}

namespace {
int refused_device_counter = 0;
// An init that registers a fresh device name, then fails: the name must not keep its key.
ts_status register_device_then_fail(const ts_host_api* host, ts_registrar reg, ts_plugin_info* info) {
  info->name = "refused_device";
  info->version = "0";
  info->abi_major = TESSERA_ABI_MAJOR;
  info->abi_minor = TESSERA_ABI_MINOR;
  info->min_host_abi_minor = 0;
  static std::string name;
  name = fmt::format("refused_dev_{}", refused_device_counter++);
  ts_device_desc desc{};
  desc.struct_size = sizeof desc;
  desc.name = name.c_str();
  desc.allocate = [](void*, int32_t, size_t) -> void* { return nullptr; };
  desc.deallocate = [](void*, int32_t, void*, size_t) {};
  desc.copy_to_host = [](void*, int32_t, void*, const void*, size_t) -> ts_status { return TS_OK; };
  desc.copy_from_host = desc.copy_to_host;
  ts_dispatch_key key = -1;
  host->register_device(reg, &desc, &key);
  host->set_error(nullptr, "simulated failure after registering a device");
  return TS_ERROR;
}
}  // namespace

TEST(Plugins, RefusedPluginsDoNotUseUpDeviceKeys) {
  init();
  // Far more refusals than there are dynamic backend keys (21).
  for (int i = 0; i < 60; ++i)
    EXPECT_THROW(load_plugin_from_entry(register_device_then_fail, "refused_device.so"), PluginError);
  EXPECT_EQ(DeviceRegistry::instance().find("refused_dev_0"), nullptr);
  // A new device still gets a key.
  EXPECT_NO_THROW(DeviceRegistry::instance().backend_key("still_room_for_me"));
  DeviceRegistry::instance().forget_unregistered("still_room_for_me");
}

TEST(Plugins, HostApiTableIsVersionedAndSized) {
  const ts_host_api* api = host_api();
  EXPECT_EQ(api->struct_size, sizeof(ts_host_api));
  EXPECT_EQ(api->abi_major, TESSERA_ABI_MAJOR);
  EXPECT_EQ(api->abi_minor, TESSERA_ABI_MINOR);
  EXPECT_TRUE(TS_STRUCT_HAS(api, ts_host_api, num_threads));
}
