// The float32 Winograd convolution kernels of the CPU backend (NCHW, 3x3, stride 1), one
// section each: the helpers both Winograd kernels share, F(4x4, 3x3) with the tiles as GEMM
// columns, and F(2x2, 3x3) or F(4x4, 3x3) with the tiles as GEMM rows. The choice among
// these and the other convolution kernels (libjit_conv.cpp) is codegen/EmitConv.cpp's
// chooseConvAlgorithm.

#include "libjit.h"
#include "libjit_gemm_impl.h"
#include "libjit_vec.h"

// ============================== Winograd: shared helpers
// The shared parts of the two Winograd kernels below (tiles as GEMM columns; tiles as GEMM
// rows): lane shuffles that de-interleave a row of tiles and the F(4x4, 3x3) input and
// output transforms of one column of values.

namespace libjit {

#define WINO_INLINE inline __attribute__((always_inline))

template <int VW> struct IVecOf;
template <> struct IVecOf<16> { typedef int32_t T __attribute__((vector_size(64))); };
template <> struct IVecOf<8> { typedef int32_t T __attribute__((vector_size(32))); };

/// Lane shuffles for VW-lane vectors: de-interleaving four vectors (64 or 32 consecutive
/// floats) by stride 4, the inverse, and shifting one lane in from another vector.
template <int VW> struct Lanes;

template <> struct Lanes<16> {
  typedef VecOf<16>::T V;
  /// e[l] = x[2 l], o[l] = x[2 l + 1] where x = a0 a1.
  static WINO_INLINE void deinterleave2(V a0, V a1, V *e, V *o) {
    *e = __builtin_shufflevector(a0, a1, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    *o = __builtin_shufflevector(a0, a1, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  }
  /// e_j[l] = x[4 l + j] where x = a0 a1 a2 a3.
  static WINO_INLINE void deinterleave4(V a0, V a1, V a2, V a3, V *e) {
#define EVEN16 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define ODD16 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
    V l01 = __builtin_shufflevector(a0, a1, EVEN16), h01 = __builtin_shufflevector(a0, a1, ODD16);
    V l23 = __builtin_shufflevector(a2, a3, EVEN16), h23 = __builtin_shufflevector(a2, a3, ODD16);
    e[0] = __builtin_shufflevector(l01, l23, EVEN16);
    e[2] = __builtin_shufflevector(l01, l23, ODD16);
    e[1] = __builtin_shufflevector(h01, h23, EVEN16);
    e[3] = __builtin_shufflevector(h01, h23, ODD16);
#undef EVEN16
#undef ODD16
  }
  /// x = a0 a1 a2 a3 with x[4 l + j] = e_j[l].
  static WINO_INLINE void interleave4(const V *e, V *a) {
#define ZIPLO16 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23
#define ZIPHI16 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31
    V l01 = __builtin_shufflevector(e[0], e[2], ZIPLO16),
      l23 = __builtin_shufflevector(e[0], e[2], ZIPHI16);
    V h01 = __builtin_shufflevector(e[1], e[3], ZIPLO16),
      h23 = __builtin_shufflevector(e[1], e[3], ZIPHI16);
    a[0] = __builtin_shufflevector(l01, h01, ZIPLO16);
    a[1] = __builtin_shufflevector(l01, h01, ZIPHI16);
    a[2] = __builtin_shufflevector(l23, h23, ZIPLO16);
    a[3] = __builtin_shufflevector(l23, h23, ZIPHI16);
#undef ZIPLO16
#undef ZIPHI16
  }
  /// [e[1], ..., e[15], n[0]] and [e[1], ..., e[15], n[1]].
  static WINO_INLINE V shiftIn0(V e, V n) {
    return __builtin_shufflevector(e, n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  }
  static WINO_INLINE V shiftIn1(V e, V n) {
    return __builtin_shufflevector(e, n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17);
  }
};

template <> struct Lanes<8> {
  typedef VecOf<8>::T V;
  static WINO_INLINE void deinterleave2(V a0, V a1, V *e, V *o) {
    *e = __builtin_shufflevector(a0, a1, 0, 2, 4, 6, 8, 10, 12, 14);
    *o = __builtin_shufflevector(a0, a1, 1, 3, 5, 7, 9, 11, 13, 15);
  }
  static WINO_INLINE void deinterleave4(V a0, V a1, V a2, V a3, V *e) {
#define EVEN8 0, 2, 4, 6, 8, 10, 12, 14
#define ODD8 1, 3, 5, 7, 9, 11, 13, 15
    V l01 = __builtin_shufflevector(a0, a1, EVEN8), h01 = __builtin_shufflevector(a0, a1, ODD8);
    V l23 = __builtin_shufflevector(a2, a3, EVEN8), h23 = __builtin_shufflevector(a2, a3, ODD8);
    e[0] = __builtin_shufflevector(l01, l23, EVEN8);
    e[2] = __builtin_shufflevector(l01, l23, ODD8);
    e[1] = __builtin_shufflevector(h01, h23, EVEN8);
    e[3] = __builtin_shufflevector(h01, h23, ODD8);
#undef EVEN8
#undef ODD8
  }
  static WINO_INLINE void interleave4(const V *e, V *a) {
#define ZIPLO8 0, 8, 1, 9, 2, 10, 3, 11
#define ZIPHI8 4, 12, 5, 13, 6, 14, 7, 15
    V l01 = __builtin_shufflevector(e[0], e[2], ZIPLO8),
      l23 = __builtin_shufflevector(e[0], e[2], ZIPHI8);
    V h01 = __builtin_shufflevector(e[1], e[3], ZIPLO8),
      h23 = __builtin_shufflevector(e[1], e[3], ZIPHI8);
    a[0] = __builtin_shufflevector(l01, h01, ZIPLO8);
    a[1] = __builtin_shufflevector(l01, h01, ZIPHI8);
    a[2] = __builtin_shufflevector(l23, h23, ZIPLO8);
    a[3] = __builtin_shufflevector(l23, h23, ZIPHI8);
#undef ZIPLO8
#undef ZIPHI8
  }
  static WINO_INLINE V shiftIn0(V e, V n) {
    return __builtin_shufflevector(e, n, 1, 2, 3, 4, 5, 6, 7, 8);
  }
  static WINO_INLINE V shiftIn1(V e, V n) {
    return __builtin_shufflevector(e, n, 1, 2, 3, 4, 5, 6, 7, 9);
  }
};

// F(4x4, 3x3) on the interpolation points 0, 1, -1, 1/2, -2 and infinity (the asymmetric
// set: its channel sums of transformed products are smaller than those of 0, +-1, +-2, so
// their float32 rounding, which the output transform magnifies, is; see backends/CPU/
// README.md, "Accuracy"). Derived in exact rational arithmetic from the Vandermonde
// matrix V of the points (degree-5 polynomials; infinity's row the leading coefficient):
// B^T = V^-T and G = the points' powers 0..2, each row of B^T scaled to small integers and
// G's row by the inverse; A^T = the points' powers 0..3. LibjitTest checks the 1-D and
// 2-D identities against direct correlation in double.
//   B^T = [2 -3 -4  3  2 0]   G = [ 1/2    0     0  ]   A^T = [1 1  1  1    1  0]
//         [0 -2  1  5  2 0]       [ 1/6   1/6   1/6 ]         [0 1 -1 1/2  -2  0]
//         [0 -2  5 -1 -2 0]       [ 1/6  -1/6   1/6 ]         [0 1  1 1/4   4  0]
//         [0  2  1 -2 -1 0]       [16/15  8/15  4/15]         [0 1 -1 1/8  -8  1]
//         [0  1 -2 -1  2 0]       [ 1/30 -1/15  2/15]
//         [0  2 -3 -4  3 2]       [ 0     0     1/2 ]

/// t = B^T d for one column of six values (the 6x6 input transform is this on rows, then
/// on columns).
template <class V> LIBJIT_INLINE void inputT(const V *d, V *t) {
  V two = splatV<V>(2.0f), three = splatV<V>(3.0f), four = splatV<V>(4.0f),
    five = splatV<V>(5.0f);
  V p = d[1] - d[3], q = d[2] - d[4];
  t[0] = two * (d[0] + d[4]) - three * p - four * d[2];
  t[1] = (d[2] + five * d[3]) - two * (d[1] - d[4]);
  t[2] = (five * d[2] - d[3]) - two * (d[1] + d[4]);
  t[3] = two * p + q;
  t[4] = p - two * q;
  t[5] = two * (d[1] + d[5]) - three * q - four * d[3];
}

/// y = A^T m for one column of six values.
template <class V> LIBJIT_INLINE void outputT(const V *m, V *y) {
  V s1 = m[1] + m[2], d1 = m[1] - m[2];
  y[0] = (m[0] + s1) + (m[3] + m[4]);
  y[1] = d1 + splatV<V>(0.5f) * m[3] - splatV<V>(2.0f) * m[4];
  y[2] = s1 + splatV<V>(0.25f) * m[3] + splatV<V>(4.0f) * m[4];
  y[3] = (d1 + m[5]) + splatV<V>(0.125f) * m[3] - splatV<V>(8.0f) * m[4];
}

/// G of F(4x4, 3x3): the filter transform G g G^T (done in double at compile time).
struct WinoG4 {
  static constexpr double G[6][3] = {{1.0 / 2, 0, 0},
                                     {1.0 / 6, 1.0 / 6, 1.0 / 6},
                                     {1.0 / 6, -1.0 / 6, 1.0 / 6},
                                     {16.0 / 15, 8.0 / 15, 4.0 / 15},
                                     {1.0 / 30, -1.0 / 15, 2.0 / 15},
                                     {0, 0, 1.0 / 2}};
};

/// y = A^T m A for one 4x4 output tile from its 36 positions m[k * 6 + c]: rows (m A), then
/// columns.
template <class V> LIBJIT_INLINE void outputTile4(const V *m, V y[4][4]) {
  V z[6][4];
  LIBJIT_UNROLL
  for (int k = 0; k < 6; k++)
    outputT(m + 6 * k, z[k]);
  LIBJIT_UNROLL
  for (int j = 0; j < 4; j++) {
    V a[6], r[4];
    LIBJIT_UNROLL
    for (int k = 0; k < 6; k++)
      a[k] = z[k][j];
    outputT(a, r);
    LIBJIT_UNROLL
    for (int i = 0; i < 4; i++)
      y[i][j] = r[i];
  }
}

/// The input rows of one chunk of tiles in one channel plane: rows ih0 + [0, NROWS) from
/// column iw0, NVEC vectors wide, zero outside the image. Vector v of a row covers columns
/// iw0 + v VW + [0, VW): all inside the image (no mask), none (zero, not loaded), or some
/// (masked). Rows whose loads could leave the input buffer [in, inEnd) go through a
/// padded copy in P (NROWS x NVEC VW floats).
template <int VW, int NROWS, int NVEC> struct ChunkRows {
  typedef typename VecOf<VW>::T V;
  typedef typename IVecOf<VW>::T IV;
  const float *rows[NROWS]; ///< null: outside the image
  IV m[NVEC];
  bool some[NVEC], none[NVEC];

  WINO_INLINE ChunkRows(const float *plane, const float *in, const float *inEnd, int64_t H,
                        int64_t W, int64_t ih0, int64_t iw0, float *P) {
    constexpr int64_t PW = NVEC * VW;
    IV lane;
    for (int l = 0; l < VW; l++)
      lane[l] = l;
    for (int v = 0; v < NVEC; v++) {
      int64_t x0 = iw0 + v * VW;
      none[v] = x0 + VW <= 0 || x0 >= W;
      some[v] = !none[v] && (x0 < 0 || x0 + VW > W);
      IV x = lane + (int32_t)x0;
      m[v] = (x >= 0) & (x < (int32_t)W);
    }
    LIBJIT_UNROLL
    for (int r = 0; r < NROWS; r++) {
      int64_t ih = ih0 + r;
      rows[r] = nullptr;
      if (ih < 0 || ih >= H)
        continue;
      const float *row = plane + ih * W + iw0;
      if (row < in || row + PW > inEnd) {
        float *pr = P + r * PW;
        int64_t xa = minI(maxI(-iw0, 0), PW), xb = maxI(minI(W - iw0, PW), xa);
        for (int64_t x = 0; x < PW; x++)
          pr[x] = x >= xa && x < xb ? row[x] : 0.0f;
        row = pr;
      }
      rows[r] = row;
    }
  }

  /// Vector v of row r.
  WINO_INLINE V at(int r, int v) const {
    V a = rows[r] && !none[v] ? loadV<V>(rows[r] + v * VW) : (V){};
    return some[v] ? (m[v] ? a : (V){}) : a;
  }
};

} // namespace libjit

// ============================== Winograd: tiles as GEMM columns
// Winograd convolutions: float32 NCHW, 3x3 kernels, stride 1, dilation 1, one group, any
// pads. Two kernels: F(4x4, 3x3) with the output tiles as GEMM columns (this section), and
// F(2x2, 3x3) or F(4x4, 3x3) with the tiles as GEMM rows (the section after it).
//
// Tiles as columns, F(4x4, 3x3): every 4x4 output tile is computed from a 6x6 input tile as
//   Y = A^T [ (G g G^T) .* (B^T d B) ] A
// summed over input channels, so the 36 element-wise products summed over channels are 36
// GEMMs:  M[p] (O x tiles) = U[p] (O x C) x V[p] (C x tiles),  p = 0..35,
// with U = G g G^T transformed and packed at compile time (libjit_pack_wino_f32_*: A panels
// of the shared GEMM engine, [36][packed O x C]) and V the transformed input tiles, written
// straight into B panels. Output channels are GEMM rows and tiles are columns: the tiles of
// a whole tile row and several tile rows share a panel, so only the last panel of a block
// is ragged.
//
// Tiles are numbered n-major, then tile row, then tile column (tile t covers output rows
// 4 ty .. 4 ty + 3 and columns 4 tx .. 4 tx + 3 of image n); edge tiles are partially valid.
// Each thread takes a range of tiles (or, when there are too few tiles, a range of output
// channels and every tile) and walks it in blocks sized so that the block's V and M stay
// in the cache: input transform, 36 GEMMs, output transform with the fused epilogue
// (+ bias[o], + residual add, clamp to [lo, hi] when act). The transforms run on vectors
// of VW tiles along a tile row (the stride-4 columns of a tile row are de-interleaved with
// shuffles).
//
// Accuracy: F(4x4, 3x3) is exact in real arithmetic; in float32 its transforms (entries up
// to 8 and 1/24) cost a few more ulps than a direct convolution (see LibjitTest).

namespace libjit {
namespace {

typedef float V4 __attribute__((vector_size(16)));

/// Low and high halves of a vector.
WINO_INLINE VecOf<8>::T lowHalf(VecOf<16>::T v) {
  return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
}
WINO_INLINE VecOf<8>::T highHalf(VecOf<16>::T v) {
  return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
}
WINO_INLINE V4 lowHalf(VecOf<8>::T v) { return __builtin_shufflevector(v, v, 0, 1, 2, 3); }
WINO_INLINE V4 highHalf(VecOf<8>::T v) { return __builtin_shufflevector(v, v, 4, 5, 6, 7); }

/// Shapes, tiling, blocking and the scratch layout of one convolution.
template <class Cfg> struct Wino {
  static constexpr int64_t VW = Cfg::VW, NR = Cfg::NR, MR = Cfg::MR;
  /// The floats of an input row a chunk of VW tiles loads: five vectors, of which the
  /// tiles use 4 VW + 2 columns.
  static constexpr int64_t PW = 5 * VW;
  /// V and M of one block: what fits in about half of a 1 MB L2 cache, and at most.
  static constexpr int64_t kBlockFloats = 128 * 1024, kMaxBlockFloats = 4 * 1024 * 1024;

  int64_t N, C, H, W, O, OH, OW, PT, PL;
  int64_t TH, TW, T;                          ///< tile rows and columns per image, tiles in all
  int64_t Tb;                                 ///< tiles per block (a multiple of NR)
  int64_t panelStride, vStride, ldm, mStride; ///< floats
  int64_t vOff, mOff, sOff, pOff, total;      ///< scratch layout of one thread, floats

  static WINO_INLINE int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

  WINO_INLINE Wino(int64_t N_, int64_t C_, int64_t H_, int64_t W_, int64_t O_, int64_t OH_,
                   int64_t OW_, int64_t PT_, int64_t PL_)
      : N(N_), C(C_), H(H_), W(W_), O(O_), OH(OH_), OW(OW_), PT(PT_), PL(PL_) {
    TH = ceilDiv(OH, 4);
    TW = ceilDiv(OW, 4);
    T = N * TH * TW;
    // Blocks small enough for V and M to stay in L2, unless the weights are the larger
    // stream: then at least O C / (C + O) tiles, so that each block reads no more bytes
    // of weights than of V and M (but V and M within 16 MB).
    int64_t perTile = 36 * (C + 1 + O);
    Tb = minI(maxI(kBlockFloats / perTile, O * C / (C + O)), kMaxBlockFloats / perTile);
    Tb = minI(maxI(Tb / NR * NR, NR), roundUp(T, NR));
    // V: per position, panels of NR tiles over C + 1 channel rows (the last row catches
    // the lanes a chunk store writes past the end of the last channel's row); M: per
    // position O rows of ldm tiles. 16 floats between positions break 4K aliasing.
    panelStride = (C + 1) * NR;
    vStride = (Tb / NR) * panelStride + 16;
    ldm = Tb;
    mStride = O * ldm + 16;
    vOff = 0;
    mOff = roundUp(vOff + 36 * vStride, 16);
    sOff = roundUp(mOff + 36 * mStride + VW, 16);
    pOff = roundUp(sOff + 37 * VW, 16);
    total = roundUp(pOff + 6 * PW, 16);
  }
};

/// Transforms the input tiles [b0, b1) of channels [0, C) into V (B panels; column
/// t - b0 of position p, channel c at V + p vStride + q panelStride + c NR + j,
/// q = (t - b0) / NR, j = (t - b0) % NR).
template <class Cfg>
LIBJIT_NOINLINE void winoInput(const Wino<Cfg> &w, const float *in, int64_t b0, int64_t b1,
                               float *scratch) {
  typedef typename VecOf<Cfg::VW>::T V;
  typedef Lanes<Cfg::VW> L;
  constexpr int64_t VW = Cfg::VW, NR = Cfg::NR;
  float *Vb = scratch + w.vOff, *S = scratch + w.sOff, *P = scratch + w.pOff;
  const float *inEnd = in + w.N * w.C * w.H * w.W;
  int64_t nb = b1 - b0;
  // Columns of the last panel past the block: zero, so that the GEMM never sees stale
  // (possibly denormal) values there. (Whole rows: the valid columns are written below.)
  if (nb % NR) {
    float *d = Vb + (nb / NR) * w.panelStride;
    for (int64_t p = 0; p < 36; p++)
      for (int64_t c = 0; c <= w.C; c++)
        LIBJIT_UNROLL
    for (int64_t v = 0; v < NR / VW; v++)
      storeV(d + p * w.vStride + c * NR + v * VW, (V){});
  }
  for (int64_t c = 0; c < w.C; c++) {
    // Channel by channel, tiles in ascending order: a chunk's full-vector store past its
    // last tile only touches columns (or the next channel's row) written later.
    for (int64_t t = b0; t < b1;) {
      int64_t R = t / w.TW, tx = t % w.TW;
      int64_t nt = minI(minI(VW, w.TW - tx), b1 - t);
      int64_t n = R / w.TH, ty = R % w.TH;
      const float *plane = in + (n * w.C + c) * w.H * w.W;
      // Row r of the chunk is in[4 ty - PT + r][4 tx - PL + x], x in [0, PW) (columns
      // past 4 nt + 2 only feed lanes that are not stored), zero outside the image.
      ChunkRows<VW, 6, 5> cr(plane, in, inEnd, w.H, w.W, ty * 4 - w.PT, tx * 4 - w.PL, P);
      // Columns first (B^T d on whole vectors of the rows), into U[k][v]...
      float U[6 * 5 * VW];
      LIBJIT_UNROLL
      for (int v = 0; v < 5; v++) {
        V a[6], u[6];
        LIBJIT_UNROLL
        for (int r = 0; r < 6; r++)
          a[r] = cr.at(r, v);
        inputT(a, u);
        LIBJIT_UNROLL
        for (int k = 0; k < 6; k++)
          storeV(U + (k * 5 + v) * VW, u[k]);
      }
      // ... then rows: de-interleave the six columns of every tile, (B^T d) B, stored to
      // the chunk's columns of the 36 positions.
      int64_t col = t - b0, q = col / NR, j = col % NR;
      int64_t n1 = minI(nt, NR - j);
      bool split = n1 < nt;
      float *d1 = Vb + q * w.panelStride + c * NR + j;
      LIBJIT_UNROLL
      for (int k = 0; k < 6; k++) {
        const float *uk = U + k * 5 * VW;
        V e[6], v[6];
        L::deinterleave4(loadV<V>(uk), loadV<V>(uk + VW), loadV<V>(uk + 2 * VW),
                         loadV<V>(uk + 3 * VW), e);
        V a4 = loadV<V>(uk + 4 * VW);
        e[4] = L::shiftIn0(e[0], a4);
        e[5] = L::shiftIn1(e[1], a4);
        inputT(e, v);
        LIBJIT_UNROLL
        for (int mm = 0; mm < 6; mm++) {
          storeV(d1 + (k * 6 + mm) * w.vStride, v[mm]);
          if (split)
            storeV(S + (k * 6 + mm) * VW, v[mm]);
        }
      }
      if (split) {
        // The chunk runs into the next panel: its remaining tiles start that panel's row.
        float *d2 = Vb + (q + 1) * w.panelStride + c * NR;
        for (int64_t p = 0; p < 36; p++)
          storeV(d2 + p * w.vStride, loadV<V>(S + p * VW + n1));
      }
      t += nt;
    }
  }
}

/// out = clamp(y + bias (+ add)) for one vector (of any width).
template <class V>
LIBJIT_INLINE void winoStore(float *dst, V y, float bo, const float *add, float lo, float hi) {
  V s = y + bo;
  if (add)
    s += loadV<V>(add);
  s = s < lo ? splatV<V>(lo) : s;
  s = s > hi ? splatV<V>(hi) : s;
  storeV(dst, s);
}

/// winoStore of the first n < 8 lanes of y: four, then one at a time.
LIBJIT_INLINE void winoStoreTail(float *dst, VecOf<8>::T y, int64_t n, float bo, const float *add,
                                 float lo, float hi) {
  V4 v = lowHalf(y);
  if (n >= 4) {
    winoStore(dst, v, bo, add, lo, hi);
    v = highHalf(y);
    dst += 4, add = add ? add + 4 : nullptr, n -= 4;
  }
  for (int64_t i = 0; i < n; i++) {
    float s = v[i] + bo;
    if (add)
      s += add[i];
    s = s < lo ? lo : s;
    dst[i] = s > hi ? hi : s;
  }
}

/// winoStore of the first n < VW lanes of y, without loads or stores past them.
LIBJIT_INLINE void winoStorePart(float *dst, VecOf<16>::T y, int64_t n, float bo, const float *add,
                                 float lo, float hi) {
  VecOf<8>::T h = lowHalf(y);
  if (n >= 8) {
    winoStore(dst, h, bo, add, lo, hi);
    h = highHalf(y);
    dst += 8, add = add ? add + 8 : nullptr, n -= 8;
  }
  winoStoreTail(dst, h, n, bo, add, lo, hi);
}
LIBJIT_INLINE void winoStorePart(float *dst, VecOf<8>::T y, int64_t n, float bo, const float *add,
                                 float lo, float hi) {
  winoStoreTail(dst, y, n, bo, add, lo, hi);
}

/// Output transform of tiles [b0, b1), channels [o0, o1) from M, with the epilogue.
template <class Cfg>
LIBJIT_NOINLINE void winoOutput(const Wino<Cfg> &w, float *out, const float *bias, const float *add,
                                int64_t b0, int64_t b1, int64_t o0, int64_t o1, float lo, float hi,
                                int gact, float ga, float gb, float *scratch) {
  typedef typename VecOf<Cfg::VW>::T V;
  typedef Lanes<Cfg::VW> L;
  constexpr int64_t VW = Cfg::VW;
  const float *Mb = scratch + w.mOff;
  // Rows of at most VW / 2 tiles: a vector holds several whole tile rows, written out
  // from Y (row i of the chunk's 4 x 4 VW outputs at Y + i 5 VW; the slack keeps the
  // last partial load inside).
  bool multi = 2 * w.TW <= VW;
  float Y[4 * 5 * VW];
  for (int64_t o = o0; o < o1; o++) {
    float bo = bias ? bias[o] : 0.0f;
    for (int64_t t = b0; t < b1;) {
      int64_t R = t / w.TW, tx = t % w.TW;
      int64_t nt = minI(minI(VW, w.TW - tx), b1 - t);
      if (multi && tx == 0)
        nt = minI((VW / w.TW) * w.TW, b1 - t);
      int64_t n = R / w.TH, ty = R % w.TH;
      const float *m = Mb + o * w.ldm + (t - b0);
      V a[36], y[4][4];
      LIBJIT_UNROLL
      for (int p = 0; p < 36; p++)
        a[p] = loadV<V>(m + p * w.mStride);
      outputTile4(a, y);
      if (nt > w.TW - tx) {
        // Several tile rows: through Y, one row of tiles at a time.
        LIBJIT_UNROLL
        for (int i = 0; i < 4; i++) {
          V a[4];
          L::interleave4(y[i], a);
          LIBJIT_UNROLL
          for (int v = 0; v < 4; v++)
            storeV(Y + i * 5 * VW + v * VW, a[v]);
        }
        for (int64_t l0 = 0; l0 < nt;) {
          int64_t Rs = (t + l0) / w.TW, txs = (t + l0) % w.TW;
          int64_t ns = minI(w.TW - txs, nt - l0);
          int64_t ns_n = Rs / w.TH, tys = Rs % w.TH;
          int64_t ow0 = txs * 4, len = minI(w.OW - ow0, 4 * ns);
          int64_t rows = minI(4, w.OH - tys * 4);
          for (int64_t i = 0; i < rows; i++) {
            int64_t off = ((ns_n * w.O + o) * w.OH + tys * 4 + i) * w.OW + ow0;
            float *dst = out + off;
            const float *ad = add ? add + off : nullptr;
            const float *src = Y + i * 5 * VW + 4 * l0;
            int64_t x = 0;
            for (; x + VW <= len; x += VW)
              winoStore(dst + x, loadV<V>(src + x), bo, ad ? ad + x : nullptr, lo, hi);
            if (x < len)
              winoStorePart(dst + x, loadV<V>(src + x), len - x, bo, ad ? ad + x : nullptr, lo, hi);
            if (gact)
              activateRow(dst, len, gact, ga, gb);
          }
          l0 += ns;
        }
        t += nt;
        continue;
      }
      // One tile row: output rows 4 ty + i, columns [4 tx, 4 tx + len), straight from the
      // registers: whole vectors, then the part of the next one inside the row.
      int64_t ow0 = tx * 4, len = minI(w.OW - ow0, 4 * nt);
      int64_t rows = minI(4, w.OH - ty * 4);
      int64_t whole = len / VW, rem = len % VW;
      LIBJIT_UNROLL
      for (int i = 0; i < 4; i++) {
        if (i >= rows)
          break;
        V a[4];
        L::interleave4(y[i], a);
        int64_t off = ((n * w.O + o) * w.OH + ty * 4 + i) * w.OW + ow0;
        float *dst = out + off;
        const float *ad = add ? add + off : nullptr;
        LIBJIT_UNROLL
        for (int v = 0; v < 4; v++)
          if (v < whole)
            winoStore(dst + v * VW, a[v], bo, ad ? ad + v * VW : nullptr, lo, hi);
        if (rem) {
          V last = whole == 0 ? a[0] : whole == 1 ? a[1] : whole == 2 ? a[2] : a[3];
          winoStorePart(dst + whole * VW, last, rem, bo, ad ? ad + whole * VW : nullptr, lo, hi);
        }
        if (gact)
          activateRow(dst, len, gact, ga, gb);
      }
      t += nt;
    }
  }
}

/// One 16-float vector by 14 rows: GemmAvx512's tile at half the panel width (the same
/// A panels, so the same packed weights), for convolutions with few tiles.
struct WinoAvx512Narrow {
  static constexpr int VW = 16;
  static constexpr int NV = 1;
  static constexpr int MR = 14;
  static constexpr int NR = VW * NV;
  static constexpr int64_t KC = 384;
  static constexpr int64_t MC = MR * 12;
  static constexpr int64_t NC = 32 * 32;
};
template <class Cfg> struct Narrow { typedef Cfg T; };
template <> struct Narrow<GemmAvx512> { typedef WinoAvx512Narrow T; };

/// Whether the narrow panels of Narrow<Cfg> serve \p T tiles better than Cfg's.
template <class Cfg> LIBJIT_INLINE bool useNarrow(int64_t T) {
  constexpr int64_t NR = Cfg::NR, NRn = Narrow<Cfg>::T::NR;
  return NRn < NR && ceilDiv(T, NRn) * NRn < ceilDiv(T, NR) * NR;
}

template <class Cfg>
LIBJIT_INLINE void conv2dWino(float *out, const float *in, const float *U, const float *bias,
                              const float *add, int64_t N, int64_t C, int64_t H, int64_t W,
                              int64_t O, int64_t OH, int64_t OW, int64_t PT, int64_t PL,
                              int64_t act, float lo, float hi, float *scratch, int64_t tid,
                              int64_t nthreads) {
  constexpr int64_t VW = Cfg::VW, NR = Cfg::NR, MR = Cfg::MR;
  Wino<Cfg> w(N, C, H, W, O, OH, OW, PT, PL);
  float *s = scratch + tid * w.total;
  // A clamp is applied as each vector is stored; another activation (gact) on each output
  // row segment just written.
  int gact = act > ActClamp ? int(act) : 0;
  float ga = lo, gb = hi;
  if (act != ActClamp) {
    lo = -__builtin_inff();
    hi = __builtin_inff();
  }
  // Tiles split over threads when there is a panel for each; else output channels (every
  // thread then transforms all the input tiles).
  int64_t t0 = 0, t1 = w.T, o0 = 0, o1 = O;
  if (nthreads > 1) {
    if (ceilDiv(w.T, NR) >= nthreads)
      partition(w.T, VW, tid, nthreads, &t0, &t1);
    else
      partition(O, MR, tid, nthreads, &o0, &o1);
  }
  if (t0 >= t1 || o0 >= o1)
    return;
  int64_t len = t1 - t0, blocks = ceilDiv(len, w.Tb);
  int64_t bs = minI(w.Tb, Wino<Cfg>::roundUp(ceilDiv(len, blocks), VW));
  int64_t perU = packedAFloats<Cfg>(O, C);
  for (int64_t b0 = t0; b0 < t1; b0 += bs) {
    int64_t b1 = minI(b0 + bs, t1);
    winoInput<Cfg>(w, in, b0, b1, s);
    // Whole panels (the columns past the block are zero in V and unused in M): a ragged
    // panel would take the micro-kernel's column-at-a-time path.
    int64_t cols = Wino<Cfg>::roundUp(b1 - b0, NR);
    for (int64_t p = 0; p < 36; p++)
      gemmRange<Cfg, PackedA<Cfg>, PackedB<Cfg>, kWinoSumBlock>(
          o0, o1, 0, cols, C, PackedA<Cfg>{U + p * perU, C},
          PackedB<Cfg>{s + w.vOff + p * w.vStride, C + 1}, s + w.mOff + p * w.mStride, w.ldm,
          kNoEpilogue, s);
    winoOutput<Cfg>(w, out, bias, add, b0, b1, o0, o1, lo, hi, gact, ga, gb, s);
  }
}

/// U[p] = (G g G^T)[p / 6][p % 6] for every (o, c), in double, packed as A panels of the
/// O x C matrix of each position (rows past O zero). Per panel and channel the MR rows'
/// transforms are computed side by side (the row index innermost, so the loops vectorise
/// across rows) and each position's MR values stored together.
template <class Cfg> void packWino(float *dst, const float *wt, int64_t O, int64_t C) {
  const auto &G = WinoG4::G;
  constexpr int64_t MR = Cfg::MR;
  int64_t per = packedAFloats<Cfg>(O, C);
  for (int64_t op = 0; op < ceilDiv(O, MR); op++) {
    const int64_t rows = minI(MR, O - op * MR);
    for (int64_t c = 0; c < C; c++) {
      double g[9][MR], gg[6][3][MR];
      for (int k = 0; k < 9; k++)
        for (int64_t r = 0; r < MR; r++)
          g[k][r] = r < rows ? wt[((op * MR + r) * C + c) * 9 + k] : 0.0;
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 3; j++)
          for (int64_t r = 0; r < MR; r++)
            gg[i][j][r] = G[i][0] * g[0 * 3 + j][r] + G[i][1] * g[1 * 3 + j][r] +
                          G[i][2] * g[2 * 3 + j][r];
      float *d = dst + op * C * MR + c * MR;
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++)
          for (int64_t r = 0; r < MR; r++)
            d[(i * 6 + j) * per + r] =
                float(gg[i][0][r] * G[j][0] + gg[i][1][r] * G[j][1] + gg[i][2][r] * G[j][2]);
    }
  }
}

} // namespace
} // namespace libjit

using namespace libjit;

#define LIBJIT_WINO_ENTRY_POINTS(SUFFIX, CFG)                                                      \
  LIBJIT_EXPORT int64_t libjit_conv2d_wino_scratch_floats_##SUFFIX(                                \
      int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW) {             \
    int64_t T = N * ceilDiv(OH, 4) * ceilDiv(OW, 4);                                               \
    if (useNarrow<CFG>(T))                                                                         \
      return Wino<Narrow<CFG>::T>(N, C, H, W, O, OH, OW, 0, 0).total;                              \
    return Wino<CFG>(N, C, H, W, O, OH, OW, 0, 0).total;                                           \
  }                                                                                                \
  LIBJIT_EXPORT int64_t libjit_pack_wino_floats_##SUFFIX(int64_t O, int64_t C) {                   \
    return 36 * packedAFloats<CFG>(O, C);                                                          \
  }                                                                                                \
  LIBJIT_EXPORT void libjit_pack_wino_f32_##SUFFIX(float *dst, const float *w, int64_t O,          \
                                                   int64_t C) {                                    \
    packWino<CFG>(dst, w, O, C);                                                                   \
  }                                                                                                \
  LIBJIT_EXPORT void libjit_conv2d_wino_f32_##SUFFIX(                                              \
      float *out, const float *in, const float *packedW, const float *bias, const float *add,      \
      int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW, int64_t PT,   \
      int64_t PL, int64_t act, float lo, float hi, float *scratch, int64_t tid,                    \
      int64_t nthreads) {                                                                          \
    if (useNarrow<CFG>(N * ceilDiv(OH, 4) * ceilDiv(OW, 4)))                                       \
      conv2dWino<Narrow<CFG>::T>(out, in, packedW, bias, add, N, C, H, W, O, OH, OW, PT, PL, act,  \
                                 lo, hi, scratch, tid, nthreads);                                  \
    else                                                                                           \
      conv2dWino<CFG>(out, in, packedW, bias, add, N, C, H, W, O, OH, OW, PT, PL, act, lo, hi,     \
                      scratch, tid, nthreads);                                                     \
  }

