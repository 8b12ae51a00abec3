#pragma once
// Safetensors, the weights format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON header
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// then the data buffer (offsets are relative to its start). Loading runs no code: the header is
// data, checked in full before any tensor is allocated.
#include <tessera/error.h>
#include <tessera/tensor.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using SafetensorsMetadata = std::map<std::string, std::string>;

// An I/O failure (open, read, write, fsync, rename) on a file; `error_code` is the errno.
// The Python binding raises it as OSError (FileNotFoundError, PermissionError, ...).
class FileError : public RuntimeError {
 public:
  FileError(std::string message, int error_code, std::string path)
      : RuntimeError(std::move(message)), error_code_(error_code), path_(std::move(path)) {}
  int error_code() const noexcept { return error_code_; }
  const std::string& path() const noexcept { return path_; }

 private:
  int error_code_;
  std::string path_;
};

// One tensor of a checked header. Offsets are absolute in the file (header included).
struct SafetensorsEntry {
  std::string name;
  ScalarType dtype = kFloat32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// A checked header: the tensors in header order and the "__metadata__" strings.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;
  SafetensorsMetadata metadata;
  uint64_t data_start = 0;  // 8 + N
};

// A loaded file: CPU tensors in header order, and the metadata.
struct SafetensorsContents {
  NamedTensors tensors;
  SafetensorsMetadata metadata;
};

// Checks the header of a safetensors file. `prefix` holds the file's first bytes (at least
// 8 + N of them, or the whole file), `file_size` is the size of the whole file, `where` names the
// file in messages. Raises ValueError naming the file, the tensor and the problem.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> prefix, uint64_t file_size,
                                           std::string_view where = "<memory>");

// A whole file in memory -> CPU tensors (copies of the data) and metadata.
SafetensorsContents parse_safetensors_contents(std::span<const std::byte> file, std::string_view where = "<memory>");
NamedTensors parse_safetensors(std::span<const std::byte> file);

// A whole file in a buffer the caller hands over -> CPU tensors that view its bytes (no copy; the
// tensors keep `file` alive). For loaders that already hold the file in memory of their own (an
// export archive's weights). A tensor whose bytes are not aligned to its element size is copied.
SafetensorsContents view_safetensors_contents(std::shared_ptr<std::byte[]> file, size_t size,
                                              std::string_view where = "<memory>");

// Reads the file at `path`: the header first, then each tensor's bytes straight into its tensor.
// FileError when the file cannot be read, ValueError when it is not a valid safetensors file.
SafetensorsContents load_safetensors_contents(const std::string& path);
NamedTensors load_safetensors(const std::string& path);

// The bytes of a safetensors file holding `tensors` (any device, any layout: written contiguous,
// in the given order) and `metadata`. ValueError for a duplicate, empty or reserved name or an
// undefined tensor.
std::vector<std::byte> serialize_safetensors(const NamedTensors& tensors, const SafetensorsMetadata& metadata = {});

// Writes `tensors` to `path` atomically: into "<path>.tmp.<pid>", fsync, then rename over `path`.
// On any error the temporary file is removed and `path` is left as it was.
void save_safetensors(const std::string& path, const NamedTensors& tensors, const SafetensorsMetadata& metadata = {});

}  // namespace tessera
