// bfloat16 matrix products: FullyConnected and MatMul with bf16 operands and result,
// float32 accumulation, the bias added in float32 and the result rounded once to bf16
// (round to nearest even, as kiln::bfloat16 and the Interpreter).
//
// B ([K x M], row-major, leading dimension ldb) is packed in bf16 pairs: panels of 16
// columns; in panel p, pair q holds for each of its 16 columns c the two elements
// {B[2q][c], B[2q+1][c]} side by side (32 bits per column, 64 bytes per pair), which is
// the layout `vdpbf16ps` multiplies against a broadcast pair of A {A[i][2q], A[i][2q+1]}:
// lane c gets acc + A[i][2q] B[2q][c] + A[i][2q+1] B[2q+1][c]. A missing row (K odd) and
// missing columns (M not a multiple of 16) are packed as zeros.
//
// _avx512bf16 uses `vdpbf16ps` (AVX512_BF16): the products of two bf16 are exact in
// float32, each of the two additions rounds in float32, and the instruction treats bf16
// denormals as zero and flushes float32 denormal results (DAZ/FTZ), so it differs from a
// float32 sum in another order only by accumulation rounding (and by values below 2^-126).
// _generic computes the same sum in plain float32 code (no DAZ), for hosts and bundle
// targets without AVX512_BF16.
#include "libjit.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace libjit {
namespace {

constexpr int64_t kPanel = 16; // columns per panel

LIBJIT_INLINE float bf16ToFloat(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

/// Round to nearest even; NaN stays a quiet NaN of the same sign (kiln::bfloat16).
LIBJIT_INLINE uint16_t floatToBf16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

/// The pair {A[2q], A[2q+1]} of row \p a as 32 bits; the missing element of an odd K is 0.
LIBJIT_INLINE uint32_t pairOf(const uint16_t *a, int64_t q, int64_t K) {
  uint32_t lo = a[2 * q];
  uint32_t hi = 2 * q + 1 < K ? a[2 * q + 1] : 0;
  return lo | (hi << 16);
}

/// Stores \p acc (bias added) of row \p y's columns [c0, c0 + n) as bf16.
LIBJIT_INLINE void storeRow(uint16_t *y, const float *acc, const uint16_t *bias, int64_t c0,
                            int64_t n) {
  for (int64_t c = 0; c < n; c++)
    y[c0 + c] = floatToBf16(acc[c] + (bias ? bf16ToFloat(bias[c0 + c]) : 0.0f));
}

/// Rows [r0, r0 + R) x panels [p0, p0 + P) in plain float32 code.
template <int R, int P>
LIBJIT_INLINE void blockGeneric(uint16_t *y, const uint16_t *x, const uint16_t *wp,
                                const uint16_t *bias, int64_t K, int64_t M, int64_t r0,
                                int64_t p0) {
  const int64_t pairs = ceilDiv(K, 2);
  float acc[R][P * kPanel];
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    for (int64_t c = 0; c < P * kPanel; c++)
      acc[r][c] = 0.0f;
  for (int64_t q = 0; q < pairs; q++) {
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++) {
      uint32_t a = pairOf(x + (r0 + r) * K, q, K);
      float a0 = bf16ToFloat(uint16_t(a)), a1 = bf16ToFloat(uint16_t(a >> 16));
      LIBJIT_UNROLL
      for (int p = 0; p < P; p++) {
        const uint16_t *b = wp + ((p0 + p) * pairs + q) * 2 * kPanel;
        for (int64_t c = 0; c < kPanel; c++) {
          float s = acc[r][p * kPanel + c] + a1 * bf16ToFloat(b[2 * c + 1]);
          acc[r][p * kPanel + c] = s + a0 * bf16ToFloat(b[2 * c]);
        }
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int p = 0; p < P; p++) {
      int64_t c0 = (p0 + p) * kPanel;
      storeRow(y + (r0 + r) * M, acc[r] + p * kPanel, bias, c0, minI(kPanel, M - c0));
    }
}

#if defined(__x86_64__)
#define LIBJIT_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/// Rows [r0, r0 + R) x panels [p0, p0 + P) with vdpbf16ps: R x P accumulators of 16 lanes.
template <int R, int P>
LIBJIT_INLINE LIBJIT_BF16_TARGET void blockAvx512(uint16_t *y, const uint16_t *x,
                                                  const uint16_t *wp, const uint16_t *bias,
                                                  int64_t K, int64_t M, int64_t r0, int64_t p0) {
  const int64_t pairs = ceilDiv(K, 2), full = K / 2;
  __m512 acc[R][P];
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    LIBJIT_UNROLL
    for (int p = 0; p < P; p++)
      acc[r][p] = _mm512_setzero_ps();
  const uint16_t *b0 = wp + p0 * pairs * 2 * kPanel;
  const int64_t panelStride = pairs * 2 * kPanel;
  for (int64_t q = 0; q < pairs; q++) {
    __m512i a[R];
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++) {
      uint32_t v;
      if (q < full)
        __builtin_memcpy(&v, x + (r0 + r) * K + 2 * q, 4);
      else
        v = pairOf(x + (r0 + r) * K, q, K);
      a[r] = _mm512_set1_epi32(int(v));
    }
    LIBJIT_UNROLL
    for (int p = 0; p < P; p++) {
      __m512i b = _mm512_loadu_si512(b0 + p * panelStride + q * 2 * kPanel);
      LIBJIT_UNROLL
      for (int r = 0; r < R; r++)
        acc[r][p] = _mm512_dpbf16_ps(acc[r][p], (__m512bh)a[r], (__m512bh)b);
    }
  }
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    LIBJIT_UNROLL
    for (int p = 0; p < P; p++) {
      int64_t c0 = (p0 + p) * kPanel;
      float out[kPanel];
      _mm512_storeu_ps(out, acc[r][p]);
      storeRow(y + (r0 + r) * M, out, bias, c0, minI(kPanel, M - c0));
    }
}
#endif

/// Runs BLOCK<R, P>(r0, p0) over rows in blocks of up to 4 and this thread's panels in
/// blocks of up to 4 (R, P compile-time, so the accumulators stay in registers).
#define LIBJIT_BF16_DISPATCH(BLOCK, ...)                                                   \
  const int64_t panels = ceilDiv(M, kPanel);                                               \
  int64_t pb, pe;                                                                          \
  partition(panels, 1, tid, nthreads, &pb, &pe);                                           \
  for (int64_t r0 = 0; r0 < N; r0 += 4) {                                                  \
    const int64_t R = minI(4, N - r0);                                                     \
    for (int64_t p0 = pb; p0 < pe; p0 += 4) {                                              \
      const int64_t P = minI(4, pe - p0);                                                  \
      switch (R * 8 + P) {                                                                 \
      case 9: BLOCK<1, 1>(__VA_ARGS__, r0, p0); break;                                     \
      case 10: BLOCK<1, 2>(__VA_ARGS__, r0, p0); break;                                    \
      case 11: BLOCK<1, 3>(__VA_ARGS__, r0, p0); break;                                    \
      case 12: BLOCK<1, 4>(__VA_ARGS__, r0, p0); break;                                    \
      case 17: BLOCK<2, 1>(__VA_ARGS__, r0, p0); break;                                    \
      case 18: BLOCK<2, 2>(__VA_ARGS__, r0, p0); break;                                    \
      case 19: BLOCK<2, 3>(__VA_ARGS__, r0, p0); break;                                    \
      case 20: BLOCK<2, 4>(__VA_ARGS__, r0, p0); break;                                    \
      case 25: BLOCK<3, 1>(__VA_ARGS__, r0, p0); break;                                    \
      case 26: BLOCK<3, 2>(__VA_ARGS__, r0, p0); break;                                    \
      case 27: BLOCK<3, 3>(__VA_ARGS__, r0, p0); break;                                    \
      case 28: BLOCK<3, 4>(__VA_ARGS__, r0, p0); break;                                    \
      case 33: BLOCK<4, 1>(__VA_ARGS__, r0, p0); break;                                    \
      case 34: BLOCK<4, 2>(__VA_ARGS__, r0, p0); break;                                    \
      case 35: BLOCK<4, 3>(__VA_ARGS__, r0, p0); break;                                    \
      default: BLOCK<4, 4>(__VA_ARGS__, r0, p0); break;                                    \
      }                                                                                    \
    }                                                                                      \
  }

} // namespace
} // namespace libjit

