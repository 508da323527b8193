/// \file
/// The cost model behind the choice of convolution kernel (chooseConvAlgorithm, Codegen.h):
/// for a ConvShape, an instruction set and a thread count, an estimated time per kernel
/// from the work it does (its multiply-adds over the register tiles it fills, the copies
/// and transforms it makes) and the bytes it streams from memory, over the machine's
/// limits (ConvMachine: fixed defaults, so that a compile is deterministic; CodegenOptions
/// can give others). Pure: no IR, no LLVM. The constants and their calibration against
/// measured kernels (test/cpu/conv_times.tsv, checked by test/cpu:conv_cost_test) are in
/// backends/CPU/README.md, "How a convolution is computed".
#ifndef KILN_BACKENDS_CPU_CODEGEN_CONVCOST_H
#define KILN_BACKENDS_CPU_CODEGEN_CONVCOST_H

#include "backends/CPU/codegen/Codegen.h"

namespace kiln::cpu {

/// The per-kernel terms of the model: the share of the machine's multiply-add peak each
/// kernel's inner loop reaches on full register tiles, and the cost of the data each
/// moves besides, in units of a float copied through the cache (read and written once:
/// 8 bytes at ConvMachine::cacheGBs). Fitted to test/cpu/conv_times.tsv (README).
struct ConvKernelTerms {
  /// Packed GEMM over im2col (`conv`), AVX-512: 14x32 tiles. Below the transposed GEMM's:
  /// on the Zen 5 host every layer the model gave to `conv` (inception_v3's 8x8 and
  /// 17x17 -> 8x8 ones, the only ones in the corpus and sweep) measured faster on `convT`.
  double gemmEff = 0.72;
  double gemmEffAvx2 = 0.84; ///< the same on AVX2: 6x16 tiles
  double transposedEff = 0.82; ///< transposed GEMM (`convT`), pixels as rows
  double stripEff = 0.87;      ///< strip kernel (`convS`), AVX-512: 8x48 tiles
  double stripEffAvx2 = 0.82;  ///< strip kernel on AVX2: 4x24 tiles
  /// A layer's last partial strip of one or two vectors: its multiply-adds cost this many
  /// times those of a full strip (fewer accumulators per broadcast weight).
  double stripTailCost = 1.45;
  /// The share of the memory bandwidth the strip kernel's weight reads get: it reads the
  /// filter as it is, one row per output channel of a tile, where the packed kernels read
  /// one stream of panels.
  double stripMemEff = 0.45;
  /// The strip kernel's block of one strip (K rows of a strip's columns, with the K-deep
  /// weight rows of a tile streaming past it) stays in L2 up to this many KB; beyond, every
  /// tile of output channels reads it again, at stripReloadGBs per core.
  double stripBlockKB = 224;
  double stripReloadGBs = 24;
  double winogradEff = 0.95;  ///< the Winograd kernels' batched GEMMs
  /// Each of a Winograd kernel's batched GEMM calls ((m + 2)^2 per block of tiles, the
  /// blocks as the kernel sizes them to stay in L2), in microseconds.
  double winogradGemmMicros = 0.18;
  /// F(4x4)'s GEMMs add their register tiles into the output tile every
  /// libjit::kWinoSumBlock channels (libjit_gemm_impl.h, microKernelBlockedSums): each block sum
  /// beyond the GEMM's own K blocks costs as much as this many k-steps of the tile (the
  /// load, add and store of the accumulators and the micro-kernel call, against a k-step's
  /// MR x NR multiply-adds).
  double winogradSumFlushSteps = 2;
  double groupedEff = 0.70;   ///< grouped direct kernel (`conv_grp`)
  /// The grouped kernel's lanes path (AVX-512, 16 or 32 output channels per group).
  double groupedLanesEff = 0.70;
  double depthwiseEff = 0.30; ///< depthwise kernel (`conv_dw`)
  /// An im2col, packing or padding copy, per float.
  double copyCost = 0.9;
  /// The transposed GEMM's rows packed from its zero-padded input copy (kernels with taps,
  /// column stride 1 or 2), per float: whole vectors per run of pixels.
  double paddedPackCost = 0.45;
  /// The transposed GEMM's result, written as pixels x channels and transposed back, per
  /// output float.
  double transposeCost = 1.0;
  /// Winograd transforms, per transformed float: input (gathered from the image, added,
  /// written) and output (read, added, written with the epilogue).
  double winogradInCost = 2.3;
  double winogradOutCost = 2.7;
  /// Per output float of every kernel: the epilogue (bias, activation, store).
  double outputCost = 2.9;
  /// The run time one byte of a kernel's weight layout beyond the filter's own bytes must
  /// buy at one thread, in seconds per run (0.12 ms per MB): a kernel whose layout holds
  /// more such bytes than the one that ranks first at one thread by estimate plus this
  /// charge is not taken (rankConvAlgorithms), so that a transformed layout (Winograd's
  /// 16/9 and 36/9 of the filter) is held only where the model expects it to gain that
  /// much.
  double heldBytePrice = 0.12e-3 / 1e6;
  /// Bytes beyond the filter that are not charged, per layer: below a MiB the charge is
  /// under the model's resolution and would only break its ties.
  double heldBytesFree = 1 << 20;
};

/// The estimate for one kernel.
struct ConvCost {
  ConvAlgorithm algorithm = ConvAlgorithm::PackedGemm;
  double seconds = 0;      ///< estimated time of one run
  double flops = 0;        ///< multiply-adds x 2 the kernel issues, padding of its tiles included
  double copyFloats = 0;   ///< floats copied or transformed besides (weighted by their cost)
  double memoryBytes = 0;  ///< bytes read from memory: its weights, packed or transformed
  /// Bytes of its weight layout beyond the filter's own (transformed or padded weights).
  double heldBytes = 0;
  /// Whether its layout pays for its held bytes (rankConvAlgorithms); set there.
  bool paysForHeldBytes = true;
};

/// The default per-kernel terms (calibrated on this project's Zen 4 host: README).
const ConvKernelTerms &defaultConvKernelTerms();

/// The estimated cost of computing \p s with \p a on \p isa with \p threads threads on
/// \p machine. \p a must apply to \p s (convAlgorithmApplies).
ConvCost estimateConvCost(ConvAlgorithm a, const ConvShape &s, Isa isa, unsigned threads,
                          const ConvMachine &machine,
                          const ConvKernelTerms &terms = defaultConvKernelTerms());

/// The kernels chooseConvAlgorithm considers for \p s under \p allowed (what applies,
/// what is switched on, and the accuracy rule: Winograd F(4x4, 3x3) from
/// kWino4MinChannels input channels, below only with fastWinograd; the transposed GEMM
/// while its transposed result fits its 8 MB scratch), each with its estimate, fastest
/// first (ties: the order of ConvAlgorithm), except that those whose layouts hold more
/// bytes beyond the filter's (past heldBytesFree) than the candidate ranked first at one
/// thread by estimate plus heldBytePrice per such byte come after all others, marked as
/// not paying for their bytes: a layout's worth is weighed at one thread, where the
/// model's gains were checked against measurement.
std::vector<ConvCost> rankConvAlgorithms(const ConvShape &s, Isa isa, unsigned threads,
                                         const ConvAlgorithmSet &allowed,
                                         const ConvKernelTerms &terms = defaultConvKernelTerms());

/// The split of \p s's input into its dilation phases \p p and the merge of their results
/// (libjit_conv_phase_split_f32, _merge_f32): the floats each writes, at copyCost per float
/// through the cache, divided among \p threads.
double dilationPhaseCopySeconds(const ConvShape &s, const ConvPhases &p, unsigned threads,
                                const ConvMachine &machine,
                                const ConvKernelTerms &terms = defaultConvKernelTerms());

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_CODEGEN_CONVCOST_H
