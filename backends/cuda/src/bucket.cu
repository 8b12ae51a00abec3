// searchsorted (a binary search per value, NaN ordering last as the CPU plugin) and bincount
// (atomic counts or weight sums; the bins' count comes from a min/max the host reads back).
#include "device_io.cuh"
#include "order_launch.h"

namespace tessera::gpu {
namespace {

// a before b in ascending order, NaN last (the CPU plugin's less_nan_last).
template <class C> GPU_D bool less_nan_last(C a, C b) { return b != b ? a == a : a < b; }

template <class C>
__global__ void searchsorted_kernel(SearchArgs a) {
  const int64_t size = itemsize_of(a.dtype);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.numel; i += int64_t(gridDim.x) * blockDim.x) {
    const char* row = a.sorted + (i / a.per_row) * a.n * size;
    const C x = load<C>(a.values + i * size, a.dtype);
    int64_t lo = 0, hi = a.n;
    while (lo < hi) {  // the first position whose boundary is > x (right) or >= x (left)
      const int64_t mid = (lo + hi) / 2;
      const C b = load<C>(row + mid * size, a.dtype);
      if (a.right ? !less_nan_last(x, b) : less_nan_last(b, x)) lo = mid + 1;
      else hi = mid;
    }
    if (a.out_int32) reinterpret_cast<int32_t*>(a.out)[i] = int32_t(lo);
    else reinterpret_cast<int64_t*>(a.out)[i] = lo;
  }
}

__global__ void bincount_kernel(BincountArgs a) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t bin = a.index[i];
    if (!a.weights) {
      atomicAdd(reinterpret_cast<unsigned long long*>(a.out) + bin, 1ull);
    } else if (a.out_dtype == kFloat32) {
      atomicAdd(reinterpret_cast<float*>(a.out) + bin, reinterpret_cast<const float*>(a.weights)[i]);
    } else {
      atomicAdd(reinterpret_cast<double*>(a.out) + bin, reinterpret_cast<const double*>(a.weights)[i]);
    }
  }
}

// One block: the smallest and largest of n int64 values.
__global__ void minmax_kernel(const int64_t* v, int64_t n, int64_t* result) {
  __shared__ int64_t lo[kThreads], hi[kThreads];
  int64_t l = INT64_MAX, h = INT64_MIN;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    l = min(l, v[i]);
    h = max(h, v[i]);
  }
  lo[threadIdx.x] = l;
  hi[threadIdx.x] = h;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      lo[threadIdx.x] = min(lo[threadIdx.x], lo[threadIdx.x + s]);
      hi[threadIdx.x] = max(hi[threadIdx.x], hi[threadIdx.x + s]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    result[0] = lo[0];
    result[1] = hi[0];
  }
}
}  // namespace

void launch_searchsorted(Compute c, const SearchArgs& a, gpuStream_t s) {
  if (a.numel == 0) return;
  switch (c) {
    case Compute::Float: searchsorted_kernel<float><<<blocks_for(a.numel), kThreads, 0, s>>>(a); break;
    case Compute::Double: searchsorted_kernel<double><<<blocks_for(a.numel), kThreads, 0, s>>>(a); break;
    case Compute::Int64: searchsorted_kernel<int64_t><<<blocks_for(a.numel), kThreads, 0, s>>>(a); break;
  }
  check_launch("searchsorted");
}

void launch_bincount(const BincountArgs& a, gpuStream_t s) {
  if (a.n == 0) return;
  bincount_kernel<<<blocks_for(a.n), kThreads, 0, s>>>(a);
  check_launch("bincount");
}

void launch_minmax_int64(const int64_t* values, int64_t n, int64_t* result, gpuStream_t s) {
  minmax_kernel<<<1, kThreads, 0, s>>>(values, n, result);
  check_launch("a min/max");
}

}  // namespace tessera::gpu
