// The CPU backend: a device plugin built on the C ABI alone.
#include "allocator.h"
#include "kernels.h"
#include "tensor_iterator.h"

#include <cstring>

namespace tessera::cpu {
namespace {

int32_t device_count(void*) { return 1; }
void* allocate_cb(void*, int32_t, size_t nbytes) { return allocate(nbytes); }
void deallocate_cb(void*, int32_t, void* ptr, size_t nbytes) { deallocate(ptr, nbytes); }
ts_status copy_cb(void*, int32_t, void* dst, const void* src, size_t nbytes) {
  if (nbytes) std::memmove(dst, src, nbytes);
  return TS_OK;
}

void register_cpu(sdk::Registrar& reg) {
  install_fork_handler();
  ts_device_desc desc{};
  desc.struct_size = sizeof desc;
  desc.name = "cpu";
  desc.host_accessible = 1;
  desc.device_count = device_count;
  desc.allocate = allocate_cb;
  desc.deallocate = deallocate_cb;
  desc.copy_to_host = copy_cb;
  desc.copy_from_host = copy_cb;
  desc.copy_within = copy_cb;
  ts_dispatch_key key = reg.device(desc);
  register_factory_kernels(reg, key);
  register_copy_kernels(reg, key);
  register_unary_kernels(reg, key);
  register_binary_kernels(reg, key);
  register_binary_math_kernels(reg, key);
  register_sort_scan_kernels(reg, key);
  register_reduction_kernels(reg, key);
  register_shape_kernels(reg, key);
  register_index_kernels(reg, key);
  register_advanced_index_kernels(reg, key);
  register_linalg_kernels(reg, key);
  register_lapack_kernels(reg, key);
  register_fft_kernels(reg, key);
  register_conv_pool_kernels(reg, key);
  register_rnn_kernels(reg, key);
  register_optim_kernels(reg, key);
  register_normalization_kernels(reg, key);
  register_activation_loss_kernels(reg, key);
  register_attention_kernels(reg, key);
  register_linear_epilogue(reg, key);
}

}  // namespace
}  // namespace tessera::cpu

TESSERA_PLUGIN("cpu", "0.1.0", 0, tessera::cpu::register_cpu)
