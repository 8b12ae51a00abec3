// libFuzzer target: the safetensors reader. Any bytes either parse, and then the tensors written
// back out parse again to the same names, dtypes, shapes, bytes and metadata, or raise
// ValueError. Anything else (another exception, a crash, a sanitizer report, a hang) is a bug.
#include <tessera/error.h>
#include <tessera/safetensors.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <span>

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_safetensors: %s %s\n", what, detail.c_str());
  std::abort();
}

bool same_bytes(const tessera::Tensor& a, const tessera::Tensor& b) {
  size_t n = size_t(a.numel() * tessera::itemsize(a.dtype()));
  return n == 0 || std::memcmp(a.host_data(), b.host_data(), n) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  tessera::SafetensorsContents contents;
  try {
    contents = tessera::parse_safetensors_contents(file);
  } catch (const tessera::ValueError&) {
    return 0;  // a clean refusal
  } catch (const std::exception& e) {
    fail("unexpected exception:", e.what());
  }
  for (const auto& [name, t] : contents.tensors)
    if (!t.is_contiguous() || !t.device().is_cpu()) fail("a loaded tensor is not a contiguous CPU tensor:", name);

  // What was accepted must survive our own writer.
  tessera::SafetensorsContents again;
  try {
    auto bytes = tessera::serialize_safetensors(contents.tensors, contents.metadata);
    again = tessera::parse_safetensors_contents(bytes);
  } catch (const std::exception& e) {
    fail("an accepted file does not round-trip:", e.what());
  }
  if (again.metadata != contents.metadata || again.tensors.size() != contents.tensors.size())
    fail("round trip changed the metadata or the tensor count");
  for (size_t i = 0; i < again.tensors.size(); ++i) {
    const auto& [n1, t1] = contents.tensors[i];
    const auto& [n2, t2] = again.tensors[i];
    if (n1 != n2 || t1.dtype() != t2.dtype() || t1.shape() != t2.shape() || !same_bytes(t1, t2))
      fail("round trip changed tensor", n1);
  }
  return 0;
}
