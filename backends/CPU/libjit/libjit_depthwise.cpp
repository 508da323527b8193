// Depthwise convolution on NCHW float32 (Group == C == O: one input plane per output
// plane), with the bias and the clamp fused. Work splits over the N*C planes. Square 3x3
// and 5x5 kernels with stride 1 or 2 take one of two vectorised paths:
//  - flat (stride 1, and stride 2 on planes narrower than 16): the zero-padded plane,
//    split into S x S phases, makes every tap a constant offset from the output's index in
//    a plane whose rows are Wq wide, so 16 outputs at a time run across row ends (the
//    Wq - OW extra columns per row are computed and dropped when the rows are copied out);
//  - rows (stride 2 with output rows of 16 or more, and SH != SW): the plane is copied
//    into zero-padded rows split into even and odd columns, so that every tap of a block
//    of 16 outputs is one contiguous load and one FMA.
// Every other shape (kernels of any size, dilations, any strides) takes the any path: the
// flat path's phase split with the taps a runtime table of offsets (one per tap, into the
// S x S phases), 64 outputs (four vectors) per block and the taps as the inner loop.
#include "libjit.h"
#include "libjit_vec.h"

using namespace libjit;

namespace {

/// The sum of a window's K row accumulators (kept apart so that their FMA chains overlap),
/// clamped to [lo, hi] when act.
template <int K> LIBJIT_INLINE F16 sumRows(const F16 *acc, int64_t act, F16 lo, F16 hi) {
  F16 v = acc[0];
  LIBJIT_UNROLL
  for (int kh = 1; kh < K; kh++)
    v += acc[kh];
  return act ? clamp16(v, lo, hi) : v;
}

/// Cells of one row of the row path (one column phase), with slack for the copies.
LIBJIT_INLINE int64_t rowCells(int64_t OW, int64_t K, int64_t S) {
  return (OW + (K - 1) / S + 32 + 15) / 16 * 16;
}

/// Which path a shape takes: 0 any, 1 rows, 2 flat, 3 small. Stride 1 on planes narrower
/// than 16 whose output rows are as wide as the input's runs small (no padded columns to
/// compute, the plane copied as one run); other stride 1 shapes run flat at every size
/// (its padded copy is a plain row copy and it has no per-row overhead); stride 2 runs
/// flat only on narrow planes, since its phase split copies element by element.
LIBJIT_INLINE int dwPath(int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
                         int64_t SW, int64_t DH, int64_t DW) {
  if (KH != KW || (KH != 3 && KH != 5) || DH != 1 || DW != 1 || SW > 2)
    return 0;
  if (SH == 1 && SW == 1 && OW == W && W < 16 && OH * OW >= 16)
    return 3;
  if (SH == SW && (SW == 1 || OW < 16))
    return 2;
  return OW >= 16 ? 1 : 0;
}

/// d[0, n) = s[0, n) in whole vectors, the last one overlapping its predecessor (scalar
/// tails cost more than the row's vectors).
LIBJIT_INLINE void copyRow(float *__restrict d, const float *__restrict s, int64_t n) {
  if (n < 16) {
    for (int64_t i = 0; i < n; i++)
      d[i] = s[i];
    return;
  }
  for (int64_t i0 = 0;; i0 += 16) {
    int64_t i = minI(i0, n - 16);
    st16(d + i, ld16(s + i));
    if (i0 + 16 >= n)
      break;
  }
}

/// y[i][0:OW) = o[i][0:OW) for rows i < OH (pitches OW and Wq >= OW). Rows narrower than
/// 16 are stored as whole vectors in ascending order where the vector stays inside the
/// plane: the lanes past a row land in rows stored after it; the rest row by row.
LIBJIT_INLINE void copyPlaneRows(float *__restrict y, const float *__restrict o, int64_t OH,
                                 int64_t OW, int64_t Wq) {
  int64_t i = 0;
  if (OW < 16)
    for (; i * OW + 16 <= OH * OW; i++)
      st16(y + i * OW, ld16(o + i * Wq));
  for (; i < OH; i++)
    copyRow(y + i * OW, o + i * Wq, OW);
}

/// Copies input row xr [W] into the zero-padded row at padded column PL, split into S
/// column phases of `cells` cells each (padded column q lands in phase q % S at q / S).
/// Only cells below Wq are written, so the padding written once stays zero.
template <int S>
LIBJIT_INLINE void loadRow(float *__restrict dst, const float *__restrict xr, int64_t W, int64_t PL,
                           int64_t Wq, int64_t cells) {
  if (S == 1) {
    copyRow(dst + PL, xr, minI(W, Wq - PL));
    return;
  }
  // x[2m] is padded column 2m + PL, x[2m + 1] is 2m + 1 + PL.
  float *de = dst + (PL % 2) * cells + PL / 2;
  float *dodd = dst + ((PL + 1) % 2) * cells + (PL + 1) / 2;
  int64_t nE = minI((W + 1) / 2, Wq - PL / 2), nO = minI(W / 2, Wq - (PL + 1) / 2);
  int64_t m = 0;
  for (; m + 16 <= nE && m + 16 <= nO; m += 16) {
    F32x v = ld32(xr + 2 * m);
    st16(de + m, evens(v));
    st16(dodd + m, odds(v));
  }
  for (int64_t e = m; e < nE; e++)
    de[e] = xr[2 * e];
  for (int64_t o = m; o < nO; o++)
    dodd[o] = xr[2 * o + 1];
}

/// Padded rows of the row path's plane: every row any output row reads.
LIBJIT_INLINE int64_t rowPlaneRows(int64_t OH, int64_t K, int64_t SH) { return (OH - 1) * SH + K; }

/// One plane on the row path: the plane is first copied into buf as zero-padded rows of S
/// column phases (padded row r, phase f at buf + (r * S + f) * cells; rows outside the
/// image are never written, so they keep the zeros written once per call).
template <int K, int S>
LIBJIT_INLINE void dwRows(float *__restrict y, const float *__restrict x, const float *__restrict f,
                          float b, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t SH,
                          int64_t PT, int64_t PL, int act, float lo, float hi, float *buf) {
  int64_t Wq = OW + (K - 1) / S, cells = rowCells(OW, K, S), pitch = S * cells;
  int64_t rows = rowPlaneRows(OH, K, SH);
  for (int64_t r = maxI(PT, 0); r < minI(rows, H + PT); r++)
    loadRow<S>(buf + r * pitch, x + (r - PT) * W, W, PL, Wq, cells);
  F16 wv[K][K];
  LIBJIT_UNROLL
  for (int kh = 0; kh < K; kh++)
    LIBJIT_UNROLL
  for (int kw = 0; kw < K; kw++)
    wv[kh][kw] = splat16(f[kh * K + kw]);
  F16 bv = splat16(b), lov = splat16(lo), hiv = splat16(hi);
  for (int64_t oh = 0; oh < OH; oh++) {
    const float *rp[K][S];
    LIBJIT_UNROLL
    for (int kh = 0; kh < K; kh++)
      LIBJIT_UNROLL
    for (int ph = 0; ph < S; ph++)
      rp[kh][ph] = buf + (oh * SH + kh) * pitch + ph * cells;
    float *yr = y + oh * OW;
    for (int64_t j0 = 0;; j0 += 16) {
      // The last block overlaps the previous one instead of running past the row.
      int64_t j = minI(j0, OW - 16);
      F16 acc[K];
      LIBJIT_UNROLL
      for (int kh = 0; kh < K; kh++) {
        acc[kh] = kh == 0 ? bv : splat16(0.0f);
        LIBJIT_UNROLL
        for (int kw = 0; kw < K; kw++)
          acc[kh] += wv[kh][kw] * ld16(rp[kh][kw % S] + j + kw / S);
      }
      st16(yr + j, sumRows<K>(acc, act, lov, hiv));
      if (j0 + 16 >= OW)
        break;
    }
  }
}

/// Geometry of the flat path: S x S phases of Hq x Wq cells (plus 32 of slack each, for
/// the loads of the last output block), then OH x Wq outputs (rounded up to a block).
struct FlatGeom {
  int64_t Hq, Wq, phase, outCells;
  FlatGeom(int64_t OH, int64_t OW, int64_t K, int64_t S) {
    Hq = OH + (K - 1) / S;
    Wq = OW + (K - 1) / S;
    phase = (Hq * Wq + 32 + 15) / 16 * 16;
    outCells = (OH * Wq + 15) / 16 * 16;
  }
  int64_t floats(int64_t S) const { return S * S * phase + outCells; }
};

/// One plane on the flat path; buf's padding cells are zero (written once per call).
template <int K, int S>
LIBJIT_INLINE void dwFlat(float *__restrict y, const float *__restrict x, const float *__restrict f,
                          float b, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t PT,
                          int64_t PL, int act, float lo, float hi, float *buf) {
  FlatGeom g(OH, OW, K, S);
  // Phase (a, c) cell (i, j) is padded row i * S + a, padded column j * S + c.
  for (int a = 0; a < S; a++)
    for (int64_t i = 0; i < g.Hq; i++) {
      int64_t ih = i * S + a - PT;
      if (ih < 0 || ih >= H)
        continue;
      const float *xr = x + ih * W;
      for (int c = 0; c < S; c++) {
        float *d = buf + (a * S + c) * g.phase + i * g.Wq;
        // Columns j with 0 <= j * S + c - PL < W.
        int64_t off = c - PL;
        int64_t jLo = off >= 0 ? 0 : ceilDiv(-off, S);
        int64_t jHi = minI(g.Wq, W - off <= 0 ? 0 : ceilDiv(W - off, S));
        if (S == 1) {
          copyRow(d + jLo, xr + jLo + off, jHi - jLo);
          continue;
        }
        for (int64_t j = jLo; j < jHi; j++)
          d[j] = xr[j * S + off];
      }
    }
  float *o = buf + S * S * g.phase;
  F16 bv = splat16(b), lov = splat16(lo), hiv = splat16(hi);
  F16 wv[K][K];
  LIBJIT_UNROLL
  for (int kh = 0; kh < K; kh++)
    LIBJIT_UNROLL
  for (int kw = 0; kw < K; kw++)
    wv[kh][kw] = splat16(f[kh * K + kw]);
  for (int64_t i0 = 0; i0 < OH * g.Wq; i0 += 16) {
    F16 acc[K];
    LIBJIT_UNROLL
    for (int kh = 0; kh < K; kh++) {
      acc[kh] = kh == 0 ? bv : splat16(0.0f);
      LIBJIT_UNROLL
      for (int kw = 0; kw < K; kw++)
        acc[kh] += wv[kh][kw] *
                   ld16(buf + ((kh % S) * S + kw % S) * g.phase + i0 + (kh / S) * g.Wq + kw / S);
    }
    st16(o + i0, sumRows<K>(acc, act, lov, hiv));
  }
  copyPlaneRows(y, o, OH, OW, g.Wq);
}

/// Geometry of the small path: the plane as one run of H W cells after `front` zero cells
/// (the most rows and columns of top and left padding a shape with OW == W can have) and
/// before enough zero cells for the bottom rows; then per kernel column kw one mask word
/// per output cell, all ones where the cell's column ow + kw - PL is inside the image.
struct SmallGeom {
  int64_t front, planeFloats, cells;
  SmallGeom(int64_t H, int64_t W, int64_t OH, int64_t K) {
    front = ((maxI(OH - H, 0) + K - 1) * W + K - 1 + 15) / 16 * 16;
    planeFloats = front + ((maxI(OH, H) + K) * W + K + 16 + 15) / 16 * 16;
    cells = OH * W;
  }
  int64_t floats(int64_t K) const { return planeFloats + (K * cells + 15) / 16 * 16; }
};

/// The small path's masks (once per call): mask[kw][p] = ~0 where 0 <= p % W + kw - PL < W.
LIBJIT_INLINE void smallMasks(uint32_t *mask, const SmallGeom &g, int64_t W, int64_t K,
                              int64_t PL) {
  for (int64_t kw = 0; kw < K; kw++)
    for (int64_t p = 0; p < g.cells; p++) {
      int64_t c = p % W + kw - PL;
      mask[kw * g.cells + p] = c >= 0 && c < W ? ~0u : 0u;
    }
}

typedef uint32_t U16 __attribute__((vector_size(64)));

/// One plane on the small path (stride 1, undilated, OW == W): output cell p = oh W + ow
/// reads tap (kh, kw) at plane cell p + (kh - PT) W + kw - PL, so 16 outputs at a time
/// run across row ends with no padded columns. Rows above and below the image read the
/// zero cells around the plane; a column outside it reads a neighbouring row's cell, so
/// each kernel column's sum over kh is masked to zero there before it joins the output.
/// buf's zero cells and masks are written once per call.
template <int K>
LIBJIT_INLINE void dwSmall(float *__restrict y, const float *__restrict x, const float *__restrict f,
                           float b, const SmallGeom &g, int64_t H, int64_t W, int64_t PT,
                           int64_t PL, int act, float lo, float hi, float *buf) {
  copyRow(buf + g.front, x, H * W);
  const float *base = buf + g.front - PT * W - PL;
  const uint32_t *mask = reinterpret_cast<const uint32_t *>(buf + g.planeFloats);
  F16 wv[K][K];
  LIBJIT_UNROLL
  for (int kh = 0; kh < K; kh++)
    LIBJIT_UNROLL
  for (int kw = 0; kw < K; kw++)
    wv[kh][kw] = splat16(f[kh * K + kw]);
  F16 bv = splat16(b), lov = splat16(lo), hiv = splat16(hi);
  const int64_t cells = g.cells;
  for (int64_t i0 = 0;; i0 += 16) {
    // The last block overlaps the previous one instead of running past the plane.
    int64_t i = minI(i0, cells - 16);
    F16 col[K];
    LIBJIT_UNROLL
    for (int kw = 0; kw < K; kw++) {
      col[kw] = wv[0][kw] * ld16(base + i + kw);
      LIBJIT_UNROLL
      for (int kh = 1; kh < K; kh++)
        col[kw] += wv[kh][kw] * ld16(base + i + kh * W + kw);
    }
    F16 out = bv;
    LIBJIT_UNROLL
    for (int kw = 0; kw < K; kw++) {
      U16 m;
      __builtin_memcpy(&m, mask + kw * cells + i, sizeof(m));
      out += (F16)((U16)col[kw] & m);
    }
    st16(y + i, act ? clamp16(out, lov, hiv) : out);
    if (i0 + 16 >= cells)
      break;
  }
}

/// The small path over planes [p0, p1).
template <int K>
LIBJIT_INLINE void dwSmallPlanes(float *out, const float *in, const float *filter,
                                 const float *bias, int64_t C, int64_t H, int64_t W, int64_t OH,
                                 int64_t PT, int64_t PL, int act, float lo, float hi, float *buf,
                                 int64_t p0, int64_t p1, int gact) {
  SmallGeom g(H, W, OH, K);
  for (int64_t i = 0; i < g.planeFloats; i++)
    buf[i] = 0.0f;
  smallMasks(reinterpret_cast<uint32_t *>(buf + g.planeFloats), g, W, K, PL);
  for (int64_t p = p0; p < p1; p++) {
    int64_t c = p % C;
    dwSmall<K>(out + p * OH * W, in + p * H * W, filter + c * K * K, bias ? bias[c] : 0.0f, g, H,
               W, PT, PL, act, lo, hi, buf);
    if (gact)
      activateContiguous(out + p * OH * W, OH * W, gact, lo, hi);
  }
}

/// Geometry of the any path: SH x SW phases of Hq x Wq cells, each followed by slack for
/// the loads of the last output blocks (a tap reads up to Wq cells past the phase's last
/// row), then OH x Wq outputs rounded up to a block of four vectors; the tap table (one
/// int64 per tap) comes first.
struct AnyGeom {
  int64_t Hq, Wq, phase, outCells, tapFloats, taps;
  AnyGeom(int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t DH,
          int64_t DW) {
    Hq = OH + ((KH - 1) * DH) / SH;
    Wq = OW + ((KW - 1) * DW) / SW;
    phase = (Hq * Wq + Wq + 64 + 15) / 16 * 16;
    outCells = (OH * Wq + 63) / 64 * 64;
    taps = KH * KW;
    tapFloats = (2 * taps + 15) / 16 * 16;
  }
  int64_t floats(int64_t SH, int64_t SW) const {
    return tapFloats + SH * SW * phase + outCells;
  }
};

/// Copies input row xr [W] into row i of the phases of column phase 0..SW-1 whose cells
/// start at d (phase c at d + c * phaseCells): padded column q = j * SW + c lands at cell
/// j of phase c when j < Wq. Padding cells are never written.
LIBJIT_INLINE void anyLoadRow(float *__restrict d, const float *__restrict xr, int64_t W,
                              int64_t PL, int64_t SW, int64_t Wq, int64_t phaseCells) {
  if (SW == 1) {
    int64_t jLo = maxI(PL, 0), jHi = minI(Wq, W + PL);
    if (jHi > jLo)
      copyRow(d + jLo, xr + jLo - PL, jHi - jLo);
    return;
  }
  if (SW == 2 && PL >= 0) {
    loadRow<2>(d, xr, W, PL, Wq, phaseCells);
    return;
  }
  for (int64_t c = 0; c < SW; c++) {
    float *dc = d + c * phaseCells;
    // Columns j with 0 <= j * SW + c - PL < W.
    int64_t off = c - PL;
    int64_t jLo = off >= 0 ? 0 : ceilDiv(-off, SW);
    int64_t jHi = minI(Wq, W - off <= 0 ? 0 : ceilDiv(W - off, SW));
    for (int64_t j = jLo; j < jHi; j++)
      dc[j] = xr[j * SW + off];
  }
}

/// The any path's tap table: tap (kh, kw) reads phase (kh DH % SH, kw DW % SW) at
/// (kh DH / SH) rows and (kw DW / SW) cells from the output's cell.
LIBJIT_INLINE void anyTaps(int64_t *toff, const AnyGeom &g, int64_t KH, int64_t KW, int64_t SH,
                           int64_t SW, int64_t DH, int64_t DW) {
  for (int64_t kh = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw++) {
      int64_t r = kh * DH, q = kw * DW;
      toff[kh * KW + kw] = ((r % SH) * SW + q % SW) * g.phase + (r / SH) * g.Wq + q / SW;
    }
}

/// One plane on the any path; buf's padding cells are zero and its tap table filled
/// (once per call).
LIBJIT_INLINE void dwAny(float *__restrict y, const float *__restrict x, const float *__restrict f,
                         float b, const AnyGeom &g, int64_t H, int64_t W, int64_t OH, int64_t OW,
                         int64_t SH, int64_t SW, int64_t PT, int64_t PL, int act, float lo,
                         float hi, float *buf) {
  const int64_t *toff = reinterpret_cast<const int64_t *>(buf);
  float *planes = buf + g.tapFloats;
  // Phase (a, c) cell (i, j) is padded row i * SH + a, padded column j * SW + c.
  for (int64_t a = 0; a < SH; a++)
    for (int64_t i = 0; i < g.Hq; i++) {
      int64_t ih = i * SH + a - PT;
      if (ih < 0 || ih >= H)
        continue;
      anyLoadRow(planes + a * SW * g.phase + i * g.Wq, x + ih * W, W, PL, SW, g.Wq, g.phase);
    }
  float *o = planes + SH * SW * g.phase;
  F16 bv = splat16(b), lov = splat16(lo), hiv = splat16(hi);
  const int64_t T = g.taps, cells = OH * g.Wq;
  int64_t i0 = 0;
  for (; i0 + 64 <= g.outCells && i0 < cells; i0 += 64) {
    F16 a0 = bv, a1 = bv, a2 = bv, a3 = bv;
    const float *p0 = planes + i0;
    for (int64_t t = 0; t < T; t++) {
      F16 w = splat16(f[t]);
      const float *p = p0 + toff[t];
      a0 += w * ld16(p);
      a1 += w * ld16(p + 16);
      a2 += w * ld16(p + 32);
      a3 += w * ld16(p + 48);
    }
    if (act) {
      a0 = clamp16(a0, lov, hiv), a1 = clamp16(a1, lov, hiv);
      a2 = clamp16(a2, lov, hiv), a3 = clamp16(a3, lov, hiv);
    }
    st16(o + i0, a0);
    st16(o + i0 + 16, a1);
    st16(o + i0 + 32, a2);
    st16(o + i0 + 48, a3);
  }
  copyPlaneRows(y, o, OH, OW, g.Wq);
}

/// The any path over planes [p0, p1).
LIBJIT_INLINE void dwAnyPlanes(float *out, const float *in, const float *filter,
                               const float *bias, int64_t C, int64_t H, int64_t W, int64_t OH,
                               int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                               int64_t PT, int64_t PL, int64_t DH, int64_t DW, int act, float lo,
                               float hi, float *buf, int64_t p0, int64_t p1) {
  AnyGeom g(OH, OW, KH, KW, SH, SW, DH, DW);
  int64_t n = g.floats(SH, SW);
  for (int64_t i = 0; i < n; i++)
    buf[i] = 0.0f;
  anyTaps(reinterpret_cast<int64_t *>(buf), g, KH, KW, SH, SW, DH, DW);
  for (int64_t p = p0; p < p1; p++) {
    int64_t c = p % C;
    dwAny(out + p * OH * OW, in + p * H * W, filter + c * KH * KW, bias ? bias[c] : 0.0f, g, H, W,
          OH, OW, SH, SW, PT, PL, act, lo, hi, buf);
  }
}

template <int K, int S>
LIBJIT_INLINE void dwPlanes(float *out, const float *in, const float *filter, const float *bias,
                            int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t SH,
                            int64_t PT, int64_t PL, int act, float lo, float hi, float *buf,
                            int64_t p0, int64_t p1, bool rows, int gact) {
  // Padding cells are never written by the per-plane copies: zero them once.
  int64_t n =
      rows ? rowPlaneRows(OH, K, SH) * S * rowCells(OW, K, S) : FlatGeom(OH, OW, K, S).floats(S);
  for (int64_t i = 0; i < n; i++)
    buf[i] = 0.0f;
  for (int64_t p = p0; p < p1; p++) {
    int64_t c = p % C;
    float b = bias ? bias[c] : 0.0f;
    if (rows)
      dwRows<K, S>(out + p * OH * OW, in + p * H * W, filter + c * K * K, b, H, W, OH, OW, SH, PT,
                   PL, act, lo, hi, buf);
    else
      dwFlat<K, S>(out + p * OH * OW, in + p * H * W, filter + c * K * K, b, H, W, OH, OW, PT, PL,
                   act, lo, hi, buf);
    // Another activation than the clamp (libjit_act.h) on the plane just written.
    if (gact)
      activateContiguous(out + p * OH * OW, OH * OW, gact, lo, hi);
  }
}

} // namespace

