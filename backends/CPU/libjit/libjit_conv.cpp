// The float32 convolution kernels of the CPU backend (NCHW), one section each:
//  - direct and transposed GEMM: im2col packed straight from the input into the panels
//    of the shared GEMM engine (libjit_gemm_impl.h);
//  - strip: convolution as a GEMM over column strips of the unpacked input;
//  - depthwise (Group == C == O) and grouped (1 < Group) convolutions.
// The Winograd kernels are in libjit_wino.cpp.
// The choice among them all is codegen/EmitConv.cpp's chooseConvAlgorithm.

#include "libjit.h"
#include "libjit_gemm_impl.h"
#include "libjit_vec.h"

// ============================== GEMM: direct and transposed
// The packed GEMM convolution multiplies the weights, packed as A panels at compile time,
// by the im2col matrix packed straight from the NCHW input into B panels (Im2colB); the
// transposed one multiplies the im2col matrix as A (Im2colA: pixels as rows, so that small
// images need not fill whole NR-column panels) by the weights packed as B, then
// transposes into the output with the epilogue.

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
        if (Cfg::VW == 16 && rows == MR && MR <= 16 && i0 + ip + 16 <= H * W) {
          // One 16-float vector per row, in ascending k: the lanes past MR land where the
          // next row (or panel) is written next, or in the slack after the A block.
          for (int64_t k = 0; k < kc; k++, s += H * W)
            st16(d + k * MR, ld16(s));
          continue;
        }
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
  /// past its pixels are zeroed after each row. The padded-plane offset of each k is
  /// computed once per block, for all its panels.
  void packPadded(float *dst, int64_t i0, int64_t mc, int64_t pc, int64_t kc) const {
    constexpr int64_t MR = Cfg::MR;
    int64_t off[Cfg::KC];
    Tap tap(pc, KH, KW);
    for (int64_t k = 0; k < kc; k++, tap.next(KH, KW))
      off[k] = (tap.c * PH + tap.kh * DH) * PWd + tap.kw * DW;
    for (int64_t ip = 0; ip < mc; ip += MR) {
      int64_t rows = minI(MR, mc - ip);
      int64_t runR[MR], runBase[MR], runs = 0;
      for (int64_t r = 0; r < rows; runs++) {
        int64_t p = i0 + ip + r, oh = p / OW, ow = p % OW;
        runR[runs] = r;
        runBase[runs] = oh * SH * PWd + ow * SW;
        r += minI(OW - ow, rows - r);
      }
      float *d = dst + (ip / MR) * kc * MR;
      if (SW == 1)
        packRuns<1>(d, off, kc, runR, runBase, runs, rows);
      else
        packRuns<2>(d, off, kc, runR, runBase, runs, rows);
    }
  }
  /// One panel of packPadded at column stride S: rows [0, rows) from the runs, the rest
  /// zero. Whole panels of one or two runs (most of them) go without the run loop.
  template <int S>
  void packRuns(float *d, const int64_t *off, int64_t kc, const int64_t *runR,
                const int64_t *runBase, int64_t runs, int64_t rows) const {
    constexpr int64_t MR = Cfg::MR;
    auto run = [](const float *s) __attribute__((always_inline)) {
      return S == 1 ? ld16(s) : evens(ld32(s));
    };
    if (rows == MR && runs <= 2) {
      const float *s0 = padded + runBase[0], *s1 = padded + runBase[runs - 1];
      float *d1 = d + runR[runs - 1];
      for (int64_t k = 0; k < kc; k++) {
        st16(d + k * MR, run(s0 + off[k]));
        if (runs == 2)
          st16(d1 + k * MR, run(s1 + off[k]));
      }
      return;
    }
    for (int64_t k = 0; k < kc; k++) {
      float *drow = d + k * MR;
      for (int64_t q = 0; q < runs; q++)
        st16(drow + runR[q], run(padded + off[k] + runBase[q]));
      for (int64_t r = rows; r < MR; r++)
        drow[r] = 0.0f;
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

/// d[0:W] = s[0:W] in 16-float vectors, the last one overlapping its predecessor when W is
/// not a multiple of 16; rows narrower than 16 element by element (a whole vector would
/// read past the row, and past the input after its last row).
LIBJIT_INLINE void copyRow16(float *d, const float *s, int64_t W) {
  if (W < 16) {
    for (int64_t x = 0; x < W; x++)
      d[x] = s[x];
    return;
  }
  int64_t x = 0;
  for (; x + 16 <= W; x += 16)
    st16(d + x, ld16(s + x));
  if (x < W)
    st16(d + W - 16, ld16(s + W - 16));
}

/// dst[c][y][x] = in[c][y - PT][x - PL] inside the image, else 0, for [C][PH][PWd], then
/// 32 zero floats of slack for the vector loads of the last runs. Each padded row is
/// zeroed in whole vectors (the last one reaching up to 15 floats into the next row,
/// written after it, or into the slack, zeroed last) and its image part then copied over
/// the zeros in vectors, rather than element by element with a bounds test per float
/// (backends/CPU/README.md, convT, has the measurements).
LIBJIT_INLINE void padInput(float *dst, const float *in, int64_t C, int64_t H, int64_t W,
                            int64_t PH, int64_t PWd, int64_t PT, int64_t PL) {
  const F16 zero = splat16(0.0f);
  for (int64_t c = 0; c < C; c++)
    for (int64_t y = 0; y < PH; y++) {
      float *d = dst + (c * PH + y) * PWd;
      for (int64_t x = 0; x < PWd; x += 16)
        st16(d + x, zero);
      int64_t iy = y - PT;
      if (iy >= 0 && iy < H)
        copyRow16(d + PL, in + (c * H + iy) * W, W);
    }
  for (int64_t i = 0; i < 32; i++)
    dst[C * PH * PWd + i] = 0.0f;
}

/// The A operand of the packed convolution's weights: float32 panels, or the same panels
/// in float16 (HalfPackedA, widened per block).
template <class Cfg> LIBJIT_INLINE PackedA<Cfg> weightsA(const float *p, int64_t K) {
  return PackedA<Cfg>{p, K};
}
template <class Cfg> LIBJIT_INLINE HalfPackedA<Cfg> weightsA(const uint16_t *p, int64_t K) {
  return HalfPackedA<Cfg>{p, K};
}

/// WT: float, or uint16_t for float16 weights (libjit_conv2d_f16w_*).
template <class Cfg, class WT>
LIBJIT_INLINE void conv2d(float *out, const float *in, const WT *packedW, const float *bias,
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
      auto A = weightsA<Cfg>(packedW + g * groupW, K);
      if (pointwise) {
        gemmDriver<Cfg>(Og, P, K, A, RawB<Cfg>{x, H * W}, y, P, epi, scratch, tid, nthreads);
      } else {
        Im2colB<Cfg> B{x, H, W, KH, KW, OW, SH, SW, PT, PL, DH, DW};
        gemmDriver<Cfg>(Og, P, K, A, B, y, P, epi, scratch, tid, nthreads);
      }
    }
  }
}

/// The B operand of the transposed convolution's weights: float32 panels, or the same
/// panels in float16 (HalfPackedB, widened per block).
template <class Cfg> LIBJIT_INLINE PackedB<Cfg> weightsB(const float *p, int64_t K) {
  return PackedB<Cfg>{p, K};
}
template <class Cfg> LIBJIT_INLINE HalfPackedB<Cfg> weightsB(const uint16_t *p, int64_t K) {
  return HalfPackedB<Cfg>{p, K};
}

/// Convolution computed transposed, for small images: T[P x O] = im2col^T x W^T with the
/// pixels as GEMM rows (so P need not fill whole NR-column panels), then transposed into
/// the NCHW output with the residual add and the clamp. packedWT holds W^T [K x O] as
/// packed B panels (WT float, or uint16_t: float16 weights, libjit_conv2d_t_f16w_*); t is
/// P*O floats of scratch. Group 1 only.
template <class Cfg, class WT>
LIBJIT_INLINE void conv2dT(float *out, const float *in, const WT *packedWT,
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
  // GEMM would pack B (float32 weights come packed, so that part of the scratch is free;
  // float16 ones are widened there, so they go without the copy):
  // measured 2-4x faster than element-by-element packing, which took a third of a
  // 7x7 3x3 512->512 layer at 2 threads (each thread packs every pixel there).
  int64_t PH, PWd;
  paddedDims(H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, &PH, &PWd);
  bool pad = sizeof(WT) == sizeof(float) && (KH > 1 || KW > 1) && (SW == 1 || SW == 2) &&
             m0 < m1 && n0 < n1 &&
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
    gemmRange<Cfg>(m0, m1, n0, n1, K, A, weightsB<Cfg>(packedWT, K), t, O, epi, s);
    transposeOut(y, t + n0, O, a, P, m0, m1, n0, n1, act, lo, hi);
  }
}
} // namespace
} // namespace libjit

using namespace libjit;

#define LIBJIT_GEMM_CONV_ENTRY_POINTS(SUFFIX, CFG)                                          \
  LIBJIT_EXPORT void libjit_conv2d_f32_##SUFFIX(                                            \
      float *out, const float *in, const float *packedW, const float *bias,                  \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,    \
      int64_t DH, int64_t DW, int64_t G, int64_t act, float lo, float hi, float *scratch,    \
      int64_t tid, int64_t nthreads) {                                                       \
    conv2d<CFG>(out, in, packedW, bias, add, N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL,  \
                DH, DW, G, act, lo, hi, scratch, tid, nthreads);                             \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_conv2d_f16w_##SUFFIX(                                           \
      float *out, const float *in, const uint16_t *packedW, const float *bias,               \
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
  LIBJIT_EXPORT void libjit_conv2d_t_f16w_##SUFFIX(                                         \
      float *out, const float *in, const uint16_t *packedWT, const float *bias,              \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,    \
      int64_t DH, int64_t DW, int64_t act, float lo, float hi, float *t, float *scratch,     \
      int64_t tid, int64_t nthreads) {                                                       \
    conv2dT<CFG>(out, in, packedWT, bias, add, N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT,    \
                 PL, DH, DW, act, lo, hi, t, scratch, tid, nthreads);                        \
  }

LIBJIT_GEMM_CONV_ENTRY_POINTS(avx512, GemmAvx512)
LIBJIT_GEMM_CONV_ENTRY_POINTS(avx2, GemmAvx2)

// ============================== strip
// Convolution as a GEMM whose B operand (activations) is read in column strips straight
// from row-major memory: the pointwise (1x1, stride 1) input [C][H*W] itself, the input's
// tap planes through a table of row offsets (conv2dStripDirect), or else a block of the
// im2col matrix copied from its phase planes (see PhasePlanes). The packed-panel engine
// (libjit_gemm_impl.h) copies every B element into NR-column panels and pads the output
// channels to 14-row A panels; with few channels (K or O of 16-144, the first layers of
// mobilenet_v2 and the stem convolutions) that copy and the padded rows cost as much as the
// FMAs. Here the weights stay row-major [O][K] (no packing at all), the register tile is 8
// rows x 3 vectors (4 x 3 on AVX2), which divides every channel count that is a multiple of
// 8, and each B strip [K][3 vectors] is reused by all row tiles (from L1 while K is small,
// from L2 up to the K = 1152, or 2304 for strided kernels, that the planner allows) before
// moving on.

