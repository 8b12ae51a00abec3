// Scans along one dim of a contiguous [outer, n, inner] tensor: cumsum/cumprod (accumulated in
// double or int64, as the CPU plugin) and cummax/cummin (value and index). Each column is one
// thread running the n steps in order, so the results match the CPU's bit for bit; a long row
// with inner == 1 (few columns to spread) is instead one block: each thread scans its chunk,
// then adds the totals of the chunks before it.
#include "device_io.cuh"
#include "order_launch.h"

#include <type_traits>

namespace tessera::gpu {
namespace {

template <class A> GPU_D A combine(A x, A y, bool product) { return product ? x * y : x + y; }

template <class A>
__global__ void scan_columns(ScanArgs a, bool product) {
  const int64_t cols = a.outer * a.inner, size = itemsize_of(a.dtype);
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (c / a.inner) * a.n * a.inner + c % a.inner;
    A acc = A(product ? 1 : 0);
    for (int64_t i = 0; i < a.n; ++i) {
      const int64_t k = (base + i * a.inner) * size;
      acc = combine(acc, load<A>(a.in + k, a.dtype), product);
      store<A>(a.out + k, a.dtype, acc);
    }
  }
}

template <class A>
__global__ void scan_long_rows(ScanArgs a, bool product) {
  __shared__ A before[kThreads];  // per thread: the total of the chunks before its own
  const int64_t size = itemsize_of(a.dtype), chunk = (a.n + blockDim.x - 1) / blockDim.x;
  const int64_t begin = min(a.n, int64_t(threadIdx.x) * chunk), end = min(a.n, begin + chunk);
  for (int64_t row = blockIdx.x; row < a.outer; row += gridDim.x) {
    const char* in = a.in + row * a.n * size;
    char* out = a.out + row * a.n * size;
    A acc = A(product ? 1 : 0);
    for (int64_t i = begin; i < end; ++i) acc = combine(acc, load<A>(in + i * size, a.dtype), product);
    before[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {  // exclusive scan of the chunk totals (blockDim.x of them)
      A run = A(product ? 1 : 0);
      for (unsigned t = 0; t < blockDim.x; ++t) {
        const A total = before[t];
        before[t] = run;
        run = combine(run, total, product);
      }
    }
    __syncthreads();
    acc = before[threadIdx.x];
    for (int64_t i = begin; i < end; ++i) {
      acc = combine(acc, load<A>(in + i * size, a.dtype), product);
      store<A>(out + i * size, a.dtype, acc);
    }
    __syncthreads();  // `before` is reused by the next row
  }
}

template <class C>
__global__ void scan_extreme(ScanArgs a, bool max) {
  const int64_t cols = a.outer * a.inner, size = itemsize_of(a.dtype);
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (c / a.inner) * a.n * a.inner + c % a.inner;
    C best = load<C>(a.in + base * size, a.dtype);
    int64_t at = 0;
    for (int64_t i = 0; i < a.n; ++i) {
      const int64_t k = base + i * a.inner;
      const C x = load<C>(a.in + k * size, a.dtype);
      const bool x_nan = x != x, best_nan = best != best;
      if (x_nan || (!best_nan && (max ? x >= best : x <= best))) {  // ties move to the later index
        best = x;
        at = i;
      }
      store<C>(a.out + k * size, a.dtype, best);
      a.indices[k] = at;
    }
  }
}

template <class A> void run_sum_prod(const ScanArgs& a, bool product, gpuStream_t s) {
  const int64_t cols = a.outer * a.inner;
  // A long row and too few rows to fill the device one thread each: a block per row instead.
  if (a.inner == 1 && a.n >= 1024 && a.outer < 4096)
    scan_long_rows<A><<<unsigned(a.outer < 65535 ? a.outer : 65535), kThreads, 0, s>>>(a, product);
  else
    scan_columns<A><<<blocks_for(cols), kThreads, 0, s>>>(a, product);
}
}  // namespace

void launch_scan(ScanOp op, Compute acc, const ScanArgs& a, gpuStream_t s) {
  if (a.outer * a.n * a.inner == 0) return;
  const bool product = op == ScanOp::Prod;
  if (op == ScanOp::Sum || op == ScanOp::Prod) {
    if (acc == Compute::Int64) run_sum_prod<int64_t>(a, product, s);
    else run_sum_prod<double>(a, product, s);
  } else {
    const unsigned grid = blocks_for(a.outer * a.inner);
    const bool max = op == ScanOp::Max;
    switch (acc) {
      case Compute::Float: scan_extreme<float><<<grid, kThreads, 0, s>>>(a, max); break;
      case Compute::Double: scan_extreme<double><<<grid, kThreads, 0, s>>>(a, max); break;
      case Compute::Int64: scan_extreme<int64_t><<<grid, kThreads, 0, s>>>(a, max); break;
    }
  }
  check_launch("a scan");
}

}  // namespace tessera::gpu
