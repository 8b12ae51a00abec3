#pragma once
// The TCPStore server: one thread polls the listening socket and every client connection,
// answers requests in arrival order and holds back the replies of waits until their keys exist.
#include <tessera/distributed/tcp_store.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>

namespace tessera::distributed {

class TCPStore::Server {
 public:
  // Listens on every interface at `port` (0: a free one). DistNetworkError when it cannot.
  explicit Server(int port);
  ~Server();
  int port() const { return port_; }

 private:
  void serve();
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd that ends serve()
  int port_ = 0;
  std::thread thread_;
};

}  // namespace tessera::distributed
