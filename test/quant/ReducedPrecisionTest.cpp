// The float32 -> bfloat16 / float16 conversion (kiln/Quantization/ReducedPrecision.h):
// structure (ConvertTo only at region edges, keep-float, inputs and outputs unchanged) and
// numbers hand-computed, run on the Interpreter (the reference of converted functions).

#include "kiln/Quantization/ReducedPrecision.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;

namespace {

unsigned countKind(const Function *f, NodeKind k) {
  unsigned n = 0;
  for (const auto &node : f->getNodes())
    n += node->getKind() == k;
  return n;
}

Constant *constant(Module &m, const std::string &name, Dims d, std::initializer_list<double> v) {
  return m.createConstant(name, Tensor(ElemKind::Float, d, v));
}

/// x[1,3] -> FC(W[3,2], b[2]) -> Relu -> Save y. Column 0 of W is {256, 1, 1}, column 1
/// {1 + 2^-8 + 2^-10, -1, 0}; b = 0; x = {1, 1, 1}.
///
/// Float32: y = {258, 2^-8 + 2^-10 = 0.0048828125}.
/// bfloat16 (8 significant bits): x and W's 256, 1, -1 are exact; 1 + 2^-8 + 2^-10 rounds
/// to 1 + 2^-7 (above the half-way point 1 + 2^-8). Accumulated in float32 the first sum is
/// 256 + 1 + 1 = 258, exact in bfloat16 (step 2 at 256); accumulated in bfloat16 it would
/// be 256 (256 + 1 = 257 ties to even 256, twice). Column 1: 1.0078125 - 1 = 0.0078125.
/// So bf16 y = {258, 0.0078125}.
/// float16 (11 significant bits): every weight is exact, y = {258, 0.0048828125}.
struct SmallFC {
  ExecutionEngine ee{"Interpreter"};
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {1, 3}, "x");
  Constant *w = constant(m, "W", {3, 2}, {256, 1.0048828125, 1, -1, 1, 0});
  Constant *b = constant(m, "b", {2}, {0, 0});
  FullyConnectedNode *fc = f->createFullyConnected("fc", x, w, b);
  ReluNode *relu = f->createRelu("relu", fc);
  SaveNode *save = f->createSave("y", relu);

  std::vector<float> run() {
    EXPECT_FALSE(ee.compile());
    PlaceholderBindings bind;
    bind.allocate(m.getPlaceholders());
    auto h = bind.get(x)->getHandle<float>();
    for (size_t i = 0; i < 3; i++)
      h.raw(i) = 1;
    EXPECT_FALSE(ee.run(bind));
    auto y = bind.get(save->getPlaceholder())->getHandle<float>();
    return {y.raw(0), y.raw(1)};
  }
};

} // namespace

TEST(ReducedPrecision, ParsesPrecisionNames) {
  EXPECT_EQ(*parsePrecision("bf16"), ElemKind::BFloat16);
  EXPECT_EQ(*parsePrecision("bfloat16"), ElemKind::BFloat16);
  EXPECT_EQ(*parsePrecision("fp16"), ElemKind::Float16);
  EXPECT_EQ(*parsePrecision("float16"), ElemKind::Float16);
  Expected<ElemKind> bad = parsePrecision("fp8");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(bad.getError().message().find("fp8"), std::string::npos);
}

TEST(ReducedPrecision, RejectsANonHalfKind) {
  SmallFC n;
  PrecisionOptions o;
  o.kind = ElemKind::Int8Q;
  Expected<PrecisionReport> r = convertPrecision(n.f, o);
  ASSERT_FALSE(bool(r));
  EXPECT_EQ(r.getError().code(), ErrorCode::InvalidArgument);
}

TEST(ReducedPrecision, Float32ReferenceOfTheSmallFC) {
  SmallFC n;
  std::vector<float> y = n.run();
  EXPECT_EQ(y[0], 258.0f);
  EXPECT_EQ(y[1], 0.0048828125f);
}

