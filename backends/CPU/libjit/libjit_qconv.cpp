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
// Layout. Convolution (NCHW): the packed weights are [G][O/G rounded up to MR][K4][MR]
// lanes, MR output channels times T pixels per micro-kernel call. Windowed layers (the
// direct path, directConv) lay the group's input out once per image as k-quad planes split
// by stride phase and read each tap's patch in place (K4 = ceil(C/G / 4) KH KW, k ordered
// channel quad, tap, channel); 1x1 stride-1 layers pack the patch of up to 8 tiles as
// [K4][TB] lanes (K4 = ceil(C/G / 4)); other layers (more than 64 taps, strides above 16)
// pack each tile's im2col patch as [K4][T] lanes (K4 = ceil(K / 4), K = C/G KH KW). Fully connected: the weights [K, M] are packed as
// [M / T tiles][K4][T] lanes (the vector operand) and the input rows are read in place.
// MatMul and BatchMatMul (qbmm) are fully connected layers with no bias, one per batch:
// each batch's right operand packed so, at compile time or per run (libjit_qpack_bmm_rt).
#include "libjit.h"
#include "libjit_qround.h"
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
  return qroundI8(prod + biasReal, outScale, outOff, lo, hi);
}

/// The output side of the requantization of one output channel.
struct RQ {
  double as, br, scale, off, lo, hi;
};

/// The vector kernels' fast requantization of one channel (requantRow of the AVX2 and VNNI
/// ISAs). With A = as / scale and B = br / scale (in double, then rounded to float), the
/// float s = A acc + B is the quotient x = (as acc + br) / scale of requant() within
/// 5.02 2^-24 (|A acc| + |B|) of it (three float roundings of the product, two of the sum,
/// those of the double path 2^-29 times smaller), which is below
/// thr = 2^-20 (|s| + 2 |B|) (|A acc| <= |s| + |B|). Let S = max(|lo - off|, |hi - off|) + 1
/// and h = 0.5 - 2^-20 S - 2^-19 |B| (> 0, rounded down to a float), and e = |s - rint(s)|.
/// Where e < h for every lane of a vector, the vector's result is clamp(rint(s), lo - off,
/// hi - off) + off, bit for bit requant()'s:
///  - |s| <= S: thr <= 2^-20 S + 2^-19 |B|, so e + thr < 0.5: x lies strictly between the
///    same two half-integers as s, round-half-away-from-zero of x is rint(s) (no tie);
///  - s > S (s < -S alike): x > s (1 - 2^-20) - 2^-19 |B| > S - 0.5 >= hi - off + 0.5, so
///    round(x) + off > hi and requant() saturates at hi, as clamp(rint(s)) + off does
///    (rint(s) > S - 1 >= hi - off).
/// A vector with a lane that near a half-integer (a few in 10^4 lanes: h is within 2^-11
/// of 0.5 for 8-bit results), and rows whose constants are out of the ranges below (float
/// overflow or subnormals, offsets past 2^20, h <= 0), take the double path. (The bound of
/// each lane's own |s| in place of S, as an earlier form had, costs two more operations
/// per vector.)
struct FastRQ {
  float A, B, hmc, loF, hiF;
  int32_t off;
};
/// The largest float not above \p v (v > 0, below 1).
LIBJIT_INLINE float floatAtMost(double v) {
  float f = float(v);
  if (double(f) > v) {
    uint32_t bits;
    __builtin_memcpy(&bits, &f, 4);
    bits--;
    __builtin_memcpy(&f, &bits, 4);
  }
  return f;
}
LIBJIT_INLINE bool fastRequantSetup(const RQ &rq, FastRQ &f) {
  const double A = rq.as / rq.scale, B = rq.br / rq.scale;
  auto inRange = [](double v) {
    const double m = v < 0 ? -v : v;
    return m == 0.0 || (m >= 0x1p-100 && m <= 0x1p90); // false for NaN and infinities
  };
  if (!inRange(A) || !inRange(B) || !(rq.off >= -0x1p20 && rq.off <= 0x1p20) ||
      !(rq.lo >= -0x1p20 && rq.hi <= 0x1p20))
    return false;
  const double dl = rq.lo - rq.off, dh = rq.hi - rq.off;
  const double S = (dl < 0 ? -dl : dl) > (dh < 0 ? -dh : dh) ? (dl < 0 ? -dl : dl) + 1
                                                               : (dh < 0 ? -dh : dh) + 1;
  const double h = 0.5 - 0x1p-20 * S - 0x1p-19 * (B < 0 ? -B : B);
  if (!(h > 0x1p-4))
    return false;
  f.A = float(A), f.B = float(B);
  f.hmc = floatAtMost(h);
  f.loF = float(dl), f.hiF = float(dh);
  f.off = int32_t(rq.off);
  return true;
}

/// requant() of outputs [j0, n): acc[j] + corr - fo colsum[j] (colsum null: no pixel term).
LIBJIT_INLINE void requantTail(int8_t *y, const int32_t *acc, int64_t j0, int64_t n,
                               int32_t corr, int32_t fo, const int32_t *colsum, const RQ &rq) {
  for (int64_t j = j0; j < n; j++) {
    uint32_t a = uint32_t(acc[j]) + uint32_t(corr);
    if (colsum)
      a -= uint32_t(fo) * uint32_t(colsum[j]);
    y[j] = requant(int32_t(a), rq.as, rq.br, rq.scale, rq.off, rq.lo, rq.hi);
  }
}

/// The i32 result of outputs [0, n) (ONNX ConvInteger, MatMulInteger): acc[j] + corr -
/// fo colsum[j] (colsum null: no pixel term), wrapping in 32 bits as the Interpreter's.
LIBJIT_INLINE void storeRow32(int32_t *y, const int32_t *acc, int64_t n, int32_t corr,
                              int32_t fo, const int32_t *colsum) {
  for (int64_t j = 0; j < n; j++) {
    uint32_t a = uint32_t(acc[j]) + uint32_t(corr);
    if (colsum)
      a -= uint32_t(fo) * uint32_t(colsum[j]);
    y[j] = int32_t(a);
  }
}

/// The depthwise kernel's padded plane (qdwconv): Hp rows of Wr int16, each row the Wp
/// padded columns grouped in SW phases, each phase followed by L zero columns.
LIBJIT_INLINE void dwPaddedDims(int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH,
                                int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,
                                int64_t DH, int64_t DW, int64_t L, int64_t *Hp, int64_t *Wp,
                                int64_t *Wr) {
  *Hp = maxI(PT + H, (OH - 1) * SH + (KH - 1) * DH + 1);
  *Wp = maxI(PL + W, (OW - 1) * SW + (KW - 1) * DW + 1);
  int64_t r = 0;
  for (int64_t ph = 0; ph < SW; ph++)
    r += (ph < *Wp ? (*Wp - ph + SW - 1) / SW : 0) + L;
  *Wr = r;
}
/// (Stride 2 also uses one line of Wp + 1 int16 after the plane: the depthwise emitter
/// reserves Hp + 1 rows.)
/// Bytes of the depthwise kernel's accumulators (OH OW + L int32, 64-byte aligned).
LIBJIT_INLINE int64_t dwAccBytes(int64_t OH, int64_t OW, int64_t L) {
  return ((OH * OW + L) * 4 + 63) / 64 * 64;
}

