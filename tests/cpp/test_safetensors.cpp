// Safetensors save/load: round trips of every dtype, non-contiguous, zero-size and 0-d tensors
// and metadata; files written byte by byte here (the format as the spec describes it, not as our
// writer happens to produce it) load with the right values; every rejection class has its own
// test; saving is atomic (a failed save leaves the target as it was and no temporary file).
#include <tessera/safetensors.h>

#include "test_util.h"

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

using namespace tessera;
using tessera::testing::expect_error;
using tessera::testing::seq;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<std::byte>;

Device cpu() { return Device(Device::kCpuType, 0); }

// A fresh folder per test, removed afterwards.
class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / fmt::format("tessera_st_{}_{}", ::getpid(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Files in the folder other than `keep`: a leftover temporary file shows up here.
  std::vector<std::string> others(const std::string& keep) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename() != keep) out.push_back(e.path().filename().string());
    return out;
  }
  fs::path dir_;
};

Bytes read_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return Bytes(reinterpret_cast<const std::byte*>(s.data()), reinterpret_cast<const std::byte*>(s.data()) + s.size());
}

void write_bytes(const std::string& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// A file as the spec lays it out: u64 little-endian header length, header text, data buffer.
Bytes raw_file(const std::string& header, const Bytes& data = {}, std::optional<uint64_t> length = std::nullopt) {
  uint64_t n = length.value_or(header.size());
  Bytes out(8);
  for (int i = 0; i < 8; ++i) out[size_t(i)] = std::byte((n >> (8 * i)) & 0xff);
  for (char c : header) out.push_back(std::byte(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

template <class T>
Bytes le_bytes(std::initializer_list<T> values) {
  Bytes out;
  for (T v : values) {
    std::byte b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));  // the test host is little-endian (the library asserts it)
    out.insert(out.end(), b, b + sizeof(T));
  }
  return out;
}

// Reference values exactly representable in every dtype of the format.
std::vector<double> values_for(ScalarType dt, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (dt == kBool) v[i] = double(i % 3 == 1);
    else if (dt == kUInt8) v[i] = double((i * 37) % 256);
    else if (is_floating_point(dt)) v[i] = double(int64_t(i) - 3) * 0.5;
    else v[i] = double(int64_t(i * 5) - 7);
  }
  if (dt == kInt64 && n > 0) v[0] = -9007199254740992.0;  // -2^53: beyond int32, exact in double
  return v;
}

constexpr ScalarType kAllDtypes[] = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

Bytes span_of(const Tensor& t) {
  const auto* p = static_cast<const std::byte*>(t.host_data());
  return Bytes(p, p + t.numel() * itemsize(t.dtype()));
}

// Checks a loaded file against expectations, through the header as nlohmann reads it.
nlohmann::json header_of(const Bytes& file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  return nlohmann::json::parse(reinterpret_cast<const char*>(file.data()) + 8,
                               reinterpret_cast<const char*>(file.data()) + 8 + n);
}

template <class F>
void expect_bad_file(F&& f, std::initializer_list<std::string> fragments) {
  expect_error<ValueError>(std::forward<F>(f), fragments);
}

// Rejected both from memory and from a file, with the file's path in the message.
void expect_rejected(const std::string& file_path, const Bytes& bytes, std::initializer_list<std::string> fragments) {
  expect_bad_file([&] { parse_safetensors(bytes); }, fragments);
  write_bytes(file_path, bytes);
  expect_bad_file([&] { load_safetensors(file_path); }, fragments);
  expect_bad_file([&] { load_safetensors(file_path); }, {file_path});
}

}  // namespace

// ------------------------------------------------------------------------------------ round trips