namespace libjit {
namespace {

/// The strip tile of each instruction-set variant: MR output channels x NV vectors.
template <class Cfg> struct StripTile;
template <> struct StripTile<GemmAvx512> {
  static constexpr int MR = 8, NV = kStripVectors, VW = 16, NR = NV * VW;
};
template <> struct StripTile<GemmAvx2> {
  static constexpr int MR = 4, NV = kStripVectors, VW = 8, NR = NV * VW;
};

/// C[0:MRr, 0:nr] = A[0:MRr, 0:K] (lda) x B[0:K, 0:NV*VW] + epilogue, where row k of B is
/// at b + k*ldb, or at b + off[k] when Indexed (the taps of a convolution read straight
/// from its tap planes, see conv2dStripDirect). B must be readable for NV*VW columns even
/// when nr is less (the caller pads the last strip or leaves slack after the planes).
/// The body has the GEMM micro-kernel's shape (libjit_gemm_impl.h) with strided operands.
/// One always-inlined tile body shared by both was tried and measured (kernel_bench, min
/// of 2 x 100 reps): the same hot loop on 14-row GEMM tiles, but 11-18% slower strips at
/// K = 16-27 (LLVM unrolls and schedules the merged body differently), so both stay.
template <int VW, int NV, int MRr, bool Indexed>
LIBJIT_NOINLINE void stripKernel(int64_t K, const float *__restrict a, int64_t lda,
                                 const float *__restrict b, int64_t ldb,
                                 const int32_t *__restrict off, float *__restrict c, int64_t ldc,
                                 int64_t nr, const Epilogue *epi) {
  typedef typename VecOf<VW>::T V;
  constexpr int NR = VW * NV;
  // The bias is the accumulators' start value: with K as small as 16, every epilogue
  // operation saved per output is worth one FMA in sixteen.
  V acc[MRr][NV];
  LIBJIT_UNROLL
  for (int r = 0; r < MRr; r++) {
    V init = epi->biasRow ? splatV<V>(epi->biasRow[r]) : (V){};
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      acc[r][v] = init;
  }
  for (int64_t k = 0; k < K; k++) {
    V bv[NV];
    const float *row = Indexed ? b + off[k] : b + k * ldb;
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      bv[v] = loadV<V>(row + v * VW);
    LIBJIT_UNROLL
    for (int r = 0; r < MRr; r++) {
      V av = splatV<V>(a[r * lda + k]);
      LIBJIT_UNROLL
      for (int v = 0; v < NV; v++)
        acc[r][v] += av * bv[v];
    }
  }
  if (nr == NR) {
    LIBJIT_UNROLL
    for (int r = 0; r < MRr; r++) {
      LIBJIT_UNROLL
      for (int v = 0; v < NV; v++) {
        V x = acc[r][v];
        if (epi->add)
          x += loadV<V>(epi->add + r * epi->ldadd + v * VW);
        if (epi->act == ActClamp) {
          x = x < epi->lo ? splatV<V>(epi->lo) : x;
          x = x > epi->hi ? splatV<V>(epi->hi) : x;
        }
        storeV(c + r * ldc + v * VW, x);
      }
    }
    if (epi->act > ActClamp)
      activateTileN<NR>(c, ldc, MRr, epi->act, epi->lo, epi->hi);
    return;
  }
  // A partial strip: out of line (storePartialTile); the bias is in the accumulators.
  float tile[MRr * NR];
  LIBJIT_UNROLL
  for (int r = 0; r < MRr; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      storeV(tile + r * NR + v * VW, acc[r][v]);
  Epilogue tail = *epi;
  tail.biasRow = nullptr;
  tail.biasCol = nullptr;
  storePartialTile(tile, NR, MRr, nr, c, ldc, /*accumulate=*/0, /*last=*/1, &tail);
}

/// All O output channels of one strip of NVr vectors: full MR-row tiles, then the remaining
/// rows in tiles of 4, 2 and 1 (the weights are not padded, so no tile may run past row O).
/// B rows as in stripKernel: b + k*ldb, or b + off[k] when Ix.
template <class Cfg, int NVr, bool Ix>
LIBJIT_INLINE void stripRowsNV(int64_t O, int64_t K, const float *w, const float *b, int64_t ldb,
                               const int32_t *off, float *c, int64_t ldc, int64_t nr,
                               const float *bias, const float *add, int64_t ldadd,
                               const Epilogue &base) {
  typedef StripTile<Cfg> T;
  constexpr int VW = T::VW, MR = T::MR;
  Epilogue e = base;
  e.ldadd = ldadd;
  int64_t i = 0;
  auto at = [&](int64_t row) {
    e.biasRow = bias ? bias + row : nullptr;
    e.add = add ? add + row * ldadd : nullptr;
    return c + row * ldc;
  };
  for (; i + MR <= O; i += MR)
    stripKernel<VW, NVr, MR, Ix>(K, w + i * K, K, b, ldb, off, at(i), ldc, nr, &e);
  if (MR > 4 && i + 4 <= O) {
    stripKernel<VW, NVr, 4, Ix>(K, w + i * K, K, b, ldb, off, at(i), ldc, nr, &e);
    i += 4;
  }
  if (i + 2 <= O) {
    stripKernel<VW, NVr, 2, Ix>(K, w + i * K, K, b, ldb, off, at(i), ldc, nr, &e);
    i += 2;
  }
  if (i < O)
    stripKernel<VW, NVr, 1, Ix>(K, w + i * K, K, b, ldb, off, at(i), ldc, nr, &e);
}

/// One strip of nr <= NR columns: a partial last strip (pixel counts such as 28x28 = 16 x 48
/// + 16 or 55x55 = 63 x 48 + 1) takes a tile of one or two vectors, not three.
template <class Cfg, bool Ix = false>
LIBJIT_INLINE void stripRows(int64_t O, int64_t K, const float *w, const float *b, int64_t ldb,
                             float *c, int64_t ldc, int64_t nr, const float *bias, const float *add,
                             int64_t ldadd, const Epilogue &base, const int32_t *off = nullptr) {
  constexpr int VW = StripTile<Cfg>::VW;
  // Tap planes always have NR floats readable past a strip (see conv2dStripDirect): there a
  // partial strip takes the full tile, which keeps the indexed kernels to one width (each
  // width is four more kernels for the JIT to compile).
  if (Ix)
    stripRowsNV<Cfg, StripTile<Cfg>::NV, Ix>(O, K, w, b, ldb, off, c, ldc, nr, bias, add, ldadd,
                                             base);
  else if (nr <= VW)
    stripRowsNV<Cfg, 1, Ix>(O, K, w, b, ldb, off, c, ldc, nr, bias, add, ldadd, base);
  else if (nr <= 2 * VW)
    stripRowsNV<Cfg, 2, Ix>(O, K, w, b, ldb, off, c, ldc, nr, bias, add, ldadd, base);
  else
    stripRowsNV<Cfg, StripTile<Cfg>::NV, Ix>(O, K, w, b, ldb, off, c, ldc, nr, bias, add, ldadd,
                                             base);
}

/// d[0:n) = row[iw0 + t*SW] for t in [0, n), zero where the column leaves [0, W) or the row
/// is outside the image (row == nullptr). SWc is SW when known at compile time (1 or 2: the
/// divisions fold and the copies are 16-wide, ending with one overlapping vector rather
/// than a scalar tail), else 0.
template <int SWc>
LIBJIT_INLINE void im2colRun(float *d, const float *row, int64_t W, int64_t iw0, int64_t SWr,
                             int64_t n) {
  const int64_t SW = SWc ? SWc : SWr;
  if (!row) {
    for (int64_t t = 0; t < n; t++)
      d[t] = 0.0f;
    return;
  }
  int64_t tLo = iw0 >= 0 ? 0 : ceilDiv(-iw0, SW);
  int64_t tHi = W - iw0 <= 0 ? 0 : ceilDiv(W - iw0, SW);
  tLo = minI(tLo, n);
  tHi = maxI(minI(tHi, n), tLo);
  for (int64_t t = 0; t < tLo; t++)
    d[t] = 0.0f;
  int64_t t = tLo;
  if (SWc == 1) {
    for (; t + 16 <= tHi; t += 16)
      st16(d + t, ld16(row + iw0 + t));
    if (t < tHi && tHi - 16 >= tLo) {
      st16(d + tHi - 16, ld16(row + iw0 + tHi - 16));
      t = tHi;
    }
  } else if (SWc == 2) {
    for (; t + 16 <= tHi && iw0 + 2 * t + 32 <= W; t += 16)
      st16(d + t, evens(ld32(row + iw0 + 2 * t)));
    if (t < tHi && tHi - 16 >= tLo) {
      // The last 16 outputs, overlapping those written (the loop stops at most 16 short).
      // Their 32-float window ends one past the row when W - iw0 is odd: then load it one
      // float earlier and keep the odd lanes.
      int64_t base = iw0 + 2 * (tHi - 16);
      if (base + 32 <= W) {
        st16(d + tHi - 16, evens(ld32(row + base)));
        t = tHi;
      } else if (base >= 1) {
        st16(d + tHi - 16, odds(ld32(row + base - 1)));
        t = tHi;
      }
    }
  }
  for (; t < tHi; t++)
    d[t] = row[iw0 + t * SW];
  for (t = tHi; t < n; t++)
    d[t] = 0.0f;
}

/// im2colRun out of line, with the stride dispatched inside: one compiled copy per stride
/// serves the im2col fallback and the planes, where a copy inlined at each call site made
/// the strip kernel the longest JIT compile (halved its cold compile, see the README's
/// Measurements). The tap planes of
/// stride-2 layers keep an inlined copy (buildTapPlanes).
LIBJIT_NOINLINE void planeRun(float *d, const float *row, int64_t W, int64_t iw0, int64_t SW,
                              int64_t n) {
  if (SW == 1)
    im2colRun<1>(d, row, W, iw0, 1, n);
  else if (SW == 2)
    im2colRun<2>(d, row, W, iw0, 2, n);
  else
    im2colRun<0>(d, row, W, iw0, SW, n);
}

/// Rows [0, K) of the im2col matrix of one image over output pixels [p0, p0+np), each
/// written at dst + k*ldd, and zero-filled from np to ldd. Every (k, output row) pair is one
/// run, so the index arithmetic is paid per row, not per element.
LIBJIT_INLINE void im2colRows(float *dst, int64_t ldd, const float *x, int64_t p0, int64_t np,
                              int64_t C, int64_t H, int64_t W, int64_t OW, int64_t KH, int64_t KW,
                              int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH,
                              int64_t DW) {
  float *d = dst;
  for (int64_t c = 0; c < C; c++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++, d += ldd) {
        const float *plane = x + c * H * W;
        int64_t q = 0, oh = p0 / OW, ow = p0 % OW;
        while (q < np) {
          int64_t seg = minI(np - q, OW - ow);
          int64_t ih = oh * SH - PT + kh * DH;
          const float *row = ih >= 0 && ih < H ? plane + ih * W : nullptr;
          planeRun(d + q, row, W, ow * SW - PL + kw * DW, SW, seg);
          q += seg;
          ow = 0;
          oh++;
        }
        for (; q < ldd; q++)
          d[q] = 0.0f;
      }
}

/// The input rows of one image that a band of output rows reads, split by phase: for
/// each channel c and each row phase a = kh*DH mod SH and column phase b = kw*DW mod SW
/// that the kernel uses, the plane P[i][j] = X[c][(oh0 + i)*SH + a - PT][j*SW + b - PL],
/// zero outside the image. Tap (kh, kw) of output pixel (oh, ow) is then
/// P[oh - oh0 + kh*DH/SH][ow + kw*DW/SW]: a run of output pixels along a row reads a
/// contiguous run of a plane, so the im2col rows are plain copies without bounds checks,
/// and the stride-2 gathers happen once per input element instead of once per tap.
/// Measured faster (kernel_bench, README's Measurements) than gathering every tap's row
/// from the input on strided and 3x3/1 layers; the 3x3/2 stems with 3 channels are
/// slightly slower (long output rows made the gathers cheap there). Bands of planes capped to stay in L2
/// were not measurably faster.
struct PhasePlanes {
  static constexpr int kMaxStride = 4;
  int64_t oh0, rows, PW, nA, nB;
  int64_t slotA[kMaxStride], slotB[kMaxStride];
  float *p;
  int64_t planeFloats() const { return rows * PW; }
  int64_t channelFloats() const { return nA * nB * planeFloats(); }
};

/// Fills the phase slots of \p pp for a kernel of KH x KW taps (rows and PW set by the
/// caller); false when a stride exceeds kMaxStride.
LIBJIT_INLINE bool phaseSlots(PhasePlanes &pp, int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                              int64_t DH, int64_t DW) {
  if (SH > PhasePlanes::kMaxStride || SW > PhasePlanes::kMaxStride)
    return false;
  pp.nA = pp.nB = 0;
  for (int64_t a = 0; a < SH; a++) {
    pp.slotA[a] = -1;
    for (int64_t kh = 0; kh < KH && pp.slotA[a] < 0; kh++)
      if (kh * DH % SH == a)
        pp.slotA[a] = pp.nA++;
  }
  for (int64_t b = 0; b < SW; b++) {
    pp.slotB[b] = -1;
    for (int64_t kw = 0; kw < KW && pp.slotB[b] < 0; kw++)
      if (kw * DW % SW == b)
        pp.slotB[b] = pp.nB++;
  }
  return true;
}

/// Builds the planes of image x for output rows [oh0, oh0 + rows - extra rows of the taps).
LIBJIT_INLINE void buildPhasePlanes(const PhasePlanes &pp, const float *x, int64_t C, int64_t H,
                                    int64_t W, int64_t SH, int64_t SW, int64_t PT, int64_t PL) {
  for (int64_t c = 0; c < C; c++)
    for (int64_t a = 0; a < SH; a++) {
      if (pp.slotA[a] < 0)
        continue;
      for (int64_t b = 0; b < SW; b++) {
        if (pp.slotB[b] < 0)
          continue;
        float *plane =
            pp.p + c * pp.channelFloats() + (pp.slotA[a] * pp.nB + pp.slotB[b]) * pp.planeFloats();
        for (int64_t i = 0; i < pp.rows; i++) {
          int64_t ih = (pp.oh0 + i) * SH + a - PT;
          const float *row = ih >= 0 && ih < H ? x + (c * H + ih) * W : nullptr;
          planeRun(plane + i * pp.PW, row, W, b - PL, SW, pp.PW);
        }
      }
    }
}

/// Rows [0, K) of the im2col matrix over output pixels [p0, p0+np) (within the planes'
/// rows), row k at dst + k*ldd. Each output-row run is copied in whole 16-float vectors:
/// the excess lands where the next run (or the next k row) is written afterwards, so the
/// caller leaves 16 floats of slack after the block and after the planes.
LIBJIT_INLINE void im2colFromPlanes(float *dst, int64_t ldd, const PhasePlanes &pp, int64_t p0,
                                    int64_t np, int64_t C, int64_t OW, int64_t KH, int64_t KW,
                                    int64_t SH, int64_t SW, int64_t DH, int64_t DW) {
  int64_t ohFirst = p0 / OW, owFirst = p0 % OW;
  float *d = dst;
  for (int64_t c = 0; c < C; c++)
    for (int64_t kh = 0; kh < KH; kh++) {
      int64_t dh = kh * DH;
      const float *rowBase = pp.p + c * pp.channelFloats() +
                             pp.slotA[dh % SH] * pp.nB * pp.planeFloats() +
                             (ohFirst - pp.oh0 + dh / SH) * pp.PW;
      for (int64_t kw = 0; kw < KW; kw++, d += ldd) {
        int64_t dw = kw * DW;
        const float *src = rowBase + pp.slotB[dw % SW] * pp.planeFloats() + dw / SW;
        int64_t q = 0, ow = owFirst;
        while (q < np) {
          int64_t seg = minI(np - q, OW - ow);
          for (int64_t t = 0; t < seg; t += 16)
            st16(d + q + t, ld16(src + ow + t));
          q += seg;
          src += pp.PW;
          ow = 0;
        }
      }
    }
}

/// The most taps (C*KH*KW) of a convolution whose strips read its tap planes directly:
/// their offset table lives on the stack (18 KB).
constexpr int64_t kMaxDirectTaps = 4608;
/// The most tap planes per input channel (row phases x kernel columns): each is about one
/// OW-wide copy of a 1/SH share of the input rows. Measured in network against the
/// phase-plane im2col (README's Measurements): faster with 6 planes (3x3/2), slower with
/// resnet50's 7x7/2 stem (14 planes, 2.2 MB) and alexnet's 11x11/4 stem (44).
constexpr int64_t kMaxTapPlanes = 6;

/// Bands of tap planes for stems (at most kStemTaps taps, few channels and many pixels)
/// hold at most this many floats (128 KB), so the planes are read from L2 right after they
/// are built instead of from L3 (a whole 224x224 3x3/2 stem's planes are 0.9 MB).
constexpr int64_t kStemTaps = 64, kStemBandFloats = 32768;

/// The tap planes of conv2dStripDirect for output rows [oh0, oh0 + rows) of image x. Stride
/// 2 (Stride2) copies inline: its runs are as short as 7-28 floats, where the out-of-line
/// planeRun measured 5-30% slower; other strides share planeRun.
template <bool Stride2>
LIBJIT_INLINE void buildTapPlanes(float *pl, const float *x, int64_t C, int64_t H, int64_t W,
                                  int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DW,
                                  int64_t KW, const int64_t *slotA, int64_t nA, int64_t oh0,
                                  int64_t rows, int64_t OW, int64_t planeFloats) {
  for (int64_t c = 0; c < C; c++)
    for (int64_t ph = 0; ph < SH; ph++) {
      if (slotA[ph] < 0)
        continue;
      for (int64_t kw = 0; kw < KW; kw++) {
        float *q = pl + ((c * nA + slotA[ph]) * KW + kw) * planeFloats;
        for (int64_t i = 0; i < rows; i++) {
          int64_t ih = (oh0 + i) * SH + ph - PT;
          const float *row = ih >= 0 && ih < H ? x + (c * H + ih) * W : nullptr;
          if (Stride2)
            im2colRun<2>(q + i * OW, row, W, kw * DW - PL, 2, OW);
          else
            planeRun(q + i * OW, row, W, kw * DW - PL, SW, OW);
        }
      }
    }
}

/// A convolution whose strips read the B rows straight from "tap planes", no im2col copy.
/// For each channel c, row phase a = kh*DH mod SH in use and kernel column kw, the plane
/// Q[i][ow] = X[c][(oh0 + i)*SH + a - PT][ow*SW + kw*DW - PL] (zero outside the image) has
/// rows exactly OW wide, so tap (kh, kw) of output pixel p = oh*OW + ow is
/// Q(c, a, kw)[p - oh0*OW + (kh*DH/SH)*OW]: for every run of pixels, across output rows
/// too, row k of the im2col matrix is the plane run at a fixed offset off[k]. Strips are
/// then whole 48-pixel runs as on the im2col path (no dead lanes at row ends) and the
/// planes hold KW x nA copies of the input per channel instead of the im2col's KH x KW
/// (a 3x3/2 kernel: 6 instead of 9; 3x3/1: 3; 7x7/2: 14 instead of 49).
/// Returns false, leaving the im2col path to run, for more than kMaxDirectTaps taps or
/// kMaxTapPlanes planes per channel, and when not one output row's planes fit the scratch.
template <class Cfg>
LIBJIT_INLINE bool conv2dStripDirect(float *out, const float *in, const float *w, const float *bias,
                                     const float *add, int64_t N, int64_t C, int64_t H, int64_t W,
                                     int64_t O, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
                                     int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH,
                                     int64_t DW, const Epilogue &base, float *s, int64_t tid,
                                     int64_t nthreads) {
  constexpr int64_t NR = StripTile<Cfg>::NR;
  int64_t K = C * KH * KW, P = OH * OW;
  // Row phases in use, in the order of the planes.
  int64_t slotA[PhasePlanes::kMaxStride], nA = 0;
  if (K > kMaxDirectTaps || SH > PhasePlanes::kMaxStride)
    return false;
  for (int64_t a = 0; a < SH; a++) {
    slotA[a] = -1;
    for (int64_t kh = 0; kh < KH && slotA[a] < 0; kh++)
      if (kh * DH % SH == a)
        slotA[a] = nA++;
  }
  if (nA * KW > kMaxTapPlanes)
    return false;
  int64_t hk = (KH - 1) * DH / SH;
  // A partial strip reads up to NR floats past the band: from the last plane, into NR
  // floats of zeroed slack.
  int64_t perRow = C * nA * KW * OW;
  int64_t bandRows = (gemmScratchFloats<Cfg>() - NR - 16 - C * nA * KW * 16) / perRow - hk;
  if (bandRows < 1)
    return false;
  int64_t j0, j1;
  partition(P, NR, tid, nthreads, &j0, &j1);
  if (j0 >= j1)
    return true;
  if (K <= kStemTaps) {
    bandRows = minI(bandRows, maxI(kStemBandFloats / perRow, 8 * (hk + 1)));
    // Whole strips per band where the band's rows allow (no partial strip at its end):
    // a multiple of NR / gcd(OW, NR) rows.
    int64_t g = NR, r = OW;
    while (r) {
      int64_t t = g % r;
      g = r, r = t;
    }
    if (bandRows >= NR / g)
      bandRows = bandRows / (NR / g) * (NR / g);
  }
  bandRows = minI(bandRows, (j1 - 1) / OW - j0 / OW + 1);
  // Planes start on 64-byte boundaries, so every tap without a row shift loads aligned
  // (with one whose shift is a multiple of 16 floats).
  int64_t rows = bandRows + hk, planeFloats = ceilDiv(rows * OW, 16) * 16;
  int32_t off[kMaxDirectTaps];
  int32_t *o = off;
  for (int64_t c = 0; c < C; c++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++) {
        int64_t dh = kh * DH;
        *o++ = int32_t(((c * nA + slotA[dh % SH]) * KW + kw) * planeFloats + dh / SH * OW);
      }
  float *slack = s + 16 + C * nA * KW * planeFloats;
  for (int64_t t = 0; t < NR; t++)
    slack[t] = 0.0f;
  for (int64_t n = 0; n < N; n++) {
    const float *x = in + n * C * H * W;
    float *y = out + n * O * P;
    const float *a = add ? add + n * O * P : nullptr;
    for (int64_t oh0 = j0 / OW; oh0 * OW < j1; oh0 += bandRows) {
      int64_t jb = maxI(j0, oh0 * OW), je = minI(j1, (oh0 + bandRows) * OW);
      // The planes begin up to 15 floats into the scratch, so that the band's strips (every
      // NR pixels from jb) start on 64-byte boundaries.
      float *pl = s + (16 - (jb - oh0 * OW) % 16) % 16;
      // The planes of output rows [oh0, oh0 + bandRows) and the hk rows below them.
      if (SW == 2)
        buildTapPlanes<true>(pl, x, C, H, W, SH, 2, PT, PL, DW, KW, slotA, nA, oh0, rows, OW,
                             planeFloats);
      else
        buildTapPlanes<false>(pl, x, C, H, W, SH, SW, PT, PL, DW, KW, slotA, nA, oh0, rows, OW,
                              planeFloats);
      const float *b = pl - oh0 * OW;
      for (int64_t j = jb; j < je; j += NR)
        stripRows<Cfg, true>(O, K, w, b + j, 0, y + j, P, minI(NR, je - j), bias,
                             a ? a + j : nullptr, P, base, off);
    }
  }
  return true;
}

/// One image of a pointwise layer (stride 1, no padding) over pixels [j0, j1) and output
/// channels [r0, r1): the strips read the input in place, but for the last partial strip,
/// copied into s (reading NR columns would run past the input).
template <class Cfg>
LIBJIT_INLINE void stripPointwiseImage(float *y, const float *x, const float *a, const float *w,
                                       const float *bias, int64_t P, int64_t K, int64_t j0,
                                       int64_t j1, int64_t r0, int64_t r1, float *s,
                                       const Epilogue &base) {
  constexpr int64_t NR = StripTile<Cfg>::NR;
  for (int64_t j = j0; j < j1; j += NR) {
    int64_t nr = minI(NR, j1 - j);
    const float *b = x + j;
    int64_t ldb = P;
    if (nr < NR) {
      for (int64_t k = 0; k < K; k++)
        for (int64_t t = 0; t < NR; t++)
          s[k * NR + t] = t < nr ? x[k * P + j + t] : 0.0f;
      b = s, ldb = NR;
    }
    if (r0 < r1)
      stripRows<Cfg>(r1 - r0, K, w + r0 * K, b, ldb, y + r0 * P + j, P, nr,
                     bias ? bias + r0 : nullptr, a ? a + r0 * P + j : nullptr, P, base);
  }
}

/// Sizes the phase-plane bands of the thread's pixels [j0, j1): the planes follow the
/// im2col block (blockFloats) in the thread's scratch s; when the planes of all its output
/// rows do not fit, bands of whole blocks whose rows fit are taken in turn (bandPx pixels,
/// blocks of nbBand). False when the phase planes cannot serve.
template <class Cfg>
LIBJIT_INLINE bool stripBands(PhasePlanes &pp, float *s, int64_t blockFloats, int64_t C,
                              int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                              int64_t DH, int64_t DW, int64_t j0, int64_t j1, int64_t nbMax,
                              int64_t &bandPx, int64_t &nbBand) {
  constexpr int64_t NR = StripTile<Cfg>::NR;
  if (j0 >= j1 || !phaseSlots(pp, KH, KW, SH, SW, DH, DW))
    return false;
  const int64_t hk = (KH - 1) * DH / SH;
  pp.PW = OW + (KW - 1) * DW / SW;
  pp.p = s + blockFloats;
  int64_t perRow = C * pp.nA * pp.nB * pp.PW;
  int64_t maxRows = (gemmScratchFloats<Cfg>() - blockFloats - NR) / perRow - hk;
  if ((j1 - 1) / OW - j0 / OW + 1 <= maxRows) {
    bandPx = j1 - j0;
    return true;
  }
  // A run of (maxRows - 1) * OW pixels spans at most maxRows output rows.
  bandPx = (maxRows - 1) * OW / NR * NR;
  bandPx = bandPx >= nbMax ? bandPx / nbMax * nbMax : bandPx;
  nbBand = minI(nbMax, bandPx);
  return bandPx > 0;
}

/// One image over pixels [j0, j1) from phase planes built band by band: for 1x1 layers the
/// planes are the im2col matrix itself (a partial last strip reads into the next plane or
/// the slack); otherwise blocks of nbBand pixels are copied out of them into s.
template <class Cfg>
LIBJIT_INLINE void stripPhasedImage(float *y, const float *x, const float *a, const float *w,
                                    const float *bias, PhasePlanes &pp, int64_t C, int64_t H,
                                    int64_t W, int64_t O, int64_t OW, int64_t P, int64_t KH,
                                    int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,
                                    int64_t DH, int64_t DW, int64_t j0, int64_t j1,
                                    int64_t bandPx, int64_t nbBand, float *s,
                                    const Epilogue &base) {
  constexpr int64_t NR = StripTile<Cfg>::NR;
  const int64_t K = C * KH * KW, hk = (KH - 1) * DH / SH;
  for (int64_t bb = j0; bb < j1; bb += bandPx) {
    int64_t be = minI(j1, bb + bandPx);
    pp.oh0 = bb / OW;
    pp.rows = (be - 1) / OW - pp.oh0 + 1 + hk;
    buildPhasePlanes(pp, x, C, H, W, SH, SW, PT, PL);
    if (KH == 1 && KW == 1) {
      const float *b = pp.p - pp.oh0 * OW;
      for (int64_t j = bb; j < be; j += NR)
        stripRows<Cfg>(O, K, w, b + j, pp.channelFloats(), y + j, P, minI(NR, be - j), bias,
                       a ? a + j : nullptr, P, base);
      continue;
    }
    for (int64_t jb = bb; jb < be; jb += nbBand) {
      int64_t nb = minI(nbBand, be - jb), ld = ceilDiv(nb, NR) * NR;
      im2colFromPlanes(s, ld, pp, jb, nb, C, OW, KH, KW, SH, SW, DH, DW);
      for (int64_t j = 0; j < nb; j += NR)
        stripRows<Cfg>(O, K, w, s + j, ld, y + jb + j, P, minI(NR, nb - j), bias,
                       a ? a + jb + j : nullptr, P, base);
    }
  }
}

template <class Cfg>
LIBJIT_INLINE void conv2dStrip(float *out, const float *in, const float *w, const float *bias,
                               const float *add, int64_t N, int64_t C, int64_t H, int64_t W,
                               int64_t O, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
                               int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH,
                               int64_t DW, int64_t act, float lo, float hi, float *scratch,
                               int64_t tid, int64_t nthreads) {
  constexpr int64_t NR = StripTile<Cfg>::NR;
  int64_t K = C * KH * KW, P = OH * OW;
  bool pointwise =
      KH == 1 && KW == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 && OH == H && OW == W;
  float *s = scratch + tid * gemmScratchFloats<Cfg>();
  // Im2col blocks of about 384 KB stay in L2 while their strips are consumed.
  int64_t budget = minI(gemmScratchFloats<Cfg>(), 96 * 1024);
  int64_t nbMax = maxI(NR, budget / K / NR * NR);
  int64_t j0, j1, r0 = 0, r1 = O;
  // Pixels split in whole strips for the pointwise path (its reads run NR columns past a
  // strip's start); the copying paths split in vectors, whose partial strips take a tile of
  // one or two vectors: 28x28 = 16 strips + 16 pixels goes 400:384 instead of 432:352.
  partition(P, pointwise ? NR : StripTile<Cfg>::VW, tid, nthreads, &j0, &j1);
  if (pointwise && nthreads > 1) {
    // Few strips (14x14 = 4 strips + 4 columns) split unevenly by columns; then split the
    // output channels instead, which costs nothing here since the input is not packed.
    constexpr int64_t MR = StripTile<Cfg>::MR;
    int64_t colMax = minI(ceilDiv(ceilDiv(P, NR), nthreads) * NR, P) * O;
    int64_t rowMax = minI(ceilDiv(ceilDiv(O, MR), nthreads) * MR, O) * P;
    if (rowMax < colMax) {
      j0 = 0, j1 = P;
      partition(O, MR, tid, nthreads, &r0, &r1);
    }
  }
  Epilogue base = {nullptr, nullptr, nullptr, 0, (int)act, lo, hi};
  if (!pointwise && (KH != 1 || KW != 1) &&
      conv2dStripDirect<Cfg>(out, in, w, bias, add, N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL,
                             DH, DW, base, s, tid, nthreads))
    return;
  PhasePlanes pp = {};
  int64_t bandPx = 0, nbBand = nbMax;
  bool phased = !pointwise && stripBands<Cfg>(pp, s, nbMax * K + 16, C, OW, KH, KW, SH, SW, DH,
                                              DW, j0, j1, nbMax, bandPx, nbBand);
  for (int64_t n = 0; n < N; n++) {
    const float *x = in + n * C * H * W;
    float *y = out + n * O * P;
    const float *a = add ? add + n * O * P : nullptr;
    if (pointwise) {
      stripPointwiseImage<Cfg>(y, x, a, w, bias, P, K, j0, j1, r0, r1, s, base);
    } else if (phased) {
      stripPhasedImage<Cfg>(y, x, a, w, bias, pp, C, H, W, O, OW, P, KH, KW, SH, SW, PT, PL, DH,
                            DW, j0, j1, bandPx, nbBand, s, base);
    } else {
      for (int64_t jb = j0; jb < j1; jb += nbMax) {
        int64_t nb = minI(nbMax, j1 - jb), ld = ceilDiv(nb, NR) * NR;
        im2colRows(s, ld, x, jb, nb, C, H, W, OW, KH, KW, SH, SW, PT, PL, DH, DW);
        for (int64_t j = 0; j < nb; j += NR)
          stripRows<Cfg>(O, K, w, s + j, ld, y + jb + j, P, minI(NR, nb - j), bias,
                         a ? a + jb + j : nullptr, P, base);
      }
    }
  }
}

} // namespace
} // namespace libjit

using namespace libjit;

#define LIBJIT_STRIP_ENTRY_POINT(SUFFIX, CFG)                                                      \
  LIBJIT_EXPORT void libjit_conv2d_strip_f32_##SUFFIX(                                             \
      float *out, const float *in, const float *w, const float *bias, const float *add, int64_t N, \
      int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW, int64_t KH, int64_t KW,  \
      int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH, int64_t DW, int64_t act,         \
      float lo, float hi, float *scratch, int64_t tid, int64_t nthreads) {                         \
    conv2dStrip<CFG>(out, in, w, bias, add, N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, \
                     act, lo, hi, scratch, tid, nthreads);                                         \
  }

