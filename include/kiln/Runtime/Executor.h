/// \file
/// The Executor runs the DAG of a provisioned network for one request: a partition
/// starts when all its parents have finished, on the least busy device that holds it;
/// values crossing partitions live in tensors the request owns, allocated when their
/// producer starts and freed when their last consumer ends. Any number of requests run
/// at once; each request's failure (a device error, a deadline) ends that request only,
/// after its partitions in flight have finished, so its tensors are never in use when
/// its callback runs.
#ifndef KILN_RUNTIME_EXECUTOR_H
#define KILN_RUNTIME_EXECUTOR_H

#include "kiln/Runtime/Provisioner.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

/// A network ready to run: its plan and its loaded partitions. Members are destroyed in
/// reverse order: compiled code first, then the partition functions, then the module
/// when the network owns it.
struct ExecutableNetwork {
  std::shared_ptr<Module> ownedModule; ///< Set when the HostManager owns the module.
  PartitionPlan plan;
  std::vector<LoadedPartition> loaded; ///< Parallel to plan.partitions.
  /// For each intermediate placeholder: how many partitions read it.
  std::unordered_map<const Placeholder *, unsigned> consumers;

  /// Fills consumers from the plan.
  void index();
};

/// Runs the partitions of provisioned networks for requests (see the file comment).
class Executor {
public:
  using DoneCallback = std::function<void(Error, RunReport)>;

  /// Checks that \p b binds every input and output of \p net with a tensor of its type.
  static Error checkBindings(const ExecutableNetwork &net, const PlaceholderBindings &b);

  /// Runs \p net on \p bindings; both stay alive until \p done is called, and the
  /// executor touches neither afterwards. \p done is called exactly once: on the
  /// caller's thread for a bad binding, otherwise on a device worker thread after the
  /// last partition of this request has finished.
  /// With \p trace, its partitions record into it (the caller keeps it alive until
  /// \p done is called).
  void run(const ExecutableNetwork *net, PlaceholderBindings *bindings, Deadline deadline,
           DoneCallback done, Tracer *trace = nullptr);

  /// Runs \p net on \p bindings on this thread, with no hand-off to a device worker,
  /// when it is one partition and one of that partition's devices takes the run now
  /// (DeviceManager::tryRunOnCaller: an idle host device). Returns nullopt, having done
  /// nothing, when run() must be used instead; otherwise the error run() would report,
  /// with \p report (when given) filled as run() would fill it.
  std::optional<Error> tryRunOnCaller(const ExecutableNetwork &net, PlaceholderBindings &bindings,
                                      Deadline deadline, RunReport *report,
                                      Tracer *trace = nullptr);

private:
  struct Request;
  void launch(const std::shared_ptr<Request> &r, unsigned p);
  void finished(const std::shared_ptr<Request> &r, unsigned p, DeviceManager *d, Error e,
                const DeviceRunStats &stats);
  DeviceManager *pickDevice(const LoadedPartition &lp);

  std::atomic<uint64_t> roundRobin_{0};
};

} // namespace kiln

#endif // KILN_RUNTIME_EXECUTOR_H
