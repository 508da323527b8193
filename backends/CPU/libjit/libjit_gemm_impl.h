// The float32 GEMM engine shared by the GEMM-based kernels (libjit_gemm.cpp and the
// convolution algorithms built on it): vector helpers, the register-blocked micro-kernel
// with its fused epilogue, operand sources (packed at compile time, or packed per block
// from row-major memory), and the blocked, thread-partitioned driver. Internal to the
// kernel library: everything is a template or inline, so each kernel file that includes
// it gets its own copy in its bitcode.
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_GEMM_IMPL_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_GEMM_IMPL_H

#include "libjit_act.h"
#include "libjit_defs.h"
#include "libjit_gemm_config.h"
#include "libjit_vec.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace libjit {
/// What happens to a finished tile: C = (accumulate ? C : 0) + A*B, and on the last K
/// block + biasRow[r] + biasCol[c] + add[r][c], then activation act (libjit_act.h) with
/// parameters lo, hi: ActClamp clamps to [lo, hi] in registers, the other kinds run on the
/// stored tile (activateTile).
struct Epilogue {
  const float *biasRow;
  const float *biasCol;
  const float *add;
  int64_t ldadd;
  int act;
  float lo, hi;
};

/// No bias, no residual add, no activation.
constexpr Epilogue kNoEpilogue = {nullptr, nullptr, nullptr, 0, 0, 0.0f, 0.0f};

/// C[0:rows, 0:nr] (+)= tile[0:rows, 0:nr] (ldt) with the epilogue, one column at a time:
/// the finish of a partial tile (nr below the tile width). Out of line and generic in the
/// tile's shape, so the kernel library has one copy rather than one per tile height and
/// width: the JIT unswitches each copy on the epilogue flags and vectorises every version,
/// which made these rarely run lines most of a GEMM kernel's compile time.
LIBJIT_NOINLINE inline void storePartialTile(const float *tile, int64_t ldt, int64_t rows,
                                             int64_t nr, float *c, int64_t ldc, int accumulate,
                                             int last, const Epilogue *epi) {
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t j = 0; j < nr; j++) {
      float x = tile[r * ldt + j];
      float *p = c + r * ldc + j;
      if (accumulate)
        x += *p;
      if (last) {
        if (epi->biasRow)
          x += epi->biasRow[r];
        if (epi->biasCol)
          x += epi->biasCol[j];
        if (epi->add)
          x += epi->add[r * epi->ldadd + j];
        if (epi->act == ActClamp) {
          x = x < epi->lo ? epi->lo : x;
          x = x > epi->hi ? epi->hi : x;
        }
      }
      *p = x;
    }
  }
  if (last && epi->act > ActClamp)
    activateTile(c, ldc, rows, nr, epi->act, epi->lo, epi->hi);
}