TEST_F(Safetensors, EveryDtypeRoundTrips) {
  NamedTensors in;
  for (ScalarType dt : kAllDtypes)
    in.emplace_back(fmt::format("t.{}", name(dt)), tensor_from_values(values_for(dt, 6), {2, 3}, dt));
  save_safetensors(path("all.safetensors"), in);
  NamedTensors out = load_safetensors(path("all.safetensors"));
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(in[i].first);
    EXPECT_EQ(out[i].first, in[i].first);  // the order saved
    EXPECT_EQ(out[i].second.dtype(), in[i].second.dtype());
    EXPECT_EQ(out[i].second.shape(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(out[i].second.device(), cpu());
    EXPECT_EQ(out[i].second.to_double_vector(), values_for(in[i].second.dtype(), 6));
    EXPECT_EQ(span_of(out[i].second), span_of(in[i].second));  // bit-exact
  }
}

TEST_F(Safetensors, FileLayoutFollowsTheSpec) {
  NamedTensors in = {{"b", seq({3}, kInt8)}, {"w", seq({2, 2}, kFloat64)}, {"h", seq({5}, kFloat16)}};
  save_safetensors(path("f.safetensors"), in, {{"format", "pt"}});
  Bytes file = read_bytes(path("f.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "the data buffer starts 8-aligned";
  auto header = header_of(file);
  EXPECT_EQ(header["__metadata__"], (nlohmann::json{{"format", "pt"}}));
  const char* codes[] = {"I8", "F64", "F16"};
  uint64_t total = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const auto& h = header[in[i].first];
    EXPECT_EQ(h["dtype"], codes[i]);
    EXPECT_EQ(h["shape"].get<std::vector<int64_t>>(), in[i].second.shape());
    uint64_t begin = h["data_offsets"][0], end = h["data_offsets"][1];
    EXPECT_EQ(begin % uint64_t(itemsize(in[i].second.dtype())), 0u) << "each tensor is aligned to its itemsize";
    Bytes stored(file.begin() + std::ptrdiff_t(8 + n + begin), file.begin() + std::ptrdiff_t(8 + n + end));
    EXPECT_EQ(stored, span_of(in[i].second));
    total += end - begin;
  }
  EXPECT_EQ(file.size(), 8 + n + total) << "no holes, nothing after the last tensor";
  EXPECT_EQ(serialize_safetensors(in, {{"format", "pt"}}), file);
}

TEST_F(Safetensors, HandWrittenFileLoads) {
  // F32 [1.5, -2], I64 [-1, 2^40], F16 1.5 (0x3E00), BF16 1.5 (0x3FC0), BOOL with a byte of 2.
  Bytes data = le_bytes<float>({1.5f, -2.0f});
  Bytes i64 = le_bytes<int64_t>({-1, int64_t(1) << 40});
  Bytes half = le_bytes<uint16_t>({0x3E00, 0xC000});
  Bytes bf = le_bytes<uint16_t>({0x3FC0});
  Bytes flags = {std::byte{0}, std::byte{2}, std::byte{1}};
  for (const Bytes* b : {&i64, &half, &bf, &flags}) data.insert(data.end(), b->begin(), b->end());
  std::string header = R"({"__metadata__":{"k":"v"},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("big":{"dtype":"I64","shape":[1,2],"data_offsets":[8,24]},)"
                       R"("h":{"dtype":"F16","shape":[2],"data_offsets":[24,28]},)"
                       R"("b":{"dtype":"BF16","shape":[],"data_offsets":[28,30]},)"
                       R"("m":{"dtype":"BOOL","shape":[3],"data_offsets":[30,33]}}   )";
  write_bytes(path("h.safetensors"), raw_file(header, data));
  SafetensorsContents c = load_safetensors_contents(path("h.safetensors"));
  EXPECT_EQ(c.metadata, (SafetensorsMetadata{{"k", "v"}}));
  ASSERT_EQ(c.tensors.size(), 5u);
  EXPECT_EQ(c.tensors[0].first, "x");
  EXPECT_EQ(c.tensors[0].second.to_double_vector(), (std::vector<double>{1.5, -2}));
  EXPECT_EQ(c.tensors[1].second.shape(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.tensors[1].second.data_ptr<int64_t>()[1], int64_t(1) << 40);
  EXPECT_EQ(c.tensors[2].second.to_double_vector(), (std::vector<double>{1.5, -2}));
  EXPECT_EQ(c.tensors[3].second.dim(), 0);
  EXPECT_EQ(c.tensors[3].second.item_double(), 1.5);
  EXPECT_EQ(c.tensors[4].second.dtype(), kBool);
  EXPECT_EQ(c.tensors[4].second.to_double_vector(), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(static_cast<const uint8_t*>(c.tensors[4].second.host_data())[1], 1) << "bools normalised to 0/1";
}

TEST_F(Safetensors, NonContiguousTensorsAreWrittenContiguous) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    Tensor base = seq({3, 4}, dt);
    Tensor t = transpose(base, 0, 1);                        // strides (1, 4)
    Tensor s = slice(base, 1, 1, 4, 2);                      // a stepped view: columns 1 and 3
    Tensor r = narrow(base, 0, 1, 2);                        // contiguous, with a storage offset
    ASSERT_FALSE(t.is_contiguous());
    ASSERT_FALSE(s.is_contiguous());
    save_safetensors(path("nc.safetensors"), {{"t", t}, {"s", s}, {"r", r}});
    NamedTensors out = load_safetensors(path("nc.safetensors"));
    ASSERT_EQ(out.size(), 3u);
    // Reference: the row-major walk of each view, by a plain loop over the base values.
    std::vector<double> bt, bs, br;
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 3; ++i) bt.push_back(i * 4 + j);
    for (int i = 0; i < 3; ++i)
      for (int j = 1; j < 4; j += 2) bs.push_back(i * 4 + j);
    for (int i = 1; i < 3; ++i)
      for (int j = 0; j < 4; ++j) br.push_back(i * 4 + j);
    EXPECT_EQ(out[0].second.shape(), (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(out[0].second.to_double_vector(), bt);
    EXPECT_EQ(out[1].second.shape(), (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(out[1].second.to_double_vector(), bs);
    EXPECT_EQ(out[2].second.to_double_vector(), br);
    for (const auto& [n, x] : out) EXPECT_TRUE(x.is_contiguous()) << n;
  }
}

TEST_F(Safetensors, ZeroSizeAndZeroDimTensors) {
  NamedTensors in = {{"empty_rows", seq({0, 3})},
                     {"scalar", tensor_from_values(std::vector<double>{2.5}, {}, kFloat64)},
                     {"mid_empty", seq({2, 0, 4}, kInt64)},
                     {"after", seq({2}, kInt32, 7)}};
  save_safetensors(path("z.safetensors"), in);
  NamedTensors out = load_safetensors(path("z.safetensors"));
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].second.shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(out[0].second.numel(), 0);
  EXPECT_EQ(out[1].second.dim(), 0);
  EXPECT_EQ(out[1].second.item_double(), 2.5);
  EXPECT_EQ(out[2].second.shape(), (std::vector<int64_t>{2, 0, 4}));
  EXPECT_EQ(out[3].second.to_double_vector(), (std::vector<double>{7, 8}));
  // No tensors at all is a valid file too.
  save_safetensors(path("none.safetensors"), {});
  EXPECT_TRUE(load_safetensors(path("none.safetensors")).empty());
}

TEST_F(Safetensors, MetadataRoundTrips) {
  SafetensorsMetadata meta = {{"format", "pt"}, {"note", "ünïcode \"quoted\"\n"}, {"", "empty key"}};
  save_safetensors(path("m.safetensors"), {{"w", seq({2})}}, meta);
  SafetensorsContents c = load_safetensors_contents(path("m.safetensors"));
  EXPECT_EQ(c.metadata, meta);
  ASSERT_EQ(c.tensors.size(), 1u);
  EXPECT_EQ(c.tensors[0].first, "w");
  // Without metadata the header has no "__metadata__" key, and the map comes back empty.
  save_safetensors(path("n.safetensors"), {{"w", seq({2})}});
  EXPECT_FALSE(header_of(read_bytes(path("n.safetensors"))).contains("__metadata__"));
  EXPECT_TRUE(load_safetensors_contents(path("n.safetensors")).metadata.empty());
}

TEST_F(Safetensors, DeviceTensorsAreCopiedToCpu) {
  load_plugin(std::string(TESSERA_FIXTURE_DIR) + "/libtessera_fallback_device.so");
  Device dev("fallbackdev");
  Tensor x = to_device(seq({2, 3}, kFloat32, 1), dev);
  ASSERT_THROW(x.host_data(), RuntimeError);  // its memory is not host-readable
  save_safetensors(path("d.safetensors"), {{"x", x}});
  NamedTensors out = load_safetensors(path("d.safetensors"));
  EXPECT_EQ(out[0].second.device(), cpu());
  EXPECT_EQ(out[0].second.to_double_vector(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST_F(Safetensors, ParseFromMemoryMatchesLoad) {
  NamedTensors in = {{"a", seq({2, 2}, kFloat64)}, {"b", seq({3}, kUInt8)}};
  Bytes bytes = serialize_safetensors(in, {{"k", "v"}});
  NamedTensors parsed = parse_safetensors(bytes);
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0].first, "a");
  EXPECT_EQ(parsed[0].second.to_double_vector(), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(parsed[1].second.to_double_vector(), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(parse_safetensors_contents(bytes).metadata, (SafetensorsMetadata{{"k", "v"}}));
  auto header = parse_safetensors_header(bytes, bytes.size());
  ASSERT_EQ(header.entries.size(), 2u);
  EXPECT_EQ(header.entries[1].dtype, kUInt8);
  EXPECT_EQ(header.entries[1].end - header.entries[1].begin, 3u);
}

TEST_F(Safetensors, ViewedTensorsShareTheBufferAndKeepItAlive) {
  // The header padded to a multiple of 8 so that the F32 tensor starts aligned; the U8 tensor of
  // 3 bytes then leaves the F32 tensor after it misaligned, which is copied instead of viewed.
  Bytes data = le_bytes<float>({1.5f, -2.0f});
  Bytes tail = le_bytes<float>({7.0f});
  Bytes flags = {std::byte{0}, std::byte{2}, std::byte{1}};
  data.insert(data.end(), flags.begin(), flags.end());
  data.insert(data.end(), tail.begin(), tail.end());
  std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("m":{"dtype":"BOOL","shape":[3],"data_offsets":[8,11]},)"
                       R"("y":{"dtype":"F32","shape":[1],"data_offsets":[11,15]}})";
  header.append((8 - (8 + header.size()) % 8) % 8, ' ');
  Bytes file = raw_file(header, data);
  std::shared_ptr<std::byte[]> buffer(new std::byte[file.size()]);
  std::memcpy(buffer.get(), file.data(), file.size());
  std::byte* base = buffer.get();
  SafetensorsContents c = view_safetensors_contents(std::move(buffer), file.size(), "viewed");
  ASSERT_EQ(c.tensors.size(), 3u);
  const Tensor& x = c.tensors[0].second;
  const Tensor& m = c.tensors[1].second;
  const Tensor& y = c.tensors[2].second;
  const std::byte* data_start = base + 8 + header.size();
  EXPECT_EQ(x.host_data(), data_start) << "an aligned tensor views the buffer";
  EXPECT_EQ(m.host_data(), data_start + 8);
  EXPECT_NE(y.host_data(), data_start + 11) << "a misaligned F32 tensor is a copy";
  EXPECT_EQ(x.to_double_vector(), (std::vector<double>{1.5, -2}));
  EXPECT_EQ(m.to_double_vector(), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(static_cast<const uint8_t*>(m.host_data())[1], 1) << "bools normalised to 0/1 in place";
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{7}));
  // The caller's pointer is gone; the tensors alone keep the buffer alive, and writes land in it.
  Tensor kept = x;
  c = {};
  kept.data_ptr<float>()[1] = 4.0f;
  EXPECT_EQ(kept.to_double_vector(), (std::vector<double>{1.5, 4}));
  expect_error<ValueError>([&] {
    Bytes bad = raw_file(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})", Bytes(8));
    std::shared_ptr<std::byte[]> b(new std::byte[bad.size()]);
    std::memcpy(b.get(), bad.data(), bad.size());
    view_safetensors_contents(std::move(b), bad.size(), "bad.safetensors");
  }, {"bad.safetensors"});
}

// ------------------------------------------------------------------------------------ rejections

TEST_F(Safetensors, RejectsTruncatedFile) {
  expect_rejected(path("t1"), Bytes(5), {"truncated", "too short"});
  expect_rejected(path("t2"), {}, {"truncated"});
  // A valid file cut in the middle of its header.
  Bytes whole = serialize_safetensors({{"w", seq({4})}});
  expect_rejected(path("t3"), Bytes(whole.begin(), whole.begin() + 20), {"truncated", "header length"});
}

TEST_F(Safetensors, RejectsHeaderLengthLargerThanFile) {
  expect_rejected(path("l"), raw_file("{}", {}, uint64_t(4096)), {"header length is 4096 bytes", "only 2 bytes"});
}

TEST_F(Safetensors, RejectsAbsurdHeaderLength) {
  expect_rejected(path("a"), raw_file("{}", {}, uint64_t(100'000'001)), {"absurd"});
  expect_rejected(path("a2"), raw_file("{}", {}, ~uint64_t(0)), {"absurd"});
}

TEST_F(Safetensors, RejectsHeaderThatIsNotAnObject) {
  expect_rejected(path("n"), raw_file("[1, 2]"), {"must be a JSON object", "array"});
  expect_rejected(path("n2"), raw_file("{\"w\": 3"), {"not valid JSON"});
  expect_rejected(path("n3"), raw_file(R"({"w": [1]})"), {"tensor 'w'", "expected an object"});
  expect_rejected(path("n4"), raw_file(R"({"__metadata__": {"k": 1}})"), {"__metadata__", "must be a string"});
  expect_rejected(path("n5"), raw_file(std::string(40, '[') + std::string(40, ']')), {"nests deeper"});
}

TEST_F(Safetensors, RejectsUnknownDtype) {
  expect_rejected(path("d"), raw_file(R"({"w": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}})", Bytes(8)),
                  {"tensor 'w'", "unsupported dtype 'C64'"});
  expect_rejected(path("d2"), raw_file(R"({"w": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}})", Bytes(4)),
                  {"tensor 'w'", "'dtype'"});
}

TEST_F(Safetensors, RejectsShapeOffsetMismatch) {
  expect_rejected(path("s"), raw_file(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", Bytes(24)),
                  {"tensor 'w'", "needs 24 bytes", "hold 20"});
}

TEST_F(Safetensors, RejectsOffsetsOutOfBounds) {
  expect_rejected(path("o"), raw_file(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", Bytes(12)),
                  {"tensor 'w'", "out of bounds", "holds 12 bytes"});
  expect_rejected(path("o2"), raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", Bytes(12)),
                  {"tensor 'w'", "end before they begin"});
  expect_rejected(path("o3"), raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", Bytes(12)),
                  {"tensor 'w'", "data_offsets"});
}

TEST_F(Safetensors, RejectsOverlappingTensors) {
  expect_rejected(path("v"),
                  raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                           R"( "b": {"dtype": "I32", "shape": [2], "data_offsets": [4, 12]}})",
                           Bytes(12)),
                  {"'a'", "'b'", "overlap"});
}

TEST_F(Safetensors, RejectsNegativeDims) {
  expect_rejected(path("g"), raw_file(R"({"w": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 0]}})"),
                  {"tensor 'w'", "negative dimension -1"});
  expect_rejected(path("g2"), raw_file(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", Bytes(4)),
                  {"tensor 'w'", "non-negative integer dimensions"});
}

TEST_F(Safetensors, RejectsElementCountOverflow) {
  expect_rejected(path("e"),
                  raw_file(R"({"w": {"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})"),
                  {"tensor 'w'", "element count", "overflows"});
  expect_rejected(path("e2"), raw_file(R"({"w": {"dtype": "F64", "shape": [4611686018427387904], "data_offsets": [0, 0]}})"),
                  {"tensor 'w'", "byte size", "overflows"});
}

TEST_F(Safetensors, RejectsDuplicateNames) {
  expect_rejected(path("u"),
                  raw_file(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},)"
                           R"( "w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                           Bytes(2)),
                  {"duplicate tensor name 'w'"});
}

TEST_F(Safetensors, MissingFileIsAFileError) {
  try {
    load_safetensors(path("nope.safetensors"));
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_EQ(e.error_code(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("nope.safetensors"), std::string::npos);
  }
  EXPECT_THROW(load_safetensors(dir_.string()), FileError);  // a folder
}

// ------------------------------------------------------------------------------------ saving

TEST_F(Safetensors, SaveRejectsBadNamesAndLeavesTheTargetAlone) {
  std::string target = path("keep.safetensors");
  write_bytes(target, Bytes(3, std::byte{42}));
  expect_error<ValueError>([&] { save_safetensors(target, {{"w", seq({1})}, {"w", seq({2})}}); },
                           {"duplicate tensor name 'w'"});
  expect_error<ValueError>([&] { save_safetensors(target, {{"__metadata__", seq({1})}}); }, {"reserved"});
  expect_error<ValueError>([&] { save_safetensors(target, {{"w", Tensor()}}); }, {"'w'", "undefined"});
  expect_error<ValueError>([&] { save_safetensors(target, {{std::string("\xff\xfe"), seq({1})}}); }, {"UTF-8"});
  EXPECT_EQ(read_bytes(target), Bytes(3, std::byte{42}));
  EXPECT_TRUE(others("keep.safetensors").empty());
}

TEST_F(Safetensors, FailedWriteLeavesTargetUntouchedAndNoTempFile) {
  std::string target = path("ckpt.safetensors");
  save_safetensors(target, {{"old", seq({2})}});
  Bytes before = read_bytes(target);
  // A file size limit makes write() fail with EFBIG halfway through a 1 MiB tensor.
  struct rlimit old_limit {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  try {
    save_safetensors(target, {{"big", seq({1 << 18})}});
    ADD_FAILURE() << "expected the write to fail";
  } catch (const FileError& e) {
    EXPECT_EQ(e.error_code(), EFBIG);
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  EXPECT_EQ(read_bytes(target), before);
  EXPECT_TRUE(others("ckpt.safetensors").empty()) << "temporary file left behind";
}

TEST_F(Safetensors, FailedRenameRemovesTheTempFile) {
  fs::create_directories(dir_ / "target_is_a_folder" / "child");  // rename onto a non-empty folder fails
  expect_error<FileError>([&] { save_safetensors(path("target_is_a_folder"), {{"w", seq({2})}}); }, {"rename"});
  EXPECT_TRUE(others("target_is_a_folder").empty());
  expect_error<FileError>([&] { save_safetensors(path("no/such/folder/x.safetensors"), {{"w", seq({2})}}); },
                          {"no/such/folder"});
}

TEST_F(Safetensors, SaveReplacesAnExistingFile) {
  std::string target = path("r.safetensors");
  save_safetensors(target, {{"a", seq({100})}});
  save_safetensors(target, {{"b", seq({2}, kInt16)}});
  NamedTensors out = load_safetensors(target);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, "b");
  EXPECT_EQ(out[0].second.dtype(), kInt16);
  EXPECT_TRUE(others("r.safetensors").empty());
}

// ------------------------------------------------------------------------------------ fuzz seeds

// The fuzz target's seeds: valid_* files (written by the safetensors package and by us) parse,
// bad_* files are refused with ValueError. A crash the fuzzer finds is added there as crash_*
// and must be refused or parsed, never crash.
TEST_F(Safetensors, FuzzCorpusSeeds) {
  fs::path corpus = fs::path(__FILE__).parent_path().parent_path().parent_path() / "fuzz/corpus/fuzz_safetensors";
  if (!fs::is_directory(corpus)) GTEST_SKIP() << "no corpus at " << corpus;
  int valid = 0, bad = 0;
  for (const auto& e : fs::directory_iterator(corpus)) {
    std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    Bytes bytes = read_bytes(e.path().string());
    if (name.starts_with("valid_")) {
      EXPECT_NO_THROW(parse_safetensors(bytes));
      ++valid;
    } else if (name.starts_with("bad_")) {
      EXPECT_THROW(parse_safetensors(bytes), ValueError);
      ++bad;
    } else {
      try {
        parse_safetensors(bytes);
      } catch (const ValueError&) {
      }
    }
  }
  EXPECT_GE(valid, 3);
  EXPECT_GE(bad, 5);
}
