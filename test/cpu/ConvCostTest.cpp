// The convolution cost model (codegen/ConvCost.h) against measured kernels: the table
// test/cpu/conv_times.tsv (test/cpu:conv_cost_bench, every applicable kernel forced on
// each layer, host and date in its header) gives per layer the time of each kernel; the
// kernel chooseConvAlgorithm picks must be within 10% of the measured best on at least 90%
// of the layers and never 1.5x the best or slower. A model with a wrong constant fails.
#include "backends/CPU/codegen/ConvCost.h"
#include "backends/CPU/libjit/libjit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace kiln::cpu;

/// One measured layer: its shape, ISA and threads, and the best time of each kernel.
struct Measured {
  std::string name;
  ConvShape shape;
  Isa isa = Isa::Avx512;
  unsigned threads = 1;
  std::map<std::string, double> ms; ///< kernel profile name -> min ms
};

std::vector<Measured> readTable(const std::string &path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  std::vector<Measured> rows;
  std::map<std::string, size_t> index;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    std::stringstream ss(line);
    std::string name, isa, kernel;
    int64_t v[14];
    unsigned threads;
    double minMs, medMs;
    ss >> name;
    for (int64_t &x : v)
      ss >> x;
    ss >> isa >> threads >> kernel >> minMs >> medMs;
    EXPECT_FALSE(ss.fail()) << "bad line: " << line;
    if (ss.fail())
      continue;
    int64_t dilation = 1; // an optional last column
    if (!(ss >> dilation))
      dilation = 1;
    std::string key = name + "/" + isa + "/" + std::to_string(threads);
    auto it = index.find(key);
    if (it == index.end()) {
      Measured m;
      m.name = key;
      ConvShape &s = m.shape;
      s.N = v[0], s.C = v[1], s.H = v[2], s.W = v[3], s.O = v[4], s.OH = v[5], s.OW = v[6];
      s.KH = v[7], s.KW = v[8], s.SH = v[9], s.SW = v[10], s.PT = v[11], s.PL = v[12];
      s.group = v[13];
      s.DH = s.DW = dilation;
      m.isa = isa == "avx2" ? Isa::Avx2 : Isa::Avx512;
      m.threads = threads;
      it = index.emplace(key, rows.size()).first;
      rows.push_back(m);
    }
    rows[it->second].ms[kernel] = minMs;
  }
  return rows;
}

const std::vector<Measured> &table() {
  static const std::vector<Measured> t = readTable("test/cpu/conv_times.tsv");
  return t;
}

struct Agreement {
  int layers = 0;
  int within10 = 0;     ///< the pick within 10% of the measured best
  double worst = 1;     ///< the largest ratio pick / best
  std::string worstName;
  int unmeasured = 0;   ///< picks the table has no time for
};

Agreement agree(const ConvKernelTerms &terms, bool print) {
  Agreement a;
  for (const Measured &m : table()) {
    std::vector<ConvCost> ranked = rankConvAlgorithms(m.shape, m.isa, m.threads, {}, terms);
    if (ranked.empty())
      continue;
    std::string pick = convAlgorithmName(ranked.front().algorithm);
    std::string best;
    double bestMs = 1e30;
    for (auto &[k, ms] : m.ms)
      if (ms < bestMs)
        bestMs = ms, best = k;
    a.layers++;
    auto it = m.ms.find(pick);
    if (it == m.ms.end()) {
      a.unmeasured++;
      ADD_FAILURE() << m.name << ": the model picks " << pick << ", not measured";
      continue;
    }
    double ratio = it->second / bestMs;
    a.within10 += ratio <= 1.10;
    if (ratio > a.worst)
      a.worst = ratio, a.worstName = m.name + " (" + pick + " against " + best + ")";
    if (print) {
      std::string est;
      for (const ConvCost &c : ranked) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " %s=%.3f/%.3f", convAlgorithmName(c.algorithm),
                      c.seconds * 1e3,
                      m.ms.count(convAlgorithmName(c.algorithm))
                          ? m.ms.at(convAlgorithmName(c.algorithm))
                          : -1.0);
        est += buf;
      }
      std::printf("%-34s pick %-10s best %-10s %5.2f |%s\n", m.name.c_str(), pick.c_str(),
                  best.c_str(), ratio, est.c_str());
    }
  }
  return a;
}