/// The stride-1 depthwise planes (qdwconv, flat): int16 entries of the padded plane (Hp Wp,
/// then the zeroed slack the last vectors and the pair plane read) rounded up to 64 bytes,
/// and int32 entries of the pair plane. The emitter reserves the same.
LIBJIT_INLINE int64_t dwFlatXpElems(int64_t Hp, int64_t Wp, int64_t L) {
  return ((Hp * Wp + 2 * L + 2 * Wp) * 2 + 63) / 64 * 32;
}
LIBJIT_INLINE int64_t dwFlatPairElems(int64_t Hp, int64_t Wp, int64_t L) {
  return Hp * Wp + 2 * L + Wp;
}
/// Planes of xs int16 (dwFlatXpElems) the stride-1 path without a pair plane builds before
/// computing them (qdwconv's dwFlatRun): up to 4 within 16 KB. The emitter reserves the same.
LIBJIT_INLINE int64_t dwFlatBatch(int64_t xs) {
  return maxI(1, minI(4, 8192 / xs));
}

/// The stride-2 depthwise planes (qdwconv, flat2): rows of \p Wq int32 entries (2 Wq int16,
/// Wq = ceil(Wp / 2)), \p Hq = ceil(Hp / 2) rows per row parity, and \p pe int32 entries per
/// plane (its rows, then the zeroed slack the last vectors read), a multiple of 16. The
/// emitter reserves 2 pe entries.
LIBJIT_INLINE void dwFlat2Dims(int64_t Hp, int64_t Wp, int64_t OH, int64_t KH, int64_t KW,
                               int64_t L, int64_t *Wq, int64_t *Hq, int64_t *pe) {
  *Wq = (Wp + 1) / 2;
  *Hq = (Hp + 1) / 2;
  const int64_t nv = (OH * *Wq + L - 1) / L;
  const int64_t reach = nv * L + ((KH - 1) / 2) * *Wq + (KW + 1) / 2;
  *pe = (maxI(*Hq * *Wq, reach) + 15) / 16 * 16;
}

/// Whether qconv takes the direct path (convTileDirect in libjit_qconv_impl.h): every
/// layer but the 1x1 stride-1 unpadded ones (packPointwise), up to 64 taps and strides up
/// to 16; with 8 lanes (AVX2, generic) not for fewer than 4 input channels per group (the
/// 3-channel stems: the direct path pads their quads to 4 channels, which costs more than
/// the im2col copy where the dot product is slower). The emitter (EmitQuantConv.cpp) packs
/// the weights for it.
LIBJIT_INLINE bool directConv(int64_t KH, int64_t KW, int64_t SH, int64_t SW, bool pointwise,
                              int64_t cg, int64_t lanes) {
  return !pointwise && KH * KW <= 64 && SH <= 16 && SW <= 16 && (lanes == 16 || cg >= 4);
}
/// The entries (uint32) of one block of the direct path: the padded plane split by phase
/// (SH SW planes of ceil(Hp / SH) x ceil(Wp / SW)) and T zero entries, rounded up to 16.
LIBJIT_INLINE int64_t directQStride(int64_t Hp, int64_t Wp, int64_t SH, int64_t SW,
                                    int64_t T) {
  return (SH * SW * ((Hp + SH - 1) / SH) * ((Wp + SW - 1) / SW) + T + 15) / 16 * 16;
}
/// Bytes of the direct path's scratch before its quad planes (acc of 8 rows: kAccRows,
/// colsum, the fast requantization constants of Opad channels), rounded up to 64.
LIBJIT_INLINE int64_t directFixedBytes(int64_t Opad, int64_t T) {
  static_assert(sizeof(FastRQ) == 24, "the emitter reserves 24 bytes per FastRQ");
  return ((8 + 1) * T * 4 + Opad * int64_t(sizeof(FastRQ) + 1) + 63) / 64 * 64;
}

/// The most pixels per patch of the pointwise path (qconvPointwise): whole tiles of T, up
/// to 8, while the patch (K4 TB quads) stays within 16 KB. The emitter reserves the same.
LIBJIT_INLINE int64_t pointwiseTB(int64_t K4, int64_t T) {
  const int64_t m = 4096 / (K4 * T);
  return T * (m < 1 ? 1 : m > 8 ? 8 : m);
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
    libjit::q##SUFFIX::qconv(out, nullptr, in, wpack, params, N, C, H, W, O, OH, OW, KH, KW,  \
                             SH, SW, PT, PL, DH, DW, G, xOff, outScale, outOff, lo, hi,        \
                             anyFOff, scratch, scratchStride, tid, nthreads);                  \
  }                                                                                            \
  LIBJIT_EXPORT void libjit_qconv_i32_##SUFFIX(                                                \
      int32_t *out, const int8_t *in, const uint32_t *wpack, const void *params, int64_t N,    \
      int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW, int64_t KH,          \
      int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH, int64_t DW,      \
      int64_t G, int64_t xOff, int64_t anyFOff, char *scratch, int64_t scratchStride,          \
      int64_t tid, int64_t nthreads) {                                                         \
    libjit::q##SUFFIX::qconv(nullptr, out, in, wpack, params, N, C, H, W, O, OH, OW, KH, KW,  \
                             SH, SW, PT, PL, DH, DW, G, xOff, 1.0f, 0, -128, 127, anyFOff,     \
                             scratch, scratchStride, tid, nthreads);                           \
  }                                                                                            \
  LIBJIT_EXPORT void libjit_qfc_i8_##SUFFIX(                                                   \
      int8_t *out, const int8_t *in, const uint32_t *wpack, const void *params, int64_t N,     \
      int64_t K, int64_t M, float outScale, int64_t outOff, int64_t lo, int64_t hi,            \
      int64_t anyFOff, char *scratch, int64_t scratchStride, int64_t tid, int64_t nthreads) {  \
    libjit::q##SUFFIX::qfc(out, nullptr, in, wpack, params, N, K, M, outScale, outOff, lo, hi, \
                           anyFOff, scratch, scratchStride, tid, nthreads);                    \
  }                                                                                            \
  LIBJIT_EXPORT void libjit_qfc_i32_##SUFFIX(                                                  \
      int32_t *out, const int8_t *in, const uint32_t *wpack, const void *params, int64_t N,    \
      int64_t K, int64_t M, int64_t anyFOff, char *scratch, int64_t scratchStride,             \
      int64_t tid, int64_t nthreads) {                                                         \
    libjit::q##SUFFIX::qfc(nullptr, out, in, wpack, params, N, K, M, 1.0f, 0, -128, 127,       \
                           anyFOff, scratch, scratchStride, tid, nthreads);                    \
  }                                                                                            \
  LIBJIT_EXPORT void libjit_qbmm_i8_##SUFFIX(                                                  \
      int8_t *out, const int8_t *in, const uint32_t *wpack, const void *params, int64_t B,     \
      int64_t N, int64_t K, int64_t M, int64_t wStride, int64_t pStride, float outScale,       \
      int64_t outOff, int64_t anyFOff, char *scratch, int64_t scratchStride, int64_t tid,      \
      int64_t nthreads) {                                                                      \
    libjit::q##SUFFIX::qbmm(out, in, wpack, params, B, N, K, M, wStride, pStride, outScale,    \
                            outOff, anyFOff, scratch, scratchStride, tid, nthreads);           \
  }                                                                                            \
  LIBJIT_EXPORT void libjit_qdwconv_i8_##SUFFIX(                                               \
      int8_t *out, const int8_t *in, const int16_t *w, const void *params, int64_t N,          \
      int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW,         \
      int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH, int64_t DW, int64_t xOff,    \
      float outScale, int64_t outOff, int64_t lo, int64_t hi, char *scratch,                   \
      int64_t scratchStride, int64_t tid, int64_t nthreads) {                                  \
    libjit::q##SUFFIX::qdwconv(out, in, w, params, N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, \
                               DH, DW, xOff, outScale, outOff, lo, hi, scratch, scratchStride, \
                               tid, nthreads);                                                 \
  }

