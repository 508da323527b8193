// HostManager end to end on Sim devices and an Interpreter host device: split models
// match the Interpreter, many concurrent requests, faults reach exactly the affected
// requests, a bounded queue, and removal with requests in flight.

#include "RuntimeTestUtils.h"

#include "backends/Sim/SimDeviceManager.h"
#include "kiln/Runtime/MultiDevice.h"
#include "kiln/Runtime/Partitioner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include <glog/logging.h>

using namespace kiln;
using namespace kiln::test;

namespace {

SimDeviceManager &sim(HostManager &hm, const std::string &name) {
  DeviceManager *d = hm.getDevice(name);
  CHECK(d) << name;
  return static_cast<SimDeviceManager &>(*d);
}

/// The distinct devices in a plan's text: names in brackets after "on <backend>".
std::set<std::string> devicesOf(const std::string &plan) {
  std::set<std::string> d;
  for (size_t at = plan.find('['); at != std::string::npos; at = plan.find('[', at + 1)) {
    size_t end = plan.find(']', at);
    std::string list = plan.substr(at + 1, end - at - 1);
    for (size_t s = 0, c; s < list.size(); s = c + 2) {
      c = list.find(", ", s);
      if (c == std::string::npos)
        c = list.size();
      d.insert(list.substr(s, c - s));
    }
  }
  return d;
}

} // namespace

TEST(HostManager, ModelTooLargeForOneSimIsSplitOverSeveral) {
  Module m;
  Net n = buildMLP(m, "mlp", 8, 32); // ~35 KiB, mostly weights
  uint64_t mem = estimateMemory(*n.f) / 3;
  auto hm = exitOnError(HostManager::create(simDevices(4, mem, /*withHost=*/false)));
  ASSERT_FALSE(hm->addNetwork(n.f));
  size_t parts = exitOnError(hm->getNumPartitions("mlp"));
  EXPECT_GE(parts, 3u);
  std::string plan = exitOnError(hm->getPlanText("mlp"));
  EXPECT_GE(devicesOf(plan).size(), 3u) << plan;
  for (unsigned i = 0; i < 4; i++)
    EXPECT_LE(hm->getDevice(i)->getUsedMemory(), mem);
  for (unsigned i = 0; i < 3; i++) {
    Tensor x = makeInput(n.input, i);
    auto b = makeBindings(n, x);
    RunReport report;
    ASSERT_FALSE(hm->runNetworkBlocking("mlp", *b, {}, &report));
    std::string why;
    EXPECT_TRUE(sameOutputs(n, *b, reference(n, x), &why)) << why;
    EXPECT_EQ(report.partitions.size(), parts);
    EXPECT_GT(report.totalCycles(), 0u);
    EXPECT_GT(report.totalDmaBytes(), 0u);
  }
  // Too small for even one layer: a clear error, and nothing stays loaded.
  Module m2;
  Net big = buildMLP(m2, "big", 2, 64);
  Error e = hm->addNetwork(big.f);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_TRUE(contains(e.message(), "big.fc0")) << e.message();
  EXPECT_FALSE(hm->hasNetwork("big"));
  EXPECT_EQ(m2.getFunctions().size(), 1u);
}

TEST(HostManager, OperatorsTheSimLacksRunOnTheHost) {
  Module m;
  Net n = buildMixed(m, "mixed");
  auto hm = exitOnError(HostManager::create(simDevices(2, 1 << 20)));
  ASSERT_FALSE(hm->addNetwork(n.f));
  std::string plan = exitOnError(hm->getPlanText("mixed"));
  EXPECT_TRUE(contains(plan, "on Sim [sim")) << plan;
  EXPECT_TRUE(contains(plan, "on Interpreter [interpreter0]")) << plan;
  EXPECT_TRUE(contains(exitOnError(hm->getPlanDot("mixed")), "->"));
  for (unsigned i = 0; i < 3; i++) {
    Tensor x = makeInput(n.input, i);
    auto b = makeBindings(n, x);
    ASSERT_FALSE(hm->runNetworkBlocking("mixed", *b));
    std::string why;
    EXPECT_TRUE(sameOutputs(n, *b, reference(n, x), &why)) << why;
  }
  EXPECT_GT(sim(*hm, "sim0").getStats().runs + sim(*hm, "sim1").getStats().runs, 0u);
}

