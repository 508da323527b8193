// Streams of requests through a network split over several devices: with pipelining a
// request starts while earlier ones are still in later partitions; without it one request
// is in the devices at a time. Callbacks of one RunOptions::stream come in submission
// order whatever order the requests finish in, failed and refused ones included. The
// Sim's realtime mode makes a run last its simulated time.

#include "RuntimeTestUtils.h"

#include "backends/Sim/SimDeviceManager.h"
#include "kiln/Base/Trace.h"
#include "kiln/Runtime/Partitioner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

using namespace kiln;
using namespace kiln::test;

namespace {

SimDeviceManager &sim(HostManager &hm, unsigned i) {
  return static_cast<SimDeviceManager &>(*hm.getDevice(i));
}

/// A chain of fully-connected layers that takes two Sim devices (no host device).
struct TwoStage {
  Module m;
  Net n;
  std::unique_ptr<HostManager> hm;
  explicit TwoStage(bool pipeline, const HostConfig &config = {}) {
    n = buildMLP(m, "mlp", 4, 32);
    hm = exitOnError(HostManager::create(
        simDevices(2, estimateMemory(*n.f) * 2 / 3, /*withHost=*/false), config));
    NetworkOptions opts;
    opts.pipeline = pipeline;
    Error e = hm->addNetwork(n.f, opts);
    EXPECT_FALSE(e) << e.message();
    EXPECT_EQ(exitOnError(hm->getNumPartitions("mlp")), 2u);
  }
};

/// The number of pairs of device runs ("partition" events) that overlap in time.
size_t overlappingRuns(const Tracer &t) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (const TraceEvent &e : t.getEvents())
    if (e.phase == 'X' && e.category == "partition")
      runs.emplace_back(e.startNs, e.startNs + e.durNs);
  size_t n = 0;
  for (size_t i = 0; i < runs.size(); i++)
    for (size_t j = i + 1; j < runs.size(); j++)
      n += runs[i].first < runs[j].second && runs[j].first < runs[i].second;
  return n;
}

/// Submits \p count requests at once (each device run slowed by \p delay) and returns the
/// overlapping device runs; every result must match the Interpreter.
size_t runStream(TwoStage &s, unsigned count, std::chrono::milliseconds delay) {
  for (unsigned i = 0; i < 2; i++)
    sim(*s.hm, i).setRunDelay(delay);
  s.hm->startTrace();
  Results results;
  std::vector<Tensor> inputs;
  for (unsigned i = 0; i < count; i++)
    inputs.push_back(makeInput(s.n.input, i));
  for (unsigned i = 0; i < count; i++)
    s.hm->runNetwork("mlp", makeBindings(s.n, inputs[i]), results.callback());
  auto &all = results.wait(count);
  for (RunResult &r : all) {
    EXPECT_FALSE(r.error) << r.error.message();
    if (r.error)
      continue;
    EXPECT_EQ(r.report.partitions.size(), 2u);
    std::string why;
    // Request ids count from 1 in submission order.
    EXPECT_TRUE(sameOutputs(s.n, *r.bindings, reference(s.n, inputs[r.id - 1]), &why)) << why;
  }
  return overlappingRuns(*s.hm->stopTrace());
}

} // namespace

TEST(Pipeline, RequestsOverlapAcrossDevices) {
  TwoStage s(/*pipeline=*/true);
  // Request k+1's first partition runs on one device while request k's second runs on
  // the other.
  EXPECT_GT(runStream(s, 6, std::chrono::milliseconds(30)), 0u);
}

TEST(Pipeline, OffRunsOneRequestAtATime) {
  TwoStage s(/*pipeline=*/false);
  EXPECT_EQ(runStream(s, 6, std::chrono::milliseconds(30)), 0u);
  EXPECT_EQ(s.hm->getActiveRequests(), 0u);
  // Blocking runs wait their turn too and still match.
  Tensor x = makeInput(s.n.input, 9);
  auto b = makeBindings(s.n, x);
  ASSERT_FALSE(s.hm->runNetworkBlocking("mlp", *b));
  std::string why;
  EXPECT_TRUE(sameOutputs(s.n, *b, reference(s.n, x), &why)) << why;
}