LIBJIT_WINO_ENTRY_POINTS(avx512, GemmAvx512)
LIBJIT_WINO_ENTRY_POINTS(avx2, GemmAvx2)

// ============================== Winograd: tiles as GEMM rows
// Winograd convolutions with the tiles as GEMM rows: F(2x2, 3x3) and F(4x4, 3x3), float32
// NCHW, 3x3 kernels, stride 1, dilation 1, one group, any pads.
//
// Every TM x TM output tile (TM = 2 or 4) from an A x A input tile (A = TM + 2):
// Y = A^T [ (G g G^T) .* (B^T d B) ] A, so NP = A^2 GEMMs
//   M[p] (tiles x O) = V[p] (tiles x C) x U[p] (C x O),  p = 0..NP-1.
// U is packed at compile time as B panels (libjit_pack_wino_rows_f32_*: [NP][packed C x O]);
// the input transform writes V straight into A panels (MR tiles each); the output transform
// turns the rows of M into a pixel-major block [pixels][channels] with the bias, which
// transposeOut writes into the NCHW output with the residual add and the clamp.
//
// Tiles as rows fill the register tile where the tiles-as-columns kernel above pads them
// to whole NR-column panels (49 tiles of a 28x28 image: 64 columns, 50 rows here). And
// F(2x2) reads 16/9 of a direct convolution's weight bytes, F(4x4) 36/9, for 16/4 and
// 36/16 multiplies per output: F(2x2) is the better trade where F(4x4)'s transformed
// weights are a larger stream than memory serves (14x14 layers with 256 channels and up).
// Threads split output channels (each transforms every input tile and reads its share of
// U) while each gets two B panels, else rows of tiles.

