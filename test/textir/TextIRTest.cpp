// Tests of the graph IR's text form (Printer.cpp, Parser.cpp) and DOT output (Dot.cpp).

#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

using namespace kiln;

namespace {

/// Parses \p text, failing the test with the parser's message on error.
std::unique_ptr<Module> parseOrFail(const std::string &text) {
  Expected<std::unique_ptr<Module>> m = parseModule(text);
  if (!m) {
    ADD_FAILURE() << m.getError().toString() << "\nin:\n" << text;
    return nullptr;
  }
  return std::move(m).get();
}

/// A module that exercises many operators: multi-result TopK, variadic Concat, quantized
/// and bool types, explicit-type operators, and axes given negative to the builders.
std::unique_ptr<Module> buildBigModule() {
  auto m = std::make_unique<Module>();
  Function *f = m->createFunction("main");
  Placeholder *x = m->createPlaceholder(ElemKind::Float, {1, 3, 8, 8}, "x");
  auto *conv = f->createConv("conv1", x, 4, 3, 1, 1);
  auto *relu = f->createRelu("relu", conv);
  auto *pool = f->createMaxPool("pool", relu, {2, 2}, {2, 2}, {0, 0, 0, 0});
  auto *avg = f->createAvgPool("avg", relu, {3, 3}, {1, 1}, {1, 1, 1, 1}, true);
  auto *gap = f->createGlobalAvgPool("gap", avg);
  auto *flat = f->createFlatten("flat", pool, 1);
  auto *fc = f->createFullyConnected("fc", flat, 10);
  auto *sm = f->createSoftMax("sm", fc, -1);
  auto *topk = f->createTopK("topk", sm, 3);
  auto *add = f->createAdd("add", topk->getValues(), topk->getValues());
  auto *idxf =
      f->createConvertTo("idxf", m->uniqueType(ElemKind::Float, {1, 3}), topk->getIndices());
  auto *cat = f->createConcat("cat", {add, idxf, add}, -1);
  f->createSave("out", cat);
  Constant *idx = m->createConstant("idx", Tensor(ElemKind::Int64I, {2}, {0, 2}));
  f->createSave("gathered", f->createGather("gather", cat, idx, -1));
  f->createSave("argmax", f->createArgMax("am", sm, -1, true));
  f->createSave("mean", f->createReduceMean("rm", relu, {-1, -2}, false));
  f->createSave("lsm", f->createLogSoftMax("lsm", fc, -1));

  Constant *c4 = m->createConstant("ones4", Tensor(ElemKind::Float, {4}, {1, 1, 1, 1}));
  Constant *v4 = m->createConstant("var4", Tensor(ElemKind::Float, {4}, {0.5, 1, 2, 4}));
  f->createSave("bn", f->createBatchNormalization("bn", conv, c4, c4, v4, v4, 1e-5f, -3));
  Constant *s10 = m->createConstant(ElemKind::Float, {10}, "ln.scale");
  f->createSave("ln", f->createLayerNormalization("ln", fc, s10, s10, -1, 1e-5f));

  auto *tr = f->createTranspose("tr", pool, {0, 2, 3, 1});
  f->createSave("tr", f->createSigmoid("sig", tr));
  auto *sl = f->createSlice("sl", pool, {0, 0, 1, 1}, {1, 4, 3, 3});
  f->createSave("pad", f->createPad("pad", sl, {0, 0, 1, 1, 0, 0, 1, 1}, 0.5f));
  auto *gflat = f->createReshape("gflat", gap, {1, 4});
  auto *tile = f->createTile("tile", gflat, {2, 1});
  f->createSave("bc", f->createBroadcast("bc", gflat, {3, 1, 4}));
  auto *splat = f->createSplat("splat", m->uniqueType(ElemKind::Float, {2, 4}), 1.5f);
  auto *cmp = f->createCmpLT("cmp", tile, splat);
  auto *sel = f->createSelect("sel", cmp, tile, splat);
  Placeholder *b = m->createPlaceholder(ElemKind::Bool, {2, 4}, "mask");
  auto *sel2 = f->createSelect("sel2", b, sel, splat);
  auto *clip = f->createClip("clip", sel2, -1.0f, 1.0f);
  auto *leaky = f->createLeakyRelu("leaky", clip, 0.1f);
  auto *gelu = f->createGelu("gelu", leaky, true);
  Tensor wt(ElemKind::Float, {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, -0.125});
  auto *mm = f->createMatMul("mm", gelu, m->createConstant("mmw", std::move(wt)));
  Constant *bias3 = m->createConstant("bias3", Tensor(ElemKind::Float, {3}, {0.1, 0.2, 0.3}));
  f->createSave("badd", f->createBatchedAdd("badd", mm, bias3));
  Placeholder *l = m->createPlaceholder(ElemKind::Float, {2, 2, 3}, "bl");
  Placeholder *r = m->createPlaceholder(ElemKind::Float, {2, 3, 2}, "br");
  f->createSave("bmm", f->createBatchMatMul("bmm", l, r));

  Placeholder *q = m->createPlaceholder(m->uniqueType(ElemKind::Int8Q, {2, 3}, 0.5f, -3), "q");
  auto *dq = f->createDequantize("dq", m->uniqueType(ElemKind::Float, {2, 3}), q);
  auto *qq = f->createQuantize("qq", m->uniqueType(ElemKind::Int8Q, {2, 3}, 0.25f, 1), dq);
  f->createSave("rq", f->createRescaleQuantized(
                          "rq", m->uniqueType(ElemKind::Int8Q, {2, 3}, 0.125f, 0), qq));
  Placeholder *h = m->createPlaceholder(ElemKind::Float16, {4}, "h");
  f->createSave("hneg", f->createNeg("hneg", h));
  return m;
}

/// Checks that \p f2 has the nodes of \p f1 with equal kinds, operands and types, and
/// that each parsed node's operator rule derives the printed types.
void expectSameStructure(const Function &f1, const Function &f2) {
  ASSERT_EQ(f1.numNodes(), f2.numNodes());
  for (const auto &p : f1.getNodes()) {
    const Node *n1 = p.get();
    const Node *n2 = f2.getNodeByName(n1->getName());
    ASSERT_NE(n2, nullptr) << n1->getName();
    EXPECT_EQ(n1->getKind(), n2->getKind());
    ASSERT_EQ(n1->getNumInputs(), n2->getNumInputs());
    for (unsigned i = 0; i < n1->getNumInputs(); i++) {
      EXPECT_EQ(n1->getNthInput(i).node->getName(), n2->getNthInput(i).node->getName());
      EXPECT_EQ(n1->getNthInput(i).resNo, n2->getNthInput(i).resNo);
    }
    ASSERT_EQ(n1->getNumResults(), n2->getNumResults());
    Expected<std::vector<Type>> rule = n2->computeResultTypes();
    ASSERT_TRUE(bool(rule)) << rule.getError().toString();
    ASSERT_EQ(rule->size(), n2->getNumResults());
    for (unsigned r = 0; r < n1->getNumResults(); r++) {
      EXPECT_EQ(*n1->getType(r), *n2->getType(r)) << n1->getName();
      EXPECT_TRUE((*rule)[r].sameShapeAndKind(*n2->getType(r))) << n1->getName();
    }
    EXPECT_EQ(printNodeAttrs(*n1), printNodeAttrs(*n2));
  }
}

} // namespace