// With Sim devices only, what the Sim lacks falls back to an Interpreter host device the
// HostManager starts on first need, with one warning; strictBackend keeps the error.
TEST(HostManager, WithoutAHostDeviceWhatTheSimLacksFallsBackToTheInterpreter) {
  Module m;
  Net n = buildMixed(m, "mixed");
  auto hm = exitOnError(HostManager::create(simDevices(2, 1 << 20, /*withHost=*/false)));
  NetworkOptions strict;
  strict.strictBackend = true;
  Error e = hm->addNetwork(n.f, strict);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  EXPECT_TRUE(contains(e.message(), "(Sigmoid)")) << e.message();
  EXPECT_TRUE(contains(e.message(), "(Tanh)")) << e.message();

  NetworkOptions opts;
  std::vector<std::string> warnings;
  opts.onWarning = [&](const std::string &w) { warnings.push_back(w); };
  ASSERT_FALSE(hm->addNetwork(n.f, opts));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(contains(warnings[0], "backend Sim cannot run")) << warnings[0];
  EXPECT_TRUE(contains(warnings[0], "(Sigmoid)")) << warnings[0];
  EXPECT_TRUE(contains(warnings[0], "(Tanh)")) << warnings[0];
  EXPECT_EQ(hm->getNumDevices(), 2u);
  std::string plan = exitOnError(hm->getPlanText("mixed"));
  EXPECT_TRUE(contains(plan, "on Interpreter [host-interpreter]")) << plan;
  NetworkSplit split = exitOnError(hm->getNetworkSplit("mixed"));
  ASSERT_EQ(split.backends.size(), 2u) << split.toString();
  EXPECT_EQ(split.backends[0].backend, "Sim");
  EXPECT_EQ(split.backends[1].backend, "Interpreter");
  EXPECT_EQ(split.fallbackBackend, "Interpreter");
  EXPECT_FALSE(split.fallbackNodes.empty());
  for (unsigned i = 0; i < 3; i++) {
    Tensor x = makeInput(n.input, i);
    auto b = makeBindings(n, x);
    ASSERT_FALSE(hm->runNetworkBlocking("mixed", *b));
    std::string why;
    EXPECT_TRUE(sameOutputs(n, *b, reference(n, x), &why)) << why;
  }
}

// Networks added from several threads at once, each needing the fallback: one host device
// is started, every network runs (TSan checks the sharing).
TEST(HostManager, ConcurrentAddsShareOneFallbackDevice) {
  auto hm = exitOnError(HostManager::create(simDevices(2, 1 << 20, /*withHost=*/false)));
  std::vector<std::unique_ptr<Module>> mods(4);
  std::vector<Net> nets(4);
  for (unsigned k = 0; k < 4; k++) {
    mods[k] = std::make_unique<Module>();
    nets[k] = buildMixed(*mods[k], "mixed" + std::to_string(k));
  }
  std::vector<std::thread> ts;
  std::atomic<unsigned> failures{0};
  for (unsigned k = 0; k < 4; k++)
    ts.emplace_back([&, k] {
      NetworkOptions opts;
      opts.onWarning = [](const std::string &) {};
      if (hm->addNetwork(nets[k].f, opts)) {
        failures++;
        return;
      }
      Tensor x = makeInput(nets[k].input, k);
      auto b = makeBindings(nets[k], x);
      if (hm->runNetworkBlocking(nets[k].f->getName(), *b) ||
          !sameOutputs(nets[k], *b, reference(nets[k], x)))
        failures++;
    });
  for (auto &t : ts)
    t.join();
  EXPECT_EQ(failures.load(), 0u);
  std::set<std::string> devices;
  for (unsigned k = 0; k < 4; k++)
    for (const std::string &d : devicesOf(exitOnError(hm->getPlanText(nets[k].f->getName()))))
      devices.insert(d);
  EXPECT_EQ(devices.count("host-interpreter"), 1u);
  for (unsigned k = 0; k < 4; k++)
    ASSERT_FALSE(hm->removeNetwork(nets[k].f->getName()));
}

