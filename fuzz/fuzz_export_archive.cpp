// libFuzzer target: the export archive loader (export/src: archive.cpp and program.cpp, compiled
// here so they are instrumented). The first byte picks what the rest is:
//   0: a whole archive (zip, metadata, checksums, then every part), through load_from_memory;
//   1: the four parts themselves, separated by "\n--part--\n" (metadata.json, graph.json,
//      program.json, weights.safetensors), handed to make_program past the checksums, so the
//      mutations reach the JSON graph, the signature and the weights;
//   2: a whole archive held by an owner, as load(path) holds its mapping, so weights stored first
//      are viewed in place (the zip's first local header is read by archive.cpp itself).
// Either the program loads (then describe() and inputs() must work) or ValueError/FileError is
// raised. Any other exception, a crash or a sanitizer report is a bug.
#include "../export/src/program_impl.h"

#include <tessera/error.h>
#include <tessera/export/program.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_export_archive: %s %s\n", what, detail.c_str());
  std::abort();
}

std::vector<std::string> split_parts(std::string_view text) {
  constexpr std::string_view kSeparator = "\n--part--\n";
  std::vector<std::string> parts;
  size_t start = 0;
  while (parts.size() < 3) {
    size_t at = text.find(kSeparator, start);
    if (at == std::string_view::npos) break;
    parts.emplace_back(text.substr(start, at - start));
    start = at + kSeparator.size();
  }
  parts.emplace_back(text.substr(start));
  return parts;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  try {
    if (data[0] == 0) {
      tessera::exported::Program p = tessera::exported::load_from_memory(rest);
      (void)p.describe();
    } else if (data[0] == 2) {
      std::shared_ptr<std::byte[]> owned(new std::byte[rest.size()]);
      std::memcpy(owned.get(), rest.data(), rest.size());
      auto parts = tessera::exported::detail::read_archive({owned.get(), rest.size()}, "<fuzz>", owned);
      tessera::exported::Program p(tessera::exported::make_program(parts.metadata, parts.graph, parts.program,
                                                                   std::move(parts.weights), "<fuzz>"));
      (void)p.describe();
    } else {
      std::vector<std::string> parts = split_parts({reinterpret_cast<const char*>(data + 1), size - 1});
      if (parts.size() != 4) return 0;
      auto metadata = nlohmann::json::parse(parts[0], nullptr, false);
      auto weights = tessera::exported::detail::SharedBytes::copy_of(
          {reinterpret_cast<const std::byte*>(parts[3].data()), parts[3].size()});
      tessera::exported::Program p(tessera::exported::make_program(metadata, parts[1], parts[2], weights, "<fuzz>"));
      (void)p.describe();
      for (const auto& in : p.inputs())
        if (in.dims.size() != in.dim_ranges.size()) fail("an input's dims and ranges disagree:", in.name);
    }
  } catch (const tessera::ValueError&) {
    return 0;  // a clean refusal
  } catch (const std::exception& e) {
    fail("unexpected exception:", e.what());
  }
  return 0;
}
