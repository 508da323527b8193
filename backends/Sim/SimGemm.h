/// \file
/// The MAC array's float32 tile step, bit-exact with the Interpreter's Eigen products.
///
/// The Interpreter computes a float Convolution (per image and group), FullyConnected or
/// MatMul as one Eigen product Y[M x N] = A[M x K] x B[K x N] of row-major matrices
/// (`Y.noalias() = A * B`). Eigen evaluates it in one of four ways, fixed by the shape:
/// - K + M + N < 20: coefficient by coefficient (a vectorised dot product per output);
/// - N == 1: a matrix-vector product with row-major matrix A;
/// - M == 1 (GemvRow): a matrix-vector product with column-major B^T: for each output j,
///   the depth is cut into blocks of `block` = K if K < 128, else 16 (4 when a row of B is
///   32000 bytes or more); each block's products are summed from zero in depth order and
///   the block's sum is added to the output (which starts at zero);
/// - otherwise (Gemm): Goto's blocked algorithm on the transposed, column-major problem:
///   depth blocks of kc, blocks of mc columns of Y and nc rows of Y (kc, mc, nc from the
///   whole product's shape and the cache sizes, `gemm_blocking_space`), and within a block
///   panels of mr columns and nr rows of Y with their own micro-kernels (the kernel used for
///   an output depends on where its column falls in its block's panels).
/// A tile step here computes Y[m0:m1, n0:n1] += A[m0:m1, k0:k1] x B[k0:k1, n0:n1] with the
/// same kernel (GemvRow: the same block sums; Gemm: Eigen's general_matrix_matrix_product
/// with the whole product's blocking object) when the tile's edges lie where the whole
/// product's kernel puts edges: columns start at a column block's start plus a multiple of
/// mr and end at such a point or at the block's end; rows likewise with nc and nr; depth
/// starts at a multiple of kc (GemvRow: of the block) and is a run of whole depth blocks.
/// Each output then receives the same floating-point operations in the same order as in
/// the whole product: the partial result of every depth block is added to the output held
/// in the accumulator tile, block after block. The first two ways are left to host steps.
#ifndef KILN_BACKENDS_SIM_SIMGEMM_H
#define KILN_BACKENDS_SIM_SIMGEMM_H

#include <cstdint>
#include <memory>

namespace kiln {

enum class GemmMode { Gemm, GemvRow, Unsupported };

/// The float product of one layer and where its tiles may be cut.
struct GemmShape {
  uint64_t M = 0, N = 0, K = 0;
  GemmMode mode = GemmMode::Unsupported;
  /// Tile edges: rows (M) at multiples of granuleM within blocks of blockM, columns (N)
  /// likewise, depth at multiples of granuleK.
  uint64_t granuleM = 1, granuleN = 1, granuleK = 1, blockM = 1, blockN = 1;
  /// Eigen's blocking of the whole product (Gemm).
  std::shared_ptr<void> blocking;
};

/// How Eigen evaluates `Y = A * B` of this shape.
GemmMode gemmModeFor(uint64_t M, uint64_t N, uint64_t K);
/// Fills granules, blocks and the blocking of \p s (s.mode set).
void prepareGemmShape(GemmShape &s);
/// Y[mt x nt] += A[mt x kt] x B[kt x nt] (dense row-major tiles), a tile whose depth
/// starts at \p k0 of the whole product.
void runGemmTile(const GemmShape &s, uint64_t mt, uint64_t nt, uint64_t kt, uint64_t k0,
                 const float *A, const float *B, float *Y);

} // namespace kiln

#endif // KILN_BACKENDS_SIM_SIMGEMM_H