/// C[0:mr, 0:nr] (+)= A panel x B panel over kc, computed as an MRr-row tile (mr <= MRr;
/// the packed A panel is zero-padded, so the extra rows are computed and not stored).
/// a: [kc][Cfg::MR], b: [kc][Cfg::NR]. The first pfLines (<= kc) steps each prefetch one
/// 64-byte line of pf into the cache (see gemmRange: the next weight panel, spread over
/// the calls that use the current one).
template <class Cfg, int MRr>
LIBJIT_NOINLINE void microKernel(int64_t kc, const float *__restrict a, const float *__restrict b,
                                 float *__restrict c, int64_t ldc, int64_t mr, int64_t nr,
                                 int accumulate, int last, const Epilogue *epi,
                                 const float *pf, int64_t pfLines) {
  typedef typename VecOf<Cfg::VW>::T V;
  constexpr int VW = Cfg::VW, NV = Cfg::NV, MR = Cfg::MR, NR = Cfg::NR;
  V acc[MRr][NV];
  LIBJIT_UNROLL
  for (int r = 0; r < MRr; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      acc[r][v] = (V){};
  auto step = [&](int64_t k) __attribute__((always_inline)) {
    V bv[NV];
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      bv[v] = loadV<V>(b + k * NR + v * VW);
    LIBJIT_UNROLL
    for (int r = 0; r < MRr; r++) {
      V av = splatV<V>(a[k * MR + r]);
      LIBJIT_UNROLL
      for (int v = 0; v < NV; v++)
        acc[r][v] += av * bv[v];
    }
  };
  int64_t k = 0;
  for (; k < pfLines; k++) {
    __builtin_prefetch(pf + k * 16, 0, 2);
    step(k);
  }
  for (; k < kc; k++)
    step(k);
  if (nr == NR) {
    LIBJIT_UNROLL
    for (int r = 0; r < MRr; r++) {
      if (r >= mr)
        break;
      LIBJIT_UNROLL
      for (int v = 0; v < NV; v++) {
        float *p = c + r * ldc + v * VW;
        V x = acc[r][v];
        if (accumulate)
          x += loadV<V>(p);
        if (last) {
          if (epi->biasRow)
            x += epi->biasRow[r];
          if (epi->biasCol)
            x += loadV<V>(epi->biasCol + v * VW);
          if (epi->add)
            x += loadV<V>(epi->add + r * epi->ldadd + v * VW);
          if (epi->act == ActClamp) {
            x = x < epi->lo ? splatV<V>(epi->lo) : x;
            x = x > epi->hi ? splatV<V>(epi->hi) : x;
          }
        }
        storeV(p, x);
      }
    }
    if (last && epi->act > ActClamp)
      activateTileN<NR>(c, ldc, minI(mr, MRr), epi->act, epi->lo, epi->hi);
    return;
  }
  // A partial tile (the last panel of a row): out of line, see storePartialTile.
  float tile[MRr * NR];
  LIBJIT_UNROLL
  for (int r = 0; r < MRr; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      storeV(tile + r * NR + v * VW, acc[r][v]);
  storePartialTile(tile, NR, minI(mr, MRr), nr, c, ldc, accumulate, last, epi);
}

/// Picks the smallest instantiated tile height that covers mr rows: MR, 8, 4, 2 or 1
/// (few instantiations keep the kernel library quick to compile).
template <class Cfg>
LIBJIT_INLINE void microKernelDispatch(int64_t mr, int64_t kc, const float *a, const float *b,
                                       float *c, int64_t ldc, int64_t nr, int accumulate,
                                       int last, const Epilogue *epi, const float *pf,
                                       int64_t pfLines) {
  constexpr int MR = Cfg::MR;
  constexpr int H8 = MR > 8 ? 8 : MR, H4 = MR > 4 ? 4 : MR, H2 = MR > 2 ? 2 : MR;
  if (mr > H8)
    microKernel<Cfg, MR>(kc, a, b, c, ldc, mr, nr, accumulate, last, epi, pf, pfLines);
  else if (mr > H4)
    microKernel<Cfg, H8>(kc, a, b, c, ldc, mr, nr, accumulate, last, epi, pf, pfLines);
  else if (mr > H2)
    microKernel<Cfg, H4>(kc, a, b, c, ldc, mr, nr, accumulate, last, epi, pf, pfLines);
  else if (mr > 1)
    microKernel<Cfg, H2>(kc, a, b, c, ldc, mr, nr, accumulate, last, epi, pf, pfLines);
  else
    microKernel<Cfg, 1>(kc, a, b, c, ldc, mr, nr, accumulate, last, epi, pf, pfLines);
}

/// As microKernelDispatch, with the sum over kc in blocks of SumBlock steps: each block's
/// float32 sum is added into the tile (a load, add and store of the accumulators), so an
/// output is a sum, in order, of sums of SumBlock products rather than one sum of kc: a
/// smaller rounding error where a later transform magnifies it (Winograd F(4x4)). The
/// epilogue runs after the last block; lines [0, pfLines) of pf are prefetched one per
/// step, spread over the blocks as over one call.
template <class Cfg, int64_t SumBlock>
LIBJIT_INLINE void microKernelBlockedSums(int64_t mr, int64_t kc, const float *a, const float *b,
                                          float *c, int64_t ldc, int64_t nr, int accumulate,
                                          int last, const Epilogue *epi, const float *pf,
                                          int64_t pfLines) {
  for (int64_t kb = 0; kb < kc; kb += SumBlock) {
    int64_t n = minI(SumBlock, kc - kb), lines = maxI(minI(pfLines - kb, n), 0);
    microKernelDispatch<Cfg>(mr, n, a + kb * Cfg::MR, b + kb * Cfg::NR, c, ldc, nr,
                             accumulate || kb > 0, last && kb + n == kc, epi,
                             lines ? pf + kb * 16 : nullptr, lines);
  }
}

// ---- Operand sources: already packed (constant weights) or packed per block. ----

/// A operand packed at compile time: panels of MR rows over the full K. streamed: gemmRange
/// prefetches its panels ahead (weights read once from memory); false for an operand the
/// kernel has just packed into the cache (Winograd's transformed tiles).
template <class Cfg> struct PackedA {
  static constexpr bool packed = true;
  const float *p;
  int64_t K;
  bool streamed = true;
  const float *panel(int64_t row, int64_t pc) const { return p + (row / Cfg::MR) * K * Cfg::MR + pc * Cfg::MR; }
  void pack(float *, int64_t, int64_t, int64_t, int64_t) const {}
};

/// A operand in row-major memory with leading dimension lda.
template <class Cfg> struct RawA {
  static constexpr bool packed = false;
  const float *p;
  int64_t lda;
  const float *panel(int64_t, int64_t) const { return nullptr; }
  /// One full panel of pack() with 16-float vectors (AVX-512, MR <= 16), s the panel's
  /// first row at column pc: 16 columns of the MR rows at a time, loaded as rows (zero
  /// rows up to 16), transposed in registers and stored as 16 whole vectors at d + k MR
  /// in ascending k, each store's lanes past MR landing where the next one writes. The
  /// last store reaches 16 - MR floats past the panel, into the next panel (written
  /// after this one) or the slack after the A block in the scratch (KC x MR floats); the
  /// columns past the last 16 are copied one by one after it. A copy: the same values as
  /// the element loop below.
  void packFullPanel16(float *d, const float *s, int64_t kc) const {
    constexpr int64_t MR = Cfg::MR;
    int64_t k0 = 0;
    for (; k0 + 16 <= kc; k0 += 16) {
      F16 v[16];
      LIBJIT_UNROLL
      for (int64_t r = 0; r < 16; r++)
        v[r] = r < MR ? ld16(s + r * lda + k0) : splat16(0.0f);
      transpose16(v);
      LIBJIT_UNROLL
      for (int64_t j = 0; j < 16; j++)
        st16(d + (k0 + j) * MR, v[j]);
    }
    for (int64_t k = k0; k < kc; k++)
      for (int64_t r = 0; r < MR; r++)
        d[k * MR + r] = s[r * lda + k];
  }
  /// Packs rows [i0, i0+mc) x columns [pc, pc+kc) into panels [kc][MR].
  void pack(float *dst, int64_t i0, int64_t mc, int64_t pc, int64_t kc) const {
    for (int64_t ip = 0; ip < mc; ip += Cfg::MR) {
      int64_t rows = minI(Cfg::MR, mc - ip);
      float *d = dst + (ip / Cfg::MR) * kc * Cfg::MR;
      if constexpr (Cfg::VW == 16 && Cfg::MR <= 16) {
        if (rows == Cfg::MR && kc >= 16) {
          packFullPanel16(d, p + (i0 + ip) * lda + pc, kc);
          continue;
        }
      }
      for (int64_t r = 0; r < Cfg::MR; r++) {
        if (r < rows) {
          const float *s = p + (i0 + ip + r) * lda + pc;
          for (int64_t k = 0; k < kc; k++)
            d[k * Cfg::MR + r] = s[k];
        } else {
          for (int64_t k = 0; k < kc; k++)
            d[k * Cfg::MR + r] = 0.0f;
        }
      }
    }
  }
};

// ---- float16 weights: packed as float32 ones are, stored as 16-bit halves. ----

/// The float32 value of the float16 bit pattern \p h: exact (every float16 is a float32),
/// as F16C's vcvtph2ps gives it; infinities and NaNs keep their sign and payload.
LIBJIT_INLINE float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, em = h & 0x7fffu;
  uint32_t bits;
  if (em >= 0x7c00u) { // infinity or NaN: the 10 mantissa bits on top of float32's 23
    bits = 0x7f800000u | ((em & 0x3ffu) << 13);
  } else if (em >= 0x400u) { // normal: rebias the exponent from 15 to 127
    bits = (em + ((127u - 15u) << 10)) << 13;
  } else { // zero or subnormal: em x 2^-24, both factors and the product exact
    float f = float(em) * 0x1p-24f;
    __builtin_memcpy(&bits, &f, 4);
  }
  bits |= sign;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

#if defined(__x86_64__)
/// d[0:n] = the halves s[0:n] as float32, 16 at a time with AVX-512's vcvtph2ps. Out of
/// line: a function compiled for AVX-512 cannot be inlined into the generic caller.
__attribute__((target("avx512f"))) LIBJIT_NOINLINE inline void
widenHalves16(float *__restrict d, const uint16_t *__restrict s, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
  for (; i < n; i++)
    d[i] = halfToFloat(s[i]);
}

/// As widenHalves16, 8 at a time with F16C (every AVX2 processor has it).
__attribute__((target("avx,f16c"))) LIBJIT_NOINLINE inline void
widenHalves8(float *__restrict d, const uint16_t *__restrict s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
  for (; i < n; i++)
    d[i] = halfToFloat(s[i]);
}
#endif

/// d[0:n] = s[0:n] widened with the conversion instruction of Cfg's vector width.
template <int VW>
LIBJIT_INLINE void widenHalves(float *__restrict d, const uint16_t *__restrict s, int64_t n) {
#if defined(__x86_64__)
  if constexpr (VW == 16)
    widenHalves16(d, s, n);
  else
    widenHalves8(d, s, n);
#else
  for (int64_t i = 0; i < n; i++)
    d[i] = halfToFloat(s[i]);
#endif
}

/// A operand packed at compile time in PackedA's layout, each element a float16 (weights
/// of a network run in fp16, held in half the bytes). Not `packed` for gemmRange: each
/// block's panels are widened into the thread's A block, where RawA would pack them, so
/// the micro-kernel reads the float32 values PackedA of the widened weights would give,
/// in the same order: the results are the float32 kernel's bit for bit. A weight block is
/// widened once per column block (NC output columns), a few conversions per thousand
/// multiply-adds.
template <class Cfg> struct HalfPackedA {
  static constexpr bool packed = false;
  const uint16_t *p;
  int64_t K;
  const float *panel(int64_t, int64_t) const { return nullptr; }
  /// Rows [i0, i0 + mc) (i0 a multiple of MR) x columns [pc, pc + kc) into panels [kc][MR]:
  /// a panel's kc x MR halves lie contiguous in the packed layout (zero rows included).
  void pack(float *dst, int64_t i0, int64_t mc, int64_t pc, int64_t kc) const {
    for (int64_t ip = 0; ip < mc; ip += Cfg::MR)
      widenHalves<Cfg::VW>(dst + (ip / Cfg::MR) * kc * Cfg::MR,
                           p + ((i0 + ip) / Cfg::MR) * K * Cfg::MR + pc * Cfg::MR,
                           kc * Cfg::MR);
  }
};

/// B operand packed at compile time in PackedB's layout as float16, widened per block into
/// the thread's B block (as HalfPackedA).
template <class Cfg> struct HalfPackedB {
  static constexpr bool packed = false;
  const uint16_t *p;
  int64_t K;
  const float *panel(int64_t, int64_t) const { return nullptr; }
  /// Rows [pc, pc + kc) x columns [j0, j0 + nc) (j0 a multiple of NR) into panels [kc][NR].
  void pack(float *dst, int64_t j0, int64_t nc, int64_t pc, int64_t kc) const {
    for (int64_t jp = 0; jp < nc; jp += Cfg::NR)
      widenHalves<Cfg::VW>(dst + (jp / Cfg::NR) * kc * Cfg::NR,
                           p + ((j0 + jp) / Cfg::NR) * K * Cfg::NR + pc * Cfg::NR,
                           kc * Cfg::NR);
  }
};

/// B operand packed at compile time: panels of NR columns over the full K.
template <class Cfg> struct PackedB {
  static constexpr bool packed = true;
  const float *p;
  int64_t K;
  const float *panel(int64_t col, int64_t pc) const { return p + (col / Cfg::NR) * K * Cfg::NR + pc * Cfg::NR; }
  void pack(float *, int64_t, int64_t, int64_t, int64_t) const {}
};

/// B operand in row-major memory with leading dimension ldb.
template <class Cfg> struct RawB {
  static constexpr bool packed = false;
  const float *p;
  int64_t ldb;
  const float *panel(int64_t, int64_t) const { return nullptr; }
  /// Packs rows [pc, pc+kc) x columns [j0, j0+nc) into panels [kc][NR].
  void pack(float *dst, int64_t j0, int64_t nc, int64_t pc, int64_t kc) const {
    for (int64_t jp = 0; jp < nc; jp += Cfg::NR) {
      int64_t cols = minI(Cfg::NR, nc - jp);
      float *d = dst + (jp / Cfg::NR) * kc * Cfg::NR;
      if (cols == Cfg::NR) {
        for (int64_t k = 0; k < kc; k++) {
          const float *s = p + (pc + k) * ldb + j0 + jp;
          for (int64_t c = 0; c < Cfg::NR; c++)
            d[k * Cfg::NR + c] = s[c];
        }
      } else {
        for (int64_t k = 0; k < kc; k++) {
          const float *s = p + (pc + k) * ldb + j0 + jp;
          for (int64_t c = 0; c < Cfg::NR; c++)
            d[k * Cfg::NR + c] = c < cols ? s[c] : 0.0f;
        }
      }
    }
  }
};

/// Whether gemmRange prefetches \p A's panels ahead: packed A operands marked streamed.
template <class ASrc> LIBJIT_INLINE bool streamsPanels(const ASrc &A) {
  if constexpr (ASrc::packed)
    return A.streamed;
  else
    return false;
}

/// The thread split of an M x N GEMM: by default columns when there are enough, else rows.
/// Each thread packs the blocks of the run-time operands it reads, so a GEMM whose rows
/// come from an expensive packing (the im2col rows of a transposed convolution) passes
/// preferRows, and is split by rows whenever every thread gets two row panels: then no two
/// threads pack the same rows.
template <class Cfg, bool preferRows = false>
LIBJIT_INLINE void gemmPartition(int64_t M, int64_t N, int64_t tid, int64_t nthreads,
                                 int64_t *m0, int64_t *m1, int64_t *n0, int64_t *n1) {
  *m0 = 0, *m1 = M, *n0 = 0, *n1 = N;
  if (nthreads <= 1)
    return;
  bool rowsEnough = M >= nthreads * Cfg::MR * 2;
  bool splitRows = preferRows ? rowsEnough : !(N >= nthreads * Cfg::NR * 4 || !rowsEnough);
  if (splitRows)
    partition(M, Cfg::MR, tid, nthreads, m0, m1);
  else
    partition(N, Cfg::NR, tid, nthreads, n0, n1);
}

/// C[m0:m1, n0:n1] (ldc) = A x B + epilogue, using \p scratch (gemmScratchFloats floats;
/// none when both operands are packed). SumBlock > 0 sums K in blocks of that many steps
/// (microKernelBlockedSums).
template <class Cfg, class ASrc, class BSrc, int64_t SumBlock = 0>
LIBJIT_INLINE void gemmRange(int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t K,
                             const ASrc &A, const BSrc &B, float *C, int64_t ldc,
                             const Epilogue &epi, float *scratch) {
  constexpr int64_t MR = Cfg::MR, NR = Cfg::NR, KC = Cfg::KC, MC = Cfg::MC, NC = Cfg::NC;
  static_assert(SumBlock == 0 || KC % SumBlock == 0, "a K block holds whole sum blocks");
  if (m0 >= m1 || n0 >= n1)
    return;
  float *bbuf = scratch;
  float *abuf = bbuf + KC * (NC + NR);
  for (int64_t jc = n0; jc < n1; jc += NC) {
    int64_t nc = minI(NC, n1 - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      int64_t kc = minI(KC, K - pc);
      int accumulate = pc > 0;
      int last = pc + kc == K;
      if (!BSrc::packed)
        B.pack(bbuf, jc, nc, pc, kc);
      for (int64_t ic = m0; ic < m1; ic += MC) {
        int64_t mc = minI(MC, m1 - ic);
        if (!ASrc::packed)
          A.pack(abuf, ic, mc, pc, kc);
        int64_t nIr = ceilDiv(mc, MR);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          int64_t nr = minI(NR, nc - jr);
          const float *bp = BSrc::packed ? B.panel(jc + jr, pc) : bbuf + (jr / NR) * kc * NR;
          // Weights packed as B are read from memory once, by the first row tile, and then
          // from the cache: bursts the hardware prefetcher does not smooth. So the calls on
          // this panel prefetch the next one (the next column panel, else the first of the
          // next K block), a share each.
          const float *pfBase = nullptr;
          int64_t pfTotal = 0;
          if (BSrc::packed && nIr > 1 && ic == m0) {
            if (jr + NR < nc)
              pfBase = B.panel(jc + jr + NR, pc), pfTotal = kc * NR / 16;
            else if (pc + KC < K)
              pfBase = B.panel(jc, pc + KC), pfTotal = minI(KC, K - pc - KC) * NR / 16;
          }
          for (int64_t ir = 0; ir < mc; ir += MR) {
            int64_t i = ir / MR, l0 = i * pfTotal / nIr, l1 = (i + 1) * pfTotal / nIr;
            const float *pf = pfBase ? pfBase + l0 * 16 : nullptr;
            int64_t pfLines = pfBase ? minI(l1 - l0, kc) : 0;
            // Weights packed as A (Winograd, the packed convolution) stream in on the first
            // column panel: each call there prefetches the panel two row tiles ahead.
            if (streamsPanels(A) && jr == 0 && ic + ir + 2 * MR < m1) {
              pf = A.panel(ic + ir + 2 * MR, pc);
              pfLines = minI(kc * MR / 16, kc);
            }
            int64_t mr = minI(MR, mc - ir);
            const float *ap = ASrc::packed ? A.panel(ic + ir, pc) : abuf + (ir / MR) * kc * MR;
            int64_t row = ic + ir, col = jc + jr;
            Epilogue e;
            e.biasRow = epi.biasRow ? epi.biasRow + row : nullptr;
            e.biasCol = epi.biasCol ? epi.biasCol + col : nullptr;
            e.add = epi.add ? epi.add + row * epi.ldadd + col : nullptr;
            e.ldadd = epi.ldadd;
            e.act = epi.act;
            e.lo = epi.lo;
            e.hi = epi.hi;
            if constexpr (SumBlock > 0)
              microKernelBlockedSums<Cfg, SumBlock>(mr, kc, ap, bp, C + row * ldc + col, ldc,
                                                    nr, accumulate, last, &e, pf, pfLines);
            else
              microKernelDispatch<Cfg>(mr, kc, ap, bp, C + row * ldc + col, ldc, nr,
                                       accumulate, last, &e, pf, pfLines);
          }
        }
      }
    }
  }
}

/// C[M x N] (ldc) = A x B + epilogue, the share of thread tid of nthreads; each thread uses
/// its own slice of scratch.
template <class Cfg, class ASrc, class BSrc>
LIBJIT_INLINE void gemmDriver(int64_t M, int64_t N, int64_t K, const ASrc &A, const BSrc &B,
                              float *C, int64_t ldc, const Epilogue &epi, float *scratch,
                              int64_t tid, int64_t nthreads) {
  int64_t m0, m1, n0, n1;
  gemmPartition<Cfg>(M, N, tid, nthreads, &m0, &m1, &n0, &n1);
  gemmRange<Cfg>(m0, m1, n0, n1, K, A, B, C, ldc, epi, scratch + tid * gemmScratchFloats<Cfg>());
}

/// Packs W [O x K] (row-major) as the B operand W^T [K x O] in NR-column panels. Whole
/// panels copy without a bounds test per element; the last one pads with zeros.
template <class Cfg> void packBT(float *dst, const float *Wt, int64_t K, int64_t O) {
  constexpr int64_t NR = Cfg::NR;
  const int64_t whole = O / NR;
  for (int64_t q = 0; q < whole; q++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t c = 0; c < NR; c++)
        dst[(q * K + k) * NR + c] = Wt[(q * NR + c) * K + k];
  if (whole * NR < O)
    for (int64_t k = 0; k < K; k++)
      for (int64_t c = 0; c < NR; c++) {
        int64_t j = whole * NR + c;
        dst[(whole * K + k) * NR + c] = j < O ? Wt[j * K + k] : 0.0f;
      }
}

/// Packs row-major A [M x K] (lda) into MR-row panels.
template <class Cfg> void packA(float *dst, const float *A, int64_t M, int64_t K, int64_t lda) {
  for (int64_t p = 0; p < ceilDiv(M, Cfg::MR); p++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t r = 0; r < Cfg::MR; r++) {
        int64_t i = p * Cfg::MR + r;
        dst[(p * K + k) * Cfg::MR + r] = i < M ? A[i * lda + k] : 0.0f;
      }
}

/// Packs row-major B [K x N] (ldb) into NR-column panels. Whole panels copy NR floats at
/// a time as one block (vector moves; element by element, the native build copied one
/// float per instruction).
template <class Cfg> void packB(float *dst, const float *B, int64_t K, int64_t N, int64_t ldb) {
  constexpr int64_t NR = Cfg::NR;
  const int64_t whole = N / NR;
  for (int64_t q = 0; q < whole; q++)
    for (int64_t k = 0; k < K; k++)
      __builtin_memcpy(dst + (q * K + k) * NR, B + k * ldb + q * NR, NR * sizeof(float));
  if (whole * NR < N)
    for (int64_t k = 0; k < K; k++)
      for (int64_t c = 0; c < NR; c++) {
        int64_t j = whole * NR + c;
        dst[(whole * K + k) * NR + c] = j < N ? B[k * ldb + j] : 0.0f;
      }
}

} // namespace libjit

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_GEMM_IMPL_H
