// float32 GEMM: packing, register-blocked micro-kernels and the blocked driver, and the
// operators built on it (MatMul, BatchMatMul, FullyConnected; the convolutions built on it
// are in libjit_conv.cpp). Written with vector extensions so that LLVM emits the host's
// widest FMA for the variant the backend picks (libjit_*_avx512 on AVX-512 hosts,
// libjit_*_avx2 elsewhere); native builds of the same code are slower but compute the
// same values.
#include "libjit.h"
#include "libjit_gemm_impl.h"

namespace libjit {
namespace {

template <class Cfg>
LIBJIT_INLINE void sgemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float *C, int64_t ldc, float *scratch,
                         int64_t tid, int64_t nthreads) {
  gemmDriver<Cfg>(M, N, K, RawA<Cfg>{A, lda}, RawB<Cfg>{B, ldb}, C, ldc, kNoEpilogue, scratch,
                  tid, nthreads);
}

/// The B operand of a fully-connected layer's weights: float32 panels, or the same panels
/// in float16 (HalfPackedB, widened per block).
template <class Cfg> LIBJIT_INLINE PackedB<Cfg> weightsB(const float *p, int64_t K) {
  return PackedB<Cfg>{p, K};
}
template <class Cfg> LIBJIT_INLINE HalfPackedB<Cfg> weightsB(const uint16_t *p, int64_t K) {
  return HalfPackedB<Cfg>{p, K};
}

/// WT: float, or uint16_t for float16 weights (libjit_fc_f16w_*).
template <class Cfg, class WT>
LIBJIT_INLINE void fc(float *out, const float *in, const WT *packedW, const float *bias,
                      const float *add, int64_t N, int64_t K, int64_t M, int64_t act, float lo,
                      float hi, float *scratch, int64_t tid, int64_t nthreads) {
  Epilogue epi = {nullptr, bias, add, M, (int)act, lo, hi};
  gemmDriver<Cfg>(N, M, K, RawA<Cfg>{in, K}, weightsB<Cfg>(packedW, K), out, M, epi, scratch,
                  tid, nthreads);
}

template <class Cfg>
LIBJIT_INLINE void batchMatMul(float *out, const float *lhs, const float *rhs, int64_t B,
                               int64_t N, int64_t K, int64_t M, float *scratch, int64_t tid,
                               int64_t nthreads) {
  const Epilogue &epi = kNoEpilogue;
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

} // namespace
} // namespace libjit

using namespace libjit;

namespace {

/// sums[0:n] = in[k0:k1] x W[k0:k1, c0:c0 + n] (row-major, ldw columns): whole rows of W
/// in order, summed in blocks of kRowBlock rows whose partial sums are added to the total
/// (a sum of K float32 products then grows its rounding error with about
/// sqrt(kRowBlock) + sqrt(K / kRowBlock) rather than sqrt(K)). n <= kRowChunk.
constexpr int64_t kRowChunk = 8192, kRowBlock = 256;

/// Rows of float32 weights one pass over the partial sums adds, where the caller asks for
/// groups (a divisor of kRowBlock). The rows lie one after another in memory, so the pass
/// reads one region in kRowGroup places at once: more lines in flight than one row's
/// stream keeps, and the partial sums loaded and stored once per kRowGroup rows instead
/// of once per row.
constexpr int64_t kRowGroup = 16;

/// part[0:n] += x w[0:n]: one row, a loop the compiler vectorises (and interleaves; on
/// AVX2 faster than one vector at a time).
LIBJIT_INLINE void addRow(float *__restrict part, float x, const float *w, int64_t n) {
  for (int64_t j = 0; j < n; j++)
    part[j] += x * w[j];
}

/// part[0:n] += in[0] w[0][0:n] + ... + in[kRowGroup - 1] w[kRowGroup - 1][0:n] (row r at
/// w + r ldw), added one row after another for each column, so every sum is addRow's.
LIBJIT_INLINE void addRowGroup(float *__restrict part, const float *in, const float *w,
                               int64_t ldw, int64_t n) {
  constexpr int R = kRowGroup;
  F16 x[R];
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    x[r] = splat16(in[r]);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    F16 p = ld16(part + j);
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++)
      p += x[r] * ld16(w + r * ldw + j);
    st16(part + j, p);
  }
  for (; j < n; j++) {
    float p = part[j];
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++)
      p += in[r] * w[r * ldw + j];
    part[j] = p;
  }
}

