#pragma once
// Host-side pieces shared by the plugin's kernel families: the runtime state (is there a
// device, and if not, why), the current stream and device of each index, error checks that
// carry the runtime's own message, and the builders of the loops the .cu files run.
#include "launch.h"
#include "launch_shape.h"

#include <tessera/sdk/plugin.h>

#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tessera::gpu {

struct Workspace;  // workspace.h

namespace sdk = tessera::sdk;
using sdk::ScalarArg;
using sdk::TensorRef;

inline constexpr const char* kName = GPU_BACKEND_NAME;  // "cuda", or "hip" for the ROCm build

// Set once while the plugin registers.
struct Runtime {
  int32_t device_count = 0;
  std::string unavailable_reason;  // why device_count is 0 (the runtime's message), else empty
  ts_dispatch_key key = -1;        // our backend key; our device type id is the same number
};
Runtime& runtime();
// Probes the runtime (device count, or the reason there is none). Called once at registration.
void probe_runtime();
// Raises the "no device" error (with the runtime's reason) unless a device is present; `op`
// (may be null: the host adds the operator's name) starts the message.
void require_device(const char* op);
// Raises with `what` and the runtime's error string unless e is success.
void check(gpuError_t e, const char* what);

// streams.cpp. The calling thread's current stream of device `index` (set_current_stream; the
// default stream until set): every kernel, GEMM and copy queues its work there. The default
// stream (the NULL ts_stream) is made on first use.
gpuStream_t stream_for(int32_t index);
gpuStream_t default_stream(int32_t index);
// True when `ptr` is page-locked host memory (host_allocate, cudaHostAlloc/cudaHostRegister):
// copies between it and a device can be asynchronous.
bool is_pinned_host(const void* ptr);
// A copy between device `index` and host memory, queued on the current stream. It waits for
// the copy (pageable host memory may go away when we return) unless `non_blocking` and the
// host side is page-locked; a block from host_allocate then stays allocated until it is done.
void copy_host(int32_t index, void* dst, const void* src, size_t nbytes, decltype(gpuMemcpyHostToDevice) kind,
               bool non_blocking, const char* what);
// runtime.cpp. Events without timing from a per-device pool, recorded on `stream` (raises on
// failure): the marks of the allocator's stream-ordered frees and of pinned blocks in use.
gpuEvent_t record_pooled_event(int32_t device, gpuStream_t stream);
bool pooled_event_done(gpuEvent_t event);  // an error counts as done
void release_pooled_event(int32_t device, gpuEvent_t event);
// Fills the stream, event, record_stream and page-locked memory functions (ABI 1.3).
void add_stream_functions(ts_device_desc& d);

// kernel_spans.cpp. The profiler's view of the device (ABI 1.6): install_kernel_timer makes every
// kernel of this plugin record timing events while somebody observes; report_finished_kernel_spans
// passes the finished ones to the host (called when the device is synchronized).
void install_kernel_timer();
void report_finished_kernel_spans();

// A guard that makes `index` the thread's current device for its lifetime.
class DeviceGuard {
 public:
  explicit DeviceGuard(int32_t index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
 private:
  int32_t previous_ = -1;
};

// The device-memory callbacks of ts_device_desc (runtime.cpp), backed by the caching allocator.
ts_device_desc device_desc();

// ---- tensors and devices
bool is_ours(ts_device d);
std::string device_str(ts_device d);
// Every tensor on the same device of ours (the first one's); names `op`, the device, and the tensor.
ts_device common_device(const char* op, std::initializer_list<const TensorRef*> tensors);
// The device pointer of a tensor's first element.
inline char* first_element(const TensorRef& t) { return static_cast<char*>(t.data()); }

// The geometry of reducing `self` over the dims where `mask` is true: kept dims first, then the
// reduced ones (sizes and input strides); `out_shape` gets the result's shape (size-1 dims kept
// when keepdim). bind_reduction then points it at the input and the allocated output (reduce_ops.cpp).
Reduction plan_reduction(const char* op, const TensorRef& self, const std::vector<bool>& mask, bool keepdim,
                         std::vector<int64_t>& out_shape);
void bind_reduction(Reduction& r, const TensorRef& self, const TensorRef& out);
// Sets r.splits for device `index` (reduction_plan.h: several blocks per output when outputs are
// fewer than multiprocessors) and points r.partials at kept * splits slots of `partial_bytes`
// in `scratch` (caching allocator, current stream: keep it until the kernels are queued). No
// room: one block per output.
void split_reduction(Reduction& r, int32_t index, size_t partial_bytes, std::optional<Workspace>& scratch);
// Launches `r` on device `index` (current) and its current stream, split as above.
void run_reduction(ReduceOp op, Compute acc, Reduction r, int32_t index);
// The device's multiprocessor count (read once per device).
int32_t multiprocessor_count(int32_t index);
int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim);
std::vector<int64_t> contiguous_strides(std::span<const int64_t> shape);
using sdk::shape_text;  // "[2, 3]" in messages
std::vector<int64_t> broadcast_shapes(const char* op, std::span<const int64_t> a, std::span<const int64_t> b);
Compute compute_for(int32_t dtype);

