/// \file
/// HostManager: the runtime's entry point. It owns the devices, adds networks
/// (partition, compile, load) and removes them, and runs them, asynchronously with a
/// callback or blocking, many requests at once, with a bound on the requests admitted.
///
/// \code
///   std::vector<DeviceConfig> devs(4, DeviceConfig{"Sim"});
///   devs.push_back(DeviceConfig{"Interpreter"});              // runs what Sim cannot
///   auto hm = exitOnError(HostManager::create(devs));
///   exitOnError(hm->addNetwork(f));                           // network named f->getName()
///   exitOnError(hm->runNetworkBlocking(f->getName(), bindings));
/// \endcode
#ifndef KILN_RUNTIME_HOSTMANAGER_H
#define KILN_RUNTIME_HOSTMANAGER_H

#include "kiln/Backend/CompileOptions.h"
#include "kiln/Backend/ExecutionContext.h"
#include "kiln/Base/Trace.h"
#include "kiln/Runtime/RuntimeTypes.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

// Runtime internals (kiln/Runtime/*.h, the backend-author layer).
class Backend;
class DeviceManager;
class Executor;
class Provisioner;
struct PartitionerBackend;

/// Settings of a HostManager.
struct HostConfig {
  /// Requests admitted and not yet finished; one more is refused with QueueFull.
  size_t maxActiveRequests = 1024;
};

/// How HostManager::addNetwork partitions, compiles and loads a network.
struct NetworkOptions {
  /// Backends to place nodes on, in priority order; empty: every device backend, in the
  /// order of first appearance in the device list.
  std::vector<std::string> backends;
  /// Load each partition on up to this many devices (see ProvisionOptions).
  unsigned replicas = 1;
  /// A user-given partition, honoured exactly (see PartitionConfig).
  std::optional<PartitionConfig> partition;
  /// Prepare the function with the compile driver before partitioning
  /// (kiln/Backend/Compiler.h: verify and the graph pipeline of the first backend); off:
  /// the function is only verified.
  bool prepare = false;
  /// The options every partition is compiled with.
  CompileOptions compile;
  /// The backends that take compile.backendOptions' unqualified parameters; empty: every
  /// backend of `backends`. Never the fallback backend (CompileOptions::forBackend).
  std::vector<std::string> optionBackends;
  /// Nodes that none of the backends can run go to fallbackBackend on a host device (one
  /// is started the first time it is needed, unless a device of that backend exists), and
  /// one warning lists them (onWarning). With strictBackend they are an error instead,
  /// listing every such node, as is the case when the fallback is among the backends, is
  /// empty, or a user partition is given.
  bool strictBackend = false;
  /// The backend that runs what none of `backends` can (see strictBackend).
  std::string fallbackBackend = "Interpreter";
  /// Requests overlap: a request starts on its first partitions while earlier ones are
  /// still in later partitions on other devices, so a stream of requests through a network
  /// split over several devices runs at about the rate of its slowest partition. Off: a
  /// request starts only when the one admitted before it has finished (the others wait, in
  /// the order they were admitted).
  bool pipeline = true;
  /// Receives the fallback warning; null prints it on stderr ("kiln: warning: ...").
  std::function<void(const std::string &)> onWarning;
};

/// Options of one run.
struct RunOptions {
  /// Fail the request with a Runtime error when it has not finished after this long;
  /// zero: no limit. Checked when each partition starts and ends on its device.
  std::chrono::milliseconds timeout{0};
  /// Non-zero: the caller's stream. The callbacks of requests run (runNetwork) with the
  /// same stream are called in the order the requests were submitted, whatever order they
  /// finish in: a result that is ready early waits for those before it. Every request
  /// still gets exactly one callback, failed and refused ones included, in its place.
  /// runNetworkBlocking ignores it (its caller waits for each result anyway).
  uint64_t stream = 0;
};

/// Numbers a request (from 1, per HostManager).
using RunId = uint64_t;

/// What an asynchronous run hands back.
struct RunResult {
  RunId id = 0;                    ///< The number runNetwork returned.
  Error error = Error::success();  ///< Success, or why the request failed.
  /// The bindings given to runNetwork, outputs filled when error is success.
  std::unique_ptr<PlaceholderBindings> bindings;
  /// The partitions the request ran, with their devices and times.
  RunReport report;
};
/// Receives the result of an asynchronous run.
using ResultCallback = std::function<void(RunResult)>;