/// part[0:n] += in[k0:k1] x W[k0:k1, c0:c0 + n]: float32 rows kRowGroup at a time when
/// \p grouped, float16 rows one at a time (each widened into \p wide first).
template <int VW>
LIBJIT_INLINE void addRowRange(float *part, const float *in, const float *W, int64_t ldw,
                               int64_t k0, int64_t k1, int64_t c0, int64_t n, bool grouped,
                               float *) {
  int64_t k = k0;
  for (; grouped && k + kRowGroup <= k1; k += kRowGroup)
    addRowGroup(part, in + k, W + k * ldw + c0, ldw, n);
  for (; k < k1; k++)
    addRow(part, in[k], W + k * ldw + c0, n);
}
template <int VW>
LIBJIT_INLINE void addRowRange(float *part, const float *in, const uint16_t *W, int64_t ldw,
                               int64_t k0, int64_t k1, int64_t c0, int64_t n, bool,
                               float *wide) {
  for (int64_t k = k0; k < k1; k++) {
    widenHalves<VW>(wide, W + k * ldw + c0, n);
    addRow(part, in[k], wide, n);
  }
}

/// WT: float, or uint16_t for float16 weights; VW: the widening's vector width (unused
/// for float).
template <int VW, class WT>
LIBJIT_INLINE void rowSums(float *sums, const float *in, const WT *W, int64_t ldw, int64_t k0,
                           int64_t k1, int64_t c0, int64_t n, bool grouped) {
  float part[kRowChunk];
  float wide[sizeof(WT) == 2 ? kRowChunk : 1];
  for (int64_t j = 0; j < n; j++)
    sums[j] = 0.0f;
  for (int64_t b = k0; b < k1; b += kRowBlock) {
    for (int64_t j = 0; j < n; j++)
      part[j] = 0.0f;
    addRowRange<VW>(part, in, W, ldw, b, minI(k1, b + kRowBlock), c0, n, grouped, wide);
    for (int64_t j = 0; j < n; j++)
      sums[j] += part[j];
  }
}

/// libjit_fc_row_f32's body over weights of type WT (see there).
template <int VW, class WT>
LIBJIT_INLINE void fcRow(float *out, const float *in, const WT *W, const float *bias,
                         const float *add, int64_t K, int64_t M, int64_t act, float lo,
                         float hi, float *partials, int64_t parts, int64_t tid,
                         int64_t nthreads, bool grouped) {
  if (partials) {
    int64_t k0, k1;
    partition(K, kRowBlock, tid, nthreads, &k0, &k1);
    float *mine = partials + tid * M;
    for (int64_t c0 = 0; c0 < M; c0 += kRowChunk)
      rowSums<VW>(mine + c0, in, W, M, k0, k1, c0, minI(kRowChunk, M - c0), grouped);
    if (tid == 0)
      for (int64_t j = nthreads * M; j < parts * M; j++)
        partials[j] = 0.0f;
    return;
  }
  float sums[kRowChunk];
  for (int64_t c0 = 0; c0 < M; c0 += kRowChunk) {
    const int64_t n = minI(kRowChunk, M - c0);
    rowSums<VW>(sums, in, W, M, 0, K, c0, n, grouped);
    Epilogue e{nullptr, bias ? bias + c0 : nullptr, add ? add + c0 : nullptr, 0, int(act), lo, hi};
    storePartialTile(sums, kRowChunk, 1, n, out + c0, M, /*accumulate=*/0, /*last=*/1, &e);
  }
}

} // namespace

