// The MAC array's float32 tile step through Eigen's own kernels (see SimGemm.h for why
// the results are the Interpreter's, bit for bit).

#include "SimGemm.h"

#include <Eigen/Core>

namespace kiln {

namespace {

using Blocking = Eigen::internal::gemm_blocking_space<Eigen::RowMajor, float, float, Eigen::Dynamic,
                                                      Eigen::Dynamic, Eigen::Dynamic>;
using Gemm = Eigen::internal::general_matrix_matrix_product<Eigen::Index, float, Eigen::RowMajor,
                                                            false, float, Eigen::RowMajor, false,
                                                            Eigen::RowMajor, 1>;
using Traits = Eigen::internal::gebp_traits<float, float>;

/// GemvRow's depth block (Eigen's general_matrix_vector_product, column-major).
uint64_t gemvBlock(uint64_t N, uint64_t K) {
  return K < 128 ? K : (N * sizeof(float) < 32000 ? 16 : 4);
}

} // namespace

GemmMode gemmModeFor(uint64_t M, uint64_t N, uint64_t K) {
  if (K + M + N < 20 || !K || !M || !N)
    return GemmMode::Unsupported; // coefficient-based (or empty)
  if (N == 1)
    return GemmMode::Unsupported; // matrix-vector with row-major A
  if (M == 1)
    return GemmMode::GemvRow;
  return GemmMode::Gemm;
}

void prepareGemmShape(GemmShape &s) {
  if (s.mode == GemmMode::GemvRow) {
    s.granuleM = s.blockM = 1;
    s.granuleN = 1;
    s.blockN = s.N;
    s.granuleK = gemvBlock(s.N, s.K);
    return;
  }
  if (s.mode != GemmMode::Gemm)
    return;
  // As Eigen's product evaluator builds it for Y (row-major) = A * B: the transposed,
  // column-major problem has Y's columns as its rows (blocks of mc, panels of mr) and Y's
  // rows as its columns (blocks of nc, panels of nr).
  auto b = std::make_shared<Blocking>(Eigen::Index(s.M), Eigen::Index(s.N), Eigen::Index(s.K), 1,
                                      true);
  s.granuleK = uint64_t(b->kc());
  s.blockN = uint64_t(b->mc());
  s.granuleN = uint64_t(Traits::mr);
  s.blockM = uint64_t(b->nc());
  s.granuleM = uint64_t(Traits::nr);
  s.blocking = b;
}

void runGemmTile(const GemmShape &s, uint64_t mt, uint64_t nt, uint64_t kt, uint64_t k0,
                 const float *A, const float *B, float *Y) {
  if (s.mode == GemmMode::GemvRow) {
    const uint64_t blk = s.granuleK;
    (void)k0; // tiles start on a block edge
    for (uint64_t j = 0; j < nt; j++) {
      float r = Y[j];
      for (uint64_t b = 0; b < kt; b += blk) {
        const uint64_t e = std::min(b + blk, kt);
        float c = 0.0f;
        for (uint64_t k = b; k < e; k++)
          c = c + B[k * nt + j] * A[k];
        r = r + c;
      }
      Y[j] = r;
    }
    (void)mt;
    return;
  }
  // The whole product's blocking: allocates nothing here (blockA/blockB stay null, so
  // each call packs into its own workspace) and is only read, so runs may share it.
  auto &blocking = *static_cast<Blocking *>(s.blocking.get());
  Gemm::run(Eigen::Index(mt), Eigen::Index(nt), Eigen::Index(kt), A, Eigen::Index(kt), B,
            Eigen::Index(nt), Y, 1, Eigen::Index(nt), 1.0f, blocking, nullptr);
}

} // namespace kiln
