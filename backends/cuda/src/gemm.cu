// Our own GEMM: 16x16 output tiles, with 16-deep slices of A and B staged in shared memory and
// one output per thread. Correctness and portability first (it is what ROCm runs, with no
// rocBLAS in Debian); cuBLAS is the fast CUDA path.
#include "device_io.cuh"

namespace tessera::gpu {
namespace {
constexpr int kTile = int(kGemmTile);

// One 16x16 output tile of batch entry blockIdx.z.
template <class A>
__device__ void gemm_tile(const GemmArgs& g, int64_t row_tile, int64_t col_tile, A (&sa)[kTile][kTile + 1],
                          A (&sb)[kTile][kTile + 1]) {
  const int64_t batch = blockIdx.z;
  const int64_t row = row_tile * kTile + threadIdx.y;
  const int64_t col = col_tile * kTile + threadIdx.x;
  const int32_t asz = itemsize_of(g.a.dtype), bsz = itemsize_of(g.b.dtype), csz = itemsize_of(g.c.dtype);
  const char* abase = g.a.data + batch * g.a.batch_stride * asz;
  const char* bbase = g.b.data + batch * g.b.batch_stride * bsz;
  A acc = 0;
  for (int64_t k0 = 0; k0 < g.k; k0 += kTile) {
    int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    sa[threadIdx.y][threadIdx.x] =
        row < g.m && ka < g.k ? load<A>(abase + (row * g.a.row_stride + ka * g.a.col_stride) * asz, g.a.dtype) : A(0);
    sb[threadIdx.y][threadIdx.x] =
        kb < g.k && col < g.n ? load<A>(bbase + (kb * g.b.row_stride + col * g.b.col_stride) * bsz, g.b.dtype) : A(0);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc += sa[threadIdx.y][kk] * sb[kk][threadIdx.x];
    __syncthreads();
  }
  if (row < g.m && col < g.n) {
    char* p = g.c.data + (batch * g.c.batch_stride + row * g.c.row_stride + col * g.c.col_stride) * csz;
    A v = A(g.alpha) * acc;
    if (g.beta != 0) v += A(g.beta) * load<A>(p, g.c.dtype);  // beta == 0 ignores C (even NaN)
    store<A>(p, g.c.dtype, v);
  }
}

// The grid is capped (tiled_gemm_grid): each block strides over the row and column tiles. Every
// thread of a block runs the same tiles, so the __syncthreads inside stay uniform.
template <class A>
__global__ void tiled_gemm_kernel(GemmArgs g) {
  __shared__ A sa[kTile][kTile + 1];
  __shared__ A sb[kTile][kTile + 1];
  grid_stride_loop(blockIdx.y, gridDim.y, gemm_tiles(g.m), [&](int64_t row_tile) {
    grid_stride_loop(blockIdx.x, gridDim.x, gemm_tiles(g.n),
                     [&](int64_t col_tile) { gemm_tile<A>(g, row_tile, col_tile, sa, sb); });
  });
}
}  // namespace

void launch_tiled_gemm(Compute acc, const GemmArgs& g, gpuStream_t s) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  dim3 block(kTile, kTile);
  for (int64_t b0 = 0; b0 < g.batch; b0 += kMaxGridYZ) {
    GemmArgs part = g;
    part.batch = g.batch - b0 < kMaxGridYZ ? g.batch - b0 : kMaxGridYZ;
    part.a.data += b0 * g.a.batch_stride * itemsize_of(g.a.dtype);
    part.b.data += b0 * g.b.batch_stride * itemsize_of(g.b.dtype);
    part.c.data += b0 * g.c.batch_stride * itemsize_of(g.c.dtype);
    const GridShape shape = tiled_gemm_grid(part.m, part.n, part.batch);
    dim3 grid(shape.x, shape.y, shape.z);
    if (acc == Compute::Double) tiled_gemm_kernel<double><<<grid, block, 0, s>>>(part);
    else tiled_gemm_kernel<float><<<grid, block, 0, s>>>(part);
    check_launch("the tiled GEMM");
  }
}

}  // namespace tessera::gpu
