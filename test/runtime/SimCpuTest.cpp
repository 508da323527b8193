// Sim devices with the CPU backend as the host fallback: what the Sim lacks is JIT-compiled
// for the CPU. The CPU's kernels are not bit-identical to the Interpreter's, so outputs
// are compared with a tolerance (one quantum on the int8 path downstream of the CPU).

#include "RuntimeTestUtils.h"

#include "kiln/Runtime/MultiDevice.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

using namespace kiln;
using namespace kiln::test;

namespace {

void expectClose(const Net &n, const PlaceholderBindings &b, const std::vector<Tensor> &ref) {
  const float tol[] = {1e-4f, 0.051f}; // y (float), yq (dequantized int8, scale 0.05)
  for (size_t i = 0; i < n.outputs.size(); i++) {
    const Tensor *t = b.get(n.outputs[i]);
    ASSERT_TRUE(t);
    EXPECT_LE(t->maxAbsDiff(ref[i]), tol[i]) << n.outputs[i]->getName();
  }
}

} // namespace

TEST(SimWithCpuFallback, SplitsBetweenSimAndCpuAndMatches) {
  Module m;
  Net n = buildMixed(m, "mixed");
  MultiDeviceOptions o;
  o.devices = 4;
  o.deviceMemory = 12 * 1024;
  auto created = createMultiDeviceNetwork(n.f, o);
  ASSERT_TRUE(created) << created.getError().message();
  MultiDeviceNetwork &md = created.get();
  EXPECT_TRUE(contains(md.planText, "on CPU [cpu0]")) << md.planText;
  EXPECT_TRUE(contains(md.planText, "on Sim [sim")) << md.planText;
  EXPECT_FALSE(contains(md.planText, "Interpreter")) << md.planText;
  std::vector<std::thread> threads;
  std::atomic<unsigned> runs{0};
  for (unsigned t = 0; t < 4; t++)
    threads.emplace_back([&, t] {
      for (unsigned i = 0; i < 8; i++) {
        Tensor x = makeInput(n.input, t * 8 + i);
        auto b = makeBindings(n, x);
        Error e = md.host->runNetworkBlocking(md.network, *b);
        EXPECT_FALSE(e) << e.message();
        expectClose(n, *b, reference(n, x));
        runs++;
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(runs.load(), 32u);
}
