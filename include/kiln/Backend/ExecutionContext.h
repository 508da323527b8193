/// \file
/// PlaceholderBindings (the tensors of a run's inputs and outputs), ExecutionContext, and
/// StageTiming (what a profiled run reports per step).
#ifndef KILN_BACKEND_EXECUTIONCONTEXT_H
#define KILN_BACKEND_EXECUTIONCONTEXT_H

#include "kiln/Graph/Graph.h"

#include <map>
#include <memory>
#include <string>

namespace kiln {

/// The run times of one step of a compiled function, over the runs after the first
/// (CompiledFunction::getProfile, HostManager::getProfile).
struct StageTiming {
  std::string name;  ///< The stage, as the backend names it.
  uint64_t runs = 0; ///< Runs timed.
  /// The mean and the shortest time per run, in milliseconds.
  double meanMs = 0, minMs = 0;
  /// What the stage computes, where the backend counts it (0 otherwise): arithmetic
  /// operations (a multiply-add counts 2) and bytes of its operands.
  double flops = 0, bytes = 0;
  /// The threads the stage's work was split between (1 for a stage one thread runs).
  unsigned threads = 1;
};

/// Maps placeholders to tensors. Allocated tensors are zero-filled and owned here.
class PlaceholderBindings {
public:
  PlaceholderBindings() = default;
  PlaceholderBindings(PlaceholderBindings &&) = default;
  PlaceholderBindings &operator=(PlaceholderBindings &&) = default;

  /// Allocates a tensor of \p ph's type (replacing any earlier one) and returns it.
  Tensor *allocate(const Placeholder *ph);
  /// Allocates every placeholder in \p phs that has no tensor yet.
  void allocate(const std::vector<std::unique_ptr<Placeholder>> &phs);
  void allocate(const std::vector<Placeholder *> &phs);
  /// Binds \p t to \p ph (its type must match the placeholder's: checked when running).
  void insert(const Placeholder *ph, Tensor t);
  /// The tensor of \p ph, or null when unbound.
  Tensor *get(const Placeholder *ph) const;
  /// The tensor of \p ph, checked before a run: an InvalidArgument error when \p ph is
  /// unbound or bound to a tensor of another type.
  Expected<Tensor *> getChecked(const Placeholder *ph) const;
  /// The tensor of the placeholder named \p name, or null.
  Tensor *getByName(const std::string &name) const;
  bool count(const Placeholder *ph) const { return map_.count(ph) != 0; }
  void erase(const Placeholder *ph) { map_.erase(ph); }
  void clear() { map_.clear(); }
  size_t size() const { return map_.size(); }
  const std::map<const Placeholder *, std::unique_ptr<Tensor>> &pairs() const { return map_; }

private:
  std::map<const Placeholder *, std::unique_ptr<Tensor>> map_;
};

class Tracer; // kiln/Base/Trace.h

/// What one run of a compiled function needs: the bindings, and room for per-run state.
class ExecutionContext {
public:
  /// A context over \p b, which must outlive it.
  explicit ExecutionContext(PlaceholderBindings *b) : bindings_(b) {}
  /// The tensors of the run.
  PlaceholderBindings *getBindings() const { return bindings_; }

  /// The trace this run records into (null: none), and the trace process of the device
  /// that runs it (the runtime sets both). A backend asked for kernel events
  /// (Tracer::kernels) records one per instruction or stage it executes.
  Tracer *getTracer() const { return tracer_; }
  uint32_t getTracePid() const { return tracePid_; }
  void setTracer(Tracer *t, uint32_t pid) {
    tracer_ = t;
    tracePid_ = pid;
  }

private:
  PlaceholderBindings *bindings_;
  Tracer *tracer_ = nullptr;
  uint32_t tracePid_ = 0;
};

} // namespace kiln

#endif // KILN_BACKEND_EXECUTIONCONTEXT_H