TEST(HostManager, AThousandConcurrentRequestsOnFourDevices) {
  Module m;
  Net n = buildMixed(m, "mixed");
  // Force the Sim parts over several devices, and replicate what fits twice.
  NetworkOptions opts;
  opts.replicas = 2;
  auto hm = exitOnError(HostManager::create(simDevices(4, 12 * 1024), HostConfig{2000}));
  Error added = hm->addNetwork(n.f, opts);
  ASSERT_FALSE(added) << added.message();
  std::string plan = exitOnError(hm->getPlanText("mixed"));
  EXPECT_EQ(devicesOf(plan).size(), 5u) << plan; // all four Sims and the host
  constexpr unsigned kInputs = 16, kRequests = 1000;
  std::vector<std::vector<Tensor>> refs;
  std::vector<Tensor> inputs;
  for (unsigned i = 0; i < kInputs; i++) {
    inputs.push_back(makeInput(n.input, i));
    refs.push_back(reference(n, inputs.back()));
  }
  Results results;
  std::map<RunId, unsigned> inputOf;
  std::mutex idMu;
  // Submit from four threads at once.
  std::vector<std::thread> submitters;
  for (unsigned t = 0; t < 4; t++)
    submitters.emplace_back([&, t] {
      for (unsigned i = t; i < kRequests; i += 4) {
        std::lock_guard<std::mutex> lock(idMu); // the id must be recorded before the result
        RunId id =
            hm->runNetwork("mixed", makeBindings(n, inputs[i % kInputs]), results.callback());
        inputOf[id] = i % kInputs;
      }
    });
  for (auto &t : submitters)
    t.join();
  auto &all = results.wait(kRequests);
  ASSERT_EQ(all.size(), kRequests);
  std::set<RunId> ids;
  unsigned bad = 0;
  for (RunResult &r : all) {
    EXPECT_TRUE(ids.insert(r.id).second) << "one callback per request";
    ASSERT_FALSE(r.error) << r.error.message();
    ASSERT_TRUE(r.bindings);
    std::string why;
    if (!sameOutputs(n, *r.bindings, refs[inputOf[r.id]], &why) && bad++ < 3)
      ADD_FAILURE() << why;
  }
  EXPECT_EQ(bad, 0u);
  for (unsigned i = 0; i < hm->getNumDevices(); i++)
    EXPECT_GT(hm->getDevice(i)->getCompletedRuns(), 0u) << hm->getDevice(i)->getName();
  EXPECT_EQ(hm->getActiveRequests(), 0u);
}

TEST(HostManager, RunFaultFailsExactlyTheRequestsItHits) {
  Module m;
  Net n = buildMixed(m, "mixed");
  auto hm = exitOnError(HostManager::create(simDevices(4, 1 << 20)));
  NetworkOptions opts;
  opts.replicas = 4; // every Sim partition on every Sim device
  ASSERT_FALSE(hm->addNetwork(n.f, opts));
  Tensor x = makeInput(n.input, 0);
  std::vector<Tensor> ref = reference(n, x);
  sim(*hm, "sim2").failNextRuns(5);
  Results results;
  constexpr unsigned kRequests = 200;
  for (unsigned i = 0; i < kRequests; i++)
    hm->runNetwork("mixed", makeBindings(n, x), results.callback());
  unsigned failed = 0;
  for (RunResult &r : results.wait(kRequests)) {
    if (r.error) {
      failed++;
      EXPECT_EQ(r.error.code(), ErrorCode::Runtime);
      EXPECT_TRUE(contains(r.error.message(), "injected run fault")) << r.error.message();
      EXPECT_TRUE(contains(r.error.message(), "sim2")) << r.error.message();
      continue;
    }
    std::string why;
    EXPECT_TRUE(sameOutputs(n, *r.bindings, ref, &why)) << why;
  }
  // Each request runs each partition once, so five failed runs are five requests.
  EXPECT_EQ(failed, 5u);
  EXPECT_EQ(sim(*hm, "sim2").getStats().failedRuns, 5u);
  // The device keeps serving.
  auto b = makeBindings(n, x);
  ASSERT_FALSE(hm->runNetworkBlocking("mixed", *b));
}