TEST(TextIR, RoundTripManyOperators) {
  auto m = buildBigModule();
  Function *f = m->getFunction("main");
  ASSERT_FALSE(bool(f->verify())) << f->verify().toString();
  std::string text = m->toString();
  auto m2 = parseOrFail(text);
  ASSERT_TRUE(m2);
  EXPECT_EQ(text, m2->toString());
  expectSameStructure(*f, *m2->getFunction("main"));
  for (const auto &c : m->getConstants()) {
    Constant *c2 = m2->getConstantByName(c->getName());
    ASSERT_NE(c2, nullptr);
    EXPECT_TRUE(c->getPayload().isEqual(c2->getPayload())) << c->getName();
  }
  // Spot checks of the printed form.
  EXPECT_NE(text.find("%topk = TopK(%sm) {K=3} : float<1x3>, i64<1x3>"), std::string::npos);
  EXPECT_NE(text.find("%idxf = ConvertTo(%topk#1) : float<1x3>"), std::string::npos);
  EXPECT_NE(text.find("%cat = Concat(%add, %idxf, %add) {Axis=1} : float<1x9>"),
            std::string::npos);
  EXPECT_NE(text.find("%sm = SoftMax(%fc) {Axis=1}"), std::string::npos);
  EXPECT_NE(text.find("placeholder @q : i8q<2x3:0.5:-3>"), std::string::npos);
  EXPECT_NE(text.find("placeholder @mask : bool<2x4>"), std::string::npos);
  EXPECT_NE(text.find("constant @idx : i64<2> = [0, 2]"), std::string::npos);
  EXPECT_NE(text.find("constant @ln.scale : float<10> = splat(0)"), std::string::npos);
  EXPECT_NE(text.find("  Save(%cat, @out)\n"), std::string::npos);
  EXPECT_NE(text.find("{Kernels=[3,3], Strides=[1,1], Pads=[1,1,1,1], Dilations=[1,1], "
                      "Group=1}"),
            std::string::npos);
}

