// torch.fft's three primitives (PyTorch's Core ATen set): _fft_c2c, _fft_r2c and _fft_c2r, over
// any set of dims, through KISS FFT's mixed-radix C++ template (float and double; Bluestein's
// algorithm over it for lengths with a large prime factor: fft_plan.h). A transform
// over several dims is a 1-D transform per dim, each applied to every line along that dim;
// lines are split across threads, each with its own plan (a plan's scratch buffer is not
// shareable). Results are contiguous.
#include "fft_plan.h"
#include "kernels.h"
#include "tensor_iterator.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <vector>

namespace tessera::cpu {
namespace {

using sdk::fail;

// PyTorch's fft_norm_mode: what the transform is scaled by.
enum Normalization : int64_t { kNoScale = 0, kByRootN = 1, kByN = 2 };

// The lines of a contiguous tensor along `dim`: `count` lines of `length` elements, element k of
// line l at (l / inner) * length * inner + l % inner + k * inner.
struct Lines {
  int64_t count, length, inner;
  int64_t start(int64_t l) const { return (l / inner) * length * inner + l % inner; }
};
Lines lines_of(const TensorRef& t, int64_t dim) {
  const int64_t length = t.size(dim);
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= t.size(d);
  return {length == 0 ? 0 : t.numel() / length, length, inner};
}

// Runs line_fn(plan, in_buffer, out_buffer, line) over every line, in parallel; the buffers hold
// `n` complex values and the plan transforms `n` points.
template <class R, class F>
void for_each_line(int64_t lines, int64_t n, bool inverse, F line_fn) {
  using C = std::complex<R>;
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(n, 1));
  parallel_for(lines, grain, [&](int64_t begin, int64_t end) {
    LinePlan<R> plan(n, inverse);
    std::vector<C> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (int64_t l = begin; l < end; ++l) line_fn(plan, in.data(), out.data(), l);
  });
}

// Transforms every line of the contiguous complex tensor `t` along `dim`, in place.
template <class R>
void transform_in_place(const TensorRef& t, int64_t dim, bool forward) {
  using C = std::complex<R>;
  const Lines g = lines_of(t, dim);
  C* base = t.data<C>();
  for_each_line<R>(g.count, g.length, !forward, [&](LinePlan<R>& plan, C* in, C* out, int64_t l) {
    C* p = base + g.start(l);
    for (int64_t k = 0; k < g.length; ++k) in[k] = p[k * g.inner];
    plan.transform(in, out);
    for (int64_t k = 0; k < g.length; ++k) p[k * g.inner] = out[k];
  });
}

// Multiplies every element of the contiguous tensor `t` (value type V) by the normalisation of
// a transform over `points` points.
template <class V, class R>
void normalize(const TensorRef& t, int64_t normalization, int64_t points) {
  if (normalization == kNoScale || points == 0) return;
  const R scale = normalization == kByN ? R(1) / R(points) : R(1) / std::sqrt(R(points));
  V* p = t.data<V>();
  parallel_for(t.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p[i] *= scale;
  });
}

int64_t points_over(const std::vector<int64_t>& dims, std::span<const int64_t> sizes) {
  int64_t n = 1;
  for (int64_t d : dims) n *= sizes[size_t(d)];
  return n;
}

// A transform's input (argument 0), dims (1) and normalization (2), checked: on the CPU, of the
// dtype the transform reads (complex, or float32/float64), dims distinct and each of nonzero
// length, at least one when the transform needs a last dim.
struct Transform {
  TensorRef self;
  std::vector<int64_t> dims;
  int64_t normalization;
};
enum class Reads { Complex, Real };
Transform transform_args(const char* op, sdk::Args& a, Reads reads, bool needs_a_dim) {
  Transform t{a.tensor(0), {}, a.to_int(2)};
  const TensorRef* ts[] = {&t.self};
  check_cpu(op, ts);
  const int32_t dtype = t.self.dtype();
  if (reads == Reads::Complex && !sdk::is_complex(dtype))
    fail(TS_ERROR_TYPE, op, ": expected a complex input tensor, got ", sdk::dtype_name(dtype));
  if (reads == Reads::Real && dtype != TS_FLOAT32 && dtype != TS_FLOAT64)
    fail(TS_ERROR_TYPE, op, ": expected a float32 or float64 input tensor, got ", sdk::dtype_name(dtype));
  if (t.normalization < kNoScale || t.normalization > kByN)
    fail(TS_ERROR_VALUE, op, ": normalization must be 0 (none), 1 (1/sqrt(n)) or 2 (1/n), got ", t.normalization);
  for (int64_t d : a.int_list(1)) {
    const int64_t w = wrap_dim(op, d, t.self.dim());
    if (std::find(t.dims.begin(), t.dims.end(), w) != t.dims.end())
      fail(TS_ERROR_VALUE, op, ": dims must be unique, got dim ", d, " twice");
    if (t.self.size(w) < 1)
      fail(TS_ERROR_VALUE, op, ": invalid number of data points (", t.self.size(w), ") specified for dim ", w);
    t.dims.push_back(w);
  }
  if (needs_a_dim && t.dims.empty()) fail(TS_ERROR_VALUE, op, ": expected at least one dim to transform");
  return t;
}

