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
#include "libjit.h"
#include "libjit_gemm_impl.h"
#include "libjit_vec.h"

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
  // The phase planes of the thread's output rows follow the im2col block in its scratch;
  // when they do not all fit, bands of whole blocks whose rows fit are taken in turn.
  PhasePlanes pp = {};
  int64_t blockFloats = nbMax * K + 16, bandPx = 0, nbBand = nbMax;
  int64_t hk = (KH - 1) * DH / SH;
  bool phased = !pointwise && j0 < j1 && phaseSlots(pp, KH, KW, SH, SW, DH, DW);
  if (phased) {
    pp.PW = OW + (KW - 1) * DW / SW;
    pp.p = s + blockFloats;
    int64_t perRow = C * pp.nA * pp.nB * pp.PW;
    int64_t maxRows = (gemmScratchFloats<Cfg>() - blockFloats - NR) / perRow - hk;
    if ((j1 - 1) / OW - j0 / OW + 1 <= maxRows) {
      bandPx = j1 - j0;
    } else {
      // A run of (maxRows - 1) * OW pixels spans at most maxRows output rows.
      bandPx = (maxRows - 1) * OW / NR * NR;
      bandPx = bandPx >= nbMax ? bandPx / nbMax * nbMax : bandPx;
      nbBand = minI(nbMax, bandPx);
      phased = bandPx > 0;
    }
  }
  for (int64_t n = 0; n < N; n++) {
    const float *x = in + n * C * H * W;
    float *y = out + n * O * P;
    const float *a = add ? add + n * O * P : nullptr;
    if (pointwise) {
      for (int64_t j = j0; j < j1; j += NR) {
        int64_t nr = minI(NR, j1 - j);
        const float *b = x + j;
        int64_t ldb = P;
        if (nr < NR) {
          // The last strip: reading NR columns would run past the input.
          for (int64_t k = 0; k < K; k++)
            for (int64_t t = 0; t < NR; t++)
              s[k * NR + t] = t < nr ? x[k * P + j + t] : 0.0f;
          b = s, ldb = NR;
        }
        if (r0 < r1)
          stripRows<Cfg>(r1 - r0, K, w + r0 * K, b, ldb, y + r0 * P + j, P, nr,
                         bias ? bias + r0 : nullptr, a ? a + r0 * P + j : nullptr, P, base);
      }
      continue;
    }
    if (phased) {
      for (int64_t bb = j0; bb < j1; bb += bandPx) {
        int64_t be = minI(j1, bb + bandPx);
        pp.oh0 = bb / OW;
        pp.rows = (be - 1) / OW - pp.oh0 + 1 + hk;
        buildPhasePlanes(pp, x, C, H, W, SH, SW, PT, PL);
        if (KH == 1 && KW == 1) {
          // One phase whose plane rows are the output rows: the planes are the im2col
          // matrix itself (a partial last strip reads into the next plane or the slack).
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
      continue;
    }
    for (int64_t jb = j0; jb < j1; jb += nbMax) {
      int64_t nb = minI(nbMax, j1 - jb), ld = ceilDiv(nb, NR) * NR;
      im2colRows(s, ld, x, jb, nb, C, H, W, OW, KH, KW, SH, SW, PT, PL, DH, DW);
      for (int64_t j = 0; j < nb; j += NR)
        stripRows<Cfg>(O, K, w, s + j, ld, y + jb + j, P, minI(NR, nb - j), bias,
                       a ? a + jb + j : nullptr, P, base);
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