LIBJIT_EXPORT int64_t libjit_conv2d_dw_scratch_floats(int64_t H, int64_t W, int64_t OH, int64_t OW,
                                                      int64_t KH, int64_t KW, int64_t SH,
                                                      int64_t SW, int64_t DH, int64_t DW) {
  int64_t n;
  switch (dwPath(W, OH, OW, KH, KW, SH, SW, DH, DW)) {
  case 3:
    // Or the flat path's, where the pads do not fit the small path (see below).
    n = maxI(SmallGeom(H, W, OH, KH).floats(KH), FlatGeom(OH, OW, KH, SH).floats(SH));
    break;
  case 1:
    n = rowPlaneRows(OH, KH, SH) * SW * rowCells(OW, KW, SW);
    break;
  case 2:
    n = FlatGeom(OH, OW, KH, SH).floats(SH);
    break;
  default:
    n = AnyGeom(OH, OW, KH, KW, SH, SW, DH, DW).floats(SH, SW);
  }
  return (n + 15) / 16 * 16;
}

LIBJIT_EXPORT void libjit_conv2d_dw_f32(float *out, const float *in, const float *filter,
                                        const float *bias, int64_t N, int64_t C, int64_t H,
                                        int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
                                        int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH,
                                        int64_t DW, int64_t act, float lo, float hi, float *scratch,
                                        int64_t tid, int64_t nthreads) {
  int64_t p0, p1;
  partition(N * C, 1, tid, nthreads, &p0, &p1);
  if (p0 >= p1)
    return;
  float *buf =
      scratch + tid * libjit_conv2d_dw_scratch_floats(H, W, OH, OW, KH, KW, SH, SW, DH, DW);
  int path = dwPath(W, OH, OW, KH, KW, SH, SW, DH, DW);
  // A clamp in the kernels' registers; another activation (gact) on each plane as it is
  // finished, while it is in the cache.
  int a = act == ActClamp, gact = act > ActClamp ? int(act) : 0;
  // The small path's zero cells cover pads of 0 <= PL < KW, 0 <= PT <= OH - H + KH - 1
  // (every shape with nonnegative pads); others run flat.
  if (path == 3 && PL >= 0 && PL < KW && PT >= 0 && PT <= maxI(OH - H, 0) + KH - 1) {
    if (KH == 3)
      dwSmallPlanes<3>(out, in, filter, bias, C, H, W, OH, PT, PL, a, lo, hi, buf, p0, p1, gact);
    else
      dwSmallPlanes<5>(out, in, filter, bias, C, H, W, OH, PT, PL, a, lo, hi, buf, p0, p1, gact);
    return;
  }
  if (path == 3)
    path = 2;
  if (path != 0) {
    bool rows = path == 1;
    if (KH == 3 && SW == 1)
      dwPlanes<3, 1>(out, in, filter, bias, C, H, W, OH, OW, SH, PT, PL, a, lo, hi, buf, p0, p1,
                     rows, gact);
    else if (KH == 3)
      dwPlanes<3, 2>(out, in, filter, bias, C, H, W, OH, OW, SH, PT, PL, a, lo, hi, buf, p0, p1,
                     rows, gact);
    else if (SW == 1)
      dwPlanes<5, 1>(out, in, filter, bias, C, H, W, OH, OW, SH, PT, PL, a, lo, hi, buf, p0, p1,
                     rows, gact);
    else
      dwPlanes<5, 2>(out, in, filter, bias, C, H, W, OH, OW, SH, PT, PL, a, lo, hi, buf, p0, p1,
                     rows, gact);
    return;
  }
  dwAnyPlanes(out, in, filter, bias, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, a, lo, hi,
              buf, p0, p1);
  if (gact) // on this thread's planes, just written
    for (int64_t p = p0; p < p1; p++)
      activateContiguous(out + p * OH * OW, OH * OW, gact, lo, hi);
}