// The per-channel quantized nodes: their extra vector operands, explicit quantized result
// types and int32 / float biases survive print -> parse -> print.
TEST(TextIR, RoundTripChannelwiseQuantized) {
  Module m;
  Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(m.uniqueType(ElemKind::UInt8Q, {1, 2, 4, 4}, 0.5f, 128), "x");
  Tensor wt(Type(ElemKind::Int8Q, {3, 2, 2, 2}, 1.0f, 0));
  for (size_t i = 0; i < wt.size(); i++)
    wt.setFromDouble(i, i % 2 ? -double(i * 11) : double(i * 5));
  auto *w = m.createConstant("w", std::move(wt));
  auto *s = m.createConstant("s", Tensor(ElemKind::Float, {3}, {0.5, 0.25, 0.125}));
  Tensor ot(ElemKind::Int32I, {3});
  ot.setFromDouble(0, 0), ot.setFromDouble(1, -3), ot.setFromDouble(2, 7);
  auto *o = m.createConstant("o", std::move(ot));
  Tensor bt(ElemKind::Int32I, {3});
  bt.setFromDouble(0, 100), bt.setFromDouble(1, -100), bt.setFromDouble(2, 5);
  auto *b = m.createConstant("b", std::move(bt));
  auto *cv = f->createChannelwiseQuantizedConvolution(
      "cw", m.uniqueType(ElemKind::Int8Q, {1, 3, 2, 2}, 0.75f, -2), x, w, s, o, b, {2, 2},
      {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, "Clip", -1.5f, 3.0f);
  f->createSave("cw", cv);
  auto *flat = f->createReshape("flat", cv, {1, 12});
  auto *fw = m.createConstant(m.uniqueType(ElemKind::UInt8Q, {12, 2}, 1.0f, 0), "fw");
  auto *fs = m.createConstant("fs", Tensor(ElemKind::Float, {2}, {1.5, 0.5}));
  auto *fo = m.createConstant(ElemKind::Int32I, {2}, "fo");
  auto *fb = m.createConstant("fb", Tensor(ElemKind::Float, {2}, {-1.25, 2}));
  f->createSave("fc", f->createChannelwiseQuantizedFullyConnected(
                          "fc", m.uniqueType(ElemKind::UInt8Q, {1, 2}, 0.125f, 3), flat, fw,
                          fs, fo, fb, "None", 0.0f, 0.0f));
  ASSERT_FALSE(bool(f->verify())) << f->verify().toString();
  std::string text = m.toString();
  auto m2 = parseOrFail(text);
  ASSERT_TRUE(m2);
  EXPECT_EQ(text, m2->toString());
  expectSameStructure(*f, *m2->getFunction("main"));
  EXPECT_NE(text.find("%cw = ChannelwiseQuantizedConvolution(@x, @w, @s, @o, @b) "
                      "{Kernels=[2,2], Strides=[2,2], Pads=[0,0,0,0], Dilations=[1,1], "
                      "Group=1, Activation=\"Clip\", Alpha=-1.5, Beta=3} : i8q<1x3x2x2:0.75:-2>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ChannelwiseQuantizedFullyConnected(%flat, @fw, @fs, @fo, @fb) "
                      "{Activation=\"None\", Alpha=0, Beta=0} : u8q<1x2:0.125:3>"),
            std::string::npos)
      << text;
  for (const char *c : {"w", "s", "o", "b", "fb"})
    EXPECT_TRUE(m.getConstantByName(c)->getPayload().isEqual(
        m2->getConstantByName(c)->getPayload()))
        << c;
}

TEST(TextIR, RoundTripConstantDataExactly) {
  Module m;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor f(ElemKind::Float, {8});
  auto fh = f.getHandle<float>();
  float fv[8] = {0.1f, -0.0f, inf, -inf, nan, 1e-30f, 1.4e-45f, 3.40282347e38f};
  for (int i = 0; i < 8; i++)
    fh.raw(i) = fv[i];
  m.createConstant("f", std::move(f));
  m.createConstant("h", Tensor(ElemKind::Float16, {3}, {0.1, -65504, 6e-8}));
  m.createConstant("bf", Tensor(ElemKind::BFloat16, {2}, {0.1, -3.5}));
  Tensor i8(Type(ElemKind::Int8Q, {3}, 0.5f, -3));
  i8.getHandle<int8_t>().set({-128, 0, 127});
  m.createConstant("i8", std::move(i8));
  Tensor u8(Type(ElemKind::UInt8Q, {2}, 1.5f, 128));
  u8.getHandle<uint8_t>().set({0, 255});
  m.createConstant("u8", std::move(u8));
  Tensor i32q(Type(ElemKind::Int32Q, {2}, 0.001f, 0));
  i32q.getHandle<int32_t>().set({std::numeric_limits<int32_t>::min(), 7});
  m.createConstant("i32q", std::move(i32q));
  Tensor i64(ElemKind::Int64I, {2});
  i64.getHandle<int64_t>().set(
      {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()});
  m.createConstant("i64", std::move(i64));
  m.createConstant("b", Tensor(ElemKind::Bool, {3}, {1, 0, 1}));
  m.createConstant("scalar", Tensor(ElemKind::Float, {}, {2.5}));
  m.createConstant("empty", Tensor(ElemKind::Float, {0, 3}));
  m.createConstant("nans", Tensor(ElemKind::Float, {2}, {nan, nan}));

  std::string text = m.toString();
  auto m2 = parseOrFail(text);
  ASSERT_TRUE(m2);
  EXPECT_EQ(text, m2->toString());
  for (const auto &c : m.getConstants())
    EXPECT_TRUE(c->getPayload().isEqual(m2->getConstantByName(c->getName())->getPayload()))
        << c->getName() << "\n" << text;
  EXPECT_NE(text.find("= [0.100000001, -0, inf, -inf, nan, 1e-30, 1.40129846e-45, "
                      "3.40282347e+38]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("constant @i64 : i64<2> = [-9223372036854775808, 9223372036854775807]"),
            std::string::npos);
  EXPECT_NE(text.find("constant @b : bool<3> = [true, false, true]"), std::string::npos);
  EXPECT_NE(text.find("constant @scalar : float<> = [2.5]"), std::string::npos);
  EXPECT_NE(text.find("constant @empty : float<0x3> = []"), std::string::npos);
  EXPECT_NE(text.find("constant @nans : float<2> = splat(nan)"), std::string::npos);
}

TEST(TextIR, LargeConstantsAreElidedByOption) {
  Module m;
  PseudoRNG rng(7);
  Tensor big(ElemKind::Float, {5000});
  big.randomize(-1, 1, rng);
  m.createConstant("big", std::move(big));
  Tensor small(ElemKind::Float, {6}, {1, 2, 3, 4, 5, 6});
  m.createConstant("small", std::move(small));
  Tensor zeros(ElemKind::Float, {10000});
  m.createConstant("zeros", std::move(zeros));

  std::string def = m.toString();
  EXPECT_NE(def.find("constant @big : float<5000> = elided("), std::string::npos);
  EXPECT_NE(def.find("constant @small : float<6> = [1, 2, 3, 4, 5, 6]"), std::string::npos);
  EXPECT_NE(def.find("constant @zeros : float<10000> = splat(0)"), std::string::npos);

  PrintOptions opts;
  opts.maxConstantElements = 4;
  std::string elided = printModule(m, opts);
  EXPECT_NE(elided.find("constant @small : float<6> = elided("), std::string::npos);
  opts.maxConstantElements = size_t(-1);
  std::string all = printModule(m, opts);
  EXPECT_EQ(all.find("elided"), std::string::npos);

  // Elided constants parse as zero-filled, and the same data gives the same hash.
  auto m2 = parseOrFail(def);
  ASSERT_TRUE(m2);
  const Tensor &p = m2->getConstantByName("big")->getPayload();
  ASSERT_EQ(p.size(), 5000u);
  EXPECT_EQ(p.getHandle<float>().raw(17), 0.0f);
  auto m3 = parseOrFail(all);
  ASSERT_TRUE(m3);
  EXPECT_EQ(m3->toString(), def);
}

TEST(TextIR, OddNamesAreQuoted) {
  Module m;
  Function *f = m.createFunction("my fn");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {2}, "input:0/a b");
  Constant *c = m.createConstant("w\"\\\n\x01", Tensor(ElemKind::Float, {2}, {1, 2}));
  auto *a = f->createAdd("add#1 \"x\"", x, c);
  f->createSave("out{}", f->createRelu("ünï", a));
  std::string text = m.toString();
  EXPECT_NE(text.find("placeholder @\"input:0/a b\" : float<2>"), std::string::npos) << text;
  EXPECT_NE(text.find("constant @\"w\\\"\\\\\\n\\x01\""), std::string::npos) << text;
  EXPECT_NE(text.find("function \"my fn\" {"), std::string::npos) << text;
  auto m2 = parseOrFail(text);
  ASSERT_TRUE(m2);
  EXPECT_EQ(text, m2->toString());
  EXPECT_NE(m2->getFunction("my fn")->getNodeByName("add#1 \"x\""), nullptr);
  EXPECT_NE(m2->getConstantByName("w\"\\\n\x01"), nullptr);
}

TEST(TextIR, HandWrittenText) {
  const char *text = R"(
// A tiny network, written by hand.
placeholder @x : float<1x3x8x8>
constant @w : float<4x3x3x3> = splat(0.5)
constant @b : float<4> = [1, 2, 3.5e0, -4]   // exact values
placeholder @y : float<1x4x8x8>
placeholder @v : float<1x4x8x2>
placeholder @i : i64<1x4x8x2>

function main {
  %c = Convolution(@x, @w, @b) {Kernels=[3,3], Strides=[1,1], Pads=[1,1,1,1],
                                Dilations=[1,1], Group=1} : float<1x4x8x8>
  %t = TopK(%c) {K=2} : float<1x4x8x2>, i64<1x4x8x2>
  %u = Add(%t#0, %t) : float<1x4x8x2>
  %z = Clip(%u) {Max=inf, Min=-inf} : float<1x4x8x2>
  Save(%c, @y)
  Save(%z, @v)
  %si = Save(%t#1, @i)
}
)";
  auto m = parseOrFail(text);
  ASSERT_TRUE(m);
  Function *f = m->getFunction("main");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->numNodes(), 7u);
  auto *conv = dyn_cast<ConvolutionNode>(f->getNodeByName("c"));
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->getKernels(), (std::vector<dim_t>{3, 3}));
  EXPECT_EQ(conv->getPads(), (std::vector<dim_t>{1, 1, 1, 1}));
  EXPECT_EQ(conv->getGroup(), 1u);
  EXPECT_EQ(conv->getInput().node, m->getPlaceholderByName("x"));
  EXPECT_EQ(conv->getFilter().node, m->getConstantByName("w"));
  auto *topk = dyn_cast<TopKNode>(f->getNodeByName("t"));
  ASSERT_NE(topk, nullptr);
  EXPECT_EQ(topk->getK(), 2u);
  EXPECT_EQ(topk->getIndicesType()->kind, ElemKind::Int64I);
  auto *add = dyn_cast<AddNode>(f->getNodeByName("u"));
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->getNthInput(0), NodeValue(topk, 0));
  EXPECT_EQ(add->getNthInput(1), NodeValue(topk, 0));
  auto *clip = dyn_cast<ClipNode>(f->getNodeByName("z"));
  ASSERT_NE(clip, nullptr);
  EXPECT_TRUE(std::isinf(clip->getMax()) && clip->getMax() > 0);
  EXPECT_TRUE(std::isinf(clip->getMin()) && clip->getMin() < 0);
  // Saves without a name take the placeholder's name.
  EXPECT_NE(dyn_cast<SaveNode>(f->getNodeByName("y")), nullptr);
  EXPECT_NE(dyn_cast<SaveNode>(f->getNodeByName("v")), nullptr);
  auto *si = dyn_cast<SaveNode>(f->getNodeByName("si"));
  ASSERT_NE(si, nullptr);
  EXPECT_EQ(si->getInput(), NodeValue(topk, 1));
  EXPECT_EQ(f->getSaves().size(), 3u);
  const Tensor &bias = m->getConstantByName("b")->getPayload();
  EXPECT_EQ(bias.getHandle<float>().raw(2), 3.5f);
  EXPECT_EQ(m->getConstantByName("w")->getPayload().getHandle<float>().raw(80), 0.5f);
  // Printing gives the canonical form, which parses to the same text again.
  std::string printed = m->toString();
  EXPECT_NE(printed.find("  %si = Save(%t#1, @i)\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("  Save(%z, @v)\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("{Min=-inf, Max=inf}"), std::string::npos) << printed;
  auto m2 = parseOrFail(printed);
  ASSERT_TRUE(m2);
  EXPECT_EQ(printed, m2->toString());
}

