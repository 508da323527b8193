// Runs on the caller's thread (DeviceManager::tryRunOnCaller and the blocking fast path of
// HostManager / ExecutionEngine): the same results, errors and accounting as runs queued
// to the device's worker, one run at a time per device, and safe stopping.
//
// A "Probe" backend (the Interpreter's code, wrapped) records the thread of each run and
// the most runs in progress at once, can hold runs at a gate, and can fail them.

#include "RuntimeTestUtils.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

using namespace kiln;
using namespace kiln::test;

namespace {

/// What the Probe's functions observe, shared by all of them (tests run one at a time).
struct ProbeState {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::thread::id> threads; ///< Of each run, in start order.
  unsigned running = 0, maxRunning = 0;
  bool gateOpen = true;
  bool fail = false;

  void reset() {
    std::lock_guard<std::mutex> lock(mu);
    threads.clear();
    running = maxRunning = 0;
    gateOpen = true;
    fail = false;
  }
  void setGate(bool open) {
    std::lock_guard<std::mutex> lock(mu);
    gateOpen = open;
    cv.notify_all();
  }
  void setFail(bool f) {
    std::lock_guard<std::mutex> lock(mu);
    fail = f;
  }
  /// Waits until \p n runs have started.
  void waitStarted(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return threads.size() >= n; });
  }
  size_t started() {
    std::lock_guard<std::mutex> lock(mu);
    return threads.size();
  }
};
ProbeState probe;

class ProbeFunction final : public CompiledFunction {
public:
  explicit ProbeFunction(std::unique_ptr<CompiledFunction> inner) : inner_(std::move(inner)) {}
  Error execute(ExecutionContext &ctx) override {
    bool fail;
    {
      std::unique_lock<std::mutex> lock(probe.mu);
      probe.threads.push_back(std::this_thread::get_id());
      probe.running++;
      probe.maxRunning = std::max(probe.maxRunning, probe.running);
      probe.cv.notify_all();
      probe.cv.wait(lock, [] { return probe.gateOpen; });
      fail = probe.fail;
    }
    Error e = fail ? makeError(ErrorCode::Runtime, "probe fault") : inner_->execute(ctx);
    std::lock_guard<std::mutex> lock(probe.mu);
    probe.running--;
    return e;
  }
  std::string getBackendName() const override { return "Probe"; }

private:
  std::unique_ptr<CompiledFunction> inner_;
};

/// Created on first use: the backend registry is locked while a factory runs.
const Backend &interpreter() {
  static const std::unique_ptr<Backend> b = exitOnError(createBackend("Interpreter"));
  return *b;
}

/// The Interpreter under another name, with no device manager of its own: the runtime
/// gives it generic host devices.
class ProbeBackend final : public Backend {
public:
  std::string getName() const override { return "Probe"; }
  bool isOpSupported(const Node &node) const override {
    return interpreter().isOpSupported(node);
  }
  bool shouldLower(const Node &node) const override { return interpreter().shouldLower(node); }
  BackendCompileSpec getCompileSpec(const CompileOptions &opts) const override {
    return interpreter().getCompileSpec(opts);
  }
  Expected<std::unique_ptr<CompiledFunction>> generateCode(Function *f, PlannedIR &ir,
                                                           const CompileOptions &opts) const override {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledFunction> inner,
                          interpreter().generateCode(f, ir, opts));
    return std::unique_ptr<CompiledFunction>(new ProbeFunction(std::move(inner)));
  }
};
KILN_REGISTER_BACKEND(ProbeBackend, "Probe");

struct DeviceFixture {
  Module m;
  Net net = buildMLP(m, "mlp", 2, 16);
  std::unique_ptr<Backend> backend = exitOnError(createBackend("Probe"));
  std::unique_ptr<CompiledFunction> cf = exitOnError(backend->compile(net.f, {}));
  std::shared_ptr<DeviceManager> d;
  Tensor x = makeInput(net.input, 0);
  std::vector<Tensor> ref = reference(net, x);

  DeviceFixture() {
    probe.reset();
    DeviceConfig c;
    c.backendName = "Probe";
    d = exitOnError(createDeviceManager(*backend, c));
    exitOnError(d->init());
    exitOnError(d->addNetwork("mlp", cf.get(), 100));
  }
};

/// The error message of a run queued to \p d's worker.
std::string queuedRunMessage(DeviceManager &d, const std::string &name, ExecutionContext &ctx,
                             Deadline deadline = kNoDeadline) {
  std::promise<std::string> p;
  d.runFunction(
      name, &ctx, [&](Error e, const DeviceRunStats &) { p.set_value(e ? e.message() : ""); },
      deadline);
  return p.get_future().get();
}

