/// \file
/// DeviceManager: one per device. It owns the device's run queue and worker thread, keeps
/// the device's memory accounting, and runs compiled functions that were loaded on it.
///
/// The base class is a complete host device (compiled functions run on the worker thread
/// with host memory); an accelerator subclasses it and overrides the three hooks
/// (loadNetworkImpl, evictNetworkImpl, runImpl). Backends create theirs through
/// Backend::createDeviceManager; kiln::createDeviceManager below falls back to
/// HostDeviceManager when a backend returns none.
///
/// A device runs one request at a time, in queue order. A device that allows it
/// (runsOnCaller) may also run a request on the thread that asks, when nothing is running
/// or queued: a blocking caller then pays no hand-off to the worker and back.
#ifndef KILN_RUNTIME_DEVICEMANAGER_H
#define KILN_RUNTIME_DEVICEMANAGER_H

#include "kiln/Backend/Backend.h"
#include "kiln/Runtime/RuntimeTypes.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace kiln {

/// Memory of a device whose config leaves memoryBytes at 0 and whose backend sets no
/// default of its own: 16 GiB of host memory.
constexpr uint64_t kDefaultHostDeviceMemory = uint64_t(16) << 30;

/// One device: its run queue and worker thread, its memory accounting and the networks
/// loaded on it (see the file comment). Accelerators subclass it.
class DeviceManager {
public:
  /// Called once per run, on the device's worker thread (or on the caller's thread when
  /// the run is refused before it is queued).
  using RunCallback = std::function<void(Error, const DeviceRunStats &)>;

  explicit DeviceManager(DeviceConfig config);
  /// Stops the worker. A subclass whose hooks use its own members must call stop() in
  /// its own destructor, before those members die.
  virtual ~DeviceManager();
  DeviceManager(const DeviceManager &) = delete;
  DeviceManager &operator=(const DeviceManager &) = delete;

  const DeviceConfig &getConfig() const { return config_; }
  const std::string &getName() const { return config_.name; }
  const std::string &getBackendName() const { return config_.backendName; }

  /// Runs initImpl (a device may fail here, e.g. on a bad config), then starts the worker
  /// thread. Must be called once before runFunction.
  Error init();
  /// Stops the worker after the run in progress; runs still queued complete with a
  /// Runtime error. Idempotent.
  void stop();

  /// Loads \p fn under \p name, reserving \p bytes of device memory. Fails with
  /// OutOfMemory when the bytes are not free, InvalidArgument when the name is taken, or
  /// whatever loadNetworkImpl returns. \p fn must stay alive until evicted.
  Error addNetwork(const std::string &name, CompiledFunction *fn, uint64_t bytes);
  /// Unloads \p name and frees its memory. The caller guarantees no run of it is queued
  /// or running (the HostManager drains requests first).
  Error evictNetwork(const std::string &name);
  bool hasNetwork(const std::string &name) const;

  /// Queues a run of the network \p name on the tensors of \p ctx, which must stay alive
  /// until \p cb is called. A run whose \p deadline has passed when it starts, or when it
  /// ends, fails with a Runtime error that says so.
  void runFunction(const std::string &name, ExecutionContext *ctx, RunCallback cb,
                   Deadline deadline = kNoDeadline);
  /// Runs the network \p name on \p ctx on the calling thread, when this device allows
  /// it (runsOnCaller), is started, and has no run in progress or queued. The run is
  /// accounted, checked and reported as runFunction's would be (pending and completed
  /// counts, deadline, error messages), and the worker starts nothing until it ends.
  /// Returns nullopt, having done nothing, when the run must go through runFunction;
  /// otherwise the run's result, with \p stats filled.
  std::optional<Error> tryRunOnCaller(const std::string &name, ExecutionContext &ctx,
                                      Deadline deadline, DeviceRunStats &stats);

  uint64_t getMaximumMemory() const { return config_.memoryBytes; }
  uint64_t getUsedMemory() const;
  uint64_t getAvailableMemory() const { return getMaximumMemory() - getUsedMemory(); }
  /// Runs queued or running: the load the executor balances replicas by.
  size_t getPendingRuns() const { return pending_.load(); }
  /// Runs finished since creation (success or not).
  uint64_t getCompletedRuns() const { return completed_.load(); }

protected:
  /// Device hooks. initImpl runs once before the worker starts and may set the memory
  /// size; loadNetworkImpl runs on the caller's thread after the memory check and
  /// may refuse the load; evictNetworkImpl frees what it made; runImpl runs on the worker
  /// thread and fills \p stats counters (the base class measures seconds).
  virtual Error initImpl() { return Error::success(); }
  virtual Error loadNetworkImpl(const std::string &name, CompiledFunction &fn, uint64_t bytes);
  virtual void evictNetworkImpl(const std::string &name);
  virtual Error runImpl(const std::string &name, CompiledFunction &fn, ExecutionContext &ctx,
                        DeviceRunStats &stats);
  /// For initImpl: the device's memory size.
  void setMaximumMemory(uint64_t bytes) { config_.memoryBytes = bytes; }
  /// True when runImpl may run on any thread, one run at a time, so that tryRunOnCaller
  /// can use the caller's thread. Off by default: an accelerator's hooks may rely on
  /// its worker.
  virtual bool runsOnCaller() const { return false; }

private:
  struct RunRequest {
    std::string name;
    ExecutionContext *ctx;
    RunCallback cb;
    Deadline deadline;
    int64_t queuedNs = 0; ///< when it was queued, in its trace's time (if traced)
  };
  void workerLoop();
  void execute(RunRequest &r, CompiledFunction *fn);
  /// The run itself, shared by the worker and tryRunOnCaller: checks the deadline,
  /// calls runImpl, times it, and counts it completed. \p fn is null when \p name
  /// was not loaded.
  Error runLoaded(const std::string &name, CompiledFunction *fn, ExecutionContext &ctx,
                  Deadline deadline, DeviceRunStats &stats);

  DeviceConfig config_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RunRequest> queue_;
  bool started_ = false, stopping_ = false;
  /// A run is in progress (on the worker or on a caller); the other waits for it.
  bool busy_ = false;
  std::thread worker_;
  struct Loaded {
    CompiledFunction *fn;
    uint64_t bytes;
  };
  std::map<std::string, Loaded> networks_;
  uint64_t usedMemory_ = 0;
  std::atomic<size_t> pending_{0};
  std::atomic<uint64_t> completed_{0};
};

/// The generic host device: compiled functions run with host memory, on the worker or,
/// through tryRunOnCaller, on the thread that asks.
class HostDeviceManager final : public DeviceManager {
public:
  using DeviceManager::DeviceManager;

protected:
  bool runsOnCaller() const override { return true; }
};

/// The device manager for \p config: the backend's own (Backend::createDeviceManager), or
/// a HostDeviceManager when the backend has none. Names the device
/// "<backend><index>" when the config has no name, and applies kDefaultHostDeviceMemory
/// when memoryBytes is 0. The result is not started (call init()).
Expected<std::shared_ptr<DeviceManager>>
createDeviceManager(const Backend &backend, DeviceConfig config, unsigned index = 0);

} // namespace kiln

#endif // KILN_RUNTIME_DEVICEMANAGER_H
