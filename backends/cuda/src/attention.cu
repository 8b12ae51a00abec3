// Fused scaled dot-product attention (the GPU kernels of _scaled_dot_product_flash_attention_for_cpu
// and its backward; host side in attention_ops.cpp). As the CPU plugin's kernel: a block of
// queries against a tile of keys at a time with the softmax kept online (running max and sum
// per row), so the L x S score matrix is never stored; causal key tiles past a query block are
// skipped; an additive mask is read through its strides. Compute in float32 whatever the dtype
// (loads and stores convert). Portable CUDA/HIP: shared memory only, no warp intrinsics (HIP's
// wavefront is 64 wide), tiles sized so every kernel's shared memory stays under 48 KB.
//
// The backward recomputes the probabilities from the logsumexp, as FlashAttention's: one kernel
// per query block for dq, one per key block for dk and dv (each output written by one block:
// no atomics, reproducible), after delta = rowsum(dO * O).
#include "device_io.cuh"
#include "nn_launch.h"

#include <cmath>

namespace tessera::gpu {
namespace {

constexpr float kNegInf = -INFINITY;

GPU_HD int64_t smaller(int64_t x, int64_t y) { return x < y ? x : y; }

GPU_D float get(const HeadTensor& t, int64_t b, int64_t h, int64_t r, int64_t c) {
  const int64_t offset = b * t.sb + h * t.sh + r * t.sr + c * t.sc;
  return load<float>(t.data + offset * itemsize_of(t.dtype), t.dtype);
}
GPU_D void set(const HeadTensor& t, int64_t b, int64_t h, int64_t r, int64_t c, float v) {
  const int64_t offset = b * t.sb + h * t.sh + r * t.sr + c * t.sc;
  store<float>(t.data + offset * itemsize_of(t.dtype), t.dtype, v);
}

// rows x cols of t from row r0 into shared `dst` (row stride cols); rows past `valid` are zeros.
GPU_D void load_tile(float* dst, const HeadTensor& t, int64_t b, int64_t h, int64_t r0, int rows, int64_t valid,
                     int64_t cols) {
  for (int64_t i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    dst[i] = r < valid ? get(t, b, h, r0 + r, c) : 0.0f;
  }
}

GPU_D float dot(const float* x, const float* y, int64_t n) {
  float s = 0.0f;
  for (int64_t e = 0; e < n; ++e) s += x[e] * y[e];
  return s;
}

// The score of query row q (block row r) and key k (tile column c): scale q.k + mask, or -inf
// where causal attention or the tile's edge hides it.
GPU_D float score(const AttentionArgs& a, const float* qs, const float* ks, int64_t b, int64_t h, int r, int c,
                  int64_t q, int64_t k, bool valid) {
  if (!valid || (a.causal && k > q)) return kNegInf;
  float x = a.scale * dot(qs + r * a.E, ks + c * a.E, a.E);
  if (a.mask.data) x += get(a.mask, b, h, q, k);
  return x;
}

__global__ void attention_forward(AttentionArgs a) {
  extern __shared__ float smem[];
  const int T = a.tile;
  float* qs = smem;                 // [T, E]
  float* ks = qs + T * a.E;         // [T, E]
  float* vs = ks + T * a.E;         // [T, Ev]
  float* acc = vs + T * a.Ev;       // [T, Ev]
  float* s = acc + T * a.Ev;        // [T, T]
  float* row_max = s + T * T;       // [T]
  float* row_sum = row_max + T;     // [T]
  float* correction = row_sum + T;  // [T]
  const int64_t q0 = int64_t(blockIdx.x) * T;
  const int rows = int(smaller(int64_t(T), a.L - q0));
  for (int64_t bh = blockIdx.y; bh < a.B * a.H; bh += gridDim.y) {
    const int64_t b = bh / a.H, h = bh % a.H;
    load_tile(qs, a.q, b, h, q0, T, rows, a.E);
    for (int64_t i = threadIdx.x; i < T * a.Ev; i += blockDim.x) acc[i] = 0.0f;
    if (int(threadIdx.x) < T) row_max[threadIdx.x] = kNegInf, row_sum[threadIdx.x] = 0.0f;
    const int64_t key_end = a.causal ? smaller(a.S, q0 + rows) : a.S;
    __syncthreads();
    for (int64_t k0 = 0; k0 < key_end; k0 += T) {
      const int64_t cols = smaller(int64_t(T), key_end - k0);
      load_tile(ks, a.k, b, h, k0, T, cols, a.E);
      load_tile(vs, a.v, b, h, k0, T, cols, a.Ev);
      __syncthreads();
      for (int i = threadIdx.x; i < T * T; i += blockDim.x) {
        const int r = i / T, c = i % T;
        s[i] = score(a, qs, ks, b, h, r, c, q0 + r, k0 + c, r < rows && c < cols);
      }
      __syncthreads();
      if (int(threadIdx.x) < rows) {  // the online softmax, one row per thread
        const int r = threadIdx.x;
        float* sr = s + r * T;
        float m = row_max[r];
        for (int c = 0; c < T; ++c) m = fmaxf(m, sr[c]);
        if (m == kNegInf) {  // nothing visible yet
          for (int c = 0; c < T; ++c) sr[c] = 0.0f;
          correction[r] = 1.0f;
        } else {
          float total = 0.0f;
          for (int c = 0; c < T; ++c) total += (sr[c] = expf(sr[c] - m));
          correction[r] = expf(row_max[r] - m);  // 0 on the first visible tile
          row_sum[r] = row_sum[r] * correction[r] + total;
          row_max[r] = m;
        }
      }
      __syncthreads();
      for (int64_t i = threadIdx.x; i < rows * a.Ev; i += blockDim.x) {
        const int64_t r = i / a.Ev, e = i % a.Ev;
        float o = acc[i] * correction[r];
        for (int c = 0; c < T; ++c) o += s[r * T + c] * vs[c * a.Ev + e];
        acc[i] = o;
      }
      __syncthreads();
    }
    // A row that saw no key gets zeros and logsumexp -inf.
    for (int64_t i = threadIdx.x; i < rows * a.Ev; i += blockDim.x) {
      const int64_t r = i / a.Ev, e = i % a.Ev;
      set(a.out, b, h, q0 + r, e, row_sum[r] > 0.0f ? acc[i] / row_sum[r] : 0.0f);
    }
    if (int(threadIdx.x) < rows) {
      const int r = threadIdx.x;
      a.lse[bh * a.L + q0 + r] = row_sum[r] > 0.0f ? row_max[r] + logf(row_sum[r]) : kNegInf;
    }
    __syncthreads();
  }
}

// delta = rowsum(dO * O), one thread per (b, h, query row).
__global__ void attention_delta(AttentionArgs a) {
  const int64_t n = a.B * a.H * a.L;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t bh = i / a.L, r = i % a.L, b = bh / a.H, h = bh % a.H;
    float s = 0.0f;
    for (int64_t e = 0; e < a.Ev; ++e) s += get(a.grad_out, b, h, r, e) * get(a.out, b, h, r, e);
    a.delta[i] = s;
  }
}

// P and dS = P (dP - delta) of block row r, tile column c (0 where hidden).
GPU_D void probs_and_grad(const AttentionArgs& a, const float* qs, const float* dos, const float* ks, const float* vs,
                          int64_t b, int64_t h, int r, int c, int64_t q, int64_t k, bool valid, float lse,
                          float delta, float& p, float& ds) {
  const float x = score(a, qs, ks, b, h, r, c, q, k, valid);
  p = (x == kNegInf || lse == kNegInf) ? 0.0f : expf(x - lse);
  ds = p * (dot(dos + r * a.Ev, vs + c * a.Ev, a.Ev) - delta);
}

// dq of one query block: sum over key tiles of dS k * scale.
__global__ void attention_backward_query(AttentionArgs a) {
  extern __shared__ float smem[];
  const int T = a.tile;
  float* qs = smem;             // [T, E]
  float* dos = qs + T * a.E;    // [T, Ev]
  float* ks = dos + T * a.Ev;   // [T, E]
  float* vs = ks + T * a.E;     // [T, Ev]
  float* dq = vs + T * a.Ev;    // [T, E]
  float* ds = dq + T * a.E;     // [T, T]
  float* lse = ds + T * T;      // [T]
  float* delta = lse + T;       // [T]
  const int64_t q0 = int64_t(blockIdx.x) * T;
  const int rows = int(smaller(int64_t(T), a.L - q0));
  for (int64_t bh = blockIdx.y; bh < a.B * a.H; bh += gridDim.y) {
    const int64_t b = bh / a.H, h = bh % a.H;
    load_tile(qs, a.q, b, h, q0, T, rows, a.E);
    load_tile(dos, a.grad_out, b, h, q0, T, rows, a.Ev);
    for (int64_t i = threadIdx.x; i < T * a.E; i += blockDim.x) dq[i] = 0.0f;
    if (int(threadIdx.x) < rows) {
      lse[threadIdx.x] = a.lse[bh * a.L + q0 + threadIdx.x];
      delta[threadIdx.x] = a.delta[bh * a.L + q0 + threadIdx.x];
    }
    const int64_t key_end = a.causal ? smaller(a.S, q0 + rows) : a.S;
    __syncthreads();
    for (int64_t k0 = 0; k0 < key_end; k0 += T) {
      const int64_t cols = smaller(int64_t(T), key_end - k0);
      load_tile(ks, a.k, b, h, k0, T, cols, a.E);
      load_tile(vs, a.v, b, h, k0, T, cols, a.Ev);
      __syncthreads();
      for (int i = threadIdx.x; i < T * T; i += blockDim.x) {
        const int r = i / T, c = i % T;
        const bool valid = r < rows && c < cols;
        float p, g;
        probs_and_grad(a, qs, dos, ks, vs, b, h, r, c, q0 + r, k0 + c, valid, valid ? lse[r] : 0.0f,
                       valid ? delta[r] : 0.0f, p, g);
        ds[i] = g;
      }
      __syncthreads();
      for (int64_t i = threadIdx.x; i < rows * a.E; i += blockDim.x) {
        const int64_t r = i / a.E, e = i % a.E;
        float g = 0.0f;
        for (int c = 0; c < T; ++c) g += ds[r * T + c] * ks[c * a.E + e];
        dq[i] += a.scale * g;
      }
      __syncthreads();
    }
    for (int64_t i = threadIdx.x; i < rows * a.E; i += blockDim.x) set(a.grad_q, b, h, q0 + i / a.E, i % a.E, dq[i]);
    __syncthreads();
  }
}

// dk and dv of one key block: sums over query tiles of dS^T q * scale and P^T dO.
__global__ void attention_backward_key(AttentionArgs a) {
  extern __shared__ float smem[];
  const int T = a.tile;
  float* ks = smem;             // [T, E]
  float* vs = ks + T * a.E;     // [T, Ev]
  float* qs = vs + T * a.Ev;    // [T, E]
  float* dos = qs + T * a.E;    // [T, Ev]
  float* dk = dos + T * a.Ev;   // [T, E]
  float* dv = dk + T * a.E;     // [T, Ev]
  float* p = dv + T * a.Ev;     // [T, T] (query r, key c)
  float* ds = p + T * T;        // [T, T]
  float* lse = ds + T * T;      // [T]
  float* delta = lse + T;       // [T]
  const int64_t k0 = int64_t(blockIdx.x) * T;
  const int cols = int(smaller(int64_t(T), a.S - k0));
  for (int64_t bh = blockIdx.y; bh < a.B * a.H; bh += gridDim.y) {
    const int64_t b = bh / a.H, h = bh % a.H;
    load_tile(ks, a.k, b, h, k0, T, cols, a.E);
    load_tile(vs, a.v, b, h, k0, T, cols, a.Ev);
    for (int64_t i = threadIdx.x; i < T * a.E; i += blockDim.x) dk[i] = 0.0f;
    for (int64_t i = threadIdx.x; i < T * a.Ev; i += blockDim.x) dv[i] = 0.0f;
    __syncthreads();
    // Causal: queries before k0 see none of these keys.
    for (int64_t q0 = a.causal ? k0 : 0; q0 < a.L; q0 += T) {
      const int rows = int(smaller(int64_t(T), a.L - q0));
      load_tile(qs, a.q, b, h, q0, T, rows, a.E);
      load_tile(dos, a.grad_out, b, h, q0, T, rows, a.Ev);
      if (int(threadIdx.x) < rows) {
        lse[threadIdx.x] = a.lse[bh * a.L + q0 + threadIdx.x];
        delta[threadIdx.x] = a.delta[bh * a.L + q0 + threadIdx.x];
      }
      __syncthreads();
      for (int i = threadIdx.x; i < T * T; i += blockDim.x) {
        const int r = i / T, c = i % T;
        const bool valid = r < rows && c < cols;
        probs_and_grad(a, qs, dos, ks, vs, b, h, r, c, q0 + r, k0 + c, valid, valid ? lse[r] : 0.0f,
                       valid ? delta[r] : 0.0f, p[i], ds[i]);
      }
      __syncthreads();
      for (int64_t i = threadIdx.x; i < cols * a.Ev; i += blockDim.x) {
        const int64_t c = i / a.Ev, e = i % a.Ev;
        float g = 0.0f;
        for (int r = 0; r < T; ++r) g += p[r * T + c] * dos[r * a.Ev + e];
        dv[i] += g;
      }
      for (int64_t i = threadIdx.x; i < cols * a.E; i += blockDim.x) {
        const int64_t c = i / a.E, e = i % a.E;
        float g = 0.0f;
        for (int r = 0; r < T; ++r) g += ds[r * T + c] * qs[r * a.E + e];
        dk[i] += a.scale * g;
      }
      __syncthreads();
    }
    for (int64_t i = threadIdx.x; i < cols * a.E; i += blockDim.x) set(a.grad_k, b, h, k0 + i / a.E, i % a.E, dk[i]);
    for (int64_t i = threadIdx.x; i < cols * a.Ev; i += blockDim.x) set(a.grad_v, b, h, k0 + i / a.Ev, i % a.Ev, dv[i]);
    __syncthreads();
  }
}

unsigned bh_grid(int64_t bh) { return unsigned(bh < kMaxGridYZ ? bh : kMaxGridYZ); }
unsigned tiles(int64_t n, int tile) { return unsigned((n + tile - 1) / tile); }

}  // namespace

