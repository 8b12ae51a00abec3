// Reductions (sum/max/min over any set of dims) and softmax/log_softmax: one block per output
// (or, with few outputs, several blocks per output and a second pass: Reduction::splits),
// threads stride over the reduced elements and combine in shared memory.
#include "device_io.cuh"
#include "reduction_plan.h"
#include "row_kernels.cuh"

#include <cfloat>
#include <cmath>
#include <type_traits>

namespace tessera::gpu {
namespace {

template <class A> GPU_D A lowest() {
  if constexpr (std::is_same_v<A, float>) return -INFINITY;
  else if constexpr (std::is_same_v<A, double>) return -HUGE_VAL;
  else return INT64_MIN;
}
template <class A> GPU_D A highest() {
  if constexpr (std::is_same_v<A, float>) return INFINITY;
  else if constexpr (std::is_same_v<A, double>) return HUGE_VAL;
  else return INT64_MAX;
}
template <class A> GPU_D bool is_nan(A v) { return v != v; }

template <class A> GPU_D A combine(ReduceOp op, A a, A b) {
  switch (op) {
    case ReduceOp::Sum: return a + b;
    case ReduceOp::Max: return is_nan(a) || a > b ? a : b;  // NaN propagates, as in PyTorch
    default: return is_nan(a) || a < b ? a : b;
  }
}
template <class A> GPU_D A identity(ReduceOp op) {
  return op == ReduceOp::Sum ? A(0) : op == ReduceOp::Max ? lowest<A>() : highest<A>();
}

// Block-wide combine of one value per thread; the result is valid in thread 0.
template <class A, class F> GPU_D A block_combine(A v, F f) {
  __shared__ char raw[kThreads * sizeof(double)];
  A* buf = reinterpret_cast<A*>(raw);
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = f(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  A r = buf[0];
  __syncthreads();  // buf is reused by the next call
  return r;
}

// op over elements [k0, k1) of output m's reduced range, thread-strided (neighbouring threads
// read neighbouring elements of the innermost reduced dim); the result is valid in thread 0.
template <class A>
GPU_D A reduce_range(const Reduction& r, ReduceOp op, int64_t m, int64_t k0, int64_t k1) {
  int64_t base = 0, rest = m;
  for (int d = r.ndim_kept - 1; d >= 0; --d) {
    base += (rest % r.sizes[d]) * r.in.strides[d];
    rest /= r.sizes[d];
  }
  A acc = identity<A>(op);
  for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
    int64_t off = base;
    rest = k;
    for (int d = r.ndim_kept + r.ndim_reduced - 1; d >= r.ndim_kept; --d) {
      off += (rest % r.sizes[d]) * r.in.strides[d];
      rest /= r.sizes[d];
    }
    acc = combine(op, acc, load<A>(r.in.data + off * r.in.itemsize, r.in.dtype));
  }
  return block_combine(acc, [op](A a, A b) { return combine(op, a, b); });
}

template <class A> GPU_D void store_result(const Reduction& r, int64_t m, A acc) {
  if (r.scale != 1.0) acc = A(double(acc) * r.scale);
  store<A>(r.out.data + m * r.out.itemsize, r.out.dtype, acc);
}

// One block per output.
template <class A>
__global__ void reduce_kernel(Reduction r, ReduceOp op) {
  for (int64_t m = blockIdx.x; m < r.kept; m += gridDim.x) {
    A acc = reduce_range<A>(r, op, m, 0, r.reduced);
    if (threadIdx.x == 0) store_result(r, m, acc);
  }
}

// Split pass 1: block job = (m, s) reduces split s of output m into its partial.
template <class A>
__global__ void reduce_splits_kernel(Reduction r, ReduceOp op) {
  const int64_t chunk = reduction_chunk(r.reduced, r.splits);
  for (int64_t job = blockIdx.x; job < r.kept * r.splits; job += gridDim.x) {
    const int64_t m = job / r.splits, k0 = job % r.splits * chunk;
    A acc = reduce_range<A>(r, op, m, k0, k0 + chunk < r.reduced ? k0 + chunk : r.reduced);
    if (threadIdx.x == 0) reinterpret_cast<A*>(r.partials)[job] = acc;
  }
}

// Split pass 2: one block per output combines its splits (a fixed order: reproducible).
template <class A>
__global__ void combine_splits_kernel(Reduction r, ReduceOp op) {
  const A* partials = reinterpret_cast<const A*>(r.partials);
  for (int64_t m = blockIdx.x; m < r.kept; m += gridDim.x) {
    A acc = identity<A>(op);
    for (int64_t s = threadIdx.x; s < r.splits; s += blockDim.x) acc = combine(op, acc, partials[m * r.splits + s]);
    acc = block_combine(acc, [op](A a, A b) { return combine(op, a, b); });
    if (threadIdx.x == 0) store_result(r, m, acc);
  }
}

template <class A> void launch_reduce_as(ReduceOp op, const Reduction& r, gpuStream_t s) {
  const unsigned threads = threads_for(r.reduced);
  if (r.splits <= 1 || !r.partials) {
    reduce_kernel<A><<<rows_grid(r.kept), threads, 0, s>>>(r, op);
    return;
  }
  reduce_splits_kernel<A><<<rows_grid(r.kept * r.splits), threads, 0, s>>>(r, op);
  check_launch("a reduction's first pass");
  combine_splits_kernel<A><<<rows_grid(r.kept), threads_for(r.splits), 0, s>>>(r, op);
}

template <class A>
__global__ void softmax_kernel(SoftmaxArgs a) {
  int32_t isz = itemsize_of(a.in_dtype), osz = itemsize_of(a.out_dtype);
  for (int64_t row = blockIdx.x; row < a.outer * a.inner; row += gridDim.x) {
    int64_t o = row / a.inner, i = row % a.inner;
    int64_t first = o * a.dim * a.inner + i;  // element offset of the row's first element
    auto in_at = [&](int64_t j) { return load<A>(a.in + (first + j * a.inner) * isz, a.in_dtype); };
    A mx = lowest<A>();
    for (int64_t j = threadIdx.x; j < a.dim; j += blockDim.x) mx = combine(ReduceOp::Max, mx, in_at(j));
    mx = block_combine(mx, [](A x, A y) { return combine(ReduceOp::Max, x, y); });
    A sum = 0;
    for (int64_t j = threadIdx.x; j < a.dim; j += blockDim.x) sum += exp(in_at(j) - mx);
    sum = block_combine(sum, [](A x, A y) { return x + y; });
    A log_sum = log(sum);
    for (int64_t j = threadIdx.x; j < a.dim; j += blockDim.x) {
      A x = in_at(j) - mx;
      store<A>(a.out + (first + j * a.inner) * osz, a.out_dtype, a.log ? x - log_sum : exp(x) / sum);
    }
  }
}

// Split softmax, pass 1: block job = (row, s) leaves the max of elements [j0, j1) and the sum of
// their exp(x - max) (0 when the max is -inf: those elements add nothing; NaN propagates).
template <class A>
__global__ void softmax_split_stats(SoftmaxArgs a) {
  const int32_t isz = itemsize_of(a.in_dtype);
  const int64_t chunk = reduction_chunk(a.dim, a.splits);
  for (int64_t job = blockIdx.x; job < a.outer * a.inner * a.splits; job += gridDim.x) {
    const int64_t row = job / a.splits, j0 = job % a.splits * chunk, j1 = j0 + chunk < a.dim ? j0 + chunk : a.dim;
    const int64_t first = row / a.inner * a.dim * a.inner + row % a.inner;
    auto in_at = [&](int64_t j) { return load<A>(a.in + (first + j * a.inner) * isz, a.in_dtype); };
    A mx = lowest<A>();
    for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) mx = combine(ReduceOp::Max, mx, in_at(j));
    mx = block_combine(mx, [](A x, A y) { return combine(ReduceOp::Max, x, y); });
    A sum = 0;
    if (!(mx == lowest<A>()))
      for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) sum += exp(in_at(j) - mx);
    sum = block_combine(sum, [](A x, A y) { return x + y; });
    if (threadIdx.x == 0) a.partials[2 * job] = double(mx), a.partials[2 * job + 1] = double(sum);
  }
}

