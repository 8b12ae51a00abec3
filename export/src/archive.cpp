// The archive layout (written by frontend_python/tessera/export/_archive.py):
//   metadata.json, graph.json, program.json, weights.safetensors
#include "archive.h"

#include <tessera/checksum.h>
#include <tessera/error.h>
#include <tessera/export/program.h>
#include <tessera/safetensors.h>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <zip.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string_view>

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

constexpr size_t kBackgroundCheckBytes = size_t(1) << 20;

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};

// The part's bytes in a buffer of their own, not zero-filled first (it is written whole).
SharedBytes read_entry(zip_t* z, const char* name, const std::string& where) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(z, name, 0, &st) != 0)
    raise<ValueError>("export archive '{}' lacks the part {}", where, name);
  // The size is the zip directory's claim; a lie shows up as a short read or a CRC error.
  if (!(st.valid & ZIP_STAT_SIZE) || st.size > (uint64_t(1) << 40))
    raise<ValueError>("export archive '{}': the part {} has no plausible size", where, name);
  zip_file_t* f = zip_fopen(z, name, 0);
  if (!f) raise<ValueError>("export archive '{}': the part {} cannot be opened ({})", where, name, zip_strerror(z));
  SharedBytes out{std::shared_ptr<std::byte[]>(new std::byte[std::max<size_t>(size_t(st.size), 1)]), size_t(st.size)};
  zip_int64_t got = out.size == 0 ? 0 : zip_fread(f, out.data.get(), out.size);
  std::string error = got < 0 ? zip_file_strerror(f) : "";
  zip_fclose(f);
  if (got < 0 || uint64_t(got) != st.size)
    raise<ValueError>("export archive '{}': the part {} is unreadable (truncated or damaged: {})", where, name,
                      got < 0 ? error : fmt::format("read {} of {} bytes", got, st.size));
  return out;
}

uint32_t le(const std::byte* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint32_t(p[i]);
  return v;
}

// The writer (_archive.py) puts weights.safetensors first in the zip, stored (not compressed)
// and 64-byte aligned, so in a mapped archive its bytes are a slice of the file and the tensors
// can view them. This reads that first local file header (zip's fixed 30 bytes, then the name and
// the extra field) and returns the slice when it is the part libzip's directory describes;
// anything else (an older archive, another writer) is read through libzip. The part's checksum is
// checked either way.
std::optional<std::span<const std::byte>> first_stored_part(std::span<const std::byte> bytes, zip_t* z,
                                                            std::string_view name) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(z, std::string(name).c_str(), 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
      !(st.valid & ZIP_STAT_COMP_METHOD) || st.comp_method != ZIP_CM_STORE || st.size >= 0xFFFFFFFFu)
    return std::nullopt;
  const std::byte* h = bytes.data();
  if (bytes.size() < 30 || le(h, 4) != 0x04034b50u) return std::nullopt;
  const uint32_t flags = le(h + 6, 2), method = le(h + 8, 2), compressed = le(h + 18, 4), size = le(h + 22, 4);
  const uint32_t name_length = le(h + 26, 2), extra_length = le(h + 28, 2);
  const uint64_t start = 30 + uint64_t(name_length) + extra_length;
  if ((flags & 0x8) || method != 0 || compressed != st.size || size != st.size || name_length != name.size() ||
      start + st.size > bytes.size() ||
      std::memcmp(h + 30, name.data(), name.size()) != 0)
    return std::nullopt;
  return bytes.subspan(size_t(start), size_t(st.size));
}