TEST(TextIR, ParseFunctionIntoExistingModule) {
  Module m;
  m.createPlaceholder(ElemKind::Float, {2, 3}, "in");
  m.createPlaceholder(ElemKind::Float, {2, 3}, "out");
  Error e = parseFunctionInto(m, R"(
constant @k : float<2x3> = splat(2)
function scale {
  %m = Mul(@in, @k) : float<2x3>
  Save(%m, @out)
})");
  ASSERT_FALSE(bool(e)) << e.toString();
  Function *f = m.getFunction("scale");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->numNodes(), 2u);
  EXPECT_FALSE(bool(f->verify()));
  EXPECT_EQ(f->toString(), "function scale {\n  %m = Mul(@in, @k) : float<2x3>\n"
                           "  Save(%m, @out)\n}\n");

  // A failing parse leaves no function and no constant behind.
  Error bad = parseFunctionInto(m, R"(
constant @k2 : float<2x3> = splat(2)
function broken {
  %m = Mul(@in, @k2) : float<2x3>
  %n = Mul(%m, %missing) : float<2x3>
})");
  ASSERT_TRUE(bool(bad));
  EXPECT_EQ(bad.code(), ErrorCode::ModelParse);
  EXPECT_EQ(m.getFunction("broken"), nullptr);
  EXPECT_EQ(m.getConstantByName("k2"), nullptr);
  EXPECT_EQ(m.getFunctions().size(), 1u);
}

