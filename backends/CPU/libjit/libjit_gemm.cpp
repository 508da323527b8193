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

} // namespace
} // namespace libjit

using namespace libjit;

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