LIBJIT_STRIP_ENTRY_POINT(avx512, GemmAvx512)
LIBJIT_STRIP_ENTRY_POINT(avx2, GemmAvx2)

// ============================== depthwise and grouped
// Depthwise convolution on NCHW float32 (Group == C == O: one input plane per output
// plane), with the bias and the clamp fused. Work splits over the N*C planes. With at
// least 16 channels, square 3x3 and 5x5 kernels at SH == SW <= 2, DH == DW <= 2, on output rows of 7 to
// kLanesMaxOW take the lanes path (16 channels as the vector lanes; see below, where it
// is defined). Other square 3x3 and 5x5 kernels with column stride 1 or 2 take one of
// three vectorised paths:
//  - ring (output rows of 16 or more): the input rows a block of output rows reads are
//    copied, as they are first needed, into a ring of a few zero-padded rows split into
//    S column phases (even and odd columns at stride 2), which stays in L1; each loaded
//    vector of a padded row serves every output row of the block that reads it (two
//    output rows per block when SH == SW, so 3x3/1 loads 12 vectors per 18 FMAs), and the
//    results are stored straight into the output rows (the last block of a row overlapping
//    its predecessor);
//  - small (stride 1 on planes narrower than 16 with OW == W): the plane as one run, 16
//    outputs at a time across row ends, each kernel column's sum masked at the row ends;
//  - flat (the other planes narrower than 16): the zero-padded plane, split into S x S
//    phases, makes every tap a constant offset from the output's index in a plane whose
//    rows are Wq wide, so 16 outputs at a time run across row ends (the Wq - OW extra
//    columns per row are computed and dropped when the rows are copied out).
// Every other shape (kernels of any size, dilations, any strides) takes the any path: the
// flat path's phase split with the taps a runtime table of offsets (one per tap, into the
// S x S phases), 64 outputs (four vectors) per block and the taps as the inner loop.

using namespace libjit;

