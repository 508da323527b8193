// int8 element-wise operators and pooling (Int8Q in and out), bit-exact with the
// Interpreter.
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
//
// Pooling over [N*C planes][H][W]: MaxPool takes the largest raw value in the window (-128
// for an empty one) and maps it through a 256-entry table (the requantization, identity
// when the types agree); AvgPool and AdaptiveAvgPool sum x - inOffset in int32 and
// requantize inScale * sum / divisor in double, as the Interpreter does.
#include "libjit_defs.h"

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

/// Widest input row of the separable max pooling (wider rows take the windowed loop).
constexpr int64_t kPoolRow = 4096;
/// Largest column stride of the separable max pooling.
constexpr int64_t kPoolStride = 16;

namespace {

/// The max pooling's column maxima of output row \p oh: colMax[w] = the largest x[h][w]
/// over the window's rows [h0, h1) (-128 where the window has no row in the image).
LIBJIT_INLINE void qmaxColumns(int8_t *colMax, const int8_t *x, int64_t H, int64_t W,
                               int64_t oh, int64_t KH, int64_t SH, int64_t PT) {
  const int64_t hs = oh * SH - PT;
  const int64_t h0 = minI(maxI(hs, 0), H), h1 = minI(maxI(hs + KH, 0), H);
  if (h0 >= h1) {
    for (int64_t w = 0; w < W; w++)
      colMax[w] = -128;
    return;
  }
  const int8_t *r0 = x + h0 * W;
  for (int64_t w = 0; w < W; w++)
    colMax[w] = r0[w];
  for (int64_t h = h0 + 1; h < h1; h++) {
    const int8_t *r = x + h * W;
    for (int64_t w = 0; w < W; w++)
      colMax[w] = r[w] > colMax[w] ? r[w] : colMax[w];
  }
}

/// The column maxima of one row split into their even columns (phase 0, at \p phases) and
/// odd ones (phase 1, after them), as qmaxInside lays phases out for a column stride of 2:
/// each pair of bytes read as one 16-bit word and its two bytes taken apart, a loop the
/// JIT vectorises (the byte-strided copy was not).
LIBJIT_INLINE void qmaxSplit2(int8_t *phases, const int8_t *colMax, int64_t W,
                              int64_t phStart[2]) {
  const int64_t nE = (W + 1) / 2, nO = W / 2;
  int8_t *ev = phases, *od = phases + nE;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  const int evShift = 8, odShift = 0;
#else
  const int evShift = 0, odShift = 8;
#endif
  for (int64_t i = 0; i < nO; i++) {
    uint16_t pair;
    __builtin_memcpy(&pair, colMax + 2 * i, 2);
    ev[i] = int8_t(uint8_t(pair >> evShift));
    od[i] = int8_t(uint8_t(pair >> odShift));
  }
  if (nE > nO)
    ev[nO] = colMax[W - 1];
  phStart[0] = 0, phStart[1] = nE;
}

/// The max pooling's outputs [owA, owB) of one row, those whose window lies inside the
/// row: column ow SW + t (t = kw - PL) is entry ow + floor(t / SW) of phase t mod SW of the
/// column maxima; the phases are contiguous, so each kw is one vectorisable pass. Then the
/// table, unless it is the identity.
LIBJIT_INLINE void qmaxInside(int8_t *yr, const int8_t *colMax, int8_t *phases, int64_t W,
                              int64_t KW, int64_t SW, int64_t PL, int64_t owA, int64_t owB,
                              const int8_t *lut, bool identity) {
  int64_t phStart[kPoolStride];
  if (SW == 2)
    qmaxSplit2(phases, colMax, W, phStart);
  else
    for (int64_t ph = 0, at = 0; ph < SW; ph++) {
      phStart[ph] = at;
      for (int64_t i = 0, c = ph; c < W; i++, c += SW)
        phases[at + i] = colMax[c];
      at += (W - ph + SW - 1) / SW;
    }
  for (int64_t kw = 0; kw < KW; kw++) {
    const int64_t t = kw - PL, ph = ((t % SW) + SW) % SW, sh = (t - ph) / SW;
    const int8_t *src = phases + phStart[ph] + sh;
    if (kw == 0)
      for (int64_t ow = owA; ow < owB; ow++)
        yr[ow] = src[ow];
    else
      for (int64_t ow = owA; ow < owB; ow++)
        yr[ow] = src[ow] > yr[ow] ? src[ow] : yr[ow];
  }
  if (!identity)
    for (int64_t ow = owA; ow < owB; ow++)
      yr[ow] = lut[int32_t(yr[ow]) + 128];
}

/// The max pooling's other outputs of one row (windows crossing the row's ends), window by
/// window over the column maxima.
LIBJIT_INLINE void qmaxEdges(int8_t *yr, const int8_t *colMax, int64_t W, int64_t OW,
                             int64_t KW, int64_t SW, int64_t PL, int64_t owA, int64_t owB,
                             const int8_t *lut) {
  for (int64_t ow = 0; ow < OW; ow++) {
    if (ow == owA && owA < owB)
      ow = owB;
    if (ow >= OW)
      break;
    const int64_t ws = ow * SW - PL;
    const int64_t w0 = minI(maxI(ws, 0), W), w1 = minI(maxI(ws + KW, 0), W);
    int32_t m = -128;
    for (int64_t w = w0; w < w1; w++)
      m = colMax[w] > m ? colMax[w] : m;
    yr[ow] = lut[m + 128];
  }
}

/// Max pooling of planes [b, e), separably: the window's rows [h0, h1) depend only on oh
/// and its columns [w0, w1) only on ow, so the window's maximum is the maximum over
/// [w0, w1) of the column maxima over [h0, h1) (a row pass over contiguous bytes), the same
/// value as the windowed loop; -128 for an empty window; then the table. W <= kPoolRow,
/// SW <= kPoolStride.
LIBJIT_INLINE void qmaxSeparable(int8_t *dst, const int8_t *src, const int8_t *lut, int64_t b,
                                 int64_t e, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                 int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                 int64_t PL) {
  int8_t colMax[kPoolRow], phases[kPoolRow];
  bool identity = true;
  for (int q = -128; q < 128 && identity; q++)
    identity = lut[q + 128] == q;
  // Outputs whose window lies inside the row: ow SW - PL >= 0 and ow SW - PL + KW <= W.
  const int64_t owA = minI(ceilDiv(PL, SW), OW);
  const int64_t owB = W - KW + PL >= 0 ? maxI(owA, minI((W - KW + PL) / SW + 1, OW)) : owA;
  for (int64_t p = b; p < e; p++) {
    const int8_t *x = src + p * H * W;
    int8_t *y = dst + p * OH * OW;
    for (int64_t oh = 0; oh < OH; oh++) {
      qmaxColumns(colMax, x, H, W, oh, KH, SH, PT);
      int8_t *yr = y + oh * OW;
      if (owA < owB)
        qmaxInside(yr, colMax, phases, W, KW, SW, PL, owA, owB, lut, identity);
      qmaxEdges(yr, colMax, W, OW, KW, SW, PL, owA, owB, lut);
    }
  }
}

/// The pooling window of output (oh, ow): rows [h0, h1), columns [w0, w1) (mode 2:
/// adaptive; else window (KH, KW, SH, SW, PT, PL) clipped to the image).
LIBJIT_INLINE void qpoolWindow(int64_t mode, int64_t oh, int64_t ow, int64_t H, int64_t W,
                               int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
                               int64_t SW, int64_t PT, int64_t PL, int64_t w[4]) {
  if (mode == 2) {
    w[0] = oh * H / OH, w[1] = ((oh + 1) * H + OH - 1) / OH;
    w[2] = ow * W / OW, w[3] = ((ow + 1) * W + OW - 1) / OW;
    return;
  }
  const int64_t hs = oh * SH - PT, ws = ow * SW - PL;
  w[0] = minI(maxI(hs, 0), H), w[1] = minI(maxI(hs + KH, 0), H);
  w[2] = minI(maxI(ws, 0), W), w[3] = minI(maxI(ws + KW, 0), W);
}

/// The average of window \p w of plane \p x requantized as the Interpreter does: the sum
/// of x - inOff in int32, inScale * sum / div in double, rounded half away from zero over
/// outScale, plus outOff, saturated.
LIBJIT_INLINE int8_t qavgWindow(const int8_t *x, int64_t W, const int64_t w[4], int64_t div,
                                double dIn, int64_t inOff, double dOut, double dOff) {
  int32_t sum = 0;
  for (int64_t h = w[0]; h < w[1]; h++)
    for (int64_t c = w[2]; c < w[3]; c++)
      sum += int32_t(x[h * W + c]) - int32_t(inOff);
  double real = dIn * double(sum);
  real = real / double(div);
  double q = __builtin_round(real / dOut);
  q = q + dOff;
  if (!(q >= -128.0))
    q = -128.0;
  if (q > 127.0)
    q = 127.0;
  return int8_t(q);
}

} // namespace

