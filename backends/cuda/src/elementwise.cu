// The element-wise engine: one grid-stride kernel per (operation, compute type, index width).
// Operands of any dtype, strides and broadcasting are read through device_io.cuh, so the
// number of instances is ops x 3 compute types x 2 index widths, not ops x dtypes^2.
#include "map.cuh"

#include <cmath>
#include <type_traits>

namespace tessera::gpu {
namespace {

template <int N, class F>
void run(const Loop& L, gpuStream_t s, F f, const char* what) { run_map<N>(L, s, f, what); }

// ---- unary
template <class C> GPU_D C apply_unary(UnaryOp op, C x) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Abs: return x < C(0) ? -x : x;
    case UnaryOp::Relu: return x > C(0) ? x : C(0);
    default: return x;
  }
}
template <class C> GPU_D C apply_float_unary(UnaryOp op, C x) {
  const C one = C(1), half = C(0.5);
  switch (op) {
    case UnaryOp::Exp: return exp(x);
    case UnaryOp::Log: return log(x);
    case UnaryOp::Sqrt: return sqrt(x);
    case UnaryOp::Rsqrt: return rsqrt(x);
    case UnaryOp::Sin: return sin(x);
    case UnaryOp::Cos: return cos(x);
    case UnaryOp::Tanh: return tanh(x);
    case UnaryOp::Sigmoid: return one / (one + exp(-x));
    case UnaryOp::Gelu: return half * x * (one + erf(x * C(0.70710678118654752440)));
    case UnaryOp::GeluTanh: {
      const C k = C(0.79788456080286535588);  // sqrt(2/pi)
      return half * x * (one + tanh(k * (x + C(0.044715) * x * x * x)));
    }
    case UnaryOp::Silu: return x / (one + exp(-x));
    case UnaryOp::Relu: return x != x ? x : (x > C(0) ? x : C(0));
    default: return apply_unary(op, x);
  }
}

template <class C> struct UnaryF {
  UnaryOp op;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[2]) const {
    C x = load<C>(at(L.ops[1], off[1]), L.ops[1].dtype);
    C y;
    if constexpr (std::is_floating_point_v<C>) y = apply_float_unary(op, x); else y = apply_unary(op, x);
    store<C>(at(L.ops[0], off[0]), L.ops[0].dtype, y);
  }
};

// ---- binary
template <class C> struct BinaryF {
  BinaryOp op;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[3]) const {
    C a = load<C>(at(L.ops[1], off[1]), L.ops[1].dtype);
    C b;
    if (L.ops[2].data) b = load<C>(at(L.ops[2], off[2]), L.ops[2].dtype);
    else if constexpr (std::is_floating_point_v<C>) b = C(L.scalar_d);
    else b = C(L.scalar_i);
    char* out = at(L.ops[0], off[0]);
    int32_t od = L.ops[0].dtype;
    switch (op) {
      case BinaryOp::Add: {
        C alpha = std::is_floating_point_v<C> ? C(L.alpha_d) : C(L.alpha_i);
        store<C>(out, od, a + alpha * b);
        break;
      }
      case BinaryOp::Mul: store<C>(out, od, a * b); break;
      case BinaryOp::Div: store<C>(out, od, a / b); break;
      case BinaryOp::Eq: store<int64_t>(out, od, a == b); break;
      case BinaryOp::Ne: store<int64_t>(out, od, a != b); break;
      case BinaryOp::Lt: store<int64_t>(out, od, a < b); break;
      case BinaryOp::Le: store<int64_t>(out, od, a <= b); break;
      case BinaryOp::Gt: store<int64_t>(out, od, a > b); break;
      case BinaryOp::Ge: store<int64_t>(out, od, a >= b); break;
    }
  }
};

template <class C> struct WhereF {
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[4]) const {
    bool cond = load<int64_t>(at(L.ops[1], off[1]), L.ops[1].dtype) != 0;
    const Operand& pick = cond ? L.ops[2] : L.ops[3];
    store<C>(at(L.ops[0], off[0]), L.ops[0].dtype, load<C>(at(pick, off[cond ? 2 : 3]), pick.dtype));
  }
};

template <class C> struct ConvertF {
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[2]) const {
    store<C>(at(L.ops[0], off[0]), L.ops[0].dtype, load<C>(at(L.ops[1], off[1]), L.ops[1].dtype));
  }
};

struct Bytes16 { uint64_t lo, hi; };  // a complex128 element
template <class W> struct BytesF {  // same dtype: move the bits
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[2]) const {
    *reinterpret_cast<W*>(at(L.ops[0], off[0])) = *reinterpret_cast<const W*>(at(L.ops[1], off[1]));
  }
};

