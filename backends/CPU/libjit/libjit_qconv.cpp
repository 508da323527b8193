// int8 convolution and fully connected kernels (Int8Q activations and weights, per-tensor
// or per-channel weight scales), bit-exact with the Interpreter.
//
// Arithmetic. With a = x + 128 (the activation as an unsigned byte), c = 128 + xOffset and
// fo the weight offset of output channel o, the Interpreter's accumulator
//   acc = sum_k (x_k - xOffset) (f_k - fo) = sum_k a_k f_k - fo sum_k a_k - c sum_k f_k + K c fo
// (padding taps read x = xOffset, so they add nothing, as in the Interpreter). The first
// sum is the u8 x s8 dot product the hardware has; the per-channel constant
// corr[o] = -c sum_k f_k + K c fo (+ the i32 bias of the channelwise nodes) is computed at
// compile time (codegen/EmitQuantConv.cpp); the per-pixel sum of a is taken while packing,
// only when some fo is non-zero. All of it wraps in 32 bits, equal to the exact value
// whenever that fits (|acc| <= K 255 255: K < 33000).
//
// Requantization, exactly the Interpreter's (no FMA contraction: separate statements and
// the pragma): real = accScale[o] * acc + biasReal[o] in double, q = round(real / outScale)
// (halves away from zero) + outOffset, saturated to [lo, hi] (the int8 range, or a fused
// Relu/Clip's narrower one).
//
// Dot products, four bytes at a time (one 32-bit lane holds a k-quad):
//   - vnni: vpdpbusd, 16 lanes (u8 x s8 products summed in 32 bits: no saturation);
//   - avx2: vpmaddwd on the bytes widened to 16 bits (even and odd bytes apart), 8 lanes:
//     u8 x s8 pairs sum to at most 2 * 255 * 128 in 32 bits, no saturation (vpmaddubsw,
//     which saturates pairs at 16 bits, is not used);
//   - generic: the same in plain C, 8 lanes (hosts without AVX2: x86-64 bundles).
//
// Layout. Convolution (NCHW): per image, group and tile of T pixels, the im2col patch is
// packed into scratch as [K4][T] lanes (K4 = ceil(K / 4), K = C/G KH KW) and multiplied by
// the packed weights [G][O/G rounded up to MR][K4][MR] lanes, MR output channels times T
// pixels per micro-kernel call. Fully connected: the weights [K, M] are packed as
// [M / T tiles][K4][T] lanes (the vector operand) and the input rows are read in place.
#include "libjit_defs.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace libjit {
namespace {

/// Per-channel constants, laid out by the emitter as 4 arrays of Opad entries:
/// double accScale[Opad], double biasReal[Opad], int32_t corr[Opad], int32_t fOffset[Opad].
struct QParams {
  const double *accScale, *biasReal;
  const int32_t *corr, *fOff;
};
LIBJIT_INLINE QParams qparams(const void *p, int64_t Opad) {
  const double *d = (const double *)p;
  const int32_t *i = (const int32_t *)(d + 2 * Opad);
  return {d, d + Opad, i, i + Opad};
}

/// One output: acc (the dot product less the pixel-sum term) requantized.
LIBJIT_INLINE int8_t requant(int32_t acc, double accScale, double biasReal, double outScale,
                             double outOff, double lo, double hi) {
  double prod = accScale * double(acc);
  double real = prod + biasReal;
  double q = __builtin_round(real / outScale);
  q = q + outOff;
  if (!(q >= lo))
    q = lo;
  if (q > hi)
    q = hi;
  return int8_t(q);
}

LIBJIT_INLINE uint32_t load32(const void *p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

} // namespace
} // namespace libjit

