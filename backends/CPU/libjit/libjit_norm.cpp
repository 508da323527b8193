// Normalizations along an axis, float32: SoftMax, LogSoftMax, BatchNormalization
// (inference), LayerNormalization, and BatchedAdd. Shapes are [outer, axis, inner].
#include "libjit.h"

using namespace libjit;

LIBJIT_EXPORT void libjit_softmax_f32(float *dst, const float *src, int64_t outer,
                                      int64_t axis, int64_t inner, int64_t logForm) {
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      const float *x = src + o * axis * inner + i;
      float *y = dst + o * axis * inner + i;
      float mx = x[0];
      for (int64_t a = 1; a < axis; a++)
        mx = x[a * inner] > mx ? x[a * inner] : mx;
      float sum = 0.0f;
      if (logForm) {
        for (int64_t a = 0; a < axis; a++)
          sum += __builtin_expf(x[a * inner] - mx);
        float lse = __builtin_logf(sum);
        for (int64_t a = 0; a < axis; a++)
          y[a * inner] = x[a * inner] - mx - lse;
      } else {
        for (int64_t a = 0; a < axis; a++) {
          float e = __builtin_expf(x[a * inner] - mx);
          y[a * inner] = e;
          sum += e;
        }
        float inv = 1.0f / sum;
        for (int64_t a = 0; a < axis; a++)
          y[a * inner] *= inv;
      }
    }
  }
}

LIBJIT_EXPORT void libjit_batchnorm_f32(float *dst, const float *src, const float *scale,
                                        const float *bias, const float *mean, const float *var,
                                        float eps, int64_t outer, int64_t channels,
                                        int64_t inner) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < channels; c++) {
      float s = scale[c] / __builtin_sqrtf(var[c] + eps);
      float b = bias[c] - mean[c] * s;
      const float *x = src + (o * channels + c) * inner;
      float *y = dst + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; i++)
        y[i] = x[i] * s + b;
    }
}

LIBJIT_EXPORT void libjit_layernorm_f32(float *dst, const float *src, const float *scale,
                                        const float *bias, int64_t outer, int64_t inner,
                                        float eps) {
  for (int64_t o = 0; o < outer; o++) {
    const float *x = src + o * inner;
    float *y = dst + o * inner;
    float mean = 0.0f;
    for (int64_t i = 0; i < inner; i++)
      mean += x[i];
    mean /= (float)inner;
    float var = 0.0f;
    for (int64_t i = 0; i < inner; i++)
      var += (x[i] - mean) * (x[i] - mean);
    var /= (float)inner;
    float inv = 1.0f / __builtin_sqrtf(var + eps);
    for (int64_t i = 0; i < inner; i++)
      y[i] = (x[i] - mean) * inv * scale[i] + bias[i];
  }
}

LIBJIT_EXPORT void libjit_batchedadd_f32(float *dst, const float *batch, const float *slice,
                                         int64_t n, int64_t sliceSize) {
  for (int64_t b = 0; b < n; b++)
    for (int64_t i = 0; i < sliceSize; i++)
      dst[b * sliceSize + i] = batch[b * sliceSize + i] + slice[i];
}