void check_sum(const nlohmann::json& sum, const SharedBytes& data, const std::string& name, const std::string& where) {
  if (!sum.is_string())
    raise<ValueError>("export archive '{}': metadata.json's checksum of {} is not a string", where, name);
  // Format 2 keeps XXH3-128 sums (tessera/checksum.h); format 1 archives, SHA-256 ones.
  const std::string& expected = sum.get_ref<const std::string&>();
  const bool xxh3 = expected.rfind("xxh3-128:", 0) == 0;
  if ((xxh3 ? part_checksum(data.data.get(), data.size) : sha256_hex(data.data.get(), data.size)) != expected)
    raise<ValueError>("export archive '{}': the checksum of {} does not match metadata.json (the archive was "
                      "modified or damaged)", where, name);
}

}  // namespace

SharedBytes SharedBytes::copy_of(std::span<const std::byte> bytes) {
  SharedBytes out{std::shared_ptr<std::byte[]>(new std::byte[std::max<size_t>(bytes.size(), 1)]), bytes.size()};
  if (!bytes.empty()) std::memcpy(out.data.get(), bytes.data(), bytes.size());
  return out;
}

MappedFile::MappedFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FileError(fmt::format("export archive '{}': cannot open it ({})", path, std::strerror(errno)), errno, path);
  struct stat st {};
  int err = ::fstat(fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
  if (err == 0 && st.st_size > 0) {
    size_ = size_t(st.st_size);
    // Writable but private: an exported buffer written in place (running statistics) copies its
    // page and never touches the file.
    data_ = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (data_ == MAP_FAILED) {
      err = errno;
      data_ = nullptr;
      size_ = 0;
    }
  }
  ::close(fd);
  if (err) throw FileError(fmt::format("export archive '{}': cannot read it ({})", path, std::strerror(err)), err, path);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

ArchiveParts read_archive(std::span<const std::byte> bytes, const std::string& where,
                          std::shared_ptr<void> bytes_owner) {
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
  SharedBytes meta = read_entry(z.get(), "metadata.json", where);
  const auto* text = reinterpret_cast<const char*>(meta.data.get());
  parts.metadata = nlohmann::json::parse(text, text + meta.size, nullptr, false);
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
  const auto& sums = m["parts"];
  for (const char* name : {"graph.json", "program.json", "weights.safetensors"}) {
    SharedBytes data;
    std::optional<std::span<const std::byte>> in_place;
    if (bytes_owner && std::strcmp(name, "weights.safetensors") == 0) in_place = first_stored_part(bytes, z.get(), name);
    if (in_place)  // shares the owner of `bytes` (its mapping lives as long as the weights' tensors)
      data = SharedBytes{std::shared_ptr<std::byte[]>(bytes_owner, const_cast<std::byte*>(in_place->data())),
                         in_place->size()};
    else
      data = read_entry(z.get(), name, where);
    if (!sums.contains(name)) raise<ValueError>("export archive '{}': metadata.json has no checksum for {}", where, name);
    if (std::strcmp(name, "weights.safetensors") == 0 && data.size >= kBackgroundCheckBytes && sums[name].is_string()) {
      // Large weights are checked on a thread of their own while the caller parses the graph and
      // loads the plugins it needs; the tensors are made only after the check (SharedBytes::checked).
      nlohmann::json sum = sums[name];
      data.checked = std::async(std::launch::async, [data, sum, where] { check_sum(sum, data, "weights.safetensors", where); }).share();
      parts.weights = std::move(data);
      continue;
    }
    check_sum(sums[name], data, name, where);
    if (std::strcmp(name, "weights.safetensors") == 0)
      parts.weights = std::move(data);
    else
      (std::strcmp(name, "graph.json") == 0 ? parts.graph : parts.program)
          .assign(reinterpret_cast<const char*>(data.data.get()), data.size);
  }
  // Any other part the metadata lists (ahead-of-time kernels) is read and checked the same way.
  for (const auto& [name, sum] : sums.items()) {
    if (name == "graph.json" || name == "program.json" || name == "weights.safetensors") continue;
    SharedBytes data = read_entry(z.get(), name.c_str(), where);
    check_sum(sum, data, name, where);
    parts.extra.emplace(name, std::move(data));
  }
  return parts;
}

}  // namespace tessera::exported::detail