namespace {
struct BadCase {
  const char *text;
  const char *message; ///< Expected substring of the error message.
  unsigned line;       ///< Expected line of the reported position.
};
} // namespace

TEST(TextIR, MalformedInputsGiveModelParseErrors) {
  const std::string pre = "placeholder @x : float<2>\nplaceholder @y : float<2>\n"
                          "constant @c : float<2> = [1, 2]\n";
  const std::vector<BadCase> cases = {
      {"placeholder @p : float<1x3", "expected '>' to close the type, found end of input", 1},
      {"placeholder @p : floot<1>", "unknown element kind 'floot'", 1},
      {"placeholder @p : i8q<2x3>", "expected ':' before the scale", 1},
      {"placeholder @p : float<2:0.5:1>", "only quantized element kinds", 1},
      {"placeholder @p : float<1x2x3x4x5x6x7x8x9>", "at most 8 dimensions", 1},
      {"placeholder @p : float<2x>", "expected a dimension", 1},
      {"placeholder @p : float<1>\nplaceholder @p : float<2>", "duplicate storage name '@p'", 2},
      {"placeholder @\"abc : float<1>", "unterminated string", 1},
      {"placeholder @\"\" : float<1>", "must not be empty", 1},
      {"hello", "expected 'placeholder', 'constant' or 'function', found 'hello'", 1},
      {"constant @k : float<3> = [1, 2]", "expected 3 values for float<3>, found 2", 1},
      {"constant @k : float<1> = [1, 2]", "too many values", 1},
      {"constant @k : i8q<2:1:0> = [1, 300]", "value 300 is out of range [-128, 127]", 1},
      {"constant @k : float<2> = [1, x]", "expected a number, found 'x'", 1},
      {"constant @k : float<2> = 7", "expected constant data", 1},
      {"constant @k : float<100000x100000x100000> = splat(0)", "too large", 1},
      {"function f {\n  %a = Frobnicate(@x) : float<2>\n}", "unknown operator 'Frobnicate'", 2},
      {"function f {\n  %a = Relu(%nope) : float<2>\n}", "unknown value '%nope'", 2},
      {"function f {\n  %a = Relu(@nope) : float<2>\n}", "unknown storage '@nope'", 2},
      {"function f {\n  %a = Relu(@x) : float<2>\n  %a = Relu(@x) : float<2>\n}",
       "duplicate node name '%a'", 3},
      {"function f {\n  %a = Add(@x) : float<2>\n}",
       "Add takes 2 operand(s) (LHS, RHS), found 1", 2},
      {"function f {\n  %a = Relu(@x) {Alpha=1} : float<2>\n}",
       "Relu has no attribute 'Alpha' (it has none)", 2},
      {"function f {\n  %a = LeakyRelu(@x) : float<2>\n}",
       "LeakyRelu requires attribute 'Alpha'", 2},
      {"function f {\n  %a = LeakyRelu(@x) {Alpha=[1]} : float<2>\n}",
       "attribute 'Alpha' of LeakyRelu expects a number", 2},
      {"function f {\n  %a = LeakyRelu(@x) {Alpha=1, Alpha=2} : float<2>\n}",
       "duplicate attribute 'Alpha'", 2},
      {"function f {\n  %a = TopK(@x) {K=-1} : float<1>, i64<1>\n}",
       "expected a non-negative integer, found '-1'", 2},
      {"function f {\n  %a = TopK(@x) {K=99999999999999999999999} : float<1>, i64<1>\n}",
       "out of range", 2},
      {"function f {\n  %a = Relu(@x)\n}", "Relu has 1 result(s) but 0 type(s) are given", 3},
      {"function f {\n  %a = TopK(@x) {K=1} : float<1>, i64<1>\n  %b = Relu(%a#2) : "
       "float<1>\n}",
       "'%a' has 2 result(s); #2 is out of range", 3},
      {"function f {\n  %a = Relu(@x) : float<3>\n}", "function 'f' is invalid", 1},
      {"function f {\n  %a = Relu(@x) : float<2>\n", "function 'f' is not closed with '}'", 1},
      {"function f {\n  Save(@x, @c)\n}", "Output operand of Save must be a placeholder", 2},
      {"function f {\n  %s = Save(@x, @y)\n  %b = Relu(%s) : float<2>\n}", "has no result",
       3},
      {"function f {\n}\nfunction f {\n}", "duplicate function name 'f'", 3},
      {"function f {\n  %a = Relu(@x : float<2>\n}", "expected ',' between operands", 2},
      {"function f {\n  %a = Placeholder() : float<2>\n}", "declared at module level", 2},
      {"function f {\n  %a = Relu(@x) : float<2>,\n}", "expected a type", 3},
  };
  for (const BadCase &c : cases) {
    std::string text = pre + c.text;
    Expected<std::unique_ptr<Module>> m = parseModule(text);
    ASSERT_FALSE(bool(m)) << "parsed:\n" << text;
    const Error &e = m.getError();
    EXPECT_EQ(e.code(), ErrorCode::ModelParse) << e.toString();
    EXPECT_NE(e.message().find(c.message), std::string::npos)
        << "message: " << e.message() << "\nexpected: " << c.message;
    unsigned line = 0, col = 0;
    char sep = 0;
    ASSERT_EQ(std::sscanf(e.message().c_str(), "%u:%u%c", &line, &col, &sep), 3) << e.message();
    EXPECT_EQ(sep, ':');
    EXPECT_EQ(line, c.line + 3) << e.message();
    EXPECT_GE(col, 1u);
  }
}