// ---------------------------------------------------------------------------------------
// Grouped convolution (1 < Group < C, Cg = C / Group input and Og = O / Group output
// channels per group): the groups are a batch of small direct convolutions over the any
// path's padded phase planes. Per group, the Cg planes are copied once; a register tile of
// OT output channels x two vectors of output cells accumulates, for every input channel and
// tap, one broadcast weight times the tap's two vectors. Weights come packed at compile
// time as [G][Cg][KH KW][Og] (libjit_pack_grouped_f32), so a tile's OT weights of one
// (channel, tap) are adjacent. Results go to an [Og][cells] buffer, and from there to the
// output rows with the residual add and the clamp.

namespace {

/// Per-thread scratch of the grouped kernel: the tap table, Cg channels of phase planes,
/// then Og rows of output cells.
struct GroupedGeom {
  AnyGeom g;
  int64_t chFloats, outFloats;
  GroupedGeom(int64_t Cg, int64_t Og, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
              int64_t SW, int64_t DH, int64_t DW)
      : g(OH, OW, KH, KW, SH, SW, DH, DW) {
    chFloats = SH * SW * g.phase;
    outFloats = Og * g.outCells;
    (void)Cg;
  }
  int64_t floats(int64_t Cg) const { return g.tapFloats + Cg * chFloats + outFloats; }
};

/// One tile of OT output channels over cells [0, cells) in blocks of two VW-float vectors:
/// o[j][i] = bias[j] + sum over channels ci and taps t of w[ci][t][j] x[ci][i + toff[t]].
template <int VW, int OT>
LIBJIT_INLINE void groupedTile(float *__restrict o, int64_t oPitch,
                               const float *__restrict planes, int64_t chFloats,
                               const int64_t *__restrict toff, int64_t T, int64_t Cg,
                               const float *__restrict w, int64_t Og,
                               const float *__restrict bias, int64_t cells) {
  typedef typename VecOf<VW>::T V;
  for (int64_t i0 = 0; i0 < cells; i0 += 2 * VW) {
    V acc[OT][2];
    LIBJIT_UNROLL
    for (int j = 0; j < OT; j++)
      acc[j][0] = acc[j][1] = splatV<V>(bias ? bias[j] : 0.0f);
    for (int64_t ci = 0; ci < Cg; ci++) {
      const float *pc = planes + ci * chFloats + i0;
      const float *wc = w + ci * T * Og;
      for (int64_t t = 0; t < T; t++) {
        const float *p = pc + toff[t];
        V x0 = loadV<V>(p), x1 = loadV<V>(p + VW);
        const float *wt = wc + t * Og;
        LIBJIT_UNROLL
        for (int j = 0; j < OT; j++) {
          V wj = splatV<V>(wt[j]);
          acc[j][0] += wj * x0;
          acc[j][1] += wj * x1;
        }
      }
    }
    LIBJIT_UNROLL
    for (int j = 0; j < OT; j++) {
      storeV<V>(o + j * oPitch + i0, acc[j][0]);
      storeV<V>(o + j * oPitch + i0 + VW, acc[j][1]);
    }
  }
}

/// Output channels [0, Og) of one group in tiles of MaxOT, then 4, 2, 1.
template <int VW, int MaxOT>
LIBJIT_INLINE void groupedChannels(float *o, int64_t oPitch, const float *planes,
                                   int64_t chFloats, const int64_t *toff, int64_t T, int64_t Cg,
                                   const float *w, int64_t Og, const float *bias, int64_t cells) {
  int64_t j = 0;
  for (; j + MaxOT <= Og; j += MaxOT)
    groupedTile<VW, MaxOT>(o + j * oPitch, oPitch, planes, chFloats, toff, T, Cg, w + j, Og,
                           bias ? bias + j : nullptr, cells);
  if (MaxOT > 4 && j + 4 <= Og) {
    groupedTile<VW, 4>(o + j * oPitch, oPitch, planes, chFloats, toff, T, Cg, w + j, Og,
                       bias ? bias + j : nullptr, cells);
    j += 4;
  }
  if (j + 2 <= Og) {
    groupedTile<VW, 2>(o + j * oPitch, oPitch, planes, chFloats, toff, T, Cg, w + j, Og,
                       bias ? bias + j : nullptr, cells);
    j += 2;
  }
  if (j < Og)
    groupedTile<VW, 1>(o + j * oPitch, oPitch, planes, chFloats, toff, T, Cg, w + j, Og,
                       bias ? bias + j : nullptr, cells);
}

// Grouped convolution on small planes with 16 output channels per group (regnet_x's
// group width; resnext50's 14x14 stage), or 8 (regnet_y's; planes of 32 pixels or more):
// stride 1, undilated, output rows as wide as the
// input's, planes narrower than 16 (7x7, 14x14). There the cells-as-lanes tile above
// computes the padded columns too (63 cells in 64 lanes for 49 outputs at 7x7); here the
// 16 output channels are the vector lanes and the pixels the rows of the register tile, so
// every lane is an output. Per input channel ci and kernel column kw, a plane holds the
// input shifted by kw - PL with the columns that leave the image zeroed (rows outside it
// are zero cells before and after), so tap (kh, kw) of pixel p is that plane's cell
// p + (kh - PT) W: R consecutive pixels read R consecutive cells. The tile's rows are
// stored as [P][Og], transposed in 16 x 16 blocks (of 16 pixels, or of 32 pixels as pairs
// when Og = 8) into the output planes with the residual add and the clamp.

/// Geometry of the small grouped path for Cg channels and KW kernel columns: KW planes per
/// channel (front zero cells for KH - 1 rows of top padding and slack, the plane, zero
/// cells for the bottom rows), the [Cg][KH][KW] tap offsets, then the [P][16] results.
struct GroupedSmallGeom {
  int64_t front, planeFloats, P, offFloats;
  GroupedSmallGeom(int64_t OH, int64_t W, int64_t KH, int64_t KW, int64_t Cg) {
    front = ((KH - 1) * W + KW + 15) / 16 * 16;
    planeFloats = front + ((OH + KH) * W + 16 + 15) / 16 * 16;
    P = OH * W;
    offFloats = (Cg * KH * KW + 15) / 16 * 16;
  }
  int64_t floats(int64_t Cg, int64_t KW) const {
    return Cg * KW * planeFloats + offFloats + (P + 16) * 16;
  }
};

/// Whether a grouped layer may take the small path (the kernel also needs 0 <= PL < KW,
/// 0 <= PT < KH and no more input rows than the output rows read).
LIBJIT_INLINE bool groupedSmallShape(int64_t Og, int64_t OH, int64_t OW, int64_t W, int64_t SH,
                                     int64_t SW, int64_t DH, int64_t DW) {
  return (Og == 16 || (Og == 8 && OH * OW >= 32)) && SH == 1 && SW == 1 && DH == 1 && DW == 1 &&
         OW == W && W < 16 && OH * OW >= 16;
}

/// Pixels [p0, p0 + R) of one group of OG = VW NV output channels: acc[r][v] = bias + sum
/// over the K = Cg KH KW taps of plane cell (off[k] + p0 + r) x weights w[k][v VW, (v + 1)
/// VW), stored at res[p][OG].
template <int VW, int NV, int R>
LIBJIT_INLINE void groupedSmallTile(float *__restrict res, const float *__restrict planes,
                                    const int32_t *__restrict off, int64_t K,
                                    const float *__restrict w, const float *__restrict bias,
                                    int64_t p0) {
  typedef typename VecOf<VW>::T V;
  V acc[R][NV];
  LIBJIT_UNROLL
  for (int v = 0; v < NV; v++) {
    V b = bias ? loadV<V>(bias + v * VW) : splatV<V>(0.0f);
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++)
      acc[r][v] = b;
  }
  const float *base = planes + p0;
  for (int64_t k = 0; k < K; k++) {
    const float *x = base + off[k];
    V wv[NV];
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      wv[v] = loadV<V>(w + k * (VW * NV) + v * VW);
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++) {
      V xr = splatV<V>(x[r]);
      LIBJIT_UNROLL
      for (int v = 0; v < NV; v++)
        acc[r][v] += xr * wv[v];
    }
  }
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      storeV<V>(res + (p0 + r) * (VW * NV) + v * VW, acc[r][v]);
}