// Split softmax, pass 2: each block combines its row's splits (in order), then writes its own
// split's elements.
template <class A>
__global__ void softmax_split_write(SoftmaxArgs a) {
  const int32_t isz = itemsize_of(a.in_dtype), osz = itemsize_of(a.out_dtype);
  const int64_t chunk = reduction_chunk(a.dim, a.splits);
  for (int64_t job = blockIdx.x; job < a.outer * a.inner * a.splits; job += gridDim.x) {
    const int64_t row = job / a.splits, j0 = job % a.splits * chunk, j1 = j0 + chunk < a.dim ? j0 + chunk : a.dim;
    const double* p = a.partials + 2 * row * a.splits;
    double mx = -HUGE_VAL;
    for (int64_t s = 0; s < a.splits; ++s) mx = combine(ReduceOp::Max, mx, p[2 * s]);
    double total = 0;
    for (int64_t s = 0; s < a.splits; ++s)
      if (p[2 * s + 1] != 0 || p[2 * s + 1] != p[2 * s + 1]) total += p[2 * s + 1] * exp(p[2 * s] - mx);
    const A m = A(mx), sum = A(total), log_sum = log(sum);
    const int64_t first = row / a.inner * a.dim * a.inner + row % a.inner;
    for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
      const A x = load<A>(a.in + (first + j * a.inner) * isz, a.in_dtype) - m;
      store<A>(a.out + (first + j * a.inner) * osz, a.out_dtype, a.log ? x - log_sum : exp(x) / sum);
    }
  }
}

template <class A> void launch_softmax_as(const SoftmaxArgs& a, gpuStream_t s) {
  const int64_t rows = a.outer * a.inner;
  if (a.splits > 1 && a.partials) {
    const unsigned threads = threads_for(reduction_chunk(a.dim, a.splits));
    softmax_split_stats<A><<<rows_grid(rows * a.splits), threads, 0, s>>>(a);
    check_launch("softmax (split statistics)");
    softmax_split_write<A><<<rows_grid(rows * a.splits), threads, 0, s>>>(a);
    return;
  }
  softmax_kernel<A><<<rows_grid(rows), threads_for(a.dim), 0, s>>>(a);
}

}  // namespace

void launch_reduce(ReduceOp op, Compute acc, const Reduction& r, gpuStream_t s) {
  if (r.kept == 0) return;
  switch (acc) {
    case Compute::Float: launch_reduce_as<float>(op, r, s); break;
    case Compute::Double: launch_reduce_as<double>(op, r, s); break;
    case Compute::Int64: launch_reduce_as<int64_t>(op, r, s); break;
  }
  check_launch("a reduction");
}

void launch_softmax(Compute c, const SoftmaxArgs& a, gpuStream_t s) {
  int64_t rows = a.outer * a.inner;
  if (rows == 0 || a.dim == 0) return;
  if (c == Compute::Double) launch_softmax_as<double>(a, s);
  else launch_softmax_as<float>(a, s);
  check_launch("softmax");
}

}  // namespace tessera::gpu
