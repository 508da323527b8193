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

/// e^x's reduction for a clamped \p xc: x = n ln2 + r, |r| <= ln2/2, and e^r = 1 + r +
/// r^2 P(r) (degree 4), returned with n in \p n. No float-to-int conversion (its result on
/// NaN is undefined in LLVM): n is rounded with the 1.5 * 2^23 shifter and read from the
/// float's bits (exact, |n| < 2^22). NaN stays NaN.
LIBJIT_INLINE float expReducedF(float xc, int32_t &n) {
  const float shifter = 12582912.0f; // 1.5 * 2^23
  float t = fmaF(xc, 1.44269504088896341f, shifter);
  float nf = t - shifter;
  n = int32_t(asBits(t) - asBits(shifter));
  float r = fmaF(nf, -0.693145751953125f, xc); // ln2 split: hi has 15 bits
  r = fmaF(nf, -1.428606765330187e-06f, r);
  float p = 0.0013901269025800543f;
  p = fmaF(p, r, 0.008363140354465486f);
  p = fmaF(p, r, 0.04166685353785621f);
  p = fmaF(p, r, 0.16666577320146536f);
  p = fmaF(p, r, 0.4999999955257341f);
  return fmaF(p * r, r, r) + 1.0f;
}

/// e^x: expReducedF's e^r times 2^n, applied in two halves so that results in the denormal
/// range and overflow to +inf come out right. NaN propagates.
LIBJIT_INLINE float expF(float x) {
  // Outside [-104, 89] the result is 0 or +inf; clamping keeps 2^n representable in two
  // halves (the comparisons are false on NaN, which stays NaN).
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  int32_t ni;
  float p = expReducedF(xc, ni);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float s1 = asFloat(uint32_t(n1 + 127) << 23), s2 = asFloat(uint32_t(n2 + 127) << 23);
  return p * s1 * s2;
}

/// e^x for x <= 0 (and NaN, which propagates), bit for bit expF's result: the same
/// reduction and polynomial, and the same one rounding of p 2^n, taken as p 2^(n + 64)
/// (exact: a normal float down to n = -150, where x is clamped) times 2^-64, so one shift
/// builds the scale where expF needs two halves to reach both ends of its range (and no
/// upper clamp). Sigmoid's and SiLU's exponential.
LIBJIT_INLINE float expNegF(float x) {
  float xc = x < -104.0f ? -104.0f : x;
  int32_t ni;
  float p = expReducedF(xc, ni);
  float s = asFloat(uint32_t(ni + 64 + 127) << 23);
  return p * s * 5.42101086242752217e-20f; // 2^-64
}

/// Natural logarithm: x = m 2^e with m in [sqrt(1/2), sqrt(2)) (e and m from the bits of
/// x minus those of sqrt(1/2): e is the difference's exponent field, rounded down),
/// log m = f - f^2 / 2 + f^3 P(f), f = m - 1, P of degree 6 fitted for this file to
/// near-minimax relative error of log(1 + f) on [sqrt(1/2) - 1, sqrt(2) - 1] (3.1e-8 in
/// double; weighted least squares with Lawson reweighting, the script in the commit
/// message of this change). No division. Denormals are scaled by 2^23 first; log 0 =
/// -inf, log of a negative number (or NaN) is NaN, log +inf = +inf.
LIBJIT_INLINE float logF(float x) {
  bool den = x < 1.17549435e-38f;
  float xs = den ? x * 8388608.0f : x;
  // 0x3f3504f3: sqrt(1/2). The difference is taken on the unsigned bits (a negative x,
  // whose result is NaN anyway, would overflow a signed one) and read as signed.
  int32_t e = int32_t(asBits(xs) - 0x3f3504f3u) >> 23;
  float m = asFloat(asBits(xs) - (uint32_t(e) << 23));
  float ef = float(den ? e - 23 : e);
  float f = m - 1.0f, f2 = f * f;
  float p = 0.0870043465973469f;
  p = fmaF(p, f, -0.142674879489774f);
  p = fmaF(p, f, 0.1491476873851712f);
  p = fmaF(p, f, -0.16577584613317484f);
  p = fmaF(p, f, 0.199630637262586f);
  p = fmaF(p, f, -0.2500133703791285f);
  p = fmaF(p, f, 0.3333391073880784f);
  float lm = fmaF(f2 * f, p, fmaF(-0.5f, f2, f));
  float r = fmaF(ef, 0.693145751953125f, fmaF(ef, 1.428606765330187e-06f, lm));
  r = x == 0.0f ? -__builtin_inff() : r;
  r = x == __builtin_inff() ? x : r;
  return x >= 0.0f ? r : __builtin_nanf("");
}

/// 1 / (1 + e^-x), as e^x / (1 + e^x) below 0 so that e^-x never overflows: results in
/// the denormal range (x down to -103) are kept.
LIBJIT_INLINE float sigmoidF(float x) {
  float e = expNegF(-__builtin_fabsf(x));
  float r = 1.0f / (1.0f + e);
  return x < 0.0f ? e * r : r;
}

