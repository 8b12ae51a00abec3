#pragma once
// Scratch memory of the vendor libraries (cuDNN, cuFFT, cuSOLVER) from the plugin's caching
// allocator, on the current stream.
#include "caching_allocator.h"
#include "gpu.h"

namespace tessera::gpu {

CachingAllocator& allocator();  // runtime.cpp: the plugin's one allocator

// Given back as soon as the work is queued, since the next user of the block on this stream is
// ordered after it. A failed allocation is not raised here (ok is false): cuDNN's caller tries
// an algorithm that needs less. A probe (may_release_cache false) does not empty the cache or
// count an out-of-memory when the workspace does not fit (CachingAllocator::allocate).
struct Workspace {
  void* ptr = nullptr;
  bool ok = true;
  Workspace(int32_t device, size_t bytes, gpuStream_t stream, bool may_release_cache = true) {
    if (!bytes) return;
    ptr = allocator().allocate(device, bytes, reinterpret_cast<uintptr_t>(stream), may_release_cache);
    ok = ptr != nullptr;
  }
  ~Workspace() {
    if (ptr) allocator().deallocate(ptr);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
};

}  // namespace tessera::gpu