namespace libjit {
namespace qgeneric {

/// Plain C: 8 lanes of k-quads.
struct IsaGeneric {
  static constexpr int L = 8;
  static constexpr bool kDwLanes = false; ///< no channels-as-lanes depthwise path
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
  /// acc + (L int16 at p, widened) times w, in wrapping 32-bit arithmetic.
  static V mla16(V acc, const int16_t *p, int32_t w) {
    for (int i = 0; i < L; i++)
      acc.v[i] = int32_t(uint32_t(acc.v[i]) + uint32_t(int32_t(p[i]) * w));
    return acc;
  }
  static void requantRow(int8_t *y, const int32_t *acc, int64_t n, int32_t corr, int32_t fo,
                         const int32_t *colsum, const RQ &rq) {
    requantTail(y, acc, 0, n, corr, fo, colsum, rq);
  }
  static void requantRowF(int8_t *y, const int32_t *acc, int64_t n, int32_t corr, int32_t fo,
                          const int32_t *colsum, const RQ &rq, const FastRQ &, bool) {
    requantTail(y, acc, 0, n, corr, fo, colsum, rq);
  }
  /// d[q] = (x[q], x[q + dw]) as the low and high int16 of an int32, q < n.
  static void pairs16(int32_t *d, const int16_t *x, int64_t dw, int64_t n) {
    for (int64_t q = 0; q < n; q++)
      d[q] = int32_t(uint32_t(uint16_t(x[q])) | (uint32_t(uint16_t(x[q + dw])) << 16));
  }
  /// acc + the 2 x int16 dot product of each pair (p[2i], p[2i + 1]) with the pair w.
  static V dot16x2At(V acc, const int16_t *p, uint32_t w) {
    const int32_t w0 = int16_t(w & 0xffff), w1 = int16_t(w >> 16);
    for (int i = 0; i < L; i++)
      acc.v[i] = int32_t(uint32_t(acc.v[i]) + uint32_t(p[2 * i] * w0 + p[2 * i + 1] * w1));
    return acc;
  }
  /// lo, hi: the lanes of e and o alternating (e0, o0, e1, o1, ...).
  static void interleave(V e, V o, V &lo, V &hi) {
    for (int i = 0; i < L; i++) {
      (i < L / 2 ? lo : hi).v[(2 * i) % L] = e.v[i];
      (i < L / 2 ? lo : hi).v[(2 * i) % L + 1] = o.v[i];
    }
  }
  /// One padded row of the quad path's byte plane: d[c] = x[c - PL] ^ 0x80 for c in
  /// [PL, PL + W), \p pad elsewhere in [0, Wp).
  static void flipRow(uint8_t *d, const int8_t *x, int64_t W, int64_t PL, int64_t Wp,
                      uint8_t pad) {
    for (int64_t c = 0; c < Wp; c++)
      d[c] = c >= PL && c < PL + W ? uint8_t(x[c - PL]) ^ 0x80 : pad;
  }
  /// d[4 i + r] = p_r[i] for 4 i + r < m (the lanes of four vectors interleaved).
  static void interleave4(int32_t *d, V p0, V p1, V p2, V p3, int64_t m) {
    const V *p[4] = {&p0, &p1, &p2, &p3};
    for (int64_t j = 0; j < m; j++)
      d[j] = p[j % 4]->v[j / 4];
  }
  /// d[i] = x[i] - xo for i < n.
  static void centre16(int16_t *d, const int8_t *x, int64_t n, int32_t xo) {
    for (int64_t i = 0; i < n; i++)
      d[i] = int16_t(int32_t(x[i]) - xo);
  }
  /// acc + the 2 x int16 dot product of each of L int32 at p with the pair w.
  static V dot16x2(V acc, const int32_t *p, uint32_t w) {
    const int32_t w0 = int16_t(w & 0xffff), w1 = int16_t(w >> 16);
    for (int i = 0; i < L; i++) {
      const int32_t x0 = int16_t(uint32_t(p[i]) & 0xffff), x1 = int16_t(uint32_t(p[i]) >> 16);
      acc.v[i] = int32_t(uint32_t(acc.v[i]) + uint32_t(x0 * w0 + x1 * w1));
    }
    return acc;
  }
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
  // Channels as lanes (qdwconv's dwLanesRun): lane c of a vector is channel c of a block.
  static constexpr bool kDwLanes = true;
  /// The first \p n (<= 32) bytes at \p p as a vector (the rest 0; bytes past n not read).
  static inline __attribute__((always_inline)) V lnLoadBytes(const int8_t *p, int64_t n) {
    if (n >= 32)
      return _mm256_loadu_si256((const __m256i *)p);
    alignas(32) int8_t t[32] = {};
    __builtin_memcpy(t, p, size_t(n));
    return _mm256_load_si256((const __m256i *)t);
  }
  /// The first \p n (<= 32) bytes of \p v stored at \p p.
  static inline __attribute__((always_inline)) void lnStoreBytes(int8_t *p, V v, int64_t n) {
    if (n >= 32)
      return _mm256_storeu_si256((__m256i *)p, v);
    alignas(32) int8_t t[32];
    _mm256_store_si256((__m256i *)t, v);
    __builtin_memcpy(p, t, size_t(n));
  }
  /// r[i] lane j <- r[j] lane i (8 x 8 32-bit lanes).
  static inline __attribute__((always_inline)) void lnTranspose(V *r) {
    V t[8];
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
      r[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
      r[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
      r[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
      r[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
      t[i] = _mm256_permute2x128_si256(r[i], r[i + 4], 0x20);
      t[i + 4] = _mm256_permute2x128_si256(r[i], r[i + 4], 0x31);
    }
    for (int i = 0; i < 8; i++)
      r[i] = t[i];
  }
  /// Byte \p j of each 32-bit lane, sign-extended, less \p vo.
  static inline __attribute__((always_inline)) V lnByte(V z, int j, V vo) {
    return _mm256_sub_epi32(_mm256_srai_epi32(_mm256_slli_epi32(z, 24 - 8 * j), 24), vo);
  }
  /// The lanes of a, b, c, d narrowed with signed saturation to bytes 0-3 of each lane.
  static inline __attribute__((always_inline)) V lnPack4(V a, V b, V c, V d) {
    // Per 128-bit lane: bytes a0-a3, b0-b3, c0-c3, d0-d3, then a 4 x 4 byte transpose.
    const V x = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    return _mm256_shuffle_epi8(x, _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7,
                                                   11, 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10,
                                                   14, 3, 7, 11, 15));
  }
  /// acc + the low int16 of x times that of w (w's high int16 0), exact.
  static inline __attribute__((always_inline)) V lnDot(V acc, V x, V w) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(x, w));
  }
  static inline __attribute__((always_inline)) V lnAdd(V a, V b) {
    return _mm256_add_epi32(a, b);
  }
  typedef __m256 F;
  static inline __attribute__((always_inline)) F lnLoadF(const float *p) {
    return _mm256_loadu_ps(p);
  }
  /// requant() of each lane with the lanes' own accScale and biasReal (requant4).
  static inline __attribute__((always_inline)) V lnRequantExact(V a, const double *as,
                                                                const double *br, const RQ &rq) {
    const __m256d sc = _mm256_set1_pd(rq.scale), off = _mm256_set1_pd(rq.off),
                  lo = _mm256_set1_pd(rq.lo), hi = _mm256_set1_pd(rq.hi);
    const __m128i q0 = requant4(_mm256_castsi256_si128(a), _mm256_loadu_pd(as),
                                _mm256_loadu_pd(br), sc, off, lo, hi);
    const __m128i q1 = requant4(_mm256_extracti128_si256(a, 1), _mm256_loadu_pd(as + 4),
                                _mm256_loadu_pd(br + 4), sc, off, lo, hi);
    return _mm256_set_m128i(q1, q0);
  }
  /// FastRQ per lane (A, B, hmc: the lanes' constants): the quotient's nearest integer r;
  /// true where every lane is far enough from a half-integer (as requantRowF).
  static inline __attribute__((always_inline)) bool lnQuot(V a, F A, F B, F hmc, F &r) {
    const F sv = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a), A), B);
    r = _mm256_round_ps(sv, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const F e = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(sv, r));
    return _mm256_movemask_ps(_mm256_cmp_ps(e, hmc, _CMP_LT_OQ)) == 0xff;
  }
  /// clamp(r, loF, hiF) + off as int32 (\p sat unused: the clamp covers the int8 range).
  static inline __attribute__((always_inline)) V lnFinish(F r, bool, float loF, float hiF,
                                                          int32_t off) {
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(loF)), _mm256_set1_ps(hiF));
    return _mm256_add_epi32(_mm256_cvtps_epi32(r), _mm256_set1_epi32(off));
  }
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
  static inline __attribute__((always_inline)) V mla16(V acc, const int16_t *p, int32_t w) {
    __m256i x = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_add_epi32(acc, _mm256_mullo_epi32(x, _mm256_set1_epi32(w)));
  }
  static inline __attribute__((always_inline)) void pairs16(int32_t *d, const int16_t *x,
                                                            int64_t dw, int64_t n) {
    int64_t q = 0;
    for (; q + 8 <= n; q += 8) {
      __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + q)));
      __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + q + dw)));
      _mm256_storeu_si256((__m256i *)(d + q), _mm256_or_si256(a, _mm256_slli_epi32(b, 16)));
    }
    for (; q < n; q++)
      d[q] = int32_t(uint32_t(uint16_t(x[q])) | (uint32_t(uint16_t(x[q + dw])) << 16));
  }
  static inline __attribute__((always_inline)) V dot16x2At(V acc, const int16_t *p, uint32_t w) {
    return dot16x2(acc, (const int32_t *)(const void *)p, w);
  }
  static inline __attribute__((always_inline)) void interleave(V e, V o, V &lo, V &hi) {
    const __m256i a = _mm256_unpacklo_epi32(e, o), b = _mm256_unpackhi_epi32(e, o);
    lo = _mm256_permute2x128_si256(a, b, 0x20);
    hi = _mm256_permute2x128_si256(a, b, 0x31);
  }
  static inline __attribute__((always_inline)) void centre16(int16_t *d, const int8_t *x,
                                                             int64_t n, int32_t xo) {
    const __m256i vo = _mm256_set1_epi16(int16_t(xo));
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256((__m256i *)(d + i),
                          _mm256_sub_epi16(_mm256_cvtepi8_epi16(
                                               _mm_loadu_si128((const __m128i *)(x + i))),
                                           vo));
    for (; i < n; i++)
      d[i] = int16_t(int32_t(x[i]) - xo);
  }
  static void flipRow(uint8_t *d, const int8_t *x, int64_t W, int64_t PL, int64_t Wp,
                      uint8_t pad) {
    libjit::qgeneric::IsaGeneric::flipRow(d, x, W, PL, Wp, pad);
  }
  /// d[4 i + r] = p_r[i] for 4 i + r < m (the lanes of four vectors interleaved).
  static void interleave4(int32_t *d, V p0, V p1, V p2, V p3, int64_t m) {
    int32_t t[4][8];
    store(t[0], p0), store(t[1], p1), store(t[2], p2), store(t[3], p3);
    for (int64_t j = 0; j < m; j++)
      d[j] = t[j % 4][j / 4];
  }
  static inline __attribute__((always_inline)) V dot16x2(V acc, const int32_t *p, uint32_t w) {
    return _mm256_add_epi32(
        acc, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)p), _mm256_set1_epi32(int(w))));
  }
  /// requant() on 4 doubles: the same IEEE operations in the same order, round half away
  /// from zero as t = trunc(x) plus the sign of x where |x - t| >= 0.5 (x - t is exact).
  static inline __attribute__((always_inline)) __m128i requant4(__m128i a, __m256d as,
                                                                __m256d br, __m256d sc,
                                                                __m256d off, __m256d lo,
                                                                __m256d hi) {
    const __m256d sign = _mm256_set1_pd(-0.0), half = _mm256_set1_pd(0.5),
                  one = _mm256_set1_pd(1.0);
    __m256d prod = _mm256_mul_pd(as, _mm256_cvtepi32_pd(a));
    __m256d real = _mm256_add_pd(prod, br);
    __m256d x = _mm256_div_pd(real, sc);
    __m256d t = _mm256_round_pd(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256d d = _mm256_andnot_pd(sign, _mm256_sub_pd(x, t));
    __m256d step = _mm256_or_pd(_mm256_and_pd(x, sign), one);
    __m256d q = _mm256_add_pd(t, _mm256_and_pd(_mm256_cmp_pd(d, half, _CMP_GE_OQ), step));
    q = _mm256_add_pd(q, off);
    q = _mm256_max_pd(q, lo); // NaN -> lo, as !(q >= lo)
    q = _mm256_min_pd(q, hi);
    return _mm256_cvttpd_epi32(q);
  }
  /// y[j] = requant(acc[j] + corr - fo colsum[j]) for j < n (colsum null: no pixel term).
  static inline __attribute__((always_inline)) void requantRow(int8_t *y, const int32_t *acc,
                                                               int64_t n, int32_t corr,
                                                               int32_t fo, const int32_t *colsum,
                                                               const RQ &rq) {
    FastRQ f{};
    const bool fast = fastRequantSetup(rq, f);
    requantRowF(y, acc, n, corr, fo, colsum, rq, f, fast);
  }
  /// requantRow with the channel's FastRQ set up by the caller (\p fast: fastRequantSetup's
  /// result).
  static inline __attribute__((always_inline)) void requantRowF(
      int8_t *y, const int32_t *acc, int64_t n, int32_t corr, int32_t fo, const int32_t *colsum,
      const RQ &rq, const FastRQ &f, bool fast) {
    const __m256d as = _mm256_set1_pd(rq.as), br = _mm256_set1_pd(rq.br),
                  sc = _mm256_set1_pd(rq.scale), off = _mm256_set1_pd(rq.off),
                  lo = _mm256_set1_pd(rq.lo), hi = _mm256_set1_pd(rq.hi);
    const __m256i vc = _mm256_set1_epi32(corr), vf = _mm256_set1_epi32(fo);
    const __m256 fA = _mm256_set1_ps(f.A), fB = _mm256_set1_ps(f.B),
                 hmc = _mm256_set1_ps(f.hmc), loF = _mm256_set1_ps(f.loF),
                 hiF = _mm256_set1_ps(f.hiF), fsign = _mm256_set1_ps(-0.0f);
    const __m256i fOff = _mm256_set1_epi32(f.off);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      __m256i a = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(acc + j)), vc);
      if (colsum)
        a = _mm256_sub_epi32(
            a, _mm256_mullo_epi32(vf, _mm256_loadu_si256((const __m256i *)(colsum + j))));
      if (fast) { // FastRQ
        __m256 sv = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a), fA), fB);
        __m256 r = _mm256_round_ps(sv, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 e = _mm256_andnot_ps(fsign, _mm256_sub_ps(sv, r));
        if (_mm256_movemask_ps(_mm256_cmp_ps(e, hmc, _CMP_LT_OQ)) == 0xff) {
          r = _mm256_min_ps(_mm256_max_ps(r, loF), hiF);
          __m256i qi = _mm256_add_epi32(_mm256_cvtps_epi32(r), fOff);
          __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
          _mm_storel_epi64((__m128i *)(y + j), _mm_packs_epi16(w, w));
          continue;
        }
      }
      __m128i q0 = requant4(_mm256_castsi256_si128(a), as, br, sc, off, lo, hi);
      __m128i q1 = requant4(_mm256_extracti128_si256(a, 1), as, br, sc, off, lo, hi);
      __m128i w = _mm_packs_epi32(q0, q1);
      _mm_storel_epi64((__m128i *)(y + j), _mm_packs_epi16(w, w));
    }
    requantTail(y, acc, j, n, corr, fo, colsum, rq);
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
  // Channels as lanes (qdwconv's dwLanesRun): lane c of a vector is channel c of a block.
  static constexpr bool kDwLanes = true;
  /// The first \p n (<= 64) bytes at \p p as a vector (the rest 0; bytes past n not read).
  static inline __attribute__((always_inline)) V lnLoadBytes(const int8_t *p, int64_t n) {
    return _mm512_maskz_loadu_epi8(n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1, p);
  }
  /// The first \p n (<= 64) bytes of \p v stored at \p p.
  static inline __attribute__((always_inline)) void lnStoreBytes(int8_t *p, V v, int64_t n) {
    _mm512_mask_storeu_epi8(p, n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1, v);
  }
  /// r[i] lane j <- r[j] lane i (16 x 16 32-bit lanes).
  static inline __attribute__((always_inline)) void lnTranspose(V *r) {
    V t[16];
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    // r[i]: rows of 4 (i / 4), 32-bit lanes ordered within each 128-bit lane.
    for (int i = 0; i < 16; i += 4) {
      r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
      r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
      r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
      r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
      t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
      t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
      t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
      t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
      r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
      r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
      r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
      r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
    }
  }
  /// Byte \p j of each 32-bit lane, sign-extended, less \p vo.
  static inline __attribute__((always_inline)) V lnByte(V z, int j, V vo) {
    return _mm512_sub_epi32(_mm512_srai_epi32(_mm512_slli_epi32(z, 24 - 8 * j), 24), vo);
  }
  /// The lanes of a, b, c, d narrowed with signed saturation to bytes 0-3 of each lane.
  static inline __attribute__((always_inline)) V lnPack4(V a, V b, V c, V d) {
    // Per 128-bit lane: bytes a0-a3, b0-b3, c0-c3, d0-d3, then a 4 x 4 byte transpose.
    const V x = _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
    return _mm512_shuffle_epi8(x, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13,
                                                                       2, 6, 10, 14, 3, 7, 11,
                                                                       15)));
  }
  /// acc + the low int16 of x times that of w (w's high int16 0), exact.
  static inline __attribute__((always_inline)) V lnDot(V acc, V x, V w) {
    return _mm512_dpwssd_epi32(acc, x, w);
  }
  static inline __attribute__((always_inline)) V lnAdd(V a, V b) {
    return _mm512_add_epi32(a, b);
  }
  typedef __m512 F;
  static inline __attribute__((always_inline)) F lnLoadF(const float *p) {
    return _mm512_loadu_ps(p);
  }
  /// requant() of each lane with the lanes' own accScale and biasReal (requant8).
  static inline __attribute__((always_inline)) V lnRequantExact(V a, const double *as,
                                                                const double *br, const RQ &rq) {
    const __m512d sc = _mm512_set1_pd(rq.scale), off = _mm512_set1_pd(rq.off),
                  lo = _mm512_set1_pd(rq.lo), hi = _mm512_set1_pd(rq.hi);
    const __m256i q0 = requant8(_mm512_castsi512_si256(a), _mm512_loadu_pd(as),
                                _mm512_loadu_pd(br), sc, off, lo, hi);
    const __m256i q1 = requant8(_mm512_extracti64x4_epi64(a, 1), _mm512_loadu_pd(as + 8),
                                _mm512_loadu_pd(br + 8), sc, off, lo, hi);
    return _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
  }
  /// FastRQ per lane (A, B, hmc: the lanes' constants): the quotient's nearest integer r;
  /// true where every lane is far enough from a half-integer (RowRq::quotient).
  static inline __attribute__((always_inline)) bool lnQuot(V a, F A, F B, F hmc, F &r) {
    const F sv = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), A, B);
    r = _mm512_roundscale_ps(sv, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(sv, r)), hmc, _CMP_LT_OQ) == 0xffff;
  }
  /// r + off as int32 (RowRq::one): with \p sat (the int8 range) saturating alike when
  /// narrowed by lnPack4 (RowRq::satInt), else clamped to [loF, hiF] first.
  static inline __attribute__((always_inline)) V lnFinish(F r, bool sat, float loF, float hiF,
                                                          int32_t off) {
    if (sat)
      return _mm512_cvtps_epi32(
          _mm512_add_ps(_mm512_min_ps(r, _mm512_set1_ps(0x1p30f)), _mm512_set1_ps(float(off))));
    r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(loF)), _mm512_set1_ps(hiF));
    return _mm512_add_epi32(_mm512_cvtps_epi32(r), _mm512_set1_epi32(off));
  }
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
  static inline __attribute__((always_inline)) V mla16(V acc, const int16_t *p, int32_t w) {
    __m512i x = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_add_epi32(acc, _mm512_mullo_epi32(x, _mm512_set1_epi32(w)));
  }
  static inline __attribute__((always_inline)) void pairs16(int32_t *d, const int16_t *x,
                                                            int64_t dw, int64_t n) {
    int64_t q = 0;
    for (; q + 16 <= n; q += 16) {
      __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + q)));
      __m512i b = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + q + dw)));
      _mm512_storeu_si512((void *)(d + q), _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
    }
    for (; q < n; q++)
      d[q] = int32_t(uint32_t(uint16_t(x[q])) | (uint32_t(uint16_t(x[q + dw])) << 16));
  }
  static inline __attribute__((always_inline)) V dot16x2At(V acc, const int16_t *p, uint32_t w) {
    return dot16x2(acc, (const int32_t *)(const void *)p, w);
  }
  static inline __attribute__((always_inline)) void interleave(V e, V o, V &lo, V &hi) {
    const __m512i il = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i ih =
        _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    lo = _mm512_permutex2var_epi32(e, il, o);
    hi = _mm512_permutex2var_epi32(e, ih, o);
  }
  static inline __attribute__((always_inline)) void centre16(int16_t *d, const int8_t *x,
                                                             int64_t n, int32_t xo) {
    const __m512i vo = _mm512_set1_epi16(int16_t(xo));
    for (int64_t i = 0; i < n; i += 32) {
      const __mmask32 m = n - i >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << (n - i)) - 1);
      const __m256i b = _mm512_castsi512_si256(_mm512_maskz_loadu_epi8(__mmask64(m), x + i));
      _mm512_mask_storeu_epi16(d + i, m, _mm512_sub_epi16(_mm512_cvtepi8_epi16(b), vo));
    }
  }
  /// One padded row of the quad path's byte plane: d[c] = x[c - PL] ^ 0x80 for c in
  /// [PL, PL + W), \p pad elsewhere in [0, Wp); 64 columns per masked load and store.
  static inline __attribute__((always_inline)) void flipRow(uint8_t *d, const int8_t *x,
                                                            int64_t W, int64_t PL, int64_t Wp,
                                                            uint8_t pad) {
    const __m512i vp = _mm512_set1_epi8(char(pad)), flip = _mm512_set1_epi8(char(0x80));
    for (int64_t c = 0; c < Wp; c += 64) {
      const int64_t nw = minI(64, Wp - c);
      const __mmask64 all = nw >= 64 ? ~__mmask64(0) : (__mmask64(1) << nw) - 1;
      // Columns c + k inside the row: k in [PL - c, PL + W - c).
      const int64_t k0 = maxI(0, minI(64, PL - c)), k1 = maxI(0, minI(64, PL + W - c));
      const __mmask64 below = k1 >= 64 ? ~__mmask64(0) : (__mmask64(1) << k1) - 1;
      const __mmask64 in = below & ~(k0 >= 64 ? ~__mmask64(0) : (__mmask64(1) << k0) - 1);
      // Only the bytes of \c in are read (x + c - PL lies before x where PL > c).
      const __m512i v =
          _mm512_maskz_loadu_epi8(in, (const void *)(uintptr_t(x) + uintptr_t(c - PL)));
      _mm512_mask_storeu_epi8(d + c, all, _mm512_mask_mov_epi8(vp, in, _mm512_xor_si512(v, flip)));
    }
  }
  /// d[4 i + r] = p_r[i] for 4 i + r < m (m a multiple of 16): a 4 x 4 transpose of 32-bit
  /// lanes within each 128-bit lane, then one of 128-bit lanes across the four vectors.
  static inline __attribute__((always_inline)) void interleave4(int32_t *d, V p0, V p1, V p2,
                                                                V p3, int64_t m) {
    const V t0 = _mm512_unpacklo_epi32(p0, p1), t1 = _mm512_unpacklo_epi32(p2, p3);
    const V t2 = _mm512_unpackhi_epi32(p0, p1), t3 = _mm512_unpackhi_epi32(p2, p3);
    // u_k's 128-bit lane l: outputs 16 l + 4 k .. 16 l + 4 k + 3.
    const V u0 = _mm512_unpacklo_epi64(t0, t1), u1 = _mm512_unpackhi_epi64(t0, t1);
    const V u2 = _mm512_unpacklo_epi64(t2, t3), u3 = _mm512_unpackhi_epi64(t2, t3);
    const V v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
    const V v2 = _mm512_shuffle_i32x4(u0, u1, 0xee), v3 = _mm512_shuffle_i32x4(u2, u3, 0xee);
    store(d, _mm512_shuffle_i32x4(v0, v1, 0x88));
    if (m > 16)
      store(d + 16, _mm512_shuffle_i32x4(v0, v1, 0xdd));
    if (m > 32)
      store(d + 32, _mm512_shuffle_i32x4(v2, v3, 0x88));
    if (m > 48)
      store(d + 48, _mm512_shuffle_i32x4(v2, v3, 0xdd));
  }
  /// vpdpwssd: acc + x0 w0 + x1 w1 per lane, no saturation.
  static inline __attribute__((always_inline)) V dot16x2(V acc, const int32_t *p, uint32_t w) {
    return _mm512_dpwssd_epi32(acc, _mm512_loadu_si512((const void *)p),
                               _mm512_set1_epi32(int(w)));
  }
  /// requant() on 8 doubles (see IsaAvx2::requant4).
  static inline __attribute__((always_inline)) __m256i requant8(__m256i a, __m512d as,
                                                                __m512d br, __m512d sc,
                                                                __m512d off, __m512d lo,
                                                                __m512d hi) {
    const __m512d half = _mm512_set1_pd(0.5), one = _mm512_set1_pd(1.0);
    const __m512i sign = _mm512_set1_epi64(int64_t(0x8000000000000000ull));
    __m512d prod = _mm512_mul_pd(as, _mm512_cvtepi32_pd(a));
    __m512d real = _mm512_add_pd(prod, br);
    __m512d x = _mm512_div_pd(real, sc);
    __m512d t = _mm512_roundscale_pd(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512d d = _mm512_castsi512_pd(
        _mm512_andnot_si512(sign, _mm512_castpd_si512(_mm512_sub_pd(x, t))));
    __m512d step = _mm512_castsi512_pd(_mm512_or_si512(
        _mm512_and_si512(_mm512_castpd_si512(x), sign), _mm512_castpd_si512(one)));
    __mmask8 up = _mm512_cmp_pd_mask(d, half, _CMP_GE_OQ);
    __m512d q = _mm512_mask_add_pd(t, up, t, step);
    q = _mm512_add_pd(q, off);
    q = _mm512_max_pd(q, lo); // NaN -> lo, as !(q >= lo)
    q = _mm512_min_pd(q, hi);
    return _mm512_cvttpd_epi32(q);
  }
  /// y[j] = requant(acc[j] + corr - fo colsum[j]) for j < n (colsum null: no pixel term).
  static inline __attribute__((always_inline)) void requantRow(int8_t *y, const int32_t *acc,
                                                               int64_t n, int32_t corr,
                                                               int32_t fo, const int32_t *colsum,
                                                               const RQ &rq) {
    FastRQ f{};
    const bool fast = fastRequantSetup(rq, f);
    requantRowF(y, acc, n, corr, fo, colsum, rq, f, fast);
  }
  /// One channel's row requantization (requantRowF): its constants in registers.
  struct RowRq {
    int8_t *y;
    const int32_t *acc, *colsum;
    __m512d as, br, sc, off, lo, hi;
    __m512i vc, vf, fOff;
    __m512 fA, fB, hmc, loF, hiF, offF, big;
    bool fast, sat;
    inline __attribute__((always_inline)) RowRq(int8_t *y_, const int32_t *acc_,
                                                const int32_t *colsum_, int32_t corr,
                                                int32_t fo, const RQ &rq, const FastRQ &f,
                                                bool fast_)
        : y(y_), acc(acc_), colsum(colsum_), as(_mm512_set1_pd(rq.as)),
          br(_mm512_set1_pd(rq.br)), sc(_mm512_set1_pd(rq.scale)),
          off(_mm512_set1_pd(rq.off)), lo(_mm512_set1_pd(rq.lo)), hi(_mm512_set1_pd(rq.hi)),
          vc(_mm512_set1_epi32(corr)), vf(_mm512_set1_epi32(fo)),
          fOff(_mm512_set1_epi32(f.off)), fA(_mm512_set1_ps(f.A)), fB(_mm512_set1_ps(f.B)),
          hmc(_mm512_set1_ps(f.hmc)), loF(_mm512_set1_ps(f.loF)), hiF(_mm512_set1_ps(f.hiF)),
          offF(_mm512_set1_ps(float(f.off))), big(_mm512_set1_ps(0x1p30f)), fast(fast_),
          // The int8 range: rint(s) + off narrowed with signed saturation is the clamp.
          sat(rq.lo == -128.0 && rq.hi == 127.0) {}
    /// acc[j..] + corr - fo colsum[j..] (16 lanes, masked).
    inline __attribute__((always_inline)) __m512i accAt(int64_t j, __mmask16 m) const {
      __m512i a = _mm512_add_epi32(_mm512_maskz_loadu_epi32(m, acc + j), vc);
      if (colsum)
        a = _mm512_sub_epi32(a, _mm512_mullo_epi32(vf, _mm512_maskz_loadu_epi32(m, colsum + j)));
      return a;
    }
    /// FastRQ's quotient s (a fused multiply-add rounds once where the bound allows two),
    /// its nearest integer r and the lanes of m far enough from a half-integer.
    inline __attribute__((always_inline)) __mmask16 quotient(__m512i a, __mmask16 m,
                                                             __m512 &r) const {
      __m512 sv = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), fA, fB);
      r = _mm512_roundscale_ps(sv, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      return __mmask16(_mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(sv, r)), hmc, _CMP_LT_OQ) & m);
    }
    /// r + off is exact below 2^24 and saturates alike beyond; r above 2^30 is cut to 2^30
    /// (the conversion of larger values gives INT_MIN), below -2^31 it converts to
    /// INT_MIN: both saturate to the right end when narrowed.
    inline __attribute__((always_inline)) __m512i satInt(__m512 r) const {
      return _mm512_cvtps_epi32(_mm512_add_ps(_mm512_min_ps(r, big), offF));
    }
    /// One vector of outputs [j, j + 16) (masked by m).
    inline __attribute__((always_inline)) void one(int64_t j, __mmask16 m) const {
      __m512i a = accAt(j, m);
      __m512 r;
      if (fast && quotient(a, m, r) == m) {
        if (sat) {
          _mm512_mask_cvtsepi32_storeu_epi8(y + j, m, satInt(r));
          return;
        }
        r = _mm512_min_ps(_mm512_max_ps(r, loF), hiF);
        _mm512_mask_cvtepi32_storeu_epi8(y + j, m, _mm512_add_epi32(_mm512_cvtps_epi32(r), fOff));
        return;
      }
      __m256i q0 = requant8(_mm512_castsi512_si256(a), as, br, sc, off, lo, hi);
      __m256i q1 = requant8(_mm512_extracti64x4_epi64(a, 1), as, br, sc, off, lo, hi);
      __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
      _mm512_mask_cvtepi32_storeu_epi8(y + j, m, q);
    }
    /// Outputs [j, j + 64) (fast and sat): the four vectors narrowed by two saturating
    /// packs (their bytes come out in 4-lane groups, put in order by one permutation) and
    /// one store; vector by vector (one) when a lane is too near a half-integer.
    inline __attribute__((always_inline)) void four(int64_t j) const {
      const __mmask16 full = 0xffff;
      __m512 r0, r1, r2, r3;
      const __mmask16 ok = quotient(accAt(j, full), full, r0) &
                           quotient(accAt(j + 16, full), full, r1) &
                           quotient(accAt(j + 32, full), full, r2) &
                           quotient(accAt(j + 48, full), full, r3);
      if (ok != full) {
        for (int64_t k = 0; k < 64; k += 16)
          one(j + k, full);
        return;
      }
      const __m512i order =
          _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
      __m512i p01 = _mm512_packs_epi32(satInt(r0), satInt(r1));
      __m512i p23 = _mm512_packs_epi32(satInt(r2), satInt(r3));
      _mm512_storeu_si512((void *)(y + j),
                          _mm512_permutexvar_epi32(order, _mm512_packs_epi16(p01, p23)));
    }
  };
  /// requantRow with the channel's FastRQ set up by the caller (\p fast: fastRequantSetup's
  /// result): 64 outputs at a time where the int8 fast path applies, then 16 at a time, the
  /// last vector masked.
  static inline __attribute__((always_inline)) void requantRowF(
      int8_t *y, const int32_t *acc, int64_t n, int32_t corr, int32_t fo, const int32_t *colsum,
      const RQ &rq, const FastRQ &f, bool fast) {
    const RowRq row(y, acc, colsum, corr, fo, rq, f, fast);
    int64_t j = 0;
    if (fast && row.sat)
      for (; j + 64 <= n; j += 64)
        row.four(j);
    for (; j < n; j += 16)
      row.one(j, n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1));
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