std::string messageOf(const std::optional<Error> &e) {
  return e && *e ? e->message() : "";
}

} // namespace

TEST(RunOnCaller, AnIdleHostDeviceRunsOnTheCallersThread) {
  DeviceFixture fx;
  auto b = makeBindings(fx.net, fx.x);
  ExecutionContext ctx(b.get());
  DeviceRunStats stats;
  std::optional<Error> e = fx.d->tryRunOnCaller("mlp", ctx, kNoDeadline, stats);
  ASSERT_TRUE(e.has_value());
  ASSERT_FALSE(*e) << e->message();
  std::string why;
  EXPECT_TRUE(sameOutputs(fx.net, *b, fx.ref, &why)) << why;
  ASSERT_EQ(probe.started(), 1u);
  EXPECT_EQ(probe.threads[0], std::this_thread::get_id());
  EXPECT_GE(stats.seconds, 0.0);
  EXPECT_EQ(fx.d->getCompletedRuns(), 1u);
  EXPECT_EQ(fx.d->getPendingRuns(), 0u);
  // A queued run of the same network runs on the worker instead.
  EXPECT_EQ(queuedRunMessage(*fx.d, "mlp", ctx), "");
  ASSERT_EQ(probe.started(), 2u);
  EXPECT_NE(probe.threads[1], std::this_thread::get_id());
}

TEST(RunOnCaller, ErrorsAreTheWorkersErrors) {
  DeviceFixture fx;
  auto b = makeBindings(fx.net, fx.x);
  ExecutionContext ctx(b.get());
  DeviceRunStats stats;
  std::optional<Error> missing = fx.d->tryRunOnCaller("nope", ctx, kNoDeadline, stats);
  ASSERT_TRUE(missing && *missing);
  EXPECT_EQ(missing->code(), ErrorCode::NotFound);
  EXPECT_EQ(missing->message(), "device 'probe0' holds no network 'nope'");
  EXPECT_EQ(messageOf(missing), queuedRunMessage(*fx.d, "nope", ctx));

  Deadline past = Clock::now() - std::chrono::seconds(1);
  std::optional<Error> late = fx.d->tryRunOnCaller("mlp", ctx, past, stats);
  ASSERT_TRUE(late && *late);
  EXPECT_EQ(late->message(), "deadline exceeded before 'mlp' started on device 'probe0'");
  EXPECT_EQ(messageOf(late), queuedRunMessage(*fx.d, "mlp", ctx, past));
  EXPECT_EQ(probe.started(), 0u) << "an expired run never starts";

  probe.setFail(true);
  std::optional<Error> fault = fx.d->tryRunOnCaller("mlp", ctx, kNoDeadline, stats);
  ASSERT_TRUE(fault && *fault);
  EXPECT_EQ(fault->code(), ErrorCode::Runtime);
  EXPECT_TRUE(contains(fault->message(), "running 'mlp' on device 'probe0'")) << fault->message();
  EXPECT_TRUE(contains(fault->message(), "probe fault")) << fault->message();
  EXPECT_EQ(messageOf(fault), queuedRunMessage(*fx.d, "mlp", ctx));
  EXPECT_EQ(fx.d->getCompletedRuns(), 6u);
  EXPECT_EQ(fx.d->getPendingRuns(), 0u);
}

