// The archive layout (written by frontend_python/tessera/export/_archive.py):
//   metadata.json, graph.json, program.json, weights.safetensors
#include "archive.h"

#include <tessera/error.h>
#include <tessera/export/program.h>
#include <tessera/safetensors.h>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <zip.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

namespace tessera::exported::detail {

std::string sha256_hex(const void* data, size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data, size, digest, &length, EVP_sha256(), nullptr) != 1)
    raise<RuntimeError>("export archive: SHA-256 failed (OpenSSL)");
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

namespace {

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};

std::vector<std::byte> read_entry(zip_t* z, const char* name, const std::string& where) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(z, name, 0, &st) != 0)
    raise<ValueError>("export archive '{}' lacks the part {}", where, name);
  // The size is the zip directory's claim; a lie shows up as a short read or a CRC error.
  if (!(st.valid & ZIP_STAT_SIZE) || st.size > (uint64_t(1) << 40))
    raise<ValueError>("export archive '{}': the part {} has no plausible size", where, name);
  zip_file_t* f = zip_fopen(z, name, 0);
  if (!f) raise<ValueError>("export archive '{}': the part {} cannot be opened ({})", where, name, zip_strerror(z));
  std::vector<std::byte> out(size_t(st.size));
  zip_int64_t got = out.empty() ? 0 : zip_fread(f, out.data(), out.size());
  std::string error = got < 0 ? zip_file_strerror(f) : "";
  zip_fclose(f);
  if (got < 0 || uint64_t(got) != st.size)
    raise<ValueError>("export archive '{}': the part {} is unreadable (truncated or damaged: {})", where, name,
                      got < 0 ? error : fmt::format("read {} of {} bytes", got, st.size));
  return out;
}

}  // namespace

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw FileError(fmt::format("export archive '{}': cannot open it ({})", path, std::strerror(errno)), errno, path);
  std::streamsize size = in.tellg();
  std::vector<std::byte> bytes(size_t(std::max<std::streamsize>(size, 0)));
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size))
    throw FileError(fmt::format("export archive '{}': read failed", path), EIO, path);
  return bytes;
}

ArchiveParts read_archive(std::span<const std::byte> bytes, const std::string& where) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
  if (!source) raise<RuntimeError>("export archive '{}': {}", where, zip_error_strerror(&error));
  std::unique_ptr<zip_t, ZipCloser> z(zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error));
  if (!z) {
    zip_source_free(source);
    std::string why = zip_error_strerror(&error);
    zip_error_fini(&error);
    raise<ValueError>("export archive '{}' is not an export archive (not a zip file, or truncated: {})", where, why);
  }
  zip_error_fini(&error);
  if (zip_get_num_entries(z.get(), 0) <= 0)
    raise<ValueError>("export archive '{}' is not an export archive (an empty file, or a zip with nothing in it)", where);

  ArchiveParts parts;
  std::vector<std::byte> meta = read_entry(z.get(), "metadata.json", where);
  parts.metadata = nlohmann::json::parse(reinterpret_cast<const char*>(meta.data()),
                                         reinterpret_cast<const char*>(meta.data()) + meta.size(), nullptr, false);
  const auto& m = parts.metadata;
  if (!m.is_object() || !m.contains("format") || m["format"] != "tessera.export")
    raise<ValueError>("export archive '{}': metadata.json does not name the format 'tessera.export'", where);
  if (!m.contains("format_version") || !m["format_version"].is_number_integer())
    raise<ValueError>("export archive '{}': metadata.json has no integer format_version", where);
  int64_t version = m["format_version"].get<int64_t>();
  if (version < 1 || version > kArchiveFormatVersion)
    raise<ValueError>("export archive '{}' has format version {} (written by {}); this runtime reads versions 1..{}: "
                      "upgrade tessera", where, version,
                      m.contains("producer") && m["producer"].is_string() ? m["producer"].get<std::string>()
                                                                           : "an unknown producer",
                      kArchiveFormatVersion);
  if (!m.contains("parts") || !m["parts"].is_object())
    raise<ValueError>("export archive '{}': metadata.json lists no parts", where);
  for (const char* name : {"graph.json", "program.json", "weights.safetensors"}) {
    std::vector<std::byte> data = read_entry(z.get(), name, where);
    const auto& sums = m["parts"];
    if (!sums.contains(name) || !sums[name].is_string())
      raise<ValueError>("export archive '{}': metadata.json has no checksum for {}", where, name);
    if (sha256_hex(data.data(), data.size()) != sums[name].get<std::string>())
      raise<ValueError>("export archive '{}': the checksum of {} does not match metadata.json (the archive was "
                        "modified or damaged)", where, name);
    if (std::strcmp(name, "weights.safetensors") == 0)
      parts.weights = std::move(data);
    else
      (std::strcmp(name, "graph.json") == 0 ? parts.graph : parts.program)
          .assign(reinterpret_cast<const char*>(data.data()), data.size());
  }
  // Any other part the metadata lists (ahead-of-time kernels) is read and checked the same way.
  for (const auto& [name, sum] : m["parts"].items()) {
    if (name == "graph.json" || name == "program.json" || name == "weights.safetensors") continue;
    if (!sum.is_string()) raise<ValueError>("export archive '{}': metadata.json's checksum of {} is not a string", where, name);
    std::vector<std::byte> data = read_entry(z.get(), name.c_str(), where);
    if (sha256_hex(data.data(), data.size()) != sum.get<std::string>())
      raise<ValueError>("export archive '{}': the checksum of {} does not match metadata.json (the archive was "
                        "modified or damaged)", where, name);
    parts.extra.emplace(name, std::move(data));
  }
  return parts;
}

}  // namespace tessera::exported::detail
