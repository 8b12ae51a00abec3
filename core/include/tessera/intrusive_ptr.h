#pragma once
// A minimal intrusive reference-counted pointer: tensors cross the C ABI as raw pointers,
// so the count must live inside the object (the handle *is* the object).
#include <atomic>
#include <cstdint>
#include <utility>

namespace tessera {

class RefCounted {
 public:
  void retain() const noexcept { refcount_.fetch_add(1, std::memory_order_relaxed); }
  // Returns true when this was the last reference.
  bool release_ref() const noexcept { return refcount_.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  int64_t use_count() const noexcept { return refcount_.load(std::memory_order_relaxed); }

 protected:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;

 private:
  mutable std::atomic<int64_t> refcount_{1};
};

template <class T>
class IntrusivePtr {
 public:
  IntrusivePtr() = default;
  // Takes over a reference the caller owns.
  static IntrusivePtr adopt(T* p) { IntrusivePtr r; r.p_ = p; return r; }
  // Adds a reference to a borrowed pointer.
  static IntrusivePtr borrow(T* p) { if (p) p->retain(); return adopt(p); }
  IntrusivePtr(const IntrusivePtr& o) : p_(o.p_) { if (p_) p_->retain(); }
  IntrusivePtr(IntrusivePtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  IntrusivePtr& operator=(IntrusivePtr o) noexcept { std::swap(p_, o.p_); return *this; }
  ~IntrusivePtr() { reset(); }
  void reset() { if (p_ && p_->release_ref()) delete p_; p_ = nullptr; }
  T* release() noexcept { return std::exchange(p_, nullptr); }  // hands the reference out
  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

}  // namespace tessera
