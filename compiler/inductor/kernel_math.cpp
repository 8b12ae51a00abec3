#include "kernel_math.h"

#include <sstream>

namespace tessera::inductor {

namespace {

// The C math declarations for the host compiler (CUDA's are built into NVRTC).
std::string math_declarations(bool vector_math) {
  std::ostringstream s;
  s << "#include <stdint.h>\n";
  const char* functions[] = {"sin", "cos", "tan", "exp", "expm1", "log", "log1p", "log2", "log10", "erf", "atan", "pow"};
  s << "extern \"C\" {\n";
  for (const char* f : functions) {
    const bool binary = std::string(f) == "pow";
    for (const char* t : {"float", "double"}) {
      if (vector_math) s << "#pragma omp declare simd notinbranch\n";
      s << t << " " << f << (std::string(t) == "float" ? "f" : "") << "(" << t << (binary ? std::string(", ") + t : "")
        << ");\n";
    }
  }
  s << "}\n";
  return s.str();
}

std::string inline_math() {
  std::ostringstream s;
  // Everything below is branch-free C the vectoriser if-converts. GCC gives up on a loop whose
  // selects nest too deeply (an inline exp's range checks feeding a nested NaN-aware max), so
  // the clamps against a number are one compare each (ts_clamp_lo/hi).
  s << R"(static inline float ts_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static inline double ts_fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
// NaN-propagating max and min of two tensors (torch.maximum).
template <class T> static inline T ts_max(T a, T b) { return a > b ? a : (a != a ? a : b); }
template <class T> static inline T ts_min(T a, T b) { return a < b ? a : (a != a ? a : b); }
// clamp against a number that is not NaN: a NaN `a` fails the compare and is kept.
template <class T> static inline T ts_clamp_lo(T a, T lo) { return a < lo ? lo : a; }
template <class T> static inline T ts_clamp_hi(T a, T hi) { return a > hi ? hi : a; }
// tanh as the CPU plugin computes it: from exp for |x| >= 0.5, the Taylor series to x^17 below,
// then x's sign. The float form takes E = exp(-2|x|) <= 1 from the inline exp (no call, so the
// vector loop keeps its registers): (1 - E) / (1 + E), within an ulp or two of the plugin's
// 1 - 2 / (exp(2|x|) + 1).
template <class T> static inline T ts_tanh_series(T a) {
  T x2 = a * a;
  T p = T(6404582.0 / 10854718875.0);
  p = ts_fma(p, x2, T(-929569.0 / 638512875.0));
  p = ts_fma(p, x2, T(21844.0 / 6081075.0));
  p = ts_fma(p, x2, T(-1382.0 / 155925.0));
  p = ts_fma(p, x2, T(62.0 / 2835.0));
  p = ts_fma(p, x2, T(-17.0 / 315.0));
  p = ts_fma(p, x2, T(2.0 / 15.0));
  p = ts_fma(p, x2, T(-1.0 / 3.0));
  return ts_fma(p * x2, a, a);
}
static inline double ts_tanh(double x) {
  const double a = __builtin_fabs(x);
  const double big = 1.0 - 2.0 / (exp(a + a) + 1.0);
  return __builtin_copysign(a < 0.5 ? ts_tanh_series(a) : big, x);
}
// d/dx of gelu's tanh form, given t = tanh(k (x + 0.044715 x^3)) (float64 kernels).
template <class T> static inline T ts_gelu_tanh_grad(T x, T t, T k) {
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3 * 0.044715) * x * x);
}
// exp(x) for x <= 0, the CPU plugin's inline exp (Cephes' expf: x = n ln2 + r, a degree-6
// polynomial in r, n added to the exponent; within 2 ulp), results below FLT_MIN flushed to 0.
static inline float ts_exp_nonpositive(float x) {
  const float lo = -87.3365448f;
  const float c = x < lo ? lo : x;
  const float n = __builtin_rintf(c * 1.44269504088896341f);
  float r = ts_fma(n, -0.693359375f, c);
  r = ts_fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = ts_fma(p, r, 1.3981999507e-3f);
  p = ts_fma(p, r, 8.3334519073e-3f);
  p = ts_fma(p, r, 4.1665795894e-2f);
  p = ts_fma(p, r, 1.6666665459e-1f);
  p = ts_fma(p, r, 5.0000001201e-1f);
  p = ts_fma(p * r, r, r + 1.0f);
  unsigned bits;  // n added to the exponent field (unsigned: shifting a negative int is undefined)
  __builtin_memcpy(&bits, &p, 4);
  bits += unsigned(int(n)) << 23;
  float e;
  __builtin_memcpy(&e, &bits, 4);
  return x < lo ? 0.0f : e;
}
static inline float ts_tanh(float x) {
  const float a = __builtin_fabsf(x);
  const float E = ts_exp_nonpositive(-(a + a));
  return __builtin_copysignf(a < 0.5f ? ts_tanh_series(a) : (1.0f - E) / (1.0f + E), x);
}
// sin and cos inline for |x| <= 8192 (ts_trig_out_of_range is 0): x reduced by the nearest
// multiple q of pi/2 in three parts (the first two exact in q * part for q < 2^12), Cephes'
// polynomials for sin and cos on [-pi/4, pi/4], the quadrant picking one and its sign.
static inline int ts_trig_out_of_range(float x) { return __builtin_fabsf(x) <= 8192.0f ? 0 : 1; }
static inline float ts_quadrant_poly(float ax, int shift) {
  const float q = __builtin_rintf(ax * 0.636619772367581343f);
  float r = ts_fma(q, -1.5703125f, ax);
  r = ts_fma(q, -4.837512969970703e-4f, r);
  r = ts_fma(q, -7.549790126404332e-8f, r);
  const int quadrant = int(q) + shift;
  const float r2 = r * r;
  float sp = -1.9515295891e-4f;
  sp = ts_fma(sp, r2, 8.3321608736e-3f);
  sp = ts_fma(sp, r2, -1.6666654611e-1f);
  sp = ts_fma(sp * r2, r, r);
  float cp = 2.443315711809948e-5f;
  cp = ts_fma(cp, r2, -1.388731625493765e-3f);
  cp = ts_fma(cp, r2, 4.166664568298827e-2f);
  cp = ts_fma(cp * r2, r2, ts_fma(-0.5f, r2, 1.0f));
  const float v = (quadrant & 1) ? cp : sp;
  return (quadrant & 2) ? -v : v;
}
static inline float ts_fast_sin(float x) {
  const float v = ts_quadrant_poly(__builtin_fabsf(x), 0);
  return x < 0.0f ? -v : v;
}
static inline float ts_fast_cos(float x) { return ts_quadrant_poly(__builtin_fabsf(x), 1); }
// gelu's weight Phi(x) = 0.5 (1 + erf(x / sqrt 2)) as the CPU plugin computes it: the tail
// q = 1 - erf|z| = t P(t) exp(-z^2), t = 1 / (1 + p|z|) (Abramowitz & Stegun 7.1.26), 0.5 q for
// x < 0 and 1 - 0.5 q otherwise; `gauss` gets exp(-x^2 / 2) for the derivative.
static inline float ts_normal_cdf(float x, float& gauss) {
  const float z = x * 0.70710678118654752f;
  const float t = 1.0f / ts_fma(0.3275911f, __builtin_fabsf(z), 1.0f);
  float poly = 1.061405429f;
  poly = ts_fma(poly, t, -1.453152027f);
  poly = ts_fma(poly, t, 1.421413741f);
  poly = ts_fma(poly, t, -0.284496736f);
  poly = ts_fma(poly, t, 0.254829592f);
  gauss = ts_exp_nonpositive(-(z * z));
  const float half_q = 0.5f * ((poly * t) * gauss);
  return x < 0.0f ? half_q : 1.0f - half_q;
}
static inline float ts_gelu_erf(float x) {
  float gauss;
  return x * ts_normal_cdf(x, gauss);
}
// sigmoid(v) from E = exp(-|v|) <= 1: 1 / (1 + E) for v >= 0, E / (1 + E) below, so neither
// tail cancels; `one_minus` gets 1 - sigmoid(v) = sigmoid(-v) the same way.
static inline float ts_sigmoid(float v, float& one_minus) {
  const float E = ts_exp_nonpositive(-__builtin_fabsf(v));
  const float big = 1.0f / (1.0f + E), small = E * big;
  one_minus = v < 0.0f ? big : small;
  return v < 0.0f ? small : big;
}
// gelu's tanh form as the CPU plugin computes it: 0.5 (1 + tanh(u)) = sigmoid(2u),
// u = sqrt(2/pi) (x + 0.044715 x^3), and its derivative s + 2 x s (1 - s) du.
static inline float ts_gelu_tanh_weight(float x, float& one_minus) {
  const float inner = ts_fma(0.044715f * (x * x), x, x);
  return ts_sigmoid((2.0f * 0.79788456080286535f) * inner, one_minus);
}
static inline float ts_gelu_tanh(float x) {
  float one_minus;
  return x * ts_gelu_tanh_weight(x, one_minus);
}
static inline float ts_gelu_tanh_grad(float x) {
  float one_minus;
  const float s = ts_gelu_tanh_weight(x, one_minus);
  const float du = 0.79788456080286535f * ts_fma(3.0f * 0.044715f, x * x, 1.0f);
  return ts_fma((x + x) * (s * one_minus), du, s);
}
// d/dx x Phi(x) = Phi(x) + x phi(x).
static inline float ts_gelu_erf_grad(float x) {
  float gauss;
  const float cdf = ts_normal_cdf(x, gauss);
  return ts_fma(x, 0.39894228040143268f * gauss, cdf);
}
)";
  return s.str();
}

}  // namespace

std::string kernel_math_prelude(bool vector_math) { return math_declarations(vector_math) + inline_math(); }

std::string cuda_kernel_math_prelude() {
  // The same functions as device functions; the GCC builtins they and the element-wise
  // lowerings use spelled as CUDA's math functions (NVRTC needs no header for those).
  std::string body = inline_math();
  const std::string from = "static inline", to = "static __device__ __forceinline__";
  for (size_t at = body.find(from); at != std::string::npos; at = body.find(from, at + to.size()))
    body.replace(at, from.size(), to);
  std::ostringstream s;
  s << "typedef unsigned char uint8_t;\n";
  for (const char* f : {"fabs", "sqrt", "floor", "ceil", "trunc", "rint", "copysign", "fma"})
    s << "#define __builtin_" << f << "f " << f << "f\n#define __builtin_" << f << " " << f << "\n";
  s << "#define __builtin_memcpy memcpy\n#define __builtin_log log\n"
       "#define __builtin_nan(s) __longlong_as_double(0x7ff8000000000000LL)\n"
       "#define __builtin_inf() __longlong_as_double(0x7ff0000000000000LL)\n";
  return s.str() + body;
}

}  // namespace tessera::inductor
