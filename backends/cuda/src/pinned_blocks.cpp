#include "pinned_blocks.h"

#include <algorithm>

namespace tessera::gpu {

void PinnedBlocks::add(void* ptr, size_t size) {
  by_address_[reinterpret_cast<uintptr_t>(ptr)] = Block{size, false, {}};
}

namespace {
// The block whose bytes contain [p, p + nbytes), or end(); for the const and mutable maps.
template <class Map>
auto containing(Map& blocks, const void* ptr, size_t nbytes) -> decltype(blocks.begin()) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = blocks.upper_bound(p);
  if (it == blocks.begin()) return blocks.end();
  --it;
  return p + nbytes <= it->first + it->second.size ? it : blocks.end();
}
}  // namespace

PinnedBlocks::Blocks::const_iterator PinnedBlocks::block_at(const void* ptr, size_t nbytes) const {
  return containing(by_address_, ptr, nbytes);
}
PinnedBlocks::Blocks::iterator PinnedBlocks::block_at(const void* ptr, size_t nbytes) {
  return containing(by_address_, ptr, nbytes);
}

bool PinnedBlocks::holds(const void* ptr, size_t nbytes) const {
  auto it = block_at(ptr, nbytes);
  return it != by_address_.end() && !it->second.freed;
}

void PinnedBlocks::drop_completed_uses(Block& b) {
  std::erase_if(b.uses, [this](const std::pair<int32_t, void*>& u) {
    if (!events_.done(events_.context, u.first, u.second)) return false;
    events_.release(events_.context, u.first, u.second);
    return true;
  });
}

void PinnedBlocks::add_use(const void* ptr, int32_t device, void* event) {
  auto it = block_at(ptr, 1);
  if (it == by_address_.end()) {  // not a block (the caller checked holds): nothing waits for it
    events_.release(events_.context, device, event);
    return;
  }
  drop_completed_uses(it->second);
  it->second.uses.emplace_back(device, event);
}

bool PinnedBlocks::free(void* ptr) {
  auto it = by_address_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == by_address_.end()) return false;
  it->second.freed = true;
  collect();
  return true;
}

void PinnedBlocks::collect() {
  for (auto it = by_address_.begin(); it != by_address_.end();) {
    drop_completed_uses(it->second);
    if (it->second.freed && it->second.uses.empty()) {
      events_.free_host(events_.context, reinterpret_cast<void*>(it->first));
      it = by_address_.erase(it);
    } else {
      ++it;
    }
  }
}

int64_t PinnedBlocks::pending_uses(const void* ptr) const {
  auto it = by_address_.find(reinterpret_cast<uintptr_t>(ptr));
  return it == by_address_.end() ? -1 : int64_t(it->second.uses.size());
}

}  // namespace tessera::gpu