using namespace libjit;

LIBJIT_EXPORT int64_t libjit_packed_b_bf16_elems(int64_t K, int64_t M) {
  return ceilDiv(M, kPanel) * kPanel * ceilDiv(K, 2) * 2;
}

LIBJIT_EXPORT void libjit_pack_b_bf16(uint16_t *dst, const uint16_t *B, int64_t K, int64_t M,
                                      int64_t ldb) {
  const int64_t pairs = ceilDiv(K, 2), panels = ceilDiv(M, kPanel);
  for (int64_t p = 0; p < panels; p++)
    for (int64_t q = 0; q < pairs; q++) {
      uint16_t *d = dst + (p * pairs + q) * 2 * kPanel;
      for (int64_t c = 0; c < kPanel; c++) {
        int64_t col = p * kPanel + c;
        bool in = col < M;
        d[2 * c] = in ? B[2 * q * ldb + col] : 0;
        d[2 * c + 1] = in && 2 * q + 1 < K ? B[(2 * q + 1) * ldb + col] : 0;
      }
    }
}

LIBJIT_EXPORT void libjit_fc_bf16_generic(uint16_t *out, const uint16_t *in,
                                          const uint16_t *packedW, const uint16_t *bias,
                                          int64_t N, int64_t K, int64_t M, int64_t tid,
                                          int64_t nthreads) {
  LIBJIT_BF16_DISPATCH(blockGeneric, out, in, packedW, bias, K, M)
}

#if defined(__x86_64__)
LIBJIT_EXPORT LIBJIT_BF16_TARGET void
libjit_fc_bf16_avx512bf16(uint16_t *out, const uint16_t *in, const uint16_t *packedW,
                          const uint16_t *bias, int64_t N, int64_t K, int64_t M, int64_t tid,
                          int64_t nthreads) {
  LIBJIT_BF16_DISPATCH(blockAvx512, out, in, packedW, bias, K, M)
}
#endif

// ------------------------------------------------------------------ convolution
//
// bf16 Convolution (NCHW, group 1) as a GEMM per image: out[o][p] = sum_q W[o][q] . B[q][p]
// + bias[o] over k-pairs q = (channel pair cp, tap), p = oh OW + ow: pair q holds the
// channels 2cp and 2cp + 1 at one tap (the second zero when C is odd). The output pixels
// are the vector lanes (16 per panel), so each output row is stored as it lies in NCHW.
//
// - Weights (constant, packed at compile time by libjit_pack_conv_w_bf16): blocks of
//   kConvRows = 4 output channels, [ceil(O / 4)][ceil(C / 2) KH KW][4] pairs {W[o][2cp][tap],
//   W[o][2cp + 1][tap]} (32 bits; a missing channel is zero): the micro-kernel broadcasts
//   the pair of each of its 4 rows.
// - Activations: per image, each thread first lays out in its scratch the rows its output
//   pixels read of the channel-pair planes, padded: X2[cp][r][c] = {x[2cp][r - PT][c - PL],
//   x[2cp + 1][..]} (32 bits, zero outside the input), Hp x Wp with every row and column the
//   windows read.
//   A 1x1, stride-1, unpadded layer then reads its pairs there directly (row q of B is
//   plane q). Windowed layers copy, per tile of kConvTile = 64 output pixels, each pair
//   row B[q][p0 .. p0 + 64) from the planes (one contiguous run per output row at stride
//   1, no bounds checks: the padding is in the planes): a bf16 im2col of the tile, in pairs.
// - Micro-kernel: 4 output channels (always: the channels past O have zero weights and are
//   not stored) x 1-4 panels (a tile's pixels) of float32 accumulators; a tile of 1, 2 or
//   3 panels runs 24, 12 or 8 channels at once where that many are left (16 or 8 where
//   fewer), so that 16-24 vdpbf16ps chains hide the instruction's latency; where each
//   output has at least 256 pairs a larger tile runs its channels in passes of 2 panels
//   (12 channels at once: a third of the reads of B per product, the weights read twice
//   per tile), but for the 4 or 8 channels left over, which run over the whole tile;
//   _avx512bf16 with vdpbf16ps, _generic in plain float32 code in vdpbf16ps's order (the
//   odd product of a pair added first, then the even one).
// - Epilogue, per output: t = bf16(acc + bias) (the Convolution's result, rounded to
//   nearest even); with a residual or an activation (a FusedConvolution), then
//   bf16(clamp(float(t) + residual, lo, hi)): the Interpreter's FusedConvolution, which
//   stores the convolution and applies the epilogue to the stored value. act is 0 (none)
//   or 1 (ActClamp: Relu, Clip); the emitter sends no other.
// - Threads: the 16-pixel panels of all images in equal runs (a thread's run of an image is
//   cut into tiles from its first pixel: 14x14 at 2 threads is 7 and 6 panels, where whole
//   tiles would give 8 and 5; where whole panels leave the threads more than 1/32 apart,
//   in half panels: a panel's channel blocks split in two, so 14x14 is 6.5 panels each),
//   each thread packing only the plane rows (direct layers: the tiles) its pixels read; with fewer than 2 tiles per thread (7x7 planes), the tiles, each
//   split into up to ceil(2 nthreads / tiles) ranges of output channels. No output depends
//   on the sharing (each is the same chain over its pairs).
// - The residual of a fused Add was written layers before and is often in neither cache:
//   the epilogue's rows are prefetched (the thread's next tile's, and 4 blocks ahead).

