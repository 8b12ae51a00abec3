// More reductions over reduce.cu's layout (Reduction: one block per output, or several and a
// merge pass when outputs are few; threads stride over the reduced elements, partial states
// combined in shared memory): prod, argmax/argmin (value
// and first index), var/std (Welford per thread, Chan's merge, in double) and logsumexp (a
// running max shift and sum, in double). Each op is an accumulator struct.
#include "device_io.cuh"
#include "ops_launch.h"
#include "reduction_plan.h"
#include "row_kernels.cuh"

#include <cmath>
#include <type_traits>

namespace tessera::gpu {
namespace {

template <class A> struct ProdAcc {
  using State = A;
  GPU_D State identity() const { return A(1); }
  GPU_D void add(State& s, A x, int64_t) const { s = s * x; }
  GPU_D State merge(State a, State b) const { return a * b; }
  GPU_D void write(char* out, int32_t dtype, State s) const { store<A>(out, dtype, s); }
};

// The first index of the extremum; NaN is the extremum (the first NaN wins), as the CPU plugin.
template <class A, bool Max> struct ArgAcc {
  struct State {
    A value;
    int64_t index;  // -1: nothing seen yet
  };
  GPU_D static bool better(A x, A cur) {
    if (cur != cur) return false;
    return Max ? (x > cur || x != x) : (x < cur || x != x);
  }
  GPU_D State identity() const { return {A(0), -1}; }
  GPU_D void add(State& s, A x, int64_t i) const {
    if (s.index < 0 || better(x, s.value)) s = {x, i};  // i grows within a thread
  }
  GPU_D State merge(State a, State b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
    if (a_nan || b_nan) return (a_nan && (!b_nan || a.index < b.index)) ? a : b;
    if (a.value == b.value) return a.index < b.index ? a : b;
    return better(b.value, a.value) ? b : a;
  }
  GPU_D void write(char* out, int32_t, State s) const { *reinterpret_cast<int64_t*>(out) = s.index; }
};

struct MomentsAcc {
  struct State {
    double n, mean, m2;
  };
  double correction;
  bool take_sqrt;
  GPU_D State identity() const { return {0, 0, 0}; }
  GPU_D void add(State& s, double x, int64_t) const {
    s.n += 1;
    const double d = x - s.mean;
    s.mean += d / s.n;
    s.m2 += d * (x - s.mean);
  }
  GPU_D State merge(State a, State b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    const double n = a.n + b.n, delta = b.mean - a.mean;
    return {n, a.mean + delta * (b.n / n), a.m2 + b.m2 + delta * delta * (a.n * b.n / n)};
  }
  GPU_D void write(char* out, int32_t dtype, State s) const {
    const double dof = s.n - correction;
    const double var = s.m2 / (dof > 0 ? dof : 0.0);
    store<double>(out, dtype, take_sqrt ? sqrt(var) : var);
  }
};

// total = sum * exp(shift); infinite maxima shift by 0 (+inf stays +inf, all -inf gives -inf).
struct LogSumExpAcc {
  struct State {
    double shift, sum;
  };
  GPU_D State identity() const { return {0, 0}; }
  GPU_D static State merge_states(State a, State b) {
    if (a.sum == 0) return b;
    if (b.sum == 0) return a;
    const double s = a.shift > b.shift ? a.shift : b.shift;
    return {s, a.sum * exp(a.shift - s) + b.sum * exp(b.shift - s)};
  }
  GPU_D void add(State& s, double x, int64_t) const {
    if (x != x) { s = {x, 1}; return; }  // NaN: stays NaN
    if (s.sum != s.sum) return;
    const double shift = isinf(x) ? 0.0 : x;
    s = merge_states(s, {shift, exp(x - shift)});
  }
  GPU_D State merge(State a, State b) const {
    if (a.sum != a.sum || a.shift != a.shift) return a;
    if (b.sum != b.sum || b.shift != b.shift) return b;
    return merge_states(a, b);
  }
  GPU_D void write(char* out, int32_t dtype, State s) const { store<double>(out, dtype, log(s.sum) + s.shift); }
};

template <class T, class F> GPU_D T block_merge(T v, F f) {
  __shared__ double raw[kThreads * 3];  // the largest State is 24 bytes; double-aligned
  T* buf = reinterpret_cast<T*>(raw);
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = f(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}

// Acc over elements [k0, k1) of output m's reduced range, thread-strided (neighbouring threads
// read neighbouring elements; an arg index still grows within a thread); valid in thread 0.
template <class A, class Acc>
GPU_D typename Acc::State reduce_more_range(const Reduction& r, const Acc& acc, int64_t m, int64_t k0, int64_t k1) {
  using State = typename Acc::State;
  int64_t base = 0, rest = m;
  for (int d = r.ndim_kept - 1; d >= 0; --d) {
    base += (rest % r.sizes[d]) * r.in.strides[d];
    rest /= r.sizes[d];
  }
  State s = acc.identity();
  for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
    int64_t off = base;
    rest = k;
    for (int d = r.ndim_kept + r.ndim_reduced - 1; d >= r.ndim_kept; --d) {
      off += (rest % r.sizes[d]) * r.in.strides[d];
      rest /= r.sizes[d];
    }
    acc.add(s, load<A>(r.in.data + off * r.in.itemsize, r.in.dtype), k);
  }
  return block_merge(s, [acc](State a, State b) { return acc.merge(a, b); });
}

// One block per output.
template <class A, class Acc>
__global__ void reduce_more_kernel(Reduction r, Acc acc) {
  for (int64_t m = blockIdx.x; m < r.kept; m += gridDim.x) {
    const auto s = reduce_more_range<A>(r, acc, m, 0, r.reduced);
    if (threadIdx.x == 0) acc.write(r.out.data + m * r.out.itemsize, r.out.dtype, s);
  }
}

// Split pass 1: block job = (m, s) leaves split s's state of output m in the partials.
template <class A, class Acc>
__global__ void reduce_more_splits_kernel(Reduction r, Acc acc) {
  using State = typename Acc::State;
  static_assert(sizeof(State) <= kReduceMorePartialBytes, "a partial state must fit its scratch slot");
  const int64_t chunk = reduction_chunk(r.reduced, r.splits);
  for (int64_t job = blockIdx.x; job < r.kept * r.splits; job += gridDim.x) {
    const int64_t m = job / r.splits, k0 = job % r.splits * chunk;
    const State s = reduce_more_range<A>(r, acc, m, k0, k0 + chunk < r.reduced ? k0 + chunk : r.reduced);
    if (threadIdx.x == 0) reinterpret_cast<State*>(r.partials)[job] = s;
  }
}

// Split pass 2: one thread per output merges its splits in order (reproducible; first indices
// of argmax/argmin kept across splits by the merge).
template <class Acc>
__global__ void reduce_more_merge_kernel(Reduction r, Acc acc) {
  using State = typename Acc::State;
  const State* partials = reinterpret_cast<const State*>(r.partials);
  grid_stride_loop(int64_t(blockIdx.x) * blockDim.x + threadIdx.x, int64_t(gridDim.x) * blockDim.x, r.kept,
                   [&](int64_t m) {
                     State s = acc.identity();
                     for (int64_t sp = 0; sp < r.splits; ++sp) s = acc.merge(s, partials[m * r.splits + sp]);
                     acc.write(r.out.data + m * r.out.itemsize, r.out.dtype, s);
                   });
}

template <class A, class Acc> void run(const Reduction& r, Acc acc, gpuStream_t s) {
  const unsigned threads = threads_for(r.splits > 1 ? reduction_chunk(r.reduced, r.splits) : r.reduced);
  if (r.splits > 1 && r.partials) {
    reduce_more_splits_kernel<A><<<rows_grid(r.kept * r.splits), threads, 0, s>>>(r, acc);
    check_launch("a reduction's first pass");
    reduce_more_merge_kernel<<<blocks_for(r.kept), kThreads, 0, s>>>(r, acc);
  } else {
    reduce_more_kernel<A><<<rows_grid(r.kept), threads, 0, s>>>(r, acc);
  }
  check_launch("a reduction");
}
}  // namespace

void launch_reduce_more(ReduceMoreOp op, Compute c, const Reduction& r, double correction, gpuStream_t s) {
  if (r.kept == 0) return;
  switch (op) {
    case ReduceMoreOp::Prod:
      if (c == Compute::Int64) return run<int64_t>(r, ProdAcc<int64_t>{}, s);
      return run<double>(r, ProdAcc<double>{}, s);
    case ReduceMoreOp::ArgMax:
      if (c == Compute::Int64) return run<int64_t>(r, ArgAcc<int64_t, true>{}, s);
      return run<double>(r, ArgAcc<double, true>{}, s);
    case ReduceMoreOp::ArgMin:
      if (c == Compute::Int64) return run<int64_t>(r, ArgAcc<int64_t, false>{}, s);
      return run<double>(r, ArgAcc<double, false>{}, s);
    case ReduceMoreOp::Var: return run<double>(r, MomentsAcc{correction, false}, s);
    case ReduceMoreOp::Std: return run<double>(r, MomentsAcc{correction, true}, s);
    case ReduceMoreOp::LogSumExp: return run<double>(r, LogSumExpAcc{}, s);
  }
}

}  // namespace tessera::gpu
