/// \file
/// The Partitioner splits a Function into a DAG of sub-Functions ("partitions"), each run
/// by one backend on one device:
///
/// 1. Backend support: every node goes to the first backend, in priority order, that
///    supports it and whose device could hold it alone. A node's stage is the largest
///    stage of its operands, plus one where the operand sits on another backend; the
///    nodes of one (stage, backend) pair form a partition. Edges between partitions
///    always go to a higher stage, so the partitions form a DAG.
/// 2. Device memory: a partition whose estimated footprint exceeds its backend's device
///    memory is cut, in topological order, into pieces that fit.
///
/// Or the user fixes the partitions (PartitionConfig), which are then honoured exactly.
///
/// Values that cross partitions travel through new Placeholders ("<net>.<node>") that the
/// producing partition saves and the consuming ones read; the Executor allocates them per
/// request. Partition functions and these placeholders are created in the function's
/// Module (the verifier wants storage and functions in one module); a network that needs
/// no split runs the original function itself.
#ifndef KILN_RUNTIME_PARTITIONER_H
#define KILN_RUNTIME_PARTITIONER_H

#include "kiln/Backend/Backend.h"
#include "kiln/Runtime/RuntimeTypes.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {

/// A backend the partitioner may use, and the memory of one of its devices (the
/// smallest, when they differ).
struct PartitionerBackend {
  const Backend *backend = nullptr;
  uint64_t deviceMemory = 0;
};

/// One partition of a plan.
struct Partition {
  std::string name;        ///< Its Function's name.
  std::string backendName; ///< The backend that compiles and runs it.
  Function *function = nullptr;
  size_t numNodes = 0;                     ///< Nodes of the original function it holds.
  uint64_t memoryBytes = 0;                ///< Estimated device footprint (estimateMemory).
  std::vector<unsigned> parents, children; ///< Indices of partitions in the plan.
  std::vector<Placeholder *> inputs;  ///< Placeholders it reads (network inputs, intermediates).
  std::vector<Placeholder *> outputs; ///< Placeholders it writes.
  std::vector<std::string> devices;   ///< Where it is loaded (filled by the Provisioner).
};

/// The DAG of partitions of one network.
class PartitionPlan {
public:
  PartitionPlan() = default;
  PartitionPlan(PartitionPlan &&) = default; // leaves the source empty
  PartitionPlan &operator=(PartitionPlan &&) = delete;
  /// Erases the functions it created (never the original).
  ~PartitionPlan();

  std::string networkName;
  Function *original = nullptr;
  /// Parents before children.
  std::vector<Partition> partitions;
  /// The network's own placeholders: what a caller binds.
  std::vector<Placeholder *> inputs, outputs;
  /// Placeholders created for values that cross partitions.
  std::vector<Placeholder *> intermediates;

  /// True when the partitions are new functions (false: the original runs as it is).
  bool createdFunctions() const { return created_; }
  /// A readable description: one block per partition (backend, devices, size, nodes,
  /// inputs, outputs, parents).
  std::string toString() const;
  /// Graphviz DOT: one box per partition, edges labelled with the tensors they carry.
  std::string toDot() const;

private:
  friend Expected<PartitionPlan> partitionFunction(Function *, const std::string &,
                                                   const std::vector<PartitionerBackend> &,
                                                   const PartitionConfig *);
  bool created_ = false;
};

/// Partitions \p f as network \p networkName over \p backends (priority order), or as
/// \p user says when given. Errors: nodes no backend supports (naming them), a node or
/// user partition too large for its backend's device (OutOfMemory, with the sizes), a
/// user partition with a cycle or an unmapped node (InvalidArgument).
Expected<PartitionPlan> partitionFunction(Function *f, const std::string &networkName,
                                          const std::vector<PartitionerBackend> &backends,
                                          const PartitionConfig *user = nullptr);

/// Estimated device bytes of \p f: its constants, the placeholders it reads or writes,
/// and every activation it allocates, with no reuse (an upper bound of what the memory
/// planner would need). Reshapes are views and cost nothing.
uint64_t estimateMemory(const Function &f);

} // namespace kiln

#endif // KILN_RUNTIME_PARTITIONER_H