namespace {

/// The sum of a window's K row accumulators (kept apart so that their FMA chains overlap),
/// clamped to [lo, hi] when act.
template <int K> LIBJIT_INLINE F16 sumRows(const F16 *acc, int64_t act, F16 lo, F16 hi) {
  F16 v = acc[0];
  LIBJIT_UNROLL
  for (int kh = 1; kh < K; kh++)
    v += acc[kh];
  return act ? clamp16(v, lo, hi) : v;
}

/// Cells of one padded row of the ring path (one column phase), with slack for the copies.
LIBJIT_INLINE int64_t rowCells(int64_t OW, int64_t K, int64_t S) {
  return (OW + (K - 1) / S + 32 + 15) / 16 * 16;
}

/// Which path a shape takes: 0 any, 1 ring, 2 flat, 3 small. Output rows of 32 or more
/// (16 or more at stride 2) run on the ring; narrower stride-1 planes whose output rows
/// are as wide as the input's run small (no padded columns to compute, the plane copied
/// as one run); the other narrow planes with SH == SW run flat (at stride 1 below 32
/// columns the ring's per-row work measured slower than the flat plane: 28x28 layers).
LIBJIT_INLINE int dwPath(int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
                         int64_t SW, int64_t DH, int64_t DW) {
  if (KH != KW || (KH != 3 && KH != 5) || DH != 1 || DW != 1 || SW > 2 || SH < 1)
    return 0;
  if (OW >= 32 || (OW >= 16 && SH != SW))
    return 1;
  if (SH == 1 && SW == 1 && OW == W && W < 16 && OH * OW >= 16)
    return 3;
  return SH == SW ? 2 : 0;
}

/// d[0, n) = s[0, n) in whole vectors, the last one overlapping its predecessor (scalar
/// tails cost more than the row's vectors).
LIBJIT_INLINE void copyRow(float *__restrict d, const float *__restrict s, int64_t n) {
  if (n < 16) {
    for (int64_t i = 0; i < n; i++)
      d[i] = s[i];
    return;
  }
  for (int64_t i0 = 0;; i0 += 16) {
    int64_t i = minI(i0, n - 16);
    st16(d + i, ld16(s + i));
    if (i0 + 16 >= n)
      break;
  }
}

/// y[i][0:OW) = o[i][0:OW) for rows i < OH (pitches OW and Wq >= OW). Rows narrower than
/// 16 are stored as whole vectors in ascending order where the vector stays inside the
/// plane: the lanes past a row land in rows stored after it; the rest row by row.
LIBJIT_INLINE void copyPlaneRows(float *__restrict y, const float *__restrict o, int64_t OH,
                                 int64_t OW, int64_t Wq) {
  int64_t i = 0;
  if (OW < 16)
    for (; i * OW + 16 <= OH * OW; i++)
      st16(y + i * OW, ld16(o + i * Wq));
  for (; i < OH; i++)
    copyRow(y + i * OW, o + i * Wq, OW);
}

/// Copies input row xr [W] into the zero-padded row at padded column PL, split into S
/// column phases of `cells` cells each (padded column q lands in phase q % S at q / S).
/// Only cells below Wq are written, so the padding written once stays zero.
template <int S>
LIBJIT_INLINE void loadRow(float *__restrict dst, const float *__restrict xr, int64_t W, int64_t PL,
                           int64_t Wq, int64_t cells) {
  if (S == 1) {
    copyRow(dst + PL, xr, minI(W, Wq - PL));
    return;
  }
  // x[2m] is padded column 2m + PL, x[2m + 1] is 2m + 1 + PL.
  float *de = dst + (PL % 2) * cells + PL / 2;
  float *dodd = dst + ((PL + 1) % 2) * cells + (PL + 1) / 2;
  int64_t nE = minI((W + 1) / 2, Wq - PL / 2), nO = minI(W / 2, Wq - (PL + 1) / 2);
  int64_t nB = minI(nE, nO), m = 0;
  for (; m + 16 <= nB; m += 16) {
    F32x v = ld32(xr + 2 * m);
    st16(de + m, evens(v));
    st16(dodd + m, odds(v));
  }
  // Then pairs 8 at a time (16 input floats), the last block overlapping the one before
  // (rows of 16 to 31 floats: the 28-wide rows of the 28x28 -> 14x14 layers).
  typedef VecOf<8>::T F8;
  if (m < nB && nB >= 8 && 2 * nB <= W)
    for (int64_t m0 = m;; m0 += 8) {
      int64_t q = minI(m0, nB - 8);
      F16 v = ld16(xr + 2 * q);
      storeV<F8>(de + q, __builtin_shufflevector(v, v, 0, 2, 4, 6, 8, 10, 12, 14));
      storeV<F8>(dodd + q, __builtin_shufflevector(v, v, 1, 3, 5, 7, 9, 11, 13, 15));
      if (m0 + 8 >= nB) {
        m = nB;
        break;
      }
    }
  // Even rows of 8 to 14 floats (the 14x14 -> 7x7 layers): 4 pairs from each of two
  // overlapping 8-float loads.
  if (m == 0 && W >= 8 && W < 16 && W % 2 == 0 && nE == W / 2 && nO == W / 2) {
    typedef float F4 __attribute__((vector_size(16)));
    F8 a = loadV<F8>(xr), b = loadV<F8>(xr + W - 8);
    int64_t q = (W - 8) / 2;
    storeV<F4>(de, __builtin_shufflevector(a, a, 0, 2, 4, 6));
    storeV<F4>(dodd, __builtin_shufflevector(a, a, 1, 3, 5, 7));
    storeV<F4>(de + q, __builtin_shufflevector(b, b, 0, 2, 4, 6));
    storeV<F4>(dodd + q, __builtin_shufflevector(b, b, 1, 3, 5, 7));
    return;
  }
  for (int64_t e = m; e < nE; e++)
    de[e] = xr[2 * e];
  for (int64_t o = m; o < nO; o++)
    dodd[o] = xr[2 * o + 1];
}

/// Output rows per block of the ring path: two when the rows share inputs at the column
/// stride's pace (SH == SW), except 5x5/2, whose 35 loads and 50 FMAs for two rows leave
/// too few registers (measured slower than one row at a time).
LIBJIT_INLINE int64_t ringRowsPerBlock(int64_t K, int64_t SH, int64_t SW) {
  return SH == SW && !(K == 5 && SW == 2) ? 2 : 1;
}

/// Padded rows the ring path copies ahead of the block it computes: those the next block
/// adds (R SH), so that a row's copy is issued a block before the loads that read it. A
/// block's loads are unaligned and overlap two of the copy's vector stores, which the
/// store buffer cannot forward: read right after the copy, they waited for its stores to
/// reach the cache. None at row strides above 2, where blocks share no rows.
LIBJIT_INLINE int64_t ringAhead(int64_t K, int64_t SH, int64_t SW) {
  return SH <= 2 ? ringRowsPerBlock(K, SH, SW) * SH : 0;
}

/// Padded rows the ring keeps: those of one block, (R - 1) SH + K, and those copied ahead.
LIBJIT_INLINE int64_t ringSlots(int64_t K, int64_t SH, int64_t SW) {
  return (ringRowsPerBlock(K, SH, SW) - 1) * SH + K + ringAhead(K, SH, SW);
}

/// The most slots ringSlots gives (K 5, R 2, SH 2: 2 + 5 + 4; R 1 when SH > 2: K).
constexpr int64_t kMaxRingSlots = 11;

/// Floats of the ring path's scratch: its slots and one zero row, each S padded rows of
/// rowCells cells.
LIBJIT_INLINE int64_t ringFloats(int64_t OW, int64_t K, int64_t SH, int64_t SW) {
  return (ringSlots(K, SH, SW) + 1) * SW * rowCells(OW, K, SW);
}

/// Rb output rows [oh, oh + Rb) of one plane on the ring path, 16 outputs at a time:
/// rows[q] is padded row oh SH + q (S column phases of `cells` cells; q < (Rb - 1) S + K,
/// Rb > 1 only when SH == S). Each vector loaded feeds every output row that reads it.
template <int K, int S, int Rb, int NAr = (K == 3 ? 3 : 2)>
LIBJIT_INLINE void ringBlock(float *__restrict y, const float *const *rows, int64_t OW,
                             int64_t cells, const F16 (&wv)[K][K], F16 bv, int act, F16 lov,
                             F16 hiv) {
  constexpr int Q = (Rb - 1) * S + K, NA = NAr;
  const float *rp[Q];
  LIBJIT_UNROLL
  for (int q = 0; q < Q; q++)
    rp[q] = rows[q];
  for (int64_t j0 = 0;; j0 += 16) {
    // The last block overlaps the previous one instead of running past the row.
    int64_t j = minI(j0, OW - 16);
    // NA accumulators per output row (kernel row kh feeds acc[kh % NA]), so that the
    // chains of dependent FMAs stay short enough for several blocks to overlap.
    F16 acc[Rb][NA];
    LIBJIT_UNROLL
    for (int r = 0; r < Rb; r++) {
      acc[r][0] = bv;
      LIBJIT_UNROLL
      for (int a = 1; a < NA; a++)
        acc[r][a] = splat16(0.0f);
    }
    LIBJIT_UNROLL
    for (int q = 0; q < Q; q++)
      LIBJIT_UNROLL
    for (int kw = 0; kw < K; kw++) {
      F16 v = ld16(rp[q] + (kw % S) * cells + j + kw / S);
      LIBJIT_UNROLL
      for (int r = 0; r < Rb; r++) {
        int kh = q - r * S;
        if (kh >= 0 && kh < K)
          acc[r][kh % NA] += wv[kh][kw] * v;
      }
    }
    LIBJIT_UNROLL
    for (int r = 0; r < Rb; r++) {
      F16 o = acc[r][0];
      LIBJIT_UNROLL
      for (int a = 1; a < NA; a++)
        o += acc[r][a];
      st16(y + r * OW + j, act ? clamp16(o, lov, hiv) : o);
    }
    if (j0 + 16 >= OW)
      break;
  }
}

/// One plane on the ring path (OW >= 16). buf holds ringSlots slots and a zero row, their
/// padding cells zero (written once per call: the copies write only the image's columns,
/// the same cells in every slot). Padded row r (input row r - PT) lives in slot r % NR
/// once loaded; rows outside the image point at the zero row.
template <int K, int S>
LIBJIT_INLINE void dwRing(float *__restrict y, const float *__restrict x, const float *__restrict f,
                          float b, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t SH,
                          int64_t PT, int64_t PL, int act, float lo, float hi, int gact,
                          float *buf) {
  const int64_t Wq = OW + (K - 1) / S, cells = rowCells(OW, K, S), pitch = S * cells;
  const int64_t NR = ringSlots(K, SH, S);
  const int64_t R = ringRowsPerBlock(K, SH, S), ahead = ringAhead(K, SH, S);
  // One past the last padded row an output reads.
  const int64_t rowsRead = (OH - 1) * SH + K;
  const float *zero = buf + NR * pitch;
  const float *slot[kMaxRingSlots];
  F16 wv[K][K];
  LIBJIT_UNROLL
  for (int kh = 0; kh < K; kh++)
    LIBJIT_UNROLL
  for (int kw = 0; kw < K; kw++)
    wv[kh][kw] = splat16(f[kh * K + kw]);
  F16 bv = splat16(b), lov = splat16(lo), hiv = splat16(hi);
  // The first padded row not loaded yet; the slot of the block's first row (first % NR,
  // kept without divisions: they cost as much as a narrow row's FMAs).
  int64_t next = 0, sFirst = 0;
  for (int64_t oh = 0; oh < OH; oh += R) {
    int64_t rb = minI(R, OH - oh), first = oh * SH, last = (oh + rb - 1) * SH + K;
    if (oh > 0)
      for (sFirst += R * SH; sFirst >= NR;)
        sFirst -= NR;
    // This block's rows not loaded yet (all of them without copies ahead), then the rows
    // the next block adds.
    for (next = maxI(next, first); next < minI(last + ahead, rowsRead); next++) {
      int64_t s = sFirst + (next - first), ih = next - PT;
      s -= s >= NR ? NR : 0;
      if (ih >= 0 && ih < H) {
        loadRow<S>(buf + s * pitch, x + ih * W, W, PL, Wq, cells);
        slot[s] = buf + s * pitch;
      } else {
        slot[s] = zero;
      }
    }
    const float *rows[kMaxRingSlots];
    for (int64_t q = 0, s = sFirst; q < last - first; q++, s = s + 1 == NR ? 0 : s + 1)
      rows[q] = slot[s];
    if (rb == 1)
      ringBlock<K, S, 1>(y + oh * OW, rows, OW, cells, wv, bv, act, lov, hiv);
    else if constexpr (!(K == 5 && S == 2)) // see ringRowsPerBlock
      ringBlock<K, S, 2>(y + oh * OW, rows, OW, cells, wv, bv, act, lov, hiv);
    // Another activation than the clamp (libjit_act.h) on the rows just written.
    if (gact)
      activateContiguous(y + oh * OW, rb * OW, gact, lo, hi);
  }
}

/// Planes the flat path copies before it computes them (as the small path's kSmallBatch).
constexpr int64_t kFlatBatch = 4;

/// Geometry of the flat path: kFlatBatch sets of S x S phases of Hq x Wq cells (plus 32 of
/// slack each, for the loads of the last output block), then OH x Wq outputs (rounded up
/// to a block).
struct FlatGeom {
  int64_t Hq, Wq, phase, outCells;
  FlatGeom(int64_t OH, int64_t OW, int64_t K, int64_t S) {
    Hq = OH + (K - 1) / S;
    Wq = OW + (K - 1) / S;
    phase = (Hq * Wq + 32 + 15) / 16 * 16;
    outCells = (OH * Wq + 15) / 16 * 16;
  }
  int64_t floats(int64_t S) const { return kFlatBatch * S * S * phase + outCells; }
};

/// Copies one plane into the flat path's S x S phases at buf (padding cells zero, written
/// once per call).
template <int K, int S>
LIBJIT_INLINE void flatLoad(float *__restrict buf, const float *__restrict x, int64_t H, int64_t W,
                            int64_t PT, int64_t PL, const FlatGeom &g) {
  // Phase (a, c) cell (i, j) is padded row i * S + a, padded column j * S + c.
  for (int a = 0; a < S; a++)
    for (int64_t i = 0; i < g.Hq; i++) {
      int64_t ih = i * S + a - PT;
      if (ih < 0 || ih >= H)
        continue;
      const float *xr = x + ih * W;
      // Rows of 16 floats or more and even ones of 8 to 14: both column phases of row i in
      // vectors (phase (a, 1) is g.phase cells after (a, 0)); other narrow ones element by
      // element (loadRow's scalar tail measured slower there).
      if (S == 1 || W >= 16 || (W >= 8 && W % 2 == 0)) {
        loadRow<S>(buf + a * S * g.phase + i * g.Wq, xr, W, PL, g.Wq, g.phase);
        continue;
      }
      for (int c = 0; c < S; c++) {
        float *d = buf + (a * S + c) * g.phase + i * g.Wq;
        // Columns j with 0 <= j * S + c - PL < W.
        int64_t off = c - PL;
        int64_t jLo = off >= 0 ? 0 : ceilDiv(-off, S);
        int64_t jHi = minI(g.Wq, W - off <= 0 ? 0 : ceilDiv(W - off, S));
        for (int64_t j = jLo; j < jHi; j++)
          d[j] = xr[j * S + off];
      }
    }
}

/// One plane on the flat path from its phases at buf, through the output cells o.
template <int K, int S>
LIBJIT_INLINE void dwFlat(float *__restrict y, const float *__restrict buf, float *__restrict o,
                          const float *__restrict f, float b, const FlatGeom &g, int64_t OH,
                          int64_t OW, int act, float lo, float hi) {
  F16 bv = splat16(b), lov = splat16(lo), hiv = splat16(hi);
  F16 wv[K][K];
  LIBJIT_UNROLL
  for (int kh = 0; kh < K; kh++)
    LIBJIT_UNROLL
  for (int kw = 0; kw < K; kw++)
    wv[kh][kw] = splat16(f[kh * K + kw]);
  for (int64_t i0 = 0; i0 < OH * g.Wq; i0 += 16) {
    F16 acc[K];
    LIBJIT_UNROLL
    for (int kh = 0; kh < K; kh++) {
      acc[kh] = kh == 0 ? bv : splat16(0.0f);
      LIBJIT_UNROLL
      for (int kw = 0; kw < K; kw++)
        acc[kh] += wv[kh][kw] *
                   ld16(buf + ((kh % S) * S + kw % S) * g.phase + i0 + (kh / S) * g.Wq + kw / S);
    }
    st16(o + i0, sumRows<K>(acc, act, lov, hiv));
  }
  copyPlaneRows(y, o, OH, OW, g.Wq);
}

/// Planes the small path copies before it computes them: a plane's copy is a few vector
/// stores that the computation's unaligned loads read right back, so the loads of a plane
/// copied just before would wait for those stores to reach the cache.
constexpr int64_t kSmallBatch = 8;

/// Geometry of the small path: kSmallBatch buffers, each a plane as one run of H W cells
/// after `front` zero cells (the most rows and columns of top and left padding a shape
/// with OW == W can have) and before enough zero cells for the bottom rows; then per kernel
/// column kw one mask word per output cell, all ones where the cell's column ow + kw - PL
/// is inside the image.
struct SmallGeom {
  int64_t front, planeFloats, cells;
  SmallGeom(int64_t H, int64_t W, int64_t OH, int64_t K) {
    front = ((maxI(OH - H, 0) + K - 1) * W + K - 1 + 15) / 16 * 16;
    planeFloats = front + ((maxI(OH, H) + K) * W + K + 16 + 15) / 16 * 16;
    cells = OH * W;
  }
  int64_t floats(int64_t K) const { return kSmallBatch * planeFloats + (K * cells + 15) / 16 * 16; }
};

/// The small path's masks (once per call): mask[kw][p] = ~0 where 0 <= p % W + kw - PL < W.
LIBJIT_INLINE void smallMasks(uint32_t *mask, const SmallGeom &g, int64_t W, int64_t K,
                              int64_t PL) {
  for (int64_t kw = 0; kw < K; kw++)
    for (int64_t p = 0; p < g.cells; p++) {
      int64_t c = p % W + kw - PL;
      mask[kw * g.cells + p] = c >= 0 && c < W ? ~0u : 0u;
    }
}

typedef uint32_t U16 __attribute__((vector_size(64)));

/// One plane on the small path (stride 1, undilated, OW == W): output cell p = oh W + ow
/// reads tap (kh, kw) at plane cell p + (kh - PT) W + kw - PL, so 16 outputs at a time
/// run across row ends with no padded columns. Rows above and below the image read the
/// zero cells around the plane; a column outside it reads a neighbouring row's cell, so
/// each kernel column's sum over kh is masked to zero there before it joins the output.
/// plane is the buffer the plane was copied into (its zero cells written once per call).
template <int K>
LIBJIT_INLINE void dwSmall(float *__restrict y, const float *__restrict plane,
                           const uint32_t *__restrict mask, const float *__restrict f, float b,
                           const SmallGeom &g, int64_t W, int64_t PT, int64_t PL, int act, float lo,
                           float hi) {
  const float *base = plane + g.front - PT * W - PL;
  F16 wv[K][K];
  LIBJIT_UNROLL
  for (int kh = 0; kh < K; kh++)
    LIBJIT_UNROLL
  for (int kw = 0; kw < K; kw++)
    wv[kh][kw] = splat16(f[kh * K + kw]);
  F16 bv = splat16(b), lov = splat16(lo), hiv = splat16(hi);
  const int64_t cells = g.cells;
  for (int64_t i0 = 0;; i0 += 16) {
    // The last block overlaps the previous one instead of running past the plane.
    int64_t i = minI(i0, cells - 16);
    F16 col[K];
    LIBJIT_UNROLL
    for (int kw = 0; kw < K; kw++) {
      col[kw] = wv[0][kw] * ld16(base + i + kw);
      LIBJIT_UNROLL
      for (int kh = 1; kh < K; kh++)
        col[kw] += wv[kh][kw] * ld16(base + i + kh * W + kw);
    }
    F16 out = bv;
    LIBJIT_UNROLL
    for (int kw = 0; kw < K; kw++) {
      U16 m;
      __builtin_memcpy(&m, mask + kw * cells + i, sizeof(m));
      out += (F16)((U16)col[kw] & m);
    }
    st16(y + i, act ? clamp16(out, lov, hiv) : out);
    if (i0 + 16 >= cells)
      break;
  }
}

/// Planes [q, q1) (at most kSmallBatch) on the small path: all copied, then computed.
template <int K>
LIBJIT_INLINE void dwSmallBatch(float *out, const float *in, const float *filter, const float *bias,
                                int64_t C, int64_t H, int64_t W, int64_t OH, int64_t PT, int64_t PL,
                                int act, float lo, float hi, float *buf, const uint32_t *mask,
                                const SmallGeom &g, int64_t q, int64_t q1, int gact) {
  for (int64_t p = q; p < q1; p++)
    copyRow(buf + (p - q) * g.planeFloats + g.front, in + p * H * W, H * W);
  for (int64_t p = q; p < q1; p++) {
    int64_t c = p % C;
    dwSmall<K>(out + p * OH * W, buf + (p - q) * g.planeFloats, mask, filter + c * K * K,
               bias ? bias[c] : 0.0f, g, W, PT, PL, act, lo, hi);
    if (gact)
      activateContiguous(out + p * OH * W, OH * W, gact, lo, hi);
  }
}

/// The small path over planes [p0, p1), in batches of kSmallBatch.
template <int K>
LIBJIT_INLINE void dwSmallPlanes(float *out, const float *in, const float *filter,
                                 const float *bias, int64_t C, int64_t H, int64_t W, int64_t OH,
                                 int64_t PT, int64_t PL, int act, float lo, float hi, float *buf,
                                 int64_t p0, int64_t p1, int gact) {
  SmallGeom g(H, W, OH, K);
  for (int64_t i = 0; i < kSmallBatch * g.planeFloats; i++)
    buf[i] = 0.0f;
  uint32_t *mask = reinterpret_cast<uint32_t *>(buf + kSmallBatch * g.planeFloats);
  smallMasks(mask, g, W, K, PL);
  for (int64_t q = p0; q < p1; q += kSmallBatch)
    dwSmallBatch<K>(out, in, filter, bias, C, H, W, OH, PT, PL, act, lo, hi, buf, mask, g, q,
                    minI(q + kSmallBatch, p1), gact);
}

/// Geometry of the any path: SH x SW phases of Hq x Wq cells, each followed by slack for
/// the loads of the last output blocks (a tap reads up to Wq cells past the phase's last
/// row), then OH x Wq outputs rounded up to a block of four vectors; the tap table (one
/// int64 per tap) comes first.
struct AnyGeom {
  int64_t Hq, Wq, phase, outCells, tapFloats, taps;
  AnyGeom(int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t DH,
          int64_t DW) {
    Hq = OH + ((KH - 1) * DH) / SH;
    Wq = OW + ((KW - 1) * DW) / SW;
    phase = (Hq * Wq + Wq + 64 + 15) / 16 * 16;
    outCells = (OH * Wq + 63) / 64 * 64;
    taps = KH * KW;
    tapFloats = (2 * taps + 15) / 16 * 16;
  }
  int64_t floats(int64_t SH, int64_t SW) const {
    return tapFloats + SH * SW * phase + outCells;
  }
};

/// Copies input row xr [W] into row i of the phases of column phase 0..SW-1 whose cells
/// start at d (phase c at d + c * phaseCells): padded column q = j * SW + c lands at cell
/// j of phase c when j < Wq. Padding cells are never written.
LIBJIT_INLINE void anyLoadRow(float *__restrict d, const float *__restrict xr, int64_t W,
                              int64_t PL, int64_t SW, int64_t Wq, int64_t phaseCells) {
  if (SW == 1) {
    int64_t jLo = maxI(PL, 0), jHi = minI(Wq, W + PL);
    if (jHi > jLo)
      copyRow(d + jLo, xr + jLo - PL, jHi - jLo);
    return;
  }
  if (SW == 2 && PL >= 0) {
    loadRow<2>(d, xr, W, PL, Wq, phaseCells);
    return;
  }
  for (int64_t c = 0; c < SW; c++) {
    float *dc = d + c * phaseCells;
    // Columns j with 0 <= j * SW + c - PL < W.
    int64_t off = c - PL;
    int64_t jLo = off >= 0 ? 0 : ceilDiv(-off, SW);
    int64_t jHi = minI(Wq, W - off <= 0 ? 0 : ceilDiv(W - off, SW));
    for (int64_t j = jLo; j < jHi; j++)
      dc[j] = xr[j * SW + off];
  }
}

/// The any path's tap table: tap (kh, kw) reads phase (kh DH % SH, kw DW % SW) at
/// (kh DH / SH) rows and (kw DW / SW) cells from the output's cell.
LIBJIT_INLINE void anyTaps(int64_t *toff, const AnyGeom &g, int64_t KH, int64_t KW, int64_t SH,
                           int64_t SW, int64_t DH, int64_t DW) {
  for (int64_t kh = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw++) {
      int64_t r = kh * DH, q = kw * DW;
      toff[kh * KW + kw] = ((r % SH) * SW + q % SW) * g.phase + (r / SH) * g.Wq + q / SW;
    }
}

/// One plane on the any path; buf's padding cells are zero and its tap table filled
/// (once per call).
LIBJIT_INLINE void dwAny(float *__restrict y, const float *__restrict x, const float *__restrict f,
                         float b, const AnyGeom &g, int64_t H, int64_t W, int64_t OH, int64_t OW,
                         int64_t SH, int64_t SW, int64_t PT, int64_t PL, int act, float lo,
                         float hi, float *buf) {
  const int64_t *toff = reinterpret_cast<const int64_t *>(buf);
  float *planes = buf + g.tapFloats;
  // Phase (a, c) cell (i, j) is padded row i * SH + a, padded column j * SW + c.
  for (int64_t a = 0; a < SH; a++)
    for (int64_t i = 0; i < g.Hq; i++) {
      int64_t ih = i * SH + a - PT;
      if (ih < 0 || ih >= H)
        continue;
      anyLoadRow(planes + a * SW * g.phase + i * g.Wq, x + ih * W, W, PL, SW, g.Wq, g.phase);
    }
  float *o = planes + SH * SW * g.phase;
  F16 bv = splat16(b), lov = splat16(lo), hiv = splat16(hi);
  const int64_t T = g.taps, cells = OH * g.Wq;
  int64_t i0 = 0;
  for (; i0 + 64 <= g.outCells && i0 < cells; i0 += 64) {
    F16 a0 = bv, a1 = bv, a2 = bv, a3 = bv;
    const float *p0 = planes + i0;
    for (int64_t t = 0; t < T; t++) {
      F16 w = splat16(f[t]);
      const float *p = p0 + toff[t];
      a0 += w * ld16(p);
      a1 += w * ld16(p + 16);
      a2 += w * ld16(p + 32);
      a3 += w * ld16(p + 48);
    }
    if (act) {
      a0 = clamp16(a0, lov, hiv), a1 = clamp16(a1, lov, hiv);
      a2 = clamp16(a2, lov, hiv), a3 = clamp16(a3, lov, hiv);
    }
    st16(o + i0, a0);
    st16(o + i0 + 16, a1);
    st16(o + i0 + 32, a2);
    st16(o + i0 + 48, a3);
  }
  copyPlaneRows(y, o, OH, OW, g.Wq);
}

/// The any path over planes [p0, p1).
LIBJIT_INLINE void dwAnyPlanes(float *out, const float *in, const float *filter,
                               const float *bias, int64_t C, int64_t H, int64_t W, int64_t OH,
                               int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                               int64_t PT, int64_t PL, int64_t DH, int64_t DW, int act, float lo,
                               float hi, float *buf, int64_t p0, int64_t p1) {
  AnyGeom g(OH, OW, KH, KW, SH, SW, DH, DW);
  int64_t n = g.floats(SH, SW);
  for (int64_t i = 0; i < n; i++)
    buf[i] = 0.0f;
  anyTaps(reinterpret_cast<int64_t *>(buf), g, KH, KW, SH, SW, DH, DW);
  for (int64_t p = p0; p < p1; p++) {
    int64_t c = p % C;
    dwAny(out + p * OH * OW, in + p * H * W, filter + c * KH * KW, bias ? bias[c] : 0.0f, g, H, W,
          OH, OW, SH, SW, PT, PL, act, lo, hi, buf);
  }
}

/// The flat path over planes [p0, p1) (buf's padding cells zero), kFlatBatch planes
/// copied before they are computed.
template <int K, int S>
LIBJIT_INLINE void dwFlatPlanes(float *out, const float *in, const float *filter, const float *bias,
                                int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t PT,
                                int64_t PL, int act, float lo, float hi, float *buf, int64_t p0,
                                int64_t p1, int gact) {
  FlatGeom g(OH, OW, K, S);
  const int64_t set = S * S * g.phase;
  float *o = buf + kFlatBatch * set;
  for (int64_t q = p0; q < p1; q += kFlatBatch) {
    int64_t q1 = minI(q + kFlatBatch, p1);
    for (int64_t p = q; p < q1; p++)
      flatLoad<K, S>(buf + (p - q) * set, in + p * H * W, H, W, PT, PL, g);
    for (int64_t p = q; p < q1; p++) {
      int64_t c = p % C;
      dwFlat<K, S>(out + p * OH * OW, buf + (p - q) * set, o, filter + c * K * K,
                   bias ? bias[c] : 0.0f, g, OH, OW, act, lo, hi);
      // Another activation than the clamp (libjit_act.h) on the plane just written.
      if (gact)
        activateContiguous(out + p * OH * OW, OH * OW, gact, lo, hi);
    }
  }
}

template <int K, int S>
LIBJIT_INLINE void dwPlanes(float *out, const float *in, const float *filter, const float *bias,
                            int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t SH,
                            int64_t PT, int64_t PL, int act, float lo, float hi, float *buf,
                            int64_t p0, int64_t p1, bool ring, int gact) {
  // Padding cells are never written by the per-plane copies: zero them once.
  int64_t n = ring ? ringFloats(OW, K, SH, S) : FlatGeom(OH, OW, K, S).floats(S);
  for (int64_t i = 0; i < n; i++)
    buf[i] = 0.0f;
  if (!ring) {
    dwFlatPlanes<K, S>(out, in, filter, bias, C, H, W, OH, OW, PT, PL, act, lo, hi, buf, p0, p1,
                       gact);
    return;
  }
  for (int64_t p = p0; p < p1; p++) {
    int64_t c = p % C;
    dwRing<K, S>(out + p * OH * OW, in + p * H * W, filter + c * K * K, bias ? bias[c] : 0.0f, H, W,
                 OH, OW, SH, PT, PL, act, lo, hi, gact, buf);
  }
}

// The lanes path (square 3x3 and 5x5, SH == SW <= 2, DH == DW <= 2, output rows of 7 to
// kLanesMaxOW, at least 16 channels): 16 channels at a time are the vector lanes. A block's
// input planes are transposed (16 x 16 in registers) into a zero-padded pixel-major copy
// (each pixel one vector of its 16 channels), so every tap is one aligned load and the
// taps of one pixel are 16 channels' own weights: no shifted (unaligned, line-crossing)
// loads, no masks and no padded columns computed. A register tile is 7 consecutive outputs
// of a row; each input vector of a kernel row feeds every output of the tile that reads it
// (5x5/1: 11 loads and 5 weight loads per 35 multiply-adds). The pixel-major results are
// transposed back into the 16 output planes.

/// The widest output rows the lanes path takes (its buffers stay in the L2 cache).
constexpr int64_t kLanesMaxOW = 28;
/// Outputs per register tile of the lanes path.
constexpr int kLanesTile = 7;

/// Geometry of the lanes path's scratch: the padded pixel-major input (Hp x Wp pixels of
/// 16 floats), the pixel-major outputs (OH OW pixels), the block's taps (K K vectors), the
/// input pixels' destinations in the padded copy (H W int32 offsets, see lanesOffsets) and
/// one vector of slack for the pixels no output reads.
struct LanesGeom {
  int64_t Hp, Wp, in, P, taps, HW;
  LanesGeom(int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t K, int64_t S, int64_t D) {
    Hp = (OH - 1) * S + (K - 1) * D + 1;
    Wp = (OW - 1) * S + (K - 1) * D + 1;
    in = Hp * Wp * 16;
    P = OH * OW;
    taps = K * K * 16;
    HW = H * W;
  }
  int64_t floats() const { return in + P * 16 + taps + (HW + 15) / 16 * 16 + 16; }
  int64_t offsetsAt() const { return in + P * 16 + taps; }
  int64_t slackAt() const { return offsetsAt() + (HW + 15) / 16 * 16; }
};

/// Whether a shape takes the lanes path (when C >= 16 and the pads are nonnegative).
LIBJIT_INLINE bool dwLanesShape(int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH,
                                int64_t KW, int64_t SH, int64_t SW, int64_t DH, int64_t DW) {
  return KH == KW && (KH == 3 || KH == 5) && SH == SW && SH <= 2 && DH == DW && DH <= 2 &&
         OW >= kLanesTile && OW <= kLanesMaxOW && H * W >= 16 && OH * OW >= 16;
}

/// The destination of each input pixel in the padded pixel-major input (float offsets
/// from its start): pixel (ih, iw) goes to pixel (ih + PT, iw + PL) of the copy when that
/// lies inside it, else to the slack vector, which nothing reads (the stride-2 layers'
/// last row or column, when no window reaches it). Built once per call, so that the
/// per-block copy (lanesLoadInput) stores without per-pixel tests.
LIBJIT_INLINE void lanesOffsets(int32_t *off, int64_t H, int64_t W, const LanesGeom &g,
                                int64_t PT, int64_t PL) {
  for (int64_t r = 0; r < H; r++)
    for (int64_t c = 0; c < W; c++) {
      bool in = r + PT < g.Hp && c + PL < g.Wp;
      off[r * W + c] = int32_t(in ? ((r + PT) * g.Wp + c + PL) * 16 : g.slackAt());
    }
}

/// Transposes 16 planes x[i][0, H W) (pitch H W) into the padded pixel-major input t, each
/// pixel to its offset in off (see lanesOffsets).
LIBJIT_INLINE void lanesLoadInput(float *__restrict t, const float *__restrict x,
                                  const int32_t *__restrict off, int64_t HW) {
  for (int64_t p0 = 0;; p0 += 16) {
    // The last 16 pixels overlap their predecessors instead of running past the plane.
    int64_t p = minI(p0, HW - 16);
    F16 v[16];
    LIBJIT_UNROLL
    for (int i = 0; i < 16; i++)
      v[i] = ld16(x + i * HW + p);
    transpose16(v);
    LIBJIT_UNROLL
    for (int i = 0; i < 16; i++)
      st16(t + off[p + i], v[i]);
    if (p0 + 16 >= HW)
      break;
  }
}

/// The taps of channels [c0, c0 + 16) as KK vectors: w[t][i] = f[(c0 + i) KK + t]. By
/// 16 x 16 transposes (at taps 0 and KK - 16 when KK > 16) where the loads stay inside
/// the filter's C KK floats, else one by one.
LIBJIT_INLINE void lanesTaps(float *__restrict w, const float *__restrict f, int64_t KK,
                             int64_t c0, int64_t C) {
  if (KK > 32 || (KK < 16 && (c0 + 15) * KK + 16 > C * KK)) {
    for (int64_t t = 0; t < KK; t++)
      for (int64_t i = 0; i < 16; i++)
        w[t * 16 + i] = f[(c0 + i) * KK + t];
    return;
  }
  for (int64_t t0 = 0;; t0 = KK - 16) {
    F16 v[16];
    LIBJIT_UNROLL
    for (int i = 0; i < 16; i++)
      v[i] = ld16(f + (c0 + i) * KK + t0);
    transpose16(v);
    LIBJIT_UNROLL
    for (int j = 0; j < 16; j++)
      if (t0 + j < KK)
        st16(w + (t0 + j) * 16, v[j]);
    if (t0 + 16 >= KK)
      break;
  }
}

/// Outputs [ow, ow + kLanesTile) of output row oh of a block, pixel-major at o: the bias
/// plus every tap's weight vector times its input pixel vector (dilation D), clamped when
/// act.
template <int K, int S, int D>
LIBJIT_INLINE void lanesTile(float *__restrict o, const float *__restrict t,
                             const float *__restrict w, int64_t Wp, int64_t oh, int64_t ow,
                             F16 bv, int act, F16 lov, F16 hiv) {
  constexpr int R = kLanesTile, NC = (R - 1) * S + (K - 1) * D + 1;
  F16 acc[R];
  LIBJIT_UNROLL
  for (int j = 0; j < R; j++)
    acc[j] = bv;
  LIBJIT_UNROLL
  for (int kh = 0; kh < K; kh++) {
    const float *row = t + ((oh * S + kh * D) * Wp + ow * S) * 16;
    F16 wv[K];
    LIBJIT_UNROLL
    for (int kw = 0; kw < K; kw++)
      wv[kw] = ld16(w + (kh * K + kw) * 16);
    LIBJIT_UNROLL
    for (int c = 0; c < NC; c++) {
      F16 x = ld16(row + c * 16);
      LIBJIT_UNROLL
      for (int j = 0; j < R; j++) {
        int kw = (c - j * S) / D;
        if (c - j * S >= 0 && (c - j * S) % D == 0 && kw < K)
          acc[j] += wv[kw] * x;
      }
    }
  }
  LIBJIT_UNROLL
  for (int j = 0; j < R; j++)
    st16(o + j * 16, act ? clamp16(acc[j], lov, hiv) : acc[j]);
}

/// Transposes the pixel-major outputs o (P pixels of 16 channels) into 16 planes y[i][0, P).
LIBJIT_INLINE void lanesStoreOutput(float *__restrict y, const float *__restrict o, int64_t P) {
  for (int64_t p0 = 0;; p0 += 16) {
    int64_t p = minI(p0, P - 16);
    F16 v[16];
    LIBJIT_UNROLL
    for (int i = 0; i < 16; i++)
      v[i] = ld16(o + (p + i) * 16);
    transpose16(v);
    LIBJIT_UNROLL
    for (int i = 0; i < 16; i++)
      st16(y + i * P + p, v[i]);
    if (p0 + 16 >= P)
      break;
  }
}

/// Channels [c0, c0 + 16) of one image (x and y its input and output planes) on the lanes
/// path; buf holds the LanesGeom scratch with the padding cells of the input zero.
template <int K, int S, int D>
LIBJIT_INLINE void lanesBlock(float *y, const float *x, const float *f, const float *bias,
                              int64_t c0, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW,
                              int act, float lo, float hi, int gact, const LanesGeom &g,
                              float *buf) {
  float *t = buf, *o = buf + g.in, *w = o + g.P * 16;
  lanesLoadInput(t, x + c0 * H * W, reinterpret_cast<const int32_t *>(buf + g.offsetsAt()), H * W);
  lanesTaps(w, f, K * K, c0, C);
  F16 bv = bias ? ld16(bias + c0) : splat16(0.0f), lov = splat16(lo), hiv = splat16(hi);
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow0 = 0;; ow0 += kLanesTile) {
      // The last tile of a row overlaps its predecessor instead of running past the row.
      int64_t ow = minI(ow0, OW - kLanesTile);
      lanesTile<K, S, D>(o + (oh * OW + ow) * 16, t, w, g.Wp, oh, ow, bv, act, lov, hiv);
      if (ow0 + kLanesTile >= OW)
        break;
    }
  // Another activation than the clamp on the block's outputs while they are in the cache.
  if (gact)
    activateContiguous(o, g.P * 16, gact, lo, hi);
  lanesStoreOutput(y + c0 * OH * OW, o, g.P);
}

