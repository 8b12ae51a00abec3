// The cuDNN pieces the plugin's cuDNN users share (cudnn_support.h).
#include "cudnn_support.h"

#include <mutex>
#include <vector>

namespace tessera::gpu {

void check_dnn(cudnnStatus_t s, const char* what) {
  TS_SDK_CHECK(s == CUDNN_STATUS_SUCCESS, s == CUDNN_STATUS_ALLOC_FAILED ? TS_ERROR_OUT_OF_MEMORY : TS_ERROR, kName,
               ": ", what, " failed: ", cudnnGetErrorString(s));
}

// ---- handles: one per (thread, device). A handle carries the stream it queues on, so a handle
// shared between threads would need a lock around set-stream + call (as cuBLAS's does); one per
// thread does not. When a thread ends its handles go back to a pool, not destroyed: creating
// one is costly and destroying at process exit can race the runtime's own teardown.
namespace {
struct HandlePool {
  std::mutex mutex;
  std::vector<std::vector<cudnnHandle_t>> free;  // per device
};
HandlePool& handle_pool() {
  static auto* pool = new HandlePool;  // kept for the process: thread exits may come after static destruction
  return *pool;
}
struct ThreadHandles {
  std::vector<cudnnHandle_t> by_device;
  ~ThreadHandles() {
    HandlePool& pool = handle_pool();
    std::lock_guard lock(pool.mutex);
    for (size_t d = 0; d < by_device.size(); ++d) {
      if (!by_device[d]) continue;
      if (pool.free.size() <= d) pool.free.resize(d + 1);
      pool.free[d].push_back(by_device[d]);
    }
  }
};
}  // namespace

cudnnHandle_t handle_for(int32_t index) {
  thread_local ThreadHandles mine;
  if (mine.by_device.size() <= size_t(index)) mine.by_device.resize(size_t(index) + 1, nullptr);
  cudnnHandle_t& h = mine.by_device[size_t(index)];
  if (!h) {
    HandlePool& pool = handle_pool();
    std::lock_guard lock(pool.mutex);
    if (size_t(index) < pool.free.size() && !pool.free[size_t(index)].empty()) {
      h = pool.free[size_t(index)].back();
      pool.free[size_t(index)].pop_back();
    }
  }
  if (!h) check_dnn(cudnnCreate(&h), "cudnnCreate");
  check_dnn(cudnnSetStream(h, stream_for(index)), "cudnnSetStream");
  return h;
}

cudnnDataType_t dnn_type(int32_t dtype) {
  switch (dtype) {
    case TS_FLOAT64: return CUDNN_DATA_DOUBLE;
    case TS_FLOAT16: return CUDNN_DATA_HALF;
    case TS_BFLOAT16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

}  // namespace tessera::gpu
