#include "ConvPlan.h"

#include "backends/CPU/libjit/libjit.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

namespace kiln::cpu {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Whether Winograd F(4x4, 3x3) beats the GEMM convolutions for a 3x3 stride-1
/// convolution with T = N ceil(OH / 4) ceil(OW / 4) output tiles: from 8 tiles (10x10
/// images) up, unless each tile has to pay for reading more than 36 x 8192 weights (they
/// are 4x the direct convolution's: 512 channels lose at 7x7 and 14x14, win at 28x28), and
/// not with fewer than 8 input channels (the transforms then cost more than the direct
/// sum). Measured with test/cpu:conv_bench, see the README.
bool winogradWins(const ConvShape &s) {
  int64_t tiles = s.N * ceilDiv(s.OH, 4) * ceilDiv(s.OW, 4);
  return s.C >= 8 && tiles >= 8 && s.O * s.C <= 8192 * tiles;
}

/// Whether Winograd F(2x2, 3x3) with the tiles as GEMM rows beats F(4x4, 3x3) and the
/// GEMM convolutions: on images of 32-100 F(2x2) tiles (11x11 to 20x20) with large
/// filters (O C >= 65536). There F(4x4)'s transformed weights, 4x the filter's bytes for
/// 16 tiles, are a stream memory does not serve at 2 threads, and a GEMM convolution does
/// 2.25x the multiplies of F(2x2). At 1 thread it only replaces the GEMM convolutions
/// (a tie with F(4x4) there). Not on larger images, where F(4x4) is compute-bound and does
/// fewer multiplies, nor at 7x7 or with smaller filters (ties or losses). Measured in
/// network, see the README. On images of over 100 F(2x2) tiles it takes the filters too
/// large for F(4x4)'s weight bound but within its own, whose transformed weights are 16/36
/// of F(4x4)'s per filter and spread over 4x the tiles (O C <= 8192 x F(2x2) tiles), such
/// as FCN's 3x3 2048->512 head at 28x28 (measured against the GEMM convolution: README).
bool winograd2Wins(const ConvShape &s, unsigned threads) {
  int64_t tiles = s.N * ceilDiv(s.OH, 2) * ceilDiv(s.OW, 2);
  if (s.O * s.C < 65536)
    return false;
  if (tiles > 100)
    return s.C >= 8 && !winogradWins(s) && s.O * s.C <= 8192 * tiles;
  if (tiles < 32)
    return false;
  return threads > 1 || !winogradWins(s);
}

/// Whether Winograd F(4x4, 3x3) with the tiles as GEMM rows beats the tiles-as-columns
/// kernel: where the columns kernel pads the N ceil(OH / 4) ceil(OW / 4) tiles to whole
/// 16-column vectors by 5% or more (10% on AVX2) and the tiles fill three row tiles of
/// \p MR rows. Not where the tiles fill the vectors (112x112 and up) nor with 16 tiles
/// (13x13, 14x14: the 2-row remainder tile). Measured, see the README.
bool winogradRowsWins(const ConvShape &s, int64_t MR, bool avx512) {
  int64_t tiles = s.N * ceilDiv(s.OH, 4) * ceilDiv(s.OW, 4);
  double fill = double(tiles) / double(ceilDiv(tiles, 16) * 16);
  return tiles >= 3 * MR && fill < (avx512 ? 0.95 : 0.9);
}

/// Where F(2x2, 3x3), the only Winograd kernel within the error budget (README,
/// "Accuracy"), is taken by default: wherever the rules above take a Winograd kernel, and
/// on images of 16-31 F(2x2) tiles (7x7 to 10x10) with large filters (O C >= 65536), where
/// they take a direct kernel, such as resnet50's 7x7 512->512 layers (measured against the
/// transposed GEMM: README).
bool winograd2AccurateWins(const ConvShape &s, unsigned threads) {
  if (winograd2Wins(s, threads) || winogradWins(s))
    return true;
  int64_t tiles = s.N * ceilDiv(s.OH, 2) * ceilDiv(s.OW, 2);
  return s.C >= 8 && tiles >= 16 && tiles < 32 && s.O * s.C >= 65536;
}

/// The share of the strip kernel's column vectors that \p pixels fill: whole strips of
/// kStripVectors vectors, then the remainder in whole vectors.
double stripFill(int64_t pixels, bool avx512) {
  int64_t vector = avx512 ? 16 : 8, strip = vector * libjit::kStripVectors;
  return double(pixels) /
         double(pixels / strip * strip + ceilDiv(pixels % strip, vector) * vector);
}

/// The share of the NR-column GEMM panels that \p pixels fill.
double panelFill(int64_t pixels, bool avx512) {
  int64_t NR = avx512 ? libjit::GemmAvx512::NR : libjit::GemmAvx2::NR;
  return double(pixels) / double(ceilDiv(pixels, NR) * NR);
}

/// Whether the strip kernel's im2col block of one strip (K rows of kStripVectors vectors)
/// fits the per-thread GEMM scratch it works in, on both instruction sets (K <= 9904;
/// libjit.h).
bool stripFitsScratch(int64_t K) {
  return K * libjit::kStripVectors * libjit::GemmAvx512::VW + 64 <=
             libjit::gemmScratchFloats<libjit::GemmAvx512>() &&
         K * libjit::kStripVectors * libjit::GemmAvx2::VW + 64 <=
             libjit::gemmScratchFloats<libjit::GemmAvx2>();
}

/// Whether the grouped kernel can compute \p s: groups of at most kGroupedMaxWidth
/// channels on either side (depthwise ones too, which it takes when they add a residual),
/// weights packed at compile time.
bool groupedApplies(const ConvShape &s) {
  if (s.group <= 1 || s.C % s.group || s.O % s.group || !s.constantWeights)
    return false;
  return s.C / s.group <= kGroupedMaxWidth && s.O / s.group <= kGroupedMaxWidth;
}

/// The weight layout of \p a's kernel.
WeightPacking packingOf(ConvAlgorithm a) {
  switch (a) {
  case ConvAlgorithm::Depthwise:
  case ConvAlgorithm::Strip:
    return WeightPacking::None;
  case ConvAlgorithm::Grouped:
    return WeightPacking::GroupedTaps;
  case ConvAlgorithm::WinogradRows2:
    return WeightPacking::WinogradRows2x2;
  case ConvAlgorithm::WinogradRows4:
    return WeightPacking::WinogradRows4x4;
  case ConvAlgorithm::Winograd:
    return WeightPacking::Winograd4x4;
  case ConvAlgorithm::Transposed:
    return WeightPacking::GemmBTransposed;
  case ConvAlgorithm::PackedGemm:
    return WeightPacking::GemmA;
  }
  return WeightPacking::GemmA;
}

constexpr ConvAlgorithm kAllAlgorithms[] = {
    ConvAlgorithm::Depthwise,  ConvAlgorithm::Grouped,       ConvAlgorithm::WinogradRows2,
    ConvAlgorithm::WinogradRows4,
    ConvAlgorithm::Winograd,   ConvAlgorithm::Transposed,    ConvAlgorithm::Strip,
    ConvAlgorithm::PackedGemm,
};

} // namespace

