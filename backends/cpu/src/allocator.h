#pragma once
// Host memory for CPU tensors: 64-byte aligned, with a cache of large blocks so that big
// temporaries do not pay fresh page faults on every call.
#include <cstddef>

namespace tessera::cpu {

void* allocate(size_t nbytes);
void deallocate(void* ptr, size_t nbytes);
// Returns every cached block to the system.
void empty_cache();

}  // namespace tessera::cpu