TEST(HostManager, LoadFaultMovesThePartitionOrFailsTheAddCleanly) {
  Module m;
  Net keep = buildMLP(m, "keep", 2, 8);
  Net n = buildMixed(m, "mixed");
  auto hm = exitOnError(HostManager::create(simDevices(2, 1 << 20)));
  ASSERT_FALSE(hm->addNetwork(keep.f));
  uint64_t used0 = hm->getDevice(0)->getUsedMemory(), used1 = hm->getDevice(1)->getUsedMemory();
  size_t fns = m.getFunctions().size();

  // Both Sim devices refuse: the add fails, nothing stays loaded or created.
  sim(*hm, "sim0").failNextLoads(100);
  sim(*hm, "sim1").failNextLoads(100);
  Error e = hm->addNetwork(n.f);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::Runtime);
  EXPECT_TRUE(contains(e.message(), "injected load fault")) << e.message();
  EXPECT_FALSE(hm->hasNetwork("mixed"));
  EXPECT_EQ(hm->getDevice(0)->getUsedMemory(), used0);
  EXPECT_EQ(hm->getDevice(1)->getUsedMemory(), used1);
  EXPECT_EQ(hm->getDevice(2)->getUsedMemory(), 0u); // the host partitions were unloaded
  EXPECT_EQ(m.getFunctions().size(), fns);
  auto kb = makeBindings(keep, makeInput(keep.input, 1));
  ASSERT_FALSE(hm->runNetworkBlocking("keep", *kb)); // the other network is untouched

  // One device refuses once: its partition goes to the other device.
  sim(*hm, "sim0").clearFaults();
  sim(*hm, "sim1").clearFaults();
  DeviceManager *roomiest =
      hm->getDevice(0)->getAvailableMemory() >= hm->getDevice(1)->getAvailableMemory()
          ? hm->getDevice(0)
          : hm->getDevice(1);
  sim(*hm, roomiest->getName()).failNextLoads(1);
  ASSERT_FALSE(hm->addNetwork(n.f));
  Tensor x = makeInput(n.input, 2);
  auto b = makeBindings(n, x);
  ASSERT_FALSE(hm->runNetworkBlocking("mixed", *b));
  std::string why;
  EXPECT_TRUE(sameOutputs(n, *b, reference(n, x), &why)) << why;
}

TEST(HostManager, SlowDeviceMissesDeadlinesOnlyForItsRequests) {
  Module m;
  Net n = buildMLP(m, "mlp", 2, 8);
  auto hm = exitOnError(HostManager::create(simDevices(2, 1 << 20, /*withHost=*/false)));
  NetworkOptions opts;
  opts.replicas = 2;
  ASSERT_FALSE(hm->addNetwork(n.f, opts));
  Tensor x = makeInput(n.input, 0);
  std::vector<Tensor> ref = reference(n, x);

  // Without a deadline a slow device is only slow.
  sim(*hm, "sim1").setRunDelay(std::chrono::milliseconds(50));
  {
    Results results;
    for (int i = 0; i < 6; i++)
      hm->runNetwork("mlp", makeBindings(n, x), results.callback());
    for (RunResult &r : results.wait(6))
      EXPECT_FALSE(r.error) << r.error.message();
  }
  // With one, exactly the requests the slow device ran (or queued) fail.
  sim(*hm, "sim1").setRunDelay(std::chrono::milliseconds(1500));
  uint64_t slowBefore = hm->getDevice("sim1")->getCompletedRuns();
  RunOptions ro;
  ro.timeout = std::chrono::milliseconds(700);
  Results results;
  constexpr unsigned kRequests = 8;
  for (unsigned i = 0; i < kRequests; i++)
    hm->runNetwork("mlp", makeBindings(n, x), results.callback(), ro);
  unsigned failed = 0;
  for (RunResult &r : results.wait(kRequests)) {
    if (r.error) {
      failed++;
      EXPECT_TRUE(contains(r.error.message(), "deadline exceeded")) << r.error.message();
      EXPECT_TRUE(contains(r.error.message(), "sim1")) << r.error.message();
      continue;
    }
    std::string why;
    EXPECT_TRUE(sameOutputs(n, *r.bindings, ref, &why)) << why;
  }
  uint64_t slowRuns = hm->getDevice("sim1")->getCompletedRuns() - slowBefore;
  EXPECT_GE(slowRuns, 1u);
  EXPECT_EQ(failed, slowRuns);
  EXPECT_LT(failed, kRequests);
  sim(*hm, "sim1").clearFaults();
}

