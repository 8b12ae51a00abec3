// An archive's ahead-of-time kernels (ts.export.aot_compile): aot/cpu/aot.json lists, per size
// set, the inductor's shared object for the graph at those sizes; aot/cuda/aot.json the PTX of
// its CUDA kernels. They are native code, so they run only when the embedder allows it
// (LoadOptions::allow_native): the CPU's on the machine kind and CPU features they were compiled
// for, the CUDA ones once the program is on a CUDA device (Program::to; the driver compiles the
// PTX for the card). The inductor plugin then loads them instead of compiling (checking they
// were generated from this very graph). Anything else runs the portable graph.
#include "archive.h"
#include "program_impl.h"

#include <tessera/error.h>
#include <tessera/runtime.h>

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <set>
#include <sstream>

namespace tessera::exported {
namespace {

using json = nlohmann::json;

std::string call_string(const char* name, std::vector<ts_value> args = {}) {
  OperatorHandle op = Dispatcher::instance().find_or_throw(name);
  args.resize(std::max<size_t>(args.size(), 1));
  ts_stack stack{sizeof(ts_stack), args.data(), int32_t(op->num_arguments()), int32_t(args.size())};
  Dispatcher::instance().call(op, &stack);
  return args[0].u.str ? args[0].u.str : "";
}

std::set<std::string> words(const std::string& text) {
  std::istringstream in(text);
  return {std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
}

// Writes the library where the inductor keeps kernels, named by its checksum; a file already
// there with the same bytes is reused (several processes load one archive).
std::string library_file(std::span<const std::byte> bytes, const char* extension) {
  std::string dir = call_string("inductor::cache_dir");
  dir = dir.substr(0, dir.find_last_of('/')) + "/aot";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + detail::sha256_hex(bytes.data(), bytes.size()) + extension;
  {
    std::ifstream in(path, std::ios::binary);
    std::string existing((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in && existing.size() == bytes.size() && std::memcmp(existing.data(), bytes.data(), bytes.size()) == 0) return path;
  }
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!out) raise<RuntimeError>("export runtime: cannot write the ahead-of-time kernels to '{}'", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    raise<RuntimeError>("export runtime: cannot move the ahead-of-time kernels to '{}'", path);
  }
  return path;
}

}  // namespace

namespace {

// The entries of aot/<target>/aot.json: per size set, "prebuilt=<the kernels' file>".
void read_manifest(Program::Impl& p, const json& manifest, const std::string& target,
                   const std::map<std::string, detail::SharedBytes>& parts) {
  const char* extension = target == "cuda" ? ".ptx" : ".so";
  for (const json& entry : manifest.at("entries")) {
    std::vector<int64_t> sizes = entry.at("sizes").get<std::vector<int64_t>>();
    if (sizes.size() != p.symbol_ranges.size())
      raise<ValueError>("export archive '{}': aot/{}/aot.json: an entry has {} sizes, the program {} dynamic dims",
                        p.where, target, sizes.size(), p.symbol_ranges.size());
    std::string options;
    if (!entry.at("library").is_null()) {
      auto library = parts.find(entry.at("library").get<std::string>());
      if (library == parts.end())
        raise<ValueError>("export archive '{}': aot/{}/aot.json names a file the archive lacks", p.where, target);
      options = "prebuilt=" + library_file(library->second.span(), extension);
    }
    p.native_options[target][sizes] = std::move(options);
  }
}

// Why the CPU kernels of `manifest` cannot run here ("" when they can).
std::string cpu_mismatch(const json& manifest) {
  struct utsname machine;
  uname(&machine);
  if (manifest.at("machine").get<std::string>() != machine.machine)
    return fmt::format("built for {}, this machine is {}", manifest.at("machine").get<std::string>(), machine.machine);
  std::set<std::string> have = words(call_string("inductor::target"));
  for (const std::string& feature : words(manifest.at("cpu_features").get<std::string>()))
    if (!have.count(feature)) return fmt::format("built for CPU feature '{}', which this machine lacks", feature);
  return "";
}

}  // namespace

void attach_native_kernels(Program::Impl& p, const std::map<std::string, detail::SharedBytes>& parts) {
  std::vector<std::string> targets;
  for (const char* target : {"cpu", "cuda"})
    if (parts.count(fmt::format("aot/{}/aot.json", target))) targets.emplace_back(target);
  if (targets.empty()) {
    p.native_reason = "the archive has none (ts.export.aot_compile)";
    return;
  }
  if (!load_named_plugin("inductor")) {
    p.native_reason = "the inductor plugin (libtessera_inductor.so) is not on the plugin search path";
    return;
  }
  std::string cpu_reason;
  for (const std::string& target : targets) {
    const std::string name = fmt::format("aot/{}/aot.json", target);
    const std::span<const std::byte> bytes = parts.at(name).span();
    json manifest = json::parse(reinterpret_cast<const char*>(bytes.data()),
                                reinterpret_cast<const char*>(bytes.data()) + bytes.size(), nullptr, false);
    try {
      if (target == "cpu" && !(cpu_reason = cpu_mismatch(manifest)).empty()) continue;
      read_manifest(p, manifest, target, parts);
    } catch (const json::exception& e) {
      raise<ValueError>("export archive '{}': {} is malformed ({})", p.where, name, e.what());
    }
  }
  p.inductor_compile = Dispatcher::instance().find_or_throw("inductor::compile");
  p.inductor_run = Dispatcher::instance().find_or_throw("inductor::run");
  select_native_kernels(p);
  if (p.native.empty() && !cpu_reason.empty() && p.device.is_cpu()) p.native_reason = cpu_reason;
}

void select_native_kernels(Program::Impl& p) {
  p.native.clear();
  const std::string target = p.device.is_cpu() ? "cpu" : p.device.type_name();
  auto kernels = p.native_options.find(target);
  if (kernels == p.native_options.end()) {
    std::string have;
    for (const auto& [t, entries] : p.native_options) have += (have.empty() ? "" : ", ") + t;
    p.native_reason = fmt::format("the program runs on {}; the archive's ahead-of-time kernels are for {}",
                                  p.device.str(), have.empty() ? "no target usable here" : have);
    return;
  }
  for (const auto& [sizes, options] : kernels->second) p.native[sizes].options = options;
  p.native_reason.clear();
}

int64_t Program::Impl::native_handle(const NativeKernels& kernels, const std::vector<int64_t>& sizes) const {
  std::call_once(kernels.compiled, [&] {
    graph::Graph at = graph_at(sizes);
    for (graph::Value& v : at.values) v.device = device.to_abi();  // where the kernels run (CUDA C for CUDA)
    const std::string text = graph::to_json(at);
    ts_value args[2];
    args[0] = ts_value{TS_VALUE_STRING, 0, {}};
    args[0].u.str = text.c_str();
    args[1] = ts_value{TS_VALUE_STRING, 0, {}};
    args[1].u.str = kernels.options.c_str();
    ts_stack stack{sizeof(ts_stack), args, 2, 2};
    Dispatcher::instance().call(inductor_compile, &stack);
    kernels.handle = args[0].u.i;
  });
  return kernels.handle;
}

}  // namespace tessera::exported
