#pragma once
// The TCPStore server's data and request handling, apart from the sockets (so the fuzz target
// drives it directly): a map of keys to values, and the clients whose waits are not answered yet.
#include "tcp_store_protocol.h"

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <vector>

namespace tessera::distributed::server {

struct Client {
  int fd = -1;
  std::vector<uint8_t> in;   // bytes received, not parsed yet
  std::vector<uint8_t> out;  // bytes to send
  bool closing = false;
};

class Table {
 public:
  // Answers a valid request (protocol::valid_request) into client.out, or holds a wait back.
  void handle(Client& client, const protocol::Message& m);
  // Forgets a client that is gone (its pending waits).
  void forget(Client* client);
  // Parses and answers every whole request in client.in; a malformed one marks the client closing.
  void receive(Client& client);

 private:
  struct Waiter {
    Client* client;
    std::vector<std::string> keys;
  };
  bool all_present(const std::vector<std::string>& keys) const;
  void release_waiters();
  std::map<std::string, std::string> values_;
  std::list<Waiter> waiters_;
};

}  // namespace tessera::distributed::server
