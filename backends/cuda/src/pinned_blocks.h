#pragma once
// The page-locked host blocks of host_allocate and the async copies that still use them: a block
// the host frees while a copy reads or writes it is freed once that copy's event completes. It
// knows nothing of CUDA (events and the host free are given), so the bookkeeping is testable on
// any machine (tests/cpp/test_cuda_pinned_blocks.cpp) and shared with the HIP build. Not
// synchronised itself: callers hold `mutex` around each use (copy_host keeps it across the check
// of a block and the copy it queues).
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace tessera::gpu {

struct PinnedEvents {
  bool (*done)(void* context, int32_t device, void* event) = nullptr;  // an error counts as done
  void (*release)(void* context, int32_t device, void* event) = nullptr;
  void (*free_host)(void* context, void* ptr) = nullptr;
  void* context = nullptr;
};

class PinnedBlocks {
 public:
  explicit PinnedBlocks(PinnedEvents events) : events_(events) {}
  PinnedBlocks(const PinnedBlocks&) = delete;
  PinnedBlocks& operator=(const PinnedBlocks&) = delete;

  std::mutex mutex;

  // A block just allocated (page-locked, `size` bytes at `ptr`).
  void add(void* ptr, size_t size);
  // True when [ptr, ptr + nbytes) lies inside one live (not freed) block.
  bool holds(const void* ptr, size_t nbytes) const;
  // A copy touching the block at `ptr` was queued; `event` completes after it. The block's
  // completed uses are dropped first, so a long-lived block used for many copies holds only the
  // events of the copies still in flight.
  void add_use(const void* ptr, int32_t device, void* event);
  // The host frees the block at `ptr`: now, or once the copies using it are done. False when it
  // is not one of these blocks.
  bool free(void* ptr);
  // Drops the completed uses of every block; frees the freed blocks nothing uses any more.
  void collect();
  // The events a block holds (its copies not yet seen completed); -1 when it is not a block.
  int64_t pending_uses(const void* ptr) const;
  size_t size() const { return by_address_.size(); }

 private:
  struct Block {
    size_t size;
    bool freed = false;
    std::vector<std::pair<int32_t, void*>> uses;  // (device, event after the copy)
  };
  using Blocks = std::map<uintptr_t, Block>;
  Blocks::iterator block_at(const void* ptr, size_t nbytes);
  Blocks::const_iterator block_at(const void* ptr, size_t nbytes) const;
  void drop_completed_uses(Block& b);

  PinnedEvents events_;
  Blocks by_address_;
};

}  // namespace tessera::gpu