/// Every depthwise path but the lanes path, over planes [p0, p1) (a: clamp in registers,
/// gact another activation).
LIBJIT_INLINE void dwOtherPlanes(float *out, const float *in, const float *filter,
                                 const float *bias, int64_t C, int64_t H, int64_t W, int64_t OH,
                                 int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                                 int64_t PT, int64_t PL, int64_t DH, int64_t DW, int a, float lo,
                                 float hi, int gact, float *buf, int64_t p0, int64_t p1) {
  int path = dwPath(W, OH, OW, KH, KW, SH, SW, DH, DW);
  // The small path's zero cells cover pads of 0 <= PL < KW, 0 <= PT <= OH - H + KH - 1
  // (every shape with nonnegative pads); others run flat.
  if (path == 3 && PL >= 0 && PL < KW && PT >= 0 && PT <= maxI(OH - H, 0) + KH - 1) {
    if (KH == 3)
      dwSmallPlanes<3>(out, in, filter, bias, C, H, W, OH, PT, PL, a, lo, hi, buf, p0, p1, gact);
    else
      dwSmallPlanes<5>(out, in, filter, bias, C, H, W, OH, PT, PL, a, lo, hi, buf, p0, p1, gact);
    return;
  }
  if (path == 3)
    path = 2;
  if (path != 0) {
    bool ring = path == 1;
    if (KH == 3 && SW == 1)
      dwPlanes<3, 1>(out, in, filter, bias, C, H, W, OH, OW, SH, PT, PL, a, lo, hi, buf, p0, p1,
                     ring, gact);
    else if (KH == 3)
      dwPlanes<3, 2>(out, in, filter, bias, C, H, W, OH, OW, SH, PT, PL, a, lo, hi, buf, p0, p1,
                     ring, gact);
    else if (SW == 1)
      dwPlanes<5, 1>(out, in, filter, bias, C, H, W, OH, OW, SH, PT, PL, a, lo, hi, buf, p0, p1,
                     ring, gact);
    else
      dwPlanes<5, 2>(out, in, filter, bias, C, H, W, OH, OW, SH, PT, PL, a, lo, hi, buf, p0, p1,
                     ring, gact);
    return;
  }
  dwAnyPlanes(out, in, filter, bias, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, a, lo, hi,
              buf, p0, p1);
  if (gact) // on this thread's planes, just written
    for (int64_t p = p0; p < p1; p++)
      activateContiguous(out + p * OH * OW, OH * OW, gact, lo, hi);
}

