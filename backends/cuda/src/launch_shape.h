#pragma once
// Launch shapes and the grid-stride loop, as plain arithmetic (no runtime header), so the host
// code, the kernels (CUDA and HIP) and tests/cpp/test_cuda_launch_shape.cpp share one version.
// The limits are the ones both vendors guarantee: gridDim.y and gridDim.z at most 65535, and
// (HIP) gridDim.x * blockDim.x below 2^32.
#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TS_LAUNCH_HD __host__ __device__
#else
#define TS_LAUNCH_HD
#endif

namespace tessera::gpu {

inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxGridYZ = 65535;

// Blocks of kThreads for n elements, capped: grid-stride loops cover the rest.
inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 65535 * 8 ? (b < 1 ? 1 : b) : 65535 * 8);
}

// 32-bit index arithmetic (offsets<int32_t>) is exact when the loop's numel and every operand's
// furthest element offset + 1 are below 2^31.
inline bool index32_fits(int64_t max_offset) { return max_offset < (int64_t(1) << 31); }

// body(i) for i = first, first + step, ... below n. The counter is 64-bit whatever index width
// the body computes offsets in: with the capped grid (step 2^27), a 32-bit counter would pass
// 2^31 - 1 and wrap negative for any n above about 2.01e9, even though every i < n fits.
template <class Body>
TS_LAUNCH_HD inline void grid_stride_loop(int64_t first, int64_t step, int64_t n, Body body) {
  for (int64_t i = first; i < n; i += step) body(i);
}

// The tiled GEMM's grid (16 x 16 tiles): x over column tiles, y over row tiles, z over the batch,
// each capped (the kernel strides over the tiles of x and y; the host splits the batch).
struct GridShape {
  unsigned x = 1, y = 1, z = 1;
};
inline constexpr int64_t kGemmTile = 16;
inline constexpr int64_t kMaxGemmTilesPerDim = 65535;
TS_LAUNCH_HD inline int64_t gemm_tiles(int64_t extent) { return (extent + kGemmTile - 1) / kGemmTile; }
inline GridShape tiled_gemm_grid(int64_t m, int64_t n, int64_t batch) {
  auto cap = [](int64_t v, int64_t limit) { return unsigned(v < 1 ? 1 : v < limit ? v : limit); };
  return {cap(gemm_tiles(n), kMaxGemmTilesPerDim), cap(gemm_tiles(m), kMaxGemmTilesPerDim), cap(batch, kMaxGridYZ)};
}

}  // namespace tessera::gpu