TEST(RunOnCaller, OneRunAtATimeWithTheWorker) {
  DeviceFixture fx;
  auto b1 = makeBindings(fx.net, fx.x), b2 = makeBindings(fx.net, fx.x);
  ExecutionContext c1(b1.get()), c2(b2.get());
  DeviceRunStats stats;

  // The worker is busy: the caller is told to queue.
  probe.setGate(false);
  std::promise<std::string> queued;
  fx.d->runFunction("mlp", &c1, [&](Error e, const DeviceRunStats &) {
    queued.set_value(e ? e.message() : "");
  });
  probe.waitStarted(1);
  EXPECT_FALSE(fx.d->tryRunOnCaller("mlp", c2, kNoDeadline, stats).has_value());
  EXPECT_EQ(fx.d->getPendingRuns(), 1u);
  probe.setGate(true);
  EXPECT_EQ(queued.get_future().get(), "");

  // A caller is running: a queued run waits for it, then the worker takes it.
  probe.setGate(false);
  auto inlineRun = std::async(std::launch::async, [&] {
    DeviceRunStats s;
    std::optional<Error> e = fx.d->tryRunOnCaller("mlp", c1, kNoDeadline, s);
    return e ? "ran: " + messageOf(e) : std::string("not run");
  });
  probe.waitStarted(2);
  std::promise<std::string> after;
  fx.d->runFunction("mlp", &c2, [&](Error e, const DeviceRunStats &) {
    after.set_value(e ? e.message() : "");
  });
  EXPECT_EQ(fx.d->getPendingRuns(), 2u);
  // Another caller may not jump the queue either.
  EXPECT_FALSE(fx.d->tryRunOnCaller("mlp", c2, kNoDeadline, stats).has_value());
  EXPECT_EQ(probe.started(), 2u) << "the queued run started while the caller's ran";
  probe.setGate(true);
  EXPECT_EQ(inlineRun.get(), "ran: ");
  EXPECT_EQ(after.get_future().get(), "");
  EXPECT_EQ(probe.maxRunning, 1u);
  EXPECT_EQ(fx.d->getCompletedRuns(), 3u);
  EXPECT_EQ(fx.d->getPendingRuns(), 0u);
  std::string why;
  EXPECT_TRUE(sameOutputs(fx.net, *b1, fx.ref, &why)) << why;
  EXPECT_TRUE(sameOutputs(fx.net, *b2, fx.ref, &why)) << why;
}

TEST(RunOnCaller, StopWaitsForARunOnTheCaller) {
  DeviceFixture fx;
  auto b = makeBindings(fx.net, fx.x);
  ExecutionContext ctx(b.get());
  probe.setGate(false);
  auto inlineRun = std::async(std::launch::async, [&] {
    DeviceRunStats s;
    return fx.d->tryRunOnCaller("mlp", ctx, kNoDeadline, s).has_value();
  });
  probe.waitStarted(1);
  auto stopped = std::async(std::launch::async, [&] { fx.d->stop(); });
  // stop() cannot return while the run uses the device.
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  probe.setGate(true);
  stopped.get();
  EXPECT_TRUE(inlineRun.get());
  EXPECT_EQ(fx.d->getCompletedRuns(), 1u);
  // Stopped: no more runs on the caller, and queued ones are refused as before.
  DeviceRunStats s;
  EXPECT_FALSE(fx.d->tryRunOnCaller("mlp", ctx, kNoDeadline, s).has_value());
  EXPECT_TRUE(contains(queuedRunMessage(*fx.d, "mlp", ctx), "not running"));
}

TEST(RunOnCaller, OnlyStartedHostDevicesRunOnTheCaller) {
  Module m;
  Net net = buildMLP(m, "mlp", 1, 8);
  auto b = makeBindings(net, makeInput(net.input, 0));
  ExecutionContext ctx(b.get());
  DeviceRunStats stats;
  // An accelerator's hooks may need its worker.
  auto simBackend = exitOnError(createBackend("Sim"));
  auto simCf = exitOnError(simBackend->compile(net.f, {}));
  auto sim = exitOnError(createDeviceManager(*simBackend, DeviceConfig{}));
  ASSERT_FALSE(sim->init());
  ASSERT_FALSE(sim->addNetwork("mlp", simCf.get(), 100));
  EXPECT_FALSE(sim->tryRunOnCaller("mlp", ctx, kNoDeadline, stats).has_value());
  EXPECT_EQ(queuedRunMessage(*sim, "mlp", ctx), "");
  // A host device before init().
  auto interp = exitOnError(createBackend("Interpreter"));
  auto host = exitOnError(createDeviceManager(*interp, DeviceConfig{}));
  EXPECT_FALSE(host->tryRunOnCaller("mlp", ctx, kNoDeadline, stats).has_value());
  EXPECT_EQ(host->getCompletedRuns(), 0u);
}

namespace {

struct HostFixture {
  Module m;
  Net net = buildMLP(m, "mlp", 2, 16);
  std::unique_ptr<HostManager> hm;

