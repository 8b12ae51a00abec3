// An archive's ahead-of-time kernels (ts.export.aot_compile): aot/cpu/aot.json lists, per size
// set, the inductor's shared object for the graph at those sizes. They are native code, so they
// run only when the embedder allows it (LoadOptions::allow_native), on the machine kind and CPU
// features they were compiled for; the inductor plugin then loads them instead of compiling
// (checking they were generated from this very graph). Anything else runs the portable graph.
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
std::string library_file(std::span<const std::byte> bytes) {
  std::string dir = call_string("inductor::cache_dir");
  dir = dir.substr(0, dir.find_last_of('/')) + "/aot";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + detail::sha256_hex(bytes.data(), bytes.size()) + ".so";
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

void attach_native_kernels(Program::Impl& p, const std::map<std::string, detail::SharedBytes>& parts) {
  auto manifest_part = parts.find("aot/cpu/aot.json");
  if (manifest_part == parts.end()) {
    p.native_reason = "the archive has none (ts.export.aot_compile)";
    return;
  }
  const std::span<const std::byte> bytes = manifest_part->second.span();
  json manifest = json::parse(reinterpret_cast<const char*>(bytes.data()),
                              reinterpret_cast<const char*>(bytes.data()) + bytes.size(), nullptr, false);
  try {
    struct utsname machine;
    uname(&machine);
    if (manifest.at("machine").get<std::string>() != machine.machine) {
      p.native_reason = fmt::format("built for {}, this machine is {}", manifest.at("machine").get<std::string>(),
                                    machine.machine);
      return;
    }
    if (!load_named_plugin("inductor")) {
      p.native_reason = "the inductor plugin (libtessera_inductor.so) is not on the plugin search path";
      return;
    }
    std::set<std::string> have = words(call_string("inductor::target"));
    for (const std::string& feature : words(manifest.at("cpu_features").get<std::string>()))
      if (!have.count(feature)) {
        p.native_reason = fmt::format("built for CPU feature '{}', which this machine lacks", feature);
        return;
      }
    p.inductor_compile = Dispatcher::instance().find_or_throw("inductor::compile");
    p.inductor_run = Dispatcher::instance().find_or_throw("inductor::run");
    for (const json& entry : manifest.at("entries")) {
      std::vector<int64_t> sizes = entry.at("sizes").get<std::vector<int64_t>>();
      if (sizes.size() != p.symbol_ranges.size())
        raise<ValueError>("export archive '{}': aot/cpu/aot.json: an entry has {} sizes, the program {} dynamic dims",
                          p.where, sizes.size(), p.symbol_ranges.size());
      std::string options;
      if (!entry.at("library").is_null()) {
        auto library = parts.find(entry.at("library").get<std::string>());
        if (library == parts.end())
          raise<ValueError>("export archive '{}': aot/cpu/aot.json names a library the archive lacks", p.where);
        options = "prebuilt=" + library_file(library->second.span());
      }
      p.native[sizes].options = std::move(options);
    }
    p.native_reason.clear();
  } catch (const json::exception& e) {
    raise<ValueError>("export archive '{}': aot/cpu/aot.json is malformed ({})", p.where, e.what());
  }
}

int64_t Program::Impl::native_handle(const NativeKernels& kernels, const std::vector<int64_t>& sizes) const {
  std::call_once(kernels.compiled, [&] {
    const std::string text = graph::to_json(graph_at(sizes));
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
