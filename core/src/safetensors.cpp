// Safetensors load/save. The header is parsed with nlohmann::json and checked in full (names,
// dtypes, shapes, offsets, overlaps) before any tensor is allocated, so a hostile file costs
// memory in proportion to its header (capped at 100 MB) and nothing is read outside the file.
#include <tessera/ops.h>
#include <tessera/runtime.h>
#include <tessera/safetensors.h>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <optional>
#include <set>

namespace tessera {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

using Json = nlohmann::ordered_json;  // keeps the header's order: tensors load in the order saved

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr int kMaxJsonDepth = 16;                  // a valid header nests 3 deep
constexpr const char* kMetadataKey = "__metadata__";

struct DtypeCode {
  const char* code;
  ScalarType type;
};
constexpr DtypeCode kDtypes[] = {
    {"BOOL", kBool},   {"U8", kUInt8},   {"I8", kInt8},     {"I16", kInt16},     {"I32", kInt32},
    {"I64", kInt64},   {"F16", kFloat16}, {"BF16", kBFloat16}, {"F32", kFloat32}, {"F64", kFloat64},
};

std::optional<ScalarType> dtype_from_code(std::string_view code) {
  for (const auto& d : kDtypes)
    if (code == d.code) return d.type;
  return std::nullopt;
}

const char* code_of(ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.code;
  raise<ValueError>("safetensors: no safetensors dtype for {}", name(t));
}

template <class... Args>
[[noreturn]] void bad_file(std::string_view where, fmt::format_string<Args...> format, Args&&... args) {
  throw ValueError(fmt::format("safetensors file '{}': {}", where, fmt::format(format, std::forward<Args>(args)...)));
}

// A key of the header, printable in a message (names may hold anything JSON allows).
std::string printable(const std::string& s) {
  constexpr size_t kMax = 80;
  std::string out;
  for (char c : s.substr(0, kMax)) out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  if (s.size() > kMax) out += "...";
  return out;
}

std::string json_type(const Json& j) { return j.type_name(); }


// Parses the header text; rejects duplicate keys in any object and absurd nesting.
Json parse_json(std::string_view text, std::string_view where) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) bad_file(where, "the header nests deeper than {} levels", kMaxJsonDepth);
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case Json::parse_event_t::key: {
        const auto& k = parsed.get_ref<const std::string&>();
        if (!keys.empty() && !keys.back().insert(k).second) {
          if (depth == 1) bad_file(where, "duplicate tensor name '{}'", printable(k));
          bad_file(where, "duplicate key '{}' in the header", printable(k));
        }
        break;
      }
      default: break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const Json::exception& e) {
    bad_file(where, "the header is not valid JSON ({})", e.what());
  }
}

uint64_t read_le64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

template <class... Args>
[[noreturn]] void bad_tensor(std::string_view where, const std::string& name, fmt::format_string<Args...> format,
                             Args&&... args) {
  bad_file(where, "tensor '{}': {}", printable(name), fmt::format(format, std::forward<Args>(args)...));
}

// JSON text for a message, cut short: a hostile header may hold a huge array.
std::string short_dump(const Json& j) {
  std::string s = j.dump();
  return s.size() > 80 ? s.substr(0, 80) + "..." : s;
}

