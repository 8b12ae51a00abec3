// Row sorts for sort.stable and topk through CUB's radix sort (stable). Every element becomes an
// unsigned key whose ascending order is the CPU plugin's order: NaN largest, -0.0 equal to
// +0.0; a descending sort complements the keys, so it stays a stable ascending sort and equal
// values keep their index order, as on the CPU. One row: DeviceRadixSort; several:
// DeviceSegmentedRadixSort. CUDA only (no hipCUB in the ROCm build: its sorts run on the CPU).
#include "device_io.cuh"
#include "sort_launch.h"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include <type_traits>

namespace tessera::gpu {
namespace {

void check_cub(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(GPU_BACKEND_NAME ": ") + what + " failed: " + cudaGetErrorString(e));
}

// The order-preserving unsigned key of one element.
template <class K> GPU_D K encode(const char* p, int32_t dtype, bool descending) {
  K key;
  if constexpr (std::is_same_v<K, uint64_t>) {
    if (dtype == kFloat64) {
      double x = load<double>(p, dtype);
      if (x == 0) x = 0;  // -0.0 sorts with +0.0
      const uint64_t bits = uint64_t(__double_as_longlong(x));
      key = x != x ? ~uint64_t(0) : (bits >> 63) ? ~bits : bits | (uint64_t(1) << 63);
    } else {
      key = uint64_t(load<int64_t>(p, dtype)) ^ (uint64_t(1) << 63);
    }
  } else {
    if (dtype >= kFloat16) {
      float x = load<float>(p, dtype);
      if (x == 0) x = 0;
      const uint32_t bits = __float_as_uint(x);
      key = x != x ? ~0u : (bits >> 31) ? ~bits : bits | 0x80000000u;
    } else {
      key = uint32_t(int32_t(load<int64_t>(p, dtype))) ^ 0x80000000u;
    }
  }
  return descending ? K(~key) : key;
}

template <class K> __global__ void encode_rows(RowSort s) {
  const int64_t total = s.rows * s.n, size = itemsize_of(s.dtype);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    static_cast<K*>(s.keys)[i] = encode<K>(s.in + i * size, s.dtype, s.descending);
    s.index[i] = i % s.n;
  }
}

__global__ void row_offsets(int64_t* offsets, int64_t rows, int64_t w) {
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r <= rows; r += int64_t(gridDim.x) * blockDim.x)
    offsets[r] = r * w;
}

__global__ void take_rows(const char* in, int32_t dtype, int64_t rows, int64_t n, const int64_t* index,
                          int64_t index_stride, int64_t w, char* values, int64_t* out_index) {
  const int64_t total = rows * w, size = itemsize_of(dtype);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / w, j = i % w, at = index[r * index_stride + j];
    const char* src = in + (r * n + at) * size;
    char* dst = values + i * size;
    for (int64_t b = 0; b < size; ++b) dst[b] = src[b];
    out_index[i] = at;
  }
}

// CUB's pair sort of rows * w (key, value) pairs: one row, or segments at `offsets` (filled here).
template <class K, class V>
size_t sort_pairs(const K* keys, K* keys_out, const V* values, V* values_out, int64_t rows, int64_t w,
                  int64_t* offsets, void* scratch, size_t bytes, gpuStream_t stream) {
  const int items = int(rows * w);
  if (rows == 1) {
    check_cub(cub::DeviceRadixSort::SortPairs(scratch, bytes, keys, keys_out, values, values_out, items, 0,
                                              int(sizeof(K) * 8), stream), "cub::DeviceRadixSort::SortPairs");
    return bytes;
  }
  if (scratch) {
    row_offsets<<<blocks_for(rows + 1), kThreads, 0, stream>>>(offsets, rows, w);
    check_launch("a sort's row offsets");
  }
  check_cub(cub::DeviceSegmentedRadixSort::SortPairs(scratch, bytes, keys, keys_out, values, values_out, items,
                                                     int(rows), offsets, offsets + 1, 0, int(sizeof(K) * 8), stream),
            "cub::DeviceSegmentedRadixSort::SortPairs");
  return bytes;
}

template <class K> size_t sort_rows(const RowSort& s, gpuStream_t stream) {
  if (s.scratch) {
    encode_rows<K><<<blocks_for(s.rows * s.n), kThreads, 0, stream>>>(s);
    check_launch("a sort's keys");
  }
  return sort_pairs(static_cast<const K*>(s.keys), static_cast<K*>(s.keys_sorted), s.index, s.index_sorted, s.rows,
                    s.n, s.offsets, s.scratch, s.scratch_bytes, stream);
}
}  // namespace

int32_t sort_key_bytes(int32_t dtype) { return dtype == kInt64 || dtype == kFloat64 ? 8 : 4; }

size_t launch_sort_rows(const RowSort& s, gpuStream_t stream) {
  return sort_key_bytes(s.dtype) == 8 ? sort_rows<uint64_t>(s, stream) : sort_rows<uint32_t>(s, stream);
}

size_t launch_sort_index_rows(const int64_t* index, int64_t* sorted, int64_t rows, int64_t w, int64_t* offsets,
                              void* scratch, size_t bytes, gpuStream_t stream) {
  // Keys only: the positions themselves (int64, CUB orders signed keys).
  if (rows == 1) {
    check_cub(cub::DeviceRadixSort::SortKeys(scratch, bytes, index, sorted, int(w), 0, 64, stream),
              "cub::DeviceRadixSort::SortKeys");
    return bytes;
  }
  if (scratch) {
    row_offsets<<<blocks_for(rows + 1), kThreads, 0, stream>>>(offsets, rows, w);
    check_launch("a sort's row offsets");
  }
  check_cub(cub::DeviceSegmentedRadixSort::SortKeys(scratch, bytes, index, sorted, int(rows * w), int(rows), offsets,
                                                    offsets + 1, 0, 64, stream),
            "cub::DeviceSegmentedRadixSort::SortKeys");
  return bytes;
}

void launch_take_rows(const char* in, int32_t dtype, int64_t rows, int64_t n, const int64_t* index, int64_t index_stride,
                      int64_t w, char* values, int64_t* out_index, gpuStream_t stream) {
  if (rows * w == 0) return;
  take_rows<<<blocks_for(rows * w), kThreads, 0, stream>>>(in, dtype, rows, n, index, index_stride, w, values, out_index);
  check_launch("a sort's gather");
}

}  // namespace tessera::gpu