TEST(ReducedPrecision, BFloat16ConvertsInsideAndOnlyAtTheEdges) {
  SmallFC n;
  Expected<PrecisionReport> r = convertPrecision(n.f, {});
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  EXPECT_EQ(r->convertedNodes, 2u); // fc, relu
  EXPECT_EQ(r->convertedConstants, 2u);
  EXPECT_EQ(r->entryConverts, 1u);
  EXPECT_EQ(r->exitConverts, 1u);
  EXPECT_TRUE(r->keptFloat.empty());
  EXPECT_EQ(countKind(n.f, NodeKind::ConvertTo), 2u);
  // Inputs and outputs keep their types.
  EXPECT_EQ(n.x->getType()->kind, ElemKind::Float);
  EXPECT_EQ(n.save->getPlaceholder()->getType()->kind, ElemKind::Float);
  // x -> ConvertTo(bf16) -> fc (bf16 weights, bias) -> relu (bf16) -> ConvertTo(float) -> Save.
  auto *fc = n.f->getNodeByName("fc");
  ASSERT_TRUE(fc);
  auto *in = dyn_cast<ConvertToNode>(fc->getNthInput(0).node);
  ASSERT_TRUE(in);
  EXPECT_EQ(in->getInput().node, n.x);
  EXPECT_EQ(in->getType(0)->kind, ElemKind::BFloat16);
  for (unsigned i : {1u, 2u}) {
    auto *c = dyn_cast<Constant>(fc->getNthInput(i).node);
    ASSERT_TRUE(c) << i;
    EXPECT_EQ(c->getType()->kind, ElemKind::BFloat16);
  }
  // The weight rounded at compile time: 1 + 2^-8 + 2^-10 -> 1 + 2^-7.
  auto wh = cast<Constant>(fc->getNthInput(1).node)->getPayload().getHandle<bfloat16>();
  EXPECT_EQ(float(wh.raw(1)), 1.0078125f);
  EXPECT_EQ(float(wh.raw(0)), 256.0f);
  EXPECT_EQ(fc->getType(0)->kind, ElemKind::BFloat16);
  auto *relu = n.f->getNodeByName("relu");
  EXPECT_EQ(relu->getNthInput(0).node, fc); // no conversion inside the region
  EXPECT_EQ(relu->getType(0)->kind, ElemKind::BFloat16);
  auto *out = dyn_cast<ConvertToNode>(n.save->getInput().node);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->getInput().node, relu);
  EXPECT_EQ(out->getType(0)->kind, ElemKind::Float);
  // The float32 originals are gone (no float user left).
  EXPECT_EQ(n.m.getConstants().size(), 2u);

  std::vector<float> y = n.run();
  EXPECT_EQ(y[0], 258.0f);     // float32 accumulation (bf16 accumulation: 256)
  EXPECT_EQ(y[1], 0.0078125f); // the weight's rounding
}

TEST(ReducedPrecision, Float16KeepsElevenBits) {
  SmallFC n;
  PrecisionOptions o;
  o.kind = ElemKind::Float16;
  Expected<PrecisionReport> r = convertPrecision(n.f, o);
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  EXPECT_EQ(n.f->getNodeByName("fc")->getType(0)->kind, ElemKind::Float16);
  std::vector<float> y = n.run();
  EXPECT_EQ(y[0], 258.0f);
  EXPECT_EQ(y[1], 0.0048828125f);
}

