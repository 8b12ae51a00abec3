// TCPStore's client side (every process, the master too) and its construction.
#include "tcp_store_protocol.h"
#include "tcp_store_server.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

namespace tessera::distributed {

using Clock = std::chrono::steady_clock;

// One connection to the server, used by one thread at a time. A wait that times out leaves a
// reply in flight, so the connection is dropped and made again on the next request.
class TCPStore::Connection {
 public:
  Connection(std::string host, int port, Milliseconds connect_timeout)
      : host_(std::move(host)), port_(port), connect_timeout_(connect_timeout) {}
  ~Connection() { drop(); }

  protocol::Message request(uint8_t command, const std::vector<std::string>& arguments, Milliseconds timeout,
                            const char* what) {
    std::lock_guard lock(mutex_);
    if (fd_ < 0) connect_to_server();
    auto bytes = protocol::encode_message(command, arguments);
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) lost(what, std::strerror(errno));
      sent += size_t(n);
    }
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      protocol::Message reply;
      size_t used = 0;
      std::string why;
      auto parsed = protocol::parse_message(in_.data(), in_.size(), &reply, &used, &why);
      if (parsed == protocol::Parse::kComplete) {
        in_.erase(in_.begin(), in_.begin() + ptrdiff_t(used));
        if (reply.code == protocol::kError)
          throw DistStoreError(fmt::format("TCPStore {}: {}", what, reply.arguments.empty() ? "failed" : reply.arguments[0]));
        return reply;
      }
      if (parsed == protocol::Parse::kMalformed) lost(what, ("a malformed reply: " + why).c_str());
      auto left = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        drop();
        throw DistStoreError(fmt::format("TCPStore {} timed out after {} ms (server {}:{})", what, timeout.count(), host_, port_));
      }
      pollfd p{fd_, POLLIN, 0};
      int rc = poll(&p, 1, int(std::min<int64_t>(left, 1 << 30)));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) continue;
      uint8_t chunk[1 << 16];
      ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) lost(what, "the server closed the connection (did the process that runs it exit?)");
      if (n < 0) lost(what, std::strerror(errno));
      in_.insert(in_.end(), chunk, chunk + n);
    }
  }

 private:
  [[noreturn]] void lost(const char* what, const char* why) {
    drop();
    throw DistStoreError(fmt::format("TCPStore {}: lost the server at {}:{}: {}", what, host_, port_, why));
  }
  void drop() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    in_.clear();
  }
  // Retries until the timeout: clients usually start before the master's server is up.
  void connect_to_server() {
    const auto deadline = Clock::now() + connect_timeout_;
    std::string last_error = "no address";
    for (;;) {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* found = nullptr;
      int rc = getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &found);
      if (rc != 0) {
        last_error = gai_strerror(rc);
      } else {
        for (addrinfo* a = found; a; a = a->ai_next) {
          int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
          if (fd < 0) continue;
          if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            fd_ = fd;
            break;
          }
          last_error = std::strerror(errno);
          close(fd);
        }
        freeaddrinfo(found);
      }
      if (fd_ >= 0) return;
      if (Clock::now() >= deadline)
        throw DistNetworkError(fmt::format("TCPStore: could not connect to the server at {}:{} within {} ms: {}", host_,
                                           port_, connect_timeout_.count(), last_error));
      std::this_thread::sleep_for(Milliseconds(50));
    }
  }

  std::string host_;
  int port_;
  Milliseconds connect_timeout_;
  std::mutex mutex_;
  int fd_ = -1;
  std::vector<uint8_t> in_;
};

namespace {
std::string text(const Bytes& b) { return {b.begin(), b.end()}; }
Bytes bytes(const std::string& s) { return {s.begin(), s.end()}; }
constexpr Milliseconds kQuick{60000};  // requests that the server answers at once
const char* kWorkersKey = "__tessera_store/workers";
const char* kWorkersReadyKey = "__tessera_store/workers_ready";
}  // namespace

TCPStore::TCPStore(std::string host, TCPStoreOptions options) : host_(std::move(host)), port_(options.port) {
  timeout_ = options.timeout;
  if (options.is_master) {
    server_ = std::make_unique<Server>(options.port);
    port_ = server_->port();
  } else if (port_ <= 0 || port_ > 65535) {
    throw ValueError(fmt::format("TCPStore: a client needs the server's port (1..65535), got {}", port_));
  }
  connection_ = std::make_unique<Connection>(options.is_master ? std::string("127.0.0.1") : host_, port_, timeout_);
  connection_->request(protocol::kPing, {}, timeout_, "connect");
  if (options.world_size > 0 && options.wait_for_workers) {
    // Every store counts itself in; the last one in says so, and the master waits for that.
    int64_t joined = add(kWorkersKey, 1);
    if (joined == options.world_size) set(kWorkersReadyKey, bytes("1"));
    if (options.is_master) {
      try {
        wait({kWorkersReadyKey}, timeout_);
      } catch (const DistStoreError&) {
        int64_t count = add(kWorkersKey, 0);
        throw DistStoreError(fmt::format("TCPStore: timed out after {} ms waiting for clients: {} of {} joined (server "
                                         "on port {})", timeout_.count(), count, options.world_size, port_));
      }
    }
  }
}

TCPStore::~TCPStore() = default;

void TCPStore::set(const std::string& key, const Bytes& value) {
  connection_->request(protocol::kSet, {key, text(value)}, kQuick, "set");
}

Bytes TCPStore::get(const std::string& key, Milliseconds timeout) {
  wait({key}, timeout);
  auto reply = connection_->request(protocol::kGet, {key}, kQuick, "get");
  if (reply.code != protocol::kOk || reply.arguments.empty())
    throw DistStoreError(fmt::format("TCPStore get: key '{}' was deleted while it was read", key));
  return bytes(reply.arguments[0]);
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  auto reply = connection_->request(protocol::kAdd, {key, protocol::encode_int(delta)}, kQuick, "add");
  int64_t v = 0;
  if (reply.arguments.empty() || !protocol::decode_int(reply.arguments[0], &v))
    throw DistStoreError("TCPStore add: a malformed reply");
  return v;
}

Bytes TCPStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  auto reply = connection_->request(protocol::kCompareSet, {key, text(expected), text(desired)}, kQuick, "compare_set");
  return reply.arguments.empty() ? Bytes{} : bytes(reply.arguments[0]);
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  return connection_->request(protocol::kCheck, keys, kQuick, "check").code == protocol::kOk;
}

void TCPStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  try {
    connection_->request(protocol::kWait, keys, timeout, "wait");
  } catch (const DistStoreError& e) {
    if (std::string_view(e.what()).find("timed out") == std::string_view::npos) throw;
    raise_wait_timeout("TCPStore", keys, timeout);
  }
}

bool TCPStore::delete_key(const std::string& key) {
  return connection_->request(protocol::kDelete, {key}, kQuick, "delete_key").code == protocol::kOk;
}

int64_t TCPStore::num_keys() {
  auto reply = connection_->request(protocol::kNumKeys, {}, kQuick, "num_keys");
  int64_t v = 0;
  if (reply.arguments.empty() || !protocol::decode_int(reply.arguments[0], &v))
    throw DistStoreError("TCPStore num_keys: a malformed reply");
  return v;
}

}  // namespace tessera::distributed
