// ExecutionEngine: the public one-object API, end to end on the Interpreter, and the
// errors a caller can cause.

#include "test/engine/SmallNet.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;
using kiln::test::buildSmallNet;
using kiln::test::contains;

TEST(ExecutionEngine, CompilesAndRunsRepeatedly) {
  ExecutionEngine ee("Interpreter");
  Placeholder *x;
  SaveNode *y = buildSmallNet(ee.getModule(), x);
  ASSERT_FALSE(ee.compile());
  PlaceholderBindings b;
  b.allocate(ee.getModule().getPlaceholders());
  // Row 0: [1, 2] -> [1*1 + 2*2 + 0.5, 1*-1 + 2*0.5 - 1] = [5.5, -1] -> relu [5.5, 0]
  // Row 1: [-1, 1] -> [-1 + 2 + 0.5, 1 + 0.5 - 1] = [1.5, 0.5]
  b.get(x)->getHandle<float>().set({1, 2, -1, 1});
  ASSERT_FALSE(ee.run(b));
  auto out = b.get(y->getPlaceholder())->getHandle<float>();
  EXPECT_FLOAT_EQ(out.at({0, 0}), 5.5f);
  EXPECT_FLOAT_EQ(out.at({0, 1}), 0.0f);
  EXPECT_FLOAT_EQ(out.at({1, 0}), 1.5f);
  EXPECT_FLOAT_EQ(out.at({1, 1}), 0.5f);
  // A second run with new inputs.
  b.get(x)->getHandle<float>().set({0, 0, 0, 0});
  ASSERT_FALSE(ee.run(b));
  EXPECT_FLOAT_EQ(out.at({0, 0}), 0.5f);
  EXPECT_FLOAT_EQ(out.at({1, 1}), 0.0f);
}

TEST(ExecutionEngine, XorPerceptron) {
  ExecutionEngine ee;
  Module &m = ee.getModule();
  Function *f = m.createFunction("xor");
  auto *x = m.createPlaceholder(ElemKind::Float, {4, 2}, "x");
  auto *w1 = m.createConstant("w1", Tensor(ElemKind::Float, {2, 2}, {20, 20, 20, 20}));
  auto *b1 = m.createConstant("b1", Tensor(ElemKind::Float, {2}, {-10, -30}));
  auto *w2 = m.createConstant("w2", Tensor(ElemKind::Float, {2, 1}, {20, -20}));
  auto *b2 = m.createConstant("b2", Tensor(ElemKind::Float, {1}, {-10}));
  auto *h = f->createSigmoid("h", f->createFullyConnected("fc1", NodeValue(x), NodeValue(w1),
                                                          NodeValue(b1)));
  auto *y = f->createSigmoid("y", f->createFullyConnected("fc2", NodeValue(h), NodeValue(w2),
                                                          NodeValue(b2)));
  SaveNode *s = f->createSave("out", NodeValue(y));
  ASSERT_FALSE(ee.compile());
  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  b.get(x)->getHandle<float>().set({0, 0, 0, 1, 1, 0, 1, 1});
  ASSERT_FALSE(ee.run(b));
  auto out = b.get(s->getPlaceholder())->getHandle<float>();
  // Independent expectation: the same formula in double precision.
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double in[4][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
  for (int i = 0; i < 4; i++) {
    double h0 = sig(20 * in[i][0] + 20 * in[i][1] - 10);
    double h1 = sig(20 * in[i][0] + 20 * in[i][1] - 30);
    EXPECT_NEAR(out.at({dim_t(i), 0}), sig(20 * h0 - 20 * h1 - 10), 1e-6);
  }
  EXPECT_LT(out.at({0, 0}), 0.01f);
  EXPECT_GT(out.at({1, 0}), 0.99f);
  EXPECT_GT(out.at({2, 0}), 0.99f);
  EXPECT_LT(out.at({3, 0}), 0.01f);
}

TEST(ExecutionEngine, UnknownBackendIsAnError) {
  ExecutionEngine ee("NoSuchChip");
  EXPECT_EQ(ee.getBackend(), nullptr);
  Placeholder *x;
  buildSmallNet(ee.getModule(), x);
  Error e = ee.compile();
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::NotFound);
  EXPECT_TRUE(contains(e.message(), "NoSuchChip")) << e.message();
  EXPECT_TRUE(contains(e.message(), "Interpreter")) << e.message(); // lists the known ones
}

