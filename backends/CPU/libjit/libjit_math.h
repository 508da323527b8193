// Float32 transcendental functions for the element-wise kernels: branch-free polynomial
// approximations (selects, bit operations, fma) that the loop vectoriser turns into
// AVX-512 or AVX2 code when a fused element-wise loop inlines them, where the compiler
// builtins (expf, tanhf, erff, logf) would stay scalar libm calls. Maximum errors, measured
// against the double-precision std:: functions (test/cpu:elementwise_math_test, the table
// in backends/CPU/README.md). Coefficients are least-squares fits on Chebyshev nodes
// refined to near-minimax (Lawson iterations), computed for this file. Internal to the
// kernel library.
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_MATH_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_MATH_H

#include "libjit_defs.h"

namespace libjit {

LIBJIT_INLINE float asFloat(uint32_t u) { return __builtin_bit_cast(float, u); }
LIBJIT_INLINE uint32_t asBits(float f) { return __builtin_bit_cast(uint32_t, f); }
LIBJIT_INLINE float fmaF(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

/// e^x: x = n ln2 + r, |r| <= ln2/2, e^r = 1 + r + r^2 P(r) (degree 4), times 2^n applied
/// in two halves so that results in the denormal range and overflow to +inf come out
/// right. NaN propagates. No float-to-int conversion (its result on NaN is undefined in
/// LLVM): n is rounded with the 1.5 * 2^23 shifter and read from the float's bits.
LIBJIT_INLINE float expF(float x) {
  // Outside [-104, 89] the result is 0 or +inf; clamping keeps 2^n representable in two
  // halves (the comparisons are false on NaN, which stays NaN).
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  const float shifter = 12582912.0f; // 1.5 * 2^23
  float t = fmaF(xc, 1.44269504088896341f, shifter);
  float n = t - shifter;
  int32_t ni = int32_t(asBits(t) - asBits(shifter)); // n as an integer (exact, |n| < 2^22)
  float r = fmaF(n, -0.693145751953125f, xc);        // ln2 split: hi has 15 bits
  r = fmaF(n, -1.428606765330187e-06f, r);
  float p = 0.0013901269025800543f;
  p = fmaF(p, r, 0.008363140354465486f);
  p = fmaF(p, r, 0.04166685353785621f);
  p = fmaF(p, r, 0.16666577320146536f);
  p = fmaF(p, r, 0.4999999955257341f);
  p = fmaF(p * r, r, r) + 1.0f;
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float s1 = asFloat(uint32_t(n1 + 127) << 23), s2 = asFloat(uint32_t(n2 + 127) << 23);
  return p * s1 * s2;
}

/// Natural logarithm: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s),
/// s = (m - 1) / (m + 1), |s| <= 0.1716, by its series to s^9. Denormals are scaled by
/// 2^23 first; log 0 = -inf, log of a negative number is NaN, log +inf = +inf.
LIBJIT_INLINE float logF(float x) {
  bool den = x < 1.17549435e-38f;
  float xs = den ? x * 8388608.0f : x;
  uint32_t bits = asBits(xs);
  int32_t e = int32_t((bits >> 23) & 0xff) - 127 - (den ? 23 : 0);
  float m = asFloat((bits & 0x7fffffu) | 0x3f800000u); // [1, 2)
  bool big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  e = big ? e + 1 : e;
  float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  float q = fmaF(s2, 0.11111111f, 0.14285714f);
  q = fmaF(q, s2, 0.2f);
  q = fmaF(q, s2, 0.33333333f);
  float ef = float(e);
  float lm = fmaF(2.0f * s * s2, q, 2.0f * s);
  float r = fmaF(ef, 0.693145751953125f, fmaF(ef, 1.428606765330187e-06f, lm));
  r = x == 0.0f ? -__builtin_inff() : r;
  r = x < 0.0f ? __builtin_nanf("") : r;
  r = x == __builtin_inff() ? x : r;
  return x != x ? x : r;
}

/// 1 / (1 + e^-x), as e^x / (1 + e^x) below 0 so that e^-x never overflows: results in
/// the denormal range (x down to -103) are kept.
LIBJIT_INLINE float sigmoidF(float x) {
  float e = expF(-__builtin_fabsf(x));
  float r = 1.0f / (1.0f + e);
  return x < 0.0f ? e * r : r;
}

/// tanh: an odd polynomial x + x^3 P(x^2) (degree 4) below 0.625, else
/// sign(x) (1 - 2 / (e^(2|x|) + 1)), which is exact 1 from |x| = 9.1 on.
LIBJIT_INLINE float tanhF(float x) {
  float a = __builtin_fabsf(x), x2 = x * x;
  float p = -0.0060999588627227395f;
  p = fmaF(p, x2, 0.02100001727142901f);
  p = fmaF(p, x2, -0.053851735570526645f);
  p = fmaF(p, x2, 0.13332778608612356f);
  p = fmaF(p, x2, -0.33333329199351214f);
  float small = __builtin_copysignf(fmaF(p * x2, a, a), x); // keeps -0
  float ac = a > 10.0f ? 10.0f : a;
  float big = 1.0f - 2.0f / (expF(2.0f * ac) + 1.0f);
  big = __builtin_copysignf(big, x);
  return a < 0.625f ? small : (x != x ? x : big);
}

/// erfc(a) for a >= 1 (accurate from 0.5): t e^(-a^2 + P(t)), t = 2 / (2 + a), P of
/// degree 8. a^2 comes as hi + lo (two floats) from the caller, exactly, so that large a
/// keep their relative accuracy. 0 from a = 10.1 on; NaN propagates.
LIBJIT_INLINE float erfcLarge(float a, float a2hi, float a2lo) {
  float ac = a > 10.5f ? 10.5f : a;
  float t = 2.0f / (2.0f + ac);
  float p = -0.2402083020288332f;
  p = fmaF(p, t, 0.6439163979234996f);
  p = fmaF(p, t, -0.449705443026613f);
  p = fmaF(p, t, -0.0660334768726009f);
  p = fmaF(p, t, -0.07286037283240485f);
  p = fmaF(p, t, 0.071673010931942f);
  p = fmaF(p, t, 0.3778167947156083f);
  p = fmaF(p, t, 0.9996850914158883f);
  p = fmaF(p, t, -1.2654982719613155f);
  float hi = a > 10.5f ? 110.25f : a2hi, lo = a > 10.5f ? 0.0f : a2lo;
  float r = t * expF((p - lo) - hi);
  return a > 10.5f ? 0.0f : r;
}

/// erf(x)/x as a polynomial in x^2 (degree 6), for |x| <= 1.
LIBJIT_INLINE float erfSmallOverX(float x2) {
  float p = 7.854221094855118e-05f;
  p = fmaF(p, x2, -0.0008010311287305477f);
  p = fmaF(p, x2, 0.0051883425011447215f);
  p = fmaF(p, x2, -0.026853820898639996f);
  p = fmaF(p, x2, 0.11283585412446873f);
  p = fmaF(p, x2, -0.3761262585750421f);
  return fmaF(p, x2, 1.1283791657386173f);
}

/// erf: x P(x^2) for |x| <= 1, else sign(x) (1 - erfc(|x|)).
LIBJIT_INLINE float erfF(float x) {
  float a = __builtin_fabsf(x);
  float small = x * erfSmallOverX(x * x);
  float x2 = x * x;
  float big = __builtin_copysignf(1.0f - erfcLarge(a, x2, fmaF(x, x, -x2)), x);
  return a <= 1.0f ? small : big;
}

/// GELU, x Phi(x) = x (1 + erf(x / sqrt 2)) / 2; for x / sqrt 2 below -1, 1 + erf is
/// taken as erfc(|x| / sqrt 2) directly (no cancellation), with (x / sqrt 2)^2 = x^2 / 2
/// from x exactly.
LIBJIT_INLINE float geluF(float x) {
  float z = x * 0.70710678118654752f, a = __builtin_fabsf(z);
  float x2 = x * x;
  float ec = erfcLarge(a, 0.5f * x2, 0.5f * fmaF(x, x, -x2));
  float onePlusErf = a <= 1.0f ? fmaF(z, erfSmallOverX(z * z), 1.0f) : (z < 0.0f ? ec : 2.0f - ec);
  return 0.5f * x * onePlusErf;
}

/// GELU's tanh form, 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3):
/// the same function without the cancellation of 1 + tanh(u) for negative x.
LIBJIT_INLINE float geluTanhF(float x) {
  float u = 0.79788456080286536f * fmaF(0.044715f * x * x, x, x);
  return x * sigmoidF(2.0f * u);
}

} // namespace libjit

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_MATH_H
