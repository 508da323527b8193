// int8 pooling (Int8Q in and out) over [N*C planes][H][W], bit-exact with the Interpreter.
//
// MaxPool takes the largest raw value in the window (-128 for an empty one) and maps it
// through a 256-entry table (the requantization, skipped when it is the identity); AvgPool
// and AdaptiveAvgPool sum x - inOffset in int32 and requantize inScale * sum / divisor in
// double, as the Interpreter does. Every kernel splits the planes between the threads.
//
// MaxPool is separable: a window's rows depend only on the output row and its columns only
// on the output column, so its maximum is the maximum over its columns of the column maxima
// over its rows. libjit_qpool_i8_<vnni|avx2> take column strides 1 and 2 in registers: per
// output row the column maxima (a vector pass over the window's rows) are written into a
// row padded with -128 (the value no window maximum is below, so a window clipped by the
// image takes the same maximum as the padded one, and an empty one -128), then each vector
// of outputs is the maximum of KW unaligned loads of that row, one per kernel column, taken
// every other byte at stride 2 (a narrowing of 16-bit words to their low bytes). Other
// strides, and rows too wide for the padded row, take the portable code
// (libjit_qpool_i8_generic), which the JIT vectorises where it can.

#include "libjit_defs.h"
#include "libjit_qround.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

using namespace libjit;

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

/// The sum of x - inOff over \p n consecutive bytes, in int32 (a loop the JIT vectorises).
LIBJIT_INLINE int32_t qsumRun(const int8_t *x, int64_t n, int32_t inOff) {
  int32_t sum = 0;
  for (int64_t i = 0; i < n; i++)
    sum += int32_t(x[i]) - inOff;
  return sum;
}

/// The average of window \p w of plane \p x requantized as the Interpreter does: the sum
/// of x - inOff in int32, inScale * sum / div in double, rounded half away from zero over
/// outScale, plus outOff, saturated. A window of whole rows (a global pool's) is one run.
LIBJIT_INLINE int8_t qavgWindow(const int8_t *x, int64_t W, const int64_t w[4], int64_t div,
                                double dIn, int64_t inOff, double dOut, double dOff) {
  int32_t sum = 0;
  if (w[2] == 0 && w[3] == W)
    sum = qsumRun(x + w[0] * W, (w[1] - w[0]) * W, int32_t(inOff));
  else
    for (int64_t h = w[0]; h < w[1]; h++)
      sum += qsumRun(x + h * W + w[2], w[3] - w[2], int32_t(inOff));
  double real = dIn * double(sum);
  real = real / double(div);
  return qroundI8(real, dOut, dOff);
}

/// The pooling's shape: input planes H x W, output OH x OW, window KH x KW, strides SH, SW,
/// pads PT (top), PL (left).
struct QPoolShape {
  int64_t H, W, OH, OW, KH, KW, SH, SW, PT, PL;
};