TEST(TextIR, NeverCrashesOnDamagedInput) {
  auto m = buildBigModule();
  std::string text = m->toString();
  // Every prefix, then random byte edits: each parse succeeds or reports ModelParse.
  size_t failures = 0;
  auto check = [&](const std::string &t) {
    Expected<std::unique_ptr<Module>> r = parseModule(t);
    if (!r) {
      failures++;
      EXPECT_EQ(r.getError().code(), ErrorCode::ModelParse) << r.getError().toString();
    }
  };
  for (size_t n = 0; n < text.size(); n += 7)
    check(text.substr(0, n));
  std::mt19937 rng(1234);
  const char alphabet[] = "%@#:=,(){}[]<>x0123456789-.\"\\ \nabcinfnan";
  for (int iter = 0; iter < 400; iter++) {
    std::string t = text;
    for (int k = 0; k < 3; k++) {
      size_t at = rng() % t.size();
      switch (rng() % 3) {
      case 0:
        t[at] = alphabet[rng() % (sizeof(alphabet) - 1)];
        break;
      case 1:
        t.erase(at, 1 + rng() % 8);
        break;
      default:
        t.insert(at, 1, char(rng() % 256));
        break;
      }
    }
    check(t);
  }
  EXPECT_GT(failures, 0u);
}

