// The pass manager: pass lists, named and backend pipelines, fixed points, dump-after,
// timing, verification, and errors on bad input.

#include "PassTestUtils.h"

#include "kiln/ExecutionEngine/ExecutionEngine.h"

#include <sstream>

namespace kiln::test {

namespace {

TEST(PassList, ParsesNamesGroupsAndFixedPoints) {
  Pipeline p = exitOnError(parsePassList(" cse , (sink-transposes, dce)* ,lower*"));
  ASSERT_EQ(p.steps.size(), 3u);
  EXPECT_EQ(p.steps[0].passes, std::vector<std::string>{"cse"});
  EXPECT_EQ(p.steps[0].convergence, Convergence::Once);
  EXPECT_EQ(p.steps[1].passes, (std::vector<std::string>{"sink-transposes", "dce"}));
  EXPECT_EQ(p.steps[1].convergence, Convergence::FixedPoint);
  EXPECT_EQ(p.steps[2].convergence, Convergence::FixedPoint);
  EXPECT_EQ(p.toString(), "cse,(sink-transposes,dce)*,lower*");
}

TEST(PassList, BadListsAreClearErrors) {
  for (const char *bad : {"", "cse,,dce", "cse,nope", "(cse,dce", "cse)", "(cse,)", "cse dce"}) {
    Expected<Pipeline> p = parsePassList(bad);
    ASSERT_FALSE(bool(p)) << "'" << bad << "' parsed";
    EXPECT_EQ(p.getError().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(p.getError().message().find("known passes:"), std::string::npos)
        << p.getError().message();
  }
  Expected<Pipeline> p = parsePassList("cse,no-such-pass");
  EXPECT_NE(p.getError().message().find("unknown pass 'no-such-pass'"), std::string::npos);
}

TEST(Pipelines, NamedAndPerBackend) {
  EXPECT_TRUE(bool(getNamedPipeline("default")));
  EXPECT_TRUE(getNamedPipeline("none")->steps.empty());
  EXPECT_FALSE(bool(getNamedPipeline("fast")));
  // Every pass a named pipeline uses exists.
  for (const Pipeline &p : {getDefaultPipeline(), getFusingPipeline()})
    for (const PipelineStep &s : p.steps)
      for (const std::string &name : s.passes)
        EXPECT_FALSE(getGraphPassDescription(name).empty()) << name;

  std::unique_ptr<Backend> interp = exitOnError(createBackend("Interpreter"));
  EXPECT_EQ(getPipelineForBackend(interp.get()).name, "default");
  registerBackendPipeline("Interpreter", [] {
    Pipeline p;
    p.name = "interpreter-test";
    p.steps = {PipelineStep::once("dce")};
    return p;
  });
  EXPECT_EQ(getPipelineForBackend(interp.get()).name, "interpreter-test");
  registerBackendPipeline("Interpreter", [] { return getDefaultPipeline(); });
}

TEST(PassManager, FixedPointRunsUntilNothingChanges) {
  Module m;
  Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {2, 3, 4}, "x");
  NodeValue v = x;
  // Four nested transpose pairs: each round of sink-transposes cancels one layer.
  for (int i = 0; i < 4; i++)
    v = f->createTranspose("t" + std::to_string(i), v, {1, 0, 2});
  f->createSave("y", f->createRelu("r", v));
  PipelineReport r = exitOnError(runPipeline(f, *parsePassList("(sink-transposes,dce)*"), nullptr));
  EXPECT_EQ(countKind(f, NodeKind::Transpose), 0u);
  ASSERT_EQ(r.passes.size(), 2u);
  EXPECT_EQ(r.passes[0].pass, "sink-transposes");
  EXPECT_GE(r.passes[0].runs, 2u);
  EXPECT_EQ(r.passes[0].runs, r.passes[0].changed + 1); // the last round changes nothing
  EXPECT_NE(r.timingTable().find("sink-transposes"), std::string::npos);
}

TEST(PassManager, DumpsAfterTheNamedPasses) {
  Module m;
  Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {4}, "x");
  f->createTanh("dead", x);
  f->createSave("y", f->createRelu("r", x));
  std::ostringstream os;
  PassManagerOptions o;
  o.dumpAfter = {"dce"};
  o.dumpStream = &os;
  exitOnError(runPipeline(f, *parsePassList("cse,dce"), nullptr, o));
  EXPECT_EQ(os.str().find("after cse"), std::string::npos);
  EXPECT_NE(os.str().find("after dce"), std::string::npos);
  EXPECT_EQ(os.str().find("Tanh"), std::string::npos) << os.str();

  o.dumpAfter = {"no-such-pass"};
  Expected<PipelineReport> r = runPipeline(f, *parsePassList("dce"), nullptr, o);
  ASSERT_FALSE(bool(r));
  EXPECT_NE(r.getError().message().find("unknown pass 'no-such-pass'"), std::string::npos);
}

TEST(PassManager, RejectsAnInvalidInputFunction) {
  Module m;
  Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {4}, "x");
  auto *z = m.createPlaceholder(ElemKind::Float, {5}, "z");
  f->createSave("y", f->createAdd("bad", x, z)); // recorded builder error
  Expected<PipelineReport> r = runPipeline(f, getDefaultPipeline(), nullptr);
  ASSERT_FALSE(bool(r));
  EXPECT_NE(r.getError().message().find("'bad' (Add)"), std::string::npos)
      << r.getError().message();
}

/// compile() runs the backend's pipeline: the engine sees folded BatchNorms.
TEST(PassManager, ExecutionEngineCompileRunsThePipeline) {
  ExecutionEngine ee("Interpreter");
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {1, 2, 4, 4}, "x");
  auto *c = f->createConv("conv", x, 3, 3, 1, 1);
  auto *bn = f->createBatchNormalization(
      "bn", c, randomConstant(m, "s", {3}, 0.5f, 1.5f, 1), randomConstant(m, "b", {3}, -1, 1, 2),
      randomConstant(m, "mu", {3}, -1, 1, 3), randomConstant(m, "v", {3}, 0.5f, 1.5f, 4), 1e-5f, 1);
  auto *save = f->createSave("y", bn);
  ASSERT_FALSE(bool(ee.compile()));
  EXPECT_EQ(countKind(f, NodeKind::BatchNormalization), 0u);
  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  PseudoRNG rng(3);
  b.get(x)->randomize(-1, 1, rng);
  ASSERT_FALSE(bool(ee.run(b, "main")));
  EXPECT_EQ(b.get(save->getPlaceholder())->getType().dims, (Dims{1, 3, 4, 4}));
}

} // namespace

} // namespace kiln::test
