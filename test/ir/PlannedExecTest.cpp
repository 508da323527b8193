// Models run on the Interpreter with the memory-aware schedule, the IR passes and the
// static memory plan (every activation at its planned offset of one arena, filled with
// NaNs first) give exactly the outputs of the plain unplanned run.

#include "backends/Interpreter/Interpreter.h"
#include "kiln/Memory/MemoryPipeline.h"
#include "src/tools/Networks.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

struct Config {
  const char *name;
  bool optimizeIR, staticMemoryPlan;
};
const Config kConfigs[] = {
    {"optimized", true, false}, {"planned", false, true}, {"optimized+planned", true, true}};

/// Compiles \p f for the Interpreter with \p opts and runs it on inputs from \p seed;
/// returns every placeholder's final tensor.
std::vector<Tensor> runWith(Module &m, Function *f, const CompileOptions &opts, uint64_t seed) {
  auto backend = createBackend("Interpreter");
  EXPECT_TRUE(bool(backend));
  auto fn = (*backend)->compile(f, opts);
  EXPECT_TRUE(bool(fn)) << fn.getError().toString();
  if (!fn)
    return {};
  PlaceholderBindings b;
  PseudoRNG rng(seed);
  for (const auto &ph : m.getPlaceholders())
    b.allocate(ph.get())->randomize(-1, 1, rng);
  ExecutionContext ctx(&b);
  Error e = (*fn)->execute(ctx);
  EXPECT_FALSE(bool(e)) << e.toString();
  if (opts.staticMemoryPlan) {
    auto *interp = static_cast<InterpreterFunction *>(fn->get());
    EXPECT_NE(interp->getMemoryPlan(), nullptr);
    if (interp->getMemoryPlan()) {
      EXPECT_FALSE(bool(verifyMemoryPlan(interp->getIR(), *interp->getMemoryPlan())));
    }
  }
  std::vector<Tensor> r;
  for (const auto &ph : m.getPlaceholders())
    r.push_back(b.get(ph.get())->clone());
  return r;
}

/// Runs \p f plain and in every configuration; all outputs must be identical.
void expectPlanMatchesUnplanned(Module &m, Function *f) {
  std::vector<Tensor> ref = runWith(m, f, CompileOptions(), 5);
  ASSERT_FALSE(ref.empty());
  for (const Config &c : kConfigs) {
    SCOPED_TRACE(c.name);
    CompileOptions opts;
    opts.optimizeIR = c.optimizeIR;
    opts.staticMemoryPlan = c.staticMemoryPlan;
    std::vector<Tensor> got = runWith(m, f, opts, 5);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); i++)
      EXPECT_TRUE(got[i].isEqual(ref[i], 0, 0, true))
          << "placeholder '" << m.getPlaceholders()[i]->getName() << "'";
  }
}

TEST(PlannedExecTest, MLP) {
  Module m;
  Function *f = m.createFunction("mlp");
  auto *x = m.createPlaceholder(ElemKind::Float, {4, 32}, "x");
  NodeValue h = f->createRelu("relu1", f->createFullyConnected("fc1", x, 64));
  h = f->createTanh("tanh", f->createFullyConnected("fc2", h, 64));
  f->createSave("y", f->createSoftMax("sm", f->createFullyConnected("fc3", h, 10), 1));
  expectPlanMatchesUnplanned(m, f);
}

TEST(PlannedExecTest, ResidualCNNWithTwoOutputs) {
  Module m;
  Function *f = m.createFunction("cnn");
  auto *x = m.createPlaceholder(ElemKind::Float, {1, 3, 16, 16}, "x");
  NodeValue a = f->createRelu("r0", f->createConv("c0", x, 8, 3, 1, 1));
  NodeValue b = f->createRelu("r1", f->createConv("c1", a, 8, 3, 1, 1));
  NodeValue s = f->createAdd("add", a, f->createConv("c2", b, 8, 3, 1, 1));
  NodeValue p = f->createMaxPool("pool", f->createRelu("r2", s), {2, 2}, {2, 2}, {0, 0, 0, 0});
  f->createSave("features", p); // an intermediate that is also used below
  NodeValue g = f->createGlobalAvgPool("gap", p);
  f->createSave("logits", f->createFullyConnected("fc", g, 5));
  expectPlanMatchesUnplanned(m, f);
}

TEST(PlannedExecTest, ConcatAndSliceBecomeViews) {
  Module m;
  Function *f = m.createFunction("views");
  auto *x = m.createPlaceholder(ElemKind::Float, {1, 4, 8, 8}, "x");
  NodeValue a = f->createConv("a", x, 6, 3, 1, 1);
  NodeValue b = f->createConv("b", x, 10, 1, 1, 0);
  NodeValue cat = f->createConcat("cat", {a, f->createRelu("rb", b)}, 1); // channels
  NodeValue top = f->createSlice("top", cat, {0, 0, 0, 0}, {1, 8, 8, 8});  // first 8 channels
  NodeValue rest = f->createSlice("rest", cat, {0, 8, 0, 0}, {1, 16, 8, 8});
  f->createSave("y", f->createAdd("sum", f->createTanh("t", top), rest));
  auto P = generatePlannedIR(f);
  ASSERT_TRUE(bool(P)) << P.getError().toString();
  std::string ir = P->F->toString();
  EXPECT_EQ(ir.find("Concat "), std::string::npos) << ir;
  EXPECT_EQ(ir.find("Slice "), std::string::npos) << ir;
  expectPlanMatchesUnplanned(m, f);
}

TEST(PlannedExecTest, OperandOrderGraphAndTopK) {
  Module m;
  Function *f = m.createFunction("order");
  auto *x = m.createPlaceholder(ElemKind::Float, {64, 64}, "x");
  auto *s = m.createPlaceholder(ElemKind::Float, {1, 64}, "s");
  NodeValue left = f->createRelu("left", x);
  NodeValue big = f->createTile("big", s, {256, 1});
  NodeValue red = f->createReduceSum("sum", big, {0}, true);
  NodeValue right = f->createBroadcast("bcast", red, {64, 64});
  NodeValue prod = f->createMul("mul", left, right);
  auto *top = f->createTopK("topk", prod, 3);
  f->createSave("values", NodeValue(top, 0)); // indices unused
  f->createSave("flat", f->createReshape("flat", prod, {4096}));
  expectPlanMatchesUnplanned(m, f);
}

TEST(PlannedExecTest, SmallReferenceNetworks) {
  networks::CNNOptions c;
  c.imageSize = 32;
  c.widthDivisor = 8;
  c.numClasses = 10;
  {
    Module m;
    expectPlanMatchesUnplanned(m, networks::buildResNet50(m, c));
  }
  {
    Module m;
    expectPlanMatchesUnplanned(m, networks::buildMobileNetV2(m, c));
  }
  {
    networks::TransformerOptions t;
    t.seqLen = 8;
    t.dModel = 16;
    t.heads = 2;
    t.ffDim = 32;
    t.layers = 2;
    Module m;
    expectPlanMatchesUnplanned(m, networks::buildTransformerEncoder(m, t));
  }
}

} // namespace
} // namespace kiln
