// The static memory planner: every strategy produces aligned, non-overlapping placements
// no smaller than max-live; the planner keeps the best; the verifier catches broken plans;
// regions, views and the SVG picture.

#include "kiln/IR/IRParser.h"
#include "kiln/Memory/MemoryPlanner.h"

#include <gtest/gtest.h>

#include <random>

namespace kiln {
namespace {

/// Random buffers over 200 positions, sizes 1 B .. 1 MB. The values are dummies (the
/// placement only reads sizes and ranges).
std::vector<PlannedBuffer> randomBuffers(unsigned n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<PlannedBuffer> r;
  for (unsigned i = 0; i < n; i++) {
    PlannedBuffer b;
    b.start = rng() % 200;
    b.end = b.start + 1 + rng() % 40;
    b.size = 1 + rng() % (rng() % 2 ? 1000 : 1000000);
    r.push_back(b);
  }
  return r;
}

TEST(PlannerTest, EveryStrategyPlacesWithoutOverlap) {
  for (uint64_t seed = 1; seed <= 20; seed++) {
    std::vector<PlannedBuffer> bufs = randomBuffers(120, seed);
    uint64_t maxLive = computeMaxLiveBytes(bufs, 64);
    for (const PlacementStrategy &s : getAllPlacementStrategies()) {
      SCOPED_TRACE(s.name() + " seed " + std::to_string(seed));
      std::vector<PlannedBuffer> b = bufs;
      uint64_t arena = placeActivations(b, s, 64);
      EXPECT_GE(arena, maxLive);
      EXPECT_LE(arena, 3 * maxLive) << "a greedy placement this bad is a bug";
      for (size_t i = 0; i < b.size(); i++) {
        EXPECT_EQ(b[i].offset % 64, 0u);
        EXPECT_LE(b[i].offset + b[i].size, arena);
        for (size_t j = i + 1; j < b.size(); j++) {
          bool time = b[i].start < b[j].end && b[j].start < b[i].end;
          bool space = b[i].offset < b[j].offset + b[j].size && b[j].offset < b[i].offset + b[i].size;
          ASSERT_FALSE(time && space) << i << " and " << j;
        }
      }
    }
  }
}

TEST(PlannerTest, MaxLiveOfNestedAndTouchingRanges) {
  std::vector<PlannedBuffer> b(3);
  b[0].start = 0, b[0].end = 10, b[0].size = 100; // rounds to 128
  b[1].start = 10, b[1].end = 12, b[1].size = 64; // starts where b[0] ends: not together
  b[2].start = 2, b[2].end = 5, b[2].size = 1;    // rounds to 64
  EXPECT_EQ(computeMaxLiveBytes(b, 64), 192u);
  EXPECT_EQ(computeMaxLiveBytes(b, 1), 101u);
  std::vector<PlannedBuffer> c = b;
  EXPECT_EQ(placeActivations(c, {PlacementOrder::BySize, PlacementFit::BestFit}, 64), 192u);
}

const char *kIR = R"(
function f
weights:
  @x : float<2x8> mutable
  @w : float<8x8> const
  @b : float<3> const
  @y : float<2x8> mutable
code:
  %a = AllocActivation : float<2x8>
  MatMul @out %a, @in @x, @in @w
  %c = AllocActivation : float<2x8>
  Relu @out %c, @in %a
  DeallocActivation @out %a
  %row = TensorView @in %c {Offsets=[1,0]} : float<1x8>
  %d = AllocActivation : float<2x8>
  MatMul @out %d, @in %c, @in @w
  Tanh @out @y, @in %d
  DeallocActivation @out %d
  DeallocActivation @out %c
)";

TEST(PlannerTest, PlansRegionsAndViews) {
  Module m;
  auto F = parseIR(kIR, m);
  ASSERT_TRUE(bool(F)) << F.getError().toString();
  auto P = planMemory(**F);
  ASSERT_TRUE(bool(P));
  EXPECT_FALSE(bool(verifyMemoryPlan(**F, *P)));
  // Constants: w (256 B) then b (12 B, rounded region); mutable: x then y.
  EXPECT_EQ(P->constantBytes, 256u + 64u);
  EXPECT_EQ(P->mutableBytes, 128u);
  EXPECT_EQ(P->find((*F)->getWeights()[2].get())->offset, 256u);
  EXPECT_EQ(P->find((*F)->getWeights()[3].get())->offset, 64u);
  // %a and %c together, then %c and %d: 128 bytes live at most.
  EXPECT_EQ(P->maxLiveBytes, 128u);
  EXPECT_EQ(P->activationBytes, 128u);
  EXPECT_DOUBLE_EQ(P->efficiency(), 1.0);
  EXPECT_EQ(P->strategyArenas.size(), getAllPlacementStrategies().size());
  // The view is 32 bytes into %c.
  const Value *c = nullptr, *row = nullptr;
  for (const auto &ip : (*F)->getInstrs()) {
    if (ip->getName() == "c")
      c = ip.get();
    if (ip->getName() == "row")
      row = ip.get();
  }
  MemoryRegion r;
  uint64_t off = 0;
  ASSERT_TRUE(P->locate(row, r, off));
  EXPECT_EQ(r, MemoryRegion::Activation);
  EXPECT_EQ(off, P->find(c)->offset + 32);
}

TEST(PlannerTest, PlansPlaceholdersInTheArenaForTheirLifetimes) {
  Module m;
  auto F = parseIR(kIR, m);
  ASSERT_TRUE(bool(F)) << F.getError().toString();
  PlannerOptions o;
  o.placeholdersInArena = true;
  auto P = planMemory(**F, o);
  ASSERT_TRUE(bool(P));
  EXPECT_FALSE(bool(verifyMemoryPlan(**F, *P)));
  // Positions: 0 %a, 1 MatMul reads @x, 2 %c, 3 Relu, 4 dealloc %a, 5 %row, 6 %d,
  // 7 MatMul, 8 Tanh writes @y, 9 dealloc %d, 10 dealloc %c. @x (an input) lives [0, 2),
  // @y (an output) [8, 11); every buffer is 64 bytes. Live: x+a, a+c, c+d, then c+d+y at 8.
  const Value *x = (*F)->getWeights()[0].get(), *y = (*F)->getWeights()[3].get();
  ASSERT_TRUE(P->find(x) && P->find(y));
  EXPECT_EQ(P->find(x)->start, 0u);
  EXPECT_EQ(P->find(x)->end, 2u);
  EXPECT_EQ(P->find(y)->start, 8u);
  EXPECT_EQ(P->find(y)->end, 11u);
  EXPECT_EQ(P->mutableBytes, 0u);
  EXPECT_EQ(P->maxLiveBytes, 192u);
  EXPECT_EQ(P->activationBytes, 192u);
  MemoryRegion r;
  uint64_t off = 0;
  ASSERT_TRUE(P->locate(y, r, off));
  EXPECT_EQ(r, MemoryRegion::Activation);
  // The plain plan needs 128 mutable bytes and 128 of activations: 64 more in all.
  auto plain = planMemory(**F);
  ASSERT_TRUE(bool(plain));
  EXPECT_EQ(plain->mutableBytes + plain->activationBytes, 256u);
  // The verifier checks placeholders against the activations they share bytes with.
  MemoryPlan q = *P;
  for (PlannedBuffer &b : q.buffers)
    if (b.value == y)
      b.offset = 0, b.start = 8, b.end = 11;
  for (PlannedBuffer &b : q.buffers)
    if (b.value != y && b.region == MemoryRegion::Activation && b.start <= 8 && b.end > 8)
      b.offset = 0;
  Error e = verifyMemoryPlan(**F, q);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(e.message().find("share bytes"), std::string::npos) << e.message();
}

TEST(PlannerTest, VerifierCatchesBrokenPlans) {
  Module m;
  auto F = parseIR(kIR, m);
  ASSERT_TRUE(bool(F));
  auto P = planMemory(**F);
  ASSERT_TRUE(bool(P));
  auto broken = [&](auto edit) {
    MemoryPlan q = *P;
    edit(q);
    Error e = verifyMemoryPlan(**F, q);
    return e ? e.message() : std::string();
  };
  // %a and %c are live together: put them on the same bytes.
  EXPECT_NE(broken([](MemoryPlan &q) {
              auto acts = std::find_if(q.buffers.begin(), q.buffers.end(), [](auto &b) {
                return b.region == MemoryRegion::Activation;
              });
              acts[1].offset = acts[0].offset;
            }).find("share bytes"),
            std::string::npos);
  EXPECT_NE(broken([](MemoryPlan &q) { q.buffers.back().offset += 4; }).find("not aligned"),
            std::string::npos);
  EXPECT_NE(broken([](MemoryPlan &q) { q.activationBytes = 64; }).find("ends beyond"),
            std::string::npos);
  EXPECT_NE(broken([](MemoryPlan &q) { q.buffers[2].offset = 0; }).find("weights"),
            std::string::npos);
  EXPECT_NE(broken([](MemoryPlan &q) { q.buffers.pop_back(); }).find("has no place"),
            std::string::npos);
  EXPECT_NE(broken([](MemoryPlan &q) { q.buffers.back().end++; }).find("does not match"),
            std::string::npos);
}

TEST(PlannerTest, RendersOneRectanglePerActivation) {
  Module m;
  auto F = parseIR(kIR, m);
  ASSERT_TRUE(bool(F));
  auto P = planMemory(**F);
  ASSERT_TRUE(bool(P));
  std::string svg = renderMemoryPlanSVG(**F, *P, "test <plan>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("test &lt;plan&gt;"), std::string::npos);
  size_t titles = 0;
  for (size_t p = 0; (p = svg.find("<title>%", p)) != std::string::npos; p++)
    titles++;
  EXPECT_EQ(titles, 3u);
  EXPECT_NE(svg.find("%d: float&lt;2x8&gt;"), std::string::npos);
}

} // namespace
} // namespace kiln
