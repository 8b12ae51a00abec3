#include "tcp_store_server.h"

#include "tcp_store_protocol.h"
#include "tcp_store_table.h"

#include <fmt/format.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <vector>

namespace tessera::distributed {

using server::Client;
using server::Table;

TCPStore::Server::Server(int port) {
  listen_fd_ = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = listen_fd_ >= 0;
  if (!v6) listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw DistNetworkError(fmt::format("TCPStore: cannot create a socket: {}", std::strerror(errno)));
  int one = 1, zero = 0;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (v6) setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 clients too
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(uint16_t(port));
    rc = bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(uint16_t(port));
    rc = bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 || listen(listen_fd_, 1024) != 0) {
    int e = errno;
    close(listen_fd_);
    throw DistNetworkError(fmt::format("TCPStore: the server cannot listen on port {} (all interfaces): {}{}", port,
                                       std::strerror(e),
                                       e == EADDRINUSE ? "; another process (an earlier run?) holds that port: "
                                                         "pick another MASTER_PORT"
                                                       : ""));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { serve(); });
}

TCPStore::Server::~Server() {
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) {
  }
  if (thread_.joinable()) thread_.join();
  close(wake_fd_);
  close(listen_fd_);
}

void TCPStore::Server::serve() {
  Table table;
  std::list<Client> clients;
  std::vector<uint8_t> chunk(1 << 16);
  for (;;) {
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    std::vector<Client*> order;
    for (auto& c : clients) {
      fds.push_back({c.fd, short(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      order.push_back(&c);
    }
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) return;
    if (fds[1].revents & POLLIN) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        clients.push_back(Client{fd});
      }
    }
    for (size_t i = 0; i < order.size(); ++i) {
      Client& c = *order[i];
      short ev = fds[i + 2].revents;
      if (ev & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = recv(c.fd, chunk.data(), chunk.size(), 0);
        if (n > 0) {
          c.in.insert(c.in.end(), chunk.begin(), chunk.begin() + n);
          table.receive(c);  // a malformed request ends this client only
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          c.closing = true;
        }
      }
      if (!c.closing && !c.out.empty()) {  // non-blocking: EAGAIN leaves it for POLLOUT
        ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (n > 0) c.out.erase(c.out.begin(), c.out.begin() + n);
        else if (n < 0 && errno != EAGAIN && errno != EINTR) c.closing = true;
      }
    }
    for (auto it = clients.begin(); it != clients.end();) {
      if (it->closing) {
        table.forget(&*it);
        close(it->fd);
        it = clients.erase(it);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace tessera::distributed