bool convAlgorithmApplies(ConvAlgorithm a, const ConvShape &s) {
  switch (a) {
  case ConvAlgorithm::Depthwise:
    return s.group > 1 && s.group == s.C && s.O == s.C && !s.residualAdd;
  case ConvAlgorithm::Grouped:
    return groupedApplies(s);
  case ConvAlgorithm::WinogradRows2:
  case ConvAlgorithm::WinogradRows4:
  case ConvAlgorithm::Winograd:
    return s.group == 1 && s.constantWeights && s.KH == 3 && s.KW == 3 && s.SH == 1 &&
           s.SW == 1 && s.DH == 1 && s.DW == 1;
  case ConvAlgorithm::Transposed:
    return s.group == 1 && s.constantWeights;
  case ConvAlgorithm::Strip:
    return s.group == 1 && stripFitsScratch(s.C * s.KH * s.KW);
  case ConvAlgorithm::PackedGemm:
    return true;
  }
  return false;
}

std::optional<ConvAlgorithm> parseConvAlgorithmName(const std::string &name) {
  for (ConvAlgorithm a : kAllAlgorithms)
    if (name == convAlgorithmName(a))
      return a;
  return std::nullopt;
}

ConvPlan chooseConvAlgorithm(const ConvShape &s, Isa isa, unsigned threads,
                             const ConvAlgorithmSet &allowed) {
  const bool avx512 = isa == Isa::Avx512;
  if (allowed.force && convAlgorithmApplies(*allowed.force, s))
    return {*allowed.force, packingOf(*allowed.force)};
  // Depthwise: its own kernel, which has no residual operand.
  if (s.group > 1 && s.group == s.C && s.O == s.C && !s.residualAdd)
    return {ConvAlgorithm::Depthwise, WeightPacking::None};
  // Other grouped convolutions with narrow groups: one kernel over the groups (the packed
  // GEMM pads each group's few output channels to whole register tiles).
  if (groupedApplies(s))
    return {ConvAlgorithm::Grouped, WeightPacking::GroupedTaps};

  // Winograd for 3x3 stride-1 layers with weights to transform at compile time.
  bool winograd3x3 = s.group == 1 && s.constantWeights && allowed.winograd && s.KH == 3 &&
                     s.KW == 3 && s.SH == 1 && s.SW == 1 && s.DH == 1 && s.DW == 1;
  // By default only F(2x2, 3x3), whose error stays within the budget of the README's
  // "Accuracy" (F(4x4)'s is 6-11x a direct convolution's: 100-layer networks leave
  // BENCH.md's tolerance), on the shapes where a Winograd kernel is the fastest.
  if (winograd3x3 && !allowed.fastWinograd) {
    if (winograd2AccurateWins(s, threads))
      return {ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2};
  } else if (winograd3x3) {
    if (winograd2Wins(s, threads))
      return {ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2};
    if (winogradWins(s)) {
      int64_t MR = avx512 ? libjit::GemmAvx512::MR : libjit::GemmAvx2::MR;
      if (winogradRowsWins(s, MR, avx512))
        return {ConvAlgorithm::WinogradRows4, WeightPacking::WinogradRows4x4};
      return {ConvAlgorithm::Winograd, WeightPacking::Winograd4x4};
    }
  }

  // The strip kernel reads the filter as it is: group 1, reductions up to K = 1152, and on
  // AVX-512 kernels with taps (read through tap planes, no im2col copy) up to K = 2304
  // (on AVX2 the transposed GEMM won at K = 2304).
  int64_t K = (s.C / s.group) * s.KH * s.KW;
  int64_t pixels = s.OH * s.OW;
  bool taps = avx512 && (s.KH > 1 || s.KW > 1);
  bool strip = s.group == 1 && (K <= 1152 || (taps && K <= 2304));
  // Pointwise layers whose pixels fill the strip's vectors well (13x13 and up) read the
  // input as it is and take the strip kernel before the transposed GEMM (faster at 13x13
  // and 14x14, a tie at K = 1024, slower at 7x7).
  bool pointwise = s.KH == 1 && s.KW == 1 && s.SH == 1 && s.SW == 1 && s.PT == 0 &&
                   s.PL == 0 && s.OH == s.H && s.OW == s.W;
  if (strip && pointwise && stripFill(pixels, avx512) >= 0.9)
    return {ConvAlgorithm::Strip, WeightPacking::None};

  // Small images fill the NR-column panels of the pixel dimension badly: compute those
  // transposed, pixels as rows, when the transposed result fits an 8 MB scratch. Where
  // it applies it comes before the strip kernel also for strided layers with taps, since
  // it prefetches its weight panels (see the README).
  if (s.group == 1 && s.constantWeights && allowed.transposed && panelFill(pixels, avx512) < 0.92 &&
      uint64_t(pixels * s.O) * 4 <= (8u << 20))
    return {ConvAlgorithm::Transposed, WeightPacking::GemmBTransposed};
  if (strip)
    return {ConvAlgorithm::Strip, WeightPacking::None};
  return {ConvAlgorithm::PackedGemm, WeightPacking::GemmA};
}

const char *convAlgorithmName(ConvAlgorithm a) {
  switch (a) {
  case ConvAlgorithm::Depthwise:
    return "conv_dw";
  case ConvAlgorithm::Grouped:
    return "conv_grp";
  case ConvAlgorithm::WinogradRows2:
    return "conv_wino2";
  case ConvAlgorithm::WinogradRows4:
    return "conv_wino4r";
  case ConvAlgorithm::Winograd:
    return "conv_wino";
  case ConvAlgorithm::Transposed:
    return "convT";
  case ConvAlgorithm::Strip:
    return "convS";
  case ConvAlgorithm::PackedGemm:
    return "conv";
  }
  return "conv";
}

} // namespace kiln::cpu