TEST(TextIR, DotShowsNodesStorageAndEdges) {
  Module m;
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {1, 3, 8, 8}, "x");
  auto *conv = f->createConv("conv", x, 4, 3, 1, 1);
  auto *topk = f->createTopK("topk", conv, 2);
  auto *add = f->createAdd("add", topk->getValues(), topk->getValues());
  f->createSave("out", add);
  std::string dot = f->toDot();
  EXPECT_EQ(dot.rfind("digraph \"main\" {", 0), 0u) << dot;
  EXPECT_NE(dot.find("shape=record, label=\"{Convolution|conv|Kernels=[3,3]\\l"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("float\\<1x4x8x8\\>"), std::string::npos) << dot;
  EXPECT_NE(dot.find("Values: float\\<1x4x8x2\\>\\lIndices: i64\\<1x4x8x2\\>"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("label=\"Placeholder\\n@x\\nfloat<1x3x8x8>\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("shape=cylinder"), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"Constant\\n@conv.filter"), std::string::npos) << dot;
  // Edges: operand -> user, labelled with the operand name.
  EXPECT_NE(dot.find("n0 -> n1 [label=\"Input\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> n2 [label=\"Values -> LHS\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> n2 [label=\"Values -> RHS\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("[label=\"Filter\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n3 -> s"), std::string::npos) << dot; // Save -> its placeholder
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");

  std::string path = ::testing::TempDir() + "/kiln_textir_test.dot";
  ASSERT_FALSE(bool(f->dumpDot(path)));
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), dot);
  std::remove(path.c_str());
  Error e = f->dumpDot("/nonexistent-dir/x/y.dot");
  EXPECT_TRUE(bool(e));
}

TEST(TextIR, PrintsOperandsBeforeUsers) {
  // Rewire the first node to use a later one: creation order is no longer topological.
  Module m;
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {2}, "x");
  auto *a = f->createRelu("a", x);
  auto *b = f->createNeg("b", x);
  a->setNthInput(0, b);
  f->createSave("y", a);
  ASSERT_FALSE(bool(f->verify()));
  std::string text = m.toString();
  EXPECT_LT(text.find("%b = Neg(@x)"), text.find("%a = Relu(%b)")) << text;
  auto m2 = parseOrFail(text);
  ASSERT_TRUE(m2);
  EXPECT_EQ(text, m2->toString());
}
