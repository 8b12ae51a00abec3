// libtessera_cuda.so (libtessera_hip.so from the same sources): the entry point. The plugin
// loads on a machine without a driver or device: it registers the device with 0 devices, says
// why once (a warning with the runtime's message), and every request for memory fails with it.
#include "cuda_plugin.h"

namespace {
void register_gpu(tessera::sdk::Registrar& reg) {
  using namespace tessera::gpu;
  probe_runtime();
  ts_dispatch_key key = reg.device(device_desc());
  runtime().key = key;  // built-in device types ("cuda", "hip") have type id == backend key
  if (runtime().device_count == 0)
    tessera::sdk::host().warn(nullptr, tessera::sdk::cat(kName, ": ", runtime().unavailable_reason,
                                                         "; ", kName, " tensors cannot be created").c_str());
  register_memory_ops(reg);
  register_graph_ops(reg);
  register_copy_kernels(reg, key);
  register_view_kernels(reg, key);
  register_elementwise_kernels(reg, key);
  register_reduction_kernels(reg, key);
  register_blas_kernels(reg, key);
#if defined(TESSERA_HAS_CUDNN)
  register_conv_kernels(reg, key);  // else convolution runs on the CPU (the host's fallback)
  register_rnn_kernels(reg, key);   // else _rnn_layer too
#endif
  register_activation_kernels(reg, key);
  register_pool_kernels(reg, key);
  register_norm_kernels(reg, key);
  register_attention_kernels(reg, key);
  register_channel_norm_kernels(reg, key);
  register_loss_kernels(reg, key);
  register_embedding_kernels(reg, key);
  register_dropout_kernels(reg, key);
  register_optim_kernels(reg, key);
  register_more_kernels(reg, key);
  install_kernel_timer();  // kernel spans for the profiler, while somebody observes
  // NVIDIA's libraries (CUDA build only; the ROCm build runs these on the CPU through the fallback)
#if defined(TESSERA_HAS_CUFFT)
  register_fft_kernels(reg, key);
#endif
#if defined(TESSERA_HAS_CUSOLVER)
  register_linalg_kernels(reg, key);
#endif
#if defined(TESSERA_HAS_CUB)
  register_sort_kernels(reg, key);
#endif
}
}  // namespace

// Accepts any host of ABI 1.2 or later (catch-all kernels for the cuda:: operators).
TESSERA_PLUGIN(GPU_BACKEND_NAME, "0.1.0", 2, register_gpu)
