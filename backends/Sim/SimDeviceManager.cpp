#include "SimDeviceManager.h"

#include "kiln/Base/Trace.h"

#include <thread>

namespace kiln {

Error SimDeviceManager::initImpl() {
  Expected<SimConfig> c = SimConfig::fromParameters(getConfig().parameters);
  if (!c)
    return c.takeError().addContext("configuring Sim device '" + getName() + "'");
  sim_ = std::move(c).get();
  if (getConfig().memoryBytes)
    sim_.memoryBytes = getConfig().memoryBytes;
  setMaximumMemory(sim_.memoryBytes);
  return Error::success();
}

SimDeviceManager::Stats SimDeviceManager::getStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void SimDeviceManager::failNextLoads(unsigned n) {
  std::lock_guard<std::mutex> lock(mu_);
  failLoads_ = n;
}

void SimDeviceManager::failNextRuns(unsigned n) {
  std::lock_guard<std::mutex> lock(mu_);
  failRuns_ = n;
}

void SimDeviceManager::setRunDelay(std::chrono::milliseconds delay) {
  std::lock_guard<std::mutex> lock(mu_);
  delay_ = delay;
}

void SimDeviceManager::clearFaults() {
  std::lock_guard<std::mutex> lock(mu_);
  failLoads_ = failRuns_ = 0;
  delay_ = std::chrono::milliseconds(0);
}

Error SimDeviceManager::loadNetworkImpl(const std::string &name, CompiledFunction &fn, uint64_t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failLoads_) {
    failLoads_--;
    return makeError(ErrorCode::Runtime, "Sim device '", getName(),
                     "': injected load fault while loading '", name, "'");
  }
  // The weights cross the DMA once, here; runs move only inputs and outputs.
  stats_.loads++;
  stats_.loadDmaBytes += static_cast<SimFunction &>(fn).getProgram().weightBytes();
  return Error::success();
}

Error SimDeviceManager::runImpl(const std::string &name, CompiledFunction &fn,
                                ExecutionContext &ctx, DeviceRunStats &stats) {
  std::chrono::milliseconds delay;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.runs++;
    if (failRuns_) {
      failRuns_--;
      stats_.failedRuns++;
      return makeError(ErrorCode::Runtime, "Sim device '", getName(), "': injected run fault in '",
                       name, "'");
    }
    delay = delay_;
  }
  if (delay.count())
    std::this_thread::sleep_for(delay);
  auto start = std::chrono::steady_clock::now();
  // The base class checked that fn was compiled by the Sim backend.
  const SimProgram &program = static_cast<SimFunction &>(fn).getProgram();
  if (Error e = fn.execute(ctx)) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.failedRuns++;
    return e;
  }
  // The program's schedule: tiles moved between device memory and the scratchpad, and
  // the run's inputs and outputs crossing from the host.
  const SimWork &work = static_cast<SimFunction &>(fn).getWork();
  SimCost cost;
  uint64_t ioBytes = work.inputBytes + work.outputBytes;
  cost.dmaBytes = program.dmaBytes() + ioBytes;
  cost.cycles = program.cycles() + (ioBytes + sim_.dmaBytesPerCycle - 1) / sim_.dmaBytesPerCycle;
  stats.cycles = cost.cycles;
  stats.dmaBytes = cost.dmaBytes;
  if (Tracer *t = ctx.getTracer()) { // the simulated DMA of the inputs and outputs
    int64_t now = t->nowNs();
    t->complete(ctx.getTracePid(), "transfer", "dma", now, now,
                {{"bytes", std::to_string(cost.dmaBytes), true},
                 {"cycles", std::to_string(cost.cycles), true}});
  }
  if (sim_.realtime) // the chip's time, not the host's
    std::this_thread::sleep_until(
        start + std::chrono::duration<double, std::micro>(double(cost.cycles) / sim_.clockMHz));
  std::lock_guard<std::mutex> lock(mu_);
  stats_.cycles += cost.cycles;
  stats_.dmaBytes += cost.dmaBytes;
  return Error::success();
}

} // namespace kiln
