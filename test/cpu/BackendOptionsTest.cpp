// CompileOptions' backend parameters: parsing "name=value" items, the CPU backend taking
// them through ExecutionEngine::compile, and the errors for unknown names and bad values.
#include "test/engine/SmallNet.h"
#include "kiln/Runtime/HostManager.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln::test::buildSmallNet;
using kiln::test::contains;

namespace {

CompileOptions withItems(std::initializer_list<const char *> items) {
  CompileOptions o;
  for (const char *i : items) {
    Error e = o.setBackendOption(i);
    EXPECT_FALSE(bool(e)) << i << ": " << e.message();
  }
  return o;
}

} // namespace

TEST(BackendOptions, ParsesItems) {
  CompileOptions o;
  ASSERT_FALSE(bool(o.setBackendOption("threads=3")));
  EXPECT_EQ(o.threads, 3u);
  EXPECT_TRUE(o.backendOptions.empty()); // threads is generic
  ASSERT_FALSE(bool(o.setBackendOption("spin-us=0")));
  ASSERT_FALSE(bool(o.setBackendOption("dump-asm=/tmp/a=b.s"))); // the first '=' splits
  ASSERT_FALSE(bool(o.setBackendOption("spin-us=250")));          // the last one wins
  EXPECT_EQ(o.backendOptions.at("spin-us"), "250");
  EXPECT_EQ(o.backendOptions.at("dump-asm"), "/tmp/a=b.s");
  // Each error names the item or the parameter and the bad value.
  for (auto [bad, named] : {std::pair{"spin-us", "'spin-us'"}, {"=1", "'=1'"},
                            {"threads=two", "'two'"}, {"threads=-1", "'-1'"}}) {
    Error e = o.setBackendOption(bad);
    ASSERT_TRUE(bool(e)) << bad;
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_TRUE(contains(e.message(), named)) << e.message();
  }
  EXPECT_EQ(o.threads, 3u); // unchanged by the bad items
}

TEST(BackendOptions, CheckNamesTheUnknownOneAndTheKnown) {
  CompileOptions o = withItems({"spin-us=1", "colour=blue"});
  Error e = checkBackendOptions("Demo", o, {{"spin-us", "N", "spin"}, {"dump", "PATH", "x"}});
  ASSERT_TRUE(bool(e));
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.message(), "Demo")) << e.message();
  EXPECT_TRUE(contains(e.message(), "'colour'")) << e.message();
  EXPECT_TRUE(contains(e.message(), "spin-us=N")) << e.message();
  EXPECT_TRUE(contains(e.message(), "dump=PATH")) << e.message();
  EXPECT_FALSE(bool(checkBackendOptions("Demo", withItems({"dump=x"}), {{"dump", "PATH", ""}})));
}

TEST(BackendOptions, ValueParsers) {
  EXPECT_TRUE(*parseBoolParameter("p", "1"));
  EXPECT_TRUE(*parseBoolParameter("p", "on"));
  EXPECT_FALSE(*parseBoolParameter("p", "false"));
  EXPECT_TRUE(bool(parseBoolParameter("p", "yes").getError()));
  EXPECT_EQ(*parseUnsignedParameter("n", "4294967295"), 4294967295u);
  EXPECT_TRUE(bool(parseUnsignedParameter("n", "4294967296").getError()));
  EXPECT_TRUE(bool(parseUnsignedParameter("n", "").getError()));
}

// The CPU backend through ExecutionEngine: parameters change how it runs, never what it
// computes; profile=1 gives per-stage timings of the runs after the first.
TEST(BackendOptions, CPUParametersThroughExecutionEngine) {
  ExecutionEngine ee("CPU");
  Placeholder *x;
  SaveNode *y = buildSmallNet(ee.getModule(), x);
  ASSERT_FALSE(bool(ee.compile(withItems({"threads=2", "spin-us=0", "avx512=0", "winograd=0",
                                          "fuse-elementwise=0", "profile=1"}))));
  PlaceholderBindings b;
  b.allocate(ee.getModule().getPlaceholders());
  // Row 0: [1, 2] -> [5.5, -1] -> relu [5.5, 0]; row 1: [-1, 1] -> [1.5, 0.5].
  b.get(x)->getHandle<float>().set({1, 2, -1, 1});
  for (int i = 0; i < 3; i++)
    ASSERT_FALSE(bool(ee.run(b)));
  auto out = b.get(y->getPlaceholder())->getHandle<float>();
  EXPECT_FLOAT_EQ(out.at({0, 0}), 5.5f);
  EXPECT_FLOAT_EQ(out.at({0, 1}), 0.0f);
  EXPECT_FLOAT_EQ(out.at({1, 0}), 1.5f);
  EXPECT_FLOAT_EQ(out.at({1, 1}), 0.5f);
  Expected<std::vector<StageTiming>> p = ee.getHostManager()->getProfile("main");
  ASSERT_TRUE(bool(p)) << p.getError().message();
  ASSERT_FALSE(p->empty());
  for (const StageTiming &t : *p) {
    EXPECT_EQ(t.runs, 2u) << t.name; // 3 runs, the first not counted
    EXPECT_GE(t.minMs, 0.0);
    EXPECT_LE(t.minMs, t.meanMs + 1e-9) << t.name;
    EXPECT_FALSE(t.name.empty());
  }
  // winograd=fast and a forced convolution algorithm compile and compute the same.
  ASSERT_FALSE(bool(ee.compile(withItems({"winograd=fast", "conv-algorithm=conv"}))));
  ASSERT_FALSE(bool(ee.run(b)));
  EXPECT_FLOAT_EQ(out.at({0, 0}), 5.5f);
  EXPECT_FLOAT_EQ(out.at({1, 1}), 0.5f);
  // Without profile=1 there is no profile.
  ASSERT_FALSE(bool(ee.compile()));
  ASSERT_FALSE(bool(ee.run(b)));
  EXPECT_TRUE(ee.getHostManager()->getProfile("main")->empty());
}

