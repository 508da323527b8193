// int8 element-wise operators (Int8Q in and out), bit-exact with the Interpreter (the
// pools are in libjit_qpool.cpp).
//
// Add and Sub compute, in registers, the Interpreter's arithmetic (libjit_qadd_i8_<isa>,
// at the end of this file), and so does BatchedAdd (libjit_qbadd_i8_<isa>: the same Add
// with the slice repeated per row). The other element-wise operators use tables.
//
// Element-wise: an int8 operator is a function of 256 (unary: Relu) or 65536 (binary: Add,
// Sub, Mul, Max, Min) input pairs, so the emitter (codegen/EmitQuantElem.cpp) tabulates it
// at compile time with the Interpreter's own arithmetic (dequantize in double, combine,
// round half away from zero, saturate) and the kernels look results up: lut8 y = t[x + 128],
// lut16 y = t[(a + 128) * 256 + b + 128]. A binary operand that is broadcast along the
// inner dimension (rows of `inner` elements, one value of the other operand per row) is
// not handled here: the operands have the result's size.

#include "libjit_defs.h"
#include "libjit_qround.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

#if defined(__x86_64__)
#include <immintrin.h>
#endif

using namespace libjit;

LIBJIT_EXPORT void libjit_qlut8_i8(int8_t *dst, const int8_t *src, int64_t n, const int8_t *lut,
                                   int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(n, 64, tid, nthreads, &b, &e);
  for (int64_t i = b; i < e; i++)
    dst[i] = lut[int32_t(src[i]) + 128];
}

/// dst = min(max(src, lo), hi): a table that is a clamp of the raw value (a Relu on its
/// input's grid), vectorised by the JIT.
LIBJIT_EXPORT void libjit_qclamp_i8(int8_t *dst, const int8_t *src, int64_t n, int64_t lo,
                                    int64_t hi, int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(n, 64, tid, nthreads, &b, &e);
  const int8_t l = int8_t(lo), h = int8_t(hi);
  for (int64_t i = b; i < e; i++) {
    int8_t v = src[i];
    v = v < l ? l : v;
    dst[i] = v > h ? h : v;
  }
}

LIBJIT_EXPORT void libjit_qlut16_i8(int8_t *dst, const int8_t *a, const int8_t *bsrc, int64_t n,
                                    const int8_t *lut, int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(n, 64, tid, nthreads, &b, &e);
  for (int64_t i = b; i < e; i++)
    dst[i] = lut[(int32_t(uint8_t(a[i] ^ 0x80)) << 8) | int32_t(uint8_t(bsrc[i] ^ 0x80))];
}

// ------------------------------------------------------------------ int8 Add and Sub
//
// y = Add(a, b) (Sub: sb negated, x + (-y) being x - y in IEEE arithmetic), exactly the
// Interpreter's: r = sa (a - oa) + sb (b - ob) in double (both products exact: a float
// times a 9-bit integer), q = round(r / so) half away from zero, + oo, saturated. The
// vector kernels compute s = A da + B db in float (A = sa / so, B = sb / so, rounded once
// from double): within 3.02 2^-24 (|A da| + |B db|) of the double quotient, so where the
// distance from s to the nearest half-integer exceeds 2^-20 (|A da| + |B db|) (taken in
// float), the double quotient rounds to rint(s) with no tie, and q = clamp(rint(s),
// -128 - oo, 127 - oo) + oo bit for bit. A vector with a lane nearer takes the double
// formula for its elements. (The same argument as the convolutions' FastRQ,
// libjit_qconv.cpp.) Used only when A and B are 0 or in [2^-100, 2^90] and |oo| <= 2^20
// (qaddFast); otherwise every element takes the double formula.

namespace libjit {
namespace {

LIBJIT_INLINE int8_t qaddOne(int8_t a, int8_t b, double sa, double oa, double sb, double ob,
                             double so, double oo) {
  double x = sa * (double(a) - oa);
  double y = sb * (double(b) - ob);
  return qroundI8(x + y, so, oo);
}

struct QAddFast {
  float A, B, loF, hiF;
  int32_t oa, ob, oo;
};

LIBJIT_INLINE bool qaddFast(float sa, int64_t oa, float sb, int64_t ob, float so, int64_t oo,
                            QAddFast &f) {
  const double A = double(sa) / double(so), B = double(sb) / double(so);
  auto inRange = [](double v) {
    const double m = v < 0 ? -v : v;
    return m == 0.0 || (m >= 0x1p-100 && m <= 0x1p90);
  };
  if (!inRange(A) || !inRange(B) || oo < -(int64_t(1) << 20) || oo > (int64_t(1) << 20) ||
      oa < -(int64_t(1) << 20) || oa > (int64_t(1) << 20) || ob < -(int64_t(1) << 20) ||
      ob > (int64_t(1) << 20))
    return false;
  f.A = float(A), f.B = float(B);
  f.loF = float(-128 - oo), f.hiF = float(127 - oo);
  f.oa = int32_t(oa), f.ob = int32_t(ob), f.oo = int32_t(oo);
  return true;
}

} // namespace
} // namespace libjit

