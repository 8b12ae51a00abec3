// native_layer_norm and its backward: one block per row, the row's sums combined in shared
// memory, in double (the CPU plugin's precision) whatever the dtype; grad_weight / grad_bias
// one thread per column summing over the rows in order (no atomics: reproducible).
#include "device_io.cuh"
#include "row_kernels.cuh"
#include "nn_launch.h"
#include "reduction_plan.h"

#include <cmath>

namespace tessera::gpu {
namespace {


__global__ void layer_norm_forward(LayerNormArgs a) {
  for (int64_t row = blockIdx.x; row < a.m; row += gridDim.x) {
    const int64_t first = row * a.n;
    double s = 0;
    for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x) s += at(a.x, a.x_dtype, first + j);
    const double mu = a.n ? block_sum(s) / double(a.n) : 0.0;
    double q = 0;
    for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x) {
      const double d = at(a.x, a.x_dtype, first + j) - mu;
      q += d * d;
    }
    const double var = a.n ? block_sum(q) / double(a.n) : 0.0;
    const double rs = 1.0 / sqrt(var + a.eps);
    for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x) {
      double v = (at(a.x, a.x_dtype, first + j) - mu) * rs;
      if (a.weight) v *= at(a.weight, a.w_dtype, j);
      if (a.bias) v += at(a.bias, a.b_dtype, j);
      put(a.out, a.out_dtype, first + j, v);
    }
    if (threadIdx.x == 0) {
      put(a.mean, a.stat_dtype, row, mu);
      put(a.rstd, a.stat_dtype, row, rs);
    }
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
__global__ void layer_norm_backward_rows(LayerNormArgs a) {
  for (int64_t row = blockIdx.x; row < a.m; row += gridDim.x) {
    const int64_t first = row * a.n;
    const double mu = at(a.mean, a.stat_dtype, row), rs = at(a.rstd, a.stat_dtype, row);
    double sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x) {
      const double g = at(a.grad, a.grad_dtype, first + j) * (a.weight ? at(a.weight, a.w_dtype, j) : 1.0);
      sg += g;
      sgx += g * (at(a.x, a.x_dtype, first + j) - mu) * rs;
    }
    const double c1 = block_sum(sg) / double(a.n), c2 = block_sum(sgx) / double(a.n);
    for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x) {
      const double g = at(a.grad, a.grad_dtype, first + j) * (a.weight ? at(a.weight, a.w_dtype, j) : 1.0);
      const double xh = (at(a.x, a.x_dtype, first + j) - mu) * rs;
      put(a.out, a.out_dtype, first + j, rs * (g - c1 - xh * c2));
    }
  }
}

// The column sums of rows [r0, r1) for column j: sum of g * xhat (grad_weight) and of g.
GPU_D void column_sums(const LayerNormArgs& a, int64_t j, int64_t r0, int64_t r1, double& sw, double& sb) {
  sw = 0, sb = 0;
  for (int64_t row = r0; row < r1; ++row) {
    const double g = at(a.grad, a.grad_dtype, row * a.n + j);
    sb += g;
    if (a.grad_weight)
      sw += g * (at(a.x, a.x_dtype, row * a.n + j) - at(a.mean, a.stat_dtype, row)) * at(a.rstd, a.stat_dtype, row);
  }
}

GPU_D void put_column(const LayerNormArgs& a, int64_t j, double sw, double sb) {
  if (a.grad_weight) put(a.grad_weight, a.gw_dtype, j, sw);
  if (a.grad_bias) put(a.grad_bias, a.gb_dtype, j, sb);
}

// One pass: one thread per column over every row (enough columns to fill the device).
__global__ void layer_norm_backward_columns(LayerNormArgs a) {
  grid_stride_loop(int64_t(blockIdx.x) * blockDim.x + threadIdx.x, int64_t(gridDim.x) * blockDim.x, a.n,
                   [&](int64_t j) {
                     double sw, sb;
                     column_sums(a, j, 0, a.m, sw, sb);
                     put_column(a, j, sw, sb);
                   });
}

// Split pass 1: blockIdx.y walks the row chunks, threads the columns (neighbouring threads read
// neighbouring elements of a row).
__global__ void layer_norm_backward_column_chunks(LayerNormArgs a) {
  const int64_t chunk = reduction_chunk(a.m, a.row_splits);
  for (int64_t s = blockIdx.y; s < a.row_splits; s += gridDim.y) {
    const int64_t r0 = s * chunk, r1 = r0 + chunk < a.m ? r0 + chunk : a.m;
    grid_stride_loop(int64_t(blockIdx.x) * blockDim.x + threadIdx.x, int64_t(gridDim.x) * blockDim.x, a.n,
                     [&](int64_t j) {
                       double sw, sb;
                       column_sums(a, j, r0, r1, sw, sb);
                       a.column_partials[s * a.n + j] = sw;
                       a.column_partials[(a.row_splits + s) * a.n + j] = sb;
                     });
  }
}

// Split pass 2: each column adds its chunks in order (reproducible).
__global__ void layer_norm_backward_column_totals(LayerNormArgs a) {
  grid_stride_loop(int64_t(blockIdx.x) * blockDim.x + threadIdx.x, int64_t(gridDim.x) * blockDim.x, a.n,
                   [&](int64_t j) {
                     double sw = 0, sb = 0;
                     for (int64_t s = 0; s < a.row_splits; ++s) {
                       sw += a.column_partials[s * a.n + j];
                       sb += a.column_partials[(a.row_splits + s) * a.n + j];
                     }
                     put_column(a, j, sw, sb);
                   });
}

}  // namespace

void launch_layer_norm(const LayerNormArgs& a, gpuStream_t s) {
  if (a.m == 0) return;
  layer_norm_forward<<<rows_grid(a.m), threads_for(a.n), 0, s>>>(a);
  check_launch("native_layer_norm");
}

void launch_layer_norm_backward(const LayerNormArgs& a, gpuStream_t s) {
  if (a.m > 0 && a.n > 0) {
    layer_norm_backward_rows<<<rows_grid(a.m), threads_for(a.n), 0, s>>>(a);
    check_launch("native_layer_norm_backward");
  }
  if ((a.grad_weight || a.grad_bias) && a.n > 0) {
    if (a.row_splits > 1 && a.column_partials) {
      const dim3 grid(blocks_for(a.n), unsigned(a.row_splits < kMaxGridYZ ? a.row_splits : kMaxGridYZ));
      layer_norm_backward_column_chunks<<<grid, kThreads, 0, s>>>(a);
      check_launch("native_layer_norm_backward (column chunks)");
      layer_norm_backward_column_totals<<<blocks_for(a.n), kThreads, 0, s>>>(a);
    } else {
      layer_norm_backward_columns<<<blocks_for(a.n), kThreads, 0, s>>>(a);
    }
    check_launch("native_layer_norm_backward");
  }
}

}  // namespace tessera::gpu
