/// \file
/// The Sim's device driver: on-chip memory from its SimConfig, a run counter of
/// simulated cycles and DMA bytes, and fault injection so the runtime's error paths can
/// be tested: fail the next loads, fail the next runs, or run slowly.
#ifndef KILN_BACKENDS_SIM_SIMDEVICEMANAGER_H
#define KILN_BACKENDS_SIM_SIMDEVICEMANAGER_H

#include "Sim.h"

#include "kiln/Runtime/DeviceManager.h"

#include <chrono>

namespace kiln {

class SimDeviceManager final : public DeviceManager {
public:
  /// Configured from config.parameters (SimConfig::fromParameters) when init() runs;
  /// a non-zero config.memoryBytes overrides the config's memory_bytes.
  explicit SimDeviceManager(DeviceConfig config) : DeviceManager(std::move(config)) {}
  ~SimDeviceManager() override { stop(); }

  /// The configuration in effect (valid after init()).
  const SimConfig &getSimConfig() const { return sim_; }

  /// Totals since creation.
  struct Stats {
    uint64_t loads = 0, runs = 0, failedRuns = 0;
    uint64_t cycles = 0;       ///< Simulated cycles of successful runs.
    uint64_t dmaBytes = 0;     ///< Per-run DMA of successful runs.
    uint64_t loadDmaBytes = 0; ///< Weights moved by loads.
  };
  Stats getStats() const;

  // Fault injection. Each fault hits only this device; thread-safe at any time.
  /// The next \p n loads fail with a Runtime error (memory is not taken).
  void failNextLoads(unsigned n);
  /// The next \p n runs fail with a Runtime error without computing.
  void failNextRuns(unsigned n);
  /// Every run first sleeps \p delay (a slow or throttled chip); zero turns it off.
  void setRunDelay(std::chrono::milliseconds delay);
  void clearFaults();

protected:
  Error initImpl() override;
  Error loadNetworkImpl(const std::string &name, CompiledFunction &fn, uint64_t bytes) override;
  Error runImpl(const std::string &name, CompiledFunction &fn, ExecutionContext &ctx,
                DeviceRunStats &stats) override;

private:
  SimConfig sim_;
  mutable std::mutex mu_; // guards the faults and stats below
  unsigned failLoads_ = 0, failRuns_ = 0;
  std::chrono::milliseconds delay_{0};
  Stats stats_;
};

} // namespace kiln

#endif // KILN_BACKENDS_SIM_SIMDEVICEMANAGER_H
