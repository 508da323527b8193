// float32 GEMM: packing, register-blocked micro-kernels and the blocked driver, and the
// operators built on it (MatMul, BatchMatMul, FullyConnected, Convolution). Written with
// vector extensions so that LLVM emits the host's widest FMA for the variant the backend
// picks (libjit_*_avx512 on AVX-512 hosts, libjit_*_avx2 elsewhere); native builds of the
// same code are slower but compute the same values.
#include "libjit.h"
#include "libjit_gemm_impl.h"
#include "libjit_vec.h"

namespace libjit {
namespace {

/// The tap of im2col row k = (c KH + kh) KW + kw: channel, kernel row and kernel column,
/// stepped row by row.
struct Tap {
  int64_t c, kh, kw;
  inline __attribute__((always_inline)) Tap(int64_t k, int64_t KH, int64_t KW)
      : c(k / (KH * KW)), kh(k % (KH * KW) / KW), kw(k % KW) {}
  inline __attribute__((always_inline)) void next(int64_t KH, int64_t KW) {
    if (++kw == KW) {
      kw = 0;
      if (++kh == KH) {
        kh = 0;
        c++;
      }
    }
  }
};

/// B operand of a convolution: the im2col matrix [C*KH*KW, OH*OW] of one image and group,
/// packed straight from the NCHW input.
template <class Cfg> struct Im2colB {
  static constexpr bool packed = false;
  const float *in; // [C][H][W] of this image and group
  int64_t H, W, KH, KW, OW, SH, SW, PT, PL, DH, DW;
  const float *panel(int64_t, int64_t) const { return nullptr; }
  void pack(float *dst, int64_t j0, int64_t nc, int64_t pc, int64_t kc) const {
    constexpr int64_t NR = Cfg::NR;
    for (int64_t jp = 0; jp < nc; jp += NR) {
      int64_t cols = minI(NR, nc - jp);
      float *d = dst + (jp / NR) * kc * NR;
      int64_t oh0 = (j0 + jp) / OW, ow0 = (j0 + jp) % OW;
      Tap tap(pc, KH, KW);
      for (int64_t k = 0; k < kc; k++) {
        const float *plane = in + tap.c * H * W;
        float *drow = d + k * NR;
        int64_t q = 0, oh = oh0, ow = ow0;
        while (q < cols) {
          int64_t seg = minI(cols - q, OW - ow);
          int64_t ih = oh * SH - PT + tap.kh * DH;
          if (ih < 0 || ih >= H) {
            for (int64_t t = 0; t < seg; t++)
              drow[q + t] = 0.0f;
          } else {
            const float *row = plane + ih * W;
            int64_t iw0 = ow * SW - PL + tap.kw * DW;
            // t in [tLo, tHi) reads inside the row.
            int64_t tLo = iw0 >= 0 ? 0 : ceilDiv(-iw0, SW);
            int64_t tHi = W - iw0 <= 0 ? 0 : ceilDiv(W - iw0, SW);
            tLo = minI(tLo, seg);
            tHi = maxI(minI(tHi, seg), tLo);
            for (int64_t t = 0; t < tLo; t++)
              drow[q + t] = 0.0f;
            if (SW == 1) {
              const float *s = row + iw0;
              for (int64_t t = tLo; t < tHi; t++)
                drow[q + t] = s[t];
            } else if (SW == 2) {
              // The even columns of 32 consecutive inputs, while those stay in the row.
              int64_t t = tLo;
              for (; t + 16 <= tHi && iw0 + 2 * t + 32 <= W; t += 16)
                st16(drow + q + t, evens(ld32(row + iw0 + 2 * t)));
              for (; t < tHi; t++)
                drow[q + t] = row[iw0 + 2 * t];
            } else {
              for (int64_t t = tLo; t < tHi; t++)
                drow[q + t] = row[iw0 + t * SW];
            }
            for (int64_t t = tHi; t < seg; t++)
              drow[q + t] = 0.0f;
          }
          q += seg;
          ow += seg;
          if (ow == OW) {
            ow = 0;
            oh++;
          }
        }
        for (; q < NR; q++)
          drow[q] = 0.0f;
        tap.next(KH, KW);
      }
    }
  }
};

/// A operand of a transposed convolution: the im2col matrix transposed, [OH*OW, C*KH*KW]
/// of one image, packed straight from the NCHW input (rows are output pixels).
template <class Cfg> struct Im2colA {
  static constexpr bool packed = false;
  const float *in; // [C][H][W]
  int64_t H, W, KH, KW, OW, SH, SW, PT, PL, DH, DW;
  /// The input with its pads as zeros, [C][PH][PWd] (see padInput), or null: then rows
  /// are copied run by run with vector loads instead of element by element.
  const float *padded = nullptr;
  int64_t PH = 0, PWd = 0;
  const float *panel(int64_t, int64_t) const { return nullptr; }
  void pack(float *dst, int64_t i0, int64_t mc, int64_t pc, int64_t kc) const {
    constexpr int64_t MR = Cfg::MR;
    if (padded) {
      packPadded(dst, i0, mc, pc, kc);
      return;
    }
    if (KH == 1 && KW == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 && OW == W &&
        i0 + mc <= H * W) {
      // Pointwise: the MR pixels of a panel row are consecutive in their input plane.
      // Pixels from H * W on are bottom padding (OH > H): the general path zeroes them.
      for (int64_t ip = 0; ip < mc; ip += MR) {
        int64_t rows = minI(MR, mc - ip);
        float *d = dst + (ip / MR) * kc * MR;
        const float *s = in + pc * H * W + i0 + ip;
        for (int64_t k = 0; k < kc; k++, s += H * W) {
          if (rows == MR) {
            LIBJIT_UNROLL
            for (int64_t r = 0; r < MR; r++)
              d[k * MR + r] = s[r];
          } else {
            for (int64_t r = 0; r < MR; r++)
              d[k * MR + r] = r < rows ? s[r] : 0.0f;
          }
        }
      }
      return;
    }
    for (int64_t ip = 0; ip < mc; ip += MR) {
      int64_t rows = minI(MR, mc - ip);
      float *d = dst + (ip / MR) * kc * MR;
      int64_t ih0[MR], iw0[MR];
      for (int64_t r = 0; r < MR; r++) {
        int64_t p = i0 + ip + (r < rows ? r : 0);
        ih0[r] = (p / OW) * SH - PT;
        iw0[r] = r < rows ? (p % OW) * SW - PL : -(int64_t(1) << 40);
      }
      Tap tap(pc, KH, KW);
      for (int64_t k = 0; k < kc; k++) {
        const float *plane = in + tap.c * H * W;
        float *drow = d + k * MR;
        for (int64_t r = 0; r < MR; r++) {
          int64_t ih = ih0[r] + tap.kh * DH, iw = iw0[r] + tap.kw * DW;
          bool ok = ih >= 0 && ih < H && iw >= 0 && iw < W;
          drow[r] = ok ? plane[ih * W + iw] : 0.0f;
        }
        tap.next(KH, KW);
      }
    }
  }
  /// pack() from the padded input (SW = 1 or 2): the pixels of a panel row are runs of
  /// consecutive pixels of an output row, each a strided run of a padded input row, so
  /// every run is one 16-float vector (two for SW = 2) stored whole. Runs go in ascending
  /// order and rows in ascending k, so the lanes a store writes past its run land where
  /// a later store writes (or in the slack past the block); the rows of a partial panel
  /// past its pixels are zeroed after each row.
  void packPadded(float *dst, int64_t i0, int64_t mc, int64_t pc, int64_t kc) const {
    constexpr int64_t MR = Cfg::MR;
    for (int64_t ip = 0; ip < mc; ip += MR) {
      int64_t rows = minI(MR, mc - ip);
      float *d = dst + (ip / MR) * kc * MR;
      int64_t runR[MR], runBase[MR], runs = 0;
      for (int64_t r = 0; r < rows; runs++) {
        int64_t p = i0 + ip + r, oh = p / OW, ow = p % OW;
        runR[runs] = r;
        runBase[runs] = oh * SH * PWd + ow * SW;
        r += minI(OW - ow, rows - r);
      }
      Tap tap(pc, KH, KW);
      for (int64_t k = 0; k < kc; k++) {
        const float *src = padded + (tap.c * PH + tap.kh * DH) * PWd + tap.kw * DW;
        float *drow = d + k * MR;
        for (int64_t q = 0; q < runs; q++) {
          const float *s = src + runBase[q];
          st16(drow + runR[q], SW == 1 ? ld16(s) : evens(ld32(s)));
        }
        for (int64_t r = rows; r < MR; r++)
          drow[r] = 0.0f;
        tap.next(KH, KW);
      }
    }
  }
};

/// Rows and columns of the padded input Im2colA::packPadded reads: the pads and whatever
/// the last output row and column reach below and right of the image.
LIBJIT_INLINE void paddedDims(int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH,
                              int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,
                              int64_t DH, int64_t DW, int64_t *PH, int64_t *PWd) {
  *PH = maxI(H + PT, (OH - 1) * SH + (KH - 1) * DH + 1);
  *PWd = maxI(W + PL, (OW - 1) * SW + (KW - 1) * DW + 1);
}

/// dst[c][y][x] = in[c][y - PT][x - PL] inside the image, else 0, for [C][PH][PWd], then
/// 32 zero floats of slack for the vector loads of the last runs.
LIBJIT_INLINE void padInput(float *dst, const float *in, int64_t C, int64_t H, int64_t W,
                            int64_t PH, int64_t PWd, int64_t PT, int64_t PL) {
  for (int64_t c = 0; c < C; c++)
    for (int64_t y = 0; y < PH; y++) {
      float *d = dst + (c * PH + y) * PWd;
      int64_t iy = y - PT;
      if (iy < 0 || iy >= H) {
        for (int64_t x = 0; x < PWd; x++)
          d[x] = 0.0f;
        continue;
      }
      const float *s = in + (c * H + iy) * W;
      for (int64_t x = 0; x < PWd; x++) {
        int64_t ix = x - PL;
        d[x] = ix >= 0 && ix < W ? s[ix] : 0.0f;
      }
    }
  for (int64_t i = 0; i < 32; i++)
    dst[C * PH * PWd + i] = 0.0f;
}

template <class Cfg>
LIBJIT_INLINE void sgemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float *C, int64_t ldc, float *scratch,
                         int64_t tid, int64_t nthreads) {
  Epilogue epi = {nullptr, nullptr, nullptr, 0, 0, 0.0f, 0.0f};
  gemmDriver<Cfg>(M, N, K, RawA<Cfg>{A, lda}, RawB<Cfg>{B, ldb}, C, ldc, epi, scratch, tid,
                  nthreads);
}

template <class Cfg>
LIBJIT_INLINE void fc(float *out, const float *in, const float *packedW, const float *bias,
                      const float *add, int64_t N, int64_t K, int64_t M, int64_t act, float lo,
                      float hi, float *scratch, int64_t tid, int64_t nthreads) {
  Epilogue epi = {nullptr, bias, add, M, (int)act, lo, hi};
  gemmDriver<Cfg>(N, M, K, RawA<Cfg>{in, K}, PackedB<Cfg>{packedW, K}, out, M, epi, scratch,
                  tid, nthreads);
}

template <class Cfg>
LIBJIT_INLINE void batchMatMul(float *out, const float *lhs, const float *rhs, int64_t B,
                               int64_t N, int64_t K, int64_t M, float *scratch, int64_t tid,
                               int64_t nthreads) {
  Epilogue epi = {nullptr, nullptr, nullptr, 0, 0, 0.0f, 0.0f};
  if (nthreads > 1 && B >= nthreads) {
    // Whole batches per thread: each packs only its own operands, with no split of the
    // small per-batch products (attention's heads and windows).
    int64_t b0, b1;
    partition(B, 1, tid, nthreads, &b0, &b1);
    float *mine = scratch + tid * gemmScratchFloats<Cfg>();
    for (int64_t b = b0; b < b1; b++)
      gemmDriver<Cfg>(N, M, K, RawA<Cfg>{lhs + b * N * K, K}, RawB<Cfg>{rhs + b * K * M, M},
                      out + b * N * M, M, epi, mine, 0, 1);
    return;
  }
  for (int64_t b = 0; b < B; b++)
    gemmDriver<Cfg>(N, M, K, RawA<Cfg>{lhs + b * N * K, K}, RawB<Cfg>{rhs + b * K * M, M},
                    out + b * N * M, M, epi, scratch, tid, nthreads);
}

template <class Cfg>
LIBJIT_INLINE void conv2d(float *out, const float *in, const float *packedW, const float *bias,
                          const float *add, int64_t N, int64_t C, int64_t H, int64_t W,
                          int64_t O, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
                          int64_t SW, int64_t PT, int64_t PL, int64_t DH, int64_t DW,
                          int64_t G, int64_t act, float lo, float hi, float *scratch,
                          int64_t tid, int64_t nthreads) {
  int64_t Cg = C / G, Og = O / G, K = Cg * KH * KW, P = OH * OW;
  int64_t groupW = packedAFloats<Cfg>(Og, K);
  bool pointwise = KH == 1 && KW == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 &&
                   OH == H && OW == W;
  for (int64_t n = 0; n < N; n++) {
    for (int64_t g = 0; g < G; g++) {
      const float *x = in + (n * C + g * Cg) * H * W;
      float *y = out + (n * O + g * Og) * P;
      Epilogue epi = {bias ? bias + g * Og : nullptr, nullptr,
                      add ? add + (n * O + g * Og) * P : nullptr, P, (int)act, lo, hi};
      PackedA<Cfg> A{packedW + g * groupW, K};
      if (pointwise) {
        gemmDriver<Cfg>(Og, P, K, A, RawB<Cfg>{x, H * W}, y, P, epi, scratch, tid, nthreads);
      } else {
        Im2colB<Cfg> B{x, H, W, KH, KW, OW, SH, SW, PT, PL, DH, DW};
        gemmDriver<Cfg>(Og, P, K, A, B, y, P, epi, scratch, tid, nthreads);
      }
    }
  }
}

/// Convolution computed transposed, for small images: T[P x O] = im2col^T x W^T with the
/// pixels as GEMM rows (so P need not fill whole NR-column panels), then transposed into
/// the NCHW output with the residual add and the clamp. packedWT holds W^T [K x O] as
/// packed B panels; t is P*O floats of scratch. Group 1 only.
template <class Cfg>
LIBJIT_INLINE void conv2dT(float *out, const float *in, const float *packedWT,
                           const float *bias, const float *add, int64_t N, int64_t C,
                           int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW, int64_t KH,
                           int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,
                           int64_t DH, int64_t DW, int64_t act, float lo, float hi, float *t,
                           float *scratch, int64_t tid, int64_t nthreads) {
  int64_t K = C * KH * KW, P = OH * OW;
  int64_t m0, m1, n0, n1;
  gemmPartition<Cfg, /*preferRows=*/true>(P, O, tid, nthreads, &m0, &m1, &n0, &n1);
  float *s = scratch + tid * gemmScratchFloats<Cfg>();
  Epilogue epi = {nullptr, bias, nullptr, 0, 0, 0.0f, 0.0f};
  // Kernels with taps pack from a zero-padded copy of the input when it fits where the
  // GEMM would pack B (the weights come packed, so that part of the scratch is free):
  // measured 2-4x faster than element-by-element packing, which took a third of a
  // 7x7 3x3 512->512 layer at 2 threads (each thread packs every pixel there).
  int64_t PH, PWd;
  paddedDims(H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, &PH, &PWd);
  bool pad = (KH > 1 || KW > 1) && (SW == 1 || SW == 2) && m0 < m1 && n0 < n1 &&
             C * PH * PWd + 32 <= Cfg::KC * (Cfg::NC + Cfg::NR);
  for (int64_t n = 0; n < N; n++) {
    const float *x = in + n * C * H * W;
    float *y = out + n * O * P;
    const float *a = add ? add + n * O * P : nullptr;
    Im2colA<Cfg> A{x, H, W, KH, KW, OW, SH, SW, PT, PL, DH, DW};
    if (pad) {
      padInput(s, x, C, H, W, PH, PWd, PT, PL);
      A.padded = s, A.PH = PH, A.PWd = PWd;
    }
    gemmRange<Cfg>(m0, m1, n0, n1, K, A, PackedB<Cfg>{packedWT, K}, t, O, epi, s);
    transposeOut(y, t + n0, O, a, P, m0, m1, n0, n1, act, lo, hi);
  }
}
} // namespace
} // namespace libjit

