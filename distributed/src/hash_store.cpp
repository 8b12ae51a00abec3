// HashStore (in one process) and PrefixStore (a namespace inside another store).
#include <tessera/distributed/store.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

namespace tessera::distributed {
namespace {

class HashStore : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override {
    {
      std::lock_guard lock(mutex_);
      values_[key] = value;
    }
    changed_.notify_all();
  }
  using Store::get;
  Bytes get(const std::string& key, Milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; }))
      raise_wait_timeout("HashStore", {key}, timeout);
    return values_[key];
  }
  int64_t add(const std::string& key, int64_t delta) override {
    int64_t sum;
    {
      std::lock_guard lock(mutex_);
      auto it = values_.find(key);
      int64_t current = it == values_.end() ? 0 : std::stoll(std::string(it->second.begin(), it->second.end()));
      sum = current + delta;
      std::string text = std::to_string(sum);
      values_[key] = Bytes(text.begin(), text.end());
    }
    changed_.notify_all();
    return sum;
  }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    Bytes now;
    {
      std::lock_guard lock(mutex_);
      auto it = values_.find(key);
      if (it == values_.end()) {
        if (!expected.empty()) return expected;
        values_[key] = desired;
        now = desired;
      } else {
        if (it->second == expected) it->second = desired;
        now = it->second;
      }
    }
    changed_.notify_all();
    return now;
  }
  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard lock(mutex_);
    return present(keys);
  }
  using Store::wait;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return present(keys); })) raise_wait_timeout("HashStore", keys, timeout);
  }
  bool delete_key(const std::string& key) override {
    std::lock_guard lock(mutex_);
    return values_.erase(key) > 0;
  }
  int64_t num_keys() override {
    std::lock_guard lock(mutex_);
    return int64_t(values_.size());
  }

 private:
  bool present(const std::vector<std::string>& keys) const {
    for (auto& k : keys)
      if (!values_.count(k)) return false;
    return true;
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> values_;
};

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store) : prefix_(std::move(prefix) + "/"), store_(std::move(store)) {
    timeout_ = store_->timeout();
  }
  void set(const std::string& key, const Bytes& value) override { store_->set(prefix_ + key, value); }
  using Store::get;
  Bytes get(const std::string& key, Milliseconds timeout) override { return store_->get(prefix_ + key, timeout); }
  int64_t add(const std::string& key, int64_t delta) override { return store_->add(prefix_ + key, delta); }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return store_->compare_set(prefix_ + key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return store_->check(prefixed(keys)); }
  using Store::wait;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override { store_->wait(prefixed(keys), timeout); }
  bool delete_key(const std::string& key) override { return store_->delete_key(prefix_ + key); }
  int64_t num_keys() override { return store_->num_keys(); }  // torch counts the whole store too

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace

std::shared_ptr<Store> make_hash_store() { return std::make_shared<HashStore>(); }
std::shared_ptr<Store> make_prefix_store(std::string prefix, std::shared_ptr<Store> store) {
  if (!store) throw ValueError("PrefixStore: the underlying store is None");
  return std::make_shared<PrefixStore>(std::move(prefix), std::move(store));
}

}  // namespace tessera::distributed