/// Planes [b, e) by the portable code: max pooling separably where the row fits
/// (qmaxSeparable), else window by window; averages window by window.
LIBJIT_INLINE void qpoolPlanes(int8_t *dst, const int8_t *src, const int8_t *lut, int64_t b,
                               int64_t e, const QPoolShape &s, int64_t mode, int64_t countPads,
                               float inScale, int64_t inOff, float outScale, int64_t outOff) {
  const int64_t H = s.H, W = s.W, OH = s.OH, OW = s.OW, KH = s.KH, KW = s.KW;
  if (mode == 0 && W <= kPoolRow && s.SW <= kPoolStride) {
    qmaxSeparable(dst, src, lut, b, e, H, W, OH, OW, KH, KW, s.SH, s.SW, s.PT, s.PL);
    return;
  }
  const double dIn = double(inScale), dOut = double(outScale), dOff = double(outOff);
  for (int64_t p = b; p < e; p++) {
    const int8_t *x = src + p * H * W;
    int8_t *y = dst + p * OH * OW;
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t w[4];
        qpoolWindow(mode, oh, ow, H, W, OH, OW, KH, KW, s.SH, s.SW, s.PT, s.PL, w);
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

/// Bytes of the vector max pooling's padded row (column w of the image at w + PL).
constexpr int64_t kPoolPadded = 2 * kPoolRow + 256;

/// The bytes of the padded row the vector max pooling reads: every window (output ow
/// covers [ow SW, ow SW + KW)), the column maxima at [PL, PL + W), and a vector's reach
/// (64 bytes) past the last output's first byte; 0 where the shape does not fit (column
/// strides other than 1 and 2, a negative left pad, a row longer than kPoolPadded).
LIBJIT_INLINE int64_t qmaxPaddedLen(const QPoolShape &s) {
  if ((s.SW != 1 && s.SW != 2) || s.PL < 0 || s.OW < 1 || s.KW < 1 || s.W > kPoolRow ||
      s.KW > kPoolRow || s.PL > kPoolRow)
    return 0;
  const int64_t len = maxI((s.OW - 1) * s.SW + s.KW + 64, s.PL + s.W);
  return len <= kPoolPadded ? len : 0;
}

/// Whether the max pooling's table \p lut maps every value to itself.
LIBJIT_INLINE bool qlutIdentity(const int8_t *lut) {
  bool identity = true;
  for (int q = -128; q < 128 && identity; q++)
    identity = lut[q + 128] == q;
  return identity;
}

/// The window rows [h0, h1) of output row \p oh, clipped to the image.
LIBJIT_INLINE void qmaxRows(const QPoolShape &s, int64_t oh, int64_t &h0, int64_t &h1) {
  const int64_t hs = oh * s.SH - s.PT;
  h0 = minI(maxI(hs, 0), s.H), h1 = minI(maxI(hs + s.KH, 0), s.H);
}

/// The table applied to an output row (the max pooling's requantization).
LIBJIT_INLINE void qlutRow(int8_t *yr, int64_t n, const int8_t *lut) {
  for (int64_t i = 0; i < n; i++)
    yr[i] = lut[int32_t(yr[i]) + 128];
}

/// The vector max pooling of planes [b, e), \p len bytes of padded row (qmaxPaddedLen): per
/// output row \p Isa::columns writes the column maxima over the window's rows into the
/// image's columns of the padded row (-128 around, set here once), and \p Isa::row the
/// outputs from it (both in the ISA's registers: called, not inlined, from this portable
/// loop).
template <class Isa>
LIBJIT_INLINE void qmaxVecPlanes(int8_t *dst, const int8_t *src, const int8_t *lut, int64_t b,
                                 int64_t e, const QPoolShape &s, int64_t len) {
  alignas(64) int8_t padded[kPoolPadded];
  for (int64_t i = 0; i < len; i++)
    padded[i] = -128;
  const bool identity = qlutIdentity(lut);
  for (int64_t p = b; p < e; p++)
    for (int64_t oh = 0; oh < s.OH; oh++) {
      int64_t h0, h1;
      qmaxRows(s, oh, h0, h1);
      if (h0 < h1)
        Isa::columns(padded + s.PL, src + (p * s.H + h0) * s.W, s.W, h1 - h0);
      else
        for (int64_t w = 0; w < s.W; w++)
          padded[s.PL + w] = -128;
      int8_t *yr = dst + (p * s.OH + oh) * s.OW;
      Isa::row(yr, padded, s.OW, s.KW, s.SW);
      if (!identity)
        qlutRow(yr, s.OW, lut);
    }
}

/// The pooling kernel of every ISA: the planes split between the threads, max pooling by
/// \p Isa's vector code where the shape fits it (where Isa::kVector), else the portable code.
template <class Isa>
LIBJIT_INLINE void qpoolRun(int8_t *dst, const int8_t *src, const int8_t *lut, int64_t planes,
                            const QPoolShape &s, int64_t mode, int64_t countPads,
                            float inScale, int64_t inOff, float outScale, int64_t outOff,
                            int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(planes, 1, tid, nthreads, &b, &e);
  if constexpr (Isa::kVector) {
    const int64_t len = mode == 0 ? qmaxPaddedLen(s) : 0;
    if (len > 0) {
      qmaxVecPlanes<Isa>(dst, src, lut, b, e, s, len);
      return;
    }
  }
  qpoolPlanes(dst, src, lut, b, e, s, mode, countPads, inScale, inOff, outScale, outOff);
}

} // namespace

/// libjit_qpool_i8_<isa>: mode 0: max pooling with window (KH, KW, SH, SW, PT, PL); 1:
/// average pooling with that window (countPads: divide by KH KW); 2: adaptive average
/// pooling to OH x OW. \p Isa: qpoolRun's.
#define LIBJIT_QPOOL_EXPORT(isa, Isa)                                                          \
  LIBJIT_EXPORT void libjit_qpool_i8_##isa(                                                    \
      int8_t *dst, const int8_t *src, const int8_t *lut, int64_t planes, int64_t H, int64_t W, \
      int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT,      \
      int64_t PL, int64_t mode, int64_t countPads, float inScale, int64_t inOff,               \
      float outScale, int64_t outOff, int64_t tid, int64_t nthreads) {                         \
    qpoolRun<Isa>(dst, src, lut, planes, QPoolShape{H, W, OH, OW, KH, KW, SH, SW, PT, PL},     \
                  mode, countPads, inScale, inOff, outScale, outOff, tid, nthreads);           \
  }

/// No vector max pooling (targets without AVX2).
struct QMaxNone {
  static constexpr bool kVector = false;
};

LIBJIT_QPOOL_EXPORT(generic, QMaxNone)

#if defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif
namespace {

/// The AVX2 max pooling: 32 bytes a vector.
struct QMaxAvx2 {
  static constexpr bool kVector = true;

