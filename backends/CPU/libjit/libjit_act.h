// The activations of the fused epilogues (GEMM, convolution strips, Winograd, depthwise):
// one code per kind and two float parameters a, b, as the kernels' `act, lo, hi` arguments
// carry them. ActClamp is done by each kernel in its registers; the others by
// activateTile, on the block a kernel has just stored (still in the L1 cache), one loop per
// kind that the JIT vectorises with the polynomial functions of libjit_math.h (their errors
// are in backends/CPU/README.md). Internal to the kernel library.
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_ACT_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_ACT_H

#include "libjit_defs.h"
#include "libjit_math.h"

namespace libjit {

/// Activation codes; the compiler's FusedEpilogue (backends/CPU/codegen/Emitter.h) uses the
/// same numbers.
enum ActKind : int {
  ActNone = 0,
  ActClamp = 1,       ///< min(max(x, a), b)
  ActLeakyRelu = 2,   ///< x >= 0 ? x : a x
  ActSigmoid = 3,     ///< 1 / (1 + e^-x)
  ActTanh = 4,        ///< tanh x
  ActSwish = 5,       ///< x sigmoid(x)
  ActHardSwish = 6,   ///< x min(max(a x + b, 0), 1)
  ActHardSigmoid = 7, ///< min(max(a x + b, 0), 1)
  ActGelu = 8,        ///< x Phi(x)
  ActGeluTanh = 9,    ///< GELU's tanh form
};

/// One element of activation \p act.
LIBJIT_INLINE float activateOne(int act, float x, float a, float b) {
  switch (act) {
  case ActClamp: {
    float y = x < a ? a : x;
    return y > b ? b : y;
  }
  case ActLeakyRelu:
    return x >= 0.0f ? x : a * x;
  case ActSigmoid:
    return sigmoidF(x);
  case ActTanh:
    return tanhF(x);
  case ActSwish:
    return x * sigmoidF(x);
  case ActHardSwish:
  case ActHardSigmoid: {
    float h = fmaF(a, x, b);
    h = h < 0.0f ? 0.0f : h;
    h = h > 1.0f ? 1.0f : h;
    return act == ActHardSwish ? x * h : h;
  }
  // No clamp: neither GELU computes in the denormal range (where x86 arithmetic is up to a
  // hundred times slower); both are exactly 0 below x = -5.6, and NaN at -inf, as the
  // element-wise kernels and the Interpreter's x (1 + erf) / 2.
  case ActGelu:
    return geluF(x);
  case ActGeluTanh:
    return geluTanhF(x);
  default:
    return x;
  }
}

/// act over \p n contiguous floats: one vectorised loop per kind. Not interleaved: with
/// the vectoriser's default of four vectors a step, rows of 32 or 48 floats would run in
/// the scalar remainder.
#if defined(__clang__)
#define LIBJIT_ACT_VEC _Pragma("clang loop vectorize(enable) interleave_count(1)")
#else
#define LIBJIT_ACT_VEC
#endif
LIBJIT_NOINLINE inline void activateContiguous(float *q, int64_t n, int act, float a, float b) {
#define LIBJIT_ACT_LOOP(KIND)                                                                      \
  case KIND:                                                                                       \
    LIBJIT_ACT_VEC                                                                                 \
    for (int64_t j = 0; j < n; j++)                                                                \
      q[j] = activateOne(KIND, q[j], a, b);                                                        \
    return;
  switch (act) {
    LIBJIT_ACT_LOOP(ActClamp)
    LIBJIT_ACT_LOOP(ActLeakyRelu)
    LIBJIT_ACT_LOOP(ActSigmoid)
    LIBJIT_ACT_LOOP(ActTanh)
    LIBJIT_ACT_LOOP(ActSwish)
    LIBJIT_ACT_LOOP(ActHardSwish)
    LIBJIT_ACT_LOOP(ActHardSigmoid)
    LIBJIT_ACT_LOOP(ActGelu)
    LIBJIT_ACT_LOOP(ActGeluTanh)
  default:
    return;
  }
#undef LIBJIT_ACT_LOOP
#undef LIBJIT_ACT_VEC
}

/// p[r * ld + j] = act(p[r * ld + j]) for r < rows, j < n. A register tile's rows (at most
/// 1024 floats in all) are gathered into one contiguous block first (copies within the L1
/// cache), so the activation runs as one long loop rather than a short one per row.
LIBJIT_NOINLINE inline void activateTile(float *p, int64_t ld, int64_t rows, int64_t n, int act,
                                         float a, float b) {
  if (rows == 1 || ld == n) {
    activateContiguous(p, rows * n, act, a, b);
    return;
  }
  float t[1024];
  int64_t per = 1024 / n;
  for (int64_t r0 = 0; r0 < rows; r0 += per) {
    int64_t rs = rows - r0 < per ? rows - r0 : per;
    for (int64_t r = 0; r < rs; r++)
      __builtin_memcpy(t + r * n, p + (r0 + r) * ld, n * sizeof(float));
    activateContiguous(t, rs * n, act, a, b);
    for (int64_t r = 0; r < rs; r++)
      __builtin_memcpy(p + (r0 + r) * ld, t + r * n, n * sizeof(float));
  }
}

/// activateTile of a full register tile: rows of N floats (a compile-time width), gathered
/// with fixed-size copies.
template <int N>
LIBJIT_NOINLINE void activateTileN(float *p, int64_t ld, int64_t rows, int act, float a, float b) {
  float t[1024];
  constexpr int64_t per = 1024 / N;
  for (int64_t r0 = 0; r0 < rows; r0 += per) {
    int64_t rs = rows - r0 < per ? rows - r0 : per;
    for (int64_t r = 0; r < rs; r++)
      __builtin_memcpy(t + r * N, p + (r0 + r) * ld, N * sizeof(float));
    activateContiguous(t, rs * N, act, a, b);
    for (int64_t r = 0; r < rs; r++)
      __builtin_memcpy(p + (r0 + r) * ld, t + r * N, N * sizeof(float));
  }
}

/// activateTile of n contiguous floats.
LIBJIT_INLINE void activateRow(float *p, int64_t n, int act, float a, float b) {
  activateTile(p, n, 1, n, act, a, b);
}

} // namespace libjit

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_ACT_H
