#pragma once
// Special functions the C++ library lacks (erfinv, digamma) and a thread-safe lgamma, for
// float and double. Accuracy: a few ulp of the double result (Newton-refined erfinv; the
// asymptotic series of digamma after shifting x above 10).
#include <cmath>
#include <limits>

namespace tessera::cpu::special {

// erfinv: Giles' single-precision approximation as a start, then two Newton steps on erf.
template <class M> M erfinv(M y) {
  if (std::isnan(y) || y < M(-1) || y > M(1)) return std::numeric_limits<M>::quiet_NaN();
  if (y == M(1)) return std::numeric_limits<M>::infinity();
  if (y == M(-1)) return -std::numeric_limits<M>::infinity();
  double x = double(y);
  double w = -std::log((1.0 - x) * (1.0 + x)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                     0.246640727, 1.50140941})
      p = c + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                     1.00167406, 2.83297682})
      p = c + p * w;
  }
  double r = p * x;
  for (int i = 0; i < 2; ++i)  // Newton on erf(r) - x: erf'(r) = 2/sqrt(pi) exp(-r^2)
    r -= (std::erf(r) - x) / (1.1283791670955126 * std::exp(-r * r));
  return M(r);
}

template <class M> M lgamma(M x) {
  int sign;
  return M(lgamma_r(double(x), &sign));  // lgamma writes the global signgam; lgamma_r does not
}

// digamma: the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic series;
// reflection for negative x. Poles (0 and negative integers) give NaN except at 0 (-inf for
// +0, as PyTorch returns -inf for x == 0).
template <class M> M digamma(M xin) {
  double x = double(xin);
  if (x == 0) return std::signbit(x) ? std::numeric_limits<M>::infinity() : -std::numeric_limits<M>::infinity();
  if (x < 0) {
    if (x == std::floor(x)) return std::numeric_limits<M>::quiet_NaN();
    const double pi = 3.14159265358979323846;
    return M(digamma(1.0 - x) - pi / std::tan(pi * x));
  }
  double result = 0;
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  double f = 1 / (x * x);
  double series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))));
  return M(result + std::log(x) - 0.5 / x - series);
}

}  // namespace tessera::cpu::special
