/// \file
/// ExecutionEngine: the one-object convenience API for one backend. Build a graph in
/// getModule(), compile() it, run() it many times. It sits on a HostManager with N
/// devices of its backend: each function becomes a network, split over the devices when
/// it does not fit one, and loaded on every device with room so that runs from several
/// threads proceed in parallel.
///
/// Nodes the backend cannot run fall back to the Interpreter on the host: compile() puts
/// them in partitions of their own (kiln/Runtime/Partitioner.h), prints one warning
/// listing them, and run() runs the pieces in order. setStrictBackend(true) makes them an
/// error instead, listing every one.
#ifndef KILN_EXECUTIONENGINE_EXECUTIONENGINE_H
#define KILN_EXECUTIONENGINE_EXECUTIONENGINE_H

#include "kiln/Backend/CompileOptions.h"
#include "kiln/Backend/ExecutionContext.h"
#include "kiln/Base/Trace.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class Backend;     // kiln/Backend/Backend.h
class HostManager; // kiln/Runtime/HostManager.h
struct NetworkSplit; // kiln/Runtime/RuntimeTypes.h

/// One backend, one module: build in getModule(), compile() once, run() many times (see
/// the file comment).
class ExecutionEngine {
public:
  /// An engine for the backend registered as \p backendName, over \p numDevices devices
  /// of it (each of \p deviceMemory bytes; 0: the backend's default). An unknown name or
  /// a device that cannot start is reported by compile() and run().
  explicit ExecutionEngine(const std::string &backendName = "Interpreter", unsigned numDevices = 1,
                           uint64_t deviceMemory = 0);
  ~ExecutionEngine();
  ExecutionEngine(const ExecutionEngine &) = delete;
  ExecutionEngine &operator=(const ExecutionEngine &) = delete;

  /// The module to build functions in; compile() compiles all of them.
  Module &getModule() { return *module_; }
  /// The name given to the constructor.
  const std::string &getBackendName() const { return backendName_; }
  /// The backend, or null when the name was unknown.
  Backend *getBackend() const { return backend_.get(); }

  /// The runtime underneath, or null when the backend or its devices failed; valid
  /// until clear() or destruction. Its networks are named after the functions.
  HostManager *getHostManager() const { return host_.get(); }

  /// Verifies and compiles every function of the module (replacing what an earlier
  /// compile loaded). Each Function is optimised and lowered in place by the backend's
  /// pass pipeline, and a Constant used only by a folded node (e.g. convolution weights
  /// absorbing a BatchNormalization) is rewritten in place: clone a Function first to keep
  /// the original graph.
  /// Backend parameters in \p opts reach the backend (e.g. the CPU's `spin-us`); an
  /// unknown one fails the compile.
  Error compile(const CompileOptions &opts = {});
  /// Runs the compiled function \p name (may be empty when the module has exactly one).
  /// Safe to call from several threads at once with distinct bindings.
  Error run(PlaceholderBindings &bindings, const std::string &name = "");

  /// Drops the module and everything compiled, starting afresh.
  void clear();

  /// Off (the default): nodes the backend cannot run fall back to the Interpreter, with
  /// one warning per compile(). On: compile() fails with an Unsupported error listing
  /// every such node. Takes effect at the next compile().
  void setStrictBackend(bool strict) { strict_ = strict; }
  /// See setStrictBackend.
  bool getStrictBackend() const { return strict_; }
  /// Receives compile()'s fallback warning instead of stderr ("kiln: warning: ...").
  void setWarningHandler(std::function<void(const std::string &)> handler) {
    onWarning_ = std::move(handler);
  }
  /// Partitions and nodes per backend of the compiled function \p name (may be empty
  /// when there is one), and the nodes that fell back.
  Expected<NetworkSplit> getNetworkSplit(const std::string &name = "") const;

  /// Tracing (kiln/Base/Trace.h): startTrace records the compiles (every phase and pass)
  /// and runs (requests, partitions per device, and with TraceOptions::kernels one event
  /// per instruction or compiled stage) from now on; stopTrace ends it and returns the
  /// trace (null when none was started); writeTrace writes the trace being recorded, or
  /// else the last one stopped, as Chrome trace event JSON (chrome://tracing, Perfetto).
  /// The ExecutionEngine's own runtime records; an unknown backend makes these no-ops
  /// (and writeTrace an error).
  void startTrace(const TraceOptions &opts = {});
  std::shared_ptr<Tracer> stopTrace();
  /// The trace being recorded, or null.
  std::shared_ptr<Tracer> getTrace() const;
  Error writeTrace(const std::string &path) const;

private:
  /// Removes every network of an earlier compile.
  void unload();
  /// The network \p name, or the only one when empty.
  Expected<std::string> networkName(const std::string &name) const;

  std::string backendName_;
  unsigned numDevices_;
  uint64_t deviceMemory_;
  std::unique_ptr<Backend> backend_;
  Error backendError_ = Error::success();
  std::unique_ptr<Module> module_;
  /// Declared after the module: destroyed first, since networks refer to its functions.
  std::unique_ptr<HostManager> host_;
  /// The functions compile() added as networks, in module order.
  std::vector<std::string> networks_;
  bool strict_ = false;
  std::function<void(const std::string &)> onWarning_;
  std::shared_ptr<Tracer> lastTrace_; ///< the last trace stopped
};

} // namespace kiln

#endif // KILN_EXECUTIONENGINE_EXECUTIONENGINE_H