// profile=1 also says what each stage computes, counted by hand here: FLOPs of the
// GEMM-like kinds (a multiply-add counts 2) and the bytes of every operand once.
TEST(BackendOptions, ProfileCountsEachStagesWork) {
  ExecutionEngine ee("CPU");
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {1, 3, 8, 8}, "x");
  // 4 filters of 3 x 3 x 3, padding 1: [1, 4, 8, 8]; then Tanh, its own stage.
  auto *conv = f->createConv("conv", NodeValue(x), 4, 3, 1, 1);
  auto *y = f->createSave("y", NodeValue(f->createTanh("tanh", NodeValue(conv))));
  ASSERT_FALSE(bool(ee.compile(withItems({"profile=1"}))));
  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  for (int i = 0; i < 2; i++)
    ASSERT_FALSE(bool(ee.run(b)));
  (void)y;
  Expected<std::vector<StageTiming>> p = ee.getHostManager()->getProfile("main");
  ASSERT_TRUE(bool(p)) << p.getError().message();
  const StageTiming *convStage = nullptr, *tanhStage = nullptr;
  for (const StageTiming &t : *p) {
    if (contains(t.name, "conv"))
      convStage = &t;
    else if (t.bytes > 0)
      tanhStage = &t;
  }
  ASSERT_NE(convStage, nullptr);
  ASSERT_NE(tanhStage, nullptr);
  // 4 x 8 x 8 outputs, each 3 x 3 x 3 multiply-adds.
  EXPECT_DOUBLE_EQ(convStage->flops, 2.0 * 4 * 8 * 8 * 27);
  // Output 1024 B, input 768, filter 432, bias 16.
  EXPECT_DOUBLE_EQ(convStage->bytes, 1024 + 768 + 432 + 16);
  EXPECT_DOUBLE_EQ(tanhStage->flops, 0.0);
  EXPECT_DOUBLE_EQ(tanhStage->bytes, 1024 + 1024) << tanhStage->name;

  // The small net's fully-connected layer (with its Relu): 2 x 2 outputs of 2 products.
  ExecutionEngine ee2("CPU");
  Placeholder *x2;
  buildSmallNet(ee2.getModule(), x2);
  ASSERT_FALSE(bool(ee2.compile(withItems({"profile=1"}))));
  PlaceholderBindings b2;
  b2.allocate(ee2.getModule().getPlaceholders());
  for (int i = 0; i < 2; i++)
    ASSERT_FALSE(bool(ee2.run(b2)));
  Expected<std::vector<StageTiming>> p2 = ee2.getHostManager()->getProfile("main");
  ASSERT_TRUE(bool(p2)) << p2.getError().message();
  double flops = 0;
  for (const StageTiming &t : *p2)
    flops += t.flops;
  EXPECT_DOUBLE_EQ(flops, 2.0 * 4 * 2);
}

// The profile says how many threads each stage's work was split between: a convolution
// large enough to be split (64 filters of 64 x 3 x 3 over 32 x 32: 75 MFLOP) ran on both
// threads of a 2-thread program and on one of a 1-thread program.
TEST(BackendOptions, ProfileSaysTheThreadsOfEachStage) {
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    ExecutionEngine ee("CPU");
    Module &m = ee.getModule();
    Function *f = m.createFunction("main");
    Placeholder *x = m.createPlaceholder(ElemKind::Float, {1, 64, 32, 32}, "x");
    f->createSave("y", NodeValue(f->createConv("conv", NodeValue(x), 64, 3, 1, 1)));
    std::string t = "threads=" + std::to_string(threads);
    ASSERT_FALSE(bool(ee.compile(withItems({"profile=1", t.c_str()}))));
    PlaceholderBindings b;
    b.allocate(m.getPlaceholders());
    for (int i = 0; i < 2; i++)
      ASSERT_FALSE(bool(ee.run(b)));
    Expected<std::vector<StageTiming>> p = ee.getHostManager()->getProfile("main");
    ASSERT_TRUE(bool(p)) << p.getError().message();
    const StageTiming *convStage = nullptr;
    for (const StageTiming &s : *p)
      if (s.flops > 0)
        convStage = &s;
    ASSERT_NE(convStage, nullptr);
    EXPECT_EQ(convStage->threads, threads) << convStage->name;
  }
}

TEST(BackendOptions, UnknownOrBadParametersFailTheCompile) {
  struct Case {
    const char *backend, *item, *named, *listed;
  };
  for (Case c : {Case{"CPU", "colour=blue", "'colour'", "spin-us=N"},
                 Case{"CPU", "winograd=maybe", "'winograd'", "maybe"},
                 Case{"CPU", "winograd=faster", "'winograd'", "fast"},
                 Case{"CPU", "conv-algorithm=winograd", "'conv-algorithm'", "conv_wino2"},
                 Case{"CPU", "vector-width=100", "'vector-width'", "100"},
                 Case{"Interpreter", "spin-us=1", "'spin-us'", "threads=N"}}) {
    SCOPED_TRACE(std::string(c.backend) + " " + c.item);
    ExecutionEngine ee(c.backend);
    Placeholder *x;
    buildSmallNet(ee.getModule(), x);
    Error e = ee.compile(withItems({c.item}));
    ASSERT_TRUE(bool(e));
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_TRUE(contains(e.message(), c.named)) << e.message();
    EXPECT_TRUE(contains(e.message(), c.listed)) << e.message();
  }
}
