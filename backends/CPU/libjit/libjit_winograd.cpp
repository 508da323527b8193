// Winograd convolutions: float32 NCHW, 3x3 kernels, stride 1, dilation 1, one group, any
// pads. Two kernels: F(4x4, 3x3) with the output tiles as GEMM columns (this file), and
// F(2x2, 3x3) or F(4x4, 3x3) with the tiles as GEMM rows (libjit_winograd_rows.cpp).
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
#include "libjit.h"
#include "libjit_gemm_impl.h"
#include "libjit_winograd_impl.h"

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

/// t = B^T d for one column of six values (the 6x6 input transform is this on rows, then
/// on columns).
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
  Epilogue none = {nullptr, nullptr, nullptr, 0, 0, 0.0f, 0.0f};
  for (int64_t b0 = t0; b0 < t1; b0 += bs) {
    int64_t b1 = minI(b0 + bs, t1);
    winoInput<Cfg>(w, in, b0, b1, s);
    // Whole panels (the columns past the block are zero in V and unused in M): a ragged
    // panel would take the micro-kernel's column-at-a-time path.
    int64_t cols = Wino<Cfg>::roundUp(b1 - b0, NR);
    for (int64_t p = 0; p < 36; p++)
      gemmRange<Cfg>(o0, o1, 0, cols, C, PackedA<Cfg>{U + p * perU, C},
                     PackedB<Cfg>{s + w.vOff + p * w.vStride, C + 1}, s + w.mOff + p * w.mStride,
                     w.ldm, none, s);
    winoOutput<Cfg>(w, out, bias, add, b0, b1, o0, o1, lo, hi, gact, ga, gb, s);
  }
}

/// U[p] = (G g G^T)[p / 6][p % 6] for every (o, c), in double, packed as A panels of the
/// O x C matrix of each position (rows past O zero). Panel by panel, so that each of the
/// 36 positions is written sequentially.
template <class Cfg> void packWino(float *dst, const float *wt, int64_t O, int64_t C) {
  const auto &G = WinoG4::G;
  constexpr int64_t MR = Cfg::MR;
  int64_t per = packedAFloats<Cfg>(O, C);
  for (int64_t op = 0; op < ceilDiv(O, MR); op++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t r = 0; r < MR; r++) {
        int64_t o = op * MR + r;
        float *d = dst + op * C * MR + c * MR + r;
        if (o >= O) {
          for (int p = 0; p < 36; p++)
            d[p * per] = 0.0f;
          continue;
        }
        const float *g = wt + (o * C + c) * 9;
        double gg[6][3];
        for (int i = 0; i < 6; i++)
          for (int j = 0; j < 3; j++)
            gg[i][j] = G[i][0] * g[0 * 3 + j] + G[i][1] * g[1 * 3 + j] + G[i][2] * g[2 * 3 + j];
        for (int i = 0; i < 6; i++)
          for (int j = 0; j < 6; j++)
            d[(i * 6 + j) * per] =
                float(gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2]);
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
