#pragma once
// The TCPStore wire protocol. A message (request or reply) is
//   u8 code | u32 count | count x (u32 length | length bytes)
// little-endian. Requests carry a command code and its arguments (keys, values, 8-byte integers);
// replies carry a status code and their results. A message over the limits below or with an
// unknown code is malformed: the server closes that connection and keeps serving the others.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::distributed::protocol {

enum Command : uint8_t {
  kSet = 1, kGet = 2, kAdd = 3, kCompareSet = 4, kCheck = 5, kWait = 6, kDelete = 7, kNumKeys = 8, kPing = 9
};
enum Status : uint8_t { kOk = 0, kNotFound = 1, kError = 2 };

constexpr uint32_t kMaxArguments = 4096;               // keys of one wait/check
constexpr uint32_t kMaxArgumentBytes = 1u << 30;       // one value
constexpr uint64_t kMaxMessageBytes = 1ull << 31;      // everything in one message

struct Message {
  uint8_t code = 0;
  std::vector<std::string> arguments;
};

enum class Parse { kIncomplete, kComplete, kMalformed };

// Reads one message from the front of data[0, size). kComplete: *message and *consumed are set.
// kMalformed: *error says why.
Parse parse_message(const uint8_t* data, size_t size, Message* message, size_t* consumed, std::string* error);
// The bytes of a message.
std::vector<uint8_t> encode_message(uint8_t code, const std::vector<std::string>& arguments);
// Whether `code` is a command the server knows, with an acceptable argument count.
bool valid_request(const Message& m, std::string* error);

std::string encode_int(int64_t v);
bool decode_int(const std::string& s, int64_t* v);

}  // namespace tessera::distributed::protocol