// Depthwise int8 convolution (Group == C == O): libjit_qdwconv_i8_<isa> (qdwconv in
// libjit_qconv_impl.h).

// Run-time weights (a Filter or Weights operand that is not a constant, as ONNX's
// QLinearConv, ConvInteger, QLinearMatMul and MatMulInteger node tests give them): the
// emitter reserves a buffer in the plan and calls these packers in a serial stage before
// the kernel, which then reads the packed weights and per-channel constants exactly as it
// reads those the emitter packs at compile time (EmitQuantConv.cpp: the same layouts and
// the same arithmetic, in the same order). uint8 operands take the int8 kernels shifted by
// 128: x - xOffset = (x - 128) - (xOffset - 128), and the same for the weights, so a uint8
// filter packs as f ^ 0x80 with offset fo - 128, and a uint8 activation or result is
// flipped (libjit_qflip_i8) before or after the kernel.
namespace libjit {
namespace {

/// The weight-side quantization a packer reads (EmitQuantConv.cpp, WeightQuant).
struct RtQuant {
  const float *scales;    // per channel, or null: fScale and fOffset for every channel
  const int32_t *offsets; // per channel (with scales)
  float fScale;
  int64_t fOffset;
  const void *bias;
  int64_t biasKind; // 0: i32 in accumulator units, 1: float real, 2: i32q (biasScale,
                    // biasOffset), 3: none (MatMul, BatchMatMul)
  float biasScale;
  int64_t biasOffset;
  float inScale;
  uint8_t fXor; // 0x80 for uint8 weights
};

/// Channel \p o's constants at index \p oi of the QParams arrays at \p params (\p Opad
/// entries each): \p sum is the sum of its packed (int8) weights over K taps, \p cIn =
/// 128 + the kernel's (int8) input offset.
LIBJIT_INLINE void rtChannel(const RtQuant &q, void *params, int64_t Opad, int64_t o,
                             int64_t oi, int64_t sum, int64_t K, int64_t cIn) {
  double *accScale = (double *)params, *biasReal = accScale + Opad;
  int32_t *corr = (int32_t *)(biasReal + Opad), *fOff = corr + Opad;
  const int64_t fo = (q.scales ? int64_t(q.offsets[o]) : q.fOffset) - (q.fXor ? 128 : 0);
  int64_t ib = 0;
  double br = 0.0;
  if (q.biasKind == 0)
    ib = ((const int32_t *)q.bias)[o];
  else if (q.biasKind == 1)
    br = double(((const float *)q.bias)[o]);
  else if (q.biasKind == 2)
    br = double(q.biasScale) * double(int64_t(((const int32_t *)q.bias)[o]) - q.biasOffset);
  // Wrapping 32-bit arithmetic, as the emitter's and the kernel's.
  corr[oi] = int32_t(uint32_t(-cIn * sum) + uint32_t(K * cIn) * uint32_t(fo) + uint32_t(ib));
  fOff[oi] = int32_t(fo);
  accScale[oi] = double(q.inScale) * double(q.scales ? q.scales[o] : q.fScale);
  biasReal[oi] = br;
}

LIBJIT_INLINE void zeroBytes(void *p, int64_t n) {
  char *c = (char *)p;
  for (int64_t i = 0; i < n; i++)
    c[i] = 0;
}

} // namespace
} // namespace libjit