// A hand-built shape of nine dimensions is an Error at compile (the verifier's), not an
// abort where the shape is built.
TEST(ExecutionEngine, NineDimensionsAreAnErrorNotACrash) {
  ExecutionEngine ee;
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {2, 1, 1, 1, 1, 1, 1, 1, 2}, "x9");
  f->createSave("y", f->createRelu("relu", x));
  Error e = ee.compile();
  ASSERT_TRUE(e);
  EXPECT_TRUE(contains(e.message(), "'x9'")) << e.message();
  EXPECT_TRUE(contains(e.message(), "more than 8 dimensions")) << e.message();
}

TEST(ExecutionEngine, MisuseIsAnError) {
  ExecutionEngine ee;
  Error noFunctions = ee.compile();
  ASSERT_TRUE(noFunctions);
  EXPECT_EQ(noFunctions.code(), ErrorCode::InvalidArgument);
  PlaceholderBindings b;
  Error notCompiled = ee.run(b);
  ASSERT_TRUE(notCompiled);
  EXPECT_TRUE(contains(notCompiled.message(), "compile")) << notCompiled.message();
}

TEST(ExecutionEngine, BindingErrorsNameThePlaceholder) {
  ExecutionEngine ee;
  Placeholder *x;
  buildSmallNet(ee.getModule(), x);
  ASSERT_FALSE(ee.compile());

  PlaceholderBindings missing;
  missing.allocate(ee.getModule().getPlaceholderByName("y"));
  Error e1 = ee.run(missing);
  ASSERT_TRUE(e1);
  EXPECT_EQ(e1.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e1.message(), "'x'")) << e1.message();

  PlaceholderBindings wrong;
  wrong.allocate(ee.getModule().getPlaceholders());
  wrong.insert(x, Tensor(ElemKind::Float, {3, 2}));
  Error e2 = ee.run(wrong);
  ASSERT_TRUE(e2);
  EXPECT_TRUE(contains(e2.message(), "float<2x2>")) << e2.message();
  EXPECT_TRUE(contains(e2.message(), "float<3x2>")) << e2.message();

  Error e3 = ee.run(wrong, "nope");
  ASSERT_TRUE(e3);
  EXPECT_EQ(e3.code(), ErrorCode::NotFound);
}

TEST(ExecutionEngine, InvalidGraphFailsToCompileNamingTheNode) {
  ExecutionEngine ee;
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {1, 3, 8, 8}, "x");
  // Filter expects 4 input channels but x has 3.
  auto *w = m.createConstant(ElemKind::Float, {2, 4, 3, 3}, "w");
  auto *b = m.createConstant(ElemKind::Float, {2}, "b");
  auto *conv = f->createConvolution("conv1", NodeValue(x), NodeValue(w), NodeValue(b), {3, 3},
                                    {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  f->createSave("y", NodeValue(conv));
  Error e = ee.compile();
  ASSERT_TRUE(e);
  EXPECT_TRUE(contains(e.message(), "conv1")) << e.message();
  EXPECT_TRUE(contains(e.message(), "Convolution")) << e.message();
  EXPECT_TRUE(contains(e.message(), "float<2x4x3x3>")) << e.message();
}

TEST(ExecutionEngine, UnsupportedKindsAreReportedNotRun) {
  ExecutionEngine ee;
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  // Sigmoid on int64 is well-typed but the Interpreter has no kernel for it.
  auto *x = m.createPlaceholder(ElemKind::Int64I, {4}, "x");
  f->createSave("y", NodeValue(f->createSigmoid("sig", NodeValue(x))));
  Error e = ee.compile();
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  EXPECT_TRUE(contains(e.message(), "'sig'")) << e.message();
  EXPECT_TRUE(contains(e.message(), "i64<4>")) << e.message();
}