SafetensorsEntry parse_entry(const std::string& name, const Json& info, uint64_t data_start, uint64_t buffer_size,
                             std::string_view where) {
  if (!info.is_object())
    bad_tensor(where, name, "expected an object with dtype, shape and data_offsets, got {}", json_type(info));
  SafetensorsEntry e;
  e.name = name;

  auto dt = info.find("dtype");
  if (dt == info.end() || !dt->is_string())
    bad_tensor(where, name, "expected a string 'dtype', got {}", dt == info.end() ? "none" : short_dump(*dt));
  const auto& code = dt->get_ref<const std::string&>();
  auto type = dtype_from_code(code);
  if (!type)
    bad_tensor(where, name, "unsupported dtype '{}' (expected one of BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, F64)",
               printable(code));
  e.dtype = *type;

  auto shape = info.find("shape");
  if (shape == info.end() || !shape->is_array())
    bad_tensor(where, name, "expected an array 'shape', got {}", shape == info.end() ? "none" : short_dump(*shape));
  int64_t numel = 1;
  for (const auto& d : *shape) {
    if (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0)
      bad_tensor(where, name, "negative dimension {} in shape {}", d.get<int64_t>(), short_dump(*shape));
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
      bad_tensor(where, name, "expected non-negative integer dimensions, got {} in shape {}", short_dump(d),
                 short_dump(*shape));
    int64_t n = int64_t(d.get<uint64_t>());
    e.shape.push_back(n);
    if (__builtin_mul_overflow(numel, n, &numel))
      bad_tensor(where, name, "the element count of shape {} overflows int64", short_dump(*shape));
  }
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, itemsize(e.dtype), &nbytes))
    bad_tensor(where, name, "the byte size of shape {} of {} overflows int64", short_dump(*shape), code);

  auto offsets = info.find("data_offsets");
  if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned())
    bad_tensor(where, name, "expected 'data_offsets' as two non-negative integers [begin, end], got {}",
               offsets == info.end() ? "none" : short_dump(*offsets));
  uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
  if (begin > end) bad_tensor(where, name, "data_offsets [{}, {}] end before they begin", begin, end);
  if (end > buffer_size)
    bad_tensor(where, name, "data_offsets [{}, {}] are out of bounds: the data buffer holds {} bytes", begin, end,
               buffer_size);
  if (end - begin != uint64_t(nbytes))
    bad_tensor(where, name, "shape {} of {} needs {} bytes, but data_offsets [{}, {}] hold {}", short_dump(*shape), code,
               nbytes, begin, end, end - begin);
  e.begin = data_start + begin;
  e.end = data_start + end;
  return e;
}

// Two tensors may not share bytes (zero-size ones share none).
void check_overlaps(const std::vector<SafetensorsEntry>& entries, uint64_t data_start, std::string_view where) {
  std::vector<const SafetensorsEntry*> order;
  for (const auto& e : entries)
    if (e.end > e.begin) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < order.size(); ++i) {
    const SafetensorsEntry &a = *order[i - 1], &b = *order[i];
    if (b.begin < a.end)
      bad_file(where, "tensors '{}' (data_offsets [{}, {}]) and '{}' (data_offsets [{}, {}]) overlap", printable(a.name),
               a.begin - data_start, a.end - data_start, printable(b.name), b.begin - data_start, b.end - data_start);
  }
}

// Foreign writers may store any non-zero byte as true; a bool tensor holds only 0 and 1.
void normalise_bools(const SafetensorsEntry& e, Tensor& t) {
  if (e.dtype != kBool) return;
  auto* p = static_cast<unsigned char*>(t.host_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] != 0;
}

Tensor empty_cpu(const SafetensorsEntry& e) { return empty(e.shape, e.dtype, Device(Device::kCpuType, 0)); }

// ------------------------------------------------------------------------------------ files

[[noreturn]] void raise_file_error(std::string_view what, const std::string& path, int err) {
  throw FileError(fmt::format("safetensors: cannot {} '{}': {}", what, path, std::strerror(err)), err, path);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { close(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int close() {
    int r = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return r;
  }

 private:
  int fd_;
};

constexpr size_t kIoChunk = size_t(1) << 30;  // read/write at most 1 GiB per call

// Reads up to n bytes at offset; returns how many were read (fewer only at end of file).
size_t pread_all(int fd, void* buf, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, static_cast<char*>(buf) + done, std::min(n - done, kIoChunk), off_t(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      raise_file_error("read", path, errno);
    }
    if (r == 0) break;
    done += size_t(r);
  }
  return done;
}

void write_all(int fd, const void* buf, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::write(fd, static_cast<const char*>(buf) + done, std::min(n - done, kIoChunk));
    if (r < 0) {
      if (errno == EINTR) continue;
      raise_file_error("write", path, errno);
    }
    done += size_t(r);
  }
}

// ------------------------------------------------------------------------------------ saving

// What a save writes: the padded header text and, per tensor, where its bytes go.
struct SavePlan {
  std::string header;                 // JSON, padded with spaces so the data starts 8-aligned
  std::vector<size_t> write_order;    // indices into the tensors, in data order
};