namespace libjit {
namespace {

constexpr int64_t kConvTile = 64; // output pixels per tile (4 panels of 16)
constexpr int64_t kConvRows = 4;  // output channels per weight block
// A tile's block steps run over all its panels when each output has few pairs; from
// kNarrowPassMinPairs pairs over 2 panels at a time, so that each step holds 12-24 output
// channels (file comment, "Micro-kernel").
constexpr int64_t kNarrowPassMinPairs = 256;

/// A convolution's geometry (one image) and its padded pair planes.
struct ConvGeom {
  int64_t C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW;
  int64_t Hp, Wp, Cp;
  bool direct; ///< 1x1, stride 1, unpadded: B is the planes themselves
};

LIBJIT_INLINE ConvGeom convGeom(int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                int64_t PL, int64_t DH, int64_t DW) {
  ConvGeom g{C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, 0, 0, 0, false};
  g.Hp = (OH - 1) * SH + (KH - 1) * DH + 1;
  g.Wp = (OW - 1) * SW + (KW - 1) * DW + 1;
  g.Cp = ceilDiv(C, 2);
  g.direct = KH == 1 && KW == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 && OH == H &&
             OW == W;
  return g;
}

/// Bytes of the pair planes (with kConvTile entries of slack for the direct path's last
/// tile), then of the tile.
LIBJIT_INLINE int64_t planeBytes(const ConvGeom &g) {
  // (or of a direct layer's tiles: packDirectTiles)
  return maxI(g.Cp * g.Hp * g.Wp + kConvTile, g.Cp * ceilDiv(g.Hp * g.Wp, kConvTile) * kConvTile) *
         4;
}

/// Padded rows [*r0, *r1) of the planes that output pixels [qa, qb) of one image read (a
/// direct layer: up to the end of qb's last panel, which the micro-kernel reads).
LIBJIT_INLINE void planeRows(const ConvGeom &g, int64_t qa, int64_t qb, int64_t *r0,
                             int64_t *r1) {
  if (g.direct) {
    *r0 = qa / g.W;
    *r1 = ceilDiv(minI(g.H * g.W, ceilDiv(qb, 16) * 16), g.W);
    return;
  }
  *r0 = (qa / g.OW) * g.SH;
  *r1 = minI(g.Hp, ((qb - 1) / g.OW) * g.SH + (g.KH - 1) * g.DH + 1);
}

/// Lays out the padded channel-pair planes of image \p x (file comment) that output pixels
/// [qa, qb) read: rows planeRows(qa, qb) of each plane, at their places in the planes.
LIBJIT_INLINE void packPlanes(uint32_t *x2, const uint16_t *x, const ConvGeom &g, int64_t qa,
                              int64_t qb) {
  const int64_t plane = g.H * g.W;
  // Columns [c0, c1) of a padded row read the input.
  const int64_t c0 = minI(g.Wp, g.PL), c1 = maxI(c0, minI(g.Wp, g.PL + g.W));
  int64_t r0, r1;
  planeRows(g, qa, qb, &r0, &r1);
  for (int64_t cp = 0; cp < g.Cp; cp++) {
    const uint16_t *a = x + 2 * cp * plane;
    const uint16_t *b = 2 * cp + 1 < g.C ? a + plane : nullptr;
    for (int64_t r = r0; r < r1; r++) {
      uint32_t *d = x2 + (cp * g.Hp + r) * g.Wp;
      const int64_t ih = r - g.PT;
      const bool in = ih >= 0 && ih < g.H;
      for (int64_t c = 0; c < (in ? c0 : g.Wp); c++)
        d[c] = 0;
      if (!in)
        continue;
      const uint16_t *ar = a + ih * g.W - g.PL;
      const uint16_t *br = b ? b + ih * g.W - g.PL : nullptr;
      for (int64_t c = c0; c < c1; c++)
        d[c] = uint32_t(ar[c]) | (br ? uint32_t(br[c]) << 16 : 0u);
      for (int64_t c = c1; c < g.Wp; c++)
        d[c] = 0;
    }
  }
  for (int64_t i = 0; i < kConvTile; i++)
    x2[g.Cp * g.Hp * g.Wp + i] = 0;
}

/// The loop of packTile and packTileAvx512 (B's rows of a windowed layer's tile): for each
/// pair q = (cp, tap) and each output row the tile's pixels cross, COPY(d, s, len) copies
/// len entries of the planes at stride SW from s to d; then the lanes past n are zeroed.
#define LIBJIT_BF16_TILE_LOOP(COPY)                                                        \
  const int64_t taps = g.KH * g.KW, planeSize = g.Hp * g.Wp;                               \
  for (int64_t cp = 0; cp < g.Cp; cp++)                                                    \
    for (int64_t tap = 0; tap < taps; tap++) {                                             \
      const int64_t kh = tap / g.KW, kw = tap % g.KW;                                      \
      const uint32_t *src = x2 + cp * planeSize + kh * g.DH * g.Wp + kw * g.DW;            \
      uint32_t *d = tile + (cp * taps + tap) * kConvTile;                                  \
      int64_t oh = p0 / g.OW, ow = p0 % g.OW;                                              \
      for (int64_t t = 0; t < n;) {                                                        \
        const int64_t len = minI(n - t, g.OW - ow);                                        \
        COPY(d + t, src + oh * g.SH * g.Wp + ow * g.SW, len);                              \
        t += len, oh++, ow = 0;                                                            \
      }                                                                                    \
      for (int64_t t = n; t < kConvTile; t++)                                              \
        d[t] = 0;                                                                          \
    }

/// \p len entries of \p s at stride \p sw to \p d.
LIBJIT_INLINE void copyRun(uint32_t *d, const uint32_t *s, int64_t len, int64_t sw) {
  if (sw == 1) {
    for (int64_t j = 0; j < len; j++)
      d[j] = s[j];
    return;
  }
  for (int64_t j = 0; j < len; j++)
    d[j] = s[j * sw];
}

/// B's rows for the \p n pixels from \p p0 of a windowed layer: tile[q][t] for every pair q
/// (zero for t >= n).
LIBJIT_INLINE void packTile(uint32_t *tile, const uint32_t *x2, const ConvGeom &g, int64_t p0,
                            int64_t n) {
#define LIBJIT_BF16_COPY(D, S, LEN) copyRun(D, S, LEN, g.SW)
  LIBJIT_BF16_TILE_LOOP(LIBJIT_BF16_COPY)
#undef LIBJIT_BF16_COPY
}

#if defined(__x86_64__)
/// Interleaves \p n columns of rows \p a and \p b (null: zeros) into pairs at \p d, 16 at a
/// time (packPlanes's values).
LIBJIT_INLINE LIBJIT_BF16_TARGET void pairRow(uint32_t *d, const uint16_t *a, const uint16_t *b,
                                              int64_t n) {
  for (int64_t c = 0; c < n; c += 16) {
    const int64_t k = minI(16, n - c);
    const __mmask16 m = k == 16 ? __mmask16(0xffff) : __mmask16((1u << k) - 1);
    __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, a + c));
    if (b)
      v = _mm512_or_si512(
          v, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, b + c)), 16));
    _mm512_mask_storeu_epi32(d + c, m, v);
  }
}

