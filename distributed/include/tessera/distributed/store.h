#pragma once
// A key-value store that every rank of a job reaches: the rendezvous of process groups and
// whatever else ranks agree on (torch.distributed's Store). Values are bytes. Every blocking call
// has a timeout and fails with DistStoreError naming what it waited for.
#include <tessera/abi.h>
#include <tessera/distributed/errors.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::distributed {

using Bytes = std::vector<uint8_t>;
using Milliseconds = std::chrono::milliseconds;

class Store {
 public:
  static constexpr Milliseconds kDefaultTimeout{300000};  // torch's 300 s

  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // The value of `key`, waiting for it up to the store's timeout.
  Bytes get(const std::string& key) { return get(key, timeout_); }
  virtual Bytes get(const std::string& key, Milliseconds timeout) = 0;
  // Adds `delta` to the integer (decimal text, as torch stores it) at `key`; returns the sum.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Sets `key` to `desired` when its value is `expected` (or it is absent and `expected` is
  // empty); returns the value afterwards.
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // True when every key exists; does not wait.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key exists, up to `timeout`.
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  virtual void wait(const std::vector<std::string>& keys, Milliseconds timeout) = 0;
  // True when the key existed.
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;

  Milliseconds timeout() const { return timeout_; }
  void set_timeout(Milliseconds t) { timeout_ = t; }

  // The C ABI view of this store that a process-group backend's `create` borrows (ABI 1.7).
  ts_store abi_view();

 protected:
  Milliseconds timeout_ = kDefaultTimeout;
};

// An in-process store (torch's HashStore): for a world of one, and tests.
std::shared_ptr<Store> make_hash_store();

// A view of `store` with every key prefixed by `prefix` + "/" (torch's PrefixStore).
std::shared_ptr<Store> make_prefix_store(std::string prefix, std::shared_ptr<Store> store);

// A store in a file that processes on one machine (or a shared file system) share, guarded by
// flock (torch's FileStore). `world_size` > 0: the file is removed when that many stores that
// opened it have been destroyed.
std::shared_ptr<Store> make_file_store(const std::string& path, int64_t world_size = -1);

// The message of a wait that timed out, shared by every store.
[[noreturn]] void raise_wait_timeout(const char* store, const std::vector<std::string>& keys, Milliseconds timeout);

}  // namespace tessera::distributed