/// The lanes path over planes [p0, p1) of the N x C planes: per image, blocks of 16
/// channels (the last one overlapping its predecessor); an image's share of fewer than 16
/// channels takes the other paths.
template <int K, int S, int D>
LIBJIT_INLINE void dwLanesPlanes(float *out, const float *in, const float *filter,
                                 const float *bias, int64_t C, int64_t H, int64_t W, int64_t OH,
                                 int64_t OW, int64_t PT, int64_t PL, int a, float lo, float hi,
                                 int gact, float *buf, int64_t p0, int64_t p1) {
  LanesGeom g(H, W, OH, OW, K, S, D);
  lanesOffsets(reinterpret_cast<int32_t *>(buf + g.offsetsAt()), H, W, g, PT, PL);
  for (int64_t q = p0; q < p1;) {
    int64_t n = q / C, c = q % C, cEnd = minI(C, c + (p1 - q));
    if (cEnd - c < 16) {
      dwOtherPlanes(out, in, filter, bias, C, H, W, OH, OW, K, K, S, S, PT, PL, D, D, a, lo, hi,
                    gact, buf, q, q + cEnd - c);
    } else {
      // The padding cells of the input copy, never written by the blocks.
      for (int64_t i = 0; i < g.in; i++)
        buf[i] = 0.0f;
      for (int64_t c0 = c;; c0 += 16) {
        int64_t cb = minI(c0, cEnd - 16);
        lanesBlock<K, S, D>(out + n * C * OH * OW, in + n * C * H * W, filter, bias, cb, C, H, W, OH,
                            OW, a, lo, hi, gact, g, buf);
        if (c0 + 16 >= cEnd)
          break;
      }
    }
    q += cEnd - c;
  }
}

} // namespace

LIBJIT_EXPORT int64_t libjit_conv2d_dw_scratch_floats(int64_t H, int64_t W, int64_t OH, int64_t OW,
                                                      int64_t KH, int64_t KW, int64_t SH,
                                                      int64_t SW, int64_t DH, int64_t DW) {
  int64_t n;
  switch (dwPath(W, OH, OW, KH, KW, SH, SW, DH, DW)) {
  case 3:
    // Or the flat path's, where the pads do not fit the small path (see below).
    n = maxI(SmallGeom(H, W, OH, KH).floats(KH), FlatGeom(OH, OW, KH, SH).floats(SH));
    break;
  case 1:
    n = ringFloats(OW, KW, SH, SW);
    break;
  case 2:
    n = FlatGeom(OH, OW, KH, SH).floats(SH);
    break;
  default:
    n = AnyGeom(OH, OW, KH, KW, SH, SW, DH, DW).floats(SH, SW);
  }
  // The lanes path, or the others where it does not apply at run time (C < 16, pads).
  if (dwLanesShape(H, W, OH, OW, KH, KW, SH, SW, DH, DW))
    n = maxI(n, LanesGeom(H, W, OH, OW, KH, SH, DH).floats());
  return (n + 15) / 16 * 16;
}

LIBJIT_EXPORT void libjit_conv2d_dw_f32(float *out, const float *in, const float *filter,
                                        const float *bias, int64_t N, int64_t C, int64_t H,
                                        int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
                                        int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH,
                                        int64_t DW, int64_t act, float lo, float hi, float *scratch,
                                        int64_t tid, int64_t nthreads) {
  bool lanes = C >= 16 && PT >= 0 && PL >= 0 && dwLanesShape(H, W, OH, OW, KH, KW, SH, SW, DH, DW);
  int64_t p0, p1;
  // The lanes path splits whole blocks of 16 channels.
  partition(N * C, lanes ? 16 : 1, tid, nthreads, &p0, &p1);
  if (p0 >= p1)
    return;
  float *buf =
      scratch + tid * libjit_conv2d_dw_scratch_floats(H, W, OH, OW, KH, KW, SH, SW, DH, DW);
  // A clamp in the kernels' registers; another activation (gact) on each plane or block
  // as it is finished, while it is in the cache.
  int a = act == ActClamp, gact = act > ActClamp ? int(act) : 0;
  if (!lanes) {
    dwOtherPlanes(out, in, filter, bias, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, a, lo, hi,
                  gact, buf, p0, p1);
    return;
  }
#define LIBJIT_DW_LANES(K, S, D)                                                                 \
  case K / 5 + 2 * (S - 1) + 4 * (D - 1):                                                          \
    dwLanesPlanes<K, S, D>(out, in, filter, bias, C, H, W, OH, OW, PT, PL, a, lo, hi, gact, buf,   \
                           p0, p1);                                                                \
    return;
  // Kernel size, stride and dilation as template parameters.
  switch (KH / 5 + 2 * (SH - 1) + 4 * (DH - 1)) {
    LIBJIT_DW_LANES(3, 1, 1)
    LIBJIT_DW_LANES(5, 1, 1)
    LIBJIT_DW_LANES(3, 2, 1)
    LIBJIT_DW_LANES(5, 2, 1)
    LIBJIT_DW_LANES(3, 1, 2)
    LIBJIT_DW_LANES(5, 1, 2)
    LIBJIT_DW_LANES(3, 2, 2)
    LIBJIT_DW_LANES(5, 2, 2)
  }
#undef LIBJIT_DW_LANES
}

// ---------------------------------------------------------------------------------------
// Grouped convolution (1 < Group < C, Cg = C / Group input and Og = O / Group output
// channels per group): the groups are a batch of small direct convolutions over the any
// path's padded phase planes. Per group, the Cg planes are copied once; a register tile of
// OT output channels x two vectors of output cells accumulates, for every input channel and
// tap, one broadcast weight times the tap's two vectors. Weights come packed at compile
// time as [G][Cg][KH KW][Og] (libjit_pack_grouped_f32), so a tile's OT weights of one
// (channel, tap) are adjacent. Results go to an [Og][cells] buffer, and from there to the
// output rows with the residual add and the clamp.

namespace {

/// Per-thread scratch of the grouped kernel: the tap table, Cg channels of phase planes,
/// then Og rows of output cells, outPitch apart: OH Wq cells and the up to 63 a tile's last
/// block of cells computes past them (groupedTile), so no row runs into the next.
struct GroupedGeom {
  AnyGeom g;
  int64_t chFloats, outPitch, outFloats;
  GroupedGeom(int64_t Cg, int64_t Og, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
              int64_t SW, int64_t DH, int64_t DW)
      : g(OH, OW, KH, KW, SH, SW, DH, DW) {
    chFloats = SH * SW * g.phase;
    outPitch = (OH * g.Wq + 64 + 63) / 64 * 64;
    outFloats = Og * outPitch;
    (void)Cg;
  }
  int64_t floats(int64_t Cg) const { return g.tapFloats + Cg * chFloats + outFloats; }
};

/// One tile of OT output channels over cells [0, cells) in blocks of NC VW-float vectors
/// (the last block may pass cells by up to NC VW - 1):
/// o[j][i] = bias[j] + sum over channels ci and taps t of w[ci][t][j] x[ci][i + toff[t]].
/// Two vectors of cells where the tile has 8 channels (4 on AVX2: 16 or 8 accumulators),
/// four where it has fewer (resnext50's 4 channels per group), so that narrow tiles keep
/// 8 or more independent multiply-add chains.
template <int VW, int OT, int NC = (OT * 16 / VW >= 8 ? 2 : 4)>
LIBJIT_INLINE void groupedTile(float *__restrict o, int64_t oPitch,
                               const float *__restrict planes, int64_t chFloats,
                               const int64_t *__restrict toff, int64_t T, int64_t Cg,
                               const float *__restrict w, int64_t Og,
                               const float *__restrict bias, int64_t cells) {
  typedef typename VecOf<VW>::T V;
  for (int64_t i0 = 0; i0 < cells; i0 += NC * VW) {
    V acc[OT][NC];
    LIBJIT_UNROLL
    for (int j = 0; j < OT; j++)
      LIBJIT_UNROLL
      for (int v = 0; v < NC; v++)
        acc[j][v] = splatV<V>(bias ? bias[j] : 0.0f);
    for (int64_t ci = 0; ci < Cg; ci++) {
      const float *pc = planes + ci * chFloats + i0;
      const float *wc = w + ci * T * Og;
      for (int64_t t = 0; t < T; t++) {
        const float *p = pc + toff[t];
        V x[NC];
        LIBJIT_UNROLL
        for (int v = 0; v < NC; v++)
          x[v] = loadV<V>(p + v * VW);
        const float *wt = wc + t * Og;
        LIBJIT_UNROLL
        for (int j = 0; j < OT; j++) {
          V wj = splatV<V>(wt[j]);
          LIBJIT_UNROLL
          for (int v = 0; v < NC; v++)
            acc[j][v] += wj * x[v];
        }
      }
    }
    LIBJIT_UNROLL
    for (int j = 0; j < OT; j++)
      LIBJIT_UNROLL
      for (int v = 0; v < NC; v++)
        storeV<V>(o + j * oPitch + i0 + v * VW, acc[j][v]);
  }
}

/// Output channels [0, Og) of one group in tiles of MaxOT, then 4, 2, 1.
template <int VW, int MaxOT>
LIBJIT_INLINE void groupedChannels(float *o, int64_t oPitch, const float *planes,
                                   int64_t chFloats, const int64_t *toff, int64_t T, int64_t Cg,
                                   const float *w, int64_t Og, const float *bias, int64_t cells) {
  int64_t j = 0;
  for (; j + MaxOT <= Og; j += MaxOT)
    groupedTile<VW, MaxOT>(o + j * oPitch, oPitch, planes, chFloats, toff, T, Cg, w + j, Og,
                           bias ? bias + j : nullptr, cells);
  if (MaxOT > 4 && j + 4 <= Og) {
    groupedTile<VW, 4>(o + j * oPitch, oPitch, planes, chFloats, toff, T, Cg, w + j, Og,
                       bias ? bias + j : nullptr, cells);
    j += 4;
  }
  if (j + 2 <= Og) {
    groupedTile<VW, 2>(o + j * oPitch, oPitch, planes, chFloats, toff, T, Cg, w + j, Og,
                       bias ? bias + j : nullptr, cells);
    j += 2;
  }
  if (j < Og)
    groupedTile<VW, 1>(o + j * oPitch, oPitch, planes, chFloats, toff, T, Cg, w + j, Og,
                       bias ? bias + j : nullptr, cells);
}

// Grouped convolution on small planes with 16 output channels per group (regnet_x's
// group width; resnext50's 14x14 stage), or 8 (regnet_y's; planes of 32 pixels or more):
// stride 1, undilated, output rows as wide as the
// input's, planes narrower than 16 (7x7, 14x14). There the cells-as-lanes tile above
// computes the padded columns too (63 cells in 64 lanes for 49 outputs at 7x7); here the
// 16 output channels are the vector lanes and the pixels the rows of the register tile, so
// every lane is an output. Per input channel ci and kernel column kw, a plane holds the
// input shifted by kw - PL with the columns that leave the image zeroed (rows outside it
// are zero cells before and after), so tap (kh, kw) of pixel p is that plane's cell
// p + (kh - PT) W: R consecutive pixels read R consecutive cells. The tile's rows are
// stored as [P][Og], transposed in 16 x 16 blocks (of 16 pixels, or of 32 pixels as pairs
// when Og = 8) into the output planes with the residual add and the clamp. On AVX-512 the
// lanes path below takes the 16-channel groups with rows of 7 or more instead.

/// Geometry of the small grouped path for Cg channels and KW kernel columns: KW planes per
/// channel (front zero cells for KH - 1 rows of top padding and slack, the plane, zero
/// cells for the bottom rows), the [Cg][KH][KW] tap offsets, then the [P][16] results.
struct GroupedSmallGeom {
  int64_t front, planeFloats, P, offFloats;
  GroupedSmallGeom(int64_t OH, int64_t W, int64_t KH, int64_t KW, int64_t Cg) {
    front = ((KH - 1) * W + KW + 15) / 16 * 16;
    planeFloats = front + ((OH + KH) * W + 16 + 15) / 16 * 16;
    P = OH * W;
    offFloats = (Cg * KH * KW + 15) / 16 * 16;
  }
  int64_t floats(int64_t Cg, int64_t KW) const {
    return Cg * KW * planeFloats + offFloats + (P + 16) * 16;
  }
};

/// Whether a grouped layer may take the small path (the kernel also needs 0 <= PL < KW,
/// 0 <= PT < KH and no more input rows than the output rows read).
LIBJIT_INLINE bool groupedSmallShape(int64_t Og, int64_t OH, int64_t OW, int64_t W, int64_t SH,
                                     int64_t SW, int64_t DH, int64_t DW) {
  return (Og == 16 || (Og == 8 && OH * OW >= 32)) && SH == 1 && SW == 1 && DH == 1 && DW == 1 &&
         OW == W && W < 16 && OH * OW >= 16;
}

/// Pixels [p0, p0 + R) of one group of OG = VW NV output channels: acc[r][v] = bias + sum
/// over the K = Cg KH KW taps of plane cell (off[k] + p0 + r) x weights w[k][v VW, (v + 1)
/// VW), stored at res[p][OG].
template <int VW, int NV, int R>
LIBJIT_INLINE void groupedSmallTile(float *__restrict res, const float *__restrict planes,
                                    const int32_t *__restrict off, int64_t K,
                                    const float *__restrict w, const float *__restrict bias,
                                    int64_t p0) {
  typedef typename VecOf<VW>::T V;
  V acc[R][NV];
  LIBJIT_UNROLL
  for (int v = 0; v < NV; v++) {
    V b = bias ? loadV<V>(bias + v * VW) : splatV<V>(0.0f);
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++)
      acc[r][v] = b;
  }
  const float *base = planes + p0;
  for (int64_t k = 0; k < K; k++) {
    const float *x = base + off[k];
    V wv[NV];
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      wv[v] = loadV<V>(w + k * (VW * NV) + v * VW);
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++) {
      V xr = splatV<V>(x[r]);
      LIBJIT_UNROLL
      for (int v = 0; v < NV; v++)
        acc[r][v] += xr * wv[v];
    }
  }
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      storeV<V>(res + (p0 + r) * (VW * NV) + v * VW, acc[r][v]);
}

/// All pixels of one group in tiles of R, the last one overlapping its predecessor.
template <int VW, int NV, int R>
LIBJIT_INLINE void groupedSmallPixels(float *res, const float *planes, const int32_t *off,
                                      int64_t K, const float *w, const float *bias, int64_t P) {
  for (int64_t q = 0;; q += R) {
    int64_t p0 = minI(q, P - R);
    groupedSmallTile<VW, NV, R>(res, planes, off, K, w, bias, p0);
    if (q + R >= P)
      break;
  }
}