// x -> fc1 -> relu -> SoftMax (kept) -> fc2 -> Save y; relu also saved as r.
// Two regions {fc1, relu} and {fc2}: entries x and the SoftMax, exits relu (one ConvertTo
// shared by the SoftMax and the Save r) and fc2.
TEST(ReducedPrecision, KeepFloatByKindSplitsTheRegion) {
  ExecutionEngine ee{"Interpreter"};
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {2, 4}, "x");
  auto *fc1 = f->createFullyConnected("fc1", x, 3, 1);
  auto *relu = f->createRelu("relu", fc1);
  auto *sm = f->createSoftMax("sm", relu, 1);
  auto *fc2 = f->createFullyConnected("fc2", sm, 5, 2);
  auto *y = f->createSave("y", fc2);
  auto *rs = f->createSave("r", relu);
  PrecisionOptions o;
  o.keepFloat = {"SoftMax"};
  Expected<PrecisionReport> r = convertPrecision(f, o);
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  EXPECT_EQ(r->convertedNodes, 3u);
  EXPECT_EQ(r->entryConverts, 2u);
  EXPECT_EQ(r->exitConverts, 2u);
  ASSERT_EQ(r->keptFloat.size(), 1u);
  EXPECT_EQ(r->keptFloat[0].first, "sm (SoftMax)");
  EXPECT_EQ(r->keptFloat[0].second, "keep-float");
  EXPECT_EQ(sm->getType(0)->kind, ElemKind::Float);
  auto *smIn = dyn_cast<ConvertToNode>(sm->getNthInput(0).node);
  ASSERT_TRUE(smIn);
  EXPECT_EQ(smIn->getInput().node, relu);
  EXPECT_EQ(rs->getInput().node, smIn); // one exit per value
  auto *fc2In = dyn_cast<ConvertToNode>(fc2->getNthInput(0).node);
  ASSERT_TRUE(fc2In);
  EXPECT_EQ(fc2In->getInput().node, sm);
  EXPECT_EQ(fc2->getType(0)->kind, ElemKind::BFloat16);
  EXPECT_EQ(y->getInput().node->getKind(), NodeKind::ConvertTo);
  EXPECT_EQ(countKind(f, NodeKind::ConvertTo), 4u);
  EXPECT_EQ(x->getType()->kind, ElemKind::Float);
  EXPECT_EQ(y->getPlaceholder()->getType()->kind, ElemKind::Float);
  EXPECT_EQ(rs->getPlaceholder()->getType()->kind, ElemKind::Float);
}

// Two FCs share W; fc2 is kept by name: W stays float32 for it, fc1 reads a bf16 copy.
TEST(ReducedPrecision, KeepFloatByNameKeepsASharedConstantForItsFloatUser) {
  Module m;
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {1, 2}, "x");
  Constant *w = constant(m, "W", {2, 2}, {1, 2, 3, 4});
  Constant *b = constant(m, "b", {2}, {0.5, 0.25});
  auto *fc1 = f->createFullyConnected("fc1", x, w, b);
  auto *fc2 = f->createFullyConnected("fc2", x, w, b);
  f->createSave("y1", fc1);
  f->createSave("y2", fc2);
  PrecisionOptions o;
  o.keepFloat = {"fc2"};
  Expected<PrecisionReport> r = convertPrecision(f, o);
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  EXPECT_EQ(r->convertedNodes, 1u);
  EXPECT_EQ(r->convertedConstants, 2u);
  EXPECT_EQ(fc2->getNthInput(1).node, w);
  EXPECT_EQ(fc2->getNthInput(0).node, x);
  EXPECT_EQ(fc2->getType(0)->kind, ElemKind::Float);
  EXPECT_NE(fc1->getNthInput(1).node, w);
  EXPECT_EQ(fc1->getNthInput(1).getElementType(), ElemKind::BFloat16);
  EXPECT_EQ(m.getConstants().size(), 4u); // W, b and their bf16 copies
}

// A float32 operand that is a ConvertTo(float) of a bf16 value is read at its source.
TEST(ReducedPrecision, ReadsAWidenedHalfValueAtItsSource) {
  Module m;
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::BFloat16, {1, 2}, "x");
  auto *wide = f->createConvertTo("wide", m.uniqueType(ElemKind::Float, {1, 2}), x);
  auto *relu = f->createRelu("relu", wide);
  auto *s = f->createSave("y", relu);
  Expected<PrecisionReport> r = convertPrecision(f, {});
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  EXPECT_EQ(r->entryConverts, 0u);
  EXPECT_EQ(relu->getNthInput(0).node, x);
  EXPECT_EQ(relu->getType(0)->kind, ElemKind::BFloat16);
  EXPECT_EQ(countKind(f, NodeKind::ConvertTo), 1u); // the exit; "wide" had no other user
  EXPECT_EQ(s->getPlaceholder()->getType()->kind, ElemKind::Float);
}