/// All pixels of one group in tiles of R, the last one overlapping its predecessor.
template <int VW, int NV, int R>
LIBJIT_INLINE void groupedSmallPixels(float *res, const float *planes, const int32_t *off,
                                      int64_t K, const float *w, const float *bias, int64_t P) {
  for (int64_t q = 0;; q += R) {
    int64_t p0 = minI(q, P - R);
    groupedSmallTile<VW, NV, R>(res, planes, off, K, w, bias, p0);
    if (q + R >= P)
      break;
  }
}

/// The small path over (image, group) pairs [u0, u1); returns false (nothing done) where
/// the pads do not fit it.
template <int VW>
LIBJIT_INLINE bool conv2dGroupedSmall(float *out, const float *in, const float *packedW,
                                      const float *bias, const float *add, int64_t C, int64_t H,
                                      int64_t W, int64_t O, int64_t OH, int64_t KH, int64_t KW,
                                      int64_t PT, int64_t PL, int64_t G, int64_t act, float lo,
                                      float hi, float *buf, int64_t u0, int64_t u1) {
  const int64_t Cg = C / G, Og = O / G, T = KH * KW, K = Cg * T;
  // Input rows H <= OH + KH - 1 - PT: the bottom pad is not negative.
  if (PL < 0 || PL >= KW || PT < 0 || PT >= KH || H > OH + KH - 1 - PT)
    return false;
  GroupedSmallGeom g(OH, W, KH, KW, Cg);
  const int64_t P = g.P, HW = H * W;
  float *planes = buf;
  int32_t *off = reinterpret_cast<int32_t *>(planes + Cg * KW * g.planeFloats);
  float *res = planes + Cg * KW * g.planeFloats + g.offFloats;
  for (int64_t i = 0; i < Cg * KW * g.planeFloats; i++)
    planes[i] = 0.0f;
  for (int64_t ci = 0; ci < Cg; ci++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++)
        off[(ci * KH + kh) * KW + kw] =
            int32_t((ci * KW + kw) * g.planeFloats + g.front + (kh - PT) * W);
  F16 lov = splat16(lo), hiv = splat16(hi);
  for (int64_t u = u0; u < u1; u++) {
    int64_t n = u / G, grp = u % G;
    // The planes: cell front + p = x[p + kw - PL] where that column is inside the row.
    for (int64_t ci = 0; ci < Cg; ci++) {
      const float *x = in + (n * C + grp * Cg + ci) * HW;
      for (int64_t kw = 0; kw < KW; kw++) {
        float *d = planes + (ci * KW + kw) * g.planeFloats + g.front;
        int64_t sh = kw - PL; // d[p] = x[p + sh]
        int64_t pLo = maxI(0, -sh), pHi = minI(HW, HW - sh);
        copyRow(d + pLo, x + pLo + sh, pHi - pLo);
        // Cells a previous call left outside [pLo, pHi) are zero: that range is the same
        // for every plane of this kw. Columns that leave the row read the neighbour row.
        if (sh < 0)
          for (int64_t r = 0; r < H; r++)
            for (int64_t c = 0; c < -sh; c++)
              d[r * W + c] = 0.0f;
        else
          for (int64_t r = 0; r < H; r++)
            for (int64_t c = W - sh; c < W; c++)
              d[r * W + c] = 0.0f;
      }
    }
    const float *w = packedW + grp * K * Og;
    const float *b = bias ? bias + grp * Og : nullptr;
    // 8 output channels: one 8-float vector per pixel on either instruction set.
    if (Og == 8) {
      if (VW == 16 && P % 14 == 0)
        groupedSmallPixels<8, 1, 14>(res, planes, off, K, w, b, P);
      else
        groupedSmallPixels<8, 1, 7>(res, planes, off, K, w, b, P);
    } else if (VW == 16) {
      if (P % 14 == 0)
        groupedSmallPixels<16, 1, 14>(res, planes, off, K, w, b, P);
      else
        groupedSmallPixels<16, 1, 7>(res, planes, off, K, w, b, P);
    } else {
      groupedSmallPixels<VW, 16 / VW, 6>(res, planes, off, K, w, b, P);
    }
    float *y = out + (n * O + grp * Og) * P;
    const float *ad = add ? add + (n * O + grp * Og) * P : nullptr;
    if (Og == 8) {
      // [P][8] -> the 8 output planes, 32 pixels at a time (the last block overlapping):
      // as 16 rows of two pixels, transposed, row j < 8 holds channel j of the even
      // pixels and row 8 + j of the odd ones, interleaved back into pixel order.
      for (int64_t q = 0;; q += 32) {
        int64_t p0 = minI(q, P - 32);
        F16 v[16];
        for (int i = 0; i < 16; i++)
          v[i] = ld16(res + (p0 + 2 * i) * 8);
        transpose16(v);
        for (int j = 0; j < 8; j++) {
          F16 e = v[j], o = v[8 + j];
          F16 z0 = __builtin_shufflevector(e, o, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22,
                                           7, 23);
          F16 z1 = __builtin_shufflevector(e, o, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14,
                                           30, 15, 31);
          if (ad) {
            z0 += ld16(ad + j * P + p0);
            z1 += ld16(ad + j * P + p0 + 16);
          }
          if (act == ActClamp) {
            z0 = clamp16(z0, lov, hiv);
            z1 = clamp16(z1, lov, hiv);
          }
          st16(y + j * P + p0, z0);
          st16(y + j * P + p0 + 16, z1);
        }
        if (q + 32 >= P)
          break;
      }
      if (act > ActClamp)
        activateContiguous(y, Og * P, int(act), lo, hi);
      continue;
    }
    // [P][16] -> the 16 output planes, 16 pixels at a time (the last block overlapping).
    for (int64_t q = 0;; q += 16) {
      int64_t p0 = minI(q, P - 16);
      F16 v[16];
      for (int i = 0; i < 16; i++)
        v[i] = ld16(res + (p0 + i) * 16);
      transpose16(v);
      for (int j = 0; j < 16; j++) {
        F16 z = v[j];
        if (ad)
          z += ld16(ad + j * P + p0);
        if (act == ActClamp)
          z = clamp16(z, lov, hiv);
        st16(y + j * P + p0, z);
      }
      if (q + 16 >= P)
        break;
    }
    if (act > ActClamp)
      activateContiguous(y, Og * P, int(act), lo, hi);
  }
  return true;
}