/// mode 0: max pooling with window (KH, KW, SH, SW, PT, PL); 1: average pooling with that
/// window (countPads: divide by KH KW); 2: adaptive average pooling to OH x OW.
LIBJIT_EXPORT void libjit_qpool_i8(int8_t *dst, const int8_t *src, const int8_t *lut,
                                   int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                   int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                   int64_t PL, int64_t mode, int64_t countPads, float inScale,
                                   int64_t inOff, float outScale, int64_t outOff, int64_t tid,
                                   int64_t nthreads) {
  int64_t b, e;
  partition(planes, 1, tid, nthreads, &b, &e);
  if (mode == 0 && W <= kPoolRow && SW <= kPoolStride) {
    qmaxSeparable(dst, src, lut, b, e, H, W, OH, OW, KH, KW, SH, SW, PT, PL);
    return;
  }
  const double dIn = double(inScale), dOut = double(outScale), dOff = double(outOff);
  for (int64_t p = b; p < e; p++) {
    const int8_t *x = src + p * H * W;
    int8_t *y = dst + p * OH * OW;
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t w[4];
        qpoolWindow(mode, oh, ow, H, W, OH, OW, KH, KW, SH, SW, PT, PL, w);
        if (mode == 0) {
          int32_t m = -128;
          for (int64_t h = w[0]; h < w[1]; h++)
            for (int64_t c = w[2]; c < w[3]; c++)
              m = x[h * W + c] > m ? x[h * W + c] : m;
          y[oh * OW + ow] = lut[m + 128];
          continue;
        }
        const int64_t area = (w[1] - w[0]) * (w[3] - w[2]);
        const int64_t div = mode == 1 && countPads ? KH * KW : (area > 1 ? area : 1);
        y[oh * OW + ow] = qavgWindow(x, W, w, div, dIn, inOff, dOut, dOff);
      }
  }
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
  double r = x + y;
  double q = __builtin_round(r / so);
  q = q + oo;
  if (!(q >= -128.0))
    q = -128.0;
  if (q > 127.0)
    q = 127.0;
  return int8_t(q);
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
