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

#include "libjit.h"
#include "libjit_gemm_impl.h"
#include "libjit_vec.h"
#include "libjit_winograd_impl.h"

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

  int64_t N, C, H, W, O, OH, OW, PT, PL;
  int64_t TH, TW, TI;                         ///< tile rows and columns per image, tiles per image
  int64_t Tb;                                 ///< tiles per block
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
    Tb = minI(maxI(Tb / MR * MR, MR), roundUp(TI, MR));
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
                                   int64_t b1, float *scratch) {
  typedef WinoRows<Cfg, TM> WR;
  typedef typename VecOf<Cfg::VW>::T V;
  typedef RowsTransform<Cfg, TM> RT;
  constexpr int64_t VW = Cfg::VW, MR = Cfg::MR, CH = WR::CH, A = WR::A,
                    NP = WR::NP, NVEC = WR::NVEC;
  float *Vb = scratch + w.vOff, *S = scratch + w.sOff, *P = scratch + w.pOff;
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
                                    int64_t b1, int64_t o0, int64_t o1, float *scratch) {
  typedef typename VecOf<Cfg::VW>::T V;
  constexpr int64_t VW = Cfg::VW, NP = WinoRows<Cfg, TM>::NP;
  const float *Mb = scratch + w.mOff;
  float *Y = scratch + w.yOff;
  int64_t nO = o1 - o0;
  for (int64_t t = b0; t < b1; t++) {
    int64_t ty = t / w.TW, tx = t % w.TW;
    int64_t rows = minI(TM, w.OH - ty * TM), cols = minI(TM, w.OW - tx * TM);
    float *y0 = Y + ((TM * ty) * w.OW + TM * tx) * w.ldy;
    const float *m = Mb + (t - b0) * nO;
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
/// panels): out of line, one copy for both tile sizes.
template <class Cfg>
LIBJIT_NOINLINE void winoRowsGemms(int64_t np, int64_t rows, int64_t nO, int64_t C,
                                   const float *V, int64_t vStride, const float *U, int64_t perU,
                                   float *M, int64_t mStride, float *scratch) {
  Epilogue none = {nullptr, nullptr, nullptr, 0, 0, 0.0f, 0.0f};
  for (int64_t p = 0; p < np; p++)
    gemmRange<Cfg>(0, rows, 0, nO, C, PackedA<Cfg>{V + p * vStride, C + 2},
                   PackedB<Cfg>{U + p * perU, C}, M + p * mStride, nO, none, scratch);
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
  for (int64_t n = 0; n < N; n++) {
    const float *x = in + n * C * H * W;
    for (int64_t b0 = t0; b0 < t1; b0 += bs) {
      int64_t b1 = minI(b0 + bs, t1);
      winoRowsInput<Cfg, TM>(w, x, b0, b1, s);
      winoRowsGemms<Cfg>(WR::NP, b1 - b0, nO, C, s + w.vOff, w.vStride, U + (o0 / NR) * C * NR,
                         perU, s + w.mOff, w.mStride, s);
      winoRowsOutput<Cfg, TM>(w, bias, b0, b1, o0, o1, s);
    }
    // The pixels of tile rows [r0, r1), pixel-major in Y, into the NCHW output.
    int64_t p0 = minI(TM * r0 * OW, P), p1 = minI(TM * r1 * OW, P);
    transposeOut(out + n * O * P, s + w.yOff, w.ldy, add ? add + n * O * P : nullptr, P, p0, p1,
                 o0, o1, act, lo, hi);
  }
}

/// U[p] = (G g G^T)[p / A][p % A] for every (c, o), in double, packed as B panels of the
/// C x O matrix of each position (columns past O zero).
template <class Cfg, int TM>
void packWinoRows(float *dst, const float *wt, int64_t O, int64_t C) {
  typedef RowsTransform<Cfg, TM> RT;
  constexpr int64_t NR = Cfg::NR, A = TM + 2;
  int64_t per = packedBFloats<Cfg>(C, O);
  for (int64_t q = 0; q < ceilDiv(O, NR); q++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t j = 0; j < NR; j++) {
        int64_t o = q * NR + j;
        float *d = dst + (q * C + c) * NR + j;
        if (o >= O) {
          for (int p = 0; p < A * A; p++)
            d[p * per] = 0.0f;
          continue;
        }
        const float *g = wt + (o * C + c) * 9;
        double gg[A][3];
        for (int i = 0; i < A; i++)
          for (int k = 0; k < 3; k++)
            gg[i][k] = RT::G[i][0] * g[0 * 3 + k] + RT::G[i][1] * g[1 * 3 + k] +
                       RT::G[i][2] * g[2 * 3 + k];
        for (int i = 0; i < A; i++)
          for (int k = 0; k < A; k++)
            d[(i * A + k) * per] =
                float(gg[i][0] * RT::G[k][0] + gg[i][1] * RT::G[k][1] + gg[i][2] * RT::G[k][2]);
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
    conv2dWinoRows<CFG, 2>(out, in, packedW, bias, add, N, C, H, W, O, OH, OW, PT, PL, act, lo,    \
                           hi, scratch, tid, nthreads);                                            \
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