template <int VW, int MaxOT>
LIBJIT_INLINE void conv2dGrouped(float *out, const float *in, const float *packedW,
                                 const float *bias, const float *add, int64_t N, int64_t C,
                                 int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW,
                                 int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                 int64_t PL, int64_t DH, int64_t DW, int64_t G, int64_t act,
                                 float lo, float hi, float *scratch, int64_t tid,
                                 int64_t nthreads) {
  const int64_t Cg = C / G, Og = O / G;
  GroupedGeom gg(Cg, Og, OH, OW, KH, KW, SH, SW, DH, DW);
  const AnyGeom &g = gg.g;
  // Work units: (image, group) pairs, each split into R ranges of output rows when there
  // are too few pairs to share between the threads.
  int64_t pairs = N * G, R = 1;
  if (pairs < 4 * nthreads)
    R = minI(OH, ceilDiv(4 * nthreads, pairs));
  int64_t u0, u1;
  partition(pairs * R, 1, tid, nthreads, &u0, &u1);
  if (u0 >= u1)
    return;
  float *buf = scratch + tid * libjit_conv2d_grouped_scratch_floats(Cg, Og, OH, OW, KH, KW, SH,
                                                                    SW, DH, DW);
  if (R == 1 && groupedSmallShape(Og, OH, OW, W, SH, SW, DH, DW) &&
      conv2dGroupedSmall<VW>(out, in, packedW, bias, add, C, H, W, O, OH, KH, KW, PT, PL, G, act,
                             lo, hi, buf, u0, u1))
    return;
  int64_t n0 = gg.floats(Cg);
  for (int64_t i = 0; i < n0; i++)
    buf[i] = 0.0f;
  int64_t *toff = reinterpret_cast<int64_t *>(buf);
  anyTaps(toff, g, KH, KW, SH, SW, DH, DW);
  float *planes = buf + g.tapFloats;
  float *o = planes + Cg * gg.chFloats;
  const int64_t T = KH * KW, P = OH * OW;
  int64_t lastPair = -1;
  for (int64_t u = u0; u < u1; u++) {
    int64_t pair = u / R, part = u % R, n = pair / G, grp = pair % G;
    // Output rows [r0, r1) of this unit.
    int64_t r0 = part * OH / R, r1 = (part + 1) * OH / R;
    if (r0 >= r1)
      continue;
    if (pair != lastPair) {
      for (int64_t ci = 0; ci < Cg; ci++) {
        const float *x = in + (n * C + grp * Cg + ci) * H * W;
        float *pl = planes + ci * gg.chFloats;
        for (int64_t a = 0; a < SH; a++)
          for (int64_t i = 0; i < g.Hq; i++) {
            int64_t ih = i * SH + a - PT;
            if (ih < 0 || ih >= H)
              continue;
            anyLoadRow(pl + a * SW * g.phase + i * g.Wq, x + ih * W, W, PL, SW, g.Wq, g.phase);
          }
      }
      lastPair = pair;
    }
    // Cells of rows [r0, r1), from the block holding row r0's first cell.
    int64_t c0 = r0 * g.Wq / (2 * VW) * (2 * VW), c1 = r1 * g.Wq;
    groupedChannels<VW, MaxOT>(o + c0, g.outCells, planes + c0, gg.chFloats, toff, T, Cg,
                               packedW + grp * Cg * T * Og, Og, bias ? bias + grp * Og : nullptr,
                               c1 - c0);
    for (int64_t j = 0; j < Og; j++) {
      int64_t oc = grp * Og + j;
      float *y = out + (n * O + oc) * P;
      const float *ad = add ? add + (n * O + oc) * P : nullptr;
      const float *src = o + j * g.outCells;
      for (int64_t r = r0; r < r1; r++) {
        float *yr = y + r * OW;
        const float *sr = src + r * g.Wq;
        const float *ar = ad ? ad + r * OW : nullptr;
        for (int64_t c = 0; c < OW; c++) {
          float v = sr[c] + (ar ? ar[c] : 0.0f);
          if (act == ActClamp) {
            v = v < lo ? lo : v;
            v = v > hi ? hi : v;
          }
          yr[c] = v;
        }
        // Another activation (libjit_act.h) on the row just written.
        if (act > ActClamp)
          activateContiguous(yr, OW, int(act), lo, hi);
      }
    }
  }
}

} // namespace