/// out[0:M] = in[0:K] x W + bias, add, activation: a fully-connected layer of one row,
/// with W [K x M] row-major, read where the graph holds it (Emitter::constBorrowed): for
/// one row, packing buys nothing (each weight is used once, the layer streams them from
/// memory either way) and would be a second copy of them. W is read in whole rows (up to
/// kRowChunk columns at a time), kRowGroup consecutive rows per pass: the hardware
/// prefetchers follow streams through one region, where a part of every row (columns
/// split between threads) measured about half the bandwidth. Without \p partials, the result and its epilogue go to out. With them
/// ([parts x M]), each of the nthreads threads sums a range of rows (multiples of
/// kRowBlock) into its row of partials, thread 0 zeroes the rows of threads that did not
/// run (a stage run on fewer threads than compiled for), and libjit_fc_row_sum_f32 adds
/// the parts rows up and applies the epilogue. \p rowGroups nonzero sums kRowGroup rows
/// per pass (AVX-512 hosts); zero, one row at a time (on AVX2 the groups measured slower:
/// their kRowGroup broadcast inputs outnumber its 16 registers).
LIBJIT_EXPORT void libjit_fc_row_f32(float *out, const float *in, const float *W,
                                     const float *bias, const float *add, int64_t K, int64_t M,
                                     int64_t act, float lo, float hi, float *partials,
                                     int64_t parts, int64_t tid, int64_t nthreads,
                                     int64_t rowGroups) {
  fcRow<16>(out, in, W, bias, add, K, M, act, lo, hi, partials, parts, tid, nthreads,
            rowGroups != 0);
}

/// libjit_fc_row_f32 with W [K x M] in float16 (a network run in fp16, its weights held in
/// half the bytes): each row chunk widened (vcvtph2ps, 16 lanes on _avx512, 8 on _avx2)
/// into a float32 buffer in L1, then summed as libjit_fc_row_f32 sums it, so the results
/// are its results on the widened weights bit for bit, for half the bytes streamed.
#define LIBJIT_FC_ROW_F16W(SUFFIX, VW)                                                      \
  LIBJIT_EXPORT void libjit_fc_row_f16w_##SUFFIX(                                           \
      float *out, const float *in, const uint16_t *W, const float *bias, const float *add,   \
      int64_t K, int64_t M, int64_t act, float lo, float hi, float *partials, int64_t parts,  \
      int64_t tid, int64_t nthreads) {                                                       \
    fcRow<VW>(out, in, W, bias, add, K, M, act, lo, hi, partials, parts, tid, nthreads,      \
              false);                                                                        \
  }
LIBJIT_FC_ROW_F16W(avx512, 16)
LIBJIT_FC_ROW_F16W(avx2, 8)

/// out[0:M] = the sum of the \p parts rows of partials (M each, in order) + bias, add,
/// activation: the end of libjit_fc_row_f32 on several threads, columns split between them.
LIBJIT_EXPORT void libjit_fc_row_sum_f32(float *out, const float *partials, const float *bias,
                                         const float *add, int64_t M, int64_t parts,
                                         int64_t act, float lo, float hi, int64_t tid,
                                         int64_t nthreads) {
  constexpr int64_t kChunk = 1024;
  float sums[kChunk];
  int64_t m0, m1;
  partition(M, 64, tid, nthreads, &m0, &m1);
  for (int64_t c0 = m0; c0 < m1; c0 += kChunk) {
    const int64_t n = minI(kChunk, m1 - c0);
    for (int64_t j = 0; j < n; j++)
      sums[j] = partials[c0 + j];
    for (int64_t p = 1; p < parts; p++)
      for (int64_t j = 0; j < n; j++)
        sums[j] += partials[p * M + c0 + j];
    Epilogue e{nullptr, bias ? bias + c0 : nullptr, add ? add + c0 : nullptr, 0, int(act), lo, hi};
    storePartialTile(sums, kChunk, 1, n, out + c0, M, /*accumulate=*/0, /*last=*/1, &e);
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
  LIBJIT_EXPORT void libjit_fc_f16w_##SUFFIX(float *out, const float *in,                   \
                                             const uint16_t *packedW, const float *bias,     \
                                             const float *add, int64_t N, int64_t K,         \
                                             int64_t M, int64_t act, float lo, float hi,     \
                                             float *scratch, int64_t tid, int64_t nthreads) { \
    fc<CFG>(out, in, packedW, bias, add, N, K, M, act, lo, hi, scratch, tid, nthreads);      \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_batchmatmul_f32_##SUFFIX(                                       \
      float *out, const float *lhs, const float *rhs, int64_t B, int64_t N, int64_t K,       \
      int64_t M, float *scratch, int64_t tid, int64_t nthreads) {                            \
    batchMatMul<CFG>(out, lhs, rhs, B, N, K, M, scratch, tid, nthreads);                     \
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
