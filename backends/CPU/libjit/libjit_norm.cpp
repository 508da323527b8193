// Normalizations along an axis, float32: SoftMax, LogSoftMax, BatchNormalization
// (inference), LayerNormalization, and BatchedAdd. Shapes are [outer, axis, inner].
// SoftMax and LayerNormalization are written on 16-float vectors (one AVX-512 register,
// two AVX2 ones) and split rows between threads.
#include "libjit.h"
#include "libjit_math.h"
#include "libjit_vec.h"

using namespace libjit;

namespace {

typedef int32_t I16 __attribute__((vector_size(64)));

LIBJIT_INLINE float hsum(F16 v) {
  float s = 0.0f;
  LIBJIT_UNROLL
  for (int i = 0; i < 16; i++)
    s += v[i];
  return s;
}
LIBJIT_INLINE float hmax(F16 v) {
  float m = v[0];
  LIBJIT_UNROLL
  for (int i = 1; i < 16; i++)
    m = v[i] > m ? v[i] : m;
  return m;
}
LIBJIT_INLINE F16 max16(F16 a, F16 b) { return a > b ? a : b; }

/// expF (libjit_math.h) on 16 lanes: the same reduction, polynomial and two-step scaling,
/// written on vectors so that it is one AVX-512 register (two AVX2 ones) per step.
LIBJIT_INLINE F16 exp16(F16 x) {
  x = clamp16(x, splat16(-104.0f), splat16(89.0f));
  const F16 shifter = splat16(12582912.0f);
  F16 t = x * 1.44269504088896341f + shifter;
  F16 n = t - shifter;
  I16 ni = __builtin_bit_cast(I16, t) - __builtin_bit_cast(I16, shifter);
  F16 r = n * -0.693145751953125f + x;
  r = n * -1.428606765330187e-06f + r;
  F16 p = r * 0.0013901269025800543f + 0.008363140354465486f;
  p = p * r + 0.04166685353785621f;
  p = p * r + 0.16666577320146536f;
  p = p * r + 0.4999999955257341f;
  p = (p * r) * r + r + 1.0f;
  I16 n1 = ni >> 1, n2 = ni - n1;
  F16 s1 = __builtin_bit_cast(F16, (n1 + 127) << 23);
  F16 s2 = __builtin_bit_cast(F16, (n2 + 127) << 23);
  return p * s1 * s2;
}

/// SoftMax (or LogSoftMax) of one contiguous row x[0..n): the maximum, then exp(x - max)
/// written to y while it is summed, then one scaling pass; the row stays in L1 between
/// the passes, so memory sees one read and one write.
LIBJIT_INLINE void softmaxRow(float *y, const float *x, int64_t n, bool logForm) {
  int64_t nv = n / 16 * 16;
  F16 mv = splat16(-__builtin_inff());
  for (int64_t i = 0; i < nv; i += 16)
    mv = max16(mv, ld16(x + i));
  float mx = hmax(mv);
  for (int64_t i = nv; i < n; i++)
    mx = x[i] > mx ? x[i] : mx;
  F16 m16 = splat16(mx), sv = splat16(0.0f);
  float sum = 0.0f;
  if (logForm) {
    for (int64_t i = 0; i < nv; i += 16)
      sv += exp16(ld16(x + i) - m16);
    for (int64_t i = nv; i < n; i++)
      sum += expF(x[i] - mx);
    // (x - max) - log(sum): the max first, so large rows keep their precision.
    float ls = __builtin_logf(hsum(sv) + sum);
    F16 l16 = splat16(ls);
    for (int64_t i = 0; i < nv; i += 16)
      st16(y + i, (ld16(x + i) - m16) - l16);
    for (int64_t i = nv; i < n; i++)
      y[i] = (x[i] - mx) - ls;
    return;
  }
  for (int64_t i = 0; i < nv; i += 16) {
    F16 e = exp16(ld16(x + i) - m16);
    st16(y + i, e);
    sv += e;
  }
  for (int64_t i = nv; i < n; i++) {
    float e = expF(x[i] - mx);
    y[i] = e;
    sum += e;
  }
  float inv = 1.0f / (hsum(sv) + sum);
  F16 inv16 = splat16(inv);
  for (int64_t i = 0; i < nv; i += 16)
    st16(y + i, ld16(y + i) * inv16);
  for (int64_t i = nv; i < n; i++)
    y[i] *= inv;
}

/// SoftMax (or LogSoftMax) along the middle axis of x [axis, inner] for inner positions
/// [i0, i0 + 16): sixteen columns at once, one per lane.
LIBJIT_INLINE void softmaxColumns16(float *y, const float *x, int64_t axis, int64_t inner,
                                    bool logForm) {
  F16 mv = ld16(x);
  for (int64_t a = 1; a < axis; a++)
    mv = max16(mv, ld16(x + a * inner));
  F16 sv = splat16(0.0f);
  if (logForm) {
    for (int64_t a = 0; a < axis; a++)
      sv += exp16(ld16(x + a * inner) - mv);
    F16 ls;
    LIBJIT_UNROLL
    for (int j = 0; j < 16; j++)
      ls[j] = __builtin_logf(sv[j]);
    for (int64_t a = 0; a < axis; a++)
      st16(y + a * inner, (ld16(x + a * inner) - mv) - ls);
    return;
  }
  for (int64_t a = 0; a < axis; a++) {
    F16 e = exp16(ld16(x + a * inner) - mv);
    st16(y + a * inner, e);
    sv += e;
  }
  F16 inv = splat16(1.0f) / sv;
  for (int64_t a = 0; a < axis; a++)
    st16(y + a * inner, ld16(y + a * inner) * inv);
}

/// One column of the middle-axis case, for the inner positions left over.
LIBJIT_INLINE void softmaxColumn(float *y, const float *x, int64_t axis, int64_t inner,
                                 bool logForm) {
  float mx = x[0];
  for (int64_t a = 1; a < axis; a++)
    mx = x[a * inner] > mx ? x[a * inner] : mx;
  float sum = 0.0f;
  if (logForm) {
    for (int64_t a = 0; a < axis; a++)
      sum += expF(x[a * inner] - mx);
    float ls = __builtin_logf(sum);
    for (int64_t a = 0; a < axis; a++)
      y[a * inner] = (x[a * inner] - mx) - ls;
    return;
  }
  for (int64_t a = 0; a < axis; a++) {
    float e = expF(x[a * inner] - mx);
    y[a * inner] = e;
    sum += e;
  }
  float inv = 1.0f / sum;
  for (int64_t a = 0; a < axis; a++)
    y[a * inner] *= inv;
}

} // namespace