/// A 1x1 stride-1 unpadded layer's pairs of output pixels [qa, qb) in tile order,
/// x2[k][cp][kConvTile] for the tiles k from qa (zeros past qb): a tile's rows of B are
/// adjacent (ldt = kConvTile) instead of a plane apart.
LIBJIT_INLINE LIBJIT_BF16_TARGET void packDirectTiles(uint32_t *x2, const uint16_t *x,
                                                      const ConvGeom &g, int64_t qa,
                                                      int64_t qb) {
  const int64_t plane = g.H * g.W, tiles = ceilDiv(qb - qa, kConvTile);
  for (int64_t cp = 0; cp < g.Cp; cp++) {
    const uint16_t *a = x + 2 * cp * plane;
    const uint16_t *b = 2 * cp + 1 < g.C ? a + plane : nullptr;
    for (int64_t k = 0; k < tiles; k++) {
      const int64_t p0 = qa + k * kConvTile, n = minI(kConvTile, qb - p0);
      uint32_t *d = x2 + (k * g.Cp + cp) * kConvTile;
      pairRow(d, a + p0, b ? b + p0 : nullptr, n);
      for (int64_t t = n; t < kConvTile; t++)
        d[t] = 0;
    }
  }
}

/// packPlanes (the same values) 16 columns at a time; an unpadded plane's rows as one run;
/// a direct layer's in tile order (packDirectTiles).
LIBJIT_INLINE LIBJIT_BF16_TARGET void packPlanesAvx512(uint32_t *x2, const uint16_t *x,
                                                       const ConvGeom &g, int64_t qa,
                                                       int64_t qb) {
  if (g.direct)
    return packDirectTiles(x2, x, g, qa, qb);
  const int64_t plane = g.H * g.W;
  const bool flat = g.PT == 0 && g.PL == 0 && g.Hp == g.H && g.Wp == g.W;
  const int64_t c0 = minI(g.Wp, g.PL), c1 = maxI(c0, minI(g.Wp, g.PL + g.W));
  int64_t r0, r1;
  planeRows(g, qa, qb, &r0, &r1);
  for (int64_t cp = 0; cp < g.Cp; cp++) {
    const uint16_t *a = x + 2 * cp * plane;
    const uint16_t *b = 2 * cp + 1 < g.C ? a + plane : nullptr;
    if (flat) {
      pairRow(x2 + cp * plane + r0 * g.W, a + r0 * g.W, b ? b + r0 * g.W : nullptr,
              (r1 - r0) * g.W);
      continue;
    }
    for (int64_t r = r0; r < r1; r++) {
      uint32_t *d = x2 + (cp * g.Hp + r) * g.Wp;
      const int64_t ih = r - g.PT;
      const bool in = ih >= 0 && ih < g.H;
      for (int64_t c = 0; c < (in ? c0 : g.Wp); c++)
        d[c] = 0;
      if (!in)
        continue;
      pairRow(d + c0, a + ih * g.W - g.PL + c0, b ? b + ih * g.W - g.PL + c0 : nullptr,
              c1 - c0);
      for (int64_t c = c1; c < g.Wp; c++)
        d[c] = 0;
    }
  }
  for (int64_t i = 0; i < kConvTile; i++)
    x2[g.Cp * g.Hp * g.Wp + i] = 0;
}

/// \p k entries of \p s at stride \p sw (k <= 16) into lanes [0, k) (the others zero).
LIBJIT_INLINE LIBJIT_BF16_TARGET __m512i stridedRun(const uint32_t *s, int64_t sw, int64_t k) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __mmask16 m = k == 16 ? __mmask16(0xffff) : __mmask16((1u << k) - 1);
  if (sw == 1)
    return _mm512_maskz_loadu_epi32(m, s);
  if (sw == 2) { // entries 0, 2, .., 2k - 2 of two vectors
    const int64_t e = 2 * k - 1, e1 = maxI(0, e - 16);
    const __mmask16 m0 = e >= 16 ? __mmask16(0xffff) : __mmask16((1u << e) - 1);
    const __mmask16 m1 = __mmask16((1u << e1) - 1);
    const __m512i lo = _mm512_maskz_loadu_epi32(m0, s), hi = _mm512_maskz_loadu_epi32(m1, s + 16);
    return _mm512_maskz_permutex2var_epi32(m, lo, _mm512_add_epi32(iota, iota), hi);
  }
  return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m,
                                     _mm512_mullo_epi32(iota, _mm512_set1_epi32(int(sw))), s, 4);
}

/// \p len entries of \p s at stride \p sw to \p d, 16 at a time.
LIBJIT_INLINE LIBJIT_BF16_TARGET void copyRunAvx512(uint32_t *d, const uint32_t *s, int64_t len,
                                                    int64_t sw) {
  for (int64_t j = 0; j < len; j += 16) {
    const int64_t k = minI(16, len - j);
    const __mmask16 m = k == 16 ? __mmask16(0xffff) : __mmask16((1u << k) - 1);
    _mm512_mask_storeu_epi32(d + j, m, stridedRun(s + j * sw, sw, k));
  }
}

/// packTile (the same values) 16 pixels at a time.
LIBJIT_INLINE LIBJIT_BF16_TARGET void packTileAvx512(uint32_t *tile, const uint32_t *x2,
                                                     const ConvGeom &g, int64_t p0, int64_t n) {
#define LIBJIT_BF16_COPY(D, S, LEN) copyRunAvx512(D, S, LEN, g.SW)
  LIBJIT_BF16_TILE_LOOP(LIBJIT_BF16_COPY)
#undef LIBJIT_BF16_COPY
}
#endif

/// The index in a run of packed weight blocks (from the first block's start) of row \p r's
/// pair \p q: rows past the first block's 4 are in the following blocks.
LIBJIT_INLINE int64_t rowAt(int r, int64_t q, int64_t pairs) {
  return (r / kConvRows) * pairs * kConvRows + q * kConvRows + r % kConvRows;
}

/// The epilogue of one output (file comment).
LIBJIT_INLINE uint16_t convEpilogue(float acc, float bias, const uint16_t *res, int64_t act,
                                    float lo, float hi) {
  uint16_t t = floatToBf16(acc + bias);
  if (!res && !act)
    return t;
  float v = bf16ToFloat(t) + (res ? bf16ToFloat(*res) : 0.0f);
  if (act) {
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
  }
  return floatToBf16(v);
}