template <class C> struct FillF {
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[1]) const {
    C v = std::is_floating_point_v<C> ? C(L.scalar_d) : C(L.scalar_i);
    store<C>(at(L.ops[0], off[0]), L.ops[0].dtype, v);
  }
};

bool is_float_dtype(int32_t d) { return d >= kFloat16; }

// ---- the dense fast path. When every operand is one contiguous run of the same floating dtype
// (the loop coalesced to one dim of stride 1; a Scalar right-hand side allowed) and 16-byte
// aligned, each thread moves 16 bytes per operand with one vector load or store, and the element
// type is a template parameter instead of a per-element dtype switch: bandwidth-bound kernels
// then run at the memory's speed. Every other case takes the general loop above.
template <int32_t D> struct Elem;  // storage type, compute type and conversions of dtype D
template <> struct Elem<kFloat32> {
  using T = float;
  using C = float;
  static GPU_D C get(T x) { return x; }
  static GPU_D T put(C x) { return x; }
};
template <> struct Elem<kFloat64> {
  using T = double;
  using C = double;
  static GPU_D C get(T x) { return x; }
  static GPU_D T put(C x) { return x; }
};
template <> struct Elem<kFloat16> {
  using T = uint16_t;
  using C = float;
  static GPU_D C get(T x) { return half_bits_to_float(x); }
  static GPU_D T put(C x) { return float_to_half_bits(x); }
};
template <> struct Elem<kBFloat16> {
  using T = uint16_t;
  using C = float;
  static GPU_D C get(T x) { return bf16_bits_to_float(x); }
  static GPU_D T put(C x) { return float_to_bf16_bits(x); }
};

template <class T> struct alignas(16) Pack {
  T v[16 / sizeof(T)];
};

// out[i] = f(a[i]) (Binary false) or f(a[i], b[i]) (Binary true) over n elements.
template <int32_t D, bool Binary, class F>
__global__ void dense_kernel(char* out, const char* a, const char* b, int64_t n, F f) {
  using E = Elem<D>;
  using T = typename E::T;
  constexpr int V = 16 / int(sizeof(T));
  const int64_t packs = n / V, first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t p = first; p < packs; p += stride) {
    const Pack<T> x = reinterpret_cast<const Pack<T>*>(a)[p];
    Pack<T> y, r;
    if constexpr (Binary) y = reinterpret_cast<const Pack<T>*>(b)[p];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if constexpr (Binary) r.v[k] = E::put(f(E::get(x.v[k]), E::get(y.v[k])));
      else r.v[k] = E::put(f(E::get(x.v[k])));
    }
    reinterpret_cast<Pack<T>*>(out)[p] = r;
  }
  for (int64_t i = packs * V + first; i < n; i += stride) {  // the last n % V elements
    const T x = reinterpret_cast<const T*>(a)[i];
    if constexpr (Binary) reinterpret_cast<T*>(out)[i] = E::put(f(E::get(x), E::get(reinterpret_cast<const T*>(b)[i])));
    else reinterpret_cast<T*>(out)[i] = E::put(f(E::get(x)));
  }
}

// The dtype of a loop that can take the dense path, or -1.
int32_t dense_dtype(const Loop& L) {
  const int32_t d = L.ops[0].dtype;
  if (L.ndim != 1 || (d != kFloat32 && d != kFloat64 && d != kFloat16 && d != kBFloat16)) return -1;
  for (int k = 0; k < L.noperands; ++k) {
    const Operand& o = L.ops[k];
    if (!o.data) {  // a Scalar: only as the right-hand side
      if (k < 2) return -1;
      continue;
    }
    if (o.dtype != d || o.strides[0] != 1 || reinterpret_cast<uintptr_t>(o.data) % 16 != 0) return -1;
  }
  return d;
}

template <int32_t D, bool Binary, class F>
void run_dense(const Loop& L, gpuStream_t s, F f, const char* what) {
  const int64_t packs = (L.numel + 16 / itemsize_of(D) - 1) / (16 / itemsize_of(D));
  dense_kernel<D, Binary><<<blocks_for(packs), kThreads, 0, s>>>(L.ops[0].data, L.ops[1].data,
                                                                  Binary ? L.ops[2].data : nullptr, L.numel, f);
  check_launch(what);
}

