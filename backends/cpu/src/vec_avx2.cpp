// The AVX2 + FMA kernel table. Compiled with -mavx2 -mfma (backends/cpu/CMakeLists.txt); only
// called after select_isa() has checked the CPU supports both.
#include "simd_table.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#ifdef TESSERA_HAVE_SLEEF
#include <sleef.h>
#endif

#include "simd_kernels.h"

namespace tessera::cpu::simd {
namespace {

struct Avx2 {
  using R = __m256;
  using D = __m256d;
  static constexpr int W = 8;
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R x) { _mm256_storeu_ps(p, x); }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  // Rounded to the nearest integer (ties to even), still as floats.
  static R round_nearest(R a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p * 2^n for integral n (as floats) with p * 2^n a normal float: n added to p's exponent.
  static R scale_pow2(R p, R n) {
    const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
  }
  static R sqrt(R a) { return _mm256_sqrt_ps(a); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  // (a < b) ? x : y, lane by lane
  static R lt_select(R a, R b, R x, R y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
  // (a > b or a is NaN) ? x : y, lane by lane: max pooling's rule for taking a candidate
  static R gt_or_nan_select(R a, R b, R x, R y) {
    return _mm256_blendv_ps(y, x, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q)));
  }
  // |mag| with sgn's sign bit (mag is non-negative or NaN here)
  static R copysign(R mag, R sgn) { return _mm256_or_ps(mag, _mm256_and_ps(sgn, _mm256_set1_ps(-0.0f))); }
  static R neg(R a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static R abs(R a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  // x < 0 ? 0 : x; NaN and -0.0 pass through unchanged, as in the scalar op.
  static R relu(R a) { return _mm256_andnot_ps(_mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_LT_OQ), a); }
#ifdef TESSERA_HAVE_SLEEF
  static R exp(R a) { return Sleef_expf8_u10avx2(a); }
  static R log(R a) { return Sleef_logf8_u10avx2(a); }
  static R log1p(R a) { return Sleef_log1pf8_u10avx2(a); }
  static R sin(R a) { return Sleef_sinf8_u10avx2(a); }
  static R cos(R a) { return Sleef_cosf8_u10avx2(a); }
  static R tanh(R a) { return tanh_via_exp<Avx2>(a); }
  static R erf(R a) { return Sleef_erff8_u10avx2(a); }
#else
  static R exp(R a) { return lanewise<Avx2, expf>(a); }
  static R log(R a) { return lanewise<Avx2, logf>(a); }
  static R log1p(R a) { return lanewise<Avx2, log1pf>(a); }
  static R sin(R a) { return lanewise<Avx2, sinf>(a); }
  static R cos(R a) { return lanewise<Avx2, cosf>(a); }
  static R tanh(R a) { return lanewise<Avx2, tanhf>(a); }
  static R erf(R a) { return lanewise<Avx2, erff>(a); }
#endif
  static D dzero() { return _mm256_setzero_pd(); }
  static D dadd(D a, D b) { return _mm256_add_pd(a, b); }
  static D dload(const double* p) { return _mm256_loadu_pd(p); }
  static void dstore(double* p, D x) { _mm256_storeu_pd(p, x); }
  static void widen_add(D& lo, D& hi, R x) {
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
  }
  static double dhsum(D a) {
    alignas(32) double t[4];
    _mm256_store_pd(t, a);
    return (t[0] + t[1]) + (t[2] + t[3]);
  }
};

constexpr Table kTable = Kernels<Avx2>::make("avx2");

}  // namespace

const Table* avx2_table() { return &kTable; }

}  // namespace tessera::cpu::simd

#else  // not built for AVX2: the dispatcher never picks it
namespace tessera::cpu::simd {
const Table* avx2_table() { return nullptr; }
}  // namespace tessera::cpu::simd
#endif