using namespace libjit;

/// out[0:M] = in[0:K] x W + bias, add, activation: a fully-connected layer of one row,
/// with W [K x M] row-major, read where the graph holds it (Emitter::constBorrowed): for
/// one row, packing buys nothing (each weight is used once, the layer streams them from
/// memory either way) and would be a second copy of them. Each thread takes a range of
/// columns (multiples of 64) and walks every row of W over it, accumulating up to
/// kRowChunk columns at a time (8 KB, in L1) in blocks of kRowBlock rows whose partial sums
/// are added to the total: a sum of K products in float32 then grows its rounding error
/// with about sqrt(kRowBlock) + sqrt(K / kRowBlock) rather than sqrt(K).
LIBJIT_EXPORT void libjit_fc_row_f32(float *out, const float *in, const float *W,
                                     const float *bias, const float *add, int64_t K, int64_t M,
                                     int64_t act, float lo, float hi, int64_t tid,
                                     int64_t nthreads) {
  constexpr int64_t kRowChunk = 2048, kRowBlock = 256;
  int64_t m0, m1;
  partition(M, 64, tid, nthreads, &m0, &m1);
  float total[kRowChunk], part[kRowChunk];
  for (int64_t c0 = m0; c0 < m1; c0 += kRowChunk) {
    const int64_t n = minI(kRowChunk, m1 - c0);
    for (int64_t j = 0; j < n; j++)
      total[j] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += kRowBlock) {
      for (int64_t j = 0; j < n; j++)
        part[j] = 0.0f;
      for (int64_t k = k0; k < minI(K, k0 + kRowBlock); k++) {
        const float x = in[k];
        const float *w = W + k * M + c0;
        for (int64_t j = 0; j < n; j++)
          part[j] += x * w[j];
      }
      for (int64_t j = 0; j < n; j++)
        total[j] += part[j];
    }
    Epilogue e{nullptr, bias ? bias + c0 : nullptr, add ? add + c0 : nullptr, 0, int(act), lo, hi};
    storePartialTile(total, kRowChunk, 1, n, out + c0, M, /*accumulate=*/0, /*last=*/1, &e);
  }
}