/// Output channels [o0, o0 + R) x panels [0, P) of a tile in plain float32 code: B's row q
/// at \p tile + q \p ldt. \p y and \p res point at output pixel p0 of channel 0; \p n
/// pixels are stored.
template <int R, int P>
LIBJIT_INLINE void convBlockGeneric(uint16_t *y, const uint16_t *res, const uint32_t *tile,
                                    int64_t ldt, const uint32_t *wb, const uint16_t *bias,
                                    int64_t pairs, int64_t ld, int64_t o0, int64_t rows,
                                    int64_t n, int64_t act, float lo, float hi) {
  float acc[R][P * 16];
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    for (int64_t c = 0; c < P * 16; c++)
      acc[r][c] = 0.0f;
  for (int64_t q = 0; q < pairs; q++) {
    const uint32_t *b = tile + q * ldt;
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++) {
      uint32_t a = wb[rowAt(r, q, pairs)];
      float a0 = bf16ToFloat(uint16_t(a)), a1 = bf16ToFloat(uint16_t(a >> 16));
      for (int64_t c = 0; c < P * 16; c++) {
        float s = acc[r][c] + a1 * bf16ToFloat(uint16_t(b[c] >> 16));
        acc[r][c] = s + a0 * bf16ToFloat(uint16_t(b[c]));
      }
    }
  }
  for (int r = 0; r < minI(R, rows); r++) {
    const int64_t o = o0 + r;
    const float bo = bias ? bf16ToFloat(bias[o]) : 0.0f;
    for (int64_t c = 0; c < minI(n, P * 16); c++)
      y[o * ld + c] = convEpilogue(acc[r][c], bo, res ? res + o * ld + c : nullptr, act, lo, hi);
  }
}

#if defined(__x86_64__)
/// 16 floats rounded to bf16 (nearest even; NaN quiet, as floatToBf16), as 32-bit lanes.
LIBJIT_INLINE LIBJIT_BF16_TARGET __m512i roundBf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_mov_epi32(
      r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
}

/// The epilogue (file comment) of 16 outputs of one channel (lanes \p m) at \p y: \p acc
/// plus the channel's bias \p bo rounded, then with \p res or \p act the residual added,
/// the clamp to [vlo, vhi] and a second rounding.
LIBJIT_INLINE LIBJIT_BF16_TARGET void storeOutputs(uint16_t *y, const uint16_t *res, __m512 acc,
                                                   __m512 bo, __mmask16 m, int64_t act,
                                                   __m512 vlo, __m512 vhi) {
  __m512i t = roundBf16(_mm512_add_ps(acc, bo));
  if (res || act) {
    __m512 v = _mm512_castsi512_ps(_mm512_slli_epi32(t, 16));
    if (res) {
      __m256i rh = _mm256_maskz_loadu_epi16(m, res);
      v = _mm512_add_ps(
          v, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(rh), 16)));
    }
    if (act) // x < lo ? lo : x, then x > hi ? hi : x (NaN stays NaN)
      v = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
    t = roundBf16(v);
  }
  _mm256_mask_storeu_epi16(y, m, _mm512_cvtepi32_epi16(t));
}

/// As convBlockGeneric, with vdpbf16ps and the epilogue in registers.
template <int R, int P>
LIBJIT_INLINE LIBJIT_BF16_TARGET void
convBlockAvx512(uint16_t *y, const uint16_t *res, const uint32_t *tile, int64_t ldt,
                const uint32_t *wb, const uint16_t *bias, int64_t pairs, int64_t ld, int64_t o0,
                int64_t rows, int64_t n, int64_t act, float lo, float hi) {
  __m512 acc[R][P];
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    LIBJIT_UNROLL
    for (int p = 0; p < P; p++)
      acc[r][p] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; q++) {
    __m512i b[P];
    LIBJIT_UNROLL
    for (int p = 0; p < P; p++)
      b[p] = _mm512_loadu_si512(tile + q * ldt + p * 16);
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++) {
      const __m512i a = _mm512_set1_epi32(int(wb[rowAt(r, q, pairs)]));
      LIBJIT_UNROLL
      for (int p = 0; p < P; p++)
        acc[r][p] = _mm512_dpbf16_ps(acc[r][p], (__m512bh)a, (__m512bh)b[p]);
    }
  }
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++) {
    if (r >= rows)
      break;
    const int64_t o = o0 + r;
    const __m512 bo = _mm512_set1_ps(bias ? bf16ToFloat(bias[o]) : 0.0f);
    LIBJIT_UNROLL
    for (int p = 0; p < P; p++) {
      const int64_t c0 = p * 16, cnt = minI(16, n - c0);
      if (cnt <= 0)
        break;
      const __mmask16 m = cnt == 16 ? __mmask16(0xffff) : __mmask16((1u << cnt) - 1);
      storeOutputs(y + o * ld + c0, res ? res + o * ld + c0 : nullptr, acc[r][p], bo, m, act,
                   vlo, vhi);
    }
  }
}
#endif

/// A thread's share of a convolution (file comment, "Threads"): output pixels [pa, pb) of
/// image img against the blocks of output channels [b0, b1).
struct ConvSpan {
  int64_t img, pa, pb, b0, b1;
};

/// How the threads share a convolution's outputs: by pixels (split 1: thread tid takes the
/// units [gb, ge) of all images' panels, ppi per image; a unit is a panel, or with halves
/// 2 half of a panel's channel blocks), or (few tiles) by units of (tile, one of split
/// ranges of channel blocks), [gb, ge) of them.
struct ConvWork {
  int64_t P, ppi, tiles, blocks, split, halves, gb, ge;
};

LIBJIT_INLINE ConvWork convWork(const ConvGeom &g, int64_t N, int64_t O, int64_t tid,
                                int64_t nthreads) {
  ConvWork w;
  w.P = g.OH * g.OW, w.ppi = ceilDiv(w.P, 16), w.tiles = ceilDiv(w.P, kConvTile);
  w.blocks = ceilDiv(O, kConvRows);
  const int64_t tt = N * w.tiles;
  w.split = tt >= 2 * nthreads ? 1 : minI(w.blocks, ceilDiv(2 * nthreads, tt));
  w.halves = w.split == 1 && w.blocks >= 2 && unevenShares(N * w.ppi, nthreads) ? 2 : 1;
  partition(w.split == 1 ? N * w.ppi * w.halves : tt * w.split, 1, tid, nthreads, &w.gb,
            &w.ge);
  return w;
}

