// Pooling and depthwise convolution on NCHW float32. Work splits over the N*C planes.
#include "libjit.h"

using namespace libjit;

LIBJIT_EXPORT int64_t libjit_pool_scratch_floats(int64_t H, int64_t W, int64_t OH, int64_t OW,
                                                 int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                                                 int64_t DH, int64_t DW) {
  (void)H, (void)W;
  int64_t Hp = (OH - 1) * SH + (KH - 1) * DH + 1;
  int64_t Wq = OW + ((KW - 1) * DW) / SW + 1;
  return (Hp * Wq * SW + 15) / 16 * 16;
}

namespace {

/// Copies plane x [H x W] into SW column phases of its padded form, for windows read with
/// column stride SW: phase f holds padded columns f, f + SW, f + 2 SW, ... so that every
/// window tap reads a contiguous run. Padded row r, padded column q = j * SW + f is
/// x[r - PT][q - PL] inside the image and `fill` outside. Each phase is Hp x Wq.
LIBJIT_INLINE void padPhases(float *dst, const float *x, int64_t H, int64_t W, int64_t PT,
                             int64_t PL, int64_t Hp, int64_t Wq, int64_t SW, float fill) {
  for (int64_t f = 0; f < SW; f++) {
    float *d = dst + f * Hp * Wq;
    // Columns j with 0 <= j * SW + f - PL < W.
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
          dr[j] = fill;
        continue;
      }
      const float *xr = x + ih * W + off;
      for (int64_t j = 0; j < jLo; j++)
        dr[j] = fill;
      if (SW == 1) {
        for (int64_t j = jLo; j < jHi; j++)
          dr[j] = xr[j];
      } else {
        for (int64_t j = jLo; j < jHi; j++)
          dr[j] = xr[j * SW];
      }
      for (int64_t j = jHi; j < Wq; j++)
        dr[j] = fill;
    }
  }
}

/// One output row of a 3x3 depthwise convolution from nine tap rows (restrict: no
/// run-time alias checks, so the loop vectorises).
template <bool Act>
LIBJIT_INLINE void dw3x3Row(float *__restrict y, const float *__restrict a0,
                            const float *__restrict a1, const float *__restrict a2,
                            const float *__restrict b0, const float *__restrict b1,
                            const float *__restrict b2, const float *__restrict c0,
                            const float *__restrict c1, const float *__restrict c2, int64_t n,
                            float w0, float w1, float w2, float w3, float w4, float w5, float w6,
                            float w7, float w8, float b, float lo, float hi) {
  for (int64_t i = 0; i < n; i++) {
    float v = b + w0 * a0[i] + w1 * a1[i] + w2 * a2[i] + w3 * b0[i] + w4 * b1[i] + w5 * b2[i] +
              w6 * c0[i] + w7 * c1[i] + w8 * c2[i];
    if (Act) {
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
    }
    y[i] = v;
  }
}

/// Geometry of a padded, phase-split plane for an OH x OW window sweep.
struct PhaseGeom {
  int64_t Hp, Wq;
  PhaseGeom(int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW,
            int64_t DH, int64_t DW) {
    Hp = (OH - 1) * SH + (KH - 1) * DH + 1;
    Wq = OW + ((KW - 1) * DW) / SW + 1;
  }
};

} // namespace

LIBJIT_EXPORT void libjit_maxpool_f32(float *dst, const float *src, int64_t N, int64_t C,
                                      int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH,
                                      int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                      int64_t PL, float *scratch, int64_t tid,
                                      int64_t nthreads) {
  int64_t p0, p1;
  partition(N * C, 1, tid, nthreads, &p0, &p1);
  PhaseGeom g(OH, OW, KH, KW, SH, SW, 1, 1);
  float *buf = scratch + tid * libjit_pool_scratch_floats(H, W, OH, OW, KH, KW, SH, SW, 1, 1);
  for (int64_t p = p0; p < p1; p++) {
    padPhases(buf, src + p * H * W, H, W, PT, PL, g.Hp, g.Wq, SW, -__builtin_inff());
    float *y = dst + p * OH * OW;
    for (int64_t oh = 0; oh < OH; oh++) {
      float *yr = y + oh * OW;
      for (int64_t ow = 0; ow < OW; ow++)
        yr[ow] = -__builtin_inff();
      for (int64_t kh = 0; kh < KH; kh++) {
        int64_t r = oh * SH + kh;
        for (int64_t kw = 0; kw < KW; kw++) {
          const float *s = buf + (kw % SW) * g.Hp * g.Wq + r * g.Wq + kw / SW;
          for (int64_t ow = 0; ow < OW; ow++)
            yr[ow] = s[ow] > yr[ow] ? s[ow] : yr[ow];
        }
      }
    }
  }
}

