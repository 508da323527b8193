// The short deterministic run of the compiler fuzzer (README.md): a few hundred small
// generated graphs through the oracle. Every graph runs the Interpreter configurations
// and the CPU backend at one thread; every tenth graph runs every configuration.

#include "GraphGen.h"
#include "Oracle.h"

#include "kiln/Graph/TextIR.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::fuzz;

namespace {

constexpr unsigned kGraphs = 300;

TEST(CompilerFuzz, ShortDeterministicRun) {
  GenOptions gen;
  gen.maxNodes = 8;
  gen.maxDim = 12;
  gen.maxElements = 256;
  unsigned compared = 0, configs = 0;
  for (unsigned i = 0; i < kGraphs; i++) {
    uint64_t seed = 1000003ull * 7 + i;
    std::unique_ptr<Module> m = generateGraph(seed, gen);
    PrintOptions po;
    po.maxConstantElements = size_t(1) << 40;
    std::string text = printModule(*m, po);
    OracleOptions o;
    o.inputSeed = seed;
    if (i % 10 != 0)
      o.configFilter = i % 2 ? "interp" : "cpu-t1";
    GraphResult r = checkModule(text, o);
    EXPECT_TRUE(r.findings.empty()) << "graph seed " << seed << ":\n"
                                    << describeFindings(r) << text;
    compared += !r.rejected;
    configs += r.configsRun;
  }
  // The generator must keep producing graphs the reference runs.
  EXPECT_GT(compared, kGraphs / 2);
  std::cout << "compiler_fuzz short run: " << kGraphs << " graphs, " << compared
            << " compared, " << configs << " configurations run\n";
}

} // namespace