/// The runtime's entry point: devices, networks and runs (see the file comment).
class HostManager {
public:
  /// Creates and starts one DeviceManager per config (through its backend's
  /// createDeviceManager). Fails on an unknown backend or a device that cannot start.
  static Expected<std::unique_ptr<HostManager>> create(std::vector<DeviceConfig> devices,
                                                       const HostConfig &config = {});
  /// Waits for the requests in flight, unloads every network, stops the devices.
  ~HostManager();
  HostManager(const HostManager &) = delete;
  HostManager &operator=(const HostManager &) = delete;

  /// Adds \p f as network f->getName(): verifies (or prepares, NetworkOptions::prepare),
  /// partitions, compiles (Backend::compile, the compile driver's back half) and loads it. The
  /// function's Module must outlive the network (until removeNetwork or destruction);
  /// partition functions and placeholders for values crossing partitions are added to it.
  Error addNetwork(Function *f, const NetworkOptions &opts = {});
  /// Adds every function of \p module as a network; the HostManager keeps the module
  /// until the last of them is removed. All or nothing.
  Error addNetwork(std::unique_ptr<Module> module, const NetworkOptions &opts = {});
  /// Removes a network: new runs of it fail with NotFound at once, runs in flight finish
  /// first (this call waits for them), then it is unloaded. Must not be called from a
  /// result callback.
  Error removeNetwork(const std::string &name);
  /// True when the network \p name is loaded and admits runs (not being removed).
  bool hasNetwork(const std::string &name) const;
  /// The names of the networks that admit runs, sorted.
  std::vector<std::string> getNetworkNames() const;
  /// The network's partition plan as text or DOT (with the devices of each partition).
  Expected<std::string> getPlanText(const std::string &name) const;
  Expected<std::string> getPlanDot(const std::string &name) const;
  /// Number of partitions of the network.
  Expected<size_t> getNumPartitions(const std::string &name) const;
  /// Partitions and nodes per backend, and the nodes that fell back.
  Expected<NetworkSplit> getNetworkSplit(const std::string &name) const;
  /// The per-stage timings of the network's compiled partitions, in partition order
  /// (CompiledFunction::getProfile; names prefixed "<partition>: " when there are
  /// several); empty unless their backend was asked to profile.
  Expected<std::vector<StageTiming>> getProfile(const std::string &name) const;
  /// The sum of the network's compiled partitions' own constant bytes
  /// (CompiledFunction::getConstantBytes).
  Expected<uint64_t> getCompiledConstantBytes(const std::string &name) const;

  /// Starts recording a trace (kiln/Base/Trace.h) of the networks added (compile phases,
  /// each pass) and the requests run from now on (one "runtime" event per request on the
  /// host; "queue", "partition" and, with TraceOptions::kernels, "kernel" events on a
  /// process per device; "transfer" events for values crossing partitions). Replaces a
  /// trace being recorded. Without a trace the runtime records nothing.
  void startTrace(const TraceOptions &opts = {});
  /// Records into \p trace instead (e.g. one that also holds an import or other hosts).
  void startTrace(std::shared_ptr<Tracer> trace);
  /// Stops recording and returns the trace (null when none was started); requests in
  /// flight finish recording into it.
  std::shared_ptr<Tracer> stopTrace();
  /// The trace being recorded, or null.
  std::shared_ptr<Tracer> getTrace() const;

  /// Runs \p name on \p bindings and calls \p cb exactly once with the result: on a
  /// device worker thread, or on this thread when the request is refused (unknown
  /// network, QueueFull, bad bindings). Callbacks should be short; they may start runs.
  RunId runNetwork(const std::string &name, std::unique_ptr<PlaceholderBindings> bindings,
                   ResultCallback cb, const RunOptions &opts = {});
  /// Runs \p name on \p bindings and waits. Fills \p report when given. A network of
  /// one partition whose host device is idle runs on this thread (no hand-off to the
  /// device's worker); it is admitted, counted and reported as any other request.
  Error runNetworkBlocking(const std::string &name, PlaceholderBindings &bindings,
                           const RunOptions &opts = {}, RunReport *report = nullptr);

