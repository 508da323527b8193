// The CPU backend's choice of convolution kernel (codegen/ConvPlan.h), checked shape by
// shape against the rules of backends/CPU/README.md ("How a convolution is computed"),
// with the tile and fill arithmetic of each case worked out by hand in its comment.
#include "backends/CPU/codegen/ConvPlan.h"

#include <gtest/gtest.h>

#include <string>

namespace {

using namespace kiln::cpu;

/// A convolution of a square N=1 image: C -> O channels, H x H input, k x k kernel with
/// stride s and "same" padding (k / 2), and the output size that gives.
ConvShape square(int64_t C, int64_t O, int64_t H, int64_t k, int64_t s = 1, int64_t group = 1) {
  ConvShape c;
  c.C = C, c.O = O, c.H = c.W = H;
  c.KH = c.KW = k, c.SH = c.SW = s, c.PT = c.PL = k / 2;
  c.OH = c.OW = (H + 2 * (k / 2) - k) / s + 1;
  c.group = group;
  return c;
}

struct Case {
  const char *what;
  ConvShape shape;
  Isa isa;
  unsigned threads;
  ConvAlgorithm algorithm;
  WeightPacking packing;
  ConvAlgorithmSet allowed = {};
};

std::string name(ConvAlgorithm a) { return convAlgorithmName(a); }

TEST(ConvPlan, DocumentedRules) {
  ConvShape dwAdd = square(32, 32, 56, 3, 1, 32);
  dwAdd.residualAdd = true;
  ConvShape varW = square(512, 512, 7, 3);
  varW.constantWeights = false;
  ConvShape alexnet = square(64, 192, 27, 5); // pad 2: 27x27 out
  const Case cases[] = {
      // Depthwise (group = channels), no residual add.
      {"depthwise 3x3/1 32 112x112", square(32, 32, 112, 3, 1, 32), Isa::Avx512, 1,
       ConvAlgorithm::Depthwise, WeightPacking::None},
      {"depthwise 3x3/2 on AVX2", square(96, 96, 112, 3, 2, 96), Isa::Avx2, 2,
       ConvAlgorithm::Depthwise, WeightPacking::None},
      // With a residual add it is a grouped convolution: neither Winograd (group 1), the
      // strip nor the transposed GEMM (group 1) apply.
      {"depthwise + residual add", dwAdd, Isa::Avx512, 1, ConvAlgorithm::PackedGemm,
       WeightPacking::GemmA},
      {"grouped g2", square(64, 64, 28, 3, 1, 2), Isa::Avx512, 1, ConvAlgorithm::PackedGemm,
       WeightPacking::GemmA},
      // 3x3/1 64->64 56x56: 784 F(2x2) tiles (> 100), 196 F(4x4) tiles, 196/208 = 0.94 of
      // the column vectors: rows on AVX-512 (< 0.95, >= 3 x 14 tiles), columns on AVX2
      // (not < 0.9).
      {"3x3/1 64->64 56x56", square(64, 64, 56, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows4, WeightPacking::WinogradRows4x4},
      {"3x3/1 64->64 56x56 AVX2", square(64, 64, 56, 3), Isa::Avx2, 1, ConvAlgorithm::Winograd,
       WeightPacking::Winograd4x4},
      // 3x3/1 128->128 28x28: 49 F(4x4) tiles fill 49/64 of the vectors: rows on both.
      {"3x3/1 128->128 28x28", square(128, 128, 28, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows4, WeightPacking::WinogradRows4x4},
      {"3x3/1 128->128 28x28 AVX2", square(128, 128, 28, 3), Isa::Avx2, 2,
       ConvAlgorithm::WinogradRows4, WeightPacking::WinogradRows4x4},
      // 224x224: 3136 tiles fill the vectors exactly: columns.
      {"3x3/1 64->64 224x224", square(64, 64, 224, 3), Isa::Avx512, 1, ConvAlgorithm::Winograd,
       WeightPacking::Winograd4x4},
      // 3x3/1 256->256 14x14: 49 F(2x2) tiles, O C = 65536: F(2x2) rows at 2 threads; at 1
      // thread F(4x4) applies (16 tiles, 65536 <= 8192 x 16) and stays, as columns (16
      // tiles are fewer than 3 row tiles).
      {"3x3/1 256->256 14x14 2 threads", square(256, 256, 14, 3), Isa::Avx512, 2,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2},
      {"3x3/1 256->256 14x14 1 thread", square(256, 256, 14, 3), Isa::Avx512, 1,
       ConvAlgorithm::Winograd, WeightPacking::Winograd4x4},
      // 512->512 14x14: F(4x4) is out (262144 > 8192 x 16), so F(2x2) at 1 thread too.
      {"3x3/1 512->512 14x14 1 thread", square(512, 512, 14, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2},
      // 512->512 7x7: 16 F(2x2) tiles, 4 F(4x4) tiles: no Winograd; K = 4608 is too much
      // for the strip; 49 pixels fill 49/64 of the GEMM panels: transposed.
      {"3x3/1 512->512 7x7", square(512, 512, 7, 3), Isa::Avx512, 1, ConvAlgorithm::Transposed,
       WeightPacking::GemmBTransposed},
      // Fewer than 8 input channels: no Winograd; K = 27, 1024 pixels fill the panels.
      {"3x3/1 3->16 32x32", square(3, 16, 32, 3), Isa::Avx512, 1, ConvAlgorithm::Strip,
       WeightPacking::None},
      // Pointwise 256->64 56x56: 3136 pixels fill the strips (65 x 48 + 16): strip.
      {"1x1 256->64 56x56", square(256, 64, 56, 1), Isa::Avx512, 1, ConvAlgorithm::Strip,
       WeightPacking::None},
      // Pointwise 1024->256 14x14: 196 pixels fill 196/208 of the strip vectors (>= 0.9),
      // so the strip comes first although they fill only 196/224 of the GEMM panels.
      {"1x1 1024->256 14x14", square(1024, 256, 14, 1), Isa::Avx512, 1, ConvAlgorithm::Strip,
       WeightPacking::None},
      // Pointwise 512->2048 7x7: 49 pixels fill 49/64 of the strip vectors: transposed.
      {"1x1 512->2048 7x7", square(512, 2048, 7, 1), Isa::Avx512, 1, ConvAlgorithm::Transposed,
       WeightPacking::GemmBTransposed},
      // Pointwise with K = 1280 > 1152 on a large image (panels full): packed GEMM.
      {"1x1 1280->64 56x56", square(1280, 64, 56, 1), Isa::Avx512, 1, ConvAlgorithm::PackedGemm,
       WeightPacking::GemmA},
      // 5x5/1 64->192 27x27 (alexnet), K = 1600: taps read in place on AVX-512 up to
      // K = 2304; AVX2 has no tap planes above K = 1152. 729 pixels fill 729/736 of the
      // panels, so no transposed GEMM.
      {"5x5/1 64->192 27x27", alexnet, Isa::Avx512, 1, ConvAlgorithm::Strip, WeightPacking::None},
      {"5x5/1 64->192 27x27 AVX2", alexnet, Isa::Avx2, 1, ConvAlgorithm::PackedGemm,
       WeightPacking::GemmA},
      // 3x3/2 256->256 28x28 -> 14x14, K = 2304: the strip applies on AVX-512, but 196
      // pixels fill 196/224 of the panels and the transposed GEMM comes first.
      {"3x3/2 256->256 28x28", square(256, 256, 28, 3, 2), Isa::Avx512, 2,
       ConvAlgorithm::Transposed, WeightPacking::GemmBTransposed},
      // Switched off: without Winograd 64->64 56x56 (K = 576) takes the strip; without the
      // transposed GEMM 512->512 7x7 takes the packed GEMM; weights computed at run time
      // take neither Winograd nor the transposed GEMM.
      {"no winograd", square(64, 64, 56, 3), Isa::Avx512, 1, ConvAlgorithm::Strip,
       WeightPacking::None, {false, true}},
      {"no transposed", square(512, 512, 7, 3), Isa::Avx512, 1, ConvAlgorithm::PackedGemm,
       WeightPacking::GemmA, {true, false}},
      {"weights at run time", varW, Isa::Avx512, 1, ConvAlgorithm::PackedGemm,
       WeightPacking::GemmA},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    ConvPlan p = chooseConvAlgorithm(c.shape, c.isa, c.threads, c.allowed);
    EXPECT_EQ(name(p.algorithm), name(c.algorithm));
    EXPECT_EQ(int(p.packing), int(c.packing));
  }
}

// The transposed GEMM needs the transposed result (pixels x O floats) in an 8 MB scratch.
TEST(ConvPlan, TransposedResultBoundedByScratch) {
  // 7x7 pixels (49: 49/64 of the panels); K = 4608 rules out the strip.
  ConvShape fits = square(512, 512, 7, 3), tooBig = fits;
  fits.O = 42799;   // 49 x 42799 x 4 = 8388604 bytes <= 8 MB
  tooBig.O = 42800; // 8388800 bytes
  EXPECT_EQ(name(chooseConvAlgorithm(fits, Isa::Avx512, 1).algorithm), "convT");
  EXPECT_EQ(name(chooseConvAlgorithm(tooBig, Isa::Avx512, 1).algorithm), "conv");
}

// Winograd F(4x4) needs at least 8 output tiles and 8 input channels.
TEST(ConvPlan, WinogradThresholds) {
  // 10x10 -> 3 x 3 = 9 tiles; 8x8 -> 2 x 2 = 4 tiles (F(2x2): 16 and 25 tiles, < 32).
  EXPECT_EQ(name(chooseConvAlgorithm(square(64, 64, 10, 3), Isa::Avx512, 1).algorithm),
            "conv_wino");
  EXPECT_NE(name(chooseConvAlgorithm(square(64, 64, 8, 3), Isa::Avx512, 1).algorithm),
            "conv_wino");
  EXPECT_EQ(name(chooseConvAlgorithm(square(8, 64, 10, 3), Isa::Avx512, 1).algorithm),
            "conv_wino");
  EXPECT_NE(name(chooseConvAlgorithm(square(7, 64, 10, 3), Isa::Avx512, 1).algorithm),
            "conv_wino");
}

} // namespace