  explicit HostFixture(unsigned devices = 1) {
    probe.reset();
    hm = exitOnError(HostManager::create(std::vector<DeviceConfig>(devices, DeviceConfig{"Probe"})));
    NetworkOptions opts;
    opts.replicas = devices;
    exitOnError(hm->addNetwork(net.f, opts));
  }
};

RunResult runAsync(HostManager &hm, const std::string &name,
                   std::unique_ptr<PlaceholderBindings> b) {
  std::promise<RunResult> p;
  hm.runNetwork(name, std::move(b), [&](RunResult r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

} // namespace

TEST(RunOnCaller, BlockingRunMatchesTheQueuedRun) {
  HostFixture fx;
  Tensor x = makeInput(fx.net.input, 3);
  std::vector<Tensor> ref = reference(fx.net, x);
  auto b = makeBindings(fx.net, x);
  RunReport report;
  ASSERT_FALSE(fx.hm->runNetworkBlocking("mlp", *b, {}, &report));
  ASSERT_EQ(probe.started(), 1u);
  EXPECT_EQ(probe.threads[0], std::this_thread::get_id());
  std::string why;
  EXPECT_TRUE(sameOutputs(fx.net, *b, ref, &why)) << why;

  RunResult queued = runAsync(*fx.hm, "mlp", makeBindings(fx.net, x));
  ASSERT_FALSE(queued.error) << queued.error.message();
  ASSERT_EQ(probe.started(), 2u);
  EXPECT_NE(probe.threads[1], std::this_thread::get_id()) << "runNetwork stays asynchronous";
  EXPECT_TRUE(sameOutputs(fx.net, *queued.bindings, ref, &why)) << why;

  ASSERT_EQ(report.partitions.size(), 1u);
  ASSERT_EQ(queued.report.partitions.size(), 1u);
  EXPECT_EQ(report.partitions[0].partition, queued.report.partitions[0].partition);
  EXPECT_EQ(report.partitions[0].device, "probe0");
  EXPECT_EQ(queued.report.partitions[0].device, "probe0");
  EXPECT_GE(report.seconds, report.partitions[0].stats.seconds);
  EXPECT_EQ(fx.hm->getDevice(0)->getCompletedRuns(), 2u);
  EXPECT_EQ(fx.hm->getActiveRequests(), 0u);
}

TEST(RunOnCaller, BlockingRunErrorsMatchTheQueuedRun) {
  HostFixture fx;
  Tensor x = makeInput(fx.net.input, 0);
  // A failing device.
  probe.setFail(true);
  auto b = makeBindings(fx.net, x);
  RunReport report;
  Error e = fx.hm->runNetworkBlocking("mlp", *b, {}, &report);
  ASSERT_TRUE(e);
  EXPECT_EQ(probe.threads.at(0), std::this_thread::get_id());
  RunResult queued = runAsync(*fx.hm, "mlp", makeBindings(fx.net, x));
  ASSERT_TRUE(queued.error);
  EXPECT_EQ(e.code(), ErrorCode::Runtime);
  EXPECT_EQ(e.message(), queued.error.message());
  EXPECT_TRUE(contains(e.message(), "network 'mlp'")) << e.message();
  EXPECT_TRUE(contains(e.message(), "probe fault")) << e.message();
  EXPECT_EQ(report.partitions.size(), 1u) << "a failed run is reported too";
  probe.setFail(false);
  // Bad bindings.
  PlaceholderBindings missing;
  missing.allocate(fx.net.outputs[0]);
  Error bad = fx.hm->runNetworkBlocking("mlp", missing, {}, &report);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(bad.message(), "'mlp.x'")) << bad.message();
  EXPECT_TRUE(report.partitions.empty());
  auto missingOwned = std::make_unique<PlaceholderBindings>();
  missingOwned->allocate(fx.net.outputs[0]);
  EXPECT_EQ(bad.message(), runAsync(*fx.hm, "mlp", std::move(missingOwned)).error.message());
  EXPECT_EQ(probe.started(), 2u) << "bad bindings never reach the device";
  // An unknown network, and a removed one.
  EXPECT_EQ(fx.hm->runNetworkBlocking("nope", *b).code(), ErrorCode::NotFound);
  ASSERT_FALSE(fx.hm->removeNetwork("mlp"));
  EXPECT_EQ(fx.hm->runNetworkBlocking("mlp", *b).code(), ErrorCode::NotFound);
  EXPECT_EQ(fx.hm->getActiveRequests(), 0u);
}

TEST(RunOnCaller, QueueLimitCountsRunsOnTheCaller) {
  Module m;
  Net net = buildMLP(m, "mlp", 1, 8);
  probe.reset();
  auto hm = exitOnError(HostManager::create({DeviceConfig{"Probe"}}, HostConfig{1}));
  ASSERT_FALSE(hm->addNetwork(net.f));
  Tensor x = makeInput(net.input, 0);
  auto b1 = makeBindings(net, x), b2 = makeBindings(net, x);
  probe.setGate(false);
  auto first = std::async(std::launch::async, [&] { return bool(hm->runNetworkBlocking("mlp", *b1)); });
  probe.waitStarted(1);
  EXPECT_EQ(hm->getActiveRequests(), 1u);
  Error full = hm->runNetworkBlocking("mlp", *b2);
  EXPECT_EQ(full.code(), ErrorCode::QueueFull) << full.message();
  probe.setGate(true);
  EXPECT_FALSE(first.get());
  EXPECT_EQ(hm->getActiveRequests(), 0u);
}

TEST(RunOnCaller, ManyThreadsOnOneDeviceRunOneAtATimeAndCorrectly) {
  HostFixture fx;
  constexpr unsigned kThreads = 4, kRuns = 40;
  std::vector<Tensor> inputs;
  std::vector<std::vector<Tensor>> refs;
  for (unsigned i = 0; i < kThreads * kRuns; i++) {
    inputs.push_back(makeInput(fx.net.input, i));
    refs.push_back(reference(fx.net, inputs.back()));
  }
  std::atomic<unsigned> good{0}, asyncGood{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; t++)
    threads.emplace_back([&, t] {
      for (unsigned i = 0; i < kRuns; i++) {
        const Tensor &x = inputs[t * kRuns + i];
        const std::vector<Tensor> &ref = refs[t * kRuns + i];
        if (i % 4 == 3) { // some requests through the queue, interleaved
          RunResult r = runAsync(*fx.hm, "mlp", makeBindings(fx.net, x));
          if (!r.error && sameOutputs(fx.net, *r.bindings, ref))
            asyncGood++;
          continue;
        }
        auto b = makeBindings(fx.net, x);
        if (!fx.hm->runNetworkBlocking("mlp", *b) && sameOutputs(fx.net, *b, ref))
          good++;
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(good.load(), kThreads * kRuns * 3 / 4);
  EXPECT_EQ(asyncGood.load(), kThreads * kRuns / 4);
  EXPECT_EQ(probe.maxRunning, 1u) << "one device runs one request at a time";
  EXPECT_EQ(fx.hm->getDevice(0)->getCompletedRuns(), kThreads * kRuns);
  EXPECT_EQ(fx.hm->getDevice(0)->getPendingRuns(), 0u);
  EXPECT_EQ(fx.hm->getActiveRequests(), 0u);
}

TEST(RunOnCaller, ReplicasServeBlockingCallersSideBySide) {
  HostFixture fx(2);
  // Two callers held at the gate at once: each got a device of its own.
  probe.setGate(false);
  Tensor x0 = makeInput(fx.net.input, 0), x1 = makeInput(fx.net.input, 1);
  auto b0 = makeBindings(fx.net, x0), b1 = makeBindings(fx.net, x1);
  auto r0 = std::async(std::launch::async, [&] { return bool(fx.hm->runNetworkBlocking("mlp", *b0)); });
  auto r1 = std::async(std::launch::async, [&] { return bool(fx.hm->runNetworkBlocking("mlp", *b1)); });
  probe.waitStarted(2);
  EXPECT_EQ(probe.maxRunning, 2u);
  probe.setGate(true);
  EXPECT_FALSE(r0.get());
  EXPECT_FALSE(r1.get());
  EXPECT_TRUE(sameOutputs(fx.net, *b0, reference(fx.net, x0)));
  EXPECT_TRUE(sameOutputs(fx.net, *b1, reference(fx.net, x1)));
  EXPECT_EQ(fx.hm->getDevice(0)->getCompletedRuns(), 1u);
  EXPECT_EQ(fx.hm->getDevice(1)->getCompletedRuns(), 1u);
}

TEST(RunOnCaller, ExecutionEngineRunsFromManyThreads) {
  probe.reset();
  ExecutionEngine ee("Probe");
  Net n = buildMLP(ee.getModule(), "mlp", 2, 16);
  ASSERT_FALSE(ee.compile());
  std::vector<Tensor> inputs;
  std::vector<std::vector<Tensor>> refs;
  for (unsigned i = 0; i < 60; i++) {
    inputs.push_back(makeInput(n.input, i));
    refs.push_back(reference(n, inputs.back()));
  }
  std::vector<std::thread> threads;
  std::atomic<unsigned> good{0};
  for (unsigned t = 0; t < 3; t++)
    threads.emplace_back([&, t] {
      for (unsigned i = t * 20; i < t * 20 + 20; i++) {
        auto b = makeBindings(n, inputs[i]);
        if (!ee.run(*b) && sameOutputs(n, *b, refs[i]))
          good++;
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(good.load(), 60u);
  EXPECT_EQ(probe.maxRunning, 1u);
}
