#pragma once
// Reading an export archive's parts: the zip file (libzip), each part's checksum checked against
// metadata.json before anything parses it (XXH3-128, tessera/checksum.h; SHA-256 through OpenSSL
// for format 1 archives).
#include <nlohmann/json.hpp>

#include <cstddef>
#include <future>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessera::exported::detail {

// A part's bytes, shared: the weights' tensors view them in place rather than copying them.
struct SharedBytes {
  std::shared_ptr<std::byte[]> data;
  size_t size = 0;
  // When valid, the checksum check still running on another thread: wait() before parsing the
  // bytes; get() raises its ValueError.
  std::shared_future<void> checked;
  std::span<const std::byte> span() const { return {data.get(), size}; }
  static SharedBytes copy_of(std::span<const std::byte> bytes);
};

struct ArchiveParts {
  nlohmann::json metadata;
  std::string graph, program;  // graph.json, program.json
  SharedBytes weights;         // weights.safetensors
  std::map<std::string, SharedBytes> extra;  // other listed parts (aot/cpu/...), checked too
};

// ValueError naming `where` and the problem: not a zip file (or truncated), no metadata, another
// format, a newer format version, a missing part, a checksum that does not match.
// With `bytes_owner` (what keeps `bytes` alive and writable, a MappedFile), the weights may view
// `bytes` in place instead of being copied out.
ArchiveParts read_archive(std::span<const std::byte> bytes, const std::string& where,
                          std::shared_ptr<void> bytes_owner = nullptr);
std::string sha256_hex(const void* data, size_t size);  // format 1 sums; AOT kernels' cache names

// An archive file mapped privately: its bytes are the page cache's pages until written (a write
// copies the page, never the file), nothing is read into a buffer first (a 40 MB archive loads
// in a few milliseconds rather than tens).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // FileError naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tessera::exported::detail