/// The small path's KW shifted copies of each of the Cg input planes of one (image, group):
/// cell front + p of plane (ci, kw) is x[p + kw - PL] where that column is inside the row.
LIBJIT_INLINE void groupedSmallPlanes(float *planes, const float *x, const GroupedSmallGeom &g,
                                      int64_t Cg, int64_t H, int64_t W, int64_t KW, int64_t PL) {
  const int64_t HW = H * W;
  for (int64_t ci = 0; ci < Cg; ci++, x += HW) {
    for (int64_t kw = 0; kw < KW; kw++) {
      float *d = planes + (ci * KW + kw) * g.planeFloats + g.front;
      int64_t sh = kw - PL; // d[p] = x[p + sh]
      int64_t pLo = maxI(0, -sh), pHi = minI(HW, HW - sh);
      copyRow(d + pLo, x + pLo + sh, pHi - pLo);
      // Cells a previous call left outside [pLo, pHi) are zero: that range is the same
      // for every plane of this kw. Columns that leave the row read the neighbour row.
      if (sh < 0)
        for (int64_t r = 0; r < H; r++)
          for (int64_t c = 0; c < -sh; c++)
            d[r * W + c] = 0.0f;
      else
        for (int64_t r = 0; r < H; r++)
          for (int64_t c = W - sh; c < W; c++)
            d[r * W + c] = 0.0f;
    }
  }
}

/// The [P][L] results of one group of L output channels as one L-float vector per pixel,
/// in register tiles of 14 pixels where they divide the plane on AVX-512, of 7 otherwise.
template <int VW, int L>
LIBJIT_INLINE void groupedSmallOneVector(float *res, const float *planes, const int32_t *off,
                                         int64_t K, const float *w, const float *b, int64_t P) {
  if (VW == 16 && P % 14 == 0)
    groupedSmallPixels<L, 1, 14>(res, planes, off, K, w, b, P);
  else
    groupedSmallPixels<L, 1, 7>(res, planes, off, K, w, b, P);
}

/// The [P][Og] results of one group: 8 output channels are one 8-float vector per pixel on
/// either instruction set, 16 one AVX-512 vector, or two AVX2 ones in tiles of 6 pixels.
template <int VW>
LIBJIT_INLINE void groupedSmallResults(float *res, const float *planes, const int32_t *off,
                                       int64_t K, const float *w, const float *b, int64_t Og,
                                       int64_t P) {
  if (Og == 8)
    groupedSmallOneVector<VW, 8>(res, planes, off, K, w, b, P);
  else if (VW == 16)
    groupedSmallOneVector<VW, 16>(res, planes, off, K, w, b, P);
  else
    groupedSmallPixels<VW, 16 / VW, 6>(res, planes, off, K, w, b, P);
}

/// [P][8] results -> the 8 output planes y (P pixels apart), 32 pixels at a time (the last
/// block overlapping), with the residual add and the clamp: as 16 rows of two pixels,
/// transposed, row j < 8 holds channel j of the even pixels and row 8 + j of the odd ones,
/// interleaved back into pixel order.
LIBJIT_INLINE void groupedSmallStore8(float *y, const float *res, const float *ad, int64_t P,
                                      int64_t act, F16 lov, F16 hiv) {
  for (int64_t q = 0;; q += 32) {
    int64_t p0 = minI(q, P - 32);
    F16 v[16];
    for (int i = 0; i < 16; i++)
      v[i] = ld16(res + (p0 + 2 * i) * 8);
    transpose16(v);
    for (int j = 0; j < 8; j++) {
      F16 e = v[j], o = v[8 + j];
      F16 z0 = __builtin_shufflevector(e, o, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22,
                                       7, 23);
      F16 z1 = __builtin_shufflevector(e, o, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14,
                                       30, 15, 31);
      const float *a = ad ? ad + j * P + p0 : nullptr;
      st16(y + j * P + p0, addClampOut(z0, a, act, lov, hiv));
      st16(y + j * P + p0 + 16, addClampOut(z1, a ? a + 16 : nullptr, act, lov, hiv));
    }
    if (q + 32 >= P)
      break;
  }
}

/// [P][16] results -> the 16 output planes y, 16 pixels at a time (the last block
/// overlapping), with the residual add and the clamp.
LIBJIT_INLINE void groupedSmallStore16(float *y, const float *res, const float *ad, int64_t P,
                                       int64_t act, F16 lov, F16 hiv) {
  for (int64_t q = 0;; q += 16) {
    int64_t p0 = minI(q, P - 16);
    F16 v[16];
    for (int i = 0; i < 16; i++)
      v[i] = ld16(res + (p0 + i) * 16);
    transpose16(v);
    for (int j = 0; j < 16; j++)
      st16(y + j * P + p0, addClampOut(v[j], ad ? ad + j * P + p0 : nullptr, act, lov, hiv));
    if (q + 16 >= P)
      break;
  }
}

/// The small path over (image, group) pairs [u0, u1); returns false (nothing done) where
/// the pads do not fit it.
template <int VW>
LIBJIT_INLINE bool conv2dGroupedSmall(float *out, const float *in, const float *packedW,
                                      const float *bias, const float *add, int64_t C, int64_t H,
                                      int64_t W, int64_t O, int64_t OH, int64_t KH, int64_t KW,
                                      int64_t PT, int64_t PL, int64_t G, int64_t act, float lo,
                                      float hi, float *buf, int64_t u0, int64_t u1) {
  const int64_t Cg = C / G, Og = O / G, T = KH * KW, K = Cg * T;
  // Input rows H <= OH + KH - 1 - PT: the bottom pad is not negative.
  if (PL < 0 || PL >= KW || PT < 0 || PT >= KH || H > OH + KH - 1 - PT)
    return false;
  GroupedSmallGeom g(OH, W, KH, KW, Cg);
  const int64_t P = g.P, HW = H * W;
  float *planes = buf;
  int32_t *off = reinterpret_cast<int32_t *>(planes + Cg * KW * g.planeFloats);
  float *res = planes + Cg * KW * g.planeFloats + g.offFloats;
  for (int64_t i = 0; i < Cg * KW * g.planeFloats; i++)
    planes[i] = 0.0f;
  for (int64_t ci = 0; ci < Cg; ci++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++)
        off[(ci * KH + kh) * KW + kw] =
            int32_t((ci * KW + kw) * g.planeFloats + g.front + (kh - PT) * W);
  F16 lov = splat16(lo), hiv = splat16(hi);
  for (int64_t u = u0; u < u1; u++) {
    int64_t n = u / G, grp = u % G;
    groupedSmallPlanes(planes, in + (n * C + grp * Cg) * HW, g, Cg, H, W, KW, PL);
    groupedSmallResults<VW>(res, planes, off, K, packedW + grp * K * Og,
                            bias ? bias + grp * Og : nullptr, Og, P);
    float *y = out + (n * O + grp * Og) * P;
    const float *ad = add ? add + (n * O + grp * Og) * P : nullptr;
    if (Og == 8)
      groupedSmallStore8(y, res, ad, P, act, lov, hiv);
    else
      groupedSmallStore16(y, res, ad, P, act, lov, hiv);
    if (act > ActClamp)
      activateContiguous(y, Og * P, int(act), lo, hi);
  }
  return true;
}

// Grouped convolution with the output channels as the vector lanes (AVX-512, 32 output
// channels per group, or 16 on rows of 7 to 16 outputs or at column stride 2: regnet_x's
// group width, resnext50's two widest stages), any row stride and dilation,
// column stride 1 or 2. Per (image,
// group) the Cg input planes are copied once into zero-padded planes of exactly the rows
// and columns the outputs read (Hp x Wp). A register tile is RW consecutive outputs of
// each of RH output rows (14 x 1, or 7 x 2 on rows narrower than 14) times NV = Og / 16
// vectors of output channels: per tap k = (input channel, kernel row, kernel column) NV
// vector loads of weights and, per pixel, one broadcast input value multiplying them, so
// 14 pixels make 14 NV multiply-adds per NV loads and 14 broadcasts, in 14 NV independent
// accumulators. Every lane is an output: no padded cells are computed (the last tile of a
// row and the last block of rows overlap their predecessors instead). The tiles go to a
// pixel-major [P][Og] buffer, transposed into the output planes in 16 x 16 blocks with the
// residual add and the activation (transposeOut). The weights are the general path's
// [G][Cg][KH KW][Og] packing: tap k's Og weights are adjacent.

/// Geometry of the lanes path: the padded planes (Hp rows of Wp), the tap table, the
/// [P][Og] results.
struct GroupedLanesGeom {
  int64_t Hp, Wp, planeFloats, P;
  GroupedLanesGeom(int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                   int64_t DH, int64_t DW) {
    Hp = (OH - 1) * SH + (KH - 1) * DH + 1;
    Wp = (OW - 1) * SW + (KW - 1) * DW + 1;
    planeFloats = (Hp * Wp + 15) / 16 * 16;
    P = OH * OW;
  }
  static int64_t offFloats(int64_t Cg, int64_t KH, int64_t KW) {
    return (Cg * KH * KW + 15) / 16 * 16;
  }
  int64_t floats(int64_t Cg, int64_t Og, int64_t KH, int64_t KW) const {
    return Cg * planeFloats + offFloats(Cg, KH, KW) + P * Og;
  }
};

/// The general tile's taps: per tap k one vector of weights per 16 channels, times one
/// broadcast input value per pixel (x[off[k] + i rowStep + r S]).
template <int NV, int RW, int RH, int S>
LIBJIT_INLINE void lanesTaps(F16 (&acc)[RH * RW][NV], const float *__restrict x, int64_t rowStep,
                             const int32_t *__restrict off, int64_t K, const float *__restrict w) {
  for (int64_t k = 0; k < K; k++) {
    const float *xk = x + off[k];
    F16 wv[NV];
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      wv[v] = ld16(w + k * 16 * NV + 16 * v);
    LIBJIT_UNROLL
    for (int i = 0; i < RH; i++) {
      LIBJIT_UNROLL
      for (int r = 0; r < RW; r++) {
        F16 xr = splat16(xk[i * rowStep + r * S]);
        LIBJIT_UNROLL
        for (int v = 0; v < NV; v++)
          acc[i * RW + r][v] += xr * wv[v];
      }
    }
  }
}

/// The same for kernel rows of 3 undilated taps (KW = 3, DW = 1; K a multiple of 3), one
/// kernel row at a time: its 3 weight vectors loaded once, and each input value of the
/// row's (RW - 1) S + 3 columns broadcast once and multiplied into every output that reads
/// it (column c feeds output (c - t) / S with tap t where that divides): at stride 1, 21
/// multiply-adds per 9 broadcasts on a 7-output row instead of 21 per 21, so the loads no
/// longer outnumber the multiply-adds.
template <int NV, int RW, int RH, int S>
LIBJIT_INLINE void lanesTapsRow3(F16 (&acc)[RH * RW][NV], const float *__restrict x,
                                 int64_t rowStep, const int32_t *__restrict off, int64_t K,
                                 const float *__restrict w) {
  constexpr int cols = (RW - 1) * S + 3;
  for (int64_t k = 0; k < K; k += 3) {
    const float *xk = x + off[k];
    F16 wv[3][NV];
    LIBJIT_UNROLL
    for (int t = 0; t < 3; t++) {
      LIBJIT_UNROLL
      for (int v = 0; v < NV; v++)
        wv[t][v] = ld16(w + (k + t) * 16 * NV + 16 * v);
    }
    LIBJIT_UNROLL
    for (int i = 0; i < RH; i++) {
      LIBJIT_UNROLL
      for (int c = 0; c < cols; c++) {
        F16 xc = splat16(xk[i * rowStep + c]);
        LIBJIT_UNROLL
        for (int t = 0; t < 3; t++) {
          if (c < t || (c - t) % S != 0 || (c - t) / S >= RW)
            continue;
          LIBJIT_UNROLL
          for (int v = 0; v < NV; v++)
            acc[i * RW + (c - t) / S][v] += xc * wv[t][v];
        }
      }
    }
  }
}

/// One register tile: the outputs (i, r) for i < RH rows (rowStep floats apart in the
/// planes) and r < RW columns (S apart) whose first tap is x, all 16 NV channels:
/// res[(i OW + r) 16 NV + c] = bias[c] + sum over k of x[off[k] + i rowStep + r S] w[k][c].
/// Row3: the taps by kernel rows of 3 (lanesTapsRow3).
template <int NV, int RW, int RH, int S, bool Row3>
LIBJIT_INLINE void lanesTile(float *__restrict res, int64_t OW, const float *__restrict x,
                             int64_t rowStep, const int32_t *__restrict off, int64_t K,
                             const float *__restrict w, const float *__restrict bias) {
  F16 acc[RH * RW][NV];
  LIBJIT_UNROLL
  for (int v = 0; v < NV; v++) {
    F16 b = bias ? ld16(bias + 16 * v) : splat16(0.0f);
    LIBJIT_UNROLL
    for (int r = 0; r < RH * RW; r++)
      acc[r][v] = b;
  }
  if constexpr (Row3)
    lanesTapsRow3<NV, RW, RH, S>(acc, x, rowStep, off, K, w);
  else
    lanesTaps<NV, RW, RH, S>(acc, x, rowStep, off, K, w);
  LIBJIT_UNROLL
  for (int i = 0; i < RH; i++) {
    LIBJIT_UNROLL
    for (int r = 0; r < RW; r++) {
      LIBJIT_UNROLL
      for (int v = 0; v < NV; v++)
        st16(res + (i * OW + r) * 16 * NV + 16 * v, acc[i * RW + r][v]);
    }
  }
}

/// Output rows [r0, r1) (at least RH) in tiles of RH rows x RW columns, the last tile of a
/// row and the last block of rows overlapping their predecessors.
template <int NV, int RW, int RH, int S, bool Row3>
LIBJIT_INLINE void lanesRows(float *res, const float *planes, int64_t Wp, int64_t SH, int64_t OW,
                             int64_t r0, int64_t r1, const int32_t *off, int64_t K, const float *w,
                             const float *bias) {
  for (int64_t rb = r0;; rb += RH) {
    int64_t oh = minI(rb, r1 - RH);
    for (int64_t c = 0;; c += RW) {
      int64_t ow = minI(c, OW - RW);
      lanesTile<NV, RW, RH, S, Row3>(res + (oh * OW + ow) * 16 * NV, OW,
                                     planes + oh * SH * Wp + ow * S, SH * Wp, off, K, w, bias);
      if (c + RW >= OW)
        break;
    }
    if (rb + RH >= r1)
      break;
  }
}

/// Output rows [r0, r1) of one group into res: tiles of 14 x 1 on rows of 14 or more,
/// else 7 x 2 (7 x 1 for a single row).
template <int NV, int S, bool Row3>
LIBJIT_INLINE void lanesRowsOf(float *res, const float *planes, int64_t Wp, int64_t SH, int64_t OW,
                               int64_t r0, int64_t r1, const int32_t *off, int64_t K,
                               const float *w, const float *bias) {
  if (OW >= 14) {
    lanesRows<NV, 14, 1, S, Row3>(res, planes, Wp, SH, OW, r0, r1, off, K, w, bias);
    return;
  }
  if (r1 - r0 < 2) {
    lanesRows<NV, 7, 1, S, Row3>(res, planes, Wp, SH, OW, r0, r1, off, K, w, bias);
    return;
  }
  // An odd number of rows starts with a block of 3 (21 accumulators with one vector of
  // channels), so that the 2-row blocks after it cover the rest without recomputing a row
  // (7 rows: 3 + 2 + 2 instead of 2 + 2 + 2 + an overlapping 2).
  if (NV == 1 && (r1 - r0) % 2 == 1) {
    lanesRows<NV, 7, 3, S, Row3>(res, planes, Wp, SH, OW, r0, r0 + 3, off, K, w, bias);
    r0 += 3;
    if (r0 == r1)
      return;
  }
  lanesRows<NV, 7, 2, S, Row3>(res, planes, Wp, SH, OW, r0, r1, off, K, w, bias);
}

/// One group's output rows [r0, r1); row3: kernel rows of 3 undilated taps, which with
/// 16 channels take lanesTapsRow3 (with 32 its 28 accumulators and 6 weight vectors would
/// not fit the 32 registers).
template <int S>
LIBJIT_INLINE void lanesGroup(float *res, const float *planes, int64_t Wp, int64_t SH, int64_t Og,
                              int64_t OW, int64_t r0, int64_t r1, const int32_t *off, int64_t K,
                              const float *w, const float *bias, bool row3) {
  if (Og == 16 && row3)
    lanesRowsOf<1, S, true>(res, planes, Wp, SH, OW, r0, r1, off, K, w, bias);
  else if (Og == 16)
    lanesRowsOf<1, S, false>(res, planes, Wp, SH, OW, r0, r1, off, K, w, bias);
  else
    lanesRowsOf<2, S, false>(res, planes, Wp, SH, OW, r0, r1, off, K, w, bias);
}