/// The thread's next span from \p *cur (starting at w.gb); false after the last.
LIBJIT_INLINE bool nextSpan(const ConvWork &w, int64_t *cur, ConvSpan *s) {
  if (*cur >= w.ge)
    return false;
  if (w.split == 1) { // the rest of this image's panels in the thread's range
    const int64_t panel = *cur / w.halves;
    s->img = panel / w.ppi;
    const int64_t end = minI(w.ge / w.halves, (s->img + 1) * w.ppi); // whole panels' end
    s->pa = (panel - s->img * w.ppi) * 16;
    if (*cur % w.halves != 0 || end <= panel) { // half a panel: its second or first half
      s->pb = minI(w.P, s->pa + 16);
      const int64_t mid = w.blocks / 2;
      s->b0 = *cur % 2 ? mid : 0, s->b1 = *cur % 2 ? w.blocks : mid;
      ++*cur;
      return true;
    }
    s->pb = minI(w.P, (end - s->img * w.ppi) * 16);
    s->b0 = 0, s->b1 = w.blocks;
    *cur = end * w.halves;
    return true;
  }
  const int64_t ti = *cur / w.split, k = *cur % w.split;
  s->img = ti / w.tiles;
  s->pa = (ti % w.tiles) * kConvTile, s->pb = minI(w.P, s->pa + kConvTile);
  s->b0 = k * w.blocks / w.split, s->b1 = (k + 1) * w.blocks / w.split;
  ++*cur;
  return true;
}

/// Prefetches (LOC: __builtin_prefetch's locality) \p n entries from \p r of the rows of
/// channels [o0, o1), \p ld apart.
template <int LOC>
LIBJIT_INLINE void prefetchRows(const uint16_t *r, int64_t ld, int64_t o0, int64_t o1,
                                int64_t n) {
  for (int64_t o = o0; o < o1; o++) {
    const char *p = reinterpret_cast<const char *>(r + o * ld);
    for (int64_t off = 0; off < 2 * n; off += 64)
      __builtin_prefetch(p + off, 0, LOC);
    __builtin_prefetch(p + 2 * n - 1, 0, LOC);
  }
}

/// The residual (read by the epilogue, written long before: often not in the caches) of a
/// block step's channels [o0, o0 + rows): of the thread's next pass (\p nNext pixels at
/// \p r + \p n, 0: none) into L2, and of the channels 4 blocks on in this tile into L1.
LIBJIT_INLINE void prefetchResidual(const uint16_t *r, int64_t ld, int64_t o0, int64_t rows,
                                    int64_t n, int64_t nNext, int64_t oEnd) {
  if (nNext > 0)
    prefetchRows<2>(r + n, ld, o0, o0 + rows, nNext);
  const int64_t a = o0 + 4 * kConvRows;
  prefetchRows<3>(r, ld, a, minI(a + rows, oEnd), n);
}

/// Runs BLOCK<R, P> over this thread's spans (file comment, "Threads"), packing the planes
/// (PLANES, the rows its pixels read) and tiles (TILE) it reads.
#define LIBJIT_CONV_BF16_BODY(BLOCK, PLANES, TILE, TILED)                                     \
  const ConvGeom g = convGeom(C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW);               \
  const int64_t pairs = g.Cp * KH * KW, P = OH * OW;                                          \
  const ConvWork wk = convWork(g, N, O, tid, nthreads);                                       \
  uint32_t *x2 = reinterpret_cast<uint32_t *>(scratch + tid * scratchStride);                 \
  uint32_t *tile = x2 + planeBytes(g) / 4;                                                    \
  int64_t packed = -1, planes = -1, cur = wk.gb;                                              \
  ConvSpan sp;                                                                                \
  while (nextSpan(wk, &cur, &sp)) {                                                           \
    /* the planes of the span's pixels, or (split by channels) of the whole image */          \
    const int64_t qa = wk.split == 1 ? sp.pa : 0, qb = wk.split == 1 ? sp.pb : P;             \
    if (sp.img * P + qa != planes) {                                                          \
      PLANES(x2, in + sp.img * C * H * W, g, qa, qb);                                         \
      planes = sp.img * P + qa;                                                               \
    }                                                                                         \
    for (int64_t p0 = sp.pa; p0 < sp.pb; p0 += kConvTile) {                                   \
      const int64_t n = minI(kConvTile, sp.pb - p0), nNext = minI(kConvTile, sp.pb - p0 - n); \
      /* a direct layer's B: the planes, or (TILED) the tiles of packDirectTiles */          \
      const uint32_t *b = !g.direct ? tile                                                    \
                          : TILED   ? x2 + (p0 - qa) / kConvTile * g.Cp * kConvTile           \
                                    : x2 + p0;                                                \
      const int64_t ldt = g.direct && !TILED ? P : kConvTile;                                 \
      if (!g.direct && sp.img * P + p0 != packed) {                                           \
        TILE(tile, x2, g, p0, n);                                                             \
        packed = sp.img * P + p0;                                                             \
      }                                                                                       \
      uint16_t *y = out + sp.img * O * P + p0;                                                \
      const uint16_t *r = res ? res + sp.img * O * P + p0 : nullptr;                          \
      LIBJIT_CONV_BF16_BLOCKS(BLOCK)                                                          \
    }                                                                                         \
  }

/// The block steps of one tile (in LIBJIT_CONV_BF16_BODY): with at least
/// kNarrowPassMinPairs pairs and more than 2 panels, the channel blocks in threes in passes
/// of 2 panels, the 1 or 2 left over (which would run 4 or 8 channels) over the whole tile.
#define LIBJIT_CONV_BF16_BLOCKS(BLOCK)                                                        \
  const int64_t narrowEnd =                                                                   \
      pairs >= kNarrowPassMinPairs && n > 32 ? sp.b0 + (sp.b1 - sp.b0) / 3 * 3 : sp.b0;        \
  for (int64_t h0 = 0; narrowEnd > sp.b0 && h0 < n; h0 += 32) {                               \
    const int64_t hn = minI(32, n - h0);                                                      \
    const int64_t hNext = h0 + hn < n ? minI(32, n - h0 - hn) : nNext;                        \
    LIBJIT_CONV_BF16_PASS(BLOCK, y + h0, r ? r + h0 : nullptr, b + h0, hn, hNext, sp.b0,      \
                          narrowEnd)                                                          \
  }                                                                                           \
  LIBJIT_CONV_BF16_PASS(BLOCK, y, r, b, n, nNext, narrowEnd, sp.b1)

