// Pooling and depthwise convolution on NCHW float32. Work splits over the N*C planes.
#include "libjit.h"

using namespace libjit;

LIBJIT_EXPORT void libjit_maxpool_f32(float *dst, const float *src, int64_t N, int64_t C,
                                      int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH,
                                      int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                      int64_t PL, int64_t tid, int64_t nthreads) {
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
        float m = -__builtin_inff();
        for (int64_t h = hb; h < he; h++)
          for (int64_t w = wb; w < we; w++)
            m = x[h * W + w] > m ? x[h * W + w] : m;
        y[oh * OW + ow] = m;
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

/// Depthwise convolution (Group == C == O, one input channel per output channel, any
/// channel multiplier of 1): direct loops, vectorizable over output columns.
LIBJIT_EXPORT void libjit_conv2d_dw_f32(float *out, const float *in, const float *filter,
                                        const float *bias, int64_t N, int64_t C, int64_t H,
                                        int64_t W, int64_t OH, int64_t OW, int64_t KH,
                                        int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                        int64_t PL, int64_t DH, int64_t DW, int64_t act,
                                        float lo, float hi, int64_t tid, int64_t nthreads) {
  int64_t p0, p1;
  partition(N * C, 1, tid, nthreads, &p0, &p1);
  for (int64_t p = p0; p < p1; p++) {
    int64_t c = p % C;
    const float *x = in + p * H * W;
    const float *f = filter + c * KH * KW;
    float *y = out + p * OH * OW;
    float b = bias ? bias[c] : 0.0f;
    for (int64_t oh = 0; oh < OH; oh++) {
      float *yr = y + oh * OW;
      for (int64_t ow = 0; ow < OW; ow++)
        yr[ow] = b;
      for (int64_t kh = 0; kh < KH; kh++) {
        int64_t ih = oh * SH - PT + kh * DH;
        if (ih < 0 || ih >= H)
          continue;
        const float *xr = x + ih * W;
        for (int64_t kw = 0; kw < KW; kw++) {
          float wv = f[kh * KW + kw];
          int64_t off = kw * DW - PL;
          // ow range with 0 <= ow*SW + off < W.
          int64_t lo = off >= 0 ? 0 : ceilDiv(-off, SW);
          int64_t hi = W - off <= 0 ? 0 : ceilDiv(W - off, SW);
          hi = minI(hi, OW);
          for (int64_t ow = lo; ow < hi; ow++)
            yr[ow] += wv * xr[ow * SW + off];
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
