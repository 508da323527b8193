// bfloat16 matrix products: FullyConnected and MatMul with bf16 operands and result,
// float32 accumulation, the bias added in float32 and the result rounded once to bf16
// (round to nearest even, as kiln::bfloat16 and the Interpreter).
//
// B ([K x M], row-major, leading dimension ldb) is packed in bf16 pairs: panels of 16
// columns; in panel p, pair q holds for each of its 16 columns c the two elements
// {B[2q][c], B[2q+1][c]} side by side (32 bits per column, 64 bytes per pair), which is
// the layout `vdpbf16ps` multiplies against a broadcast pair of A {A[i][2q], A[i][2q+1]}:
// lane c gets acc + A[i][2q] B[2q][c] + A[i][2q+1] B[2q+1][c]. A missing row (K odd) and
// missing columns (M not a multiple of 16) are packed as zeros.
//
// _avx512bf16 uses `vdpbf16ps` (AVX512_BF16): the products of two bf16 are exact in
// float32, each of the two additions rounds in float32, and the instruction treats bf16
// denormals as zero and flushes float32 denormal results (DAZ/FTZ), so it differs from a
// float32 sum in another order only by accumulation rounding (and by values below 2^-126).
// _generic computes the same sum in plain float32 code (no DAZ), for hosts and bundle
// targets without AVX512_BF16.
#include "libjit.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace libjit {
namespace {

constexpr int64_t kPanel = 16; // columns per panel

LIBJIT_INLINE float bf16ToFloat(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

/// Round to nearest even; NaN stays a quiet NaN of the same sign (kiln::bfloat16).
LIBJIT_INLINE uint16_t floatToBf16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

/// The pair {A[2q], A[2q+1]} of row \p a as 32 bits; the missing element of an odd K is 0.
LIBJIT_INLINE uint32_t pairOf(const uint16_t *a, int64_t q, int64_t K) {
  uint32_t lo = a[2 * q];
  uint32_t hi = 2 * q + 1 < K ? a[2 * q + 1] : 0;
  return lo | (hi << 16);
}

/// Stores \p acc (bias added) of row \p y's columns [c0, c0 + n) as bf16.
LIBJIT_INLINE void storeRow(uint16_t *y, const float *acc, const uint16_t *bias, int64_t c0,
                            int64_t n) {
  for (int64_t c = 0; c < n; c++)
    y[c0 + c] = floatToBf16(acc[c] + (bias ? bf16ToFloat(bias[c0 + c]) : 0.0f));
}

/// Rows [r0, r0 + R) x panels [p0, p0 + P) in plain float32 code.
template <int R, int P>
LIBJIT_INLINE void blockGeneric(uint16_t *y, const uint16_t *x, const uint16_t *wp,
                                const uint16_t *bias, int64_t K, int64_t M, int64_t r0,
                                int64_t p0) {
  const int64_t pairs = ceilDiv(K, 2);
  float acc[R][P * kPanel];
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    for (int64_t c = 0; c < P * kPanel; c++)
      acc[r][c] = 0.0f;
  for (int64_t q = 0; q < pairs; q++) {
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++) {
      uint32_t a = pairOf(x + (r0 + r) * K, q, K);
      float a0 = bf16ToFloat(uint16_t(a)), a1 = bf16ToFloat(uint16_t(a >> 16));
      LIBJIT_UNROLL
      for (int p = 0; p < P; p++) {
        const uint16_t *b = wp + ((p0 + p) * pairs + q) * 2 * kPanel;
        for (int64_t c = 0; c < kPanel; c++) {
          float s = acc[r][p * kPanel + c] + a1 * bf16ToFloat(b[2 * c + 1]);
          acc[r][p * kPanel + c] = s + a0 * bf16ToFloat(b[2 * c]);
        }
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int p = 0; p < P; p++) {
      int64_t c0 = (p0 + p) * kPanel;
      storeRow(y + (r0 + r) * M, acc[r] + p * kPanel, bias, c0, minI(kPanel, M - c0));
    }
}

#if defined(__x86_64__)
#define LIBJIT_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/// Rows [r0, r0 + R) x panels [p0, p0 + P) with vdpbf16ps: R x P accumulators of 16 lanes.
template <int R, int P>
LIBJIT_INLINE LIBJIT_BF16_TARGET void blockAvx512(uint16_t *y, const uint16_t *x,
                                                  const uint16_t *wp, const uint16_t *bias,
                                                  int64_t K, int64_t M, int64_t r0, int64_t p0) {
  const int64_t pairs = ceilDiv(K, 2), full = K / 2;
  __m512 acc[R][P];
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    LIBJIT_UNROLL
    for (int p = 0; p < P; p++)
      acc[r][p] = _mm512_setzero_ps();
  const uint16_t *b0 = wp + p0 * pairs * 2 * kPanel;
  const int64_t panelStride = pairs * 2 * kPanel;
  for (int64_t q = 0; q < pairs; q++) {
    __m512i a[R];
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++) {
      uint32_t v;
      if (q < full)
        __builtin_memcpy(&v, x + (r0 + r) * K + 2 * q, 4);
      else
        v = pairOf(x + (r0 + r) * K, q, K);
      a[r] = _mm512_set1_epi32(int(v));
    }
    LIBJIT_UNROLL
    for (int p = 0; p < P; p++) {
      __m512i b = _mm512_loadu_si512(b0 + p * panelStride + q * 2 * kPanel);
      LIBJIT_UNROLL
      for (int r = 0; r < R; r++)
        acc[r][p] = _mm512_dpbf16_ps(acc[r][p], (__m512bh)a[r], (__m512bh)b);
    }
  }
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    LIBJIT_UNROLL
    for (int p = 0; p < P; p++) {
      int64_t c0 = (p0 + p) * kPanel;
      float out[kPanel];
      _mm512_storeu_ps(out, acc[r][p]);
      storeRow(y + (r0 + r) * M, out, bias, c0, minI(kPanel, M - c0));
    }
}
#endif

/// Runs BLOCK<R, P>(r0, p0) over rows in blocks of up to 4 and this thread's panels in
/// blocks of up to 4 (R, P compile-time, so the accumulators stay in registers).
#define LIBJIT_BF16_DISPATCH(BLOCK, ...)                                                   \
  const int64_t panels = ceilDiv(M, kPanel);                                               \
  int64_t pb, pe;                                                                          \
  partition(panels, 1, tid, nthreads, &pb, &pe);                                           \
  for (int64_t r0 = 0; r0 < N; r0 += 4) {                                                  \
    const int64_t R = minI(4, N - r0);                                                     \
    for (int64_t p0 = pb; p0 < pe; p0 += 4) {                                              \
      const int64_t P = minI(4, pe - p0);                                                  \
      switch (R * 8 + P) {                                                                 \
      case 9: BLOCK<1, 1>(__VA_ARGS__, r0, p0); break;                                     \
      case 10: BLOCK<1, 2>(__VA_ARGS__, r0, p0); break;                                    \
      case 11: BLOCK<1, 3>(__VA_ARGS__, r0, p0); break;                                    \
      case 12: BLOCK<1, 4>(__VA_ARGS__, r0, p0); break;                                    \
      case 17: BLOCK<2, 1>(__VA_ARGS__, r0, p0); break;                                    \
      case 18: BLOCK<2, 2>(__VA_ARGS__, r0, p0); break;                                    \
      case 19: BLOCK<2, 3>(__VA_ARGS__, r0, p0); break;                                    \
      case 20: BLOCK<2, 4>(__VA_ARGS__, r0, p0); break;                                    \
      case 25: BLOCK<3, 1>(__VA_ARGS__, r0, p0); break;                                    \
      case 26: BLOCK<3, 2>(__VA_ARGS__, r0, p0); break;                                    \
      case 27: BLOCK<3, 3>(__VA_ARGS__, r0, p0); break;                                    \
      case 28: BLOCK<3, 4>(__VA_ARGS__, r0, p0); break;                                    \
      case 33: BLOCK<4, 1>(__VA_ARGS__, r0, p0); break;                                    \
      case 34: BLOCK<4, 2>(__VA_ARGS__, r0, p0); break;                                    \
      case 35: BLOCK<4, 3>(__VA_ARGS__, r0, p0); break;                                    \
      default: BLOCK<4, 4>(__VA_ARGS__, r0, p0); break;                                    \
      }                                                                                    \
    }                                                                                      \
  }

} // namespace
} // namespace libjit

