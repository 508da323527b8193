// The IR text parser: printing then parsing gives the same function (for IRGen's output
// on every reference network and on hand-written text), and every malformed input is a
// ModelParse error with a line and column. Also the FileCheck helper of the golden tests.

#include "IRTestUtils.h"

#include "kiln/IR/IRParser.h"
#include "src/tools/Networks.h"

#include <gtest/gtest.h>

namespace kiln::test {
namespace {

/// Prints \p F, parses it into \p m and prints again: the texts must be equal.
void expectRoundTrip(const IRFunction &F, Module &m) {
  std::string text = F.toString();
  auto G = parseIR(text, m);
  ASSERT_TRUE(bool(G)) << G.getError().toString() << "\n" << text;
  EXPECT_EQ((*G)->toString(), text);
  // Weights stand for the module's storage again.
  for (size_t i = 0; i < F.getWeights().size(); i++)
    EXPECT_EQ((*G)->getWeights()[i]->getOrigin(), F.getWeights()[i]->getOrigin());
}

TEST(IRParserTest, RoundTripsIRGenOfReferenceNetworks) {
  {
    Module m;
    networks::CNNOptions o;
    o.imageSize = 32;
    o.widthDivisor = 8;
    o.numClasses = 10;
    auto F = generateIR(networks::buildResNet50(m, o));
    ASSERT_TRUE(bool(F)) << F.getError().toString();
    expectRoundTrip(**F, m);
  }
  {
    Module m;
    networks::CNNOptions o;
    o.imageSize = 32;
    o.widthDivisor = 8;
    o.numClasses = 10;
    auto F = generateIR(networks::buildMobileNetV2(m, o));
    ASSERT_TRUE(bool(F)) << F.getError().toString();
    expectRoundTrip(**F, m);
  }
  {
    Module m;
    networks::TransformerOptions o;
    o.seqLen = 8;
    o.dModel = 16;
    o.heads = 2;
    o.ffDim = 32;
    o.layers = 2;
    auto F = generateIR(networks::buildTransformerEncoder(m, o));
    ASSERT_TRUE(bool(F)) << F.getError().toString();
    expectRoundTrip(**F, m);
  }
}

TEST(IRParserTest, RoundTripsVariadicQuantizedAndQuotedNames) {
  Module m;
  Function *f = m.createFunction("odd names");
  auto *x = m.createPlaceholder(ElemKind::Float, {2, 3}, "in:0");
  auto *q = f->createQuantize("q", m.uniqueType(ElemKind::Int8Q, {2, 3}, 0.25f, -3), x);
  auto *dq = f->createDequantize("dq", m.uniqueType(ElemKind::Float, {2, 3}), q);
  auto *c = f->createConcat("cat \"x\"", {NodeValue(dq), NodeValue(x), NodeValue(dq)}, 0);
  auto *top = f->createTopK("top", c, 2);
  f->createSave("values", NodeValue(top, 0));
  f->createSave("indices", NodeValue(top, 1));
  auto F = generateIR(f);
  ASSERT_TRUE(bool(F)) << F.getError().toString();
  std::string text = (*F)->toString();
  EXPECT_NE(text.find("function \"odd names\""), std::string::npos) << text;
  EXPECT_NE(text.find("@\"in:0\""), std::string::npos) << text;
  EXPECT_NE(text.find("i8q<2x3:0.25:-3>"), std::string::npos) << text;
  expectRoundTrip(**F, m);
}

TEST(IRParserTest, ParsesHandWrittenText) {
  Module m;
  auto F = parseIR(R"(
    // A comment.
    function main
    weights:
      @x : float<2x2> mutable
      @w : float<2x2> const
      @y : float<4> mutable
    code:
      %a = AllocActivation : float<2x2>   // trailing comment
      MatMul @out %a, @in @x, @in @w
      %v = TensorView @in %a {Offsets=[0,0]} : float<4>
      Clip @out @y, @in %v {Min=-1.5, Max=inf}
      DeallocActivation @out %a
  )",
                   m);
  ASSERT_TRUE(bool(F)) << F.getError().toString();
  EXPECT_EQ((*F)->getName(), "main");
  EXPECT_EQ((*F)->getInstrs().size(), 5u);
  EXPECT_EQ((*F)->getWeights()[1]->isConstant(), true);
  EXPECT_EQ((*F)->getWeights()[0]->getOrigin(), nullptr); // m has no such placeholder
  auto *clip = cast<ClipInst>(std::next((*F)->getInstrs().begin(), 3)->get());
  EXPECT_EQ(clip->getMin(), -1.5f);
  EXPECT_TRUE(std::isinf(clip->getMax()));
}

/// The error of parsing \p body (after a standard header), or "" when it parses.
std::string errorOf(const std::string &body) {
  Module m;
  auto F = parseIR("function f\nweights:\n  @x : float<4> mutable\n  @y : float<4> mutable\n"
                   "code:\n" + body,
                   m);
  if (F)
    return "";
  EXPECT_EQ(F.getError().code(), ErrorCode::ModelParse);
  return F.getError().message();
}

TEST(IRParserTest, ReportsErrorsWithLineAndColumn) {
  EXPECT_EQ(errorOf("  Frobnicate @out @y, @in @x\n"), "6:3: unknown instruction 'Frobnicate'");
  EXPECT_EQ(errorOf("  Relu @in @y, @in @x\n"), "6:8: Relu operand Dest is @out, not @in");
  EXPECT_EQ(errorOf("  Relu @out @y, @in %nope\n"),
            "6:21: %nope is not defined before this use");
  EXPECT_EQ(errorOf("  Relu @out @y, @in @z\n"), "6:21: @z is not a declared weight");
  EXPECT_EQ(errorOf("  %a = AllocActivation : float<4\n"), "6:33: expected '>' to close the type");
  EXPECT_EQ(errorOf("  %a = AllocActivation : floaty<4>\n"), "6:26: unknown element kind 'floaty'");
  EXPECT_EQ(errorOf("  %a = AllocActivation\n"),
            "6:23: AllocActivation needs its buffer type: '... : float<...>'");
  EXPECT_EQ(errorOf("  Relu @out @y\n"), "6:3: Relu takes 2 operands, got 1");
  EXPECT_NE(errorOf("  %a = AllocActivation : float<4>\n  %v = TensorView @in %a : float<4>\n")
                .find("missing attribute 'Offsets'"),
            std::string::npos);
  EXPECT_NE(errorOf("  Clip @out @y, @in @x {Min=0, Max=1, Mean=3}\n").find("no attribute 'Mean'"),
            std::string::npos);
  EXPECT_NE(errorOf("  Relu @out @y, @in @x {}\n  %y = Relu @out @y, @in @x\n")
                .find("Relu defines no result"),
            std::string::npos);
  // Text that parses but does not verify.
  EXPECT_NE(errorOf("  %a = AllocActivation : float<4>\n  DeallocActivation @out %a\n"
                    "  Relu @out %a, @in @x\n")
                .find("after its dealloc"),
            std::string::npos);
  Module m;
  EXPECT_FALSE(bool(parseIR("weights:\n", m)));
  EXPECT_FALSE(bool(parseIR("function f\ncode:\n", m)));
}

TEST(FileCheckTest, Directives) {
  std::string out = "a one\nb two\nc three\nd four\n";
  EXPECT_EQ(fileCheck(out, "// CHECK: one\n// CHECK-NEXT: two\n// CHECK: four"), "");
  EXPECT_NE(fileCheck(out, "// CHECK: one\n// CHECK-NEXT: three"), "");
  EXPECT_NE(fileCheck(out, "// CHECK: three\n// CHECK: one"), "");
  EXPECT_EQ(fileCheck(out, "// CHECK: one\n// CHECK-NOT: one\n// CHECK: four"), "");
  EXPECT_NE(fileCheck(out, "// CHECK: one\n// CHECK-NOT: three\n// CHECK: four"), "");
  EXPECT_NE(fileCheck(out, "// CHECK: three\n// CHECK-NOT: four"), "");
  EXPECT_NE(fileCheck(out, "// CHECK: four\n// CHECK-NONE: one"), "");
  EXPECT_EQ(fileCheck(out, "// CHECK-NONE: five"), "");
}

} // namespace
} // namespace kiln::test