LIBJIT_EXPORT void libjit_softmax_f32(float *dst, const float *src, int64_t outer,
                                      int64_t axis, int64_t inner, int64_t logForm,
                                      int64_t tid, int64_t nthreads) {
  if (axis <= 0)
    return;
  bool lg = logForm != 0;
  if (inner == 1) {
    int64_t r0, r1;
    partition(outer, 1, tid, nthreads, &r0, &r1);
    for (int64_t o = r0; o < r1; o++)
      softmaxRow(dst + o * axis, src + o * axis, axis, lg);
    return;
  }
  // Threads split the (outer, 16-column block) pairs.
  int64_t blocks = ceilDiv(inner, 16), u0, u1;
  partition(outer * blocks, 1, tid, nthreads, &u0, &u1);
  for (int64_t u = u0; u < u1; u++) {
    int64_t o = u / blocks, i0 = (u % blocks) * 16;
    const float *x = src + o * axis * inner + i0;
    float *y = dst + o * axis * inner + i0;
    if (i0 + 16 <= inner) {
      softmaxColumns16(y, x, axis, inner, lg);
    } else {
      for (int64_t i = 0; i < inner - i0; i++)
        softmaxColumn(y + i, x + i, axis, inner, lg);
    }
  }
}

LIBJIT_EXPORT void libjit_batchnorm_f32(float *dst, const float *src, const float *scale,
                                        const float *bias, const float *mean, const float *var,
                                        float eps, int64_t outer, int64_t channels,
                                        int64_t inner, int64_t tid, int64_t nthreads) {
  int64_t p0, p1;
  partition(outer * channels, 1, tid, nthreads, &p0, &p1);
  for (int64_t p = p0; p < p1; p++) {
    int64_t c = p % channels;
    float s = scale[c] / __builtin_sqrtf(var[c] + eps);
    float b = bias[c] - mean[c] * s;
    const float *x = src + p * inner;
    float *y = dst + p * inner;
    for (int64_t i = 0; i < inner; i++)
      y[i] = x[i] * s + b;
  }
}

LIBJIT_EXPORT void libjit_layernorm_f32(float *dst, const float *src, const float *scale,
                                        const float *bias, int64_t outer, int64_t inner,
                                        float eps, int64_t tid, int64_t nthreads) {
  // Per row (in L1 after the first read): the mean, the sum of squared deviations from it
  // (two passes over the row, as exact as the definition), then the affine map.
  int64_t r0, r1;
  partition(outer, 1, tid, nthreads, &r0, &r1);
  int64_t nv = inner / 16 * 16;
  float invN = 1.0f / (float)inner;
  for (int64_t o = r0; o < r1; o++) {
    const float *x = src + o * inner;
    float *y = dst + o * inner;
    F16 a0 = splat16(0.0f), a1 = a0;
    int64_t i = 0;
    for (; i + 32 <= nv; i += 32) {
      a0 += ld16(x + i);
      a1 += ld16(x + i + 16);
    }
    for (; i < nv; i += 16)
      a0 += ld16(x + i);
    float tail = 0.0f;
    for (i = nv; i < inner; i++)
      tail += x[i];
    float mean = (hsum(a0 + a1) + tail) * invN;
    F16 m16 = splat16(mean);
    a0 = splat16(0.0f), a1 = a0;
    for (i = 0; i + 32 <= nv; i += 32) {
      F16 d0 = ld16(x + i) - m16, d1 = ld16(x + i + 16) - m16;
      a0 += d0 * d0;
      a1 += d1 * d1;
    }
    for (; i < nv; i += 16) {
      F16 d = ld16(x + i) - m16;
      a0 += d * d;
    }
    tail = 0.0f;
    for (i = nv; i < inner; i++)
      tail += (x[i] - mean) * (x[i] - mean);
    float var = (hsum(a0 + a1) + tail) * invN;
    float inv = 1.0f / __builtin_sqrtf(var + eps);
    F16 inv16 = splat16(inv);
    for (i = 0; i < nv; i += 16)
      st16(y + i, (ld16(x + i) - m16) * inv16 * ld16(scale + i) + ld16(bias + i));
    for (i = nv; i < inner; i++)
      y[i] = (x[i] - mean) * inv * scale[i] + bias[i];
  }
}

LIBJIT_EXPORT void libjit_batchedadd_f32(float *dst, const float *batch, const float *slice,
                                         int64_t n, int64_t sliceSize) {
  for (int64_t b = 0; b < n; b++)
    for (int64_t i = 0; i < sliceSize; i++)
      dst[b * sliceSize + i] = batch[b * sliceSize + i] + slice[i];
}