TEST(HostManager, FullQueueAnswersQueueFull) {
  Module m;
  Net n = buildMLP(m, "mlp", 1, 8);
  auto hm = exitOnError(HostManager::create(simDevices(1, 1 << 20, false), HostConfig{4}));
  ASSERT_FALSE(hm->addNetwork(n.f));
  sim(*hm, "sim0").setRunDelay(std::chrono::milliseconds(100));
  Tensor x = makeInput(n.input, 0);
  Results results;
  for (int i = 0; i < 10; i++)
    hm->runNetwork("mlp", makeBindings(n, x), results.callback());
  // The six refused ones are answered at once, on this thread.
  unsigned full = 0, ok = 0;
  for (RunResult &r : results.wait(10)) {
    if (r.error) {
      EXPECT_EQ(r.error.code(), ErrorCode::QueueFull);
      EXPECT_TRUE(contains(r.error.message(), "the limit is 4")) << r.error.message();
      EXPECT_TRUE(r.bindings) << "the bindings come back";
      full++;
    } else {
      ok++;
    }
  }
  EXPECT_EQ(full, 6u);
  EXPECT_EQ(ok, 4u);
  sim(*hm, "sim0").clearFaults();
  auto b = makeBindings(n, x);
  EXPECT_FALSE(hm->runNetworkBlocking("mlp", *b)); // room again
  Error unknown = hm->runNetworkBlocking("nope", *b);
  EXPECT_EQ(unknown.code(), ErrorCode::NotFound);
}

