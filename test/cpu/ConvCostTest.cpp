// The convolution cost model (codegen/ConvCost.h) against measured kernels: the table
// test/cpu/conv_times.tsv (test/cpu:conv_cost_bench, every applicable kernel forced on
// each layer, host and date in its header) gives per layer the time of each kernel; the
// kernel chooseConvAlgorithm picks must be within 10% of the measured best on at least 90%
// of the layers and never 1.5x the best or slower. A model with a wrong constant fails.
#include "backends/CPU/codegen/ConvCost.h"

#include <gtest/gtest.h>

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

} // namespace
