// torch.fft over the three transform primitives (_fft_c2c, _fft_r2c, _fft_c2r): argument
// handling as PyTorch's (n / s resize the input by cutting or zero-padding, dims default to the
// last or all, norm "backward" | "ortho" | "forward"), the Hermitian variants (1-D and n-D),
// the shifts and the sample frequencies.
#include "composite.h"

#include <algorithm>
#include <string_view>

namespace tessera::composites {
namespace {

// PyTorch's fft_norm_mode for a norm string and a direction: the forward transform is unscaled
// by default ("backward"), the inverse scaled by 1/n; "forward" swaps them; "ortho" scales both
// by 1/sqrt(n).
int64_t norm_mode(const char* op, std::optional<std::string_view> norm, bool forward) {
  const std::string_view n = norm.value_or("backward");
  if (n == "backward") return forward ? 0 : 2;
  if (n == "forward") return forward ? 2 : 0;
  if (n == "ortho") return 1;
  fail(TS_ERROR_VALUE, op, ": invalid normalization mode: \"", n, "\" (expected \"forward\", \"backward\" or \"ortho\")");
}

// x promoted to a floating dtype (integers and bool to the default float).
TensorRef to_floating(const TensorRef& x) {
  return sdk::is_inexact(x.dtype()) ? x : ops::to(x, sdk::default_float_dtype());
}
TensorRef to_complex(const TensorRef& x) {
  TensorRef f = to_floating(x);
  return sdk::is_complex(f.dtype()) ? f : ops::to(f, sdk::complex_dtype(f.dtype()));
}
void require_real(const char* op, const TensorRef& x) {
  if (sdk::is_complex(x.dtype()))
    fail(TS_ERROR_TYPE, op, ": expected a real input tensor, got ", sdk::dtype_name(x.dtype()));
}

// x cut or zero-padded to `length` entries along `dim`.
TensorRef resize_dim(const char* op, const TensorRef& x, int64_t dim, int64_t length) {
  if (length < 1) fail(TS_ERROR_VALUE, op, ": invalid number of data points (", length, ") specified");
  const int64_t have = x.size(dim);
  if (length == have) return x;
  if (length < have) return ops::narrow(x, dim, 0, length);
  IntList pad(size_t(2 * (x.dim() - dim)), 0);
  pad.back() = length - have;  // pairs run from the last dim: dim's pair is the final one
  return ops::constant_pad_nd(x, pad, Scalar(0.0));
}

// ---- one dim
struct OneDim {
  TensorRef x;
  int64_t dim;
};
OneDim one_dim(const char* op, const TensorRef& self, std::optional<int64_t> n, int64_t dim) {
  if (self.dim() == 0) fail(TS_ERROR_VALUE, op, ": expected a tensor with at least one dimension, got a 0-d tensor");
  const int64_t d = wrap_dim(op, dim, self.dim());
  return {n ? resize_dim(op, self, d, *n) : self, d};
}

// fft / ifft: complex-to-complex; a real input is transformed as real (its spectrum is full).
TensorRef c2c_1d(const char* op, Args& a, bool forward) {
  const TensorRef self = a.tensor(0);
  const int64_t mode = norm_mode(op, a.optional_str(3), forward);
  OneDim in = one_dim(op, self, a.optional_int(1), a.to_int(2));
  TensorRef x = to_floating(in.x);
  if (sdk::is_complex(x.dtype())) return ops::_fft_c2c(x, {in.dim}, mode, forward);
  TensorRef spectrum = ops::_fft_r2c(x, {in.dim}, mode, false);
  return forward ? spectrum : ops::conj(spectrum);  // the inverse of a real signal is the conjugate
}
void fft(Args& a) { a.return_tensor(c2c_1d("fft_fft", a, true)); }
void ifft(Args& a) { a.return_tensor(c2c_1d("fft_ifft", a, false)); }


void rfft(Args& a) {
  require_real("fft_rfft", a.tensor(0));
  OneDim in = one_dim("fft_rfft", to_floating(a.tensor(0)), a.optional_int(1), a.to_int(2));
  a.return_tensor(ops::_fft_r2c(in.x, {in.dim}, norm_mode("fft_rfft", a.optional_str(3), true), true));
}

// irfft / hfft: n output points (default 2 * (m - 1)) from the first n/2 + 1 entries.
TensorRef c2r_1d(const char* op, Args& a, bool hermitian_forward) {
  const int64_t mode = norm_mode(op, a.optional_str(3), hermitian_forward);  // arguments first, then work
  const TensorRef self = to_complex(a.tensor(0));
  if (self.dim() == 0) fail(TS_ERROR_VALUE, op, ": expected a tensor with at least one dimension, got a 0-d tensor");
  const int64_t d = wrap_dim(op, a.to_int(2), self.dim());
  const int64_t n = a.optional_int(1).value_or(2 * (self.size(d) - 1));
  if (n < 1) fail(TS_ERROR_VALUE, op, ": invalid number of data points (", n, ") specified");
  TensorRef x = resize_dim(op, self, d, n / 2 + 1);
  if (hermitian_forward) x = ops::conj(x);
  return ops::_fft_c2r(x, {d}, mode, n);
}
void irfft(Args& a) { a.return_tensor(c2r_1d("fft_irfft", a, false)); }
void hfft(Args& a) { a.return_tensor(c2r_1d("fft_hfft", a, true)); }

void ihfft(Args& a) {
  require_real("fft_ihfft", a.tensor(0));
  OneDim in = one_dim("fft_ihfft", to_floating(a.tensor(0)), a.optional_int(1), a.to_int(2));
  a.return_tensor(ops::conj(ops::_fft_r2c(in.x, {in.dim}, norm_mode("fft_ihfft", a.optional_str(3), false), true)));
}

// ---- several dims: (s, dim) as PyTorch reads them. dim None: the last len(s) dims, or all;
// s None: the input's sizes; an entry -1 of s keeps that dim's size.
struct Dims {
  IntList dims;
  std::vector<std::optional<int64_t>> sizes;  // per dim: the requested length, if any
};
Dims canonical_dims(const char* op, const TensorRef& x, std::optional<std::span<const int64_t>> s,
                    std::optional<std::span<const int64_t>> dim) {
  Dims out;
  if (dim) {
    for (int64_t d : *dim) {
      const int64_t w = wrap_dim(op, d, x.dim());
      if (std::find(out.dims.begin(), out.dims.end(), w) != out.dims.end())
        fail(TS_ERROR_VALUE, op, ": dims must be unique, got dim ", d, " twice");
      out.dims.push_back(w);
    }
    if (s && s->size() != out.dims.size())
      fail(TS_ERROR_VALUE, op, ": when given, dim and shape arguments must have the same length, got ", s->size(),
           " sizes and ", out.dims.size(), " dims");
  } else if (s) {
    if (int64_t(s->size()) > x.dim())
      fail(TS_ERROR_VALUE, op, ": got shape with ", s->size(), " values but input tensor only has ", x.dim(),
           " dimensions");
    for (int64_t d = x.dim() - int64_t(s->size()); d < x.dim(); ++d) out.dims.push_back(d);
  } else {
    for (int64_t d = 0; d < x.dim(); ++d) out.dims.push_back(d);
  }
  for (size_t k = 0; k < out.dims.size(); ++k) {
    std::optional<int64_t> len;
    if (s && (*s)[k] != -1) len = (*s)[k];
    out.sizes.push_back(len);
  }
  return out;
}
TensorRef resize_dims(const char* op, TensorRef x, const Dims& d, size_t count) {
  for (size_t k = 0; k < count; ++k)
    if (d.sizes[k]) x = resize_dim(op, x, d.dims[k], *d.sizes[k]);
  return x;
}

TensorRef fftn_like(const char* op, Args& a, bool forward) {
  TensorRef x = to_complex(a.tensor(0));
  Dims d = canonical_dims(op, x, a.optional_int_list(1), a.optional_int_list(2));
  x = resize_dims(op, x, d, d.dims.size());
  if (d.dims.empty()) return x;
  return ops::_fft_c2c(x, d.dims, norm_mode(op, a.optional_str(3), forward), forward);
}
void fftn(Args& a) { a.return_tensor(fftn_like("fft_fftn", a, true)); }
void ifftn(Args& a) { a.return_tensor(fftn_like("fft_ifftn", a, false)); }
void fft2(Args& a) { a.return_tensor(fftn_like("fft_fft2", a, true)); }
void ifft2(Args& a) { a.return_tensor(fftn_like("fft_ifft2", a, false)); }

// rfftn, and with `hermitian_inverse` ihfftn: the conjugate of the one-sided spectrum under the
// inverse transform's normalisation (the inverse of hfftn, as ihfft is of hfft).
TensorRef rfftn_like(const char* op, Args& a, bool hermitian_inverse = false) {
  require_real(op, a.tensor(0));
  TensorRef x = to_floating(a.tensor(0));
  Dims d = canonical_dims(op, x, a.optional_int_list(1), a.optional_int_list(2));
  if (d.dims.empty()) fail(TS_ERROR_VALUE, op, ": must transform at least one axis");
  x = resize_dims(op, x, d, d.dims.size());
  TensorRef spectrum = ops::_fft_r2c(x, d.dims, norm_mode(op, a.optional_str(3), !hermitian_inverse), true);
  return hermitian_inverse ? ops::conj(spectrum) : spectrum;
}
void rfftn(Args& a) { a.return_tensor(rfftn_like("fft_rfftn", a)); }
void rfft2(Args& a) { a.return_tensor(rfftn_like("fft_rfft2", a)); }
void ihfftn(Args& a) { a.return_tensor(rfftn_like("fft_ihfftn", a, true)); }
void ihfft2(Args& a) { a.return_tensor(rfftn_like("fft_ihfft2", a, true)); }

// irfftn: the last dim's output length is s[-1], or 2 * (m - 1). With `hermitian_forward`,
// hfftn: the forward transform of a signal Hermitian in the last dim (its conjugate's c2r under
// the forward normalisation, as hfft).
TensorRef irfftn_like(const char* op, Args& a, bool hermitian_forward = false) {
  const int64_t mode = norm_mode(op, a.optional_str(3), hermitian_forward);  // arguments first, then work
  TensorRef x = to_complex(a.tensor(0));
  Dims d = canonical_dims(op, x, a.optional_int_list(1), a.optional_int_list(2));
  if (d.dims.empty()) fail(TS_ERROR_VALUE, op, ": must transform at least one axis");
  const int64_t last = d.dims.back();
  const int64_t length = d.sizes.back().value_or(2 * (x.size(last) - 1));
  if (length < 1) fail(TS_ERROR_VALUE, op, ": invalid number of data points (", length, ") specified");
  x = resize_dims(op, x, d, d.dims.size() - 1);
  x = resize_dim(op, x, last, length / 2 + 1);
  if (hermitian_forward) x = ops::conj(x);
  return ops::_fft_c2r(x, d.dims, mode, length);
}
void irfftn(Args& a) { a.return_tensor(irfftn_like("fft_irfftn", a)); }
void irfft2(Args& a) { a.return_tensor(irfftn_like("fft_irfft2", a)); }
void hfftn(Args& a) { a.return_tensor(irfftn_like("fft_hfftn", a, true)); }
void hfft2(Args& a) { a.return_tensor(irfftn_like("fft_hfft2", a, true)); }

// fftshift moves the zero frequency to the centre (a roll by n // 2); ifftshift undoes it.
TensorRef shift(const TensorRef& x, std::optional<std::span<const int64_t>> dim, bool inverse) {
  IntList dims, shifts;
  if (dim) {
    for (int64_t d : *dim) dims.push_back(wrap_dim(inverse ? "fft_ifftshift" : "fft_fftshift", d, x.dim()));
  } else {
    for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  }
  if (dims.empty()) return x;
  for (int64_t d : dims) shifts.push_back(inverse ? (x.size(d) + 1) / 2 : x.size(d) / 2);
  return ops::roll(x, shifts, dims);
}
void fftshift(Args& a) { a.return_tensor(shift(a.tensor(0), a.optional_int_list(1), false)); }
void ifftshift(Args& a) { a.return_tensor(shift(a.tensor(0), a.optional_int_list(1), true)); }

// fftfreq(n, d): [0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n); rfftfreq: the first
// n // 2 + 1 of them, all nonnegative.
TensorRef frequencies(const char* op, Args& a, bool onesided) {
  const int64_t n = a.to_int(0);
  const double d = a.scalar(1).to_double();
  if (n < 1) fail(TS_ERROR_VALUE, op, ": expected n >= 1, got ", n);
  const int32_t dtype = a.optional_dtype(2).value_or(sdk::default_float_dtype());
  const ts_device device = a.optional_device(3).value_or(ts_device{0, 0});
  const int64_t count = onesided ? n / 2 + 1 : n;
  TensorRef k = ops::arange(Scalar(count), TS_INT64, device);
  if (!onesided) k = ops::where(ops::lt(k, Scalar((n + 1) / 2)), k, ops::sub(k, Scalar(n)));
  return ops::to(ops::div(ops::to(k, TS_FLOAT64), Scalar(d * double(n))), dtype);
}
void fftfreq(Args& a) { a.return_tensor(frequencies("fft_fftfreq", a, false)); }
void rfftfreq(Args& a) { a.return_tensor(frequencies("fft_rfftfreq", a, true)); }

}  // namespace

void register_fft(sdk::Registrar& reg) {
  composite(reg, "fft_fft", fft);
  composite(reg, "fft_ifft", ifft);
  composite(reg, "fft_rfft", rfft);
  composite(reg, "fft_irfft", irfft);
  composite(reg, "fft_hfft", hfft);
  composite(reg, "fft_ihfft", ihfft);
  composite(reg, "fft_hfft2", hfft2);
  composite(reg, "fft_ihfft2", ihfft2);
  composite(reg, "fft_hfftn", hfftn);
  composite(reg, "fft_ihfftn", ihfftn);
  composite(reg, "fft_fft2", fft2);
  composite(reg, "fft_ifft2", ifft2);
  composite(reg, "fft_rfft2", rfft2);
  composite(reg, "fft_irfft2", irfft2);
  composite(reg, "fft_fftn", fftn);
  composite(reg, "fft_ifftn", ifftn);
  composite(reg, "fft_rfftn", rfftn);
  composite(reg, "fft_irfftn", irfftn);
  composite(reg, "fft_fftshift", fftshift);
  composite(reg, "fft_ifftshift", ifftshift);
  composite(reg, "fft_fftfreq", fftfreq);
  composite(reg, "fft_rfftfreq", rfftfreq);
}

}  // namespace tessera::composites