// Convolution (3x3, pad 1, stride 2, 2 groups) in bf16 on the Interpreter, against float32.
// u = 2^-8 (bf16 keeps 8 significant bits; rounding to nearest errs by <= u relative).
// Inputs and weights are each rounded (a product errs by <= (2u + u^2) |x w|), the bias
// too (<= u |b| <= u, b in [-1, 1]), the float32 sum is exact to ~1e-7, and the result is
// rounded once more (<= u |y~|): |error| <= 2.1 u sum |x w| + 1.01 u |y| + 1.01 u.
TEST(ReducedPrecision, ConvolutionWithinTheDerivedBound) {
  ExecutionEngine ee{"Interpreter"};
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {1, 4, 7, 7}, "x");
  auto *conv = f->createConv("conv", x, 6, 3, 2, 1, 2);
  auto *save = f->createSave("y", conv);
  PseudoRNG rng(3);
  Tensor &filter = cast<Constant>(conv->getFilter().node)->getPayloadMutable();
  filter.randomize(-1, 1, rng);
  cast<Constant>(conv->getBias().node)->getPayloadMutable().randomize(-1, 1, rng);
  // Sum of |x w| per output, for the bound: computed by a second convolution of |x|, |W|.
  Function *g = m.createFunction("abs");
  Placeholder *ax = m.createPlaceholder(ElemKind::Float, {1, 4, 7, 7}, "ax");
  Tensor absW = filter.clone();
  for (size_t i = 0; i < absW.size(); i++)
    absW.setFromDouble(i, std::fabs(absW.getAsDouble(i)));
  auto *ac = g->createConvolution("aconv", ax, m.createConstant("absW", std::move(absW)),
                                  m.createConstant(ElemKind::Float, {6}, "zero"),
                                  conv->getKernels(), conv->getStrides(), conv->getPads(),
                                  conv->getDilations(), conv->getGroup());
  auto *asave = g->createSave("ay", ac);

  // Compiling optimises functions in place: convert a copy before the one compile.
  Function *h = f->clone("bf16");
  Expected<PrecisionReport> r = convertPrecision(h, {});
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  EXPECT_EQ(r->convertedNodes, 1u);
  EXPECT_EQ(r->convertedConstants, 2u);

  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  b.get(x)->randomize(-2, 2, rng);
  for (size_t i = 0; i < b.get(x)->size(); i++)
    b.get(ax)->setFromDouble(i, std::fabs(b.get(x)->getAsDouble(i)));
  ASSERT_FALSE(ee.compile());
  ASSERT_FALSE(ee.run(b, "main"));
  ASSERT_FALSE(ee.run(b, "abs"));
  Tensor ref = b.get(save->getPlaceholder())->clone();
  ASSERT_FALSE(ee.run(b, "bf16"));
  const Tensor &got = *b.get(save->getPlaceholder());
  const Tensor &sumAbs = *b.get(asave->getPlaceholder());
  const double u = std::ldexp(1.0, -8);
  double worst = 0;
  for (size_t i = 0; i < ref.size(); i++) {
    double y = ref.getAsDouble(i), e = std::fabs(got.getAsDouble(i) - y);
    double bound = 2.1 * u * sumAbs.getAsDouble(i) + 1.01 * u * std::fabs(y) + 1.01 * u + 1e-6;
    EXPECT_LE(e, bound) << "output " << i;
    worst = std::max(worst, e / bound);
  }
  EXPECT_GT(worst, 0); // the conversion changed something
}