#define LIBJIT_GEMM_ENTRY_POINTS(SUFFIX, CFG)                                               \
  LIBJIT_EXPORT void libjit_sgemm_f32_##SUFFIX(int64_t M, int64_t N, int64_t K,             \
                                               const float *A, int64_t lda, const float *B,  \
                                               int64_t ldb, float *C, int64_t ldc,           \
                                               float *scratch, int64_t tid,                  \
                                               int64_t nthreads) {                           \
    sgemm<CFG>(M, N, K, A, lda, B, ldb, C, ldc, scratch, tid, nthreads);                     \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_fc_f32_##SUFFIX(float *out, const float *in,                    \
                                            const float *packedW, const float *bias,         \
                                            const float *add, int64_t N, int64_t K,          \
                                            int64_t M, int64_t act, float lo, float hi,      \
                                            float *scratch, int64_t tid, int64_t nthreads) { \
    fc<CFG>(out, in, packedW, bias, add, N, K, M, act, lo, hi, scratch, tid, nthreads);      \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_batchmatmul_f32_##SUFFIX(                                       \
      float *out, const float *lhs, const float *rhs, int64_t B, int64_t N, int64_t K,       \
      int64_t M, float *scratch, int64_t tid, int64_t nthreads) {                            \
    batchMatMul<CFG>(out, lhs, rhs, B, N, K, M, scratch, tid, nthreads);                     \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_conv2d_f32_##SUFFIX(                                            \
      float *out, const float *in, const float *packedW, const float *bias,                  \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,    \
      int64_t DH, int64_t DW, int64_t G, int64_t act, float lo, float hi, float *scratch,    \
      int64_t tid, int64_t nthreads) {                                                       \
    conv2d<CFG>(out, in, packedW, bias, add, N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL,  \
                DH, DW, G, act, lo, hi, scratch, tid, nthreads);                             \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_conv2d_t_f32_##SUFFIX(                                          \
      float *out, const float *in, const float *packedWT, const float *bias,                 \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,    \
      int64_t DH, int64_t DW, int64_t act, float lo, float hi, float *t, float *scratch,     \
      int64_t tid, int64_t nthreads) {                                                       \
    conv2dT<CFG>(out, in, packedWT, bias, add, N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT,    \
                 PL, DH, DW, act, lo, hi, t, scratch, tid, nthreads);                        \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_pack_bt_f32_##SUFFIX(float *dst, const float *Wt, int64_t K,    \
                                                 int64_t O) {                                \
    packBT<CFG>(dst, Wt, K, O);                                                              \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_pack_a_f32_##SUFFIX(float *dst, const float *A, int64_t M,      \
                                                int64_t K, int64_t lda) {                    \
    packA<CFG>(dst, A, M, K, lda);                                                           \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_pack_b_f32_##SUFFIX(float *dst, const float *B, int64_t K,      \
                                                int64_t N, int64_t ldb) {                    \
    packB<CFG>(dst, B, K, N, ldb);                                                           \
  }

LIBJIT_GEMM_ENTRY_POINTS(avx512, GemmAvx512)
LIBJIT_GEMM_ENTRY_POINTS(avx2, GemmAvx2)