bool passes(const Agreement &a) {
  return a.layers > 0 && a.unmeasured == 0 && a.within10 >= 0.9 * a.layers && a.worst < 1.5;
}

// The table covers what the issue asks: at least 40 layers, with a choice to make.
TEST(ConvCost, TableCoversTheLayers) {
  int choices = 0;
  for (const Measured &m : table())
    choices += m.ms.size() >= 2;
  EXPECT_GE(table().size(), 40u);
  EXPECT_GE(choices, 40);
}

// The default model's picks against the measurements.
TEST(ConvCost, RanksLikeTheMeasurements) {
  Agreement a = agree(defaultConvKernelTerms(), true);
  std::printf("%d layers: the pick within 10%% of the best on %d (%.0f%%); worst %.2fx: %s\n",
              a.layers, a.within10, 100.0 * a.within10 / std::max(a.layers, 1), a.worst,
              a.worstName.c_str());
  EXPECT_EQ(a.unmeasured, 0);
  EXPECT_GE(a.within10, 0.9 * a.layers);
  EXPECT_LT(a.worst, 1.5) << a.worstName;
}

// chooseConvAlgorithm takes the model's first candidate: of the layer, or of its dilation
// phases where their estimate plus the split and merge is below the layer's best.
TEST(ConvCost, ChooserTakesTheModelsPick) {
  for (const Measured &m : table()) {
    SCOPED_TRACE(m.name);
    ConvPlan p = chooseConvAlgorithm(m.shape, m.isa, m.threads);
    ConvCost whole = rankConvAlgorithms(m.shape, m.isa, m.threads, {}).front();
    std::optional<ConvPhases> ph = dilationPhases(m.shape);
    if (!p.phases) {
      EXPECT_EQ(int(p.algorithm), int(whole.algorithm));
      if (ph) {
        EXPECT_GE(rankConvAlgorithms(ph->shape, m.isa, m.threads, {}).front().seconds +
                      dilationPhaseCopySeconds(m.shape, *ph, m.threads, {}),
                  whole.seconds);
      }
      continue;
    }
    ASSERT_TRUE(ph.has_value());
    EXPECT_EQ(p.phases->shape.N, ph->shape.N);
    ConvCost split = rankConvAlgorithms(ph->shape, m.isa, m.threads, {}).front();
    EXPECT_EQ(int(p.algorithm), int(split.algorithm));
    EXPECT_LT(split.seconds + dilationPhaseCopySeconds(m.shape, *ph, m.threads, {}),
              whole.seconds);
  }
}

// The check can fail: models with one constant wrong disagree with the measurements.
TEST(ConvCost, WrongConstantsFail) {
  ConvKernelTerms slowWinograd = defaultConvKernelTerms();
  slowWinograd.winogradEff = 0.3;
  EXPECT_FALSE(passes(agree(slowWinograd, false)));
  ConvKernelTerms freeCopies = defaultConvKernelTerms();
  freeCopies.copyCost = 0, freeCopies.transposeCost = 0;
  EXPECT_FALSE(passes(agree(freeCopies, false)));
  ConvKernelTerms fastStrip = defaultConvKernelTerms();
  fastStrip.stripEff = 3;
  EXPECT_FALSE(passes(agree(fastStrip, false)));
}

// More threads or a slower memory never make an estimate faster than one core alone
// would make it; each estimate is positive.
TEST(ConvCost, EstimatesAreMonotone) {
  for (const Measured &m : table())
    for (const ConvCost &c : rankConvAlgorithms(m.shape, m.isa, 1, {})) {
      SCOPED_TRACE(m.name + " " + convAlgorithmName(c.algorithm));
      EXPECT_GT(c.seconds, 0);
      ConvMachine slow;
      slow.memoryGBs /= 4;
      EXPECT_LE(estimateConvCost(c.algorithm, m.shape, m.isa, 2, {}).seconds, c.seconds);
      EXPECT_GE(estimateConvCost(c.algorithm, m.shape, m.isa, 1, slow).seconds, c.seconds);
    }
}

