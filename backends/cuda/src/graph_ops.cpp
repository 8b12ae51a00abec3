// CUDA graphs (torch.cuda.CUDAGraph) as the plugin's operators: capture the work queued on the
// thread's current stream into a graph, instantiate it, replay it with one launch, release it.
// While a stream captures, its allocations come from a private pool of the caching allocator
// (caching_allocator.h), so the addresses baked into the graph stay the graph's after capture.
//
//   cuda::graph_capture_begin(pool, mode) -> id   on the current device's current stream
//   cuda::graph_capture_end(id) -> nodes          instantiates; raises when the capture failed
//   cuda::graph_replay(id)                        on the current stream of the graph's device
//   cuda::graph_reset(id)                         frees the graph (aborts a capture underway)
//   cuda::graph_pool_handle() -> pool, cuda::graph_pool(id) -> pool, cuda::is_current_stream_capturing()
#include "caching_allocator.h"
#include "cuda_plugin.h"

#include <mutex>
#include <string_view>
#include <unordered_map>

namespace tessera::gpu {

CachingAllocator& allocator();  // runtime.cpp

namespace {

struct CapturedGraph {
  int32_t device = 0;
  gpuStream_t stream = nullptr;  // the stream it was captured on
  uint64_t pool = 0;             // the allocator's private pool its memory comes from
  gpuGraph_t graph = nullptr;
  gpuGraphExec_t exec = nullptr;  // set once the capture ended and the graph was instantiated
};

struct GraphRegistry {
  std::mutex mutex;
  std::unordered_map<int64_t, CapturedGraph> by_id;
  int64_t next_id = 1;
};
GraphRegistry& registry() {
  static GraphRegistry* r = new GraphRegistry;  // never destroyed: graphs may outlive static destructors
  return *r;
}

CapturedGraph find_graph(int64_t id) {
  GraphRegistry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.by_id.find(id);
  TS_SDK_CHECK(it != r.by_id.end(), TS_ERROR_VALUE, "no CUDA graph with id ", id, " (it was reset or never captured)");
  return it->second;
}

// Removes the graph and gives back what it holds; a capture still underway is ended and discarded.
void destroy_graph(const CapturedGraph& g) {
  DeviceGuard guard(g.device);
  if (!g.exec) {
    gpuStreamCaptureStatus status = gpuStreamCaptureStatusNone;
    if (gpuStreamIsCapturing(g.stream, &status) == gpuSuccess && status != gpuStreamCaptureStatusNone) {
      gpuGraph_t partial = nullptr;
      (void)gpuStreamEndCapture(g.stream, &partial);
      if (partial) (void)gpuGraphDestroy(partial);
    }
    (void)gpuGetLastError();
    allocator().end_allocate_to_pool(g.device, reinterpret_cast<uintptr_t>(g.stream));
  }
  if (g.exec) (void)gpuGraphExecDestroy(g.exec);
  if (g.graph) (void)gpuGraphDestroy(g.graph);
  allocator().release_pool(g.pool);
}

gpuStreamCaptureMode capture_mode(std::string_view mode) {
  if (mode == "global") return gpuStreamCaptureModeGlobal;
  if (mode == "thread_local") return gpuStreamCaptureModeThreadLocal;
  if (mode == "relaxed") return gpuStreamCaptureModeRelaxed;
  sdk::fail(TS_ERROR_VALUE, "capture_error_mode must be 'global', 'thread_local' or 'relaxed', got '", mode, "'");
}

int32_t current_device_index() {
  require_device(nullptr);
  int d = 0;
  check(gpuGetDevice(&d), "current_device");
  return d;
}

bool capturing(gpuStream_t stream) {
  gpuStreamCaptureStatus status = gpuStreamCaptureStatusNone;
  check(gpuStreamIsCapturing(stream, &status), "querying the stream's capture status");
  return status != gpuStreamCaptureStatusNone;
}

void capture_begin_k(sdk::Args& a) {
  const int64_t pool_arg = a.to_int(0);
  const gpuStreamCaptureMode mode = capture_mode(a.optional_str(1).value_or("global"));
  TS_SDK_CHECK(pool_arg >= 0, TS_ERROR_VALUE, "expected a pool handle from graph_pool_handle() (>= 1) or 0, got ",
               pool_arg);
  const int32_t device = current_device_index();
  gpuStream_t stream = stream_for(device);
  TS_SDK_CHECK(!capturing(stream), TS_ERROR, "the current stream is already capturing a graph");
  const uint64_t pool = pool_arg > 0 ? uint64_t(pool_arg) : allocator().create_pool();
  TS_SDK_CHECK(allocator().begin_allocate_to_pool(device, reinterpret_cast<uintptr_t>(stream), pool), TS_ERROR,
               "the current stream already allocates into a graph's pool");
  const gpuError_t e = gpuStreamBeginCapture(stream, mode);
  if (e != gpuSuccess) {
    allocator().end_allocate_to_pool(device, reinterpret_cast<uintptr_t>(stream));
    allocator().release_pool(pool);
    check(e, "beginning a graph capture");
  }
  GraphRegistry& r = registry();
  std::lock_guard lock(r.mutex);
  const int64_t id = r.next_id++;
  r.by_id[id] = CapturedGraph{device, stream, pool, nullptr, nullptr};
  a.returns({sdk::value(id)});
}

void capture_end_k(sdk::Args& a) {
  const int64_t id = a.to_int(0);
  CapturedGraph g = find_graph(id);
  TS_SDK_CHECK(!g.exec, TS_ERROR, "the graph's capture has already ended");
  DeviceGuard guard(g.device);
  gpuGraph_t graph = nullptr;
  gpuError_t e = gpuStreamEndCapture(g.stream, &graph);
  allocator().end_allocate_to_pool(g.device, reinterpret_cast<uintptr_t>(g.stream));
  g.graph = graph;
  gpuGraphExec_t exec = nullptr;
  if (e == gpuSuccess && graph) e = gpuGraphInstantiateWithFlags(&exec, graph, 0);
  if (e != gpuSuccess || !exec) {
    const std::string why = e == gpuSuccess ? std::string("no graph was captured")
                                            : sdk::cat(gpuGetErrorName(e), " (", gpuGetErrorString(e), ")");
    (void)gpuGetLastError();
    g.exec = nullptr;
    {
      GraphRegistry& r = registry();
      std::lock_guard lock(r.mutex);
      r.by_id.erase(id);
    }
    if (g.graph) (void)gpuGraphDestroy(g.graph);
    allocator().release_pool(g.pool);
    sdk::fail(TS_ERROR, "the graph capture failed: ", why,
              ". Something in the captured region is not allowed during capture: a synchronisation, a read of "
              "device data on the host (item(), printing), a copy from pageable host memory, or work forked to "
              "another stream and not joined back");
  }
  g.exec = exec;
  size_t nodes = 0;
  (void)gpuGraphGetNodes(graph, nullptr, &nodes);
  {
    GraphRegistry& r = registry();
    std::lock_guard lock(r.mutex);
    r.by_id[id] = g;
  }
  a.returns({sdk::value(int64_t(nodes))});
}

void replay_k(sdk::Args& a) {
  const CapturedGraph g = find_graph(a.to_int(0));
  TS_SDK_CHECK(g.exec, TS_ERROR, "the graph is still being captured: end the capture before replaying it");
  DeviceGuard guard(g.device);
  check(gpuGraphLaunch(g.exec, stream_for(g.device)), "replaying a graph");
  a.returns({});
}

void reset_k(sdk::Args& a) {
  const int64_t id = a.to_int(0);
  CapturedGraph g;
  {
    GraphRegistry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.by_id.find(id);
    if (it == r.by_id.end()) return a.returns({});  // reset twice: nothing left
    g = it->second;
    r.by_id.erase(it);
  }
  destroy_graph(g);
  a.returns({});
}

void pool_handle_k(sdk::Args& a) { a.returns({sdk::value(int64_t(allocator().create_pool()))}); }
void graph_pool_k(sdk::Args& a) { a.returns({sdk::value(int64_t(find_graph(a.to_int(0)).pool))}); }

void is_capturing_k(sdk::Args& a) {
  bool any = false;
  if (runtime().device_count > 0) {
    int d = 0;
    check(gpuGetDevice(&d), "current_device");
    any = capturing(stream_for(d));
  }
  a.returns({sdk::value(any)});
}

}  // namespace

void refuse_random_while_capturing(const char* op, ts_device device) {
  if (!allocator().capture_underway()) return;  // the common case costs one lock
  gpuStreamCaptureStatus status = gpuStreamCaptureStatusNone;
  if (gpuStreamIsCapturing(stream_for(device.index), &status) != gpuSuccess) (void)gpuGetLastError();
  TS_SDK_CHECK(status == gpuStreamCaptureStatusNone, TS_ERROR_NOT_IMPLEMENTED, op,
               ": random numbers cannot be captured into a CUDA graph yet (the seed would be fixed at capture, so "
               "every replay would repeat them); generate them outside the graph and pass them in");
}

void register_graph_ops(sdk::Registrar& reg) {
  const PluginOp ops[] = {
      {"graph_capture_begin", "(int pool=0, str capture_error_mode=\"global\") -> int", capture_begin_k},
      {"graph_capture_end", "(int graph) -> int", capture_end_k},
      {"graph_replay", "(int graph) -> ()", replay_k},
      {"graph_reset", "(int graph) -> ()", reset_k},
      {"graph_pool_handle", "() -> int", pool_handle_k},
      {"graph_pool", "(int graph) -> int", graph_pool_k},
      {"is_current_stream_capturing", "() -> bool", is_capturing_k},
  };
  register_plugin_ops(reg, ops);
}

}  // namespace tessera::gpu