/// Packs the run-time filter \p f [O][cg][KK] of libjit_qconv_{i8,i32}_<isa> into \p wpack
/// ([G][ogPad / 4][K4p][4] quads; \p direct: the direct path's k order) and its constants
/// into \p params (4 arrays of G ogPad entries). \p xOff is the kernel's int8 input offset.
LIBJIT_EXPORT void libjit_qpack_conv_rt(uint32_t *wpack, void *params, const int8_t *f,
                                        int64_t fXor, const float *scales,
                                        const int32_t *offsets, float fScale, int64_t fOffset,
                                        const void *bias, int64_t biasKind, float biasScale,
                                        int64_t biasOffset, float inScale, int64_t xOff,
                                        int64_t O, int64_t G, int64_t cg, int64_t KK,
                                        int64_t direct) {
  using namespace libjit;
  constexpr int64_t MR = 4;
  const RtQuant q{scales, offsets, fScale, fOffset, bias, biasKind, biasScale, biasOffset,
                  inScale, uint8_t(fXor)};
  const int64_t og = O / G, ogPad = ceilDiv(og, MR) * MR, Opad = G * ogPad, K = cg * KK;
  const int64_t K4p = direct ? ceilDiv(cg, 4) * KK : ceilDiv(K, 4), cIn = 128 + xOff;
  int8_t *packed = (int8_t *)wpack;
  zeroBytes(packed, Opad * K4p * 4);
  zeroBytes(params, Opad * (2 * 8 + 2 * 4));
  for (int64_t g = 0; g < G; g++)
    for (int64_t j = 0; j < og; j++) {
      const int64_t o = g * og + j, oi = g * ogPad + j;
      const int64_t blk = (g * ogPad + j / MR * MR) * K4p * 4, r = j % MR;
      int64_t sum = 0;
      for (int64_t k = 0; k < K; k++) {
        const int8_t v = int8_t(uint8_t(f[o * K + k]) ^ q.fXor);
        const int64_t quad = direct ? (k / KK / 4) * KK + k % KK : k / 4;
        const int64_t byte = direct ? (k / KK) % 4 : k % 4;
        packed[blk + (quad * MR + r) * 4 + byte] = v;
        sum += v;
      }
      rtChannel(q, params, Opad, o, oi, sum, K, cIn);
    }
}