using namespace libjit;

/// The double formula for every element: targets without AVX2, and the vector kernels'
/// fallback.
LIBJIT_EXPORT void libjit_qadd_i8_generic(int8_t *dst, const int8_t *a, const int8_t *bsrc,
                                          int64_t n, float sa, int64_t oa, float sb,
                                          int64_t ob, float so, int64_t oo, int64_t tid,
                                          int64_t nthreads) {
  int64_t b, e;
  partition(n, 64, tid, nthreads, &b, &e);
  const double dsa = sa, dsb = sb, dso = so, doa = double(oa), dob = double(ob),
               doo = double(oo);
  for (int64_t i = b; i < e; i++)
    dst[i] = qaddOne(a[i], bsrc[i], dsa, doa, dsb, dob, dso, doo);
}

/// BatchedAdd: dst = batch [rows, S] + slice [S] added to every row, the Add's arithmetic
/// (the Interpreter's BatchedAdd is its Add with the slice repeated). The threads split the
/// rows * S elements; each walks its range in runs that stay within one row.
LIBJIT_EXPORT void libjit_qbadd_i8_generic(int8_t *dst, const int8_t *batch,
                                           const int8_t *slice, int64_t rows, int64_t S,
                                           float sa, int64_t oa, float sb, int64_t ob,
                                           float so, int64_t oo, int64_t tid,
                                           int64_t nthreads) {
  int64_t b, e;
  partition(rows * S, 64, tid, nthreads, &b, &e);
  const double dsa = sa, dsb = sb, dso = so, doa = double(oa), dob = double(ob),
               doo = double(oo);
  for (int64_t i = b; i < e; i++)
    dst[i] = qaddOne(batch[i], slice[i % S], dsa, doa, dsb, dob, dso, doo);
}

#if defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif
namespace libjit {
namespace {

/// Elements [0, n) of the AVX2 Add, b read alongside a: 8 at a time by qaddFast's float
/// quotient where \p fast (the constants \p f), else and for the tail the double formula
/// (\p d: sa, oa, sb, ob, so, oo).
inline __attribute__((always_inline)) void qaddAvx2Span(int8_t *dst, const int8_t *a,
                                                        const int8_t *bsrc, int64_t n,
                                                        bool fast, const QAddFast &f,
                                                        const double d[6]) {
  int64_t i = 0;
  if (fast) {
    const __m256 vA = _mm256_set1_ps(f.A), vB = _mm256_set1_ps(f.B),
                 loF = _mm256_set1_ps(f.loF), hiF = _mm256_set1_ps(f.hiF),
                 k20 = _mm256_set1_ps(0x1p-20f), half = _mm256_set1_ps(0.5f),
                 sign = _mm256_set1_ps(-0.0f);
    const __m256i voa = _mm256_set1_epi32(f.oa), vob = _mm256_set1_epi32(f.ob),
                  voo = _mm256_set1_epi32(f.oo);
    for (; i + 8 <= n; i += 8) {
      __m256i ia = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(a + i))), voa);
      __m256i ib = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(bsrc + i))), vob);
      __m256 p1 = _mm256_mul_ps(_mm256_cvtepi32_ps(ia), vA);
      __m256 p2 = _mm256_mul_ps(_mm256_cvtepi32_ps(ib), vB);
      __m256 s = _mm256_add_ps(p1, p2);
      __m256 r = _mm256_round_ps(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      __m256 ed = _mm256_andnot_ps(sign, _mm256_sub_ps(s, r));
      __m256 t = _mm256_add_ps(_mm256_andnot_ps(sign, p1), _mm256_andnot_ps(sign, p2));
      __m256 g = _mm256_add_ps(_mm256_mul_ps(t, k20), ed);
      if (_mm256_movemask_ps(_mm256_cmp_ps(g, half, _CMP_LT_OQ)) != 0xff) {
        for (int64_t k = i; k < i + 8; k++)
          dst[k] = qaddOne(a[k], bsrc[k], d[0], d[1], d[2], d[3], d[4], d[5]);
        continue;
      }
      r = _mm256_min_ps(_mm256_max_ps(r, loF), hiF);
      __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(r), voo);
      __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      _mm_storel_epi64((__m128i *)(dst + i), _mm_packs_epi16(w, w));
    }
  }
  for (; i < n; i++)
    dst[i] = qaddOne(a[i], bsrc[i], d[0], d[1], d[2], d[3], d[4], d[5]);
}

} // namespace
} // namespace libjit

