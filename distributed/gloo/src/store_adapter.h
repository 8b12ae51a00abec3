#pragma once
// Gloo's rendezvous store over the host's ts_store (ABI 1.7): gloo's full-mesh connect exchanges
// each rank's address through whatever store the ranks share (TCP, file, hash).
#include <tessera/abi.h>
#include <tessera/sdk/plugin.h>

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::gloo_backend {

class StoreAdapter : public ::gloo::rendezvous::Store {
 public:
  // A store call failed; the store already set the message (set_error(NULL, ...)), this only unwinds.
  struct Failed : std::runtime_error {
    ts_status status;
    explicit Failed(ts_status s) : std::runtime_error("store failed"), status(s) {}
  };

  StoreAdapter(const ts_store& store, std::string prefix, std::chrono::milliseconds timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    check(store_.set(store_.data, full(key).c_str(), data.data(), data.size()));
  }

  std::vector<char> get(const std::string& key) override {
    std::vector<char> value;
    auto sink = [](void* out, const void* bytes, size_t size) {
      auto* v = static_cast<std::vector<char>*>(out);
      v->assign(static_cast<const char*>(bytes), static_cast<const char*>(bytes) + size);
    };
    check(store_.get(store_.data, full(key).c_str(), timeout_.count(), sink, &value));
    return value;
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    auto ignore = [](void*, const void*, size_t) {};
    for (auto& k : keys) check(store_.get(store_.data, full(k).c_str(), timeout.count(), ignore, nullptr));
  }

 private:
  static void check(ts_status s) {
    if (s != TS_OK) throw Failed(s);
  }
  std::string full(const std::string& key) const { return prefix_ + key; }

  const ts_store& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

}  // namespace tessera::gloo_backend