/// The block steps of one pass: \p N pixels from \p Y (\p NNEXT in the thread's next
/// pass), channel blocks [BK0, BK1).
#define LIBJIT_CONV_BF16_PASS(BLOCK, Y, R, B, N, NNEXT, BK0, BK1)                            \
  for (int64_t bk = BK0, np = ceilDiv(N, 16); bk < BK1;) {                                    \
    /* 1, 2 or 3 panels: 6, 3 or 2 blocks of rows at once (24 accumulators, so that the */    \
    /* vdpbf16ps chains hide their latency), where that many blocks are left */               \
    const int64_t left = BK1 - bk;                                                            \
    const int64_t nb = np == 1 ? (left >= 6 ? 6 : left >= 4 ? 4 : 1)                          \
                       : np == 2 ? (left >= 3 ? 3 : left >= 2 ? 2 : 1)                        \
                       : np == 3 && left >= 2 ? 2 : 1;                                        \
    const int64_t o0 = bk * kConvRows, rows = minI(nb * kConvRows, O - o0);                   \
    const uint32_t *wb = packedW + bk * pairs * kConvRows;                                    \
    if (R)                                                                                    \
      prefetchResidual(R, P, o0, rows, N, NNEXT, minI(O, sp.b1 * kConvRows));                \
    switch (nb * 8 + np) {                                                                    \
    case 49: BLOCK<24, 1>(Y, R, B, ldt, wb, bias, pairs, P, o0, rows, N, act, lo, hi); break; \
    case 26: BLOCK<12, 2>(Y, R, B, ldt, wb, bias, pairs, P, o0, rows, N, act, lo, hi); break; \
    case 19: BLOCK<8, 3>(Y, R, B, ldt, wb, bias, pairs, P, o0, rows, N, act, lo, hi); break;  \
    case 33: BLOCK<16, 1>(Y, R, B, ldt, wb, bias, pairs, P, o0, rows, N, act, lo, hi); break; \
    case 18: BLOCK<8, 2>(Y, R, B, ldt, wb, bias, pairs, P, o0, rows, N, act, lo, hi); break;  \
    case 9: BLOCK<kConvRows, 1>(Y, R, B, ldt, wb, bias, pairs, P, o0, rows, N, act, lo, hi); break; \
    case 10: BLOCK<kConvRows, 2>(Y, R, B, ldt, wb, bias, pairs, P, o0, rows, N, act, lo, hi); break; \
    case 11: BLOCK<kConvRows, 3>(Y, R, B, ldt, wb, bias, pairs, P, o0, rows, N, act, lo, hi); break; \
    default: BLOCK<kConvRows, 4>(Y, R, B, ldt, wb, bias, pairs, P, o0, rows, N, act, lo, hi); break; \
    }                                                                                         \
    bk += nb;                                                                                 \
  }

} // namespace
} // namespace libjit

LIBJIT_EXPORT int64_t libjit_conv_w_bf16_elems(int64_t O, int64_t C, int64_t taps) {
  return ceilDiv(O, kConvRows) * kConvRows * ceilDiv(C, 2) * taps * 2;
}

LIBJIT_EXPORT void libjit_pack_conv_w_bf16(uint16_t *dst, const uint16_t *w, int64_t O,
                                           int64_t C, int64_t taps) {
  const int64_t Cp = ceilDiv(C, 2), pairs = Cp * taps, blocks = ceilDiv(O, kConvRows);
  for (int64_t b = 0; b < blocks; b++)
    for (int64_t cp = 0; cp < Cp; cp++)
      for (int64_t tap = 0; tap < taps; tap++)
        for (int64_t r = 0; r < kConvRows; r++) {
          const int64_t o = b * kConvRows + r, q = cp * taps + tap;
          uint16_t *d = dst + ((b * pairs + q) * kConvRows + r) * 2;
          d[0] = o < O ? w[(o * C + 2 * cp) * taps + tap] : 0;
          d[1] = o < O && 2 * cp + 1 < C ? w[(o * C + 2 * cp + 1) * taps + tap] : 0;
        }
}

LIBJIT_EXPORT int64_t libjit_conv_bf16_scratch_bytes(int64_t C, int64_t OH, int64_t OW,
                                                     int64_t KH, int64_t KW, int64_t SH,
                                                     int64_t SW, int64_t DH, int64_t DW) {
  const ConvGeom g = convGeom(C, 0, 0, OH, OW, KH, KW, SH, SW, 0, 0, DH, DW);
  // The channel-lanes kernel's accumulators ([2][kConvTile][16] floats) after the tile.
  return planeBytes(g) + g.Cp * KH * KW * kConvTile * 4 + 2 * kConvTile * 16 * 4 + 64;
}

// Never inlined into the program's stages: the kernels are prebuilt and shared (the
// AVX512_BF16 one keeps its extension through its target attribute; backends/CPU/README.md,
// "Compile time", which has the cold compile they cost when inlined into the stages).
LIBJIT_EXPORT LIBJIT_NOINLINE void libjit_conv_bf16_generic(
    uint16_t *out, const uint16_t *in, const uint32_t *packedW, const uint16_t *bias,
    const uint16_t *res, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,
    int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,
    int64_t DH, int64_t DW, int64_t act, float lo, float hi, char *scratch,
    int64_t scratchStride, int64_t tid, int64_t nthreads) {
  LIBJIT_CONV_BF16_BODY(convBlockGeneric, packPlanes, packTile, false)
}

#if defined(__x86_64__)
LIBJIT_EXPORT LIBJIT_NOINLINE LIBJIT_BF16_TARGET void libjit_conv_bf16_avx512bf16(
    uint16_t *out, const uint16_t *in, const uint32_t *packedW, const uint16_t *bias,
    const uint16_t *res, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,
    int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,
    int64_t DH, int64_t DW, int64_t act, float lo, float hi, char *scratch,
    int64_t scratchStride, int64_t tid, int64_t nthreads) {
  LIBJIT_CONV_BF16_BODY(convBlockAvx512, packPlanesAvx512, packTileAvx512, true)
}
#endif

// ------------------------------------------------------- convolution, channel lanes
//
// A plane of fewer than kConvTile output pixels that are not a multiple of 16 (7x7: 49
// pixels in 64 lanes) leaves lanes of the kernel above idle; where each output has at
// least 512 pairs (libjit_conv_bf16_channel_lanes), libjit_conv_bf16_cl_avx512bf16
// swaps the roles: 16 output channels per vector, the input pair of one pixel broadcast.
// - Filter (libjit_pack_conv_wt_bf16): panels of 16 output channels, ceil(O / 32) * 2 of
//   them (the channels past O zero), [panel][pair q][16] pairs {W[o][2cp][tap],
//   W[o][2cp + 1][tap]}.
// - Input: the padded pair planes, and for windowed layers the plane's one tile, as above.
// - Micro-kernel: 1-7 pixels x 2 panels (32 channels) of float32 accumulators; each lane
//   runs the vdpbf16ps chain over q that the pixel-lane kernel runs for the same output
//   (the same pairs in the same order; the two products of a pair commute), so the two
//   kernels agree bit for bit. The accumulators go to the thread's scratch ([2][64][16]
//   floats), and the epilogue reads each channel's pixels back (a gather) and stores them
//   through the same storeOutputs.
// - Threads: the (image, 32-channel group) units.