// The machine limits come with the allowed set (CodegenOptions::convMachine): resnet50's
// 3x3 512->512 7x7 layer takes F(2x2) by default, whose transformed weights are 16/9 of the
// filter's; on a machine whose memory is 100x slower the model takes a kernel that reads
// the filter as it is or packed once.
TEST(ConvCost, MachineLimitsDecide) {
  ConvShape s;
  s.C = s.O = 512, s.H = s.W = s.OH = s.OW = 7, s.KH = s.KW = 3, s.PT = s.PL = 1;
  EXPECT_EQ(int(chooseConvAlgorithm(s, Isa::Avx512, 1).algorithm),
            int(ConvAlgorithm::WinogradRows2));
  ConvAlgorithmSet slowMemory;
  slowMemory.machine.memoryGBs /= 100;
  ConvAlgorithm a = chooseConvAlgorithm(s, Isa::Avx512, 1, slowMemory).algorithm;
  EXPECT_NE(int(a), int(ConvAlgorithm::WinogradRows2)) << convAlgorithmName(a);
  // A 100x slower core instead: the model takes the kernel with the fewest flops.
  ConvAlgorithmSet slowCore;
  slowCore.machine.peakGflops /= 100, slowCore.machine.cacheGBs /= 100;
  EXPECT_EQ(int(chooseConvAlgorithm(s, Isa::Avx512, 1, slowCore).algorithm),
            int(ConvAlgorithm::WinogradRows2));
}

/// A 3x3 stride-1 "same" convolution of N images of C x HW x HW into O channels.
ConvShape same3x3(int64_t N, int64_t C, int64_t HW, int64_t O) {
  ConvShape s;
  s.N = N, s.C = C, s.O = O, s.H = s.W = s.OH = s.OW = HW, s.KH = s.KW = 3, s.PT = s.PL = 1;
  return s;
}

// A candidate's held bytes are its layout's beyond the filter's. At one thread the first
// candidate is the one with the least estimate plus heldBytePrice per held byte past
// heldBytesFree; at any thread count, those holding more such bytes than it come after the
// others (marked as not paying), and the others keep their order by estimate.
TEST(ConvCost, HeldBytesAreWeighedAtOneThread) {
  const ConvKernelTerms &t = defaultConvKernelTerms();
  for (ConvShape s : {same3x3(1, 512, 14, 512), same3x3(1, 512, 7, 512)}) {
    const double filter = 4.0 * double(s.O * s.C * 9);
    auto charged = [&](const ConvCost &c) {
      return std::max(0.0, c.memoryBytes - filter - t.heldBytesFree);
    };
    std::vector<ConvCost> one = rankConvAlgorithms(s, Isa::Avx512, 1, {});
    const ConvCost *best = nullptr;
    for (const ConvCost &c : one) {
      EXPECT_DOUBLE_EQ(c.heldBytes, std::max(0.0, c.memoryBytes - filter));
      if (!best || c.seconds + charged(c) * t.heldBytePrice <
                       best->seconds + charged(*best) * t.heldBytePrice)
        best = &c;
    }
    EXPECT_EQ(int(one.front().algorithm), int(best->algorithm));
    for (unsigned threads : {1u, 2u}) {
      SCOPED_TRACE("OH " + std::to_string(s.OH) + " threads " + std::to_string(threads));
      std::vector<ConvCost> r = rankConvAlgorithms(s, Isa::Avx512, threads, {});
      const ConvCost *fastest = &r.front();
      for (size_t i = 0; i < r.size(); i++) {
        EXPECT_EQ(r[i].paysForHeldBytes, charged(r[i]) <= charged(*best));
        if (r[i].seconds < fastest->seconds)
          fastest = &r[i];
        if (i > 0 && r[i].paysForHeldBytes == r[i - 1].paysForHeldBytes)
          EXPECT_LE(r[i - 1].seconds, r[i].seconds);
        if (i > 0)
          EXPECT_FALSE(r[i].paysForHeldBytes && !r[i - 1].paysForHeldBytes);
      }
      // At one thread the fastest estimate at 14x14 (F(4x4)) does not pay for its bytes;
      // at 7x7 the fastest (F(2x2)) does.
      if (threads == 1)
        EXPECT_EQ(fastest->paysForHeldBytes, s.OH == 7);
    }
  }
}

