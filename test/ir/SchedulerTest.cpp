// The memory-aware scheduler: its orders are valid IRGen orders, never worse than plain
// topological order, strictly better where operand order matters, and its cost model
// agrees with the lifetimes IRGen produces.

#include "kiln/IR/IR.h"
#include "kiln/Memory/MemoryPlanner.h"
#include "kiln/Memory/Scheduler.h"
#include "src/tools/Networks.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

/// out = Mul(Relu(x), Broadcast(ReduceSum(Tile(s)))): plain depth-first order computes
/// the 4 MB Relu first and keeps it while the 16 MB Tile is live; running the right
/// operand first never holds both.
Function *buildOperandOrderGraph(Module &m) {
  Function *f = m.createFunction("operand_order");
  auto *x = m.createPlaceholder(ElemKind::Float, {1000, 1000}, "x");
  auto *s = m.createPlaceholder(ElemKind::Float, {1, 1000}, "s");
  NodeValue left = f->createRelu("left", x);
  NodeValue big = f->createTile("big", s, {4000, 1});
  NodeValue red = f->createReduceSum("sum", big, {0}, true);
  NodeValue right = f->createBroadcast("bcast", red, {1000, 1000});
  f->createSave("out", f->createMul("mul", left, right));
  return f;
}

uint64_t irMaxLive(const IRFunction &F) {
  return computeMaxLiveBytes(computeActivationLifetimes(F), 64);
}

TEST(SchedulerTest, RunsTheOperandNeedingMoreMemoryFirst) {
  Module m;
  Function *f = buildOperandOrderGraph(m);
  auto s = scheduleForMemory(f);
  ASSERT_TRUE(bool(s)) << s.getError().toString();
  const uint64_t MB = 1000 * 1000 * 4;
  EXPECT_GE(s->topologicalPeakBytes, 5 * MB); // Relu (1) + Tile (4)
  EXPECT_LT(s->peakBytes, s->topologicalPeakBytes);
  EXPECT_LE(s->peakBytes, 4 * MB + 4096);
  EXPECT_NE(s->strategy, "topological");
  EXPECT_EQ(computePeakLiveBytes(s->order), s->peakBytes);
  // The IR generated in that order has exactly the peak the scheduler predicted.
  auto F = generateIR(f, s->order);
  ASSERT_TRUE(bool(F)) << F.getError().toString();
  EXPECT_EQ(irMaxLive(**F), s->peakBytes);
  auto T = generateIR(f);
  ASSERT_TRUE(bool(T));
  EXPECT_EQ(irMaxLive(**T), s->topologicalPeakBytes);
}

TEST(SchedulerTest, NeverWorseThanTopologicalOnReferenceNetworks) {
  for (const std::string &name : networks::getNetworkNames()) {
    SCOPED_TRACE(name);
    Module m;
    Function *f = nullptr;
    if (name == "transformer") {
      networks::TransformerOptions o;
      o.seqLen = 16;
      o.dModel = 32;
      o.heads = 4;
      o.ffDim = 64;
      o.layers = 2;
      f = networks::buildTransformerEncoder(m, o);
    } else {
      networks::CNNOptions o;
      o.imageSize = 64;
      o.widthDivisor = 4;
      f = name == "resnet50" ? networks::buildResNet50(m, o) : networks::buildMobileNetV2(m, o);
    }
    auto s = scheduleForMemory(f);
    ASSERT_TRUE(bool(s)) << s.getError().toString();
    EXPECT_LE(s->peakBytes, s->topologicalPeakBytes);
    EXPECT_EQ(s->candidates.size(), 4u);
    for (const auto &c : s->candidates)
      EXPECT_GE(c.second, s->peakBytes) << c.first;
    auto F = generateIR(f, s->order);
    ASSERT_TRUE(bool(F)) << F.getError().toString();
    EXPECT_EQ(irMaxLive(**F), s->peakBytes);
  }
}

TEST(SchedulerTest, GenerateIRRejectsBadOrders) {
  Module m;
  Function *f = buildOperandOrderGraph(m);
  auto topo = scheduleTopologically(f);
  ASSERT_TRUE(bool(topo));
  std::vector<Node *> reversed(topo->rbegin(), topo->rend());
  auto e1 = generateIR(f, reversed);
  ASSERT_FALSE(bool(e1));
  EXPECT_EQ(e1.getError().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e1.getError().message().find("before its operand"), std::string::npos);
  std::vector<Node *> missing(topo->begin(), topo->end() - 1);
  auto e2 = generateIR(f, missing);
  ASSERT_FALSE(bool(e2));
  EXPECT_NE(e2.getError().message().find("misses 1 live nodes"), std::string::npos);
  std::vector<Node *> twice = *topo;
  twice.push_back(twice.front());
  EXPECT_FALSE(bool(generateIR(f, twice)));
}

} // namespace
} // namespace kiln
