// Reductions (sum/max/min over any set of dims) and softmax/log_softmax: one block per output,
// threads stride over the reduced elements and combine in shared memory.
#include "device_io.cuh"
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

template <class A>
__global__ void reduce_kernel(Reduction r, ReduceOp op) {
  for (int64_t m = blockIdx.x; m < r.kept; m += gridDim.x) {
    int64_t base = 0, rest = m;
    for (int d = r.ndim_kept - 1; d >= 0; --d) {
      base += (rest % r.sizes[d]) * r.in.strides[d];
      rest /= r.sizes[d];
    }
    A acc = identity<A>(op);
    for (int64_t k = threadIdx.x; k < r.reduced; k += blockDim.x) {
      int64_t off = base;
      rest = k;
      for (int d = r.ndim_kept + r.ndim_reduced - 1; d >= r.ndim_kept; --d) {
        off += (rest % r.sizes[d]) * r.in.strides[d];
        rest /= r.sizes[d];
      }
      acc = combine(op, acc, load<A>(r.in.data + off * r.in.itemsize, r.in.dtype));
    }
    acc = block_combine(acc, [op](A a, A b) { return combine(op, a, b); });
    if (threadIdx.x == 0) {
      if (r.scale != 1.0) acc = A(double(acc) * r.scale);
      store<A>(r.out.data + m * r.out.itemsize, r.out.dtype, acc);
    }
  }
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

}  // namespace

void launch_reduce(ReduceOp op, Compute acc, const Reduction& r, gpuStream_t s) {
  if (r.kept == 0) return;
  unsigned grid = rows_grid(r.kept), threads = threads_for(r.reduced);
  switch (acc) {
    case Compute::Float: reduce_kernel<float><<<grid, threads, 0, s>>>(r, op); break;
    case Compute::Double: reduce_kernel<double><<<grid, threads, 0, s>>>(r, op); break;
    case Compute::Int64: reduce_kernel<int64_t><<<grid, threads, 0, s>>>(r, op); break;
  }
  check_launch("a reduction");
}

void launch_softmax(Compute c, const SoftmaxArgs& a, gpuStream_t s) {
  int64_t rows = a.outer * a.inner;
  if (rows == 0 || a.dim == 0) return;
  unsigned threads = threads_for(a.dim);
  if (c == Compute::Double) softmax_kernel<double><<<rows_grid(rows), threads, 0, s>>>(a);
  else softmax_kernel<float><<<rows_grid(rows), threads, 0, s>>>(a);
  check_launch("softmax");
}

}  // namespace tessera::gpu