LIBJIT_EXPORT void libjit_qadd_i8_avx2(int8_t *dst, const int8_t *a, const int8_t *bsrc,
                                       int64_t n, float sa, int64_t oa, float sb, int64_t ob,
                                       float so, int64_t oo, int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(n, 64, tid, nthreads, &b, &e);
  const double d[6] = {sa, double(oa), sb, double(ob), so, double(oo)};
  QAddFast f{};
  const bool fast = qaddFast(sa, oa, sb, ob, so, oo, f);
  if (e > b)
    qaddAvx2Span(dst + b, a + b, bsrc + b, e - b, fast, f, d);
}

/// BatchedAdd (libjit_qbadd_i8_generic): the AVX2 Add on runs within one row.
LIBJIT_EXPORT void libjit_qbadd_i8_avx2(int8_t *dst, const int8_t *batch, const int8_t *slice,
                                        int64_t rows, int64_t S, float sa, int64_t oa,
                                        float sb, int64_t ob, float so, int64_t oo,
                                        int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(rows * S, 64, tid, nthreads, &b, &e);
  const double d[6] = {sa, double(oa), sb, double(ob), so, double(oo)};
  QAddFast f{};
  const bool fast = qaddFast(sa, oa, sb, ob, so, oo, f);
  for (int64_t i = b; i < e;) {
    const int64_t s = i % S, len = minI(S - s, e - i);
    qaddAvx2Span(dst + i, batch + i, slice + s, len, fast, f, d);
    i += len;
  }
}
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")
#endif
namespace libjit {
namespace {

/// The AVX-512 Add's constants and one vector of it. s = A da + B db as in the AVX2 kernel
/// and qaddFast's bound; rint(s) by the round-to-nearest of s + M, M = 1.5 2^23 (exact
/// while |s| < 2^22: qadd512Setup checks the operands' range), so the bits of s + M less
/// those of M are rint(s) as an integer, and rint(s) + oo narrowed with signed saturation
/// is clamp(rint(s), -128 - oo, 127 - oo) + oo.
struct QAdd512 {
  __m512 A, B, k20, half, M;
  __m512i oa, ob, bias;
  /// Lanes [i, i + 16): rint(s) + oo in \p q, and the mask of the lanes far enough from a
  /// half-integer (qaddFast's test) for it to be the Interpreter's result.
  inline __attribute__((always_inline)) __mmask16 lanes(const int8_t *a, const int8_t *b,
                                                        __m512i &q) const {
    __m512i ia = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)a)), oa);
    __m512i ib = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b)), ob);
    __m512 p1 = _mm512_mul_ps(_mm512_cvtepi32_ps(ia), A);
    __m512 p2 = _mm512_mul_ps(_mm512_cvtepi32_ps(ib), B);
    __m512 s = _mm512_add_ps(p1, p2);
    __m512 m = _mm512_add_ps(s, M);
    __m512 ed = _mm512_abs_ps(_mm512_sub_ps(s, _mm512_sub_ps(m, M)));
    __m512 t = _mm512_add_ps(_mm512_abs_ps(p1), _mm512_abs_ps(p2));
    __m512 g = _mm512_add_ps(_mm512_mul_ps(t, k20), ed);
    q = _mm512_sub_epi32(_mm512_castps_si512(m), bias);
    return _mm512_cmp_ps_mask(g, half, _CMP_LT_OQ);
  }
};

/// QAdd512's constants from qaddFast's, or false where |s| may reach 2^21 (a float bound
/// of |A| max|a - oa| + |B| max|b - ob|, with margin for its roundings).
inline __attribute__((always_inline)) bool qadd512Setup(const QAddFast &f, QAdd512 &k) {
  const double da = double(f.oa < 0 ? 127 - int64_t(f.oa) : 128 + int64_t(f.oa));
  const double db = double(f.ob < 0 ? 127 - int64_t(f.ob) : 128 + int64_t(f.ob));
  if (__builtin_fabs(double(f.A)) * da + __builtin_fabs(double(f.B)) * db >= 0x1p21)
    return false;
  const float M = 0x1.8p23f;
  int32_t mBits;
  __builtin_memcpy(&mBits, &M, 4);
  k.A = _mm512_set1_ps(f.A), k.B = _mm512_set1_ps(f.B), k.k20 = _mm512_set1_ps(0x1p-20f);
  k.half = _mm512_set1_ps(0.5f), k.M = _mm512_set1_ps(M);
  k.oa = _mm512_set1_epi32(f.oa), k.ob = _mm512_set1_epi32(f.ob);
  k.bias = _mm512_set1_epi32(mBits - f.oo);
  return true;
}