size_t attention_shared_bytes(const AttentionArgs& a, AttentionKernel which) {
  const int64_t T = a.tile, E = a.E, Ev = a.Ev;
  switch (which) {
    case AttentionKernel::Forward: return size_t(2 * T * E + 2 * T * Ev + T * T + 3 * T) * sizeof(float);
    case AttentionKernel::BackwardQuery: return size_t(3 * T * E + 2 * T * Ev + T * T + 2 * T) * sizeof(float);
    default: return size_t(3 * T * E + 3 * T * Ev + 2 * T * T + 2 * T) * sizeof(float);
  }
}

void launch_attention_forward(const AttentionArgs& a, gpuStream_t stream) {
  if (a.B * a.H == 0 || a.L == 0) return;
  const dim3 grid(tiles(a.L, a.tile), bh_grid(a.B * a.H));
  attention_forward<<<grid, kThreads, attention_shared_bytes(a, AttentionKernel::Forward), stream>>>(a);
  check_launch("_scaled_dot_product_flash_attention_for_cpu");
}

void launch_attention_backward(const AttentionArgs& a, gpuStream_t stream) {
  if (a.B * a.H == 0) return;
  const char* op = "_scaled_dot_product_flash_attention_for_cpu_backward";
  if (a.L > 0) {
    attention_delta<<<blocks_for(a.B * a.H * a.L), kThreads, 0, stream>>>(a);
    check_launch(op);
    const dim3 grid(tiles(a.L, a.tile), bh_grid(a.B * a.H));
    attention_backward_query<<<grid, kThreads, attention_shared_bytes(a, AttentionKernel::BackwardQuery), stream>>>(a);
    check_launch(op);
  }
  if (a.S > 0) {
    const dim3 grid(tiles(a.S, a.tile), bh_grid(a.B * a.H));
    attention_backward_key<<<grid, kThreads, attention_shared_bytes(a, AttentionKernel::BackwardKey), stream>>>(a);
    check_launch(op);
  }
}

}  // namespace tessera::gpu
