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
// Other shapes (dilations, larger strides) use a generic loop over a padded copy.
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

/// The generic path's padded, column-phase-split plane: Hp rows of Wq cells per phase.
struct PhaseGeom {
  int64_t Hp, Wq;
  PhaseGeom(int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t DH,
            int64_t DW) {
    Hp = (OH - 1) * SH + (KH - 1) * DH + 1;
    Wq = OW + ((KW - 1) * DW) / SW + 1;
  }
};

/// Cells of one row of the row path (one column phase), with slack for the copies.
LIBJIT_INLINE int64_t rowCells(int64_t OW, int64_t K, int64_t S) {
  return (OW + (K - 1) / S + 32 + 15) / 16 * 16;
}

/// Which path a shape takes: 0 generic, 1 rows, 2 flat. Stride 1 runs flat at every size
/// (its padded copy is a plain row copy and it has no per-row overhead); stride 2 runs
/// flat only on narrow planes, since its phase split copies element by element.
LIBJIT_INLINE int dwPath(int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t DH,
                         int64_t DW) {
  if (KH != KW || (KH != 3 && KH != 5) || DH != 1 || DW != 1 || SW > 2)
    return 0;
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
  for (int64_t i = 0; i < OH; i++)
    copyRow(y + i * OW, o + i * g.Wq, OW);
}

/// Copies plane x [H x W] into SW column phases of its padded form, for windows read with
/// column stride SW: phase f holds padded columns f, f + SW, f + 2 SW, ... so that every
/// window tap reads a contiguous run. Padded row r, padded column q = j * SW + f is
/// x[r - PT][q - PL] inside the image and 0 outside. Each phase is Hp x Wq.
LIBJIT_INLINE void padPhases(float *dst, const float *x, int64_t H, int64_t W, int64_t PT,
                             int64_t PL, int64_t Hp, int64_t Wq, int64_t SW) {
  for (int64_t f = 0; f < SW; f++) {
    float *d = dst + f * Hp * Wq;
    int64_t off = f - PL;
    int64_t jLo = off >= 0 ? 0 : ceilDiv(-off, SW);
    int64_t jHi = W - off <= 0 ? 0 : ceilDiv(W - off, SW);
    jLo = minI(jLo, Wq);
    jHi = maxI(minI(jHi, Wq), jLo);
    for (int64_t r = 0; r < Hp; r++) {
      float *dr = d + r * Wq;
      int64_t ih = r - PT;
      if (ih < 0 || ih >= H) {
        for (int64_t j = 0; j < Wq; j++)
          dr[j] = 0.0f;
        continue;
      }
      const float *xr = x + ih * W + off;
      for (int64_t j = 0; j < jLo; j++)
        dr[j] = 0.0f;
      for (int64_t j = jLo; j < jHi; j++)
        dr[j] = xr[j * SW];
      for (int64_t j = jHi; j < Wq; j++)
        dr[j] = 0.0f;
    }
  }
}

/// One plane on the generic path: every tap is a multiply-add over an output row.
LIBJIT_INLINE void dwGeneric(float *y, const float *x, const float *f, float b, int64_t H,
                             int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
                             int64_t SW, int64_t PT, int64_t PL, int64_t DH, int64_t DW, int act,
                             float lo, float hi, float *buf) {
  PhaseGeom g(OH, OW, KH, KW, SH, SW, DH, DW);
  int64_t plane = g.Hp * g.Wq;
  padPhases(buf, x, H, W, PT, PL, g.Hp, g.Wq, SW);
  for (int64_t oh = 0; oh < OH; oh++) {
    float *yr = y + oh * OW;
    for (int64_t ow = 0; ow < OW; ow++)
      yr[ow] = b;
    for (int64_t kh = 0; kh < KH; kh++) {
      int64_t r = oh * SH + kh * DH;
      for (int64_t kw = 0; kw < KW; kw++) {
        float wv = f[kh * KW + kw];
        int64_t q = kw * DW;
        const float *s = buf + (q % SW) * plane + r * g.Wq + q / SW;
        for (int64_t ow = 0; ow < OW; ow++)
          yr[ow] += wv * s[ow];
      }
    }
    if (act)
      for (int64_t ow = 0; ow < OW; ow++) {
        float v = yr[ow] < lo ? lo : yr[ow];
        yr[ow] = v > hi ? hi : v;
      }
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
  (void)H, (void)W;
  int64_t n;
  switch (dwPath(OW, KH, KW, SH, SW, DH, DW)) {
  case 1:
    n = rowPlaneRows(OH, KH, SH) * SW * rowCells(OW, KW, SW);
    break;
  case 2:
    n = FlatGeom(OH, OW, KH, SH).floats(SH);
    break;
  default: {
    PhaseGeom g(OH, OW, KH, KW, SH, SW, DH, DW);
    n = g.Hp * g.Wq * SW;
  }
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
  int path = dwPath(OW, KH, KW, SH, SW, DH, DW);
  // A clamp in the kernels' registers; another activation (gact) on each plane as it is
  // finished, while it is in the cache.
  int a = act == ActClamp, gact = act > ActClamp ? int(act) : 0;
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
  for (int64_t p = p0; p < p1; p++) {
    int64_t c = p % C;
    dwGeneric(out + p * OH * OW, in + p * H * W, filter + c * KH * KW, bias ? bias[c] : 0.0f, H, W,
              OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, a, lo, hi, buf);
    if (gact)
      activateContiguous(out + p * OH * OW, OH * OW, gact, lo, hi);
  }
}