/// Packs the run-time weights \p w [K][M] of libjit_qfc_{i8,i32}_<isa> into \p wpack
/// ([ceil(M / T)][K4][T] quads, T = 2 lanes) and its constants into \p params (4 arrays of
/// ceil(M / T) T entries).
LIBJIT_EXPORT void libjit_qpack_fc_rt(uint32_t *wpack, void *params, const int8_t *w,
                                      int64_t fXor, const float *scales,
                                      const int32_t *offsets, float fScale, int64_t fOffset,
                                      const void *bias, int64_t biasKind, float biasScale,
                                      int64_t biasOffset, float inScale, int64_t xOff, int64_t K,
                                      int64_t M, int64_t T) {
  using namespace libjit;
  const RtQuant q{scales, offsets, fScale, fOffset, bias, biasKind, biasScale, biasOffset,
                  inScale, uint8_t(fXor)};
  const int64_t K4 = ceilDiv(K, 4), tiles = ceilDiv(M, T), Mpad = tiles * T, cIn = 128 + xOff;
  int8_t *packed = (int8_t *)wpack;
  zeroBytes(packed, tiles * K4 * T * 4);
  zeroBytes(params, Mpad * (2 * 8 + 2 * 4));
  for (int64_t m = 0; m < M; m++) {
    int64_t sum = 0;
    for (int64_t k = 0; k < K; k++) {
      const int8_t v = int8_t(uint8_t(w[k * M + m]) ^ q.fXor);
      packed[(((m / T) * K4 + k / 4) * T + m % T) * 4 + k % 4] = v;
      sum += v;
    }
    rtChannel(q, params, Mpad, m, m, sum, K, cIn);
  }
}

