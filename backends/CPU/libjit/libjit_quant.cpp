// Quantization: Quantize (f32 -> i8/u8/i32), Dequantize (i8/u8/i32 -> f32) and
// RescaleQuantized (same storage kind, new scale and offset), and the requantizing strided
// copy of data movement between quantization parameters. Real = scale * (q - offset);
// the arithmetic is in double and rounds half away from zero, then saturates (NaN maps to
// the offset), exactly as the operator table and the Interpreter define it, so results are
// bit-exact with the Interpreter. One template per operator, instantiated per storage type;
// each thread takes a contiguous share of the elements.
#include "libjit.h"
#include "libjit_box.h"

namespace libjit {
namespace {

template <class T> struct Limits;
template <> struct Limits<int8_t> {
  static constexpr double lo = -128.0, hi = 127.0;
};
template <> struct Limits<uint8_t> {
  static constexpr double lo = 0.0, hi = 255.0;
};
template <> struct Limits<int32_t> {
  static constexpr double lo = -2147483648.0, hi = 2147483647.0;
};

/// round(r / scale) + offset, half away from zero, saturated; NaN -> offset.
template <class T> LIBJIT_INLINE T quantizeOne(double r, float scale, int32_t offset) {
  if (r != r)
    r = 0.0;
  double q = __builtin_round(r / double(scale)) + double(offset);
  if (!(q >= Limits<T>::lo))
    return T(Limits<T>::lo);
  if (q > Limits<T>::hi)
    return T(Limits<T>::hi);
  return T(q);
}

template <class T> LIBJIT_INLINE double dequantizeOne(T q, float scale, int32_t offset) {
  return double(scale) * double(int64_t(q) - int64_t(offset));
}

template <class T>
LIBJIT_INLINE void quantize(T *dst, const float *src, int64_t n, float scale, int32_t offset,
                            int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(n, 64, tid, nthreads, &b, &e);
  for (int64_t i = b; i < e; i++)
    dst[i] = quantizeOne<T>(double(src[i]), scale, offset);
}

template <class T>
LIBJIT_INLINE void dequantize(float *dst, const T *src, int64_t n, float scale, int32_t offset,
                              int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(n, 64, tid, nthreads, &b, &e);
  for (int64_t i = b; i < e; i++)
    dst[i] = float(dequantizeOne<T>(src[i], scale, offset));
}

template <class T>
LIBJIT_INLINE void rescale(T *dst, const T *src, int64_t n, float inScale, int32_t inOffset,
                           float outScale, int32_t outOffset, int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(n, 64, tid, nthreads, &b, &e);
  for (int64_t i = b; i < e; i++)
    dst[i] = quantizeOne<T>(dequantizeOne<T>(src[i], inScale, inOffset), outScale, outOffset);
}

/// The strided box copy of libjit_tensor.cpp, requantizing every element: data movement
/// whose result has other quantization parameters than its input.
template <class T>
LIBJIT_INLINE void stridedRescale(T *dst, const T *src, const int64_t *dims,
                                  const int64_t *dstStrides, const int64_t *srcStrides,
                                  int64_t rank, float inScale, int32_t inOffset, float outScale,
                                  int32_t outOffset) {
  if (rank == 0) {
    *dst = quantizeOne<T>(dequantizeOne<T>(*src, inScale, inOffset), outScale, outOffset);
    return;
  }
  forEachBoxRow(dims, dstStrides, srcStrides, rank,
                [&](int64_t dOff, int64_t sOff, int64_t inner, int64_t ds, int64_t ss) {
                  for (int64_t i = 0; i < inner; i++)
                    dst[dOff + i * ds] = quantizeOne<T>(
                        dequantizeOne<T>(src[sOff + i * ss], inScale, inOffset), outScale,
                        outOffset);
                });
}

} // namespace
} // namespace libjit

using namespace libjit;

#define LIBJIT_QUANT_ENTRIES(SUFFIX, T)                                                     \
  LIBJIT_EXPORT void libjit_quantize_f32_##SUFFIX(T *dst, const float *src, int64_t n,      \
                                                  float scale, int32_t offset, int64_t tid,  \
                                                  int64_t nthreads) {                        \
    quantize<T>(dst, src, n, scale, offset, tid, nthreads);                                  \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_dequantize_##SUFFIX##_f32(float *dst, const T *src, int64_t n,  \
                                                      float scale, int32_t offset,           \
                                                      int64_t tid, int64_t nthreads) {       \
    dequantize<T>(dst, src, n, scale, offset, tid, nthreads);                                \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_rescale_##SUFFIX(T *dst, const T *src, int64_t n, float inScale, \
                                             int32_t inOffset, float outScale,               \
                                             int32_t outOffset, int64_t tid,                 \
                                             int64_t nthreads) {                             \
    rescale<T>(dst, src, n, inScale, inOffset, outScale, outOffset, tid, nthreads);          \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_strided_rescale_##SUFFIX(                                        \
      T *dst, const T *src, const int64_t *dims, const int64_t *dstStrides,                  \
      const int64_t *srcStrides, int64_t rank, float inScale, int32_t inOffset,              \
      float outScale, int32_t outOffset) {                                                   \
    stridedRescale<T>(dst, src, dims, dstStrides, srcStrides, rank, inScale, inOffset,       \
                      outScale, outOffset);                                                  \
  }

LIBJIT_QUANT_ENTRIES(i8, int8_t)
LIBJIT_QUANT_ENTRIES(u8, uint8_t)
LIBJIT_QUANT_ENTRIES(i32, int32_t)