// ---- loops: operands laid over `shape` (broadcast), dims coalesced, index width chosen.
// A nullptr operand is a Scalar (the kernel uses Loop::scalar_*).
Loop make_loop(const char* op, std::span<const int64_t> shape, std::initializer_list<const TensorRef*> operands);
// A new contiguous tensor on `device`.
TensorRef empty_on(ts_call call, std::span<const int64_t> shape, int32_t dtype, ts_device device);
// dst = src converted (broadcast src over dst); both on our device. Returns dst.
void copy_into(const char* op, const TensorRef& dst, const TensorRef& src);
TensorRef contiguous(ts_call call, const TensorRef& t, int32_t dtype);  // t itself when already so
// A view of `base` with a new geometry (no copy).
TensorRef restride(ts_call call, const TensorRef& base, std::span<const int64_t> shape,
                   std::span<const int64_t> strides, int64_t storage_offset);

// ---- bad indices found by kernels (nll_loss targets, embedding indices): a zeroed int64
// [flag, value] pair on `device`'s current stream; read_bad_index reads it back (waiting for
// the stream) and returns the value when the flag is set.
TensorRef bad_index_flag(ts_call call, ts_device device);
bool read_bad_index(const TensorRef& flag, int64_t& value);

// ---- kernel families
// The plugin's own operators ("cuda::<name>", "hip::<name>" in the ROCm build): they take no
// tensors, so each is one catch-all kernel that serves any key (memory_ops.cpp).
struct PluginOp {
  const char* name;
  const char* signature;  // after the name: "(int device=0) -> ()"
  sdk::KernelFn fn;
};
void register_plugin_ops(sdk::Registrar& reg, std::span<const PluginOp> ops);
void register_memory_ops(sdk::Registrar& reg);                         // memory_ops.cpp (cuda::*)
void register_graph_ops(sdk::Registrar& reg);                          // graph_ops.cpp (cuda::graph_*)
// graph_ops.cpp: raises (naming `op`) when `device`'s current stream is capturing a CUDA graph.
// Random kernels take their seed on the host, so a replay would repeat the capture's numbers.
void refuse_random_while_capturing(const char* op, ts_device device);
void register_copy_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // copy_ops.cpp
void register_view_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // views.cpp
void register_elementwise_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // elementwise_ops.cpp
void register_reduction_kernels(sdk::Registrar& reg, ts_dispatch_key key);    // reduce_ops.cpp
void register_blas_kernels(sdk::Registrar& reg, ts_dispatch_key key);         // blas.cpp
#if defined(TESSERA_HAS_CUDNN)
void register_conv_kernels(sdk::Registrar& reg, ts_dispatch_key key);         // conv_cudnn.cpp
void register_rnn_kernels(sdk::Registrar& reg, ts_dispatch_key key);          // rnn_cudnn.cpp
#endif
#if defined(TESSERA_HAS_CUFFT)
void register_fft_kernels(sdk::Registrar& reg, ts_dispatch_key key);          // fft_cufft.cpp
#endif
#if defined(TESSERA_HAS_CUSOLVER)
void register_linalg_kernels(sdk::Registrar& reg, ts_dispatch_key key);       // linalg_cusolver.cpp
#endif
#if defined(TESSERA_HAS_CUB)
void register_sort_kernels(sdk::Registrar& reg, ts_dispatch_key key);         // sort_cub.cu
#endif
void register_activation_kernels(sdk::Registrar& reg, ts_dispatch_key key);   // activation_ops.cpp
void register_pool_kernels(sdk::Registrar& reg, ts_dispatch_key key);         // pool_ops.cpp
void register_norm_kernels(sdk::Registrar& reg, ts_dispatch_key key);         // norm_ops.cpp
void register_attention_kernels(sdk::Registrar& reg, ts_dispatch_key key);    // attention_ops.cpp
void register_channel_norm_kernels(sdk::Registrar& reg, ts_dispatch_key key); // channel_norm_ops.cpp
void register_loss_kernels(sdk::Registrar& reg, ts_dispatch_key key);         // loss_ops.cpp
void register_embedding_kernels(sdk::Registrar& reg, ts_dispatch_key key);    // embedding_ops.cpp
void register_dropout_kernels(sdk::Registrar& reg, ts_dispatch_key key);      // dropout_ops.cpp
void register_optim_kernels(sdk::Registrar& reg, ts_dispatch_key key);        // optim_ops.cpp
// more_ops.cpp: element-wise (more), reductions (more), factories, indexing (see more_ops.h)
void register_more_kernels(sdk::Registrar& reg, ts_dispatch_key key);

// GEMM switches (blas.cpp), set by the cuda:: operators.
void set_allow_tf32(bool allow);
bool allow_tf32();
void set_use_vendor_blas(bool use);  // false: our tiled kernel (always the case on ROCm)
bool use_vendor_blas();

}  // namespace tessera::gpu
