// IRGen: structure of the low-level IR generated from small graphs.

#include "kiln/IR/IR.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

std::vector<const Instruction *> instrs(const IRFunction &F) {
  std::vector<const Instruction *> r;
  for (const auto &I : F.getInstrs())
    r.push_back(I.get());
  return r;
}

size_t indexOf(const std::vector<const Instruction *> &v, InstrKind k, size_t from = 0) {
  for (size_t i = from; i < v.size(); i++)
    if (v[i]->getKind() == k)
      return i;
  return v.size();
}

} // namespace

TEST(IRGen, WeightsActivationsAndLifetimes) {
  Module m;
  Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {2, 4}, "x");
  auto *w = m.createConstant(ElemKind::Float, {4, 3}, "w");
  auto *b = m.createConstant(ElemKind::Float, {3}, "b");
  auto *fc = f->createFullyConnected("fc", NodeValue(x), NodeValue(w), NodeValue(b));
  auto *relu = f->createRelu("relu", NodeValue(fc));
  f->createSave("y", NodeValue(relu));

  auto F = generateIR(f);
  ASSERT_TRUE(F) << F.getError().toString();
  const IRFunction &ir = **F;
  // Weights: x and y mutable, w and b constant.
  ASSERT_EQ(ir.getWeights().size(), 4u);
  EXPECT_TRUE(ir.getWeightForStorage(w)->isConstant());
  EXPECT_TRUE(ir.getWeightForStorage(b)->isConstant());
  EXPECT_FALSE(ir.getWeightForStorage(x)->isConstant());

  // alloc fc, FC, alloc relu, Relu, dealloc fc, copy y, dealloc relu.
  auto v = instrs(ir);
  ASSERT_EQ(v.size(), 7u) << ir.toString();
  EXPECT_EQ(v[0]->getKind(), InstrKind::AllocActivation);
  EXPECT_EQ(v[1]->getKind(), InstrKind::FullyConnected);
  EXPECT_EQ(v[2]->getKind(), InstrKind::AllocActivation);
  EXPECT_EQ(v[3]->getKind(), InstrKind::Relu);
  EXPECT_EQ(v[4]->getKind(), InstrKind::DeallocActivation);
  EXPECT_EQ(cast<DeallocActivationInst>(v[4])->getSrc(), v[0]);
  EXPECT_EQ(v[5]->getKind(), InstrKind::Copy);
  EXPECT_EQ(v[6]->getKind(), InstrKind::DeallocActivation);
  EXPECT_EQ(cast<DeallocActivationInst>(v[6])->getSrc(), v[2]);

  // Operand kinds: the FC writes its activation and reads x, w, b.
  const auto *fci = cast<FullyConnectedInst>(v[1]);
  EXPECT_EQ(fci->getOperand(0).second, OperandKind::Out);
  EXPECT_EQ(fci->getDest(), v[0]);
  EXPECT_EQ(fci->getInput(), ir.getWeightForStorage(x));
  EXPECT_EQ(fci->getOperand(1).second, OperandKind::In);
  EXPECT_EQ(*v[0]->getType(), Type(ElemKind::Float, {2, 3}));
  EXPECT_EQ(cast<CopyInst>(v[5])->getDest(),
            ir.getWeightForStorage(cast<Placeholder>(f->getSaves()[0]->getOutput().node)));

  std::string text = ir.toString();
  EXPECT_NE(text.find("FullyConnected @out %fc.res, @in @x, @in @w, @in @b"), std::string::npos)
      << text;
  EXPECT_NE(text.find("@w : float<4x3> const"), std::string::npos) << text;
  EXPECT_NE(text.find("@x : float<2x4> mutable"), std::string::npos) << text;
}

TEST(IRGen, ReshapeIsAViewAndKeepsItsSourceAlive) {
  Module m;
  Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {2, 6}, "x");
  auto *t = f->createTanh("tanh", NodeValue(x));
  auto *r = f->createReshape("r", NodeValue(t), {3, 4});
  auto *s = f->createSigmoid("sig", NodeValue(r));
  f->createSave("y", NodeValue(s));
  auto F = generateIR(f);
  ASSERT_TRUE(F) << F.getError().toString();
  auto v = instrs(**F);
  size_t view = indexOf(v, InstrKind::TensorView);
  ASSERT_LT(view, v.size());
  EXPECT_EQ(*v[view]->getType(), Type(ElemKind::Float, {3, 4}));
  size_t sig = indexOf(v, InstrKind::Sigmoid);
  ASSERT_LT(sig, v.size());
  EXPECT_EQ(cast<SigmoidInst>(v[sig])->getInput(), v[view]);
  // The tanh buffer is freed only after the sigmoid read it through the view.
  for (size_t i = 0; i < v.size(); i++) {
    auto *d = dyn_cast<DeallocActivationInst>(v[i]);
    if (d && d->getSrc() == v[0]) {
      EXPECT_GT(i, sig);
    }
  }
  EXPECT_FALSE((*F)->verify());
}

TEST(IRGen, DeadNodesAreSkippedAndMultiResultsAllocated) {
  Module m;
  Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {2, 5}, "x");
  f->createExp("unused", NodeValue(x));
  auto *topk = f->createTopK("topk", NodeValue(x), 2);
  f->createSave("idx", topk->getIndices());
  auto F = generateIR(f);
  ASSERT_TRUE(F) << F.getError().toString();
  auto v = instrs(**F);
  EXPECT_EQ(indexOf(v, InstrKind::Exp), v.size());
  size_t tk = indexOf(v, InstrKind::TopK);
  ASSERT_LT(tk, v.size());
  const auto *ti = cast<TopKInst>(v[tk]);
  EXPECT_EQ(*ti->getValues()->getType(), Type(ElemKind::Float, {2, 2}));
  EXPECT_EQ(*ti->getIndices()->getType(), Type(ElemKind::Int64I, {2, 2}));
}

TEST(IRGen, InvalidGraphIsAnErrorNotACrash) {
  Module m;
  Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {2, 5}, "x");
  auto *y = m.createPlaceholder(ElemKind::Float, {3, 5}, "y");
  f->createSave("out", NodeValue(f->createAdd("add", NodeValue(x), NodeValue(y))));
  auto F = generateIR(f);
  ASSERT_FALSE(F);
  Error e = F.takeError();
  EXPECT_NE(e.message().find("'add'"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("float<3x5>"), std::string::npos) << e.message();
}