// _fft_c2c(Tensor self, int[] dim, int normalization, bool forward) -> Tensor
void fft_c2c(sdk::Args& a) {
  const auto [self, dims, normalization] = transform_args("_fft_c2c", a, Reads::Complex, false);
  const bool forward = a.to_bool(3);
  TensorRef out = convert(a.call(), self, self.dtype(), "_fft_c2c");
  TS_DISPATCH_COMPLEX(self.dtype(), , {
    using R = typename scalar_t::value_type;
    for (int64_t d : dims) transform_in_place<R>(out, d, forward);
    normalize<scalar_t, R>(out, normalization, points_over(dims, self.sizes()));
  });
  a.return_tensor(std::move(out));
}

// The contiguous complex tensor holding the first `keep` entries of `t` along `dim`.
TensorRef leading_entries(ts_call call, const TensorRef& t, int64_t dim, int64_t keep) {
  std::vector<int64_t> shape = t.shape_vector();
  shape[size_t(dim)] = keep;
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  TensorRef view = sdk::alias(call, t, shape, strides, sdk::host().tensor_storage_offset(t.handle()));
  return convert(call, view, t.dtype(), "_fft_r2c");
}

// _fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor
// The last dim of `dim` is transformed first, then (onesided) cut to n/2 + 1 entries, so the
// other dims transform only the half that is kept.
void fft_r2c(sdk::Args& a) {
  const auto [self, dims, normalization] = transform_args("_fft_r2c", a, Reads::Real, true);
  const bool onesided = a.to_bool(3);
  TensorRef out = convert(a.call(), self, sdk::complex_dtype(self.dtype()), "_fft_r2c");
  const int64_t last = dims.back();
  TS_DISPATCH_COMPLEX(out.dtype(), , {
    using R = typename scalar_t::value_type;
    transform_in_place<R>(out, last, true);
    if (onesided) out = leading_entries(a.call(), out, last, self.size(last) / 2 + 1);
    for (size_t k = 0; k + 1 < dims.size(); ++k) transform_in_place<R>(out, dims[k], true);
    normalize<scalar_t, R>(out, normalization, points_over(dims, self.sizes()));
  });
  a.return_tensor(std::move(out));
}

// _fft_c2r(Tensor self, int[] dim, int normalization, int last_dim_size) -> Tensor
// The input holds the first last_dim_size/2 + 1 entries of a Hermitian spectrum along the last
// dim; the other half is their conjugate mirror. The imaginary parts of the zero (and, for an
// even length, the Nyquist) entry are ignored, as every real inverse transform does.
void fft_c2r(sdk::Args& a) {
  const auto [self, dims, normalization] = transform_args("_fft_c2r", a, Reads::Complex, true);
  const int64_t length = a.to_int(3);
  if (length < 1) fail(TS_ERROR_VALUE, "_fft_c2r: invalid number of data points (", length, ") specified");
  std::vector<int64_t> out_shape = self.shape_vector();
  const int64_t last = dims.back();
  const int64_t half = length / 2 + 1;
  if (self.size(last) < half)
    fail(TS_ERROR_VALUE, "_fft_c2r: expected at least ", half, " entries along dim ", last, " for ", length,
         " output points, got ", self.size(last));
  out_shape[size_t(last)] = length;
  TensorRef spectrum = convert(a.call(), self, self.dtype(), "_fft_c2r");
  TensorRef out = sdk::empty(a.call(), out_shape, sdk::real_dtype(self.dtype()), kCpuDevice);
  TS_DISPATCH_COMPLEX(self.dtype(), , {
    using R = typename scalar_t::value_type;
    using C = scalar_t;
    for (size_t k = 0; k + 1 < dims.size(); ++k) transform_in_place<R>(spectrum, dims[k], false);
    const Lines in_lines = lines_of(spectrum, last), out_lines = lines_of(out, last);
    const C* src = spectrum.data<C>();
    R* dst = out.data<R>();
    for_each_line<R>(out_lines.count, length, true, [&](LinePlan<R>& plan, C* in, C* res, int64_t l) {
      const C* p = src + in_lines.start(l);
      for (int64_t k = 0; k < half; ++k) in[k] = p[k * in_lines.inner];
      for (int64_t k = half; k < length; ++k) in[k] = std::conj(in[length - k]);
      plan.transform(in, res);
      R* q = dst + out_lines.start(l);
      for (int64_t k = 0; k < length; ++k) q[k * out_lines.inner] = res[k].real();
    });
    normalize<R, R>(out, normalization, points_over(dims, out_shape));
  });
  a.return_tensor(std::move(out));
}

}  // namespace

void register_fft_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("_fft_c2c", key, fft_c2c);
  reg.kernel("_fft_r2c", key, fft_r2c);
  reg.kernel("_fft_c2r", key, fft_c2r);
}

}  // namespace tessera::cpu