// Which transformed layouts pay for their bytes, as measured on the Zen 5 host (kiln-run
// profile=1 per-stage minima, 1 thread; README, "Start-up and memory of the video and wide
// networks"): at 14x14 with 512 channels F(4x4) gained 0.003-0.007 ms per run per MB it
// holds beyond F(2x2)'s (wide_resnet50_2, vgg), so F(2x2) is taken there; F(2x2) on one
// 7x7 image gained 0.03-0.05 ms per MB over the transposed GEMM (r3d_18, r2plus1d_18,
// wide_resnet50_2) and fcn_resnet50's F(4x4) head 0.11 ms per MB over F(2x2), so those
// keep their layouts; a layer whose extra bytes are under the free MiB keeps the model's
// pick (googlenet's 3x3 16->32 28x28: F(2x2), 0.030 ms against the strip's 0.038). Without
// the charge the model takes F(4x4) at 14x14 (the test can fail), and a charge 10 times
// larger gives up F(2x2) on the 7x7 layers too.
TEST(ConvCost, HeldBytesDecideOnlyWhereTheGainIsSmall) {
  struct Case {
    ConvShape s;
    ConvAlgorithm pick;
    const char *what;
  } cases[] = {
      {same3x3(1, 512, 14, 512), ConvAlgorithm::WinogradRows2, "wide_resnet50_2/vgg 512 14x14"},
      {same3x3(1, 2048, 28, 512), ConvAlgorithm::WinogradRows4, "fcn_resnet50 head"},
      {same3x3(1, 512, 7, 512), ConvAlgorithm::WinogradRows2, "r3d_18/resnet50 512 7x7"},
      {same3x3(1, 512, 7, 1152), ConvAlgorithm::WinogradRows2, "r2plus1d_18 512->1152 7x7"},
      {same3x3(1, 1024, 7, 1024), ConvAlgorithm::WinogradRows2, "wide_resnet50_2 1024 7x7"},
      {same3x3(1, 16, 28, 32), ConvAlgorithm::WinogradRows2, "googlenet 16->32 28x28"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_STREQ(convAlgorithmName(chooseConvAlgorithm(c.s, Isa::Avx512, 1).algorithm),
                 convAlgorithmName(c.pick));
  }
  // At two threads the 7x7 layers keep F(2x2) too (the charge is weighed at one thread;
  // resnet18 at 2 threads measured 10% slower with them on the transposed GEMM).
  for (int i : {2, 3, 4}) {
    SCOPED_TRACE(cases[i].what);
    EXPECT_STREQ(convAlgorithmName(chooseConvAlgorithm(cases[i].s, Isa::Avx512, 2).algorithm),
                 "conv_wino2");
  }
  ConvKernelTerms noCharge = defaultConvKernelTerms();
  noCharge.heldBytePrice = 0;
  EXPECT_STREQ(convAlgorithmName(
                   rankConvAlgorithms(cases[0].s, Isa::Avx512, 1, {}, noCharge).front().algorithm),
               "conv_wino");
  ConvKernelTerms dear = defaultConvKernelTerms();
  dear.heldBytePrice *= 10;
  EXPECT_STREQ(
      convAlgorithmName(rankConvAlgorithms(cases[2].s, Isa::Avx512, 1, {}, dear).front().algorithm),
      "convT");
}

// The grouped kernel's lanes path: the cost model estimates it exactly where the kernel
// takes it (both ask libjit::groupedLanesPath). Hand-listed shapes with the path the rule
// documented in libjit.h gives them, then a grid: on AVX-512 the estimate's issued flops
// are the lanes path's (every lane an output, 14 x 1 or 7 x 2 tiles) where the kernel's
// predicate holds and the cell tiles' (8 channels x 2 vectors of cells) elsewhere; on AVX2
// always the cell tiles' (4 x 2 vectors of 8).
struct GroupedCase {
  int64_t C, G, H, KW, S, DW, P;
};

ConvShape groupedShape(const GroupedCase &k) {
  ConvShape s;
  s.C = s.O = k.C, s.group = k.G, s.H = s.W = k.H, s.KH = 3, s.KW = k.KW, s.SH = s.SW = k.S;
  s.DW = k.DW, s.PT = s.PL = k.P;
  s.OH = (k.H + 2 * k.P - 3) / k.S + 1;
  s.OW = (k.H + 2 * k.P - k.DW * (k.KW - 1) - 1) / k.S + 1;
  return s;
}

double groupedLanesFlops(const ConvShape &s) {
  const int64_t K = s.C / s.group * s.KH * s.KW;
  const int64_t RW = s.OW >= 14 ? 14 : 7, rows = s.OW >= 14 ? s.OH : (s.OH + 1) / 2 * 2;
  return 2.0 * double(s.O * K) * double(rows * ((s.OW + RW - 1) / RW * RW));
}

double groupedCellFlops(const ConvShape &s, int64_t MR, int64_t VW) {
  const int64_t Og = s.O / s.group, K = s.C / s.group * s.KH * s.KW, P = s.OH * s.OW;
  return 2.0 * double(s.group) * double((Og + MR - 1) / MR * MR) *
         double((P + 2 * VW - 1) / (2 * VW) * 2 * VW) * double(K);
}

TEST(ConvCost, GroupedLanesWhereTheKernelTakesThem) {
  struct Listed {
    GroupedCase k;
    bool lanes;
    const char *what;
  } listed[] = {
      {{400, 25, 7, 3, 1, 1, 1}, true, "regnet_x 3x3/1 400 7x7 g25"},
      {{160, 10, 14, 3, 1, 1, 1}, true, "regnet_x 3x3/1 160 14x14 g10"},
      {{64, 4, 28, 3, 1, 1, 1}, true, "16 per group, rows of 28, kernel rows of 3"},
      {{64, 4, 56, 3, 1, 1, 1}, false, "16 per group, rows of 56"},
      {{32, 2, 28, 5, 1, 1, 2}, false, "16 per group, rows of 28, 5-tap kernel rows"},
      {{32, 2, 14, 5, 1, 1, 2}, true, "16 per group, rows of 14, 5-tap kernel rows"},
      {{32, 2, 24, 3, 1, 2, 2}, false, "16 per group, rows of 24, dilated kernel rows"},
      {{32, 2, 112, 3, 2, 1, 1}, true, "regnet_x 3x3/2 32 112x112 g2"},
      {{64, 2, 56, 3, 1, 1, 1}, true, "32 per group, rows of 56"},
      {{128, 32, 56, 3, 1, 1, 1}, false, "resnext50 4 per group"},
      {{256, 32, 28, 3, 1, 1, 1}, false, "resnext50 8 per group"},
      {{32, 2, 30, 3, 3, 1, 1}, false, "column stride 3"},
      {{32, 2, 6, 3, 1, 1, 0}, false, "rows of 4"},
  };
  for (const Listed &l : listed) {
    SCOPED_TRACE(l.what);
    ConvShape s = groupedShape(l.k);
    EXPECT_EQ(libjit::groupedLanesPath(16, s.O / s.group, s.OW, s.KW, s.SW, s.DW, s.PT, s.PL),
              l.lanes);
    EXPECT_EQ(estimateConvCost(ConvAlgorithm::Grouped, s, Isa::Avx512, 1, {}).flops,
              l.lanes ? groupedLanesFlops(s) : groupedCellFlops(s, 8, 16));
  }
  int lanes = 0, cells = 0;
  for (int64_t Og : {4, 8, 16, 24, 32})
    for (int64_t H : {5, 7, 9, 14, 16, 17, 28, 29, 30, 56})
      for (int64_t KW : {1, 3, 5})
        for (int64_t S : {1, 2, 3})
          for (int64_t DW : {1, 2})
            for (int64_t P : {-1, 0, 1}) {
              ConvShape s = groupedShape({2 * Og, 2, H, KW, S, DW, P});
              if (s.OW < 1 || s.OH < 1)
                continue;
              SCOPED_TRACE("Og " + std::to_string(Og) + " OW " + std::to_string(s.OW) + " KW " +
                           std::to_string(KW) + " S " + std::to_string(S) + " DW " +
                           std::to_string(DW) + " P " + std::to_string(P));
              bool kernel = libjit::groupedLanesPath(16, Og, s.OW, KW, S, DW, P, P);
              (kernel ? lanes : cells)++;
              EXPECT_EQ(estimateConvCost(ConvAlgorithm::Grouped, s, Isa::Avx512, 1, {}).flops,
                        kernel ? groupedLanesFlops(s) : groupedCellFlops(s, 8, 16));
              EXPECT_EQ(estimateConvCost(ConvAlgorithm::Grouped, s, Isa::Avx2, 1, {}).flops,
                        groupedCellFlops(s, 4, 8));
            }
  EXPECT_GT(lanes, 50);
  EXPECT_GT(cells, 50);
}

} // namespace