namespace libjit {
namespace {

template <class Cfg, int TM> struct WinoRows {
  static constexpr int64_t VW = Cfg::VW, NR = Cfg::NR, MR = Cfg::MR;
  static constexpr int64_t A = TM + 2, NP = A * A;
  /// Tiles of one input-transform chunk: at most a vector, and at most a panel, so that a
  /// chunk spans two panels at most.
  static constexpr int64_t CH = VW < MR ? VW : MR;
  /// Vectors of an input row a chunk loads: TM CH + 2 columns.
  static constexpr int64_t NVEC = TM + 1, PW = NVEC * VW;
  static constexpr int64_t kBlockFloats = 128 * 1024, kMaxBlockFloats = 4 * 1024 * 1024;
  /// F(4x4) sums the channels in blocks (README, "Accuracy"); F(2x2) is within the error
  /// budget with whole sums.
  static constexpr bool kBlockedSums = TM == 4;

  int64_t N, C, H, W, O, OH, OW, PT, PL;
  int64_t TH, TW, TI;                         ///< tile rows and columns per image, tiles per image
  int64_t Tb;                                 ///< tiles per block
  /// Whole images per block (each from a panel boundary, roundUp(TI, MR) rows apart): more
  /// than 1 where a block may hold several images' tiles, so that the weights stream once
  /// per block instead of once per image.
  int64_t IB;
  int64_t panelStride, vStride, mStride, ldy; ///< floats
  int64_t vOff, mOff, yOff, sOff, pOff, total;

  static WINO_INLINE int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

  WINO_INLINE WinoRows(int64_t N_, int64_t C_, int64_t H_, int64_t W_, int64_t O_, int64_t OH_,
                       int64_t OW_, int64_t PT_, int64_t PL_)
      : N(N_), C(C_), H(H_), W(W_), O(O_), OH(OH_), OW(OW_), PT(PT_), PL(PL_) {
    TH = ceilDiv(OH, TM);
    TW = ceilDiv(OW, TM);
    TI = TH * TW;
    // As in the other kernel: blocks whose V and M stay in L2, unless the weights are the
    // larger stream; then enough tiles that a block reads no more weights than V and M.
    int64_t perTile = NP * (C + 2 + O);
    Tb = minI(maxI(kBlockFloats / perTile, O * C / (C + O)), kMaxBlockFloats / perTile);
    Tb = maxI(Tb / MR * MR, MR);
    IB = minI(N, Tb / roundUp(TI, MR));
    if (IB > 1)
      IB = ceilDiv(N, ceilDiv(N, IB)); // the same number of blocks, evened out
    Tb = IB > 1 ? IB * roundUp(TI, MR) : minI(Tb, roundUp(TI, MR));
    IB = maxI(IB, 1);
    // V: per position, panels of MR tiles over C + 2 channel rows (the last two catch the
    // lanes a chunk store writes past the last channel's row); M: per position Tb rows of
    // O; Y: the pixels of one image x O (whole vectors), the output transform's result.
    panelStride = (C + 2) * MR;
    vStride = ceilDiv(Tb, MR) * panelStride + 16;
    mStride = Tb * O + 16;
    ldy = roundUp(O, VW);
    vOff = 0;
    mOff = roundUp(vOff + NP * vStride, 16);
    yOff = roundUp(mOff + NP * mStride + VW, 16);
    sOff = roundUp(yOff + OH * OW * ldy + VW, 16);
    pOff = roundUp(sOff + NP * VW, 16);
    total = roundUp(pOff + A * PW, 16);
  }
};

/// The input transform of one chunk's rows, u = B^T d (on whole row vectors, in place
/// from d) and then the rows of (B^T d) B: r[k * A + m] for the chunk's tiles (lanes).
template <class Cfg, int TM> struct RowsTransform;

template <class Cfg> struct RowsTransform<Cfg, 2> {
  typedef typename VecOf<Cfg::VW>::T V;
  /// u[k][v] from the four rows d[r][v].
  static WINO_INLINE void columns(const V *d, V *u) {
    u[0] = d[0] - d[2];
    u[1] = d[1] + d[2];
    u[2] = d[2] - d[1];
    u[3] = d[1] - d[3];
  }
  /// r[0..3] from row k's three vectors (columns 2 l + j of tile l de-interleaved).
  static WINO_INLINE void row(const V *uk, V *r) {
    V e, o;
    Lanes<Cfg::VW>::deinterleave2(uk[0], uk[1], &e, &o);
    V e2 = Lanes<Cfg::VW>::shiftIn0(e, uk[2]), o2 = Lanes<Cfg::VW>::shiftIn1(o, uk[2]);
    r[0] = e - e2;
    r[1] = o + e2;
    r[2] = e2 - o;
    r[3] = o - o2;
  }
  /// y[i][j] (2 x 2) = A^T m A from the 16 positions.
  static WINO_INLINE void output(const V *m, V y[4][4]) {
    V z0[4], z1[4];
    LIBJIT_UNROLL
    for (int k = 0; k < 4; k++) {
      z0[k] = m[4 * k] + m[4 * k + 1] + m[4 * k + 2];
      z1[k] = m[4 * k + 1] - m[4 * k + 2] - m[4 * k + 3];
    }
    y[0][0] = z0[0] + z0[1] + z0[2];
    y[0][1] = z1[0] + z1[1] + z1[2];
    y[1][0] = z0[1] - z0[2] - z0[3];
    y[1][1] = z1[1] - z1[2] - z1[3];
  }
  static constexpr double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
};

template <class Cfg> struct RowsTransform<Cfg, 4> {
  typedef typename VecOf<Cfg::VW>::T V;
  static WINO_INLINE void columns(const V *d, V *u) { inputT(d, u); }
  /// r[0..5] from row k's five vectors (columns 4 l + j of tile l de-interleaved).
  static WINO_INLINE void row(const V *uk, V *r) {
    V e[6];
    Lanes<Cfg::VW>::deinterleave4(uk[0], uk[1], uk[2], uk[3], e);
    e[4] = Lanes<Cfg::VW>::shiftIn0(e[0], uk[4]);
    e[5] = Lanes<Cfg::VW>::shiftIn1(e[1], uk[4]);
    inputT(e, r);
  }
  /// y[i][j] (4 x 4) = A^T m A from the 36 positions.
  static WINO_INLINE void output(const V *m, V y[4][4]) { outputTile4(m, y); }

  static constexpr const double (&G)[6][3] = WinoG4::G;
};

/// Transforms the input tiles [b0, b1) of one image (tile indices within it) for channels
/// [0, C) into V: tile t - b0 of position p, channel c at V + p vStride + q panelStride +
/// c MR + j, q = (t - b0) / MR, j = (t - b0) % MR.
template <class Cfg, int TM>
LIBJIT_NOINLINE void winoRowsInput(const WinoRows<Cfg, TM> &w, const float *in, int64_t b0,
                                   int64_t b1, float *scratch, int64_t panel0) {
  typedef WinoRows<Cfg, TM> WR;
  typedef typename VecOf<Cfg::VW>::T V;
  typedef RowsTransform<Cfg, TM> RT;
  constexpr int64_t VW = Cfg::VW, MR = Cfg::MR, CH = WR::CH, A = WR::A,
                    NP = WR::NP, NVEC = WR::NVEC;
  float *Vb = scratch + w.vOff + panel0 * w.panelStride, *S = scratch + w.sOff,
        *P = scratch + w.pOff;
  const float *inEnd = in + w.C * w.H * w.W;
  int64_t nb = b1 - b0;
  // Rows of the last panel past the block: zero (they are computed, never stored).
  if (nb % MR) {
    float *d = Vb + (nb / MR) * w.panelStride;
    for (int64_t p = 0; p < NP; p++)
      for (int64_t c = 0; c < w.C; c++)
        for (int64_t j = nb % MR; j < MR; j++)
          d[p * w.vStride + c * MR + j] = 0.0f;
  }
  for (int64_t c = 0; c < w.C; c++) {
    const float *plane = in + c * w.H * w.W;
    // Channel by channel, tiles in ascending order: a store's lanes past the chunk only
    // touch tiles (or the next channels' rows) written later.
    for (int64_t t = b0; t < b1;) {
      int64_t ty = t / w.TW, tx = t % w.TW;
      int64_t nt = minI(minI(CH, w.TW - tx), b1 - t);
      // Row r of the chunk is in[TM ty - PT + r][TM tx - PL + x], x in [0, PW).
      ChunkRows<VW, A, NVEC> cr(plane, in, inEnd, w.H, w.W, ty * TM - w.PT, tx * TM - w.PL, P);
      // Columns first (B^T d on whole row vectors, into U[k][v]), then rows.
      float U[A * NVEC * VW];
      LIBJIT_UNROLL
      for (int v = 0; v < NVEC; v++) {
        V a[A], u[A];
        LIBJIT_UNROLL
        for (int r = 0; r < A; r++)
          a[r] = cr.at(r, v);
        RT::columns(a, u);
        LIBJIT_UNROLL
        for (int k = 0; k < A; k++)
          storeV(U + (k * NVEC + v) * VW, u[k]);
      }
      int64_t col = t - b0, q = col / MR, j = col % MR;
      int64_t n1 = minI(nt, MR - j);
      bool split = n1 < nt;
      float *d1 = Vb + q * w.panelStride + c * MR + j;
      LIBJIT_UNROLL
      for (int k = 0; k < A; k++) {
        V uk[NVEC], r[A];
        LIBJIT_UNROLL
        for (int v = 0; v < NVEC; v++)
          uk[v] = loadV<V>(U + (k * NVEC + v) * VW);
        RT::row(uk, r);
        LIBJIT_UNROLL
        for (int mm = 0; mm < A; mm++) {
          storeV(d1 + (k * A + mm) * w.vStride, r[mm]);
          if (split)
            storeV(S + (k * A + mm) * VW, r[mm]);
        }
      }
      if (split) {
        // The chunk runs into the next panel: its remaining tiles start that panel's row.
        float *d2 = Vb + (q + 1) * w.panelStride + c * MR;
        for (int64_t p = 0; p < NP; p++)
          storeV(d2 + p * w.vStride, loadV<V>(S + p * VW + n1));
      }
      t += nt;
    }
  }
}

/// Output transform of tiles [b0, b1) of one image, channels [o0, o1): Y[pixel][o] =
/// (A^T M A)[pixel] + bias[o], for the pixels of those tiles inside the image.
template <class Cfg, int TM>
LIBJIT_NOINLINE void winoRowsOutput(const WinoRows<Cfg, TM> &w, const float *bias, int64_t b0,
                                    int64_t b1, int64_t o0, int64_t o1, float *scratch,
                                    int64_t row0) {
  typedef typename VecOf<Cfg::VW>::T V;
  constexpr int64_t VW = Cfg::VW, NP = WinoRows<Cfg, TM>::NP;
  const float *Mb = scratch + w.mOff;
  float *Y = scratch + w.yOff;
  int64_t nO = o1 - o0;
  for (int64_t t = b0; t < b1; t++) {
    int64_t ty = t / w.TW, tx = t % w.TW;
    int64_t rows = minI(TM, w.OH - ty * TM), cols = minI(TM, w.OW - tx * TM);
    float *y0 = Y + ((TM * ty) * w.OW + TM * tx) * w.ldy;
    const float *m = Mb + (row0 + t - b0) * nO;
    for (int64_t o = 0; o < nO; o += VW) {
      V a[NP], y[4][4];
      LIBJIT_UNROLL
      for (int p = 0; p < NP; p++)
        a[p] = loadV<V>(m + p * w.mStride + o);
      RowsTransform<Cfg, TM>::output(a, y);
      // The bias of these channels (a partial last vector through a copy: bias holds O
      // floats). Lanes past o1 only reach Y's padding columns.
      V b = (V){};
      if (bias && o + VW <= nO) {
        b = loadV<V>(bias + o0 + o);
      } else if (bias) {
        LIBJIT_UNROLL
        for (int l = 0; l < VW; l++)
          b[l] = o + l < nO ? bias[o0 + o + l] : 0.0f;
      }
      LIBJIT_UNROLL
      for (int i = 0; i < TM; i++)
        LIBJIT_UNROLL
        for (int j = 0; j < TM; j++)
          if (i < rows && j < cols)
            storeV(y0 + (i * w.OW + j) * w.ldy + o, y[i][j] + b);
    }
  }
}

/// The np GEMMs M[p] (rows x nO, ld nO) = V[p] (A panels over C + 2 rows) x U[p] (B
/// panels): out of line, one copy for both tile sizes. blockedSums (WinoRows::kBlockedSums)
/// sums the channels in blocks of kWinoSumBlock, otherwise whole.
template <class Cfg>
LIBJIT_NOINLINE void winoRowsGemms(int64_t np, bool blockedSums, int64_t rows, int64_t nO,
                                   int64_t C, const float *V, int64_t vStride, const float *U,
                                   int64_t perU, float *M, int64_t mStride, float *scratch) {
  typedef PackedA<Cfg> PA;
  typedef PackedB<Cfg> PB;
  for (int64_t p = 0; p < np; p++) {
    // The transformed tiles are in the cache; F(4x4)'s GEMMs prefetch only the weights
    // (B), F(2x2)'s the tiles' panels too (each as measured the faster).
    PA a{V + p * vStride, C + 2, !blockedSums};
    PB b{U + p * perU, C};
    if (blockedSums)
      gemmRange<Cfg, PA, PB, kWinoSumBlock>(0, rows, 0, nO, C, a, b, M + p * mStride, nO,
                                            kNoEpilogue, scratch);
    else
      gemmRange<Cfg>(0, rows, 0, nO, C, a, b, M + p * mStride, nO, kNoEpilogue, scratch);
  }
}

/// conv2dWinoRows over blocks of w.IB whole images, output channels [o0, o1): each
/// image's tiles from a panel boundary, one GEMM per position over them all, then each
/// image's output transform and emit(n) (its transpose into the output).
template <class Cfg, int TM, class Emit>
LIBJIT_INLINE void winoRowsImageBlocks(const WinoRows<Cfg, TM> &w, const float *in,
                                       const float *Up, int64_t perU, const float *bias,
                                       int64_t o0, int64_t o1, float *s, Emit emit) {
  typedef WinoRows<Cfg, TM> WR;
  const int64_t rowsPer = WR::roundUp(w.TI, Cfg::MR), plane = w.C * w.H * w.W;
  for (int64_t n0 = 0; n0 < w.N; n0 += w.IB) {
    const int64_t g = minI(w.IB, w.N - n0);
    for (int64_t k = 0; k < g; k++)
      winoRowsInput<Cfg, TM>(w, in + (n0 + k) * plane, 0, w.TI, s, k * rowsPer / Cfg::MR);
    winoRowsGemms<Cfg>(WR::NP, WR::kBlockedSums, (g - 1) * rowsPer + w.TI, o1 - o0, w.C,
                       s + w.vOff, w.vStride, Up, perU, s + w.mOff, w.mStride, s);
    for (int64_t k = 0; k < g; k++) {
      winoRowsOutput<Cfg, TM>(w, bias, 0, w.TI, o0, o1, s, k * rowsPer);
      emit(n0 + k);
    }
  }
}

template <class Cfg, int TM>
LIBJIT_INLINE void conv2dWinoRows(float *out, const float *in, const float *U, const float *bias,
                                  const float *add, int64_t N, int64_t C, int64_t H, int64_t W,
                                  int64_t O, int64_t OH, int64_t OW, int64_t PT, int64_t PL,
                                  int64_t act, float lo, float hi, float *scratch, int64_t tid,
                                  int64_t nthreads) {
  typedef WinoRows<Cfg, TM> WR;
  constexpr int64_t NR = Cfg::NR;
  WR w(N, C, H, W, O, OH, OW, PT, PL);
  float *s = scratch + tid * w.total;
  // Threads split the output channels (each transforms every input tile, and reads its
  // share of U) or the rows of tiles (each transforms its tiles and reads all of U): by
  // channels while each gets two B panels, unless the input transforms cost more than U's
  // bytes. Both grow with C NP, the transforms with the tiles, U with O; the transforms
  // weigh about 1/9 as much per tile and position as U per output channel (measured: a
  // 28x28 128->128 F(4x4) layer at 2 threads, 1.3x its 1-thread speed by channels).
  int64_t r0 = 0, r1 = w.TH, o0 = 0, o1 = O;
  if (nthreads > 1) {
    bool byRows = w.TH >= 2 * nthreads && WR::NP * w.TI > 9 * O;
    if (ceilDiv(O, NR) >= 2 * nthreads && !byRows)
      partition(O, NR, tid, nthreads, &o0, &o1);
    else
      partition(w.TH, 1, tid, nthreads, &r0, &r1);
  }
  if (r0 >= r1 || o0 >= o1)
    return;
  int64_t nO = o1 - o0, P = OH * OW, t0 = r0 * w.TW, t1 = r1 * w.TW;
  int64_t len = t1 - t0, blocks = ceilDiv(len, w.Tb);
  int64_t bs = minI(w.Tb, WR::roundUp(ceilDiv(len, blocks), Cfg::MR));
  int64_t perU = packedBFloats<Cfg>(C, O);
  const float *Up = U + (o0 / NR) * C * NR;
  // The pixels of tile rows [r0, r1), pixel-major in Y, into the NCHW output.
  const int64_t p0 = minI(TM * r0 * OW, P), p1 = minI(TM * r1 * OW, P);
  auto emit = [&](int64_t n) {
    transposeOut(out + n * O * P, s + w.yOff, w.ldy, add ? add + n * O * P : nullptr, P, p0, p1,
                 o0, o1, act, lo, hi);
  };
  if (len == w.TI && w.IB > 1) // whole images in a block (WinoRows::IB)
    return winoRowsImageBlocks<Cfg, TM>(w, in, Up, perU, bias, o0, o1, s, emit);
  for (int64_t n = 0; n < N; n++) {
    const float *x = in + n * C * H * W;
    for (int64_t b0 = t0; b0 < t1; b0 += bs) {
      int64_t b1 = minI(b0 + bs, t1);
      winoRowsInput<Cfg, TM>(w, x, b0, b1, s, 0);
      winoRowsGemms<Cfg>(WR::NP, WR::kBlockedSums, b1 - b0, nO, C, s + w.vOff, w.vStride, Up,
                         perU, s + w.mOff, w.mStride, s);
      winoRowsOutput<Cfg, TM>(w, bias, b0, b1, o0, o1, s, 0);
    }
    emit(n);
  }
}

/// GemmAvx512's 14 x 32 register tile at 8 rows (the same B panels, so the same packed
/// weights), for F(2x2) layers of at most kWinoShortTiles tiles per image (7x7 and 8x8
/// images: 16 tiles), which GemmAvx512 computes as a 14-row and a 2-row tile: two 8-row
/// tiles instead, in A panels of 8 tiles (less padding for the input transform too).
struct WinoRowsAvx512Short {
  static constexpr int VW = 16;
  static constexpr int NV = 2;
  static constexpr int MR = kWinoShortMR;
  static constexpr int NR = VW * NV;
  static constexpr int64_t KC = 384;
  static constexpr int64_t MC = MR * 21;
  static constexpr int64_t NC = 32 * 32;
};
template <class Cfg> struct ShortRows { typedef Cfg T; };
template <> struct ShortRows<GemmAvx512> { typedef WinoRowsAvx512Short T; };

/// Whether an F(2x2) layer's GEMMs take ShortRows<Cfg>'s tile (AVX-512 only).
template <class Cfg> LIBJIT_INLINE bool useShortRows(int64_t OH, int64_t OW) {
  return ShortRows<Cfg>::T::MR < Cfg::MR && ceilDiv(OH, 2) * ceilDiv(OW, 2) <= kWinoShortTiles;
}

/// U[p] = (G g G^T)[p / A][p % A] for every (c, o), in double, packed as B panels of the
/// C x O matrix of each position (columns past O zero). The NR filters of one panel row
/// are transformed together, one double per filter in each step, so the arithmetic runs
/// on vectors and each position's NR results are stored as one contiguous row (filter by
/// filter, it was scalar code: a third of a warm compile of resnet50). The operations
/// and their order per filter are as before, so the packed values are the same.
template <class Cfg, int TM>
void packWinoRows(float *dst, const float *wt, int64_t O, int64_t C) {
  typedef RowsTransform<Cfg, TM> RT;
  constexpr int64_t NR = Cfg::NR, A = TM + 2;
  int64_t per = packedBFloats<Cfg>(C, O);
  for (int64_t q = 0; q < ceilDiv(O, NR); q++) {
    const int64_t live = minI(NR, O - q * NR);
    for (int64_t c = 0; c < C; c++) {
      double g[9][NR], gg[A][3][NR];
      for (int64_t j = 0; j < NR; j++) {
        const float *f = wt + ((q * NR + j) * C + c) * 9;
        for (int t = 0; t < 9; t++)
          g[t][j] = j < live ? double(f[t]) : 0.0;
      }
      for (int i = 0; i < A; i++)
        for (int k = 0; k < 3; k++)
          for (int64_t j = 0; j < NR; j++)
            gg[i][k][j] = RT::G[i][0] * g[0 * 3 + k][j] + RT::G[i][1] * g[1 * 3 + k][j] +
                          RT::G[i][2] * g[2 * 3 + k][j];
      float *d = dst + (q * C + c) * NR;
      for (int i = 0; i < A; i++)
        for (int k = 0; k < A; k++) {
          float *row = d + (i * A + k) * per;
          for (int64_t j = 0; j < NR; j++)
            row[j] = float(gg[i][0][j] * RT::G[k][0] + gg[i][1][j] * RT::G[k][1] +
                           gg[i][2][j] * RT::G[k][2]);
          for (int64_t j = live; j < NR; j++) // columns past O: +0, not -0 * G
            row[j] = 0.0f;
        }
    }
  }
}

} // namespace
} // namespace libjit

