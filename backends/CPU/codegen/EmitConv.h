/// \file
/// How the CPU backend computes a 2-D convolution: the choice of kernel and weight layout
/// from the shape alone (no IR, no LLVM in these declarations), so that the rules can be
/// read and tested on their own. EmitConv.cpp defines the choice, then the emission
/// (Emitter::planConv emits the call the plan names). The rules
/// and the measurements behind them are in backends/CPU/README.md.
#ifndef KILN_BACKENDS_CPU_CODEGEN_EMITCONV_H
#define KILN_BACKENDS_CPU_CODEGEN_EMITCONV_H

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::cpu {

/// The instruction set the kernels are compiled for.
enum class Isa { Avx2, Avx512 };

/// A convolution in NCHW: input N x C x H x W, output N x O x OH x OW.
struct ConvShape {
  int64_t N = 1, C = 1, H = 1, W = 1;
  int64_t O = 1, OH = 1, OW = 1;
  int64_t KH = 1, KW = 1; ///< kernel
  int64_t SH = 1, SW = 1; ///< strides
  int64_t PT = 0, PL = 0; ///< top and left padding
  int64_t DH = 1, DW = 1; ///< dilations
  int64_t group = 1;
  /// The weights are a constant (they can be transformed at compile time).
  bool constantWeights = true;
  /// The fused epilogue adds a residual operand.
  bool residualAdd = false;
};

/// The kernel that computes a convolution; the profile name of each in brackets.
enum class ConvAlgorithm {
  Depthwise,     ///< [conv_dw] one filter per channel (libjit_conv2d_dw)
  Grouped,       ///< [conv_grp] groups as a batch of direct convolutions (libjit_conv2d_grouped)
  WinogradRows2, ///< [conv_wino2] F(2x2, 3x3), tiles as GEMM rows
  WinogradRows4, ///< [conv_wino4r] F(4x4, 3x3), tiles as GEMM rows
  Winograd,      ///< [conv_wino] F(4x4, 3x3), tiles as GEMM columns
  Transposed,    ///< [convT] GEMM with the pixels as rows (libjit_conv2d_t)
  Strip,         ///< [convS] strip kernel over the unpacked filter (libjit_conv2d_strip)
  PackedGemm,    ///< [conv] packed GEMM over im2col (libjit_conv2d)
};

/// How weights are laid out for their kernel; all but None are packed at compile time
/// for constant weights.
enum class WeightPacking {
  None,            ///< as they are
  GemmA,           ///< GEMM A panels (MR rows), per group
  GemmB,           ///< GEMM B panels (NR columns)
  GemmBTransposed, ///< W [cols x rows] packed as the B operand W^T
  Winograd4x4,     ///< F(4x4, 3x3) transformed, for the tiles-as-columns kernel
  WinogradRows2x2, ///< F(2x2, 3x3) transformed, for the tiles-as-rows kernel
  WinogradRows4x4, ///< F(4x4, 3x3) transformed, for the tiles-as-rows kernel
  GroupedTaps,     ///< [G][C/G][KH KW][O/G]: per group, the taps' output channels adjacent
  GemmBBf16Pairs,  ///< bf16 B in pairs of rows, 16-column panels (libjit_pack_b_bf16)
};

/// Algorithms that may be switched off (CodegenOptions::winograd, transposedConv), and
/// one that may be forced (CodegenOptions::forceConv: measurements and tests).
struct ConvAlgorithmSet {
  bool winograd = true;
  bool transposed = true;
  /// Winograd F(4x4, 3x3) where it is fastest (CodegenOptions::fastWinograd): outside the
  /// error budget (README, "Accuracy"); otherwise Winograd is F(2x2, 3x3) only.
  bool fastWinograd = false;
  /// Taken wherever it can compute the shape (convAlgorithmApplies), whatever its speed
  /// and error; other convolutions follow the rules.
  std::optional<ConvAlgorithm> force;
};

struct ConvPlan {
  ConvAlgorithm algorithm = ConvAlgorithm::PackedGemm;
  WeightPacking packing = WeightPacking::GemmA;
};

/// The kernel for \p s on \p isa compiled for \p threads threads: the first rule of the
/// README's table that applies.
ConvPlan chooseConvAlgorithm(const ConvShape &s, Isa isa, unsigned threads,
                             const ConvAlgorithmSet &allowed = {});

/// The profile name of \p a ("conv_dw", "convS", ...).
const char *convAlgorithmName(ConvAlgorithm a);

/// The algorithm whose profile name is \p name; nullopt when none is.
std::optional<ConvAlgorithm> parseConvAlgorithmName(const std::string &name);

/// Whether \p a's kernel can compute \p s at all, fast or not: depthwise needs group =
/// channels and no residual add; the grouped kernel 1 < group, constant weights and groups
/// of at most kGroupedMaxWidth input and output channels; Winograd a 3x3 stride-1 undilated kernel, one group and
/// constant weights; the transposed GEMM constant weights and one group; the strip one
/// group and a reduction C KH KW <= 9904 (its block of one strip in the GEMM scratch); the
/// packed GEMM takes everything.
bool convAlgorithmApplies(ConvAlgorithm a, const ConvShape &s);

/// The widest group (input or output channels) the grouped kernel takes: its per-thread
/// copy of one group's padded input planes stays small.
constexpr int64_t kGroupedMaxWidth = 64;

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_CODEGEN_EMITCONV_H
