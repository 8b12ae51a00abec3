// nonzero as a stream compaction in three launches, with no library beyond the runtime (so the
// ROCm build, which has no hipCUB in Debian, compiles the same source):
//   1. count:  every tile of kTile elements (row-major over the loop) counts its nonzeros;
//   2. scan:   one block turns the tile counts into each tile's first output row, and writes the
//              total after them (the host reads it back to size the result);
//   3. write:  every tile recounts, scans across its threads, and writes the coordinates of its
//              nonzeros from its first row on, so the rows come out in row-major order.
// Both passes read the input, instead of keeping flags between them: for the sizes that matter
// the read is cheaper than writing and re-reading a flag per element.
#include "map.cuh"
#include "ops_launch.h"

namespace tessera::gpu {
namespace {

constexpr int kItems = 8;                  // consecutive elements per thread in the write pass
constexpr int64_t kTile = kThreads * kItems;

template <class I> GPU_D bool nonzero_at(const Loop& L, I i) {
  I off[1];
  offsets<I, 1>(L, i, off);
  return load<double>(at(L.ops[0], off[0]), L.ops[0].dtype) != 0.0;  // NaN counts; -0.0 does not
}

// The exclusive prefix sum of `v` over the block's threads (blockDim.x == kThreads), and the
// block's total in `total`. Hillis-Steele in shared memory: no warp intrinsics, whose width
// differs between CUDA (32) and AMD (64).
GPU_D int64_t block_exclusive_scan(int64_t v, int64_t& total) {
  __shared__ int64_t buf[kThreads];
  const int t = int(threadIdx.x);
  buf[t] = v;
  __syncthreads();
  for (int step = 1; step < kThreads; step *= 2) {
    const int64_t add = t >= step ? buf[t - step] : 0;
    __syncthreads();
    buf[t] += add;
    __syncthreads();
  }
  const int64_t inclusive = buf[t];
  total = buf[kThreads - 1];
  __syncthreads();  // buf is reused by the next call
  return inclusive - v;
}

template <class I> __global__ void count_kernel(Loop L, int64_t* tile_counts) {
  const int64_t first = int64_t(blockIdx.x) * kTile;
  int64_t count = 0;
  for (int j = 0; j < kItems; ++j) {  // strided by the block: neighbouring threads read neighbours
    const int64_t i = first + j * kThreads + threadIdx.x;
    if (i < L.numel) count += nonzero_at<I>(L, I(i));
  }
  int64_t total;
  block_exclusive_scan(count, total);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = total;
}

// counts[0..tiles) -> their exclusive prefix sums, counts[tiles] = the sum of all.
__global__ void scan_kernel(int64_t* counts, int64_t tiles) {
  const int64_t per_thread = (tiles + kThreads - 1) / kThreads;
  const int64_t start = int64_t(threadIdx.x) * per_thread;
  const int64_t lo = start < tiles ? start : tiles, hi = lo + per_thread < tiles ? lo + per_thread : tiles;
  int64_t sum = 0;
  for (int64_t i = lo; i < hi; ++i) sum += counts[i];
  int64_t total;
  int64_t running = block_exclusive_scan(sum, total);
  for (int64_t i = lo; i < hi; ++i) {
    const int64_t c = counts[i];
    counts[i] = running;
    running += c;
  }
  if (threadIdx.x == 0) counts[tiles] = total;
}

template <class I> __global__ void write_kernel(NonzeroArgs a, const int64_t* tile_first_row, int64_t* out) {
  const Loop& L = a.loop;
  const int64_t first = int64_t(blockIdx.x) * kTile + int64_t(threadIdx.x) * kItems;
  bool hit[kItems];
  int64_t count = 0;
  for (int j = 0; j < kItems; ++j) {
    const int64_t i = first + j;
    hit[j] = i < L.numel && nonzero_at<I>(L, I(i));
    count += hit[j];
  }
  int64_t total;
  int64_t row = tile_first_row[blockIdx.x] + block_exclusive_scan(count, total);
  for (int j = 0; j < kItems; ++j) {
    if (!hit[j]) continue;
    int64_t rest = first + j;  // its coordinates over the (uncoalesced) shape, last dim fastest
    int64_t* coords = out + row * a.ndim;
    for (int d = a.ndim - 1; d >= 0; --d) {
      coords[d] = rest % a.sizes[d];
      rest /= a.sizes[d];
    }
    ++row;
  }
}

}  // namespace

int64_t nonzero_tiles(int64_t numel) { return (numel + kTile - 1) / kTile; }

void launch_nonzero_count(const Loop& L, int64_t* tile_counts, gpuStream_t s) {
  const int64_t tiles = nonzero_tiles(L.numel);
  if (tiles > 0) {
    if (L.index32) count_kernel<int32_t><<<unsigned(tiles), kThreads, 0, s>>>(L, tile_counts);
    else count_kernel<int64_t><<<unsigned(tiles), kThreads, 0, s>>>(L, tile_counts);
    check_launch("nonzero (count)");
  }
  scan_kernel<<<1, kThreads, 0, s>>>(tile_counts, tiles);
  check_launch("nonzero (scan)");
}

void launch_nonzero_write(const NonzeroArgs& a, const int64_t* tile_first_row, int64_t* out, gpuStream_t s) {
  const int64_t tiles = nonzero_tiles(a.loop.numel);
  if (tiles == 0 || a.ndim == 0) return;
  if (a.loop.index32) write_kernel<int32_t><<<unsigned(tiles), kThreads, 0, s>>>(a, tile_first_row, out);
  else write_kernel<int64_t><<<unsigned(tiles), kThreads, 0, s>>>(a, tile_first_row, out);
  check_launch("nonzero (write)");
}

}  // namespace tessera::gpu
