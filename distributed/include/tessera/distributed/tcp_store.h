#pragma once
// TCPStore: a store served over TCP by one process (the master, usually rank 0, or a standalone
// server) to many clients (torch.distributed.TCPStore). The wire protocol is in tcp_store_protocol.h.
#include <tessera/distributed/store.h>

#include <memory>
#include <string>

namespace tessera::distributed {

struct TCPStoreOptions {
  int port = 29500;  // 0: the server picks a free port (read it back with port())
  bool is_master = false;
  int64_t world_size = -1;       // > 0 with wait_for_workers: the master waits for that many clients
  bool wait_for_workers = true;
  Milliseconds timeout = Store::kDefaultTimeout;
};

class TCPStore : public Store {
 public:
  // The master starts the server (DistNetworkError naming the address and port when it is in
  // use) and connects to it like every client. Clients retry connecting until `timeout`.
  TCPStore(std::string host, TCPStoreOptions options);
  ~TCPStore() override;

  void set(const std::string& key, const Bytes& value) override;
  using Store::get;
  Bytes get(const std::string& key, Milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

  const std::string& host() const { return host_; }
  int port() const { return port_; }

 private:
  class Server;
  class Connection;
  std::string host_;
  int port_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Connection> connection_;
};

}  // namespace tessera::distributed
