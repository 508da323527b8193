// 16-float vectors for the row kernels (pooling, depthwise convolution) and the transposed
// stores of the pixel-major convolutions: loads and stores of any alignment, the even/odd
// split of 32 consecutive floats that stride-2 windows need, a 16 x 16 transpose. Written with vector extensions: the JIT lowers a 16-float vector to one 512-bit
// register on AVX-512 hosts and to two 256-bit registers elsewhere. Internal to the kernel
// library.
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_VEC_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_VEC_H

#include "libjit_act.h"
#include "libjit_defs.h"

namespace libjit {

typedef float F16 __attribute__((vector_size(64)));
typedef float F32x __attribute__((vector_size(128)));

/// Vectors of VW floats (16: one AVX-512 register, 8: one AVX2 register) for kernels
/// written once for both widths, with unaligned loads and stores and a broadcast.
template <int VW> struct VecOf;
template <> struct VecOf<16> { typedef float T __attribute__((vector_size(64))); };
template <> struct VecOf<8> { typedef float T __attribute__((vector_size(32))); };

template <class V> LIBJIT_INLINE V loadV(const float *p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}
template <class V> LIBJIT_INLINE void storeV(float *p, V v) { __builtin_memcpy(p, &v, sizeof(V)); }
/// All lanes = s. (Not `(V){} + s`: without fast-math 0 + s does not fold, and the add
/// costs an instruction per broadcast in the inner loop.)
template <class V> LIBJIT_INLINE V splatV(float s) {
  V v;
  LIBJIT_UNROLL
  for (unsigned i = 0; i < sizeof(V) / sizeof(float); i++)
    v[i] = s;
  return v;
}

LIBJIT_INLINE F16 ld16(const float *p) {
  F16 v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
LIBJIT_INLINE F32x ld32(const float *p) {
  F32x v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
LIBJIT_INLINE void st16(float *p, F16 v) { __builtin_memcpy(p, &v, sizeof(v)); }
LIBJIT_INLINE F16 splat16(float s) {
  F16 v;
  LIBJIT_UNROLL
  for (int i = 0; i < 16; i++)
    v[i] = s;
  return v;
}
/// p[0], p[2], ..., p[30].
LIBJIT_INLINE F16 evens(F32x v) {
  return __builtin_shufflevector(v, v, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}
/// p[1], p[3], ..., p[31].
LIBJIT_INLINE F16 odds(F32x v) {
  return __builtin_shufflevector(v, v, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}
LIBJIT_INLINE F16 clamp16(F16 v, F16 lo, F16 hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

/// Transposes the 16 x 16 block v (v[i][j] becomes v[j][i]) in four stages; stage B
/// swaps the off-diagonal B x B sub-blocks of every 2B x 2B block.
LIBJIT_INLINE void transpose16(F16 v[16]) {
  for (int r = 0; r < 16; r += 16)
    for (int q = r; q < r + 8; q++) {
      F16 a = v[q], b = v[q + 8];
      v[q] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
      v[q + 8] = __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29,
                                         30, 31);
    }
  for (int r = 0; r < 16; r += 8)
    for (int q = r; q < r + 4; q++) {
      F16 a = v[q], b = v[q + 4];
      v[q] =
          __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
      v[q + 4] =
          __builtin_shufflevector(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    }
  for (int r = 0; r < 16; r += 4)
    for (int q = r; q < r + 2; q++) {
      F16 a = v[q], b = v[q + 2];
      v[q] =
          __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
      v[q + 2] =
          __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    }
  for (int r = 0; r < 16; r += 2)
    for (int q = r; q < r + 1; q++) {
      F16 a = v[q], b = v[q + 1];
      v[q] =
          __builtin_shufflevector(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
      v[q + 1] =
          __builtin_shufflevector(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
    }
}

/// A finished output vector: v plus the residual at ad (if any), clamped when act is a clamp.
LIBJIT_INLINE F16 addClampOut(F16 v, const float *ad, int64_t act, F16 lov, F16 hiv) {
  if (ad)
    v += ld16(ad);
  return act == ActClamp ? clamp16(v, lov, hiv) : v;
}

/// y[o][p] = act(t[p][o] + a[o][p]) over pixels [m0, m1) and channels [n0, n1) (a and
/// the activation optional; act a libjit_act.h code, ActClamp to [lo, hi]), where y and a are [channels][P] and t is pixel-major from channel
/// n0 (t[p][o] at t + p ldt + o - n0): 16 x 16 blocks transposed in registers, the ragged
/// edges one value at a time. Every output is written once, so y may be the same buffer
/// as a.
LIBJIT_INLINE void transposeOut(float *y, const float *t, int64_t ldt, const float *a, int64_t P,
                                int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t act,
                                float lo, float hi) {
  F16 lov = splat16(lo), hiv = splat16(hi);
  // Other activations than the clamp: on each block once it is stored.
  int gact = act > ActClamp ? int(act) : 0;
  float ga = lo, gb = hi;
  act = act == ActClamp;
  int64_t pEnd = m0 + (m1 - m0) / 16 * 16, oEnd = n0 + (n1 - n0) / 16 * 16;
  auto one = [&](int64_t o, int64_t p) {
    float v = t[p * ldt + o - n0];
    if (a)
      v += a[o * P + p];
    if (act) {
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
    }
    y[o * P + p] = v;
  };
  for (int64_t ob = n0; ob < oEnd; ob += 16) {
    for (int64_t pb = m0; pb < pEnd; pb += 16) {
      F16 v[16];
      LIBJIT_UNROLL
      for (int i = 0; i < 16; i++)
        v[i] = ld16(t + (pb + i) * ldt + ob - n0);
      transpose16(v);
      LIBJIT_UNROLL
      for (int i = 0; i < 16; i++)
        st16(y + (ob + i) * P + pb,
             addClampOut(v[i], a ? a + (ob + i) * P + pb : nullptr, act, lov, hiv));
      if (gact)
        activateTileN<16>(y + ob * P + pb, P, 16, gact, ga, gb);
    }
    for (int64_t o = ob; o < ob + 16; o++)
      for (int64_t p = pEnd; p < m1; p++)
        one(o, p);
    if (gact && pEnd < m1)
      activateTile(y + ob * P + pEnd, P, 16, m1 - pEnd, gact, ga, gb);
  }
  for (int64_t o = oEnd; o < n1; o++)
    for (int64_t p = m0; p < m1; p++)
      one(o, p);
  if (gact && oEnd < n1)
    activateTile(y + oEnd * P + m0, P, n1 - oEnd, m1 - m0, gact, ga, gb);
}

} // namespace libjit

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_VEC_H