/// One vector of 16 results: QAdd512's where every lane passes, else the double formula.
inline __attribute__((always_inline)) void qadd512One(int8_t *dst, const int8_t *a,
                                                      const int8_t *b, const QAdd512 &k,
                                                      const double d[6]) {
  __m512i q;
  if (k.lanes(a, b, q) == 0xffff) {
    _mm_storeu_si128((__m128i *)dst, _mm512_cvtsepi32_epi8(q));
    return;
  }
  for (int64_t j = 0; j < 16; j++)
    dst[j] = qaddOne(a[j], b[j], d[0], d[1], d[2], d[3], d[4], d[5]);
}

/// Elements [i, e) of the AVX-512 Add, 64 at a time (four vectors narrowed by two
/// saturating packs, put in order by one permutation: the convolutions' four-vector
/// store), then 16 at a time; returns where it stopped (fewer than 16 left).
inline __attribute__((always_inline)) int64_t qadd512Run(int8_t *dst, const int8_t *a,
                                                         const int8_t *b, int64_t i, int64_t e,
                                                         const QAdd512 &k, const double d[6]) {
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  for (; i + 64 <= e; i += 64) {
    __m512i q0, q1, q2, q3;
    const __mmask16 ok = k.lanes(a + i, b + i, q0) & k.lanes(a + i + 16, b + i + 16, q1) &
                         k.lanes(a + i + 32, b + i + 32, q2) & k.lanes(a + i + 48, b + i + 48, q3);
    if (ok != 0xffff) {
      for (int64_t j = i; j < i + 64; j += 16)
        qadd512One(dst + j, a + j, b + j, k, d);
      continue;
    }
    __m512i p = _mm512_packs_epi16(_mm512_packs_epi32(q0, q1), _mm512_packs_epi32(q2, q3));
    _mm512_storeu_si512((void *)(dst + i), _mm512_permutexvar_epi32(order, p));
  }
  for (; i + 16 <= e; i += 16)
    qadd512One(dst + i, a + i, b + i, k, d);
  return i;
}

/// Elements [0, n) of the AVX-512 Add: qadd512Run where the fast quotient holds (\p fast),
/// the rest by the double formula (as qaddAvx2Span for AVX2).
inline __attribute__((always_inline)) void qadd512Span(int8_t *dst, const int8_t *a,
                                                       const int8_t *b, int64_t n, bool fast,
                                                       const QAdd512 &k, const double d[6]) {
  int64_t j = fast ? qadd512Run(dst, a, b, 0, n, k, d) : 0;
  for (; j < n; j++)
    dst[j] = qaddOne(a[j], b[j], d[0], d[1], d[2], d[3], d[4], d[5]);
}

} // namespace
} // namespace libjit

/// AVX-512 (named after the int8 kernels' ISA choice, vnni: the hosts that have it).
LIBJIT_EXPORT void libjit_qadd_i8_vnni(int8_t *dst, const int8_t *a, const int8_t *bsrc,
                                       int64_t n, float sa, int64_t oa, float sb, int64_t ob,
                                       float so, int64_t oo, int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(n, 64, tid, nthreads, &b, &e);
  const double d[6] = {sa, double(oa), sb, double(ob), so, double(oo)};
  QAddFast f{};
  QAdd512 k;
  const bool fast = qaddFast(sa, oa, sb, ob, so, oo, f) && qadd512Setup(f, k);
  if (e > b)
    qadd512Span(dst + b, a + b, bsrc + b, e - b, fast, k, d);
}

/// BatchedAdd (libjit_qbadd_i8_generic): the AVX-512 Add on runs within one row.
LIBJIT_EXPORT void libjit_qbadd_i8_vnni(int8_t *dst, const int8_t *batch, const int8_t *slice,
                                        int64_t rows, int64_t S, float sa, int64_t oa,
                                        float sb, int64_t ob, float so, int64_t oo,
                                        int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(rows * S, 64, tid, nthreads, &b, &e);
  const double d[6] = {sa, double(oa), sb, double(ob), so, double(oo)};
  QAddFast f{};
  QAdd512 k;
  const bool fast = qaddFast(sa, oa, sb, ob, so, oo, f) && qadd512Setup(f, k);
  for (int64_t i = b; i < e;) {
    const int64_t s = i % S, len = minI(S - s, e - i);
    qadd512Span(dst + i, batch + i, slice + s, len, fast, k, d);
    i += len;
  }
}
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
