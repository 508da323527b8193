// DeviceManager: memory accounting, the run queue, and stopping.

#include "RuntimeTestUtils.h"

#include "kiln/Runtime/DeviceManager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

using namespace kiln;
using namespace kiln::test;

namespace {

struct Fixture {
  Module m;
  Net net = buildMLP(m, "mlp", 2, 16);
  std::unique_ptr<Backend> backend = exitOnError(createBackend("Interpreter"));
  std::unique_ptr<CompiledFunction> cf = exitOnError(backend->compile(net.f, {}));
};

std::shared_ptr<DeviceManager> makeDevice(const Backend &b, uint64_t memory) {
  DeviceConfig c;
  c.backendName = b.getName();
  c.memoryBytes = memory;
  auto d = exitOnError(createDeviceManager(b, c, 3));
  exitOnError(d->init());
  return d;
}

} // namespace

TEST(DeviceManager, GenericHostDeviceIsTheDefault) {
  Fixture fx;
  DeviceConfig c;
  c.backendName = "Interpreter";
  auto d = exitOnError(createDeviceManager(*fx.backend, c, 2));
  EXPECT_EQ(d->getName(), "interpreter2");
  EXPECT_EQ(d->getMaximumMemory(), kDefaultHostDeviceMemory);
}

TEST(DeviceManager, MemoryIsAccountedAndOutOfMemoryIsClear) {
  Fixture fx;
  auto d = makeDevice(*fx.backend, 1000);
  ASSERT_FALSE(d->addNetwork("a", fx.cf.get(), 600));
  EXPECT_EQ(d->getUsedMemory(), 600u);
  EXPECT_EQ(d->getAvailableMemory(), 400u);
  Error e = d->addNetwork("b", fx.cf.get(), 500);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_TRUE(contains(e.message(), "'b' needs 500 bytes but only 400 of 1000")) << e.message();
  EXPECT_TRUE(contains(e.message(), "interpreter3")) << e.message();
  EXPECT_EQ(d->getUsedMemory(), 600u); // a refused load takes nothing
  Error dup = d->addNetwork("a", fx.cf.get(), 1);
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup.code(), ErrorCode::InvalidArgument);
  ASSERT_FALSE(d->evictNetwork("a"));
  EXPECT_EQ(d->getUsedMemory(), 0u);
  EXPECT_EQ(d->evictNetwork("a").code(), ErrorCode::NotFound);
  ASSERT_FALSE(d->addNetwork("b", fx.cf.get(), 1000)); // exactly full is fine
}

TEST(DeviceManager, RefusesCodeOfAnotherBackend) {
  Fixture fx;
  auto sim = exitOnError(createBackend("Sim"));
  auto d = makeDevice(*sim, 1 << 20);
  Error e = d->addNetwork("a", fx.cf.get(), 10);
  ASSERT_TRUE(e);
  EXPECT_TRUE(contains(e.message(), "compiled for Interpreter")) << e.message();
}

TEST(DeviceManager, RunsOnTheWorkerAndCallsBackWithErrors) {
  Fixture fx;
  auto d = makeDevice(*fx.backend, 1 << 20);
  ASSERT_FALSE(d->addNetwork("mlp", fx.cf.get(), 100));
  Tensor x = makeInput(fx.net.input, 0);
  std::vector<Tensor> ref = reference(fx.net, x);
  auto b = makeBindings(fx.net, x);
  ExecutionContext ctx(b.get());
  std::promise<std::string> ok, missing;
  d->runFunction("mlp", &ctx, [&](Error e, const DeviceRunStats &s) {
    EXPECT_GE(s.seconds, 0.0);
    ok.set_value(e ? e.message() : "");
  });
  EXPECT_EQ(ok.get_future().get(), "");
  std::string why;
  EXPECT_TRUE(sameOutputs(fx.net, *b, ref, &why)) << why;
  d->runFunction("nope", &ctx,
                 [&](Error e, const DeviceRunStats &) { missing.set_value(e ? e.message() : ""); });
  EXPECT_TRUE(contains(missing.get_future().get(), "holds no network 'nope'"));
  EXPECT_EQ(d->getCompletedRuns(), 2u);
  EXPECT_EQ(d->getPendingRuns(), 0u);
}

