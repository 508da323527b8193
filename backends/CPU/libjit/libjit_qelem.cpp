// int8 element-wise operators and pooling (Int8Q in and out), bit-exact with the
// Interpreter.
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
  const double dIn = double(inScale), dOut = double(outScale), dOff = double(outOff);
  for (int64_t p = b; p < e; p++) {
    const int8_t *x = src + p * H * W;
    int8_t *y = dst + p * OH * OW;
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0, h1, w0, w1;
        if (mode == 2) {
          h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
          w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        } else {
          int64_t hs = oh * SH - PT, ws = ow * SW - PL;
          h0 = maxI(hs, 0), h1 = minI(maxI(hs + KH, 0), H);
          w0 = maxI(ws, 0), w1 = minI(maxI(ws + KW, 0), W);
          h0 = minI(h0, H), w0 = minI(w0, W);
        }
        if (mode == 0) {
          int32_t m = -128;
          for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++)
              m = x[h * W + w] > m ? x[h * W + w] : m;
          y[oh * OW + ow] = lut[m + 128];
          continue;
        }
        int32_t sum = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++)
            sum += int32_t(x[h * W + w]) - int32_t(inOff);
        int64_t area = (h1 - h0) * (w1 - w0);
        int64_t div = mode == 1 && countPads ? KH * KW : (area > 1 ? area : 1);
        double real = dIn * double(sum);
        real = real / double(div);
        double q = __builtin_round(real / dOut);
        q = q + dOff;
        if (!(q >= -128.0))
          q = -128.0;
        if (q > 127.0)
          q = 127.0;
        y[oh * OW + ow] = int8_t(q);
      }
  }
}