#define LIBJIT_QCONV_EXPORTS(SUFFIX)                                                          \
  LIBJIT_EXPORT void libjit_qconv_i8_##SUFFIX(                                                 \
      int8_t *out, const int8_t *in, const uint32_t *wpack, const void *params, int64_t N,     \
      int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW, int64_t KH,          \
      int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH, int64_t DW,      \
      int64_t G, int64_t xOff, float outScale, int64_t outOff, int64_t lo, int64_t hi,         \
      int64_t anyFOff, char *scratch, int64_t scratchStride, int64_t tid, int64_t nthreads) {  \
    libjit::q##SUFFIX::qconv(out, in, wpack, params, N, C, H, W, O, OH, OW, KH, KW, SH, SW,   \
                             PT, PL, DH, DW, G, xOff, outScale, outOff, lo, hi, anyFOff,       \
                             scratch, scratchStride, tid, nthreads);                           \
  }                                                                                            \
  LIBJIT_EXPORT void libjit_qfc_i8_##SUFFIX(                                                   \
      int8_t *out, const int8_t *in, const uint32_t *wpack, const void *params, int64_t N,     \
      int64_t K, int64_t M, float outScale, int64_t outOff, int64_t lo, int64_t hi,            \
      int64_t anyFOff, char *scratch, int64_t scratchStride, int64_t tid, int64_t nthreads) {  \
    libjit::q##SUFFIX::qfc(out, in, wpack, params, N, K, M, outScale, outOff, lo, hi, anyFOff, \
                           scratch, scratchStride, tid, nthreads);                             \
  }

namespace libjit {
namespace qgeneric {

/// Plain C: 8 lanes of k-quads.
struct IsaGeneric {
  static constexpr int L = 8;
  struct V {
    int32_t v[8];
  };
  static V zero() {
    V r;
    for (int i = 0; i < L; i++)
      r.v[i] = 0;
    return r;
  }
  static V load(const uint32_t *p) {
    V r;
    __builtin_memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static V bcast(uint32_t x) {
    V r;
    for (int i = 0; i < L; i++)
      r.v[i] = int32_t(x);
    return r;
  }
  /// acc + sum over the 4 bytes of each lane of u (unsigned) times s (signed).
  static V dot(V acc, V u, V s) {
    for (int i = 0; i < L; i++) {
      uint32_t a = uint32_t(u.v[i]), b = uint32_t(s.v[i]);
      int32_t sum = 0;
      for (int j = 0; j < 4; j++)
        sum += int32_t((a >> (8 * j)) & 0xff) * int32_t(int8_t((b >> (8 * j)) & 0xff));
      acc.v[i] = int32_t(uint32_t(acc.v[i]) + uint32_t(sum));
    }
    return acc;
  }
  static void store(int32_t *p, V v) { __builtin_memcpy(p, v.v, sizeof(v.v)); }
};


#define QISA IsaGeneric
#include "libjit_qconv_impl.h"
#undef QISA

} // namespace qgeneric
} // namespace libjit

LIBJIT_QCONV_EXPORTS(generic)

#if defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif
namespace libjit {
namespace qavx2 {

/// AVX2: 8 lanes; each dot is two vpmaddwd on the even and odd bytes widened to 16 bits.
struct IsaAvx2 {
  static constexpr int L = 8;
  typedef __m256i V;
  static inline __attribute__((always_inline)) V zero() {
    return _mm256_setzero_si256();
  }
  static inline __attribute__((always_inline)) V load(const uint32_t *p) {
    return _mm256_loadu_si256((const __m256i *)p);
  }
  static inline __attribute__((always_inline)) V bcast(uint32_t x) {
    return _mm256_set1_epi32(int(x));
  }
  static inline __attribute__((always_inline)) V dot(V acc, V u, V s) {
    const __m256i lo8 = _mm256_set1_epi16(0xff);
    __m256i ue = _mm256_and_si256(u, lo8), uo = _mm256_srli_epi16(u, 8);
    __m256i se = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8), so = _mm256_srai_epi16(s, 8);
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(ue, se));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(uo, so));
  }
  static inline __attribute__((always_inline)) void store(int32_t *p, V v) {
    _mm256_storeu_si256((__m256i *)p, v);
  }
};


#define QISA IsaAvx2
#include "libjit_qconv_impl.h"
#undef QISA

} // namespace qavx2
} // namespace libjit