namespace libjit {
namespace {

#if defined(__x86_64__)
/// Pixels [px0, px0 + R) of B (pair q of pixel t at b[q ldt + t]) against the 2 panels at
/// \p wt: the accumulators to acc16[panel][pixel][16].
template <int R>
LIBJIT_INLINE LIBJIT_BF16_TARGET void clBlock(float *acc16, const uint32_t *b, int64_t ldt,
                                              const uint32_t *wt, int64_t pairs, int64_t px0) {
  __m512 acc[R][2];
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; q++) {
    const __m512i w0 = _mm512_loadu_si512(wt + q * 16);
    const __m512i w1 = _mm512_loadu_si512(wt + (pairs + q) * 16);
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++) {
      const __m512i a = _mm512_set1_epi32(int(b[q * ldt + px0 + r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], (__m512bh)a, (__m512bh)w0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], (__m512bh)a, (__m512bh)w1);
    }
  }
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++) {
    _mm512_storeu_ps(acc16 + (px0 + r) * 16, acc[r][0]);
    _mm512_storeu_ps(acc16 + (kConvTile + px0 + r) * 16, acc[r][1]);
  }
}

/// The epilogue of channels [o0, min(o0 + 32, O)) over the \p P pixels of one image, their
/// accumulators in acc16 (clBlock), stored at y[o P + p] (res likewise).
LIBJIT_INLINE LIBJIT_BF16_TARGET void clEpilogue(uint16_t *y, const uint16_t *res,
                                                 const float *acc16, const uint16_t *bias,
                                                 int64_t o0, int64_t O, int64_t P, int64_t act,
                                                 float lo, float hi) {
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const __m512i idx = _mm512_slli_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 4);
  for (int64_t c = 0; c < 32 && o0 + c < O; c++) {
    const int64_t o = o0 + c;
    const float *base = acc16 + (c / 16) * kConvTile * 16 + c % 16;
    const __m512 bo = _mm512_set1_ps(bias ? bf16ToFloat(bias[o]) : 0.0f);
    for (int64_t p0 = 0; p0 < P; p0 += 16) {
      const int64_t cnt = minI(16, P - p0);
      const __mmask16 m = cnt == 16 ? __mmask16(0xffff) : __mmask16((1u << cnt) - 1);
      const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, base + p0 * 16, 4);
      storeOutputs(y + o * P + p0, res ? res + o * P + p0 : nullptr, v, bo, m, act, vlo, vhi);
    }
  }
}

/// All pixels of one image against the 32 channels of \p wt (clBlock in runs of 7 pixels).
LIBJIT_INLINE LIBJIT_BF16_TARGET void clPixels(float *acc16, const uint32_t *b, int64_t ldt,
                                               const uint32_t *wt, int64_t pairs, int64_t P) {
  for (int64_t px0 = 0; px0 < P; px0 += 7) {
    switch (minI(7, P - px0)) {
    case 1: clBlock<1>(acc16, b, ldt, wt, pairs, px0); break;
    case 2: clBlock<2>(acc16, b, ldt, wt, pairs, px0); break;
    case 3: clBlock<3>(acc16, b, ldt, wt, pairs, px0); break;
    case 4: clBlock<4>(acc16, b, ldt, wt, pairs, px0); break;
    case 5: clBlock<5>(acc16, b, ldt, wt, pairs, px0); break;
    case 6: clBlock<6>(acc16, b, ldt, wt, pairs, px0); break;
    default: clBlock<7>(acc16, b, ldt, wt, pairs, px0); break;
    }
  }
}
#endif

} // namespace
} // namespace libjit

LIBJIT_EXPORT int64_t libjit_conv_bf16_channel_lanes(int64_t C, int64_t taps, int64_t OH,
                                                     int64_t OW) {
  // The epilogue's gathers cost about as much per output as the idle lanes save when the
  // outputs have few pairs each (1x1 512->2048 at 7x7: 256 pairs, slower).
  const int64_t P = OH * OW, pairs = ceilDiv(C, 2) * taps;
  return P < kConvTile && P % 16 != 0 && pairs >= 512 ? 1 : 0;
}

LIBJIT_EXPORT int64_t libjit_conv_wt_bf16_elems(int64_t O, int64_t C, int64_t taps) {
  return ceilDiv(O, 32) * 32 * ceilDiv(C, 2) * taps * 2;
}

LIBJIT_EXPORT void libjit_pack_conv_wt_bf16(uint16_t *dst, const uint16_t *w, int64_t O,
                                            int64_t C, int64_t taps) {
  const int64_t Cp = ceilDiv(C, 2), pairs = Cp * taps, panels = ceilDiv(O, 32) * 2;
  for (int64_t p = 0; p < panels; p++)
    for (int64_t cp = 0; cp < Cp; cp++)
      for (int64_t tap = 0; tap < taps; tap++)
        for (int64_t lane = 0; lane < 16; lane++) {
          const int64_t o = p * 16 + lane, q = cp * taps + tap;
          uint16_t *d = dst + ((p * pairs + q) * 16 + lane) * 2;
          d[0] = o < O ? w[(o * C + 2 * cp) * taps + tap] : 0;
          d[1] = o < O && 2 * cp + 1 < C ? w[(o * C + 2 * cp + 1) * taps + tap] : 0;
        }
}

#if defined(__x86_64__)
LIBJIT_EXPORT LIBJIT_NOINLINE LIBJIT_BF16_TARGET void libjit_conv_bf16_cl_avx512bf16(
    uint16_t *out, const uint16_t *in, const uint32_t *packedW, const uint16_t *bias,
    const uint16_t *res, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,
    int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,
    int64_t DH, int64_t DW, int64_t act, float lo, float hi, char *scratch,
    int64_t scratchStride, int64_t tid, int64_t nthreads) {
  const ConvGeom g = convGeom(C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW);
  const int64_t pairs = g.Cp * KH * KW, P = OH * OW, groups = ceilDiv(O, 32);
  uint32_t *x2 = reinterpret_cast<uint32_t *>(scratch + tid * scratchStride);
  uint32_t *tile = x2 + planeBytes(g) / 4;
  float *acc16 = reinterpret_cast<float *>(tile + pairs * kConvTile);
  int64_t ub, ue, planes = -1;
  partition(N * groups, 1, tid, nthreads, &ub, &ue);
  for (int64_t u = ub; u < ue; u++) {
    const int64_t img = u / groups, k = u % groups;
    if (img != planes) {
      packPlanesAvx512(x2, in + img * C * H * W, g, 0, P);
      if (!g.direct)
        packTileAvx512(tile, x2, g, 0, P);
      planes = img;
    }
    clPixels(acc16, g.direct ? x2 : tile, kConvTile, // one tile (packDirectTiles)
             packedW + k * 2 * pairs * 16, pairs, P);
    clEpilogue(out + img * O * P, res ? res + img * O * P : nullptr, acc16, bias, k * 32, O, P,
               act, lo, hi);
  }
}
#endif
