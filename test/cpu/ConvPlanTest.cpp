// The CPU backend's choice of convolution kernel (codegen/Codegen.h): what follows from the
// kernels' applicability, the accuracy rule and forced kernels, whatever the cost model
// (codegen/ConvCost.h) estimates; its estimates against measured kernels are
// test/cpu:conv_cost_test's.
#include "backends/CPU/codegen/ConvCost.h"

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

// What follows from the kernels' applicability whatever the cost model estimates: a
// depthwise layer without a residual takes its own kernel, narrow groups the grouped
// kernel (the packed GEMM pads each group's few output channels to whole 14-row tiles),
// weights computed at run time neither Winograd nor the transposed GEMM (both need them
// transformed or packed at compile time), wide groups the packed GEMM (nothing else
// computes them). The choice among the group-1 kernels is the model's, checked against
// measurements by test/cpu:conv_cost_test.
TEST(ConvPlan, ApplicabilityDecides) {
  ConvShape dwAdd = square(32, 32, 56, 3, 1, 32);
  dwAdd.residualAdd = true;
  ConvShape varW = square(512, 512, 7, 3);
  varW.constantWeights = false;
  ConvShape varGrouped = square(160, 160, 14, 3, 1, 10);
  varGrouped.constantWeights = false;
  const Case cases[] = {
      {"depthwise 3x3/1 32 112x112", square(32, 32, 112, 3, 1, 32), Isa::Avx512, 1,
       ConvAlgorithm::Depthwise, WeightPacking::None},
      {"depthwise 3x3/2 on AVX2", square(96, 96, 112, 3, 2, 96), Isa::Avx2, 2,
       ConvAlgorithm::Depthwise, WeightPacking::None},
      {"depthwise 5x5/2 240 28x28", square(240, 240, 28, 5, 2, 240), Isa::Avx512, 1,
       ConvAlgorithm::Depthwise, WeightPacking::None},
      // With a residual add it is a grouped convolution of 1-channel groups.
      {"depthwise + residual add", dwAdd, Isa::Avx512, 1, ConvAlgorithm::Grouped,
       WeightPacking::GroupedTaps},
      // regnet_x_400mf's and resnext50_32x4d's grouped layers, on both instruction sets.
      {"grouped g2 32->32 112x112", square(32, 32, 112, 3, 2, 2), Isa::Avx512, 1,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      {"grouped g10 160->160 14x14", square(160, 160, 14, 3, 1, 10), Isa::Avx512, 2,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      {"grouped g25 400->400 7x7 AVX2", square(400, 400, 7, 3, 1, 25), Isa::Avx2, 1,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      {"grouped g32 1024->1024 7x7", square(1024, 1024, 14, 3, 2, 32), Isa::Avx512, 1,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      {"grouped g32 128->128 56x56", square(128, 128, 56, 3, 1, 32), Isa::Avx512, 1,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      {"depthwise multiplier 2", square(16, 32, 28, 3, 1, 16), Isa::Avx512, 1,
       ConvAlgorithm::Grouped, WeightPacking::GroupedTaps},
      // Wider groups (65+ channels on either side): only the packed GEMM, one per group.
      {"grouped g2 130->128", square(130, 128, 28, 3, 1, 2), Isa::Avx512, 1,
       ConvAlgorithm::PackedGemm, WeightPacking::GemmA},
      {"grouped g2 64->256", square(64, 256, 28, 3, 1, 2), Isa::Avx512, 1,
       ConvAlgorithm::PackedGemm, WeightPacking::GemmA},
      {"grouped weights at run time", varGrouped, Isa::Avx512, 1, ConvAlgorithm::PackedGemm,
       WeightPacking::GemmA},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    ConvPlan p = chooseConvAlgorithm(c.shape, c.isa, c.threads, c.allowed);
    EXPECT_EQ(name(p.algorithm), name(c.algorithm));
    EXPECT_EQ(int(p.packing), int(c.packing));
  }
  // A 3x3 512->512 7x7 layer (K = 4608) with its weights computed at run time, or with
  // Winograd and the transposed GEMM switched off: the strip or the packed GEMM.
  const ConvAlgorithmSet off = {false, false};
  for (Isa isa : {Isa::Avx512, Isa::Avx2}) {
    std::string a = name(chooseConvAlgorithm(varW, isa, 1).algorithm);
    std::string b = name(chooseConvAlgorithm(square(512, 512, 7, 3), isa, 1, off).algorithm);
    EXPECT_TRUE(a == "convS" || a == "conv") << a;
    EXPECT_TRUE(b == "convS" || b == "conv") << b;
  }
}

// The kernel each ConvPlan names comes with its weight layout.
TEST(ConvPlan, PackingFollowsTheAlgorithm) {
  const std::pair<ConvShape, ConvAlgorithmSet> shapes[] = {
      {square(64, 64, 56, 3), {}},          {square(64, 64, 56, 3), kFast},
      {square(512, 512, 7, 3), {}},         {square(256, 64, 56, 1), {}},
      {square(512, 2048, 7, 1), {}},        {square(3, 16, 32, 3), {}},
      {square(2048, 512, 28, 3), {}},       {square(64, 192, 27, 5), {}},
  };
  for (const auto &[s, allowed] : shapes)
    for (Isa isa : {Isa::Avx512, Isa::Avx2}) {
      ConvPlan p = chooseConvAlgorithm(s, isa, 1, allowed);
      WeightPacking want = WeightPacking::GemmA;
      switch (p.algorithm) {
      case ConvAlgorithm::Depthwise:
      case ConvAlgorithm::Strip:
        want = WeightPacking::None;
        break;
      case ConvAlgorithm::Grouped:
        want = WeightPacking::GroupedTaps;
        break;
      case ConvAlgorithm::WinogradRows2:
        want = WeightPacking::WinogradRows2x2;
        break;
      case ConvAlgorithm::WinogradRows4:
        want = WeightPacking::WinogradRows4x4;
        break;
      case ConvAlgorithm::Winograd:
        want = WeightPacking::Winograd4x4;
        break;
      case ConvAlgorithm::Transposed:
        want = WeightPacking::GemmBTransposed;
        break;
      case ConvAlgorithm::PackedGemm:
        break;
      }
      EXPECT_EQ(int(p.packing), int(want)) << name(p.algorithm);
    }
}

// The transposed GEMM needs the transposed result (pixels x O floats) in an 8 MB scratch.
TEST(ConvPlan, TransposedResultBoundedByScratch) {
  // 7x7 pixels; Winograd off. At O = 42799 the transposed GEMM is a candidate (whether
  // the model takes it is its estimate); at 42800 it is not.
  const ConvAlgorithmSet noWinograd = {false, true};
  ConvShape fits = square(512, 512, 7, 1), tooBig = fits;
  fits.O = 42799;   // 49 x 42799 x 4 = 8388604 bytes <= 8 MB
  tooBig.O = 42800; // 8388800 bytes
  auto has = [&](const ConvShape &s, ConvAlgorithm a) {
    for (const ConvCost &c : rankConvAlgorithms(s, Isa::Avx512, 1, noWinograd))
      if (c.algorithm == a)
        return true;
    return false;
  };
  EXPECT_TRUE(has(fits, ConvAlgorithm::Transposed));
  EXPECT_FALSE(has(tooBig, ConvAlgorithm::Transposed));
  EXPECT_NE(name(chooseConvAlgorithm(tooBig, Isa::Avx512, 1, noWinograd).algorithm), "convT");
}

// The error budget's rule (README, "Accuracy") on a grid of 3x3/1 layers (8 x 5 x 11
// shapes, both instruction sets, 1, 2 and 4 threads: 1320 choices): by default F(4x4,
// 3x3) only from kWino4MinChannels (512) input channels, where the default's pick is
// winograd=fast's; below, no F(4x4), and removing it from the candidates changes nothing
// where winograd=fast does not take it; winograd=0 takes no Winograd kernel, and changes
// nothing where the default takes none.
TEST(ConvPlan, DefaultWinogradF4x4OnlyFrom512Channels) {
  int f2Shapes = 0, f4Shapes = 0, f4Default = 0;
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
            bool fastF4 = fast.algorithm == ConvAlgorithm::Winograd ||
                          fast.algorithm == ConvAlgorithm::WinogradRows4;
            f4Shapes += fastF4;
            f2Shapes += accurate.algorithm == ConvAlgorithm::WinogradRows2;
            bool defaultF4 = accurate.algorithm == ConvAlgorithm::Winograd ||
                             accurate.algorithm == ConvAlgorithm::WinogradRows4;
            f4Default += defaultF4;
            if (C < 512) {
              EXPECT_FALSE(defaultF4);
              if (!fastF4) {
                EXPECT_EQ(name(accurate.algorithm), name(fast.algorithm));
              }
            } else {
              EXPECT_EQ(name(accurate.algorithm), name(fast.algorithm));
            }
            EXPECT_EQ(name(off.algorithm).rfind("conv_wino", 0), std::string::npos);
            if (accurate.algorithm != ConvAlgorithm::WinogradRows2 && !defaultF4) {
              EXPECT_EQ(name(off.algorithm), name(accurate.algorithm));
            }
          }
  // The grid covers both Winograd tile sizes, and F(4x4) by default.
  EXPECT_GT(f4Shapes, 100);
  EXPECT_GT(f2Shapes, 100);
  EXPECT_GT(f4Default, 20);
}

/// \p s dilated by \p d with pads \p pad (stride 1), its output size recomputed.
ConvShape dilated(ConvShape s, int64_t d, int64_t pad) {
  s.DH = s.DW = d, s.PT = s.PL = pad;
  s.OH = s.H + 2 * pad - d * (s.KH - 1), s.OW = s.W + 2 * pad - d * (s.KW - 1);
  return s;
}

// A stride-1 dilated layer as its phases (hand-computed): fcn_resnet50's 3x3 dilation 4
// pad 4 on 28x28 is 16 images of 7x7 with pad 1; dilation 3 pad 2 on 11x10 (pads not a
// multiple of the dilation, sizes not divisible by it) is 9 images of ceil((11 + 2) / 3) =
// 5 x ceil(12 / 3) = 4 with pad 0, ceil(11 / 3) = 4 x ceil(10 / 3) = 4 outputs each; a
// dilation along one axis only splits that axis. Not split: strided, residual, undilated,
// dilation past kMaxPhaseDilation.
TEST(ConvPlan, DilationPhasesShape) {
  ConvShape fcn = dilated(square(512, 512, 28, 3), 4, 4);
  std::optional<ConvPhases> p = dilationPhases(fcn);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->shape.N, 16);
  EXPECT_EQ(p->shape.H, 7);
  EXPECT_EQ(p->shape.W, 7);
  EXPECT_EQ(p->shape.OH, 7);
  EXPECT_EQ(p->shape.PT, 1);
  EXPECT_EQ(p->eH, 0);
  EXPECT_EQ(p->shape.DH, 1);
  ConvShape odd = square(8, 8, 11, 3);
  odd.W = 10;
  odd = dilated(odd, 3, 2);
  ASSERT_EQ(odd.OH, 9);
  ASSERT_EQ(odd.OW, 8);
  p = dilationPhases(odd);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->shape.N, 9);
  EXPECT_EQ(p->eH, 2);
  EXPECT_EQ(p->eW, 2);
  EXPECT_EQ(p->shape.H, 5);
  EXPECT_EQ(p->shape.W, 4);
  EXPECT_EQ(p->shape.OH, 3);
  EXPECT_EQ(p->shape.OW, 3);
  EXPECT_EQ(p->shape.PT, 0);
  ConvShape rows = square(8, 8, 12, 3);
  rows.DH = 2, rows.PT = 2, rows.OH = 12;
  p = dilationPhases(rows);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->shape.N, 2);
  EXPECT_EQ(p->shape.H, 6);
  EXPECT_EQ(p->shape.W, 12);
  EXPECT_EQ(p->DW, 1);
  ConvShape strided = dilated(square(8, 8, 12, 3, 2), 2, 2), added = fcn;
  strided.OH = strided.OW = 6;
  added.residualAdd = true;
  EXPECT_FALSE(dilationPhases(strided).has_value());
  EXPECT_FALSE(dilationPhases(added).has_value());
  EXPECT_FALSE(dilationPhases(square(8, 8, 12, 3)).has_value());
  EXPECT_FALSE(dilationPhases(dilated(square(8, 8, 40, 3), 12, 12)).has_value());
}

// Where the model takes the phases: fcn_resnet50's dilated 3x3 layers (2 and 4; 256 and
// 512 channels on 28x28) become Winograd over their phases on both instruction sets, which
// no undilated-only kernel could compute (F(2x2) at 256 channels; at 512, F(4x4) is a
// default candidate too); a forced Winograd kernel takes the phases too.
// DeepLabV3's dilated depthwise layers keep the depthwise kernel (it computes the dilation
// itself; the split would only add copies).
TEST(ConvPlan, DilatedLayersTakeThePhases) {
  for (Isa isa : {Isa::Avx512, Isa::Avx2})
    for (unsigned threads : {1u, 2u})
      for (auto [c, d] : {std::pair<int64_t, int64_t>{256, 2}, {512, 4}}) {
        SCOPED_TRACE(std::to_string(c) + " d" + std::to_string(d) + " threads " +
                     std::to_string(threads));
        ConvPlan p = chooseConvAlgorithm(dilated(square(c, c, 28, 3), d, d), isa, threads);
        ASSERT_TRUE(p.phases);
        // The plan carries the phases it was chosen over: d*d images of 28/d rows.
        EXPECT_EQ(p.phases->shape.N, d * d);
        EXPECT_EQ(p.phases->shape.H, 28 / d);
        EXPECT_EQ(p.phases->shape.DH, 1);
        if (c < kWino4MinChannels) {
          EXPECT_EQ(name(p.algorithm), "conv_wino2");
          EXPECT_EQ(int(p.packing), int(WeightPacking::WinogradRows2x2));
        } else {
          EXPECT_EQ(name(p.algorithm).rfind("conv_wino", 0), 0u) << name(p.algorithm);
        }
      }
  ConvAlgorithmSet f2;
  f2.force = ConvAlgorithm::WinogradRows2;
  ConvPlan forced = chooseConvAlgorithm(dilated(square(64, 32, 15, 3), 3, 2), Isa::Avx512, 1, f2);
  ASSERT_TRUE(forced.phases);
  EXPECT_EQ(forced.phases->shape.N, 9); // dilation 3 by 3
  EXPECT_EQ(name(forced.algorithm), "conv_wino2");
  ConvPlan dw = chooseConvAlgorithm(dilated(square(960, 960, 14, 5, 1, 960), 2, 4), Isa::Avx512, 1);
  EXPECT_FALSE(dw.phases);
  EXPECT_EQ(name(dw.algorithm), "conv_dw");
  ConvAlgorithmSet noWinograd;
  noWinograd.winograd = false;
  EXPECT_FALSE(chooseConvAlgorithm(dilated(square(256, 256, 28, 3), 2, 2), Isa::Avx512, 1,
                                   noWinograd).phases);
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
  // Not applicable (strided 3x3: no Winograd; grouped: neither the strip nor depthwise;
  // weights at run time: neither the transposed GEMM nor Winograd; the strip past
  // K = 9904): the model decides, as without the option.
  auto unforced = [](ConvShape s) { return name(chooseConvAlgorithm(s, Isa::Avx512, 1).algorithm); };
  EXPECT_EQ(name(forced(strided, ConvAlgorithm::Winograd).algorithm), unforced(strided));
  EXPECT_EQ(name(forced(grouped, ConvAlgorithm::Strip).algorithm), "conv_grp");
  EXPECT_EQ(name(forced(grouped, ConvAlgorithm::Depthwise).algorithm), "conv_grp");
  EXPECT_EQ(name(forced(grouped, ConvAlgorithm::PackedGemm).algorithm), "conv");
  EXPECT_EQ(name(forced(dw, ConvAlgorithm::PackedGemm).algorithm), "conv");
  // The grouped kernel computes depthwise layers too; not group 1.
  EXPECT_EQ(name(forced(dw, ConvAlgorithm::Grouped).algorithm), "conv_grp");
  EXPECT_EQ(int(forced(dw, ConvAlgorithm::Grouped).packing), int(WeightPacking::GroupedTaps));
  EXPECT_EQ(name(forced(k3, ConvAlgorithm::Grouped).algorithm), unforced(k3));
  EXPECT_EQ(name(forced(varW, ConvAlgorithm::Transposed).algorithm), unforced(varW));
  EXPECT_EQ(name(forced(varW, ConvAlgorithm::WinogradRows2).algorithm), unforced(varW));
  EXPECT_TRUE(unforced(varW) == "convS" || unforced(varW) == "conv") << unforced(varW);
  // The strip up to K = 9904 (48 K + 64 floats in the 475456-float AVX-512 GEMM scratch:
  // 384 x (1024 + 32) + 384 x (168 + 14) + 64): pointwise 28x28 with 9904 channels fits,
  // 9905 not; nor does the FCN head's 3x3 2048->512 28x28 (K = 18432).
  ConvShape wide = square(9905, 64, 28, 1), fcnHead = square(2048, 512, 28, 3);
  EXPECT_EQ(name(forced(square(9904, 64, 28, 1), ConvAlgorithm::Strip).algorithm), "convS");
  EXPECT_EQ(name(forced(wide, ConvAlgorithm::Strip).algorithm), unforced(wide));
  EXPECT_NE(unforced(wide), "convS");
  EXPECT_EQ(name(forced(fcnHead, ConvAlgorithm::Strip).algorithm), unforced(fcnHead));
  EXPECT_NE(unforced(fcnHead), "convS");
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
