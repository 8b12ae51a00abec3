// Indexing on the grid-stride loop (map.cuh): gather/index_select read through an index,
// scatter writes through one, scatter_add/index_add accumulate through one with atomics (a
// compare-and-swap on the aligned 32- or 64-bit word that holds the element, so every dtype
// works, 16-bit floats and bool included), and the range check the host runs first.
#include "map.cuh"
#include "ops_launch.h"

#include <type_traits>

namespace tessera::gpu {
namespace {

template <class W> struct GatherF {  // W: a word of the element's width; values move as bits
  int64_t step;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[3]) const {
    const int64_t idx = load<int64_t>(at(L.ops[2], off[2]), L.ops[2].dtype);
    const char* src = L.ops[1].data + (int64_t(off[1]) + idx * step) * L.ops[1].itemsize;
    *reinterpret_cast<W*>(at(L.ops[0], off[0])) = *reinterpret_cast<const W*>(src);
  }
};

template <class W> struct ScatterF {
  int64_t step;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[3]) const {
    const int64_t idx = load<int64_t>(at(L.ops[2], off[2]), L.ops[2].dtype);
    char* dst = L.ops[0].data + (int64_t(off[0]) + idx * step) * L.ops[0].itemsize;
    // A Scalar value comes as the bits of the element in its dtype (Loop::scalar_i, low bytes).
    if (L.ops[1].data) *reinterpret_cast<W*>(dst) = *reinterpret_cast<const W*>(at(L.ops[1], off[1]));
    else *reinterpret_cast<W*>(dst) = W(uint64_t(L.scalar_i));
  }
};

// *p (of `dtype`) += v atomically, through the aligned word that contains it (the allocator's
// blocks are multiples of 4 bytes, so the word never leaves the allocation).
template <class C> GPU_D void atomic_add_any(char* p, int32_t dtype, C v) {
  const int32_t size = itemsize_of(dtype);
  if (size == 8) {
    auto* word = reinterpret_cast<unsigned long long*>(p);
    unsigned long long old = *word, assumed;
    do {
      assumed = old;
      alignas(8) char bytes[8];
      *reinterpret_cast<unsigned long long*>(bytes) = assumed;
      const C cur = load<C>(bytes, dtype);
      if (dtype == kBool) store<C>(bytes, dtype, (cur != C(0) || v != C(0)) ? C(1) : C(0));
      else store<C>(bytes, dtype, cur + v);
      old = atomicCAS(word, assumed, *reinterpret_cast<unsigned long long*>(bytes));
    } while (old != assumed);
    return;
  }
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  auto* word = reinterpret_cast<unsigned int*>(addr & ~uintptr_t(3));
  const unsigned shift = unsigned(addr & 3) * 8;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    alignas(4) char bytes[4];
    *reinterpret_cast<unsigned int*>(bytes) = assumed;
    char* elem = bytes + (shift / 8);
    const C cur = load<C>(elem, dtype);
    if (dtype == kBool) store<C>(elem, dtype, (cur != C(0) || v != C(0)) ? C(1) : C(0));
    else store<C>(elem, dtype, cur + v);
    old = atomicCAS(word, assumed, *reinterpret_cast<unsigned int*>(bytes));
  } while (old != assumed);
}

template <class C> struct ScatterAddF {
  int64_t step;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[3]) const {
    const int64_t idx = load<int64_t>(at(L.ops[2], off[2]), L.ops[2].dtype);
    char* dst = L.ops[0].data + (int64_t(off[0]) + idx * step) * L.ops[0].itemsize;
    C v = load<C>(at(L.ops[1], off[1]), L.ops[1].dtype);
    const C alpha = std::is_floating_point_v<C> ? C(L.alpha_d) : C(L.alpha_i);
    if (L.ops[0].dtype == kBool) v = (v != C(0) && alpha != C(0)) ? C(1) : C(0);  // bool: or of (alpha and v)
    else v = alpha * v;
    atomic_add_any<C>(dst, L.ops[0].dtype, v);
  }
};

// Advanced indexing's element offsets: ops[0] (int64, over the broadcast index shape) gets
// (first ? 0 : itself) + stride * the index of ops[1], negative indices counting from `size`
// (the host has checked them against [-size, size) already).
struct IndexOffsetF {
  int64_t size, stride;
  bool first;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[2]) const {
    int64_t v = load<int64_t>(at(L.ops[1], off[1]), L.ops[1].dtype);
    if (v < 0) v += size;
    int64_t* out = reinterpret_cast<int64_t*>(at(L.ops[0], off[0]));
    *out = (first ? 0 : *out) + v * stride;
  }
};

template <class I> __global__ void check_kernel(Loop L, int64_t lo, int64_t hi, bool flag_inside, int64_t* bad) {
  grid_stride_loop(int64_t(blockIdx.x) * blockDim.x + threadIdx.x, int64_t(gridDim.x) * blockDim.x, L.numel,
                   [&](int64_t i) {
                     I off[1];
                     offsets<I, 1>(L, I(i), off);
                     const int64_t v = load<int64_t>(at(L.ops[0], off[0]), L.ops[0].dtype);
                     const bool inside = v >= lo && v < hi;
                     if (inside == flag_inside)
                       atomicMin(reinterpret_cast<unsigned long long*>(bad), static_cast<unsigned long long>(i));
                   });
}

template <template <class> class F, class... A> void by_width(int32_t itemsize, const Loop& L, gpuStream_t s,
                                                              const char* what, A... args) {
  switch (itemsize) {
    case 1: return run_map<3>(L, s, F<uint8_t>{args...}, what);
    case 2: return run_map<3>(L, s, F<uint16_t>{args...}, what);
    case 4: return run_map<3>(L, s, F<uint32_t>{args...}, what);
    default: return run_map<3>(L, s, F<uint64_t>{args...}, what);
  }
}
}  // namespace

void launch_index(IndexOp op, const Loop& L, int64_t step, gpuStream_t s) {
  switch (op) {
    case IndexOp::Gather: return by_width<GatherF>(L.ops[0].itemsize, L, s, "a gather", step);
    case IndexOp::Scatter: return by_width<ScatterF>(L.ops[0].itemsize, L, s, "a scatter", step);
    case IndexOp::ScatterAdd:
      if (L.ops[0].dtype == kFloat64) return run_map<3>(L, s, ScatterAddF<double>{step}, "a scatter_add");
      if (L.ops[0].dtype >= kFloat16) return run_map<3>(L, s, ScatterAddF<float>{step}, "a scatter_add");
      return run_map<3>(L, s, ScatterAddF<int64_t>{step}, "a scatter_add");
  }
}

void launch_index_offsets(const Loop& L, int64_t size, int64_t stride, bool first, gpuStream_t s) {
  run_map<2>(L, s, IndexOffsetF{size, stride, first}, "advanced indexing offsets");
}

void launch_value_check(const Loop& L, int64_t lo, int64_t hi, bool flag_inside, int64_t* bad, gpuStream_t s) {
  if (L.numel == 0) return;
  if (L.index32) check_kernel<int32_t><<<blocks_for(L.numel), kThreads, 0, s>>>(L, lo, hi, flag_inside, bad);
  else check_kernel<int64_t><<<blocks_for(L.numel), kThreads, 0, s>>>(L, lo, hi, flag_inside, bad);
  check_launch("a value check");
}

}  // namespace tessera::gpu