SavePlan plan_save(const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  std::set<std::string_view> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    if (name == kMetadataKey) raise<ValueError>("save_safetensors: the tensor name '{}' is reserved", kMetadataKey);
    if (!seen.insert(name).second) raise<ValueError>("save_safetensors: duplicate tensor name '{}'", printable(name));
    if (!t.defined()) raise<ValueError>("save_safetensors: tensor '{}' is undefined", printable(name));
    code_of(t.dtype());
  }
  // The data is laid out widest dtype first (stable), so every tensor starts aligned to its
  // itemsize as zero-copy readers want; the header keeps the caller's order.
  SavePlan plan;
  plan.write_order.resize(tensors.size());
  std::iota(plan.write_order.begin(), plan.write_order.end(), size_t(0));
  std::stable_sort(plan.write_order.begin(), plan.write_order.end(), [&](size_t a, size_t b) {
    return itemsize(tensors[a].second.dtype()) > itemsize(tensors[b].second.dtype());
  });
  std::vector<std::pair<uint64_t, uint64_t>> offsets(tensors.size());
  uint64_t at = 0;
  for (size_t i : plan.write_order) {
    const Tensor& t = tensors[i].second;
    uint64_t n = uint64_t(t.numel()) * uint64_t(itemsize(t.dtype()));
    offsets[i] = {at, at + n};
    at += n;
  }
  Json header = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[kMetadataKey] = std::move(m);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].second;
    header[tensors[i].first] = Json{{"dtype", code_of(t.dtype())},
                                    {"shape", t.shape()},
                                    {"data_offsets", {offsets[i].first, offsets[i].second}}};
  }
  try {
    plan.header = header.dump();
  } catch (const Json::exception& e) {  // a name or metadata string that is not UTF-8
    raise<ValueError>("save_safetensors: names and metadata must be valid UTF-8 ({})", e.what());
  }
  plan.header.append((8 - (8 + plan.header.size()) % 8) % 8, ' ');
  return plan;
}

// A contiguous CPU copy of `t` (or `t` itself when it is one already): one tensor at a time,
// so saving device tensors never holds more than one extra host copy.
Tensor host_contiguous(const Tensor& t) {
  Tensor c = t.device().is_cpu() ? t : to_device(t, Device(Device::kCpuType, 0));
  return c.is_contiguous() ? c : contiguous(c);
}

template <class Sink>
void write_file(const NamedTensors& tensors, const SavePlan& plan, Sink&& sink) {
  uint64_t n = plan.header.size();
  std::byte len[8];
  std::memcpy(len, &n, 8);
  sink(len, 8);
  sink(plan.header.data(), plan.header.size());
  for (size_t i : plan.write_order) {
    Tensor c = host_contiguous(tensors[i].second);
    size_t nbytes = size_t(c.numel() * itemsize(c.dtype()));
    if (nbytes) sink(c.host_data(), nbytes);
  }
}

std::string parent_dir(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

// ------------------------------------------------------------------------------------ API

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> prefix, uint64_t file_size,
                                           std::string_view where) {
  if (file_size < 8 || prefix.size() < 8)
    bad_file(where, "truncated: {} bytes, too short for the 8-byte header length", std::min<uint64_t>(file_size, prefix.size()));
  uint64_t n = read_le64(prefix.data());
  if (n > kMaxHeaderBytes) bad_file(where, "header length {} is absurd (the limit is {} bytes)", n, kMaxHeaderBytes);
  if (n > file_size - 8)
    bad_file(where, "truncated: the header length is {} bytes, but only {} bytes follow it", n, file_size - 8);
  if (prefix.size() < 8 + n)
    bad_file(where, "truncated: the header length is {} bytes, but only {} bytes follow it", n, prefix.size() - 8);

  SafetensorsHeader out;
  out.data_start = 8 + n;
  const uint64_t buffer_size = file_size - out.data_start;
  Json header = parse_json(std::string_view(reinterpret_cast<const char*>(prefix.data()) + 8, size_t(n)), where);
  if (!header.is_object()) bad_file(where, "the header must be a JSON object, got {}", json_type(header));
  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      if (info.is_null()) continue;
      if (!info.is_object()) bad_file(where, "'{}' must be an object of strings, got {}", kMetadataKey, json_type(info));
      for (const auto& [k, v] : info.items()) {
        if (!v.is_string())
          bad_file(where, "'{}' entry '{}' must be a string, got {}", kMetadataKey, printable(k), json_type(v));
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    out.entries.push_back(parse_entry(name, info, out.data_start, buffer_size, where));
  }
  check_overlaps(out.entries, out.data_start, where);
  return out;
}

