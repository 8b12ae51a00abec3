// The AVX-512F kernel table. Compiled with -mavx512f -mavx2 -mfma (backends/cpu/CMakeLists.txt);
// only called after select_isa() has checked the CPU supports them.
#include "simd_table.h"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>
#ifdef TESSERA_HAVE_SLEEF
#include <sleef.h>
#endif

#include "simd_kernels.h"

namespace tessera::cpu::simd {
namespace {

struct Avx512 {
  using R = __m512;
  using D = __m512d;
  static constexpr int W = 16;
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R x) { _mm512_storeu_ps(p, x); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static R min(R a, R b) { return _mm512_min_ps(a, b); }
  // Rounded to the nearest integer (ties to even), still as floats.
  static R round_nearest(R a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p * 2^n for integral n (as floats) with p * 2^n a normal float: n added to p's exponent.
  static R scale_pow2(R p, R n) {
    const __m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(n), 23);
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e));
  }
  static R sqrt(R a) { return _mm512_sqrt_ps(a); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  // (a < b) ? x : y, lane by lane
  static R lt_select(R a, R b, R x, R y) { return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), x); }
  // (a > b or a is NaN) ? x : y, lane by lane: max pooling's rule for taking a candidate
  static R gt_or_nan_select(R a, R b, R x, R y) {
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), x);
  }
  // |mag| with sgn's sign bit (mag is non-negative or NaN here)
  static R copysign(R mag, R sgn) {
    const __m512i m = _mm512_castps_si512(mag), s = _mm512_castps_si512(sgn);
    return _mm512_castsi512_ps(_mm512_or_si512(m, _mm512_and_si512(s, _mm512_set1_epi32(int(0x80000000u)))));
  }
  // Sign-bit arithmetic in the integer domain (float xor/and need AVX512DQ).
  static R neg(R a) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(int(0x80000000u))));
  }
  static R abs(R a) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
  }
  static R relu(R a) { return _mm512_mask_mov_ps(a, _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps()); }
#ifdef TESSERA_HAVE_SLEEF
  static R exp(R a) { return Sleef_expf16_u10avx512f(a); }
  static R log(R a) { return Sleef_logf16_u10avx512f(a); }
  static R log1p(R a) { return Sleef_log1pf16_u10avx512f(a); }
  static R sin(R a) { return Sleef_sinf16_u10avx512f(a); }
  static R cos(R a) { return Sleef_cosf16_u10avx512f(a); }
  static R tanh(R a) { return tanh_via_exp<Avx512>(a); }
  static R erf(R a) { return Sleef_erff16_u10avx512f(a); }
#else
  static R exp(R a) { return lanewise<Avx512, expf>(a); }
  static R log(R a) { return lanewise<Avx512, logf>(a); }
  static R log1p(R a) { return lanewise<Avx512, log1pf>(a); }
  static R sin(R a) { return lanewise<Avx512, sinf>(a); }
  static R cos(R a) { return lanewise<Avx512, cosf>(a); }
  static R tanh(R a) { return lanewise<Avx512, tanhf>(a); }
  static R erf(R a) { return lanewise<Avx512, erff>(a); }
#endif
  static D dzero() { return _mm512_setzero_pd(); }
  static D dadd(D a, D b) { return _mm512_add_pd(a, b); }
  static D dload(const double* p) { return _mm512_loadu_pd(p); }
  static void dstore(double* p, D x) { _mm512_storeu_pd(p, x); }
  static void widen_add(D& lo, D& hi, R x) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(x)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(x), 1))));
  }
  static double dhsum(D a) {
    alignas(64) double t[8];
    _mm512_store_pd(t, a);
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
  }
};

constexpr Table kTable = Kernels<Avx512>::make("avx512");

}  // namespace

const Table* avx512_table() { return &kTable; }

}  // namespace tessera::cpu::simd

#else  // not built for AVX-512: the dispatcher never picks it
namespace tessera::cpu::simd {
const Table* avx512_table() { return nullptr; }
}  // namespace tessera::cpu::simd
#endif
