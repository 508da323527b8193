// The CPU backend's choice of convolution kernel (codegen/Codegen.h), checked shape by
// shape against the rules of backends/CPU/README.md ("How a convolution is computed"),
// with the tile and fill arithmetic of each case worked out by hand in its comment.
#include "backends/CPU/codegen/Codegen.h"

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

/// winograd=fast: Winograd F(4x4, 3x3) allowed.
const ConvAlgorithmSet kFast = {true, true, true};

TEST(ConvPlan, DocumentedRules) {
  ConvShape dwAdd = square(32, 32, 56, 3, 1, 32);
  dwAdd.residualAdd = true;
  ConvShape varW = square(512, 512, 7, 3);
  varW.constantWeights = false;
  ConvShape alexnet = square(64, 192, 27, 5); // pad 2: 27x27 out
  ConvShape varGrouped = square(160, 160, 14, 3, 1, 10);
  varGrouped.constantWeights = false;
  const Case cases[] = {
      // Depthwise (group = channels), no residual add.
      {"depthwise 3x3/1 32 112x112", square(32, 32, 112, 3, 1, 32), Isa::Avx512, 1,
       ConvAlgorithm::Depthwise, WeightPacking::None},
      {"depthwise 3x3/2 on AVX2", square(96, 96, 112, 3, 2, 96), Isa::Avx2, 2,
       ConvAlgorithm::Depthwise, WeightPacking::None},
      // With a residual add it is a grouped convolution of 1-channel groups: the grouped
      // kernel (neither Winograd, the strip nor the transposed GEMM take groups).
      {"depthwise + residual add", dwAdd, Isa::Avx512, 1, ConvAlgorithm::Grouped,
       WeightPacking::GroupedTaps},
      // Grouped convolutions with groups of at most 64 channels on either side: the
      // grouped kernel, whatever the group count (regnet_x_400mf's g2 32->32 112x112,
      // g10 160->160 14x14, g25 400->400 7x7; resnext50_32x4d's 4 to 32 channels per group
      // in 32 groups), on both instruction sets, any stride.
      {"grouped g2 32->32 112x112", square(32, 32, 112, 3, 2, 2), Isa::Avx512, 1,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      {"grouped g10 160->160 14x14", square(160, 160, 14, 3, 1, 10), Isa::Avx512, 2,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      {"grouped g25 400->400 7x7 AVX2", square(400, 400, 7, 3, 1, 25), Isa::Avx2, 1,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      {"grouped g32 1024->1024 7x7", square(1024, 1024, 14, 3, 2, 32), Isa::Avx512, 1,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      {"grouped g2 128->128: 64 per group", square(128, 128, 28, 3, 1, 2), Isa::Avx512, 1,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      // Wider groups (65+ channels on either side) keep the packed GEMM, one per group.
      {"grouped g2 130->128", square(130, 128, 28, 3, 1, 2), Isa::Avx512, 1,
       ConvAlgorithm::PackedGemm, WeightPacking::GemmA},
      {"grouped g2 64->256", square(64, 256, 28, 3, 1, 2), Isa::Avx512, 1,
       ConvAlgorithm::PackedGemm, WeightPacking::GemmA},
      // A depthwise multiplier (group = C, O = 2 C): 1 input and 2 output channels per group.
      {"depthwise multiplier 2", square(16, 32, 28, 3, 1, 16), Isa::Avx512, 1,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      // 3x3/1 64->64 56x56: 784 F(2x2) tiles (> 100), 196 F(4x4) tiles, 196/208 = 0.94 of
      // the column vectors: rows on AVX-512 (< 0.95, >= 3 x 14 tiles), columns on AVX2
      // (not < 0.9).
      // (winograd=fast: F(4x4) allowed.)
      {"3x3/1 64->64 56x56", square(64, 64, 56, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows4, WeightPacking::WinogradRows4x4, kFast},
      {"3x3/1 64->64 56x56 AVX2", square(64, 64, 56, 3), Isa::Avx2, 1, ConvAlgorithm::Winograd,
       WeightPacking::Winograd4x4, kFast},
      // 3x3/1 128->128 28x28: 49 F(4x4) tiles fill 49/64 of the vectors: rows on both.
      {"3x3/1 128->128 28x28", square(128, 128, 28, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows4, WeightPacking::WinogradRows4x4, kFast},
      {"3x3/1 128->128 28x28 AVX2", square(128, 128, 28, 3), Isa::Avx2, 2,
       ConvAlgorithm::WinogradRows4, WeightPacking::WinogradRows4x4, kFast},
      // 224x224: 3136 tiles fill the vectors exactly: columns.
      {"3x3/1 64->64 224x224", square(64, 64, 224, 3), Isa::Avx512, 1, ConvAlgorithm::Winograd,
       WeightPacking::Winograd4x4, kFast},
      // 3x3/1 256->256 14x14: 49 F(2x2) tiles, O C = 65536: F(2x2) rows at 2 threads; at 1
      // thread F(4x4) applies (16 tiles, 65536 <= 8192 x 16) and stays, as columns (16
      // tiles are fewer than 3 row tiles).
      {"3x3/1 256->256 14x14 2 threads", square(256, 256, 14, 3), Isa::Avx512, 2,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2, kFast},
      {"3x3/1 256->256 14x14 1 thread", square(256, 256, 14, 3), Isa::Avx512, 1,
       ConvAlgorithm::Winograd, WeightPacking::Winograd4x4, kFast},
      // 512->512 14x14: F(4x4) is out (262144 > 8192 x 16), so F(2x2) at 1 thread too.
      {"3x3/1 512->512 14x14 1 thread", square(512, 512, 14, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2, kFast},
      // By default (winograd=1) every one of the Winograd cases above is F(2x2), the
      // only Winograd kernel within the error budget (README, "Accuracy").
      {"3x3/1 64->64 56x56 accurate", square(64, 64, 56, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2},
      {"3x3/1 64->64 56x56 AVX2 accurate", square(64, 64, 56, 3), Isa::Avx2, 1,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2},
      {"3x3/1 128->128 28x28 accurate", square(128, 128, 28, 3), Isa::Avx512, 2,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2},
      {"3x3/1 64->64 224x224 accurate", square(64, 64, 224, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2},
      {"3x3/1 256->256 14x14 1 thread accurate", square(256, 256, 14, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2},
      {"3x3/1 512->512 14x14 1 thread accurate", square(512, 512, 14, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2},
      // 512->512 7x7: 16 F(2x2) tiles, 4 F(4x4) tiles: no Winograd; K = 4608 is too much
      // for the strip; 49 pixels fill 49/64 of the GEMM panels: transposed.
      {"3x3/1 512->512 7x7", square(512, 512, 7, 3), Isa::Avx512, 1, ConvAlgorithm::Transposed,
       WeightPacking::GemmBTransposed, kFast},
      // By default F(2x2) takes it: 16 tiles (16-31) and O C = 262144 >= 65536. Not with
      // O C = 32768 (256->128): transposed again.
      {"3x3/1 512->512 7x7 accurate", square(512, 512, 7, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2},
      {"3x3/1 256->128 7x7 accurate", square(256, 128, 7, 3), Isa::Avx512, 1,
       ConvAlgorithm::Transposed, WeightPacking::GemmBTransposed},
      // 2048->512 28x28 (FCN's head): 196 F(2x2) tiles, 49 F(4x4) tiles; O C = 1048576 is
      // over F(4x4)'s bound (8192 x 49) but within F(2x2)'s (8192 x 196): F(2x2), in both
      // modes. 4096->512 28x28 (O C = 2097152 > 8192 x 196) is not: the GEMM convolution
      // (K = 36864, 784 pixels).
      {"3x3/1 2048->512 28x28 accurate", square(2048, 512, 28, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2},
      {"3x3/1 2048->512 28x28", square(2048, 512, 28, 3), Isa::Avx512, 1,
       ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2, kFast},
      {"3x3/1 4096->512 28x28 accurate", square(4096, 512, 28, 3), Isa::Avx512, 1,
       ConvAlgorithm::PackedGemm, WeightPacking::GemmA},
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
      // transposed GEMM 512->512 7x7 takes the packed GEMM (with winograd=fast, which
      // leaves it to the direct kernels); weights computed at run time take neither
      // Winograd nor the transposed GEMM.
      {"no winograd", square(64, 64, 56, 3), Isa::Avx512, 1, ConvAlgorithm::Strip,
       WeightPacking::None, {false, true}},
      {"no transposed", square(512, 512, 7, 3), Isa::Avx512, 1, ConvAlgorithm::PackedGemm,
       WeightPacking::GemmA, {true, false, true}},
      {"weights at run time", varW, Isa::Avx512, 1, ConvAlgorithm::PackedGemm,
       WeightPacking::GemmA},
      // Grouped weights computed at run time cannot be packed at compile time.
      {"grouped weights at run time", varGrouped, Isa::Avx512, 1, ConvAlgorithm::PackedGemm,
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
  // 7x7 pixels (49: 49/64 of the panels); K = 4608 rules out the strip; Winograd off (by
  // default F(2x2) takes these layers).
  const ConvAlgorithmSet noWinograd = {false, true};
  ConvShape fits = square(512, 512, 7, 3), tooBig = fits;
  fits.O = 42799;   // 49 x 42799 x 4 = 8388604 bytes <= 8 MB
  tooBig.O = 42800; // 8388800 bytes
  EXPECT_EQ(name(chooseConvAlgorithm(fits, Isa::Avx512, 1, noWinograd).algorithm), "convT");
  EXPECT_EQ(name(chooseConvAlgorithm(tooBig, Isa::Avx512, 1, noWinograd).algorithm), "conv");
}

// Winograd F(4x4) needs at least 8 output tiles and 8 input channels; by default F(2x2)
// takes exactly those shapes.
TEST(ConvPlan, WinogradThresholds) {
  // 10x10 -> 3 x 3 = 9 tiles; 8x8 -> 2 x 2 = 4 tiles (F(2x2): 16 and 25 tiles, < 32).
  for (bool fast : {true, false}) {
    SCOPED_TRACE(fast ? "fast" : "accurate");
    ConvAlgorithmSet allowed;
    allowed.fastWinograd = fast;
    const std::string wino = fast ? "conv_wino" : "conv_wino2";
    auto at = [&](ConvShape s) { return name(chooseConvAlgorithm(s, Isa::Avx512, 1, allowed).algorithm); };
    EXPECT_EQ(at(square(64, 64, 10, 3)), wino);
    EXPECT_EQ(at(square(64, 64, 8, 3)).rfind("conv_wino", 0), std::string::npos);
    EXPECT_EQ(at(square(8, 64, 10, 3)), wino);
    EXPECT_EQ(at(square(7, 64, 10, 3)).rfind("conv_wino", 0), std::string::npos);
  }
}

// The error budget's rule (README, "Accuracy"): by default no F(4x4, 3x3) kernel, ever, and
// F(2x2) exactly where winograd=fast would take a Winograd kernel; winograd=0 none.
TEST(ConvPlan, DefaultWinogradIsF2x2Only) {
  int winogradShapes = 0, f4Shapes = 0;
  for (int64_t C : {3, 8, 16, 64, 128, 256, 512, 1024})
    for (int64_t O : {16, 64, 256, 512, 2048})
      for (int64_t H : {6, 7, 10, 13, 14, 27, 28, 55, 56, 112, 224})
        for (Isa isa : {Isa::Avx512, Isa::Avx2})
          for (unsigned threads : {1u, 2u, 4u}) {
            ConvShape s = square(C, O, H, 3);
            SCOPED_TRACE(std::to_string(C) + "->" + std::to_string(O) + " " + std::to_string(H) +
                         " threads " + std::to_string(threads));
            ConvPlan fast = chooseConvAlgorithm(s, isa, threads, kFast);
            ConvPlan accurate = chooseConvAlgorithm(s, isa, threads);
            ConvPlan off = chooseConvAlgorithm(s, isa, threads, {false, true});
            bool fastWino = fast.algorithm == ConvAlgorithm::Winograd ||
                            fast.algorithm == ConvAlgorithm::WinogradRows4 ||
                            fast.algorithm == ConvAlgorithm::WinogradRows2;
            winogradShapes += fastWino;
            f4Shapes += fast.algorithm != ConvAlgorithm::WinogradRows2 && fastWino;
            // F(2x2) also on 16-31 F(2x2) tiles (7x7 to 10x10) with O C >= 65536.
            int64_t tiles2 = ((H + 1) / 2) * ((H + 1) / 2);
            bool small = C >= 8 && tiles2 >= 16 && tiles2 < 32 && O * C >= 65536;
            if (fastWino || small) {
              EXPECT_EQ(name(accurate.algorithm), "conv_wino2");
              EXPECT_EQ(int(accurate.packing), int(WeightPacking::WinogradRows2x2));
            } else {
              EXPECT_EQ(name(accurate.algorithm), name(fast.algorithm));
            }
            EXPECT_EQ(name(accurate.algorithm) == "conv_wino2" ? name(off.algorithm)
                                                                : name(accurate.algorithm),
                      name(off.algorithm));
            EXPECT_EQ(name(off.algorithm).rfind("conv_wino", 0), std::string::npos);
          }
  // The grid covers both Winograd tile sizes.
  EXPECT_GT(f4Shapes, 100);
  EXPECT_GT(winogradShapes, f4Shapes);
}

// A forced algorithm (backend option conv-algorithm) is taken wherever its kernel can
// compute the shape, and nowhere else.
TEST(ConvPlan, ForcedAlgorithm) {
  ConvShape k3 = square(64, 64, 56, 3), strided = square(64, 64, 56, 3, 2);
  ConvShape dw = square(32, 32, 56, 3, 1, 32), grouped = square(64, 64, 28, 3, 1, 2);
  ConvShape varW = k3;
  varW.constantWeights = false;
  auto forced = [](ConvShape s, ConvAlgorithm a) {
    ConvAlgorithmSet allowed;
    allowed.force = a;
    return chooseConvAlgorithm(s, Isa::Avx512, 1, allowed);
  };
  // Winograd F(4x4) on a 3x3/1 layer: taken (with its packing) without winograd=fast.
  EXPECT_EQ(name(forced(k3, ConvAlgorithm::Winograd).algorithm), "conv_wino");
  EXPECT_EQ(int(forced(k3, ConvAlgorithm::Winograd).packing), int(WeightPacking::Winograd4x4));
  EXPECT_EQ(int(forced(k3, ConvAlgorithm::WinogradRows4).packing),
            int(WeightPacking::WinogradRows4x4));
  EXPECT_EQ(name(forced(k3, ConvAlgorithm::PackedGemm).algorithm), "conv");
  EXPECT_EQ(int(forced(k3, ConvAlgorithm::Transposed).packing),
            int(WeightPacking::GemmBTransposed));
  // Not applicable: the rules decide (strided 3x3: no Winograd; grouped: neither the
  // strip nor depthwise; weights at run time: neither the transposed GEMM nor Winograd,
  // and K = 576 takes the strip).
  EXPECT_EQ(name(forced(strided, ConvAlgorithm::Winograd).algorithm),
            name(chooseConvAlgorithm(strided, Isa::Avx512, 1).algorithm));
  EXPECT_EQ(name(forced(grouped, ConvAlgorithm::Strip).algorithm), "conv_grp");
  EXPECT_EQ(name(forced(grouped, ConvAlgorithm::Depthwise).algorithm), "conv_grp");
  EXPECT_EQ(name(forced(grouped, ConvAlgorithm::PackedGemm).algorithm), "conv");
  EXPECT_EQ(name(forced(dw, ConvAlgorithm::PackedGemm).algorithm), "conv");
  // The grouped kernel computes depthwise layers too; not group 1.
  EXPECT_EQ(name(forced(dw, ConvAlgorithm::Grouped).algorithm), "conv_grp");
  EXPECT_EQ(int(forced(dw, ConvAlgorithm::Grouped).packing), int(WeightPacking::GroupedTaps));
  EXPECT_EQ(name(forced(k3, ConvAlgorithm::Grouped).algorithm),
            name(chooseConvAlgorithm(k3, Isa::Avx512, 1).algorithm));
  EXPECT_EQ(name(forced(varW, ConvAlgorithm::Transposed).algorithm), "convS");
  EXPECT_EQ(name(forced(varW, ConvAlgorithm::WinogradRows2).algorithm), "convS");
  // The strip up to K = 9904 (48 K + 64 floats in the 475456-float AVX-512 GEMM scratch:
  // 384 x (1024 + 32) + 384 x (168 + 14) + 64): pointwise 28x28 with 9904 channels fits,
  // 9905 not (the rules then take the packed GEMM: K > 1152, and 784 pixels fill 784/800
  // of the panels); nor does the FCN head's 3x3 2048->512 28x28 (K = 18432: the rules
  // take F(2x2) there).
  EXPECT_EQ(name(forced(square(9904, 64, 28, 1), ConvAlgorithm::Strip).algorithm), "convS");
  EXPECT_EQ(name(forced(square(9905, 64, 28, 1), ConvAlgorithm::Strip).algorithm), "conv");
  EXPECT_EQ(name(forced(square(2048, 512, 28, 3), ConvAlgorithm::Strip).algorithm),
            "conv_wino2");
  // Names round-trip.
  for (ConvAlgorithm a : {ConvAlgorithm::Depthwise, ConvAlgorithm::Grouped,
                          ConvAlgorithm::WinogradRows2,
                          ConvAlgorithm::WinogradRows4, ConvAlgorithm::Winograd,
                          ConvAlgorithm::Transposed, ConvAlgorithm::Strip,
                          ConvAlgorithm::PackedGemm})
    EXPECT_EQ(int(*parseConvAlgorithmName(convAlgorithmName(a))), int(a));
  EXPECT_FALSE(parseConvAlgorithmName("winograd").has_value());
}

} // namespace
