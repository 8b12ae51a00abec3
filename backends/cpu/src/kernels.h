#pragma once
// The CPU plugin's kernel families. Each registers its kernels under `key` (the CPU key).
#include <tessera/sdk/plugin.h>

namespace tessera::cpu {

void register_factory_kernels(sdk::Registrar& reg, ts_dispatch_key key);      // factories.cpp, random.cpp
void register_copy_kernels(sdk::Registrar& reg, ts_dispatch_key key);         // copy.cpp
void register_unary_kernels(sdk::Registrar& reg, ts_dispatch_key key);        // unary.cpp
void register_binary_kernels(sdk::Registrar& reg, ts_dispatch_key key);       // binary.cpp, compare.cpp
void register_binary_math_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // binary_math.cpp
void register_sort_scan_kernels(sdk::Registrar& reg, ts_dispatch_key key);    // sort.cpp, scan.cpp
void register_reduction_kernels(sdk::Registrar& reg, ts_dispatch_key key);    // reduce.cpp, softmax.cpp
void register_shape_kernels(sdk::Registrar& reg, ts_dispatch_key key);        // shape.cpp, join.cpp
void register_index_kernels(sdk::Registrar& reg, ts_dispatch_key key);        // index.cpp
void register_advanced_index_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // advanced_index.cpp
void register_linalg_kernels(sdk::Registrar& reg, ts_dispatch_key key);       // linalg.cpp
void register_lapack_kernels(sdk::Registrar& reg, ts_dispatch_key key);       // linalg_lapack.cpp
void register_fft_kernels(sdk::Registrar& reg, ts_dispatch_key key);           // fft.cpp
void register_conv_pool_kernels(sdk::Registrar& reg, ts_dispatch_key key);    // nn_conv*.cpp, nn_pool*.cpp
void register_rnn_kernels(sdk::Registrar& reg, ts_dispatch_key key);          // nn_rnn.cpp
void register_optim_kernels(sdk::Registrar& reg, ts_dispatch_key key);        // optim_fused.cpp
void register_normalization_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // nn_norm*.cpp, nn_dropout.cpp, nn_embedding.cpp
void register_activation_loss_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // nn_activation*.cpp, nn_loss*.cpp
void register_attention_kernels(sdk::Registrar& reg, ts_dispatch_key key);    // nn_attention.cpp
void register_linear_epilogue(sdk::Registrar& reg, ts_dispatch_key key);      // linear_epilogue.cpp (cpu::)

// The device type id of "cpu" (always 0).
inline constexpr ts_device kCpuDevice{0, 0};

// Row-major C[m, n] = alpha * op(A) @ op(B) + beta * C through oneDNN's sgemm (threaded inside);
// ta / tb are 'N' or 'T'. Raises naming `op` when oneDNN fails (nn_attention.cpp).
void sgemm(const char* op, char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace tessera::cpu