  /// The devices given to create(); host devices started for a fallback backend are not
  /// among them.
  size_t getNumDevices() const { return devices_.size(); }
  /// Device \p i of those given to create(), in their order.
  DeviceManager *getDevice(size_t i) const { return devices_[i].get(); }
  /// The device named \p name, or null.
  DeviceManager *getDevice(const std::string &name) const;
  /// The backend of the devices named \p backendName, or null.
  const Backend *getBackend(const std::string &backendName) const;
  /// Requests admitted and not finished.
  size_t getActiveRequests() const;

private:
  explicit HostManager(const HostConfig &config);
  struct Network;
  Error addNetworkImpl(Function *f, std::shared_ptr<Module> owner, const NetworkOptions &opts);
  /// The backends network \p name may be placed on (opts.backends, or every backend with a
  /// device), each with its devices' count and smallest memory.
  Expected<std::vector<PartitionerBackend>> partitionerBackends(const NetworkOptions &opts,
                                                                const std::string &name) const;
  /// Admits a request (or answers it), then hands it to the executor.
  RunId submit(const std::string &name, PlaceholderBindings *bindings,
               std::unique_ptr<PlaceholderBindings> owned, ResultCallback cb,
               const RunOptions &opts);
  /// Admits a request of \p name, numbered \p id: counts it active and in flight on its
  /// network, or says why it is refused (unknown network, QueueFull).
  Expected<Network *> admit(const std::string &name, RunId &id,
                           std::shared_ptr<Tracer> *trace = nullptr);
  /// Ends an admitted request. Afterwards the network may be removed and this
  /// HostManager destroyed.
  void release(Network *net);
  /// Hands an admitted request to the executor; \p cb gets its result.
  void dispatch(Network *net, RunId id, PlaceholderBindings *bindings,
                std::unique_ptr<PlaceholderBindings> owned, ResultCallback cb,
                Deadline deadline, std::shared_ptr<Tracer> trace);
  /// The ready network \p name (call with mu_ held).
  Expected<Network *> findLocked(const std::string &name) const;
  /// Finds the nodes of \p f none of \p backends runs; unless opts say strict, appends
  /// the fallback backend to \p backends and lists them in \p fellBack, else returns the
  /// error naming them all (call with addRemoveMu_ held).
  Error addFallback(const Function *f, const NetworkOptions &opts,
                    std::vector<PartitionerBackend> &backends, std::vector<FallbackNode> &fellBack);
  /// The fallback backend \p name with a device: a device backend of that name, else one
  /// started here on first use (call with addRemoveMu_ held).
  Expected<PartitionerBackend> fallbackFor(const std::string &name);

  /// The requests of one RunOptions::stream whose callbacks are pending; shared with the
  /// callbacks, so it outlives nothing it needs.
  struct Stream;
  /// Wraps \p cb so that it is called in stream order (see RunOptions::stream).
  ResultCallback inStreamOrder(uint64_t stream, ResultCallback cb);

  HostConfig config_;
  std::vector<std::shared_ptr<DeviceManager>> devices_;
  std::map<std::string, std::unique_ptr<Backend>> backends_;
  std::vector<std::string> backendOrder_;
  /// Backends and host devices started for fallbacks (guarded by addRemoveMu_; stopped
  /// with the others).
  std::map<std::string, std::unique_ptr<Backend>> fallbackBackends_;
  std::vector<std::shared_ptr<DeviceManager>> fallbackDevices_;
  std::unique_ptr<Provisioner> provisioner_;
  std::unique_ptr<Executor> executor_;

  /// Serialises adding and removing networks (they share device memory and may share a
  /// module's graph).
  std::mutex addRemoveMu_;
  mutable std::mutex mu_;
  std::condition_variable idle_;
  std::map<std::string, std::shared_ptr<Network>> networks_;
  size_t active_ = 0;
  RunId nextId_ = 1;
  std::shared_ptr<Tracer> trace_; ///< guarded by mu_
  std::map<uint64_t, std::weak_ptr<Stream>> streams_; ///< guarded by mu_
};

} // namespace kiln

#endif // KILN_RUNTIME_HOSTMANAGER_H