// One partition on two devices, one of them slow: requests on the fast one finish first,
// yet the stream's callbacks come in submission order; a second stream and requests
// without a stream are not held back by the first.
TEST(Pipeline, StreamCallbacksComeInSubmissionOrder) {
  Module m;
  Net n = buildMLP(m, "mlp", 2, 16);
  auto hm = exitOnError(HostManager::create(simDevices(2, 1 << 20, /*withHost=*/false)));
  NetworkOptions opts;
  opts.replicas = 2;
  ASSERT_FALSE(hm->addNetwork(n.f, opts));
  sim(*hm, 0).setRunDelay(std::chrono::milliseconds(40));
  Results ordered, other;
  constexpr unsigned kRequests = 16;
  Tensor x = makeInput(n.input, 0);
  std::vector<Tensor> ref = reference(n, x);
  RunOptions inStream;
  inStream.stream = 7;
  std::vector<RunId> submitted;
  for (unsigned i = 0; i < kRequests; i++) {
    submitted.push_back(hm->runNetwork("mlp", makeBindings(n, x), ordered.callback(), inStream));
    hm->runNetwork("mlp", makeBindings(n, x), other.callback());
  }
  auto &got = ordered.wait(kRequests);
  std::vector<RunId> order;
  for (RunResult &r : got) {
    order.push_back(r.id);
    ASSERT_FALSE(r.error) << r.error.message();
    std::string why;
    EXPECT_TRUE(sameOutputs(n, *r.bindings, ref, &why)) << why;
  }
  EXPECT_EQ(order, submitted);
  other.wait(kRequests);
  // Both devices served the stream, so its requests did finish out of order.
  EXPECT_GT(hm->getDevice(0)->getCompletedRuns(), 0u);
  EXPECT_GT(hm->getDevice(1)->getCompletedRuns(), 0u);
}

TEST(Pipeline, AStreamLosesNothingOnFaultsOrAFullQueue) {
  TwoStage s(/*pipeline=*/true, HostConfig{4});
  sim(*s.hm, 1).failNextRuns(3);
  sim(*s.hm, 0).setRunDelay(std::chrono::milliseconds(20));
  Results results;
  RunOptions inStream;
  inStream.stream = 1;
  constexpr unsigned kRequests = 12;
  Tensor x = makeInput(s.n.input, 3);
  std::vector<Tensor> ref = reference(s.n, x);
  std::vector<RunId> submitted;
  for (unsigned i = 0; i < kRequests; i++)
    submitted.push_back(
        s.hm->runNetwork("mlp", makeBindings(s.n, x), results.callback(), inStream));
  auto &got = results.wait(kRequests);
  std::vector<RunId> order;
  unsigned faults = 0, refused = 0;
  for (RunResult &r : got) {
    order.push_back(r.id);
    if (r.error) {
      ASSERT_TRUE(r.error.code() == ErrorCode::Runtime || r.error.code() == ErrorCode::QueueFull)
          << r.error.message();
      (r.error.code() == ErrorCode::Runtime ? faults : refused)++;
      continue;
    }
    std::string why;
    EXPECT_TRUE(sameOutputs(s.n, *r.bindings, ref, &why)) << why;
  }
  EXPECT_EQ(order, submitted); // refused and failed requests answered in their place
  EXPECT_GT(refused, 0u);      // 12 at once against a limit of 4
  EXPECT_LE(faults, 3u);
  EXPECT_EQ(faults, sim(*s.hm, 1).getStats().failedRuns);
}

// realtime=1: a run lasts at least its simulated time (cycles at clock_mhz).
TEST(Pipeline, RealtimeSimRunsTakeTheirSimulatedTime) {
  Module m;
  Net n = buildMLP(m, "mlp", 2, 16);
  std::vector<DeviceConfig> devs = simDevices(1, 1 << 20, /*withHost=*/false);
  devs[0].parameters["realtime"] = "1";
  devs[0].parameters["clock_mhz"] = "0.01"; // 100 us per cycle
  auto hm = exitOnError(HostManager::create(devs));
  ASSERT_FALSE(hm->addNetwork(n.f));
  Tensor x = makeInput(n.input, 0);
  auto b = makeBindings(n, x);
  RunReport report;
  ASSERT_FALSE(hm->runNetworkBlocking("mlp", *b, {}, &report));
  ASSERT_EQ(report.partitions.size(), 1u);
  double simulated = double(report.totalCycles()) / 0.01 * 1e-6; // seconds
  EXPECT_GT(simulated, 0.05);
  EXPECT_GE(report.partitions[0].stats.seconds, simulated);
  std::string why;
  EXPECT_TRUE(sameOutputs(n, *b, reference(n, x), &why)) << why;
  // Only 0 and 1.
  std::vector<DeviceConfig> bad = simDevices(1, 1 << 20, false);
  bad[0].parameters["realtime"] = "2";
  auto refused = HostManager::create(bad);
  ASSERT_FALSE(bool(refused));
  EXPECT_TRUE(contains(refused.getError().message(), "realtime")) << refused.getError().message();
}
