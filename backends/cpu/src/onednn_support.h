#pragma once
// What every oneDNN primitive of the CPU plugin shares: the engine, the attributes that let
// threads run one primitive at once, and a bounded cache of primitives by geometry (convolution,
// RNN layers, the compiler's matmul with epilogues).
#include <dnnl.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace tessera::cpu {

inline dnnl::engine& onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Primitives run concurrently from several threads, so each call brings its own scratchpad.
inline dnnl::primitive_attr user_scratchpad_attributes() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Creating a primitive costs far more than running a small one: a training loop creates each
// once. Cleared when full, so a sweep over shapes does not grow it without bound.
template <class Key, class Entry, size_t MaxEntries = 256>
class PrimitiveCache {
 public:
  template <class Make>
  std::shared_ptr<const Entry> get(const Key& key, Make&& make) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    }
    auto entry = std::make_shared<const Entry>(make());  // outside the lock: creation is slow
    std::lock_guard lock(mutex_);
    if (entries_.size() >= MaxEntries) entries_.clear();
    return entries_.emplace(key, entry).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<Key, std::shared_ptr<const Entry>> entries_;
};

}  // namespace tessera::cpu
