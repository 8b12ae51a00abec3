#pragma once
// Reading an export archive's parts: the zip file (libzip), each part's SHA-256 checked against
// metadata.json (OpenSSL) before anything parses it.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace tessera::exported::detail {

struct ArchiveParts {
  nlohmann::json metadata;
  std::string graph, program;    // graph.json, program.json
  std::vector<std::byte> weights;  // weights.safetensors
  std::map<std::string, std::vector<std::byte>> extra;  // other listed parts (aot/cpu/...), checked too
};

// ValueError naming `where` and the problem: not a zip file (or truncated), no metadata, another
// format, a newer format version, a missing part, a checksum that does not match.
ArchiveParts read_archive(std::span<const std::byte> bytes, const std::string& where);
std::vector<std::byte> read_file(const std::string& path);
std::string sha256_hex(const void* data, size_t size);

}  // namespace tessera::exported::detail