namespace libjit {
namespace {

/// Column tile \p t of the run-time right operand \p w [K][M] of libjit_qbmm_i8_<isa>,
/// packed as qfc's [K4][T] quads at \p dst (zero past K and M), and the sum over k of each
/// of its columns in \p colsum [T]. Four rows at a time, column by column, so that the
/// loops over the tile's columns vectorise.
LIBJIT_INLINE void packBmmTile(int8_t *dst, int32_t *colsum, const int8_t *w, int64_t K,
                               int64_t M, int64_t t, int64_t T) {
  const int64_t m0 = t * T, nm = minI(T, M - m0);
  for (int64_t c = 0; c < T; c++)
    colsum[c] = 0;
  for (int64_t q = 0; q * 4 < K; q++) {
    int8_t *d = dst + q * T * 4;
    const int8_t *r0 = w + 4 * q * M + m0;
    if (4 * q + 4 <= K && nm == T) {
      const int8_t *r1 = r0 + M, *r2 = r1 + M, *r3 = r2 + M;
      for (int64_t c = 0; c < T; c++) {
        d[4 * c] = r0[c], d[4 * c + 1] = r1[c], d[4 * c + 2] = r2[c], d[4 * c + 3] = r3[c];
        colsum[c] += int32_t(r0[c]) + int32_t(r1[c]) + int32_t(r2[c]) + int32_t(r3[c]);
      }
      continue;
    }
    for (int64_t c = 0; c < T; c++)
      for (int64_t i = 0; i < 4; i++) {
        const int8_t v = c < nm && 4 * q + i < K ? r0[i * M + c] : int8_t(0);
        d[4 * c + i] = v;
        colsum[c] += v;
      }
  }
}

} // namespace
} // namespace libjit

