// Verifier tests: malformed graphs, each rejected with an Error whose message
// names the node, its operator kind, and the shapes or attributes at fault.

#include "kiln/Graph/Graph.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

using namespace kiln;

namespace {

class VerifierTest : public ::testing::Test {
protected:
  Module m;
  Function *f = m.createFunction("main");

  Placeholder *input(const Dims &dims, ElemKind k = ElemKind::Float,
                     const std::string &name = "in") {
    return m.createPlaceholder(k, dims, name);
  }
  Constant *weights(const Dims &dims, ElemKind k = ElemKind::Float,
                    const std::string &name = "w") {
    return m.createConstant(k, dims, name);
  }

  /// Expects verify() to fail with InvalidGraph and a message containing every
  /// one of \p parts; returns the message.
  std::string expectInvalid(std::initializer_list<std::string> parts) {
    Error e = f->verify();
    EXPECT_TRUE(bool(e)) << "the function verified, but it should not";
    if (!e)
      return "";
    EXPECT_EQ(e.code(), ErrorCode::InvalidGraph) << e.toString();
    for (const std::string &p : parts)
      EXPECT_NE(e.message().find(p), std::string::npos)
          << "message lacks \"" << p << "\":\n  " << e.message();
    return e.message();
  }

  /// A valid 1x3x8x8 convolution with the given attributes.
  ConvolutionNode *conv(const Dims &inDims, const Dims &filterDims,
                        dim_t biasLen, std::vector<dim_t> kernels,
                        std::vector<dim_t> strides, std::vector<dim_t> pads,
                        std::vector<dim_t> dilations, dim_t group) {
    return f->createConvolution("cv", input(inDims), weights(filterDims),
                                weights({biasLen}, ElemKind::Float, "b"),
                                kernels, strides, pads, dilations, group);
  }
};

TEST_F(VerifierTest, ValidGraphVerifies) {
  auto *c = f->createConv("conv", input({1, 3, 8, 8}), 4, 3, 1, 1);
  auto *r = f->createRelu("relu", c);
  f->createSave("out", r);
  Error e = f->verify();
  EXPECT_FALSE(e) << e.message();
}

// ------------------------------------------------------------------ types and
// ranks

TEST_F(VerifierTest, NineDimensionalPlaceholder) {
  auto *r = f->createRelu("relu", input({1, 2, 1, 2, 1, 2, 1, 2, 3}, ElemKind::Float, "x9"));
  f->createSave("out", r);
  expectInvalid({"'relu'", "(Relu)", "'x9'", "more than 8 dimensions"});
}

TEST_F(VerifierTest, AddOfFloatAndInt8) {
  Placeholder *a = input({2, 3}, ElemKind::Float, "a");
  Placeholder *b =
      m.createPlaceholder(m.uniqueType(ElemKind::Int8Q, {2, 3}, 0.5f, 0), "b");
  f->createAdd("sum", a, b);
  expectInvalid({"'sum'", "(Add)", "float<2x3>", "i8q<2x3:0.5:0>", "RHS"});
}

TEST_F(VerifierTest, ConvolutionOnRank3Input) {
  f->createConvolution("conv3d", input({3, 8, 8}), weights({4, 3, 3, 3}),
                       weights({4}, ElemKind::Float, "b"), {3, 3}, {1, 1},
                       {0, 0, 0, 0}, {1, 1}, 1);
  expectInvalid({"'conv3d'", "(Convolution)", "float<3x8x8>", "rank 4"});
}

TEST_F(VerifierTest, ConvolutionFilterKindMismatch) {
  f->createConvolution("cv", input({1, 3, 8, 8}),
                       weights({4, 3, 3, 3}, ElemKind::Float16),
                       weights({4}, ElemKind::Float, "b"), {3, 3}, {1, 1},
                       {0, 0, 0, 0}, {1, 1}, 1);
  expectInvalid(
      {"'cv'", "(Convolution)", "Filter float16<4x3x3x3>", "float<1x3x8x8>"});
}

TEST_F(VerifierTest, MatMulInnerDimsDisagree) {
  f->createMatMul("mm", input({2, 3}, ElemKind::Float, "a"),
                  input({4, 5}, ElemKind::Float, "b"));
  expectInvalid({"'mm'", "(MatMul)", "RHS float<4x5>", "LHS float<2x3>"});
}

TEST_F(VerifierTest, FullyConnectedBiasLength) {
  f->createFullyConnected("fc", input({2, 3}), weights({3, 4}),
                          weights({5}, ElemKind::Float, "b"));
  expectInvalid({"'fc'", "(FullyConnected)", "Bias float<5>", "float<3x4>"});
}

TEST_F(VerifierTest, GatherWithFloatIndices) {
  f->createGather("g", input({5, 4}), input({3}, ElemKind::Float, "idx"), 0);
  expectInvalid({"'g'", "(Gather)", "Indices float<3>", "i32 or i64"});
}

TEST_F(VerifierTest, SelectConditionMustBeBool) {
  Placeholder *a = input({4}, ElemKind::Float, "a");
  f->createSelect("sel", a, a, a);
  expectInvalid({"'sel'", "(Select)", "Cond float<4>", "bool"});
}

// ------------------------------------------------------------------ bad
// attributes

TEST_F(VerifierTest, ZeroStride) {
  conv({1, 3, 8, 8}, {4, 3, 3, 3}, 4, {3, 3}, {0, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  expectInvalid({"'cv'", "(Convolution)", "Strides = [0, 1]", "zero"});
}

TEST_F(VerifierTest, WrongPadsLength) {
  f->createMaxPool("mp", input({1, 3, 8, 8}), {2, 2}, {2, 2}, {0, 0});
  expectInvalid({"'mp'", "(MaxPool)", "Pads = [0, 0]", "4 entries"});
}

TEST_F(VerifierTest, GroupDoesNotDivideChannels) {
  conv({1, 3, 8, 8}, {4, 1, 3, 3}, 4, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2);
  expectInvalid({"'cv'", "(Convolution)", "Group = 2", "float<1x3x8x8>"});
}

TEST_F(VerifierTest, GroupDoesNotDivideOutputChannels) {
  conv({1, 4, 8, 8}, {3, 2, 3, 3}, 3, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2);
  expectInvalid(
      {"'cv'", "(Convolution)", "Group = 2", "Filter float<3x2x3x3>"});
}

TEST_F(VerifierTest, FilterDimsInconsistent) {
  conv({1, 3, 8, 8}, {4, 3, 5, 5}, 4, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  expectInvalid(
      {"'cv'", "(Convolution)", "Filter float<4x3x5x5>", "Kernels = [3, 3]"});
}

TEST_F(VerifierTest, WindowLargerThanInput) {
  // Dilation 4 makes the 3x3 kernel 9 wide; the input is 8 wide.
  conv({1, 3, 8, 8}, {4, 3, 3, 3}, 4, {3, 3}, {1, 1}, {0, 0, 0, 0}, {4, 4}, 1);
  expectInvalid({"'cv'", "(Convolution)", "float<1x3x8x8>", "window height 9"});
}

TEST_F(VerifierTest, PoolPadNotBelowKernel) {
  f->createAvgPool("ap", input({1, 3, 8, 8}), {2, 2}, {1, 1}, {2, 0, 0, 0},
                   false);
  expectInvalid(
      {"'ap'", "(AvgPool)", "Pads = [2, 0, 0, 0]", "Kernels = [2, 2]"});
}

TEST_F(VerifierTest, AdaptiveAvgPoolZeroSize) {
  f->createAdaptiveAvgPool("aap", input({1, 3, 8, 8}), {0, 2});
  expectInvalid({"'aap'", "(AdaptiveAvgPool)", "OutputSize = [0, 2]"});
}

TEST_F(VerifierTest, BadTransposeShuffle) {
  f->createTranspose("tr", input({2, 3, 4}), {0, 0, 1});
  expectInvalid({"'tr'", "(Transpose)", "Shuffle = [0, 0, 1]", "float<2x3x4>",
                 "permutation"});
}

TEST_F(VerifierTest, AxisOutOfRange) {
  f->createSoftMax("sm", input({2, 3}), 2);
  expectInvalid({"'sm'", "SoftMax", "Axis", "out of range", "rank 2"});
}

TEST_F(VerifierTest, NegativeAxisBeyondRank) {
  f->createConcat("cat",
                  {input({2, 3}, ElemKind::Float, "a"),
                   input({2, 3}, ElemKind::Float, "b")},
                  -3);
  std::string msg =
      expectInvalid({"'cat'", "Concat", "-3", "rank 2", "out of range"});
  // The rule rejects the stored axis too, showing the operand shape.
  EXPECT_NE(msg.find("float<2x3>"), std::string::npos) << msg;
}

TEST_F(VerifierTest, ConcatShapesDisagree) {
  f->createConcat("cat",
                  {input({2, 3}, ElemKind::Float, "a"),
                   input({4, 5}, ElemKind::Float, "b")},
                  1);
  expectInvalid(
      {"'cat'", "(Concat)", "float<4x5>", "float<2x3>", "except Axis 1"});
}

TEST_F(VerifierTest, SliceOutOfBounds) {
  f->createSlice("sl", input({4, 5}), {1, 2}, {3, 6});
  expectInvalid({"'sl'", "(Slice)", "Ends = [3, 6]", "float<4x5>", "dim 1"});
}

TEST_F(VerifierTest, ReshapeElementCount) {
  f->createReshape("rs", input({4, 5}), {3, 7});
  expectInvalid(
      {"'rs'", "(Reshape)", "Dims = [3, 7]", "21 elements", "float<4x5>"});
}

TEST_F(VerifierTest, TileZeroRepeat) {
  f->createTile("tl", input({4, 5}), {2, 0});
  expectInvalid({"'tl'", "(Tile)", "Repeats = [2, 0]"});
}

TEST_F(VerifierTest, PadLength) {
  f->createPad("pd", input({4, 5}), {1, 1, 1}, 0.0f);
  expectInvalid(
      {"'pd'", "(Pad)", "Pads = [1, 1, 1]", "4 entries", "float<4x5>"});
}

TEST_F(VerifierTest, BroadcastIncompatible) {
  f->createBroadcast("bc", input({3, 2}), {4, 3, 5});
  expectInvalid({"'bc'", "(Broadcast)", "float<3x2>", "TargetDims = [4, 3, 5]",
                 "1 or 5"});
}

TEST_F(VerifierTest, ReduceAxesRepeated) {
  // Set the axes on the node directly so the test checks the rule itself.
  auto *r = f->createReduceSum("rsum", input({2, 3}), {0}, false);
  r->setAxes({1, 1});
  expectInvalid(
      {"'rsum'", "(ReduceSum)", "Axes = [1, 1]", "twice", "float<2x3>"});
}

TEST_F(VerifierTest, ReduceAxisOutOfRangeRule) {
  // Builders store an out-of-range axis as the rank; the rule must reject it.
  auto *r = f->createReduceMax("rmax", input({2, 3}), {}, true);
  r->setAxes({0, 2});
  expectInvalid(
      {"'rmax'", "(ReduceMax)", "Axes = [0, 2]", "out of range", "float<2x3>"});
}

TEST_F(VerifierTest, ReduceAxisOutOfRange) {
  f->createReduceMax("rmax", input({2, 3}), {0, 5}, true);
  expectInvalid({"'rmax'", "ReduceMax", "Axes", "out of range", "rank 2"});
}

TEST_F(VerifierTest, TopKLargerThanLastDim) {
  f->createTopK("tk", input({2, 3}), 4);
  expectInvalid({"'tk'", "(TopK)", "K = 4", "float<2x3>"});
}

TEST_F(VerifierTest, BatchNormVectorLength) {
  Placeholder *in = input({2, 3, 4, 4});
  Constant *v = weights({3}, ElemKind::Float, "v");
  Constant *bad = weights({4}, ElemKind::Float, "bad");
  f->createBatchNormalization("bn", in, v, v, bad, v, 1e-5f, 1);
  expectInvalid(
      {"'bn'", "(BatchNormalization)", "Mean float<4>", "float<2x3x4x4>"});
}

TEST_F(VerifierTest, LayerNormScaleShape) {
  Placeholder *in = input({2, 3, 4});
  f->createLayerNormalization("ln", in, weights({3, 4}),
                              weights({4}, ElemKind::Float, "b"), -1, 1e-5f);
  expectInvalid(
      {"'ln'", "(LayerNormalization)", "Scale float<3x4>", "dims [4]"});
}

// ------------------------------------------------------------------ explicit
// types

TEST_F(VerifierTest, SplatWithoutType) {
  f->createSplat("sp", nullptr, 1.0f);
  expectInvalid({"'sp'", "(Splat)", "null"});
}

TEST_F(VerifierTest, QuantizeFromNonFloat) {
  f->createQuantize("q", m.uniqueType(ElemKind::Int8Q, {4}, 0.5f, 0),
                    input({4}, ElemKind::Int32I));
  expectInvalid({"'q'", "(Quantize)", "i32<4>", "float element kind"});
}

TEST_F(VerifierTest, DequantizeToInteger) {
  Placeholder *q =
      m.createPlaceholder(m.uniqueType(ElemKind::Int8Q, {4}, 0.5f, 0), "q");
  f->createDequantize("dq", m.uniqueType(ElemKind::Int32I, {4}), q);
  expectInvalid({"'dq'", "(Dequantize)", "result type i32<4>", "float"});
}

TEST_F(VerifierTest, RescaleOfFloat) {
  f->createRescaleQuantized("rq", m.uniqueType(ElemKind::Int8Q, {4}, 0.5f, 0),
                            input({4}));
  expectInvalid({"'rq'", "(RescaleQuantized)", "Input float<4>", "quantized"});
}

TEST_F(VerifierTest, ConvertToChangesDims) {
  f->createConvertTo("cvt", m.uniqueType(ElemKind::Int32I, {2, 4}),
                     input({2, 3}));
  expectInvalid({"'cvt'", "(ConvertTo)", "i32<2x4>", "float<2x3>"});
}

TEST_F(VerifierTest, ExplicitResultTypeDisagrees) {
  f->createRelu("relu", m.uniqueType(ElemKind::Float, {3, 2}), input({2, 3}));
  expectInvalid({"'relu'", "(Relu)", "float<3x2>", "float<2x3>"});
}

// ------------------------------------------------------------------ structure

TEST_F(VerifierTest, MissingOperand) {
  f->createRelu("r", NodeValue());
  expectInvalid({"'r'", "(Relu)", "operand Input is missing"});
}

TEST_F(VerifierTest, OperandRemovedAfterBuilding) {
  auto *a = f->createAdd("add", input({2}, ElemKind::Float, "a"),
                         input({2}, ElemKind::Float, "b"));
  a->setNthInput(1, NodeValue());
  expectInvalid({"'add'", "(Add)", "operand RHS is missing"});
}

TEST_F(VerifierTest, OperandReplacedWithWrongShape) {
  auto *a = f->createAdd("add", input({2}, ElemKind::Float, "a"),
                         input({2}, ElemKind::Float, "b"));
  a->setNthInput(1, input({3}, ElemKind::Float, "c"));
  expectInvalid({"'add'", "(Add)", "float<3>", "float<2>"});
}

TEST_F(VerifierTest, StoredResultTypeChanged) {
  auto *r = f->createRelu("relu", input({2, 3}));
  r->setType(0, m.uniqueType(ElemKind::Float, {6}));
  expectInvalid({"'relu'", "(Relu)", "float<6>", "float<2x3>"});
}

TEST_F(VerifierTest, StoredResultKindChanged) {
  auto *tk = f->createTopK("tk", input({2, 5}), 2);
  tk->setType(1, m.uniqueType(ElemKind::Int32I, {2, 2}));
  expectInvalid({"'tk'", "(TopK)", "Indices", "i32<2x2>", "i64<2x2>"});
}

TEST_F(VerifierTest, Cycle) {
  Placeholder *in = input({4});
  auto *a = f->createRelu("a", in);
  auto *b = f->createTanh("b", a);
  f->createSave("out", b);
  a->setNthInput(0, b);
  std::string msg = expectInvalid({"cycle"});
  // The message names a node on the cycle with its kind.
  bool namesA = msg.find("'a' (Relu)") != std::string::npos;
  bool namesB = msg.find("'b' (Tanh)") != std::string::npos;
  EXPECT_TRUE(namesA || namesB) << msg;
}

TEST_F(VerifierTest, SaveToConstant) {
  Constant *c = weights({4}, ElemKind::Float, "weights");
  f->createSave("save", f->createRelu("r", input({4})), c);
  expectInvalid({"'save'", "(Save)", "Placeholder", "'weights'", "Constant"});
}

TEST_F(VerifierTest, SaveTypeMismatch) {
  Placeholder *out = input({5}, ElemKind::Float, "out");
  f->createSave("save", f->createRelu("r", input({4})), out);
  expectInvalid({"'save'", "(Save)", "'out' float<5>", "Input float<4>"});
}

TEST_F(VerifierTest, NodeOfAnotherFunction) {
  Function *g = m.createFunction("other");
  auto *foreign = g->createRelu("foreign", input({4}));
  f->createNeg("neg", foreign);
  expectInvalid({"'neg'", "(Neg)", "'foreign'", "outside this function"});
  // The other function itself is fine.
  Error e = g->verify();
  EXPECT_FALSE(e) << e.message();
}

// ------------------------------------------------------------------ channelwise
// quantized

namespace {

/// A [n] vector of kind \p k filled with \p v.
Constant *filled(Module &m, const std::string &name, ElemKind k, dim_t n, double v) {
  Tensor t(k, {n});
  for (size_t i = 0; i < n; i++)
    t.setFromDouble(i, v);
  return m.createConstant(name, std::move(t));
}

} // namespace

class ChannelwiseVerifierTest : public VerifierTest {
protected:
  /// A channelwise convolution of an i8q [1,4,5,5] input with a [6,4/group,3,3] filter of
  /// kind \p fk and per-channel vectors of \p channels entries.
  void conv(ElemKind fk = ElemKind::Int8Q, float fScale = 1.0f, dim_t channels = 6,
            ElemKind biasKind = ElemKind::Int32I, double scale = 0.5, dim_t group = 1,
            Dims outDims = {1, 6, 3, 3}, const std::string &act = "None", float alpha = 0,
            float beta = 0) {
    auto *x = m.createPlaceholder(m.uniqueType(ElemKind::Int8Q, {1, 4, 5, 5}, 0.5f, 0), "x");
    auto *w = m.createConstant(m.uniqueType(fk, {6, 4 / group, 3, 3}, fScale, 0), "w");
    f->createChannelwiseQuantizedConvolution(
        "cw", m.uniqueType(ElemKind::Int8Q, outDims, 0.25f, 1), x, w,
        filled(m, "s", ElemKind::Float, channels, scale),
        filled(m, "o", ElemKind::Int32I, channels, 0), filled(m, "b", biasKind, channels, 0),
        {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, group, act, alpha, beta);
  }
};

TEST_F(ChannelwiseVerifierTest, ValidConvolutionVerifies) {
  conv();
  Error e = f->verify();
  EXPECT_FALSE(e) << e.message();
}

TEST_F(ChannelwiseVerifierTest, FusedActivations) {
  conv(ElemKind::Int8Q, 1.0f, 6, ElemKind::Int32I, 0.5, 1, {1, 6, 3, 3}, "Clip", -1, 2);
  Error e = f->verify();
  EXPECT_FALSE(e) << e.message();
}

TEST_F(ChannelwiseVerifierTest, ActivationAQuantizedLayerCannotRun) {
  conv(ElemKind::Int8Q, 1.0f, 6, ElemKind::Int32I, 0.5, 1, {1, 6, 3, 3}, "Sigmoid");
  expectInvalid({"'cw'", "(ChannelwiseQuantizedConvolution)", "Activation = \"Sigmoid\"",
                 "None, Relu or Clip"});
}

TEST_F(ChannelwiseVerifierTest, ClipWithCrossedBounds) {
  conv(ElemKind::Int8Q, 1.0f, 6, ElemKind::Int32I, 0.5, 1, {1, 6, 3, 3}, "Clip", 2, -1);
  expectInvalid({"'cw'", "Alpha = 2", "Beta = -1", "Alpha <= Beta"});
}

TEST_F(ChannelwiseVerifierTest, Int32ResultTakesNoActivation) {
  auto *x = m.createPlaceholder(m.uniqueType(ElemKind::Int8Q, {2, 4}, 0.5f, 0), "x");
  auto *w = m.createConstant(m.uniqueType(ElemKind::Int8Q, {4, 5}, 1.0f, 0), "w");
  f->createChannelwiseQuantizedFullyConnected(
      "cwfc", m.uniqueType(ElemKind::Int32I, {2, 5}), x, w,
      filled(m, "s", ElemKind::Float, 5, 1), filled(m, "o", ElemKind::Int32I, 5, 0),
      filled(m, "b", ElemKind::Int32I, 5, 0), "Relu", 0.0f, 0.0f);
  expectInvalid({"'cwfc'", "(ChannelwiseQuantizedFullyConnected)", "Activation = \"Relu\"",
                 "not i32"});
}

TEST_F(VerifierTest, Int8FusedConvolutionTakesNoResidual) {
  auto *x = m.createPlaceholder(m.uniqueType(ElemKind::Int8Q, {1, 2, 3, 3}, 0.5f, 0), "x");
  auto *r = m.createPlaceholder(m.uniqueType(ElemKind::Int8Q, {1, 2, 3, 3}, 0.5f, 0), "r");
  auto *w = m.createConstant(m.uniqueType(ElemKind::Int8Q, {2, 2, 1, 1}, 0.25f, 0), "w");
  auto *b = m.createConstant(m.uniqueType(ElemKind::Int32Q, {2}, 0.125f, 0), "b");
  f->createFusedConvolution("fconv", m.uniqueType(ElemKind::Int8Q, {1, 2, 3, 3}, 0.5f, 0), x,
                            w, b, {r}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "Relu", 0, 0);
  expectInvalid({"'fconv'", "(FusedConvolution)", "no Residual", "quantized"});
}

TEST_F(ChannelwiseVerifierTest, FilterWithItsOwnScale) {
  conv(ElemKind::Int8Q, 0.5f);
  expectInvalid({"'cw'", "(ChannelwiseQuantizedConvolution)", "Filter i8q<6x4x3x3:0.5:0>",
                 "scale 1 and offset 0"});
}

TEST_F(ChannelwiseVerifierTest, FloatFilter) {
  conv(ElemKind::Float);
  expectInvalid({"'cw'", "Filter float<6x4x3x3>", "i8q or u8q"});
}

TEST_F(ChannelwiseVerifierTest, ScalesOfTheWrongLength) {
  conv(ElemKind::Int8Q, 1.0f, 5);
  expectInvalid({"'cw'", "FilterScales float<5>", "6 entries", "output channel"});
}

TEST_F(ChannelwiseVerifierTest, BoolBias) {
  conv(ElemKind::Int8Q, 1.0f, 6, ElemKind::Bool);
  expectInvalid({"'cw'", "Bias bool<6>", "i32 or float"});
}

TEST_F(ChannelwiseVerifierTest, ZeroScaleConstant) {
  conv(ElemKind::Int8Q, 1.0f, 6, ElemKind::Int32I, 0.0);
  expectInvalid({"'cw'", "FilterScales float<6>", "positive and finite"});
}

TEST_F(ChannelwiseVerifierTest, GroupDoesNotDivide) {
  conv(ElemKind::Int8Q, 1.0f, 6, ElemKind::Int32I, 0.5, 4);
  expectInvalid({"'cw'", "Group = 4", "i8q<1x4x5x5:0.5:0>", "6 output channels"});
}

TEST_F(ChannelwiseVerifierTest, ResultOfTheWrongShape) {
  conv(ElemKind::Int8Q, 1.0f, 6, ElemKind::Int32I, 0.5, 1, {1, 6, 5, 5});
  expectInvalid({"'cw'", "result type i8q<1x6x5x5:0.25:1>", "1x6x3x3"});
}

TEST_F(ChannelwiseVerifierTest, FullyConnectedShapes) {
  auto *x = m.createPlaceholder(m.uniqueType(ElemKind::UInt8Q, {2, 3}, 0.5f, 128), "x");
  auto *w = m.createConstant(m.uniqueType(ElemKind::Int8Q, {4, 5}, 1.0f, 0), "w");
  f->createChannelwiseQuantizedFullyConnected(
      "cwfc", m.uniqueType(ElemKind::UInt8Q, {2, 5}, 1.0f, 0), x, w,
      filled(m, "s", ElemKind::Float, 5, 1), filled(m, "o", ElemKind::Int32I, 5, 0),
      filled(m, "b", ElemKind::Float, 5, 0), "None", 0.0f, 0.0f);
  expectInvalid({"'cwfc'", "(ChannelwiseQuantizedFullyConnected)", "Weights i8q<4x5:1:0>",
                 "3 rows", "u8q<2x3:0.5:128>"});
}

TEST_F(ChannelwiseVerifierTest, FullyConnectedFloatResult) {
  auto *x = m.createPlaceholder(m.uniqueType(ElemKind::Int8Q, {2, 4}, 0.5f, 0), "x");
  auto *w = m.createConstant(m.uniqueType(ElemKind::Int8Q, {4, 5}, 1.0f, 0), "w");
  f->createChannelwiseQuantizedFullyConnected(
      "cwfc", m.uniqueType(ElemKind::Float, {2, 5}), x, w,
      filled(m, "s", ElemKind::Float, 5, 1), filled(m, "o", ElemKind::Int32I, 5, 0),
      filled(m, "b", ElemKind::Int32I, 5, 0), "None", 0.0f, 0.0f);
  expectInvalid({"'cwfc'", "result type float<2x5>", "i8q, u8q or i32"});
}

TEST_F(ChannelwiseVerifierTest, Int32ResultNeedsAnInt32Bias) {
  conv(ElemKind::Int8Q, 1.0f, 6, ElemKind::Float);
  Error e = f->verify();
  EXPECT_FALSE(e) << e.message(); // float bias, i8q result: fine
  Function *g = m.createFunction("g");
  auto *x = m.createPlaceholder(m.uniqueType(ElemKind::Int8Q, {2, 4}, 0.5f, 0), "x2");
  auto *w = m.createConstant(m.uniqueType(ElemKind::Int8Q, {4, 5}, 1.0f, 0), "w2");
  g->createChannelwiseQuantizedFullyConnected(
      "cwfc", m.uniqueType(ElemKind::Int32I, {2, 5}), x, w,
      filled(m, "s2", ElemKind::Float, 5, 1), filled(m, "o2", ElemKind::Int32I, 5, 0),
      filled(m, "b2", ElemKind::Float, 5, 0), "None", 0.0f, 0.0f);
  Error e2 = g->verify();
  ASSERT_TRUE(bool(e2));
  EXPECT_NE(e2.message().find("Bias float<5> must be i32 for the i32 result i32<2x5>"),
            std::string::npos)
      << e2.message();
}

TEST_F(VerifierTest, ClonePreservesBuilderErrors) {
  f->createTranspose("tr", input({2, 3}), {1, 1});
  Function *g = f->clone("copy");
  Error e = g->verify();
  ASSERT_TRUE(bool(e));
  EXPECT_NE(e.message().find("'tr' (Transpose)"), std::string::npos)
      << e.message();
}

} // namespace