TEST(HostManager, RemovingANetworkWithRequestsInFlightIsSafe) {
  Module m;
  Net n = buildMixed(m, "mixed");
  size_t fns = m.getFunctions().size();
  auto hm = exitOnError(HostManager::create(simDevices(4, 12 * 1024)));
  Error added = hm->addNetwork(n.f);
  ASSERT_FALSE(added) << added.message();
  ASSERT_GT(m.getFunctions().size(), fns); // it was split
  sim(*hm, "sim0").setRunDelay(std::chrono::milliseconds(2));
  Tensor x = makeInput(n.input, 3);
  std::vector<Tensor> ref = reference(n, x);
  Results results;
  std::atomic<bool> stop{false};
  std::atomic<unsigned> submitted{0};
  std::thread submitter([&] {
    while (!stop) {
      hm->runNetwork("mixed", makeBindings(n, x), results.callback());
      submitted++;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  while (submitted < 20)
    std::this_thread::yield();
  ASSERT_FALSE(hm->removeNetwork("mixed"));
  // Every device is empty once removal returns: nothing of it runs any more.
  for (unsigned i = 0; i < hm->getNumDevices(); i++) {
    EXPECT_EQ(hm->getDevice(i)->getUsedMemory(), 0u);
    EXPECT_EQ(hm->getDevice(i)->getPendingRuns(), 0u);
  }
  EXPECT_EQ(m.getFunctions().size(), fns); // partition functions erased
  stop = true;
  submitter.join();
  unsigned ok = 0, gone = 0;
  for (RunResult &r : results.wait(submitted)) {
    if (!r.error) {
      ok++;
      std::string why;
      EXPECT_TRUE(sameOutputs(n, *r.bindings, ref, &why)) << why;
    } else {
      EXPECT_EQ(r.error.code(), ErrorCode::NotFound) << r.error.message();
      gone++;
    }
  }
  EXPECT_EQ(ok + gone, submitted.load());
  EXPECT_GT(ok, 0u);
  EXPECT_EQ(hm->removeNetwork("mixed").code(), ErrorCode::NotFound);
  // The same function can be added again.
  ASSERT_FALSE(hm->addNetwork(n.f));
  auto b = makeBindings(n, x);
  EXPECT_FALSE(hm->runNetworkBlocking("mixed", *b));
}

TEST(HostManager, DestructionWaitsForRequestsInFlight) {
  Module m;
  Net n = buildMixed(m, "mixed");
  Results results;
  {
    auto hm = exitOnError(HostManager::create(simDevices(2, 1 << 20)));
    ASSERT_FALSE(hm->addNetwork(n.f));
    sim(*hm, "sim1").setRunDelay(std::chrono::milliseconds(1));
    for (int i = 0; i < 30; i++)
      hm->runNetwork("mixed", makeBindings(n, makeInput(n.input, 0)), results.callback());
  }
  EXPECT_EQ(results.wait(30).size(), 30u);
  EXPECT_EQ(m.getFunctions().size(), 1u);
}

TEST(HostManager, OwnsAModuleGivenToIt) {
  auto m = std::make_unique<Module>();
  Net a = buildMLP(*m, "a", 2, 8);
  Net b = buildMixed(*m, "b");
  Tensor xa = makeInput(a.input, 0), xb = makeInput(b.input, 0);
  auto ra = reference(a, xa), rb = reference(b, xb);
  auto hm = exitOnError(HostManager::create(simDevices(1, 1 << 20)));
  ASSERT_FALSE(hm->addNetwork(std::move(m)));
  EXPECT_EQ(hm->getNetworkNames(), (std::vector<std::string>{"a", "b"}));
  auto ba = makeBindings(a, xa), bb = makeBindings(b, xb);
  ASSERT_FALSE(hm->runNetworkBlocking("a", *ba));
  ASSERT_FALSE(hm->runNetworkBlocking("b", *bb));
  EXPECT_TRUE(sameOutputs(a, *ba, ra));
  EXPECT_TRUE(sameOutputs(b, *bb, rb));
  Error dup = hm->addNetwork(a.f);
  EXPECT_EQ(dup.code(), ErrorCode::InvalidArgument);
  ASSERT_FALSE(hm->removeNetwork("a"));
  ASSERT_FALSE(hm->removeNetwork("b")); // the module goes with the last network
}

TEST(HostManager, BadBindingsAreReportedToTheCaller) {
  Module m;
  Net n = buildMLP(m, "mlp", 1, 8);
  auto hm = exitOnError(HostManager::create(simDevices(1, 1 << 20, false)));
  ASSERT_FALSE(hm->addNetwork(n.f));
  PlaceholderBindings missing;
  missing.allocate(n.outputs[0]);
  Error e = hm->runNetworkBlocking("mlp", missing);
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.message(), "'mlp.x'")) << e.message();
  EXPECT_EQ(hm->getActiveRequests(), 0u);
}

// A bound input whose shape is not the network's: the error names the input and both
// shapes, for blocking and asynchronous runs.
TEST(HostManager, AnInputOfAnotherShapeNamesTheInputAndBothShapes) {
  Module m;
  Net n = buildMLP(m, "mlp", 1, 8);
  auto hm = exitOnError(HostManager::create(simDevices(1, 1 << 20)));
  ASSERT_FALSE(hm->addNetwork(n.f));
  auto check = [](const Error &e) {
    ASSERT_TRUE(e);
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_TRUE(contains(e.message(), "input 'mlp.x' expects shape [1, 8] (float<1x8>) but "
                                      "is bound to a tensor of shape [2, 8] (float<2x8>)"))
        << e.message();
  };
  auto b = makeBindings(n, Tensor(ElemKind::Float, {2, 8}));
  check(hm->runNetworkBlocking("mlp", *b));
  Results results;
  hm->runNetwork("mlp", makeBindings(n, Tensor(ElemKind::Float, {2, 8})), results.callback());
  check(results.wait(1)[0].error);
  EXPECT_EQ(hm->getActiveRequests(), 0u);
}

TEST(MultiDevice, BuildsSimDevicesWithAHostFallback) {
  Module m;
  Net n = buildMixed(m, "mixed");
  MultiDeviceOptions o;
  o.devices = 4;
  o.deviceMemory = 12 * 1024;
  auto created = createMultiDeviceNetwork(n.f, o);
  ASSERT_TRUE(created) << created.getError().message();
  MultiDeviceNetwork &md = created.get();
  EXPECT_EQ(md.network, "mixed");
  EXPECT_EQ(md.host->getNumDevices(), 5u);
  EXPECT_GE(md.numPartitions, 3u);
  EXPECT_TRUE(contains(md.planText, "on Interpreter")) << md.planText;
  EXPECT_TRUE(contains(md.planDot, "digraph")) << md.planDot;
  Tensor x = makeInput(n.input, 5);
  auto b = makeBindings(n, x);
  RunReport report;
  ASSERT_FALSE(md.host->runNetworkBlocking(md.network, *b, {}, &report));
  EXPECT_TRUE(sameOutputs(n, *b, reference(n, x)));
  EXPECT_GT(report.totalCycles(), 0u);
  EXPECT_TRUE(contains(report.toString(), "cycles")) << report.toString();
}

TEST(ExecutionEngineOnHostManager, SplitsOverSimDevicesAndRunsFromManyThreads) {
  Module ref;
  ExecutionEngine ee("Sim", 3, 12 * 1024);
  Net n = buildMLP(ee.getModule(), "mlp", 6, 32);
  ASSERT_FALSE(ee.compile());
  ASSERT_NE(ee.getHostManager(), nullptr);
  EXPECT_GE(exitOnError(ee.getHostManager()->getNumPartitions("mlp")), 2u);
  std::vector<std::thread> threads;
  std::atomic<unsigned> good{0};
  for (unsigned t = 0; t < 4; t++)
    threads.emplace_back([&, t] {
      for (unsigned i = 0; i < 10; i++) {
        Tensor x = makeInput(n.input, t * 10 + i);
        auto b = makeBindings(n, x);
        if (!ee.run(*b) && sameOutputs(n, *b, reference(n, x)))
          good++;
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(good.load(), 40u);
  // Recompiling replaces the networks.
  ASSERT_FALSE(ee.compile());
  auto b = makeBindings(n, makeInput(n.input, 0));
  EXPECT_FALSE(ee.run(*b));
}

TEST(HostManager, RunsAUserPartition) {
  Module m;
  Net n = buildMixed(m, "mixed");
  NetworkOptions opts;
  opts.partition = PartitionConfig();
  opts.partition->partitions = {{"head", "Sim"}, {"rest", "Interpreter"}};
  for (const auto &node : n.f->getNodes())
    opts.partition->nodeToPartition[node->getName()] = 1;
  opts.partition->nodeToPartition["mixed.conv1"] = 0;
  auto hm = exitOnError(HostManager::create(simDevices(1, 1 << 20)));
  ASSERT_FALSE(hm->addNetwork(n.f, opts));
  EXPECT_EQ(exitOnError(hm->getNumPartitions("mixed")), 2u);
  std::string plan = exitOnError(hm->getPlanText("mixed"));
  EXPECT_TRUE(contains(plan, "'mixed.head' on Sim [sim0]: 1 node")) << plan;
  Tensor x = makeInput(n.input, 9);
  auto b = makeBindings(n, x);
  ASSERT_FALSE(hm->runNetworkBlocking("mixed", *b));
  std::string why;
  EXPECT_TRUE(sameOutputs(n, *b, reference(n, x), &why)) << why;
}
