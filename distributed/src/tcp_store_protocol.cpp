#include "tcp_store_protocol.h"

#include <cstring>

namespace tessera::distributed::protocol {
namespace {
uint32_t read_u32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
void write_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(v >> (8 * i)));
}
}  // namespace

Parse parse_message(const uint8_t* data, size_t size, Message* message, size_t* consumed, std::string* error) {
  if (size < 5) return Parse::kIncomplete;
  const uint32_t count = read_u32(data + 1);
  if (count > kMaxArguments) {
    *error = "a message with " + std::to_string(count) + " arguments (at most " + std::to_string(kMaxArguments) + ")";
    return Parse::kMalformed;
  }
  // Walk the lengths first: nothing is copied until the whole message is here.
  size_t at = 5;
  uint64_t total = 5;
  for (uint32_t i = 0; i < count; ++i) {
    if (size < at + 4) return Parse::kIncomplete;
    const uint32_t length = read_u32(data + at);
    if (length > kMaxArgumentBytes) {
      *error = "an argument of " + std::to_string(length) + " bytes (at most " + std::to_string(kMaxArgumentBytes) + ")";
      return Parse::kMalformed;
    }
    total += 4ull + length;
    if (total > kMaxMessageBytes) {
      *error = "a message over " + std::to_string(kMaxMessageBytes) + " bytes";
      return Parse::kMalformed;
    }
    if (size < at + 4 + length) return Parse::kIncomplete;
    at += 4 + length;
  }
  message->code = data[0];
  message->arguments.clear();
  message->arguments.reserve(count);
  at = 5;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t length = read_u32(data + at);
    message->arguments.emplace_back(reinterpret_cast<const char*>(data + at + 4), length);
    at += 4 + length;
  }
  *consumed = at;
  return Parse::kComplete;
}

std::vector<uint8_t> encode_message(uint8_t code, const std::vector<std::string>& arguments) {
  std::vector<uint8_t> out;
  size_t total = 5;
  for (auto& a : arguments) total += 4 + a.size();
  out.reserve(total);
  out.push_back(code);
  write_u32(out, uint32_t(arguments.size()));
  for (auto& a : arguments) {
    write_u32(out, uint32_t(a.size()));
    out.insert(out.end(), a.begin(), a.end());
  }
  return out;
}

bool valid_request(const Message& m, std::string* error) {
  size_t n = m.arguments.size();
  bool ok = false;
  switch (m.code) {
    case kSet: ok = n == 2; break;
    case kGet: case kDelete: ok = n == 1; break;
    case kAdd: {
      int64_t ignored;
      ok = n == 2 && decode_int(m.arguments[1], &ignored);
      break;
    }
    case kCompareSet: ok = n == 3; break;
    case kCheck: case kWait: ok = n >= 1; break;
    case kNumKeys: case kPing: ok = n == 0; break;
    default:
      *error = "unknown command " + std::to_string(int(m.code));
      return false;
  }
  if (!ok) *error = "command " + std::to_string(int(m.code)) + " with " + std::to_string(n) + " malformed arguments";
  return ok;
}

std::string encode_int(int64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

bool decode_int(const std::string& s, int64_t* v) {
  if (s.size() != 8) return false;
  std::memcpy(v, s.data(), 8);
  return true;
}

}  // namespace tessera::distributed::protocol
