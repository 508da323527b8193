// Blocking parameters of the float32 GEMM, one set per instruction-set variant. Shared by
// the kernels and by the backend, which packs constant weights in the same layout at
// compile time and reserves per-thread scratch of gemmScratchFloats() floats.
//
// Packed layouts (zero-padded to whole panels):
//  - A (M x K, the "row" operand): panels of MR rows; panel p holds, for k in [0, K), the
//    MR values A[p*MR + r][k] at [p][k][r].
//  - B (K x N, the "column" operand): panels of NR columns; panel q holds, for k in [0, K),
//    the NR values B[k][q*NR + c] at [q][k][c].
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_GEMM_CONFIG_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_GEMM_CONFIG_H

#include <stdint.h>

namespace libjit {

/// 512-bit vectors: 16 floats per vector, a 14 x 32 register tile (28 accumulators).
struct GemmAvx512 {
  static constexpr int VW = 16;
  static constexpr int NV = 2;
  static constexpr int MR = 14;
  static constexpr int NR = VW * NV;
  static constexpr int64_t KC = 384;
  static constexpr int64_t MC = MR * 12;
  static constexpr int64_t NC = 32 * 32;
};

/// 256-bit vectors: 8 floats per vector, a 6 x 16 register tile (12 accumulators).
struct GemmAvx2 {
  static constexpr int VW = 8;
  static constexpr int NV = 2;
  static constexpr int MR = 6;
  static constexpr int NR = VW * NV;
  static constexpr int64_t KC = 256;
  static constexpr int64_t MC = MR * 16;
  static constexpr int64_t NC = 16 * 64;
};

/// Floats of scratch one thread of a GEMM needs (B block + A block + slack).
template <class Cfg> constexpr int64_t gemmScratchFloats() {
  return Cfg::KC * (Cfg::NC + Cfg::NR) + Cfg::KC * (Cfg::MC + Cfg::MR) + 64;
}

/// Floats of a packed A (M x K) or B (K x N) operand.
template <class Cfg> constexpr int64_t packedAFloats(int64_t M, int64_t K) {
  return (M + Cfg::MR - 1) / Cfg::MR * Cfg::MR * K;
}
template <class Cfg> constexpr int64_t packedBFloats(int64_t K, int64_t N) {
  return (N + Cfg::NR - 1) / Cfg::NR * Cfg::NR * K;
}

} // namespace libjit

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_GEMM_CONFIG_H
