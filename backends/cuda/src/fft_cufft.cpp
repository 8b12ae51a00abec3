// torch.fft's three primitives through cuFFT: _fft_c2c, _fft_r2c and _fft_c2r, over any set of
// dims, with the CPU plugin's checks, messages and results (backends/cpu/src/fft.cpp). A
// transform over several dims is a 1-D transform per dim on a contiguous tensor: with the dim
// viewed as [outer, n, inner], inner == 1 is one batched plan over the outer lines, otherwise
// one plan over the inner lines (stride inner) run once per outer block. Plans are made per
// call; their scratch comes from the caching allocator. CUDA only (the ROCm build has no
// hipFFT here: its FFTs run on the CPU through the host's fallback).
#include "cuda_plugin.h"
#include "workspace.h"

#include <cufft.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera::gpu {
namespace {

void check_fft(cufftResult r, const char* what) {
  TS_SDK_CHECK(r == CUFFT_SUCCESS, r == CUFFT_ALLOC_FAILED ? TS_ERROR_OUT_OF_MEMORY : TS_ERROR, kName, ": ", what,
               " failed (cufftResult ", int(r), ")");
}

// A cuFFT plan, destroyed with the object.
struct Plan {
  cufftHandle h = 0;
  Plan() { check_fft(cufftCreate(&h), "cufftCreate"); }
  ~Plan() { cufftDestroy(h); }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
};

// The transform of every line along one dim: `n` points; the dim spans in_len elements of the
// input layout and out_len of the output (they differ for r2c and c2r); both contiguous.
struct Lines {
  int64_t outer = 1, inner = 1, n = 1, in_len = 1, out_len = 1;
};
Lines lines_of(std::span<const int64_t> shape, int64_t dim, int64_t n) {
  Lines g;
  g.n = g.in_len = g.out_len = n;
  for (int64_t d = 0; d < dim; ++d) g.outer *= shape[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) g.inner *= shape[d];
  return g;
}

void exec(cufftHandle h, cufftType type, char* in, char* out, bool forward) {
  const int direction = forward ? CUFFT_FORWARD : CUFFT_INVERSE;  // both unnormalised, as the CPU's
  switch (type) {
    case CUFFT_C2C:
      return check_fft(cufftExecC2C(h, reinterpret_cast<cufftComplex*>(in), reinterpret_cast<cufftComplex*>(out),
                                    direction), "cufftExecC2C");
    case CUFFT_Z2Z:
      return check_fft(cufftExecZ2Z(h, reinterpret_cast<cufftDoubleComplex*>(in),
                                    reinterpret_cast<cufftDoubleComplex*>(out), direction), "cufftExecZ2Z");
    case CUFFT_R2C:
      return check_fft(cufftExecR2C(h, reinterpret_cast<cufftReal*>(in), reinterpret_cast<cufftComplex*>(out)),
                       "cufftExecR2C");
    case CUFFT_D2Z:
      return check_fft(cufftExecD2Z(h, reinterpret_cast<cufftDoubleReal*>(in),
                                    reinterpret_cast<cufftDoubleComplex*>(out)), "cufftExecD2Z");
    case CUFFT_C2R:
      return check_fft(cufftExecC2R(h, reinterpret_cast<cufftComplex*>(in), reinterpret_cast<cufftReal*>(out)),
                       "cufftExecC2R");
    default:
      return check_fft(cufftExecZ2D(h, reinterpret_cast<cufftDoubleComplex*>(in),
                                    reinterpret_cast<cufftDoubleReal*>(out)), "cufftExecZ2D");
  }
}

// Runs the 1-D transforms of every line (`in` and `out` may be the same buffer for c2c).
void transform_lines(const TensorRef& in, const TensorRef& out, const Lines& g, cufftType type, bool forward) {
  if (in.numel() == 0 || out.numel() == 0) return;
  const int32_t dev = in.device().index;
  DeviceGuard guard(dev);
  gpuStream_t stream = stream_for(dev);
  long long n = g.n, in_embed = g.in_len, out_embed = g.out_len;
  const bool one_plan = g.inner == 1;
  const long long batch = one_plan ? g.outer : g.inner;
  const long long istride = one_plan ? 1 : g.inner, idist = one_plan ? g.in_len : 1;
  const long long ostride = one_plan ? 1 : g.inner, odist = one_plan ? g.out_len : 1;
  Plan plan;
  check_fft(cufftSetAutoAllocation(plan.h, 0), "cufftSetAutoAllocation");
  size_t work = 0;
  check_fft(cufftMakePlanMany64(plan.h, 1, &n, &in_embed, istride, idist, &out_embed, ostride, odist, type, batch,
                                &work), "cufftMakePlanMany64");
  Workspace scratch(dev, work, stream);
  TS_SDK_CHECK(scratch.ok, TS_ERROR_OUT_OF_MEMORY, kName, ": out of memory for cuFFT's ", int64_t(work),
               " bytes of scratch");
  if (work) check_fft(cufftSetWorkArea(plan.h, scratch.ptr), "cufftSetWorkArea");
  check_fft(cufftSetStream(plan.h, stream), "cufftSetStream");
  const int64_t in_block = g.in_len * g.inner * in.itemsize(), out_block = g.out_len * g.inner * out.itemsize();
  for (int64_t o = 0; o < (one_plan ? 1 : g.outer); ++o)
    exec(plan.h, type, first_element(in) + o * in_block, first_element(out) + o * out_block, forward);
}

// In place over the contiguous complex tensor t, along `dim`.
void c2c_along(const TensorRef& t, int64_t dim, bool forward) {
  transform_lines(t, t, lines_of(t.sizes(), dim, t.size(dim)), t.dtype() == TS_COMPLEX64 ? CUFFT_C2C : CUFFT_Z2Z,
                  forward);
}

// A new contiguous copy of complex `t` (the transforms run in place on it).
TensorRef complex_copy(ts_call call, const TensorRef& t) {
  TensorRef out = empty_on(call, t.sizes(), t.dtype(), t.device());
  copy_into("fft", out, t);
  return out;
}

// The real dtype view of a contiguous complex tensor: its numel * 2 parts, one dim.
TensorRef parts_of(ts_call call, const TensorRef& t) {
  const int64_t shape[] = {t.numel() * 2}, strides[] = {1};
  return sdk::alias_as(call, t, shape, strides, 0, sdk::real_dtype(t.dtype()));
}

// Multiplies the contiguous tensor t (real or complex) by the transform's normalisation.
enum Normalization : int64_t { kNoScale = 0, kByRootN = 1, kByN = 2 };
void normalize(ts_call call, const TensorRef& t, int64_t normalization, int64_t points) {
  if (normalization == kNoScale || points == 0 || t.numel() == 0) return;
  TensorRef parts = sdk::is_complex(t.dtype()) ? parts_of(call, t) : t;
  const double p = double(points);
  Loop L = make_loop("fft", parts.sizes(), {&parts, &parts, nullptr});
  L.scalar_d = normalization == kByN ? 1 / p : 1 / std::sqrt(p);
  DeviceGuard guard(t.device().index);
  launch_binary(BinaryOp::Mul, compute_for(parts.dtype()), L, stream_for(t.device().index));
}

int64_t points_over(const std::vector<int64_t>& dims, std::span<const int64_t> sizes) {
  int64_t n = 1;
  for (int64_t d : dims) n *= sizes[size_t(d)];
  return n;
}

// The input (argument 0), dims (1) and normalization (2), checked as the CPU plugin does.
struct Transform {
  TensorRef self;
  std::vector<int64_t> dims;
  int64_t normalization;
};
enum class Reads { Complex, Real };
Transform transform_args(const char* op, sdk::Args& a, Reads reads, bool needs_a_dim) {
  Transform t{a.tensor(0), {}, a.to_int(2)};
  common_device(op, {&t.self});
  const int32_t dtype = t.self.dtype();
  if (reads == Reads::Complex && !sdk::is_complex(dtype))
    sdk::fail(TS_ERROR_TYPE, op, ": expected a complex input tensor, got ", sdk::dtype_name(dtype));
  if (reads == Reads::Real && dtype != TS_FLOAT32 && dtype != TS_FLOAT64)
    sdk::fail(TS_ERROR_TYPE, op, ": expected a float32 or float64 input tensor, got ", sdk::dtype_name(dtype));
  if (t.normalization < kNoScale || t.normalization > kByN)
    sdk::fail(TS_ERROR_VALUE, op, ": normalization must be 0 (none), 1 (1/sqrt(n)) or 2 (1/n), got ", t.normalization);
  for (int64_t d : a.int_list(1)) {
    const int64_t w = wrap_dim(op, d, t.self.dim());
    if (std::find(t.dims.begin(), t.dims.end(), w) != t.dims.end())
      sdk::fail(TS_ERROR_VALUE, op, ": dims must be unique, got dim ", d, " twice");
    if (t.self.size(w) < 1)
      sdk::fail(TS_ERROR_VALUE, op, ": invalid number of data points (", t.self.size(w), ") specified for dim ", w);
    t.dims.push_back(w);
  }
  if (needs_a_dim && t.dims.empty()) sdk::fail(TS_ERROR_VALUE, op, ": expected at least one dim to transform");
  return t;
}

// _fft_c2c(Tensor self, int[] dim, int normalization, bool forward) -> Tensor
void fft_c2c(sdk::Args& a) {
  const auto [self, dims, normalization] = transform_args("_fft_c2c", a, Reads::Complex, false);
  const bool forward = a.to_bool(3);
  TensorRef out = complex_copy(a.call(), self);
  for (int64_t d : dims) c2c_along(out, d, forward);
  normalize(a.call(), out, normalization, points_over(dims, self.sizes()));
  a.return_tensor(std::move(out));
}

// _fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor
// Onesided: cuFFT's real transform along the last of `dim` (n/2 + 1 entries), then the other
// dims over the half that is kept. Two-sided: the complex transform of the input made complex.
void fft_r2c(sdk::Args& a) {
  const auto [self, dims, normalization] = transform_args("_fft_r2c", a, Reads::Real, true);
  const bool onesided = a.to_bool(3);
  const int32_t cdtype = sdk::complex_dtype(self.dtype());
  const int64_t last = dims.back(), n = self.size(last);
  TensorRef out;
  if (onesided) {
    std::vector<int64_t> shape = self.shape_vector();
    shape[size_t(last)] = n / 2 + 1;
    out = empty_on(a.call(), shape, cdtype, self.device());
    TensorRef in = contiguous(a.call(), self, self.dtype());
    Lines g = lines_of(self.sizes(), last, n);
    g.out_len = n / 2 + 1;
    transform_lines(in, out, g, cdtype == TS_COMPLEX64 ? CUFFT_R2C : CUFFT_D2Z, true);
    for (size_t k = 0; k + 1 < dims.size(); ++k) c2c_along(out, dims[k], true);
  } else {
    out = empty_on(a.call(), self.sizes(), cdtype, self.device());
    DeviceGuard guard(self.device().index);
    check(gpuMemsetAsync(out.data(), 0, size_t(out.numel() * out.itemsize()), stream_for(self.device().index)),
          "zeroing an fft's imaginary parts");
    std::vector<int64_t> strides = contiguous_strides(self.sizes());
    for (int64_t& s : strides) s *= 2;
    TensorRef real_parts = sdk::alias_as(a.call(), out, self.sizes(), strides, 0, self.dtype());
    copy_into("_fft_r2c", real_parts, self);
    for (int64_t d : dims) c2c_along(out, d, true);
  }
  normalize(a.call(), out, normalization, points_over(dims, self.sizes()));
  a.return_tensor(std::move(out));
}

// _fft_c2r(Tensor self, int[] dim, int normalization, int last_dim_size) -> Tensor
// The other dims' inverse complex transforms first, then cuFFT's real inverse along the last of
// `dim` from its first last_dim_size/2 + 1 entries (a Hermitian spectrum's half).
void fft_c2r(sdk::Args& a) {
  const auto [self, dims, normalization] = transform_args("_fft_c2r", a, Reads::Complex, true);
  const int64_t length = a.to_int(3);
  TS_SDK_CHECK(length >= 1, TS_ERROR_VALUE, "_fft_c2r: invalid number of data points (", length, ") specified");
  const int64_t last = dims.back(), half = length / 2 + 1;
  TS_SDK_CHECK(self.size(last) >= half, TS_ERROR_VALUE, "_fft_c2r: expected at least ", half, " entries along dim ",
               last, " for ", length, " output points, got ", self.size(last));
  std::vector<int64_t> out_shape = self.shape_vector();
  out_shape[size_t(last)] = length;
  // A copy in any case: the other dims transform in place, and cuFFT's c2r overwrites its input.
  TensorRef spectrum = complex_copy(a.call(), self);
  for (size_t k = 0; k + 1 < dims.size(); ++k) c2c_along(spectrum, dims[k], false);
  TensorRef out = empty_on(a.call(), out_shape, sdk::real_dtype(self.dtype()), self.device());
  Lines g = lines_of(self.sizes(), last, length);
  g.in_len = self.size(last);
  transform_lines(spectrum, out, g, self.dtype() == TS_COMPLEX64 ? CUFFT_C2R : CUFFT_Z2D, false);
  normalize(a.call(), out, normalization, points_over(dims, out_shape));
  a.return_tensor(std::move(out));
}
}  // namespace

void register_fft_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("_fft_c2c", key, fft_c2c);
  reg.kernel("_fft_r2c", key, fft_r2c);
  reg.kernel("_fft_c2r", key, fft_c2r);
}

}  // namespace tessera::gpu