LIBJIT_EXPORT void libjit_avgpool_f32(float *dst, const float *src, int64_t N, int64_t C,
                                      int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH,
                                      int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                      int64_t PL, int64_t countIncludePads, int64_t tid,
                                      int64_t nthreads) {
  int64_t p0, p1;
  partition(N * C, 1, tid, nthreads, &p0, &p1);
  for (int64_t p = p0; p < p1; p++) {
    const float *x = src + p * H * W;
    float *y = dst + p * OH * OW;
    for (int64_t oh = 0; oh < OH; oh++) {
      int64_t h0 = oh * SH - PT;
      int64_t hb = maxI(h0, 0), he = minI(h0 + KH, H);
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t w0 = ow * SW - PL;
        int64_t wb = maxI(w0, 0), we = minI(w0 + KW, W);
        float s = 0.0f;
        for (int64_t h = hb; h < he; h++)
          for (int64_t w = wb; w < we; w++)
            s += x[h * W + w];
        int64_t cnt = countIncludePads ? KH * KW : (he - hb) * (we - wb);
        y[oh * OW + ow] = cnt > 0 ? s / (float)cnt : 0.0f;
      }
    }
  }
}

LIBJIT_EXPORT void libjit_adaptive_avgpool_f32(float *dst, const float *src, int64_t N,
                                               int64_t C, int64_t H, int64_t W, int64_t OH,
                                               int64_t OW, int64_t tid, int64_t nthreads) {
  int64_t p0, p1;
  partition(N * C, 1, tid, nthreads, &p0, &p1);
  for (int64_t p = p0; p < p1; p++) {
    const float *x = src + p * H * W;
    float *y = dst + p * OH * OW;
    for (int64_t i = 0; i < OH; i++) {
      int64_t hb = i * H / OH, he = ceilDiv((i + 1) * H, OH);
      for (int64_t j = 0; j < OW; j++) {
        int64_t wb = j * W / OW, we = ceilDiv((j + 1) * W, OW);
        float s = 0.0f;
        for (int64_t h = hb; h < he; h++)
          for (int64_t w = wb; w < we; w++)
            s += x[h * W + w];
        y[i * OW + j] = s / (float)((he - hb) * (we - wb));
      }
    }
  }
}

/// Depthwise convolution (Group == C == O, one input channel per output channel): each
/// plane is padded and split into column phases (padPhases), then every tap is a
/// contiguous, vectorised multiply-add over an output row; 3x3 kernels do all nine taps
/// per output element.
LIBJIT_EXPORT void libjit_conv2d_dw_f32(float *out, const float *in, const float *filter,
                                        const float *bias, int64_t N, int64_t C, int64_t H,
                                        int64_t W, int64_t OH, int64_t OW, int64_t KH,
                                        int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                        int64_t PL, int64_t DH, int64_t DW, int64_t act,
                                        float lo, float hi, float *scratch, int64_t tid,
                                        int64_t nthreads) {
  int64_t p0, p1;
  partition(N * C, 1, tid, nthreads, &p0, &p1);
  PhaseGeom g(OH, OW, KH, KW, SH, SW, DH, DW);
  float *buf = scratch + tid * libjit_pool_scratch_floats(H, W, OH, OW, KH, KW, SH, SW, DH, DW);
  int64_t plane = g.Hp * g.Wq;
  for (int64_t p = p0; p < p1; p++) {
    int64_t c = p % C;
    padPhases(buf, in + p * H * W, H, W, PT, PL, g.Hp, g.Wq, SW, 0.0f);
    const float *f = filter + c * KH * KW;
    float *y = out + p * OH * OW;
    float b = bias ? bias[c] : 0.0f;
    if (KH == 3 && KW == 3 && DH == 1 && DW == 1 && SW <= 2) {
      // Taps kw = 0, 1, 2 read phase kw % SW at column offset kw / SW.
      const float *ph0 = buf, *ph1 = buf + (1 % SW) * plane, *ph2 = buf + (2 % SW) * plane;
      int64_t o1 = 1 / SW, o2 = 2 / SW;
      float w0 = f[0], w1 = f[1], w2 = f[2], w3 = f[3], w4 = f[4], w5 = f[5], w6 = f[6],
            w7 = f[7], w8 = f[8];
      for (int64_t oh = 0; oh < OH; oh++) {
        int64_t r = oh * SH;
        const float *a0 = ph0 + r * g.Wq, *a1 = ph1 + r * g.Wq + o1, *a2 = ph2 + r * g.Wq + o2;
        const float *b0 = a0 + g.Wq, *b1 = a1 + g.Wq, *b2 = a2 + g.Wq;
        const float *c0 = b0 + g.Wq, *c1 = b1 + g.Wq, *c2 = b2 + g.Wq;
        float *yr = y + oh * OW;
        if (act)
          dw3x3Row<true>(yr, a0, a1, a2, b0, b1, b2, c0, c1, c2, OW, w0, w1, w2, w3, w4, w5, w6,
                         w7, w8, b, lo, hi);
        else
          dw3x3Row<false>(yr, a0, a1, a2, b0, b1, b2, c0, c1, c2, OW, w0, w1, w2, w3, w4, w5,
                          w6, w7, w8, b, lo, hi);
      }
      continue;
    }
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
          float v = yr[ow] > lo ? yr[ow] : lo;
          yr[ow] = v < hi ? v : hi;
        }
    }
  }
}