using namespace libjit;

// The tiles-as-rows kernels: packing and scratch take the output tile size m (2 or 4)
// first; the convolutions are one entry point per m (each its own JIT unit).
#define LIBJIT_WINO_ROWS_ENTRY_POINTS(SUFFIX, CFG)                                                 \
  LIBJIT_EXPORT int64_t libjit_conv2d_wino_rows_scratch_floats_##SUFFIX(                           \
      int64_t m, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW) {  \
    if (m == 2 && useShortRows<CFG>(OH, OW))                                                       \
      return WinoRows<ShortRows<CFG>::T, 2>(N, C, H, W, O, OH, OW, 0, 0).total;                    \
    return m == 2 ? WinoRows<CFG, 2>(N, C, H, W, O, OH, OW, 0, 0).total                            \
                  : WinoRows<CFG, 4>(N, C, H, W, O, OH, OW, 0, 0).total;                           \
  }                                                                                                \
  LIBJIT_EXPORT int64_t libjit_pack_wino_rows_floats_##SUFFIX(int64_t m, int64_t O, int64_t C) {   \
    return (m + 2) * (m + 2) * packedBFloats<CFG>(C, O);                                           \
  }                                                                                                \
  LIBJIT_EXPORT void libjit_pack_wino_rows_f32_##SUFFIX(int64_t m, float *dst, const float *w,     \
                                                        int64_t O, int64_t C) {                    \
    if (m == 2)                                                                                    \
      packWinoRows<CFG, 2>(dst, w, O, C);                                                          \
    else                                                                                           \
      packWinoRows<CFG, 4>(dst, w, O, C);                                                          \
  }                                                                                                \
  LIBJIT_EXPORT void libjit_conv2d_wino_rows2_f32_##SUFFIX(                                        \
      float *out, const float *in, const float *packedW, const float *bias, const float *add,      \
      int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW, int64_t PT,   \
      int64_t PL, int64_t act, float lo, float hi, float *scratch, int64_t tid,                    \
      int64_t nthreads) {                                                                          \
    if (useShortRows<CFG>(OH, OW))                                                                 \
      conv2dWinoRows<ShortRows<CFG>::T, 2>(out, in, packedW, bias, add, N, C, H, W, O, OH, OW, PT, \
                                           PL, act, lo, hi, scratch, tid, nthreads);               \
    else                                                                                           \
      conv2dWinoRows<CFG, 2>(out, in, packedW, bias, add, N, C, H, W, O, OH, OW, PT, PL, act, lo,  \
                             hi, scratch, tid, nthreads);                                          \
  }                                                                                                \
  LIBJIT_EXPORT void libjit_conv2d_wino_rows4_f32_##SUFFIX(                                        \
      float *out, const float *in, const float *packedW, const float *bias, const float *add,      \
      int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW, int64_t PT,   \
      int64_t PL, int64_t act, float lo, float hi, float *scratch, int64_t tid,                    \
      int64_t nthreads) {                                                                          \
    conv2dWinoRows<CFG, 4>(out, in, packedW, bias, add, N, C, H, W, O, OH, OW, PT, PL, act, lo,    \
                           hi, scratch, tid, nthreads);                                            \
  }

LIBJIT_WINO_ROWS_ENTRY_POINTS(avx512, GemmAvx512)
LIBJIT_WINO_ROWS_ENTRY_POINTS(avx2, GemmAvx2)
