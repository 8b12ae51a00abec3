// libFuzzer target: the operator schema parser. Any bytes either parse, and then the canonical
// text parses back to an equal schema, or raise SchemaError. Anything else (another exception,
// a crash, a sanitizer report, a hang) is a bug.
#include <tessera/error.h>
#include <tessera/schema.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tessera::FunctionSchema schema;
  try {
    schema = tessera::parse_schema(text);
  } catch (const tessera::SchemaError&) {
    return 0;  // a clean refusal
  }
  std::string canonical = schema.to_string();
  tessera::FunctionSchema again;
  try {
    again = tessera::parse_schema(canonical);
  } catch (const tessera::SchemaError& e) {
    std::fprintf(stderr, "canonical text does not parse back:\n  input: %.*s\n  canonical: %s\n  error: %s\n",
                 int(size), text.data(), canonical.c_str(), e.what());
    std::abort();
  }
  if (!(again == schema)) {
    std::fprintf(stderr, "round trip changed the schema:\n  input: %.*s\n  canonical: %s\n  again: %s\n", int(size),
                 text.data(), canonical.c_str(), again.to_string().c_str());
    std::abort();
  }
  return 0;
}