/// Packs the run-time right operands \p w [B][K][M] of libjit_qbmm_i8_<isa> (int8, scale
/// \p fScale, offset \p fOffset; per tensor, no bias) into \p wpack (per batch \p wStride
/// uint32 entries: [ceil(M / T)][K4][T] quads) and their column constants into \p params
/// (per batch \p pStride bytes: 4 arrays of ceil(M / T) T entries), the constants as
/// libjit_qpack_fc_rt computes them. The (batch, column tile) pairs split between the
/// threads; \p scratch holds T int32 per thread (\p scratchStride bytes apart).
LIBJIT_EXPORT void libjit_qpack_bmm_rt(uint32_t *wpack, void *params, const int8_t *w,
                                       float fScale, int64_t fOffset, float inScale,
                                       int64_t xOff, int64_t B, int64_t K, int64_t M,
                                       int64_t T, int64_t wStride, int64_t pStride,
                                       char *scratch, int64_t scratchStride, int64_t tid,
                                       int64_t nthreads) {
  using namespace libjit;
  const RtQuant q{nullptr, nullptr, fScale, fOffset, nullptr, 3, 0.0f, 0, inScale, 0};
  const int64_t K4 = ceilDiv(K, 4), tiles = ceilDiv(M, T), Mpad = tiles * T;
  int32_t *colsum = (int32_t *)(scratch + tid * scratchStride);
  int64_t b, e;
  partition(B * tiles, 1, tid, nthreads, &b, &e);
  for (int64_t u = b; u < e; u++) {
    const int64_t bt = u / tiles, t = u % tiles;
    packBmmTile((int8_t *)(wpack + bt * wStride + t * K4 * T), colsum, w + bt * K * M, K, M,
                t, T);
    void *p = (char *)params + bt * pStride;
    for (int64_t c = 0; c < T; c++)
      rtChannel(q, p, Mpad, t * T + c < M ? t * T + c : 0, t * T + c, colsum[c], K, 128 + xOff);
  }
}

/// dst[i] = src[i] ^ 0x80 for i < n: a uint8 value as the int8 value 128 less, and back
/// (in place when dst == src).
LIBJIT_EXPORT void libjit_qflip_i8(int8_t *dst, const int8_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    dst[i] = int8_t(uint8_t(src[i]) ^ 0x80);
}

/// The pixels a 1x1 unpadded convolution of strides (SH, SW) reads, packed:
/// dst[p][oh][ow] = src[p][oh SH][ow SW] for planes p of H x W, OH x OW outputs, so that the
/// layer runs as a stride-1 one (the pointwise path) on them. Rows split between the
/// threads; at SW = 2 each pair of bytes read as one 16-bit word and its first byte kept, a
/// loop the JIT vectorises (the last output of a row of odd width byte by byte: its pair
/// would reach past the row).
LIBJIT_EXPORT void libjit_qsubsample_i8(int8_t *dst, const int8_t *src, int64_t planes,
                                        int64_t H, int64_t W, int64_t OH, int64_t OW,
                                        int64_t SH, int64_t SW, int64_t tid, int64_t nthreads) {
  int64_t b, e;
  libjit::partition(planes * OH, 1, tid, nthreads, &b, &e);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  const int firstShift = 8;
#else
  const int firstShift = 0;
#endif
  for (int64_t r = b; r < e; r++) {
    const int64_t p = r / OH, oh = r % OH;
    const int8_t *x = src + (p * H + oh * SH) * W;
    int8_t *y = dst + r * OW;
    const int64_t pairs = SW == 2 ? libjit::minI(OW, W / 2) : 0;
    for (int64_t ow = 0; ow < pairs; ow++) {
      uint16_t pair;
      __builtin_memcpy(&pair, x + 2 * ow, 2);
      y[ow] = int8_t(uint8_t(pair >> firstShift));
    }
    for (int64_t ow = pairs; ow < OW; ow++)
      y[ow] = x[ow * SW];
  }
}
