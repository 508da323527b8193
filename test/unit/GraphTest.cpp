// Graph IR tests: result shapes computed by the builders for every operator
// (against hand-worked values), user tracking, replacing uses, erasing nodes,
// cloning functions, and type uniquing.

#include "kiln/Graph/Graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace kiln;

namespace {

class GraphTest : public ::testing::Test {
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
  /// Builds a convolution with zero weights of the right shapes.
  ConvolutionNode *conv(NodeValue in, dim_t outC, std::vector<dim_t> kernels,
                        std::vector<dim_t> strides, std::vector<dim_t> pads,
                        std::vector<dim_t> dilations, dim_t group) {
    dim_t c = in.dims()[1];
    Constant *w = weights({outC, c / group, kernels[0], kernels[1]});
    Constant *b = weights({outC}, ElemKind::Float, "b");
    return f->createConvolution("conv", in, w, b, kernels, strides, pads,
                                dilations, group);
  }
  /// Verifies the function and fails the test with the message when it is
  /// invalid.
  void expectValid() {
    Error e = f->verify();
    EXPECT_FALSE(e) << e.message();
  }
};

Dims dimsOf(NodeValue v) { return v.dims(); }

// ------------------------------------------------------------------
// convolutions, pooling

TEST_F(GraphTest, ConvolutionSamePadding) {
  // (32 + 1 + 1 - 3) / 1 + 1 = 32.
  auto *c =
      conv(input({1, 3, 32, 32}), 8, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  EXPECT_EQ(dimsOf(c->getResult()), Dims({1, 8, 32, 32}));
  EXPECT_EQ(c->getResult().getElementType(), ElemKind::Float);
  expectValid();
}

TEST_F(GraphTest, ConvolutionStride) {
  // (32 + 2 - 3) / 2 + 1 = 16 (floor of 15.5).
  auto *c =
      conv(input({2, 3, 32, 32}), 4, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1);
  EXPECT_EQ(dimsOf(c->getResult()), Dims({2, 4, 16, 16}));
  // (7 + 0 - 3) / 3 + 1 = 2.
  auto *c2 = conv(input({1, 1, 7, 7}, ElemKind::Float, "in2"), 1, {3, 3},
                  {3, 3}, {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_EQ(dimsOf(c2->getResult()), Dims({1, 1, 2, 2}));
  expectValid();
}

TEST_F(GraphTest, ConvolutionDilation) {
  // Effective kernel 2 * (3 - 1) + 1 = 5: (32 - 5) / 1 + 1 = 28.
  auto *c =
      conv(input({1, 3, 32, 32}), 8, {3, 3}, {1, 1}, {0, 0, 0, 0}, {2, 2}, 1);
  EXPECT_EQ(dimsOf(c->getResult()), Dims({1, 8, 28, 28}));
  // Dilation 3 on height only: effective 7 and 3; (10 + 2 - 7) / 1 + 1 = 6, (10
  // - 3) + 1 = 8.
  auto *c2 = conv(input({1, 1, 10, 10}, ElemKind::Float, "in2"), 2, {3, 3},
                  {1, 1}, {1, 0, 1, 0}, {3, 1}, 1);
  EXPECT_EQ(dimsOf(c2->getResult()), Dims({1, 2, 6, 8}));
  expectValid();
}

TEST_F(GraphTest, ConvolutionAsymmetricWindow) {
  // Kernels [3, 2], Strides [2, 1], Pads [top 1, left 0, bottom 2, right 0]:
  // H: (10 + 1 + 2 - 3) / 2 + 1 = 6; W: (9 - 2) / 1 + 1 = 8.
  auto *c =
      conv(input({1, 2, 10, 9}), 5, {3, 2}, {2, 1}, {1, 0, 2, 0}, {1, 1}, 1);
  EXPECT_EQ(dimsOf(c->getResult()), Dims({1, 5, 6, 8}));
  expectValid();
}

TEST_F(GraphTest, ConvolutionGroups) {
  // Group 2: filter [6, 4/2, 3, 3].
  auto *c =
      conv(input({1, 4, 10, 10}), 6, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2);
  EXPECT_EQ(dimsOf(c->getFilter()), Dims({6, 2, 3, 3}));
  EXPECT_EQ(dimsOf(c->getResult()), Dims({1, 6, 8, 8}));
  // Depthwise: Group == C == O.
  auto *d = conv(input({1, 4, 10, 10}, ElemKind::Float, "in2"), 4, {3, 3},
                 {1, 1}, {1, 1, 1, 1}, {1, 1}, 4);
  EXPECT_EQ(dimsOf(d->getResult()), Dims({1, 4, 10, 10}));
  expectValid();
}

TEST_F(GraphTest, ConvConvenienceBuilder) {
  auto *c =
      f->createConv("c", input({1, 6, 9, 9}), 12, 3, /*stride=*/2, /*pad=*/1,
                    /*group=*/3, /*dilation=*/1);
  // (9 + 2 - 3) / 2 + 1 = 5.
  EXPECT_EQ(dimsOf(c->getResult()), Dims({1, 12, 5, 5}));
  EXPECT_EQ(dimsOf(c->getFilter()), Dims({12, 2, 3, 3}));
  EXPECT_EQ(dimsOf(c->getBias()), Dims({12}));
  expectValid();
}

TEST_F(GraphTest, QuantizedConvolutionKeepsInputType) {
  Placeholder *in = m.createPlaceholder(
      m.uniqueType(ElemKind::Int8Q, {1, 2, 5, 5}, 0.5f, 3), "qin");
  Constant *w = m.createConstant(
      m.uniqueType(ElemKind::Int8Q, {4, 2, 3, 3}, 0.25f, 0), "qw");
  Constant *b =
      m.createConstant(m.uniqueType(ElemKind::Int32Q, {4}, 0.125f, 0), "qb");
  auto *c = f->createConvolution("qconv", in, w, b, {3, 3}, {1, 1},
                                 {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_EQ(c->getResultType()->toString(), "i8q<1x4x3x3:0.5:3>");
  // An explicit output type chooses its own scale and offset.
  TypeRef outTy = m.uniqueType(ElemKind::Int8Q, {1, 4, 3, 3}, 2.0f, -1);
  auto *c2 = f->createConvolution("qconv2", outTy, in, w, b, {3, 3}, {1, 1},
                                  {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_EQ(c2->getResultType(), outTy);
  expectValid();
}

TEST_F(GraphTest, Pooling) {
  Placeholder *in = input({1, 2, 7, 7});
  // (7 + 2 - 3) / 2 + 1 = 4.
  auto *mp = f->createMaxPool("mp", in, {3, 3}, {2, 2}, {1, 1, 1, 1});
  EXPECT_EQ(dimsOf(mp->getResult()), Dims({1, 2, 4, 4}));
  // (7 - 2) / 2 + 1 = 3 (the last row and column are dropped).
  auto *ap = f->createAvgPool("ap", in, {2, 2}, {2, 2}, {0, 0, 0, 0}, false);
  EXPECT_EQ(dimsOf(ap->getResult()), Dims({1, 2, 3, 3}));
  // Kernels [1, 7] strides [1, 1]: [1, 2, 7, 1].
  auto *row = f->createAvgPool("row", in, {1, 7}, {1, 1}, {0, 0, 0, 0}, true);
  EXPECT_EQ(dimsOf(row->getResult()), Dims({1, 2, 7, 1}));
  auto *aap = f->createAdaptiveAvgPool("aap", in, {3, 2});
  EXPECT_EQ(dimsOf(aap->getResult()), Dims({1, 2, 3, 2}));
  auto *gap = f->createGlobalAvgPool("gap", in);
  EXPECT_EQ(dimsOf(gap->getResult()), Dims({1, 2, 1, 1}));
  expectValid();
}

// ------------------------------------------------------------------ linear
// algebra

TEST_F(GraphTest, LinearAlgebra) {
  auto *fc = f->createFullyConnected("fc", input({4, 3}), weights({3, 5}),
                                     weights({5}, ElemKind::Float, "b"));
  EXPECT_EQ(dimsOf(fc->getResult()), Dims({4, 5}));
  auto *mm = f->createMatMul("mm", input({2, 7}, ElemKind::Float, "a"),
                             input({7, 3}, ElemKind::Float, "b"));
  EXPECT_EQ(dimsOf(mm->getResult()), Dims({2, 3}));
  auto *bmm =
      f->createBatchMatMul("bmm", input({5, 2, 7}, ElemKind::Float, "c"),
                           input({5, 7, 3}, ElemKind::Float, "d"));
  EXPECT_EQ(dimsOf(bmm->getResult()), Dims({5, 2, 3}));
  auto *ba = f->createBatchedAdd("ba", input({6, 2, 3}, ElemKind::Float, "e"),
                                 weights({2, 3}, ElemKind::Float, "s"));
  EXPECT_EQ(dimsOf(ba->getResult()), Dims({6, 2, 3}));
  expectValid();
}

TEST_F(GraphTest, FullyConnectedConvenienceFlattens) {
  auto *fc = f->createFullyConnected("fc", input({2, 3, 4, 5}), 10);
  // The input is flattened to [2, 60] first.
  EXPECT_EQ(fc->getInput().getNode()->getKind(), NodeKind::Reshape);
  EXPECT_EQ(dimsOf(fc->getInput()), Dims({2, 60}));
  EXPECT_EQ(dimsOf(fc->getWeights()), Dims({60, 10}));
  EXPECT_EQ(dimsOf(fc->getResult()), Dims({2, 10}));
  expectValid();
}

TEST_F(GraphTest, QuantizedFullyConnectedTakesInt32Bias) {
  Placeholder *in =
      m.createPlaceholder(m.uniqueType(ElemKind::Int8Q, {2, 3}, 0.1f, 0), "q");
  Constant *w =
      m.createConstant(m.uniqueType(ElemKind::Int8Q, {3, 4}, 0.2f, 0), "qw");
  Constant *b =
      m.createConstant(m.uniqueType(ElemKind::Int32Q, {4}, 0.02f, 0), "qb");
  auto *fc = f->createFullyConnected("qfc", in, w, b);
  EXPECT_EQ(fc->getResultType()->kind, ElemKind::Int8Q);
  EXPECT_EQ(dimsOf(fc->getResult()), Dims({2, 4}));
  expectValid();
}

// ------------------------------------------------------------------
// normalization

TEST_F(GraphTest, Normalization) {
  Placeholder *in = input({2, 3, 4, 5});
  Constant *v = weights({3}, ElemKind::Float, "v");
  auto *bn = f->createBatchNormalization("bn", in, v, v, v, v, 1e-5f, 1);
  EXPECT_EQ(dimsOf(bn->getResult()), Dims({2, 3, 4, 5}));
  EXPECT_EQ(bn->getChannelIdx(), 1u);
  // Channels last through a negative index: ChannelIdx -1 is dim 3 (5
  // channels).
  Constant *v5 = weights({5}, ElemKind::Float, "v5");
  auto *bn2 = f->createBatchNormalization("bn2", in, v5, v5, v5, v5, 1e-5f, -1);
  EXPECT_EQ(bn2->getChannelIdx(), 3u);
  // LayerNorm over the last two dims: Scale and Bias are [4, 5].
  Constant *s = weights({4, 5}, ElemKind::Float, "s");
  auto *ln = f->createLayerNormalization("ln", in, s, s, -2, 1e-5f);
  EXPECT_EQ(ln->getAxis(), 2u);
  EXPECT_EQ(dimsOf(ln->getResult()), Dims({2, 3, 4, 5}));
  auto *sm = f->createSoftMax("sm", in, -1);
  EXPECT_EQ(sm->getAxis(), 3u);
  EXPECT_EQ(dimsOf(sm->getResult()), Dims({2, 3, 4, 5}));
  auto *lsm = f->createLogSoftMax("lsm", in, 1);
  EXPECT_EQ(dimsOf(lsm->getResult()), Dims({2, 3, 4, 5}));
  expectValid();
}

// ------------------------------------------------------------------
// element-wise

TEST_F(GraphTest, ElementWise) {
  Placeholder *a = input({2, 3}, ElemKind::Float, "a");
  Placeholder *b = input({2, 3}, ElemKind::Float, "b");
  auto *add = f->createAdd("add", a, b);
  EXPECT_EQ(add->getResultType(), a->getType());
  auto *relu = f->createRelu("relu", add);
  EXPECT_EQ(relu->getResultType(), a->getType());
  auto *clip = f->createClip("clip", relu, -1.0f, 1.0f);
  EXPECT_EQ(dimsOf(clip->getResult()), Dims({2, 3}));
  auto *lt = f->createCmpLT("lt", a, b);
  EXPECT_EQ(lt->getResultType()->toString(), "bool<2x3>");
  auto *sel = f->createSelect("sel", lt, a, b);
  EXPECT_EQ(sel->getResultType(), a->getType());
  auto *pr = f->createPRelu("pr", a, b);
  EXPECT_EQ(pr->getResultType(), a->getType());
  expectValid();
}

// ------------------------------------------------------------------ reductions

TEST_F(GraphTest, ReductionRule) {
  // Sets normalised axes on the nodes directly, so this checks the type rule
  // alone.
  Placeholder *in = input({2, 3, 4});
  auto *keep = f->createReduceSum("keep", in, {}, true);
  keep->setAxes({1});
  auto *drop = f->createReduceMean("drop", in, {}, false);
  drop->setAxes({2, 0});
  auto *all = f->createReduceProd("all", in, {}, false);
  all->setAxes({0, 1, 2});
  auto *allKeep = f->createReduceMin("allKeep", in, {}, true);
  allKeep->setAxes({2, 1, 0});
  for (Node *n : std::vector<Node *>{keep, drop, all, allKeep}) {
    Expected<std::vector<Type>> t = n->computeResultTypes();
    ASSERT_TRUE(bool(t)) << t.getError().message();
    ASSERT_EQ(t->size(), 1u);
    n->setType(0, m.uniqueType((*t)[0]));
  }
  EXPECT_EQ(dimsOf(keep->getResult()), Dims({2, 1, 4}));
  EXPECT_EQ(dimsOf(drop->getResult()), Dims({3}));
  EXPECT_EQ(all->getResultType()->toString(), "float<>");
  EXPECT_EQ(dimsOf(allKeep->getResult()), Dims({1, 1, 1}));
  expectValid();
}

TEST_F(GraphTest, Reductions) {
  Placeholder *in = input({2, 3, 4});
  auto *keep = f->createReduceSum("keep", in, {1}, true);
  EXPECT_EQ(keep->getAxes(), std::vector<dim_t>({1}));
  EXPECT_EQ(dimsOf(keep->getResult()), Dims({2, 1, 4}));
  auto *drop = f->createReduceMean("drop", in, {1}, false);
  EXPECT_EQ(dimsOf(drop->getResult()), Dims({2, 4}));
  // Negative axes count from the end: {-1, 0} is {2, 0}.
  auto *neg = f->createReduceMax("neg", in, {-1, 0}, false);
  EXPECT_EQ(neg->getAxes(), std::vector<dim_t>({2, 0}));
  EXPECT_EQ(dimsOf(neg->getResult()), Dims({3}));
  auto *negKeep = f->createReduceMin("negKeep", in, {-1, 0}, true);
  EXPECT_EQ(dimsOf(negKeep->getResult()), Dims({1, 3, 1}));
  auto *all = f->createReduceProd("all", in, {0, 1, 2}, false);
  EXPECT_EQ(all->getResultType()->toString(), "float<>");
  expectValid();
}

TEST_F(GraphTest, ArgMaxArgMinTopK) {
  Placeholder *in = input({2, 3, 10});
  auto *am = f->createArgMax("am", in, -1, false);
  EXPECT_EQ(am->getResultType()->toString(), "i64<2x3>");
  auto *amk = f->createArgMin("amk", in, 1, true);
  EXPECT_EQ(amk->getResultType()->toString(), "i64<2x1x10>");
  auto *tk = f->createTopK("tk", in, 4);
  ASSERT_EQ(tk->getNumResults(), 2u);
  EXPECT_EQ(tk->getValuesType()->toString(), "float<2x3x4>");
  EXPECT_EQ(tk->getIndicesType()->toString(), "i64<2x3x4>");
  expectValid();
}

// ------------------------------------------------------------------ data
// movement

TEST_F(GraphTest, Concat) {
  auto *c = f->createConcat("c",
                            {input({2, 3}, ElemKind::Float, "a"),
                             input({2, 5}, ElemKind::Float, "b"),
                             input({2, 1}, ElemKind::Float, "d")},
                            1);
  EXPECT_EQ(dimsOf(c->getResult()), Dims({2, 9}));
  auto *c0 = f->createConcat("c0",
                             {input({1, 3}, ElemKind::Float, "x"),
                              input({4, 3}, ElemKind::Float, "y")},
                             -2);
  EXPECT_EQ(c0->getAxis(), 0u);
  EXPECT_EQ(dimsOf(c0->getResult()), Dims({5, 3}));
  expectValid();
}

TEST_F(GraphTest, SliceReshapeTranspose) {
  Placeholder *in = input({4, 5, 6});
  auto *s = f->createSlice("s", in, {1, 0, 2}, {3, 5, 6});
  EXPECT_EQ(dimsOf(s->getResult()), Dims({2, 5, 4}));
  auto *r = f->createReshape("r", in, {20, 6});
  EXPECT_EQ(dimsOf(r->getResult()), Dims({20, 6}));
  auto *fl = f->createFlatten("fl", in, 2);
  EXPECT_EQ(dimsOf(fl->getResult()), Dims({20, 6}));
  auto *t = f->createTranspose("t", in, {2, 0, 1});
  EXPECT_EQ(dimsOf(t->getResult()), Dims({6, 4, 5}));
  expectValid();
}

TEST_F(GraphTest, Gather) {
  Placeholder *data = input({5, 4, 3});
  Placeholder *idx = input({2, 6}, ElemKind::Int64I, "idx");
  // Data[:1] + Indices + Data[2:] = [5, 2, 6, 3].
  auto *g = f->createGather("g", data, idx, 1);
  EXPECT_EQ(dimsOf(g->getResult()), Dims({5, 2, 6, 3}));
  auto *gl = f->createGather("gl", data, idx, -1);
  EXPECT_EQ(dimsOf(gl->getResult()), Dims({5, 4, 2, 6}));
  Placeholder *idx32 = input({7}, ElemKind::Int32I, "idx32");
  auto *g0 = f->createGather("g0", data, idx32, 0);
  EXPECT_EQ(dimsOf(g0->getResult()), Dims({7, 4, 3}));
  expectValid();
}

TEST_F(GraphTest, TilePadBroadcast) {
  Placeholder *in = input({3, 1});
  auto *t = f->createTile("t", in, {2, 4});
  EXPECT_EQ(dimsOf(t->getResult()), Dims({6, 4}));
  // Pads: begins [1, 0] then ends [2, 3].
  auto *p = f->createPad("p", in, {1, 0, 2, 3}, 0.0f);
  EXPECT_EQ(dimsOf(p->getResult()), Dims({6, 4}));
  auto *b = f->createBroadcast("b", in, {2, 3, 4});
  EXPECT_EQ(dimsOf(b->getResult()), Dims({2, 3, 4}));
  NodeValue same = f->createBroadcastTo("same", in, {3, 1});
  EXPECT_EQ(same.getNode(), in);
  NodeValue bt = f->createBroadcastTo("bt", in, {3, 5});
  EXPECT_EQ(dimsOf(bt), Dims({3, 5}));
  expectValid();
}

TEST_F(GraphTest, ExplicitTypes) {
  Placeholder *in = input({2, 3});
  TypeRef splatTy = m.uniqueType(ElemKind::Int64I, {4});
  auto *sp = f->createSplat("sp", splatTy, 7.0f);
  EXPECT_EQ(sp->getResultType(), splatTy);
  auto *cv =
      f->createConvertTo("cv", m.uniqueType(ElemKind::Int32I, {2, 3}), in);
  EXPECT_EQ(cv->getResultType()->toString(), "i32<2x3>");
  TypeRef qTy = m.uniqueType(ElemKind::Int8Q, {2, 3}, 0.5f, 1);
  auto *q = f->createQuantize("q", qTy, in);
  EXPECT_EQ(q->getResultType(), qTy);
  auto *rq = f->createRescaleQuantized(
      "rq", m.uniqueType(ElemKind::Int8Q, {2, 3}, 0.25f, 0), q);
  EXPECT_EQ(rq->getResultType()->toString(), "i8q<2x3:0.25:0>");
  auto *dq =
      f->createDequantize("dq", m.uniqueType(ElemKind::Float, {2, 3}), rq);
  EXPECT_EQ(dq->getResultType(), in->getType());
  f->createSave("out", dq);
  expectValid();
}

// ------------------------------------------------------------------ uses and
// rewriting

TEST_F(GraphTest, UsersAreTracked) {
  Placeholder *a = input({2, 2}, ElemKind::Float, "a");
  Placeholder *b = input({2, 2}, ElemKind::Float, "b");
  EXPECT_FALSE(a->hasUsers());
  auto *sq = f->createMul("sq", a, a);
  auto *add = f->createAdd("add", sq, b);
  ASSERT_EQ(a->getUsers().size(), 2u);
  EXPECT_EQ(a->getUsers()[0].user, sq);
  EXPECT_EQ(a->getUsers()[0].idx, 0u);
  EXPECT_EQ(a->getUsers()[1].idx, 1u);
  EXPECT_EQ(a->getNumUsesOf(0), 2u);
  ASSERT_EQ(sq->getUsers().size(), 1u);
  EXPECT_EQ(sq->getUsers()[0].user, add);
  // setNthInput moves the use.
  add->setNthInput(0, a);
  EXPECT_FALSE(sq->hasUsers());
  EXPECT_EQ(a->getUsers().size(), 3u);
}

TEST_F(GraphTest, MultiResultUses) {
  auto *tk = f->createTopK("tk", input({3, 8}), 2);
  auto *neg = f->createNeg("neg", tk->getValues());
  auto *cv = f->createConvertTo("cv", m.uniqueType(ElemKind::Float, {3, 2}),
                                tk->getIndices());
  auto *cv2 = f->createConvertTo("cv2", m.uniqueType(ElemKind::Int32I, {3, 2}),
                                 tk->getIndices());
  EXPECT_EQ(tk->getNumUsesOf(0), 1u);
  EXPECT_EQ(tk->getNumUsesOf(1), 2u);
  EXPECT_EQ(neg->getInput().resNo, 0u);
  EXPECT_EQ(cv->getInput().resNo, 1u);
  EXPECT_EQ(cv2->getInput().resNo, 1u);
  expectValid();
}

TEST_F(GraphTest, ReplaceAllUsesOfWith) {
  Placeholder *in = input({4});
  auto *r1 = f->createRelu("r1", in);
  auto *r2 = f->createTanh("r2", in);
  auto *u1 = f->createNeg("u1", r1);
  auto *u2 = f->createAdd("u2", r1, r1);
  r1->replaceAllUsesOfWith(0, r2);
  EXPECT_FALSE(r1->hasUsers());
  EXPECT_EQ(r2->getUsers().size(), 3u);
  EXPECT_EQ(u1->getInput().getNode(), r2);
  EXPECT_EQ(u2->getLHS().getNode(), r2);
  EXPECT_EQ(u2->getRHS().getNode(), r2);
  expectValid();
}

TEST_F(GraphTest, EraseNode) {
  Placeholder *in = input({4});
  auto *r = f->createRelu("r", in);
  auto *n = f->createNeg("n", r);
  EXPECT_EQ(f->numNodes(), 2u);
  f->eraseNode(n);
  EXPECT_EQ(f->numNodes(), 1u);
  EXPECT_EQ(f->getNodeByName("n"), nullptr);
  EXPECT_FALSE(r->hasUsers());
  f->eraseNode(r);
  EXPECT_EQ(f->numNodes(), 0u);
  EXPECT_FALSE(in->hasUsers());
  // The name is free again.
  auto *again = f->createRelu("r", in);
  EXPECT_EQ(again->getName(), "r");
}

TEST_F(GraphTest, EraseDeadNodes) {
  Placeholder *in = input({4});
  auto *live = f->createRelu("live", in);
  auto *dead1 = f->createTanh("dead1", in);
  f->createNeg("dead2", dead1); // dead1 dies once dead2 is gone
  f->createSave("out", live);
  EXPECT_EQ(f->numNodes(), 4u);
  EXPECT_EQ(f->eraseDeadNodes(), 2u);
  EXPECT_EQ(f->numNodes(), 2u);
  EXPECT_NE(f->getNodeByName("live"), nullptr);
  EXPECT_EQ(f->getNodeByName("dead1"), nullptr);
  EXPECT_EQ(f->getNodeByName("dead2"), nullptr);
  ASSERT_EQ(in->getUsers().size(), 1u);
  EXPECT_EQ(in->getUsers()[0].user, live);
  EXPECT_EQ(f->eraseDeadNodes(), 0u);
  expectValid();
}

TEST_F(GraphTest, UniqueNodeNames) {
  Placeholder *in = input({4});
  auto *a = f->createRelu("x", in);
  auto *b = f->createRelu("x", in);
  EXPECT_EQ(a->getName(), "x");
  EXPECT_NE(b->getName(), "x");
  EXPECT_EQ(f->getNodeByName(b->getName()), b);
  EXPECT_EQ(f->getNodeByName("x"), a);
}

TEST_F(GraphTest, CloneFunction) {
  Placeholder *in = input({1, 3, 8, 8});
  auto *c = f->createConv("conv", in, 4, 3, 1, 1);
  auto *r = f->createRelu("relu", c);
  auto *tk = f->createTopK("tk", f->createFlatten("flat", r, 1), 5);
  f->createSave("vals", tk->getValues());
  f->createSave("idx", tk->getIndices());
  expectValid();

  Function *g = f->clone("copy");
  EXPECT_EQ(g->getName(), "copy");
  EXPECT_EQ(m.getFunction("copy"), g);
  Error e = g->verify();
  EXPECT_FALSE(e) << e.message();
  ASSERT_EQ(g->numNodes(), f->numNodes());

  std::set<const Node *> orig;
  for (const auto &n : f->getNodes())
    orig.insert(n.get());
  for (const auto &n : g->getNodes()) {
    EXPECT_EQ(orig.count(n.get()), 0u) << n->getName();
    EXPECT_EQ(n->getParent(), g);
    Node *o = f->getNodeByName(n->getName());
    ASSERT_NE(o, nullptr) << n->getName();
    EXPECT_EQ(n->getKind(), o->getKind());
    for (unsigned i = 0; i < n->getNumResults(); i++)
      EXPECT_EQ(n->getType(i), o->getType(i));
    // Operands inside the function are remapped; storage is shared.
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      Node *op = n->getNthInput(i).getNode();
      EXPECT_EQ(n->getNthInput(i).resNo, o->getNthInput(i).resNo);
      if (isa<Storage>(op))
        EXPECT_EQ(op, o->getNthInput(i).getNode());
      else
        EXPECT_EQ(op->getParent(), g);
    }
  }
  auto *gc = cast<ConvolutionNode>(g->getNodeByName("conv"));
  EXPECT_EQ(gc->getFilter().getNode(), c->getFilter().getNode());
  EXPECT_EQ(gc->getKernels(), c->getKernels());
  EXPECT_EQ(gc->getPads(), c->getPads());
  // Both functions use the input placeholder.
  EXPECT_EQ(in->getUsers().size(), 2u);
  // The copy is independent: erasing it leaves the original valid.
  m.eraseFunction(g);
  EXPECT_EQ(in->getUsers().size(), 1u);
  expectValid();
}

// ------------------------------------------------------------------ types

TEST_F(GraphTest, TypesAreUniqued) {
  TypeRef a = m.uniqueType(ElemKind::Float, {2, 3});
  TypeRef b = m.uniqueType(Type(ElemKind::Float, {2, 3}));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, m.uniqueType(ElemKind::Float, {3, 2}));
  EXPECT_NE(a, m.uniqueType(ElemKind::Float16, {2, 3}));
  TypeRef q1 = m.uniqueType(ElemKind::Int8Q, {2, 3}, 0.5f, 0);
  EXPECT_EQ(q1, m.uniqueType(ElemKind::Int8Q, {2, 3}, 0.5f, 0));
  EXPECT_NE(q1, m.uniqueType(ElemKind::Int8Q, {2, 3}, 0.5f, 1));
  EXPECT_NE(q1, m.uniqueType(ElemKind::Int8Q, {2, 3}, 0.25f, 0));
  // Builders produce uniqued types: equal results share one TypeRef.
  Placeholder *in = input({2, 3});
  auto *t1 = f->createTranspose("t1", in, {1, 0});
  auto *t2 = f->createTranspose("t2", in, {1, 0});
  EXPECT_EQ(t1->getResultType(), t2->getResultType());
  EXPECT_EQ(t1->getResultType(), m.uniqueType(ElemKind::Float, {3, 2}));
  auto *r = f->createReshape("r", t1, {2, 3});
  EXPECT_EQ(r->getResultType(), in->getType());
}

} // namespace
