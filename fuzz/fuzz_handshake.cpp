// libFuzzer target: the plugin handshake. The input drives a fake plugin entry point — what it
// writes into ts_plugin_info (struct size, name/version or NULL, ABI major/minor, oldest host
// minor), the status it returns, and a sequence of registrations with fuzzed names, keys, NULL
// pointers and device descriptions — which is loaded through the host's real path,
// tessera::load_plugin_from_entry. Every outcome must be success or PluginError, and a refused
// plugin must leave nothing registered.
#include <tessera/device_registry.h>
#include <tessera/dispatcher.h>
#include <tessera/error.h>
#include <tessera/runtime.h>

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <deque>
#include <string>
#include <vector>

namespace {

FuzzedDataProvider* input = nullptr;  // the current input, read by the fake entry point
std::deque<std::string> strings;      // plugin-owned strings must outlive the plugin: keep them all
std::vector<std::string> tried_ops, tried_devices;
const std::string kPath = "<fuzz>/libtessera_fuzz.so";

const char* keep(std::string s) { return strings.emplace_back(std::move(s)).c_str(); }

// A string the plugin hands the host: NULL, empty, one of a few that collide, or a fresh one.
const char* pick_name(const char* prefix) {
  static int fresh = 0;
  switch (input->ConsumeIntegralInRange(0, 5)) {
    case 0: return nullptr;
    case 1: return "";
    case 2: return keep(std::string(prefix) + std::to_string(input->ConsumeIntegralInRange(0, 3)));
    case 3: return keep(input->ConsumeRandomLengthString(24));
    default: return keep(std::string(prefix) + "fresh" + std::to_string(fresh++));
  }
}

const char* pick_schema() {
  switch (input->ConsumeIntegralInRange(0, 4)) {
    case 0: return nullptr;
    case 1: return "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor";  // exists already
    case 2: return keep(input->ConsumeRandomLengthString(64));
    default: {
      const char* name = pick_name("fz::op");
      std::string schema = std::string(name ? name : "") + "(Tensor self, int n=1) -> Tensor";
      tried_ops.push_back(name ? name : "");
      return keep(schema);
    }
  }
}

const char* pick_op() {
  switch (input->ConsumeIntegralInRange(0, 3)) {
    case 0: return nullptr;
    case 1: return "add.Tensor";
    case 2: return tried_ops.empty() ? "fz::none" : keep(tried_ops.back());
    default: return pick_name("fz::op");
  }
}

int32_t pick_key() {
  if (input->ConsumeBool()) return input->ConsumeIntegral<int32_t>();  // mostly out of range
  return input->ConsumeIntegralInRange(-1, 64);
}

ts_status kernel(void*, ts_call, ts_keyset, ts_stack*) { return TS_OK; }
int32_t count(void*) { return 1; }
void* alloc(void*, int32_t, size_t n) { return std::malloc(n ? n : 1); }
void dealloc(void*, int32_t, void* p, size_t) { std::free(p); }
ts_status copy(void*, int32_t, void* d, const void* s, size_t n) { std::memcpy(d, s, n); return TS_OK; }

std::deque<ts_device_desc> descs;  // the host copies the struct, but keep it for good measure

void do_registrations(const ts_host_api* host, ts_registrar reg) {
  int n = input->ConsumeIntegralInRange(0, 8);
  for (int i = 0; i < n; ++i) {
    ts_registrar r = input->ConsumeIntegralInRange(0, 15) == 0 ? nullptr : reg;  // a NULL registrar now and then
    switch (input->ConsumeIntegralInRange(0, 6)) {
      case 0: host->def_operator(r, pick_schema()); break;
      case 1: host->register_kernel(r, pick_op(), pick_key(), input->ConsumeBool() ? kernel : nullptr, nullptr); break;
      case 2: host->register_fallthrough(r, pick_op(), pick_key()); break;
      case 3: host->register_fallback(r, pick_key(), input->ConsumeBool() ? kernel : nullptr, nullptr); break;
      case 4: {
        ts_device_desc& d = descs.emplace_back();
        d.struct_size = input->ConsumeBool() ? sizeof d : input->ConsumeIntegralInRange<size_t>(0, 2 * sizeof d);
        d.name = pick_name("fzdev");
        if (d.name) tried_devices.push_back(d.name);
        d.host_accessible = 1;
        uint8_t slots = input->ConsumeIntegral<uint8_t>();  // which optional/required slots are NULL
        d.device_count = slots & 1 ? nullptr : count;
        d.allocate = slots & 2 ? nullptr : alloc;
        d.deallocate = slots & 4 ? nullptr : dealloc;
        d.copy_to_host = slots & 8 ? nullptr : copy;
        d.copy_from_host = slots & 16 ? nullptr : copy;
        ts_dispatch_key key = -1;
        host->register_device(r, input->ConsumeBool() ? nullptr : &d, input->ConsumeIntegralInRange(0, 7) ? &key : nullptr);
        break;
      }
      case 5: {
        ts_dispatch_key key = -1;
        host->find_dispatch_key(pick_name("CPU"), input->ConsumeBool() ? &key : nullptr);
        break;
      }
      default: host->set_error(nullptr, input->ConsumeBool() ? nullptr : pick_name("msg")); break;
    }
  }
}

ts_status fake_init(const ts_host_api* host, ts_registrar reg, ts_plugin_info* info) {
  // Older plugins know a shorter ts_plugin_info: write only the fields inside a fuzzed size.
  // (whole fields only: a real plugin never writes half a pointer).
  static constexpr size_t kFieldEnds[] = {0, offsetof(ts_plugin_info, version), offsetof(ts_plugin_info, abi_major),
                                          offsetof(ts_plugin_info, abi_minor), offsetof(ts_plugin_info, min_host_abi_minor),
                                          offsetof(ts_plugin_info, reserved), sizeof(ts_plugin_info)};
  size_t size = input->ConsumeBool() ? sizeof *info : input->PickValueInArray(kFieldEnds);
  ts_plugin_info mine{};
  mine.struct_size = input->ConsumeBool() ? sizeof mine : input->ConsumeIntegral<size_t>();
  mine.name = pick_name("fzplugin");
  mine.version = input->ConsumeBool() ? "0.1" : pick_name("v");
  bool sane = input->ConsumeBool();
  mine.abi_major = sane ? TESSERA_ABI_MAJOR : input->ConsumeIntegral<int32_t>();
  mine.abi_minor = sane ? TESSERA_ABI_MINOR : input->ConsumeIntegral<int32_t>();
  mine.min_host_abi_minor = sane ? 0 : input->ConsumeIntegral<int32_t>();
  std::memcpy(info, &mine, std::min(size, sizeof mine));
  do_registrations(host, reg);
  if (input->ConsumeIntegralInRange(0, 9) == 0) throw std::runtime_error("a plugin that throws");
  return input->ConsumeIntegralInRange(0, 3) ? TS_OK : input->ConsumeIntegral<int32_t>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider provider(data, size);
  input = &provider;
  tried_ops.clear();
  tried_devices.clear();
  // What exists before, so a refusal can be checked to leave nothing behind.
  // Count only fuzz plugins: an init may lazily load a real one (find_dispatch_key("cpu")).
  auto fuzz_plugins = [] {
    size_t n = 0;
    for (auto& p : tessera::loaded_plugins()) n += p.path == kPath;
    return n;
  };
  size_t plugins_before = fuzz_plugins();
  auto exists_op = [](const std::string& n) { return tessera::Dispatcher::instance().find(n) != nullptr; };
  auto exists_dev = [](const std::string& n) { return tessera::DeviceRegistry::instance().find(n) != nullptr; };
  // Operators and devices of loaded plugins may legitimately carry names this input tries.
  std::vector<std::string> ops_before, devs_before;
  for (auto& p : tessera::loaded_plugins()) {
    for (auto& o : p.operators_defined) ops_before.push_back(o);
    for (auto& d : p.devices) devs_before.push_back(d);
  }
  auto in = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  try {
    tessera::load_plugin_from_entry(fake_init, kPath);
  } catch (const tessera::PluginError& e) {
    if (fuzz_plugins() != plugins_before) {
      std::fprintf(stderr, "a refused plugin was listed as loaded: %s\n", e.what());
      std::abort();
    }
    for (auto& o : tried_ops)
      if (!o.empty() && !in(ops_before, o) && exists_op(o) && o.find("fz::") == 0) {
        std::fprintf(stderr, "a refused plugin left operator '%s' defined\n", o.c_str());
        std::abort();
      }
    for (auto& d : tried_devices)
      if (!d.empty() && !in(devs_before, d) && exists_dev(d)) {
        std::fprintf(stderr, "a refused plugin left device '%s' registered\n", d.c_str());
        std::abort();
      }
  }
  // Any other exception escapes and libFuzzer reports it as a crash.
  input = nullptr;
  return 0;
}