LIBJIT_QCONV_EXPORTS(avx2)
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vnni")
#endif
namespace libjit {
namespace qvnni {

/// AVX-512 VNNI: 16 lanes, one vpdpbusd per dot.
struct IsaVnni {
  static constexpr int L = 16;
  typedef __m512i V;
  static inline __attribute__((always_inline)) V zero() {
    return _mm512_setzero_si512();
  }
  static inline __attribute__((always_inline)) V load(const uint32_t *p) {
    return _mm512_loadu_si512((const void *)p);
  }
  static inline __attribute__((always_inline)) V bcast(uint32_t x) {
    return _mm512_set1_epi32(int(x));
  }
  static inline __attribute__((always_inline)) V dot(V acc, V u, V s) {
    return _mm512_dpbusd_epi32(acc, u, s);
  }
  static inline __attribute__((always_inline)) void store(int32_t *p, V v) {
    _mm512_storeu_si512((void *)p, v);
  }
};

#define QISA IsaVnni
#include "libjit_qconv_impl.h"
#undef QISA

} // namespace qvnni
} // namespace libjit

LIBJIT_QCONV_EXPORTS(vnni)
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

// Depthwise int8 convolution (Group == C == O): per channel plane, the exact int32 sum of
// (x - xOffset) (f - fo) over the in-bounds taps, with the centred filter (f - fo, in
// [-255, 255]) as int16 from compile time, accumulated one output row at a time (the
// taps' valid column range computed once per tap, so the inner loop is a plain strided
// multiply-add that the JIT vectorises for the host); then corr[c] (the channelwise i32
// bias, else 0) and the requantization of the other kernels.
LIBJIT_EXPORT void libjit_qdwconv_i8(int8_t *out, const int8_t *in, const int16_t *w,
                                     const void *params, int64_t N, int64_t C, int64_t H,
                                     int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
                                     int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH,
                                     int64_t DW, int64_t xOff, float outScale, int64_t outOff,
                                     int64_t lo, int64_t hi, char *scratch,
                                     int64_t scratchStride, int64_t tid, int64_t nthreads) {
  using namespace libjit;
  const QParams qp = qparams(params, C);
  int32_t *acc = (int32_t *)(scratch + tid * scratchStride);
  const double dScale = double(outScale), dOff = double(outOff), dLo = double(lo),
               dHi = double(hi);
  int64_t b, e;
  partition(N * C, 1, tid, nthreads, &b, &e);
  for (int64_t pl = b; pl < e; pl++) {
    const int64_t c = pl % C;
    const int8_t *x = in + pl * H * W;
    const int16_t *wc = w + c * KH * KW;
    int8_t *y = out + pl * OH * OW;
    const double as = qp.accScale[c], br = qp.biasReal[c];
    const int32_t corr = qp.corr[c], xo = int32_t(xOff);
    for (int64_t oh = 0; oh < OH; oh++) {
      for (int64_t ow = 0; ow < OW; ow++)
        acc[ow] = 0;
      for (int64_t kh = 0; kh < KH; kh++) {
        const int64_t ih = oh * SH + kh * DH - PT;
        if (ih < 0 || ih >= H)
          continue;
        const int8_t *xr = x + ih * W;
        for (int64_t kw = 0; kw < KW; kw++) {
          const int32_t wv = wc[kh * KW + kw];
          const int64_t off = kw * DW - PL;
          // Columns ow with 0 <= ow SW + off < W.
          int64_t o0 = off >= 0 ? 0 : (-off + SW - 1) / SW;
          int64_t o1 = W - 1 - off < 0 ? 0 : (W - 1 - off) / SW + 1;
          o1 = minI(o1, OW);
          const int8_t *xs = xr + off;
          if (SW == 1)
            for (int64_t ow = o0; ow < o1; ow++)
              acc[ow] += (int32_t(xs[ow]) - xo) * wv;
          else
            for (int64_t ow = o0; ow < o1; ow++)
              acc[ow] += (int32_t(xs[ow * SW]) - xo) * wv;
        }
      }
      for (int64_t ow = 0; ow < OW; ow++)
        y[oh * OW + ow] = requant(int32_t(uint32_t(acc[ow]) + uint32_t(corr)), as, br, dScale,
                                  dOff, dLo, dHi);
    }
  }
}