template <class C> struct DenseUnary {
  UnaryOp op;
  GPU_D C operator()(C x) const { return apply_float_unary(op, x); }
};
template <class C> struct DenseBinary {
  BinaryOp op;
  C alpha;
  GPU_D C operator()(C a, C b) const {
    return op == BinaryOp::Add ? a + alpha * b : op == BinaryOp::Mul ? a * b : a / b;
  }
};
template <class C> struct DenseBinaryScalar {  // the right-hand side is a Scalar
  DenseBinary<C> f;
  C b;
  GPU_D C operator()(C a) const { return f(a, b); }
};

// Calls run(dtype tag) for the loop's dense dtype and returns true; false when the loop cannot
// take the dense path.
template <class Run> bool on_dense_path(const Loop& L, Run run) {
  switch (L.numel > 0 ? dense_dtype(L) : -1) {
    case kFloat32: run(std::integral_constant<int32_t, kFloat32>{}); return true;
    case kFloat64: run(std::integral_constant<int32_t, kFloat64>{}); return true;
    case kFloat16: run(std::integral_constant<int32_t, kFloat16>{}); return true;
    case kBFloat16: run(std::integral_constant<int32_t, kBFloat16>{}); return true;
    default: return false;
  }
}

bool dense_unary(UnaryOp op, const Loop& L, gpuStream_t s) {
  return on_dense_path(L, [&](auto dtype) {
    constexpr int32_t D = decltype(dtype)::value;
    run_dense<D, false>(L, s, DenseUnary<typename Elem<D>::C>{op}, "a unary kernel");
  });
}

bool dense_binary(BinaryOp op, const Loop& L, gpuStream_t s) {
  if (op != BinaryOp::Add && op != BinaryOp::Mul && op != BinaryOp::Div) return false;  // comparisons store bool
  return on_dense_path(L, [&](auto dtype) {
    constexpr int32_t D = decltype(dtype)::value;
    using C = typename Elem<D>::C;
    const DenseBinary<C> f{op, C(L.alpha_d)};
    if (L.ops[2].data) run_dense<D, true>(L, s, f, "a binary kernel");
    else run_dense<D, false>(L, s, DenseBinaryScalar<C>{f, C(L.scalar_d)}, "a binary kernel");
  });
}
}  // namespace

void launch_unary(UnaryOp op, Compute c, const Loop& L, gpuStream_t s) {
  if (dense_unary(op, L, s)) return;
  switch (c) {
    case Compute::Float: return run<2>(L, s, UnaryF<float>{op}, "a unary kernel");
    case Compute::Double: return run<2>(L, s, UnaryF<double>{op}, "a unary kernel");
    case Compute::Int64: return run<2>(L, s, UnaryF<int64_t>{op}, "a unary kernel");
  }
}

void launch_binary(BinaryOp op, Compute c, const Loop& L, gpuStream_t s) {
  if (dense_binary(op, L, s)) return;
  switch (c) {
    case Compute::Float: return run<3>(L, s, BinaryF<float>{op}, "a binary kernel");
    case Compute::Double: return run<3>(L, s, BinaryF<double>{op}, "a binary kernel");
    case Compute::Int64: return run<3>(L, s, BinaryF<int64_t>{op}, "a binary kernel");
  }
}

void launch_where(Compute c, const Loop& L, gpuStream_t s) {
  switch (c) {
    case Compute::Float: return run<4>(L, s, WhereF<float>{}, "where");
    case Compute::Double: return run<4>(L, s, WhereF<double>{}, "where");
    case Compute::Int64: return run<4>(L, s, WhereF<int64_t>{}, "where");
  }
}

void launch_copy(const Loop& L, gpuStream_t s) {
  int32_t od = L.ops[0].dtype, id = L.ops[1].dtype;
  if (od == id) {
    switch (L.ops[0].itemsize) {
      case 1: return run<2>(L, s, BytesF<uint8_t>{}, "a copy");
      case 2: return run<2>(L, s, BytesF<uint16_t>{}, "a copy");
      case 4: return run<2>(L, s, BytesF<uint32_t>{}, "a copy");
      case 16: return run<2>(L, s, BytesF<Bytes16>{}, "a copy");
      default: return run<2>(L, s, BytesF<uint64_t>{}, "a copy");
    }
  }
  // Floating on either side converts through double (float -> int truncates toward zero);
  // integer to integer stays exact in int64.
  if (is_float_dtype(od) || is_float_dtype(id)) return run<2>(L, s, ConvertF<double>{}, "a conversion");
  run<2>(L, s, ConvertF<int64_t>{}, "a conversion");
}

void launch_fill(const Loop& L, gpuStream_t s) {
  if (is_float_dtype(L.ops[0].dtype)) return run<1>(L, s, FillF<double>{}, "fill_");
  run<1>(L, s, FillF<int64_t>{}, "fill_");
}

}  // namespace tessera::gpu
