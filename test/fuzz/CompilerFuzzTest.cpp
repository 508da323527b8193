// The short deterministic run of the compiler fuzzer (README.md): a few hundred small
// generated graphs through the oracle. Every graph runs the Interpreter configurations
// and the CPU backend at one thread; every tenth graph runs every configuration.

#include "GraphGen.h"
#include "Oracle.h"
#include "Reducer.h"

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

// The reducer on a predicate of its own (no compiler bug needed): "the module still has a
// Tanh" must shrink a graph of 8-12 operators to the Tanh alone and one output.
TEST(CompilerFuzz, ReducerShrinksToTheFailingNode) {
  GenOptions gen;
  gen.minNodes = 8;
  gen.maxNodes = 12;
  gen.kinds = {"Tanh", "Add", "Mul", "Relu", "Concat", "Reshape", "Transpose"};
  std::string text;
  for (uint64_t seed = 1; seed < 100 && text.find("= Tanh(") == std::string::npos; seed++) {
    PrintOptions po;
    po.maxConstantElements = size_t(1) << 40;
    text = printModule(*generateGraph(seed, gen), po);
  }
  ASSERT_NE(text.find("= Tanh("), std::string::npos);
  auto count = [](const std::string &t, const std::string &what) {
    size_t n = 0;
    for (size_t p = t.find(what); p != std::string::npos; p = t.find(what, p + 1))
      n++;
    return n;
  };
  ASSERT_GE(count(text, "\n  %"), 8u);
  std::string reduced = reduceModule(
      text, [](const std::string &t) { return t.find("= Tanh(") != std::string::npos; });
  EXPECT_EQ(count(reduced, "\n  %") - count(reduced, "= Save("), 1u) << reduced;
  EXPECT_EQ(count(reduced, "Save("), 1u) << reduced;
  Expected<std::unique_ptr<Module>> m = parseModule(reduced);
  EXPECT_TRUE(bool(m)) << reduced;
}

} // namespace