namespace {
/// A device whose run runs out of host memory: allocating its working set throws, as an
/// accelerator's staging buffers or a backend's scratch would.
class ExhaustedDevice : public DeviceManager {
public:
  using DeviceManager::DeviceManager;
  ~ExhaustedDevice() override { stop(); }

protected:
  Error runImpl(const std::string &, CompiledFunction &, ExecutionContext &,
                DeviceRunStats &) override {
    throw std::bad_alloc();
  }
};
} // namespace

TEST(DeviceManager, HostOutOfMemoryOnTheWorkerIsTheRunsError) {
  Fixture fx;
  DeviceConfig c;
  c.backendName = "Interpreter";
  c.name = "exhausted0";
  c.memoryBytes = 1 << 20;
  ExhaustedDevice d(c);
  ASSERT_FALSE(d.init());
  ASSERT_FALSE(d.addNetwork("mlp", fx.cf.get(), 100));
  auto b = makeBindings(fx.net, makeInput(fx.net.input, 0));
  ExecutionContext ctx(b.get());
  std::promise<std::pair<ErrorCode, std::string>> p;
  d.runFunction("mlp", &ctx, [&](Error e, const DeviceRunStats &) {
    p.set_value({e ? e.code() : ErrorCode::Internal, e ? e.message() : ""});
  });
  auto [code, msg] = p.get_future().get();
  EXPECT_EQ(code, ErrorCode::OutOfMemory) << msg;
  EXPECT_TRUE(contains(msg, "out of host memory")) << msg;
  EXPECT_TRUE(contains(msg, "running 'mlp' on device 'exhausted0'")) << msg;
  // The worker survives: the device still reports the run as completed.
  EXPECT_EQ(d.getCompletedRuns(), 1u);
  EXPECT_EQ(d.getPendingRuns(), 0u);
}

TEST(DeviceManager, ExpiredDeadlineFailsWithoutRunning) {
  Fixture fx;
  auto d = makeDevice(*fx.backend, 1 << 20);
  ASSERT_FALSE(d->addNetwork("mlp", fx.cf.get(), 100));
  auto b = makeBindings(fx.net, makeInput(fx.net.input, 0));
  ExecutionContext ctx(b.get());
  std::promise<std::string> p;
  d->runFunction(
      "mlp", &ctx, [&](Error e, const DeviceRunStats &) { p.set_value(e ? e.message() : ""); },
      Clock::now() - std::chrono::seconds(1));
  EXPECT_TRUE(contains(p.get_future().get(), "deadline exceeded before"));
}

TEST(DeviceManager, StopFailsWhatIsQueuedAndRefusesNewRuns) {
  Fixture fx;
  DeviceConfig c;
  c.backendName = "Interpreter";
  auto d = exitOnError(createDeviceManager(*fx.backend, c));
  // Never started: runs are refused at once, on this thread.
  auto b = makeBindings(fx.net, makeInput(fx.net.input, 0));
  ExecutionContext ctx(b.get());
  int calls = 0;
  d->runFunction("mlp", &ctx, [&](Error e, const DeviceRunStats &) {
    calls++;
    EXPECT_TRUE(contains(e.message(), "not running")) << e.message();
  });
  EXPECT_EQ(calls, 1);
  ASSERT_FALSE(d->init());
  ASSERT_FALSE(d->addNetwork("mlp", fx.cf.get(), 100));
  std::atomic<int> done{0}, failed{0};
  for (int i = 0; i < 50; i++)
    d->runFunction("mlp", &ctx, [&](Error e, const DeviceRunStats &) {
      done++;
      failed += bool(e);
    });
  d->stop();
  EXPECT_EQ(done.load(), 50); // each run completed or failed, none lost
  d->runFunction("mlp", &ctx, [&](Error e, const DeviceRunStats &) { calls += bool(e); });
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(d->getPendingRuns(), 0u);
}
