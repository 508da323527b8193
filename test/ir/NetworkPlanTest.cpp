// The acceptance figures of the memory planner on the full-size reference networks
// (batch 1): the activation arena is within 5% of the max-live lower bound of the chosen
// schedule, and no larger than plain topological order without buffer sharing needs.
// kiln-plan --report prints the same figures.

#include "kiln/Memory/MemoryPipeline.h"
#include "src/tools/Networks.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

class NetworkPlanTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NetworkPlanTest, ArenaNearMaxLive) {
  Module m;
  Function *f = networks::buildNetwork(GetParam(), m);
  ASSERT_NE(f, nullptr);
  MemoryPipelineOptions plainOpts;
  plainOpts.memoryAwareSchedule = false;
  plainOpts.runIRPasses = false;
  auto plain = generatePlannedIR(f, plainOpts);
  ASSERT_TRUE(bool(plain)) << plain.getError().toString();
  auto opt = generatePlannedIR(f);
  ASSERT_TRUE(bool(opt)) << opt.getError().toString();
  const MemoryPlan &p = opt->plan;
  EXPECT_LE(double(p.activationBytes), 1.05 * double(p.maxLiveBytes)) << p.summary();
  EXPECT_LE(p.activationBytes, plain->plan.maxLiveBytes);
  EXPECT_LE(opt->schedule.peakBytes, opt->schedule.topologicalPeakBytes);
  std::cout << GetParam() << ": " << p.summary() << "; plain: " << plain->plan.summary() << "\n";
}

INSTANTIATE_TEST_SUITE_P(Networks, NetworkPlanTest,
                         ::testing::Values("resnet50", "mobilenetv2", "transformer"));

} // namespace
} // namespace kiln
