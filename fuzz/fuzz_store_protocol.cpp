// Fuzzes the TCPStore server's request handling (distributed/src: the wire parser and the table
// behind the sockets). Input: bytes that one client sends, in chunks of fuzzer-chosen sizes. The
// server must answer whole valid requests, refuse the client at the first malformed one, and then
// still serve a well-behaved client; an encoded message must parse back to itself.
#include "tcp_store_protocol.h"
#include "tcp_store_table.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdlib>

using namespace tessera::distributed;

namespace {
void require(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  server::Table table;
  server::Client hostile;
  while (input.remaining_bytes() > 0 && !hostile.closing) {
    auto chunk = input.ConsumeBytes<uint8_t>(input.ConsumeIntegralInRange<size_t>(1, 512));
    hostile.in.insert(hostile.in.end(), chunk.begin(), chunk.end());
    table.receive(hostile);
  }
  table.forget(&hostile);

  // Every reply the server wrote is a well-formed message.
  size_t at = 0;
  while (at < hostile.out.size()) {
    protocol::Message reply;
    size_t used = 0;
    std::string why;
    require(protocol::parse_message(hostile.out.data() + at, hostile.out.size() - at, &reply, &used, &why) ==
            protocol::Parse::kComplete);
    at += used;
  }

  // The server still serves: set then get round-trips.
  server::Client good;
  auto request = [&](uint8_t code, const std::vector<std::string>& args) {
    auto bytes = protocol::encode_message(code, args);
    good.in.insert(good.in.end(), bytes.begin(), bytes.end());
    table.receive(good);
  };
  request(protocol::kSet, {"fuzz-key", "fuzz-value"});
  request(protocol::kGet, {"fuzz-key"});
  require(!good.closing);
  protocol::Message first, second;
  size_t used1 = 0, used2 = 0;
  std::string why;
  require(protocol::parse_message(good.out.data(), good.out.size(), &first, &used1, &why) == protocol::Parse::kComplete);
  require(protocol::parse_message(good.out.data() + used1, good.out.size() - used1, &second, &used2, &why) ==
          protocol::Parse::kComplete);
  require(second.code == protocol::kOk && second.arguments.size() == 1 && second.arguments[0] == "fuzz-value");
  return 0;
}