/// Output rows [r0, r1) of the Og channels of group grp of image n, from their cells
/// (channel j's at o + j outCells, row r's at r Wq) to the output planes, with the residual
/// add and the activation.
LIBJIT_INLINE void groupedWriteRows(float *out, const float *add, const float *o, const AnyGeom &g,
                                    int64_t pitch, int64_t n, int64_t grp, int64_t O, int64_t Og,
                                    int64_t OH, int64_t OW, int64_t r0, int64_t r1, int64_t act,
                                    float lo, float hi) {
  const int64_t P = OH * OW;
  const F16 lov = splat16(lo), hiv = splat16(hi);
  for (int64_t j = 0; j < Og; j++) {
    int64_t oc = grp * Og + j;
    float *y = out + (n * O + oc) * P;
    const float *ad = add ? add + (n * O + oc) * P : nullptr;
    const float *src = o + j * pitch;
    for (int64_t r = r0; r < r1; r++) {
      float *yr = y + r * OW;
      const float *sr = src + r * g.Wq;
      const float *ar = ad ? ad + r * OW : nullptr;
      // Rows of 16 or more in vectors, the last one overlapping its predecessor (the
      // output is neither the cells nor the residual, so rewriting a lane is harmless).
      for (int64_t c0 = 0; OW >= 16; c0 += 16) {
        int64_t c = minI(c0, OW - 16);
        st16(yr + c, addClampOut(ld16(sr + c), ar ? ar + c : nullptr, act, lov, hiv));
        if (c0 + 16 >= OW)
          break;
      }
      for (int64_t c = 0; c < OW && OW < 16; c++) {
        float v = sr[c] + (ar ? ar[c] : 0.0f);
        if (act == ActClamp) {
          v = v < lo ? lo : v;
          v = v > hi ? hi : v;
        }
        yr[c] = v;
      }
      // Another activation (libjit_act.h) on the row just written.
      if (act > ActClamp)
        activateContiguous(yr, OW, int(act), lo, hi);
    }
  }
}

/// Zeroes the padding cells of the lanes path's Cg planes: every cell lanesCopyPlanes
/// does not write (once per call; the copies never write them).
LIBJIT_INLINE void lanesZeroPads(float *planes, int64_t Cg, int64_t H, int64_t W, int64_t PT,
                                 int64_t PL, const GroupedLanesGeom &g) {
  const int64_t rows = maxI(minI(H, g.Hp - PT), 0), cols = maxI(minI(W, g.Wp - PL), 0);
  for (int64_t ci = 0; ci < Cg; ci++)
    for (int64_t r = 0; r < g.Hp; r++) {
      float *row = planes + ci * g.planeFloats + r * g.Wp;
      bool image = r >= PT && r < PT + rows && cols > 0;
      int64_t c0 = image ? minI(PL, g.Wp) : g.Wp;
      for (int64_t c = 0; c < c0; c++)
        row[c] = 0.0f;
      for (int64_t c = image ? PL + cols : g.Wp; c < g.Wp; c++)
        row[c] = 0.0f;
    }
}

/// d[0, Q) = s[0, Q): one vector move for Q = 4 or 8.
template <int Q> LIBJIT_INLINE void copyFloats(float *__restrict d, const float *__restrict s) {
  float t[Q];
  __builtin_memcpy(t, s, sizeof(t));
  __builtin_memcpy(d, t, sizeof(t));
}

/// copyRow with rows of 4 to 15 as two overlapping moves of 4 or 8 floats: as copyRow's
/// loop the compiler made each 7-float row of the lanes path's planes a call to memmove.
/// (copyRow itself keeps its loop: with these moves inlined there, the grouped cell tiles
/// at stride 2 with 8 channels per group measured 10-15% slower, a code-layout effect.)
LIBJIT_INLINE void copyShortRow(float *__restrict d, const float *__restrict s, int64_t n) {
  if (n >= 8 && n < 16) {
    copyFloats<8>(d, s);
    copyFloats<8>(d + n - 8, s + n - 8);
  } else if (n >= 4 && n < 8) {
    copyFloats<4>(d, s);
    copyFloats<4>(d + n - 4, s + n - 4);
  } else {
    copyRow(d, s, n);
  }
}

/// Copies the Cg planes of one group (x: its first input plane) into the zero-padded
/// planes of the lanes path: input (ih, iw) at padded (ih + PT, iw + PL), the rows and
/// columns no output reads left out.
LIBJIT_INLINE void lanesCopyPlanes(float *planes, const float *x, int64_t Cg, int64_t H, int64_t W,
                                   int64_t PT, int64_t PL, const GroupedLanesGeom &g) {
  const int64_t rows = minI(H, g.Hp - PT), cols = minI(W, g.Wp - PL);
  if (rows <= 0 || cols <= 0)
    return;
  for (int64_t ci = 0; ci < Cg; ci++)
    for (int64_t ih = 0; ih < rows; ih++)
      copyShortRow(planes + ci * g.planeFloats + (ih + PT) * g.Wp + PL, x + (ci * H + ih) * W,
                   cols);
}

/// The lanes path (groupedLanesPath, libjit.h)
/// over the units [u0, u1): (image, group) pairs split into R ranges of output rows.
LIBJIT_INLINE void conv2dGroupedLanes(float *out, const float *in, const float *packedW,
                                      const float *bias, const float *add, int64_t C, int64_t H,
                                      int64_t W, int64_t O, int64_t OH, int64_t OW, int64_t KH,
                                      int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,
                                      int64_t DH, int64_t DW, int64_t G, int64_t R, int64_t act,
                                      float lo, float hi, float *buf, int64_t u0, int64_t u1) {
  const int64_t Cg = C / G, Og = O / G, K = Cg * KH * KW, P = OH * OW;
  GroupedLanesGeom g(OH, OW, KH, KW, SH, SW, DH, DW);
  const bool row3 = KW == 3 && DW == 1;
  float *planes = buf;
  int32_t *off = reinterpret_cast<int32_t *>(planes + Cg * g.planeFloats);
  float *res = planes + Cg * g.planeFloats + g.offFloats(Cg, KH, KW);
  lanesZeroPads(planes, Cg, H, W, PT, PL, g);
  for (int64_t ci = 0; ci < Cg; ci++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++)
        off[(ci * KH + kh) * KW + kw] = int32_t(ci * g.planeFloats + kh * DH * g.Wp + kw * DW);
  int64_t lastPair = -1;
  for (int64_t u = u0; u < u1; u++) {
    int64_t pair = u / R, part = u % R, n = pair / G, grp = pair % G;
    int64_t r0 = part * OH / R, r1 = (part + 1) * OH / R;
    if (r0 >= r1)
      continue;
    if (pair != lastPair)
      lanesCopyPlanes(planes, in + (n * C + grp * Cg) * H * W, Cg, H, W, PT, PL, g);
    lastPair = pair;
    const float *w = packedW + grp * K * Og, *b = bias ? bias + grp * Og : nullptr;
    if (SW == 1)
      lanesGroup<1>(res, planes, g.Wp, SH, Og, OW, r0, r1, off, K, w, b, row3);
    else
      lanesGroup<2>(res, planes, g.Wp, SH, Og, OW, r0, r1, off, K, w, b, row3);
    transposeOut(out + (n * O + grp * Og) * P, res, Og,
                 add ? add + (n * O + grp * Og) * P : nullptr, P, r0 * OW, r1 * OW, 0, Og, act, lo,
                 hi);
  }
}

template <int VW, int MaxOT>
LIBJIT_INLINE void conv2dGrouped(float *out, const float *in, const float *packedW,
                                 const float *bias, const float *add, int64_t N, int64_t C,
                                 int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW,
                                 int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                 int64_t PL, int64_t DH, int64_t DW, int64_t G, int64_t act,
                                 float lo, float hi, float *scratch, int64_t tid,
                                 int64_t nthreads) {
  const int64_t Cg = C / G, Og = O / G;
  GroupedGeom gg(Cg, Og, OH, OW, KH, KW, SH, SW, DH, DW);
  const AnyGeom &g = gg.g;
  // Work units: (image, group) pairs, each split into R ranges of output rows when there
  // are too few pairs to share between the threads.
  int64_t pairs = N * G, R = 1;
  if (pairs < 4 * nthreads)
    R = minI(OH, ceilDiv(4 * nthreads, pairs));
  int64_t u0, u1;
  partition(pairs * R, 1, tid, nthreads, &u0, &u1);
  if (u0 >= u1)
    return;
  float *buf = scratch + tid * libjit_conv2d_grouped_scratch_floats(Cg, Og, OH, OW, KH, KW, SH,
                                                                    SW, DH, DW);
  if constexpr (VW == 16) // the lanes path: AVX-512 only
    if (groupedLanesPath(VW, Og, OW, KW, SW, DW, PT, PL)) {
      conv2dGroupedLanes(out, in, packedW, bias, add, C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL,
                         DH, DW, G, R, act, lo, hi, buf, u0, u1);
      return;
    }
  if (R == 1 && groupedSmallShape(Og, OH, OW, W, SH, SW, DH, DW) &&
      conv2dGroupedSmall<VW>(out, in, packedW, bias, add, C, H, W, O, OH, KH, KW, PT, PL, G, act,
                             lo, hi, buf, u0, u1))
    return;
  int64_t n0 = gg.floats(Cg);
  for (int64_t i = 0; i < n0; i++)
    buf[i] = 0.0f;
  int64_t *toff = reinterpret_cast<int64_t *>(buf);
  anyTaps(toff, g, KH, KW, SH, SW, DH, DW);
  float *planes = buf + g.tapFloats;
  float *o = planes + Cg * gg.chFloats;
  const int64_t T = KH * KW;
  int64_t lastPair = -1;
  for (int64_t u = u0; u < u1; u++) {
    int64_t pair = u / R, part = u % R, n = pair / G, grp = pair % G;
    // Output rows [r0, r1) of this unit.
    int64_t r0 = part * OH / R, r1 = (part + 1) * OH / R;
    if (r0 >= r1)
      continue;
    if (pair != lastPair) {
      for (int64_t ci = 0; ci < Cg; ci++) {
        const float *x = in + (n * C + grp * Cg + ci) * H * W;
        float *pl = planes + ci * gg.chFloats;
        for (int64_t a = 0; a < SH; a++)
          for (int64_t i = 0; i < g.Hq; i++) {
            int64_t ih = i * SH + a - PT;
            if (ih < 0 || ih >= H)
              continue;
            anyLoadRow(pl + a * SW * g.phase + i * g.Wq, x + ih * W, W, PL, SW, g.Wq, g.phase);
          }
      }
      lastPair = pair;
    }
    // Cells of rows [r0, r1), from the block holding row r0's first cell.
    int64_t c0 = r0 * g.Wq / (2 * VW) * (2 * VW), c1 = r1 * g.Wq;
    groupedChannels<VW, MaxOT>(o + c0, gg.outPitch, planes + c0, gg.chFloats, toff, T, Cg,
                               packedW + grp * Cg * T * Og, Og, bias ? bias + grp * Og : nullptr,
                               c1 - c0);
    groupedWriteRows(out, add, o, g, gg.outPitch, n, grp, O, Og, OH, OW, r0, r1, act, lo, hi);
  }
}

} // namespace


LIBJIT_EXPORT int64_t libjit_conv2d_grouped_scratch_floats(int64_t Cg, int64_t Og, int64_t OH,
                                                           int64_t OW, int64_t KH, int64_t KW,
                                                           int64_t SH, int64_t SW, int64_t DH,
                                                           int64_t DW) {
  int64_t n = GroupedGeom(Cg, Og, OH, OW, KH, KW, SH, SW, DH, DW).floats(Cg);
  // The small path's, when the shape may take it (W == OW there).
  if (groupedSmallShape(Og, OH, OW, OW, SH, SW, DH, DW))
    n = maxI(n, GroupedSmallGeom(OH, OW, KH, KW, Cg).floats(Cg, KW));
  // The lanes path's (AVX-512 only; counted on both instruction sets).
  if (groupedLanesShape(Og, OW, KW, SW, DW))
    n = maxI(n, GroupedLanesGeom(OH, OW, KH, KW, SH, SW, DH, DW).floats(Cg, Og, KH, KW));
  return (n + 15) / 16 * 16;
}

LIBJIT_EXPORT void libjit_pack_grouped_f32(float *dst, const float *filter, int64_t G,
                                           int64_t Og, int64_t K) {
  for (int64_t g = 0; g < G; g++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t j = 0; j < Og; j++)
        dst[(g * K + k) * Og + j] = filter[(g * Og + j) * K + k];
}

#define LIBJIT_GROUPED_ENTRY_POINT(SUFFIX, VW, MAXOT)                                        \
  LIBJIT_EXPORT void libjit_conv2d_grouped_f32_##SUFFIX(                                     \
      float *out, const float *in, const float *packedW, const float *bias, const float *add, \
      int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW,          \
      int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH,     \
      int64_t DW, int64_t G, int64_t act, float lo, float hi, float *scratch, int64_t tid,    \
      int64_t nthreads) {                                                                     \
    conv2dGrouped<VW, MAXOT>(out, in, packedW, bias, add, N, C, H, W, O, OH, OW, KH, KW, SH,  \
                             SW, PT, PL, DH, DW, G, act, lo, hi, scratch, tid, nthreads);     \
  }
LIBJIT_GROUPED_ENTRY_POINT(avx512, 16, 8)
LIBJIT_GROUPED_ENTRY_POINT(avx2, 8, 4)
#undef LIBJIT_GROUPED_ENTRY_POINT

// ============================== Dilation phases
// A stride-1 convolution dilated by (DH, DW) is DH DW undilated convolutions, one per
// output phase (r, s) (rows r + DH i, columns s + DW j), each over the input's sub-image
// of the rows and columns that phase reads: the emitter (EmitConv.cpp) splits the input
// into those sub-images as a batch, runs any kernel on the batch, and merges the results.

namespace {

/// One input plane's DH DW phase planes: phase (r, s) row j, column k is input row
/// r - eH + DH j, column s - eW + DW k (zero outside the image); each plane Hp x Wp,
/// the planes of one phase \p phaseStride floats apart.
void splitPlane(float *dst, const float *src, int64_t H, int64_t W, int64_t DH, int64_t DW,
                int64_t eH, int64_t eW, int64_t Hp, int64_t Wp, int64_t phaseStride) {
  for (int64_t r = 0; r < DH; r++)
    for (int64_t j = 0; j < Hp; j++) {
      const int64_t x = r - eH + DH * j;
      for (int64_t s = 0; s < DW; s++) {
        float *d = dst + (r * DW + s) * phaseStride + j * Wp;
        if (x < 0 || x >= H) {
          for (int64_t k = 0; k < Wp; k++)
            d[k] = 0.0f;
          continue;
        }
        const float *row = src + x * W;
        // Columns k with 0 <= s - eW + DW k < W: [k0, k1).
        const int64_t k0 = minI(Wp, maxI(0, (eW - s + DW - 1) / DW));
        const int64_t last = W - 1 - s + eW; // DW k <= last
        const int64_t k1 = last < 0 ? k0 : maxI(k0, minI(Wp, last / DW + 1));
        for (int64_t k = 0; k < k0; k++)
          d[k] = 0.0f;
        const float *p = row + s - eW + DW * k0;
        for (int64_t k = k0; k < k1; k++, p += DW)
          d[k] = *p;
        for (int64_t k = k1; k < Wp; k++)
          d[k] = 0.0f;
      }
    }
}

} // namespace

LIBJIT_EXPORT void libjit_conv_phase_split_f32(float *dst, const float *src, int64_t N,
                                               int64_t C, int64_t H, int64_t W, int64_t DH,
                                               int64_t DW, int64_t eH, int64_t eW, int64_t Hp,
                                               int64_t Wp, int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(N * C, 1, tid, nthreads, &b, &e);
  const int64_t plane = Hp * Wp, phaseStride = C * plane;
  for (int64_t q = b; q < e; q++) {
    const int64_t n = q / C, c = q % C;
    splitPlane(dst + n * DH * DW * phaseStride + c * plane, src + q * H * W, H, W, DH, DW, eH,
               eW, Hp, Wp, phaseStride);
  }
}

LIBJIT_EXPORT void libjit_conv_phase_merge_f32(float *dst, const float *src, int64_t N,
                                               int64_t O, int64_t OH, int64_t OW, int64_t DH,
                                               int64_t DW, int64_t OHp, int64_t OWp,
                                               int64_t tid, int64_t nthreads) {
  int64_t b, e;
  partition(N * O, 1, tid, nthreads, &b, &e);
  const int64_t plane = OHp * OWp, phaseStride = O * plane;
  for (int64_t q = b; q < e; q++) {
    const int64_t n = q / O, o = q % O;
    const float *base = src + n * DH * DW * phaseStride + o * plane;
    float *out = dst + q * OH * OW;
    for (int64_t y = 0; y < OH; y++) {
      const float *rows = base + (y % DH) * DW * phaseStride + (y / DH) * OWp;
      float *d = out + y * OW;
      // Output column x = s + DW k reads column k of phase s.
      for (int64_t s = 0; s < DW; s++) {
        const float *p = rows + s * phaseStride;
        for (int64_t x = s, k = 0; x < OW; x += DW, k++)
          d[x] = p[k];
      }
    }
  }
}