  /// colMax[w] = the largest of rows [0, rows) of \p x at column w, w < W (rows >= 1);
  /// the last vector overlaps its predecessor, rows narrower than a vector go byte by byte.
  static void columns(int8_t *colMax, const int8_t *x, int64_t W, int64_t rows) {
    if (W < 32) {
      for (int64_t w = 0; w < W; w++) {
        int8_t m = x[w];
        for (int64_t h = 1; h < rows; h++)
          m = x[h * W + w] > m ? x[h * W + w] : m;
        colMax[w] = m;
      }
      return;
    }
    for (int64_t w0 = 0; w0 < W; w0 += 32) {
      const int64_t w = minI(w0, W - 32);
      __m256i v = _mm256_loadu_si256((const __m256i *)(x + w));
      for (int64_t h = 1; h < rows; h++)
        v = _mm256_max_epi8(v, _mm256_loadu_si256((const __m256i *)(x + h * W + w)));
      _mm256_storeu_si256((__m256i *)(colMax + w), v);
    }
  }

  /// The largest of the KW bytes from \p r, 32 consecutive starts.
  static inline __attribute__((always_inline)) __m256i window(const int8_t *r, int64_t KW) {
    __m256i v = _mm256_loadu_si256((const __m256i *)r);
    for (int64_t kw = 1; kw < KW; kw++)
      v = _mm256_max_epi8(v, _mm256_loadu_si256((const __m256i *)(r + kw)));
    return v;
  }

  /// Outputs [ow, ow + 32) of a row from the padded row: at stride 2 the even starts of
  /// 64, the low bytes of 16-bit words packed (unsigned saturation keeps 0..255) and the
  /// 128-bit lanes put back in order.
  static inline __attribute__((always_inline)) __m256i outputs(const int8_t *padded,
                                                               int64_t ow, int64_t KW,
                                                               int64_t SW) {
    if (SW == 1)
      return window(padded + ow, KW);
    const __m256i lowBytes = _mm256_set1_epi16(0xff);
    const __m256i lo = _mm256_and_si256(window(padded + 2 * ow, KW), lowBytes);
    const __m256i hi = _mm256_and_si256(window(padded + 2 * ow + 32, KW), lowBytes);
    return _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), 0xd8);
  }

  /// One output row: vectors of 32 outputs, the last overlapping its predecessor; a row
  /// narrower than a vector through a buffer.
  static void row(int8_t *yr, const int8_t *padded, int64_t OW, int64_t KW, int64_t SW) {
    if (OW < 32) {
      alignas(32) int8_t out[32];
      _mm256_store_si256((__m256i *)out, outputs(padded, 0, KW, SW));
      for (int64_t i = 0; i < OW; i++)
        yr[i] = out[i];
      return;
    }
    for (int64_t ow0 = 0; ow0 < OW; ow0 += 32) {
      const int64_t ow = minI(ow0, OW - 32);
      _mm256_storeu_si256((__m256i *)(yr + ow), outputs(padded, ow, KW, SW));
    }
  }
};

} // namespace

LIBJIT_QPOOL_EXPORT(avx2, QMaxAvx2)
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
namespace {

/// The AVX-512 max pooling: 64 bytes a vector, tails by masks.
struct QMax512 {
  static constexpr bool kVector = true;

  /// The lanes [0, n) of a 64-byte vector (all of them for n >= 64).
  static inline __attribute__((always_inline)) __mmask64 lanes(int64_t n) {
    return n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1;
  }

  /// colMax[w] = the largest of rows [0, rows) of \p x at column w, w < W (rows >= 1).
  static void columns(int8_t *colMax, const int8_t *x, int64_t W, int64_t rows) {
    for (int64_t w = 0; w < W; w += 64) {
      const __mmask64 m = lanes(W - w);
      __m512i v = _mm512_maskz_loadu_epi8(m, x + w);
      for (int64_t h = 1; h < rows; h++)
        v = _mm512_max_epi8(v, _mm512_maskz_loadu_epi8(m, x + h * W + w));
      _mm512_mask_storeu_epi8(colMax + w, m, v);
    }
  }

  /// The largest of the KW bytes from \p r, 64 consecutive starts.
  static inline __attribute__((always_inline)) __m512i window(const int8_t *r, int64_t KW) {
    __m512i v = _mm512_loadu_si512((const void *)r);
    for (int64_t kw = 1; kw < KW; kw++)
      v = _mm512_max_epi8(v, _mm512_loadu_si512((const void *)(r + kw)));
    return v;
  }

  /// One output row: 64 outputs a vector at stride 1; at stride 2 32, the even starts of
  /// 64 (16-bit words narrowed to their low bytes); the last vector masked.
  static void row(int8_t *yr, const int8_t *padded, int64_t OW, int64_t KW, int64_t SW) {
    if (SW == 1) {
      for (int64_t ow = 0; ow < OW; ow += 64)
        _mm512_mask_storeu_epi8(yr + ow, lanes(OW - ow), window(padded + ow, KW));
      return;
    }
    for (int64_t ow = 0; ow < OW; ow += 32) {
      const __m256i even = _mm512_cvtepi16_epi8(window(padded + 2 * ow, KW));
      _mm512_mask_storeu_epi8(yr + ow, lanes(minI(OW - ow, 32)), _mm512_castsi256_si512(even));
    }
  }
};

} // namespace

LIBJIT_QPOOL_EXPORT(vnni, QMax512)
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
