#pragma once
// One 1-D transform of n points, planned once per thread and run on many lines. KISS FFT's
// mixed-radix plan is O(n * p) for a prime factor p of n (its generic butterfly), so a length
// with a large prime factor goes through Bluestein's algorithm instead: the transform written
// as a convolution with a chirp, evaluated by transforms of a power-of-two length m >= 2n - 1,
// O(n log n) for every n.
#include <kissfft.hh>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <numbers>
#include <optional>
#include <vector>

namespace tessera::cpu {

// The largest prime factor of n (1 for n <= 1).
inline int64_t largest_prime_factor(int64_t n) {
  int64_t largest = 1;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) largest = p, n /= p;
  return n > 1 ? n : largest;
}

template <class R>
class LinePlan {
 public:
  using C = std::complex<R>;
  // Above this prime factor the generic butterfly costs more than Bluestein's three transforms.
  static constexpr int64_t kLargestDirectPrime = 61;

  // inverse: the unnormalised backward transform (exponent +2 pi i jk / n), as KISS FFT's.
  LinePlan(int64_t n, bool inverse) : n_(n) {
    if (largest_prime_factor(n) <= kLargestDirectPrime) {
      direct_.emplace(size_t(n), inverse);
      return;
    }
    int64_t m = 1;
    while (m < 2 * n - 1) m *= 2;
    m_ = m;
    forward_m_.emplace(size_t(m), false);
    inverse_m_.emplace(size_t(m), true);
    // chirp_k = exp(-+ i pi k^2 / n); k^2 is reduced mod 2n first so the angle stays exact.
    chirp_.resize(size_t(n));
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t k2 = int64_t((__int128(k) * k) % (2 * n));
      const double angle = sign * std::numbers::pi * double(k2) / double(n);
      chirp_[size_t(k)] = C(R(std::cos(angle)), R(std::sin(angle)));
    }
    // The convolution kernel conj(chirp) at offsets -(n-1) .. n-1, wrapped into m points, and
    // its transform (scaled by 1/m here, for the inverse transform later).
    std::vector<C> kernel(size_t(m), C(0));
    for (int64_t k = 0; k < n; ++k) {
      kernel[size_t(k)] = std::conj(chirp_[size_t(k)]);
      if (k > 0) kernel[size_t(m - k)] = std::conj(chirp_[size_t(k)]);
    }
    kernel_spectrum_.resize(size_t(m));
    forward_m_->transform(kernel.data(), kernel_spectrum_.data());
    for (C& v : kernel_spectrum_) v /= R(m);
    work_.resize(size_t(m));
    spectrum_.resize(size_t(m));
  }

  // out = the transform of in (n points each; they may not alias).
  void transform(const C* in, C* out) {
    if (direct_) return direct_->transform(in, out);
    for (int64_t k = 0; k < n_; ++k) work_[size_t(k)] = in[k] * chirp_[size_t(k)];
    std::fill(work_.begin() + n_, work_.end(), C(0));
    forward_m_->transform(work_.data(), spectrum_.data());
    for (int64_t k = 0; k < m_; ++k) spectrum_[size_t(k)] *= kernel_spectrum_[size_t(k)];
    inverse_m_->transform(spectrum_.data(), work_.data());
    for (int64_t k = 0; k < n_; ++k) out[k] = work_[size_t(k)] * chirp_[size_t(k)];
  }

 private:
  int64_t n_, m_ = 0;
  std::optional<kissfft<R>> direct_, forward_m_, inverse_m_;
  std::vector<C> chirp_, kernel_spectrum_, work_, spectrum_;
};

}  // namespace tessera::cpu