LIBJIT_EXPORT int64_t libjit_conv2d_grouped_scratch_floats(int64_t Cg, int64_t Og, int64_t OH,
                                                           int64_t OW, int64_t KH, int64_t KW,
                                                           int64_t SH, int64_t SW, int64_t DH,
                                                           int64_t DW) {
  int64_t n = GroupedGeom(Cg, Og, OH, OW, KH, KW, SH, SW, DH, DW).floats(Cg);
  // The small path's, when the shape may take it (W == OW there).
  if (groupedSmallShape(Og, OH, OW, OW, SH, SW, DH, DW))
    n = maxI(n, GroupedSmallGeom(OH, OW, KH, KW, Cg).floats(Cg, KW));
  return (n + 15) / 16 * 16;
}

LIBJIT_EXPORT void libjit_pack_grouped_f32(float *dst, const float *filter, int64_t G,
                                           int64_t Og, int64_t K) {
  for (int64_t g = 0; g < G; g++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t j = 0; j < Og; j++)
        dst[(g * K + k) * Og + j] = filter[(g * Og + j) * K + k];
}

#define LIBJIT_GROUPED_ENTRY_POINT(SUFFIX, VW, MAXOT)                                        \
  LIBJIT_EXPORT void libjit_conv2d_grouped_f32_##SUFFIX(                                     \
      float *out, const float *in, const float *packedW, const float *bias, const float *add, \
      int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW,          \
      int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH,     \
      int64_t DW, int64_t G, int64_t act, float lo, float hi, float *scratch, int64_t tid,    \
      int64_t nthreads) {                                                                     \
    conv2dGrouped<VW, MAXOT>(out, in, packedW, bias, add, N, C, H, W, O, OH, OW, KH, KW, SH,  \
                             SW, PT, PL, DH, DW, G, act, lo, hi, scratch, tid, nthreads);     \
  }
LIBJIT_GROUPED_ENTRY_POINT(avx512, 16, 8)
LIBJIT_GROUPED_ENTRY_POINT(avx2, 8, 4)
#undef LIBJIT_GROUPED_ENTRY_POINT