SafetensorsContents parse_safetensors_contents(std::span<const std::byte> file, std::string_view where) {
  SafetensorsHeader header = parse_safetensors_header(file, file.size(), where);
  SafetensorsContents out;
  out.metadata = std::move(header.metadata);
  out.tensors.reserve(header.entries.size());
  for (const auto& e : header.entries) {
    Tensor t = empty_cpu(e);
    if (e.end > e.begin) std::memcpy(t.host_data(), file.data() + e.begin, size_t(e.end - e.begin));
    normalise_bools(e, t);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

NamedTensors parse_safetensors(std::span<const std::byte> file) { return parse_safetensors_contents(file).tensors; }

SafetensorsContents view_safetensors_contents(std::shared_ptr<std::byte[]> file, size_t size, std::string_view where) {
  std::span<const std::byte> bytes(file.get(), size);
  SafetensorsHeader header = parse_safetensors_header(bytes, size, where);
  SafetensorsContents out;
  out.metadata = std::move(header.metadata);
  out.tensors.reserve(header.entries.size());
  init();  // the CPU device's plugin, which a storage names
  const Device cpu(Device::kCpuType, 0);
  for (const auto& e : header.entries) {
    std::byte* data = file.get() + e.begin;
    size_t nbytes = size_t(e.end - e.begin);
    Tensor t;
    if (nbytes == 0 || reinterpret_cast<uintptr_t>(data) % uintptr_t(itemsize(e.dtype)) != 0) {
      t = empty_cpu(e);
      if (nbytes) std::memcpy(t.host_data(), data, nbytes);
    } else {
      Storage storage = Storage::adopt(new StorageImpl(cpu, data, nbytes, [file] {}));
      SizeVector strides = contiguous_strides(e.shape);
      t = Tensor(IntrusivePtr<TensorImpl>::adopt(new TensorImpl(std::move(storage), e.dtype, IntArrayRef(e.shape),
                                                                IntArrayRef(strides.data(), strides.size()), 0)));
    }
    normalise_bools(e, t);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

SafetensorsContents load_safetensors_contents(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) raise_file_error("open", path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) raise_file_error("stat", path, errno);
  if (S_ISDIR(st.st_mode)) raise_file_error("load", path, EISDIR);
  if (!S_ISREG(st.st_mode)) bad_file(path, "not a regular file");
  const uint64_t file_size = uint64_t(st.st_size);

  // The length first, then (when it is plausible) the header, then each tensor's bytes.
  std::vector<std::byte> prefix(8);
  prefix.resize(pread_all(fd.get(), prefix.data(), 8, 0, path));
  if (prefix.size() == 8) {
    uint64_t n = read_le64(prefix.data());
    if (n <= kMaxHeaderBytes && n <= file_size - 8) {
      prefix.resize(8 + n);
      prefix.resize(8 + pread_all(fd.get(), prefix.data() + 8, n, 8, path));
    }
  }
  SafetensorsHeader header = parse_safetensors_header(prefix, file_size, path);
  prefix = {};

  SafetensorsContents out;
  out.metadata = std::move(header.metadata);
  out.tensors.reserve(header.entries.size());
  for (const auto& e : header.entries) {
    Tensor t = empty_cpu(e);
    size_t n = size_t(e.end - e.begin);
    if (n && pread_all(fd.get(), t.host_data(), n, e.begin, path) != n)
      bad_file(path, "tensor '{}': truncated while reading (the file shrank)", printable(e.name));
    normalise_bools(e, t);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

NamedTensors load_safetensors(const std::string& path) { return load_safetensors_contents(path).tensors; }

std::vector<std::byte> serialize_safetensors(const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  SavePlan plan = plan_save(tensors, metadata);
  std::vector<std::byte> out;
  write_file(tensors, plan, [&](const void* p, size_t n) {
    auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  });
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  SavePlan plan = plan_save(tensors, metadata);  // every check that needs no I/O, before any
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (fd.get() < 0) raise_file_error("create", tmp, errno);
  try {
    write_file(tensors, plan, [&](const void* p, size_t n) { write_all(fd.get(), p, n, tmp); });
    if (::fsync(fd.get()) != 0) raise_file_error("fsync", tmp, errno);
    if (fd.close() != 0) raise_file_error("close", tmp, errno);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      raise_file_error(fmt::format("rename '{}' to", tmp), path, err);
    }
  } catch (...) {
    fd.close();
    ::unlink(tmp.c_str());
    throw;
  }
  // Make the rename itself durable; a filesystem that cannot sync a folder still has the file.
  Fd dir(::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
}

}  // namespace tessera
