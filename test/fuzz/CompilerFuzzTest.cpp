// The short deterministic run of the compiler fuzzer (README.md): a few hundred small
// generated graphs through the oracle. Every graph runs the Interpreter configurations
// or the CPU backend at one thread; every tenth graph runs every configuration (every
// twentieth one bundle configuration of the three in turn, the other tenth graphs none).

#include "BundleRun.h"
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
    // Every tenth graph: every configuration, but one bundle configuration at most (a host
    // compile and link each): every twentieth graph runs bundle, bundle-t2 and bundle-v3
    // in turn, the others none.
    const std::vector<std::string> bundles = {"bundle", "bundle-t2", "bundle-v3"};
    for (size_t b = 0; b < bundles.size(); b++)
      if (i % 20 != 0 || b != (i / 20) % bundles.size())
        o.skipConfigs.push_back(bundles[b]);
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

// What a bundle can differ in from the JIT, each checked against the Interpreter by the
// three bundle configurations: inputs and outputs of every element kind at their offsets
// in the mutable region, outputs that are an input or a constant directly, 1-element
// tensors, a graph without inputs (only constants), the weights file and the embedded
// weights (bundle-t2).
TEST(CompilerFuzz, BundleConfigurationsOnEdgeCases) {
  const std::vector<std::pair<std::string, std::string>> modules = {
      {"every element kind in and out",
       R"(placeholder @f : float<2x3>
placeholder @h : float16<3>
placeholder @bf : bfloat16<2x2>
placeholder @q : i8q<5:0.5:3>
placeholder @i : i32<1>
placeholder @l : i64<2x2>
placeholder @b : bool<7>
placeholder @of : float<2x3>
placeholder @oh : float16<3>
placeholder @obf : bfloat16<2x2>
placeholder @oq : i8q<5:0.5:3>
placeholder @oi : i32<1>
placeholder @ol : i64<2x2>
placeholder @ob : bool<7>
placeholder @orelu : float<2x3>

function main {
  Save(@f, @of)
  Save(@h, @oh)
  Save(@bf, @obf)
  Save(@q, @oq)
  Save(@i, @oi)
  Save(@l, @ol)
  Save(@b, @ob)
  %r = Relu(@f) : float<2x3>
  Save(%r, @orelu)
}
)"},
      {"no inputs: outputs from constants, one a constant directly",
       R"(placeholder @o1 : float<1>
placeholder @o2 : float<2x3>
placeholder @o3 : i64<2>
constant @c : float<2x3> = [1, -2, 3, -4, 5, -6]
constant @k : i64<2> = [7, -9]
constant @one : float<1> = [-0.5]

function main {
  %n = Neg(@one) : float<1>
  Save(%n, @o1)
  Save(@c, @o2)
  Save(@k, @o3)
}
)"},
      {"an output in the middle of the graph and a 1-element input",
       R"(placeholder @x : float<1x1>
placeholder @y : float<4x3>
placeholder @mid : float<4x3>
placeholder @out : float<4x3>

function main {
  %b = Broadcast(@x) {TargetDims=[4,3]} : float<4x3>
  %a = Add(%b, @y) : float<4x3>
  Save(%a, @mid)
  %t = Tanh(%a) : float<4x3>
  Save(%t, @out)
}
)"},
  };
  const bool haveCC = !findCCompiler().empty() && !findRunBundleSource().empty();
  for (const auto &[what, text] : modules) {
    OracleOptions o;
    o.configFilter = "bundle";
    GraphResult r = checkModule(text, o);
    ASSERT_FALSE(r.rejected) << what << ": " << r.rejectReason;
    EXPECT_TRUE(r.findings.empty()) << what << ":\n" << describeFindings(r);
    std::string skips;
    for (const auto &[why, n] : r.skipped)
      skips += why + " x" + std::to_string(n) + "; ";
    if (haveCC) {
      unsigned want = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 3 : 2;
      EXPECT_EQ(r.configsRun, want) << what << ": skipped " << skips;
    } else {
      EXPECT_EQ(r.configsRun, 0u) << what;
      EXPECT_FALSE(r.skipped.empty()) << what << ": a skipped bundle must be counted";
    }
  }
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