/// The odd rationals of tanhF and erfF: a P(a^2) / Q(a^2) on [0, c], Q(0) = 1, positive
/// coefficients (Horner in float loses nothing to cancellation), fitted for this file to
/// near-minimax relative error in double: linearised weighted least squares (weights
/// 1 / Q of the previous step) with Lawson reweighting towards the equioscillating error,
/// on 12,000 points of [0, c] (the script is in the commit message of this change). One
/// evaluation for every element (no branch taken by value), one division.

/// tanh: a P(a^2) / Q(a^2) (degrees 4 and 4 in a^2, fitted on [0, 9.01]; relative error 2.1e-8 in
/// double, 3.1e-7 in float with the rounding of the evaluation) for |x| < 9.02, where tanh rounds
/// to 1 in float, at most 1, and 1 beyond; the sign of x (-0 kept). NaN propagates (it
/// fails the comparisons and runs through the rational).
LIBJIT_INLINE float tanhF(float x) {
  float a = __builtin_fabsf(x), t = x * x;
  float p = 1.3336896258801458e-08f;
  p = fmaF(p, t, 2.059631939531238e-05f);
  p = fmaF(p, t, 0.003494814297361081f);
  p = fmaF(p, t, 0.13380374493558514f);
  p = fmaF(p, t, 0.9999999792502372f);
  float q = 7.769305863389757e-07f;
  q = fmaF(q, t, 0.00032843681935251816f);
  q = fmaF(q, t, 0.025874039613488893f);
  q = fmaF(q, t, 0.4671368991738099f);
  q = fmaF(q, t, 1.0f);
  float r = a * p / q;
  r = r > 1.0f ? 1.0f : r; // the rounded rational exceeds 1 by an ulp or two near c
  r = a >= 9.02f ? 1.0f : r;
  return __builtin_copysignf(r, x);
}

/// erf: a P(a^2) / Q(a^2) (degrees 5 and 5 in a^2, fitted on [0, 3.92]; relative error 1.9e-8 in
/// double, 3.5e-7 in float, largest near 3.7 where erf is within a few ulp of 1) for |x| < 3.92,
/// where erf rounds to 1 in float, at most 1, and 1 beyond; the sign of x. NaN propagates.
LIBJIT_INLINE float erfF(float x) {
  float a = __builtin_fabsf(x), t = x * x;
  float p = 2.0500689102680226e-06f;
  p = fmaF(p, t, 0.00028488217540429187f);
  p = fmaF(p, t, 0.003765638957914683f);
  p = fmaF(p, t, 0.052748787369104766f);
  p = fmaF(p, t, 0.1904071313600935f);
  p = fmaF(p, t, 1.128379146144835f);
  float q = 3.80914944403527e-05f;
  q = fmaF(q, t, 0.001162538880865995f);
  q = fmaF(q, t, 0.014969261413211383f);
  q = fmaF(q, t, 0.1141093651566804f);
  q = fmaF(q, t, 0.502076667504016f);
  q = fmaF(q, t, 1.0f);
  float r = a * p / q;
  r = r > 1.0f ? 1.0f : r; // the rounded rational exceeds 1 by an ulp or two near c
  r = a >= 3.92f ? 1.0f : r;
  return __builtin_copysignf(r, x);
}

/// GELU, x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 with erfF. Relative error below 6e-7
/// for x >= -1 and 5e-6 for x >= -2; further left 1 + erf cancels (erfF's absolute error
/// near -1 is up to 3.5e-7, 6 ulp of 1), so only the absolute error stays small: below
/// 9e-7 (relative 7e-5 at x = -3, 4e-3 at -4, 50% near -5), and from x = -5.544 on the
/// result is 0 where the exact value is above -8.3e-8. ONNX's Erf-based GELU evaluated in
/// float (1 + Erf(x / sqrt 2), as exported graphs compute it) loses the tail the same way.
/// No intermediate is a denormal for normal x (1 + erf is 0 or above 5e-8), so the fused
/// epilogues need no clamp.
LIBJIT_INLINE float geluF(float x) {
  float h = 0.5f * x;
  return fmaF(h, erfF(x * 0.70710678118654752f), h);
}

/// GELU's tanh form, x (1 + tanh(u)) / 2, u = sqrt(2/pi) (x + 0.044715 x^3), with tanhF:
/// like geluF, relative error below 6e-7 for x >= -1 and 4e-6 for x >= -2, then absolute
/// error below 8e-7 (relative 8e-5 at x = -3, 7e-3 at -4), and 0 from x = -5.160 on
/// (tanh(u) rounds to -1) where the exact value is above -7.6e-8.
LIBJIT_INLINE float geluTanhF(float x) {
  float u = 0.79788456080286536f * fmaF(0.044715f * x * x, x, x);
  float h = 0.5f * x;
  return fmaF(h, tanhF(u), h);
}

} // namespace libjit

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_MATH_H