using namespace libjit;

LIBJIT_EXPORT int64_t libjit_packed_b_bf16_elems(int64_t K, int64_t M) {
  return ceilDiv(M, kPanel) * kPanel * ceilDiv(K, 2) * 2;
}

LIBJIT_EXPORT void libjit_pack_b_bf16(uint16_t *dst, const uint16_t *B, int64_t K, int64_t M,
                                      int64_t ldb) {
  const int64_t pairs = ceilDiv(K, 2), panels = ceilDiv(M, kPanel);
  for (int64_t p = 0; p < panels; p++)
    for (int64_t q = 0; q < pairs; q++) {
      uint16_t *d = dst + (p * pairs + q) * 2 * kPanel;
      for (int64_t c = 0; c < kPanel; c++) {
        int64_t col = p * kPanel + c;
        bool in = col < M;
        d[2 * c] = in ? B[2 * q * ldb + col] : 0;
        d[2 * c + 1] = in && 2 * q + 1 < K ? B[(2 * q + 1) * ldb + col] : 0;
      }
    }
}

LIBJIT_EXPORT void libjit_fc_bf16_generic(uint16_t *out, const uint16_t *in,
                                          const uint16_t *packedW, const uint16_t *bias,
                                          int64_t N, int64_t K, int64_t M, int64_t tid,
                                          int64_t nthreads) {
  LIBJIT_BF16_DISPATCH(blockGeneric, out, in, packedW, bias, K, M)
}

#if defined(__x86_64__)
LIBJIT_EXPORT LIBJIT_BF16_TARGET void
libjit_fc_bf16_avx512bf16(uint16_t *out, const uint16_t *in, const uint16_t *packedW,
                          const uint16_t *bias, int64_t N, int64_t K, int64_t M, int64_t tid,
                          int64_t nthreads) {
  LIBJIT_BF16_DISPATCH(blockAvx512, out, in, packedW, bias, K, M)
}
#endif
