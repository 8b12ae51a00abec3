#include "arena.h"

#include <tessera/sdk/plugin.h>

#include <ios>

namespace simdev {

namespace {
std::string hex(uint64_t v) { return tessera::sdk::cat("0x", std::hex, v); }
}  // namespace

void* Arena::allocate(size_t nbytes) {
  std::lock_guard lock(mutex_);
  if (nbytes > capacity_ - in_use_) return nullptr;
  uint64_t offset = next_offset_;
  // A guard gap after each block: an overrun lands in no allocation and is reported by map().
  next_offset_ += (nbytes + 255) / 256 * 256 + 256;
  if (next_offset_ > kOffsetMask) return nullptr;
  blocks_.emplace(offset, Block{std::unique_ptr<char[]>(new (std::nothrow) char[nbytes ? nbytes : 1]), nbytes});
  if (!blocks_.at(offset).bytes) {
    blocks_.erase(offset);
    return nullptr;
  }
  in_use_ += nbytes;
  return reinterpret_cast<void*>((uint64_t(tag_) << 48) | offset);
}

void Arena::release(const void* handle) {
  std::lock_guard lock(mutex_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(handle) & kOffsetMask);
  if (it == blocks_.end() || !owns(handle)) return;  // the host never frees twice; be lenient
  in_use_ -= it->second.size;
  blocks_.erase(it);
}

char* Arena::map(const void* handle, size_t nbytes) const {
  uint64_t h = reinterpret_cast<uintptr_t>(handle);
  TS_SDK_CHECK(owns(handle), TS_ERROR_VALUE, "device pointer ", hex(h), " is not a handle of this device (tag ",
               hex(tag_), ", got ", hex(h >> 48), ")");
  uint64_t offset = h & kOffsetMask;
  std::lock_guard lock(mutex_);
  auto it = blocks_.upper_bound(offset);
  TS_SDK_CHECK(it != blocks_.begin(), TS_ERROR_VALUE, "device pointer ", hex(h), " lies in no allocation");
  --it;
  uint64_t start = it->first, end = start + it->second.size;
  TS_SDK_CHECK(offset <= end && nbytes <= end - offset, TS_ERROR_VALUE, "device range ", hex(h), " + ", nbytes,
               " bytes runs past its allocation of ", it->second.size, " bytes (freed or out of bounds)");
  return it->second.bytes.get() + (offset - start);
}

size_t Arena::bytes_in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}

size_t Arena::live_allocations() const {
  std::lock_guard lock(mutex_);
  return blocks_.size();
}

}  // namespace simdev
