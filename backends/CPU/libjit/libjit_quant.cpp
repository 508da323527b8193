// Quantization: Quantize (f32 -> i8/u8/i32), Dequantize (i8/u8/i32 -> f32) and
// RescaleQuantized (same storage kind, new scale and offset), and the requantizing strided
// copy of data movement between quantization parameters. Real = scale * (q - offset);
// the arithmetic is in double and rounds half away from zero, then saturates (NaN maps to
// the offset), exactly as the operator table and the Interpreter define it, so results are
// bit-exact with the Interpreter. One template per operator, instantiated per storage type;
// each thread takes a contiguous share of the elements. Quantize to int8 has an AVX-512
// form (libjit_quantize_f32_i8_vnni, at the end) with the same results.
#include "libjit.h"
#include "libjit_box.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

#if defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")
#endif
/// Quantize f32 -> int8 on AVX-512 (named after the int8 kernels' ISA choice, vnni), 16
/// elements at a time: s = x R in float with R = 1 / scale (in double, rounded to float),
/// within 2^-22 |s| of the quotient x / scale (two float roundings), which the double
/// division of quantizeOne moves by 2^-53 of itself more. Where |s - rint(s)| + 2^-20 |s|
/// (in float) is below 0.5 - 2^-16 for every lane, each lane's quotient lies strictly
/// between the half-integers around rint(s), so rounding it half away from zero gives
/// rint(s), and rint(s) + offset narrowed with signed saturation is quantizeOne's result
/// (|s| < 2^19 there, and |offset| <= 2^20, so the sum is exact). Other vectors (a lane
/// near a half-integer, NaN, infinities, large quotients) and the tail take quantizeOne;
/// so does everything when R is not a normal float or |offset| > 2^20.
LIBJIT_EXPORT void libjit_quantize_f32_i8_vnni(int8_t *dst, const float *src, int64_t n,
                                               float scale, int32_t offset, int64_t tid,
                                               int64_t nthreads) {
  int64_t b, e;
  partition(n, 64, tid, nthreads, &b, &e);
  const double rd = 1.0 / double(scale), ra = rd < 0 ? -rd : rd;
  int64_t i = b;
  if (ra >= 0x1p-100 && ra <= 0x1p100 && offset >= -(1 << 20) && offset <= (1 << 20)) {
    const __m512 R = _mm512_set1_ps(float(rd)), k20 = _mm512_set1_ps(0x1p-20f),
                 hm = _mm512_set1_ps(0.5f - 0x1p-16f);
    const __m512i off = _mm512_set1_epi32(offset);
    for (; i + 16 <= e; i += 16) {
      const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(src + i), R);
      const __m512 r = _mm512_roundscale_ps(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512 g = _mm512_add_ps(_mm512_abs_ps(_mm512_sub_ps(s, r)),
                                     _mm512_mul_ps(_mm512_abs_ps(s), k20));
      if (_mm512_cmp_ps_mask(g, hm, _CMP_LT_OQ) != 0xffff) {
        for (int64_t j = i; j < i + 16; j++)
          dst[j] = quantizeOne<int8_t>(double(src[j]), scale, offset);
        continue;
      }
      const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(r), off);
      _mm_storeu_si128((__m128i *)(dst + i), _mm512_cvtsepi32_epi8(q));
    }
  }
  for (; i < e; i++)
    dst[i] = quantizeOne<int8_t>(double(src[i]), scale, offset);
}
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
