/// \file
/// The Partitioner splits a Function into a DAG of sub-Functions ("partitions"), each run
/// by one backend on one device:
///
/// 1. Backend support: every node goes to the first backend, in priority order, that
///    supports it and whose device could hold it alone. A node's stage is the largest
///    stage of its operands, plus one where the operand sits on another backend; the
///    nodes of one (stage, backend) pair form a group. Edges between groups always go to
///    a higher stage, so the groups form a DAG.
/// 2. Device memory and time: a group that fits one device of its backend stays whole.
///    A group that does not is cut, along its topological order, into consecutive pieces
///    that each fit one device: at most as many pieces as the backend has devices (shared
///    among the groups that need cutting), chosen to minimise the slowest piece by the
///    backend's cost model (Backend::estimateNodeSeconds, estimateTransferSeconds for its
///    inputs and outputs), then, among the cuts whose slowest piece is within 5% of that
///    best, to minimise the bytes crossing the cuts. When no such cut exists the error
///    names the shortfall: the bytes needed against the bytes the devices hold, the
///    fewest pieces that fit, and the largest node that cannot be cut.
///
/// A piece's memory (PartitionFootprint) is its weights, the placeholders it reads and
/// writes (network inputs and outputs, values crossing partitions), and its activations
/// at their planned peak: the most bytes live at once when its nodes run in order, each
/// activation rounded up to 64 bytes, a Reshape a view of its input. The model follows the
/// rules of the backend's compile spec (BackendCompileSpec): with a static plan, weights
/// and placeholders are rounded up too; where its IR passes share buffers (share-buffers
/// and copy-elimination, no needsOwnBuffer exception), an element-wise node writes over an
/// operand that dies there; where placeholders share the activation arena
/// (placeholdersInArena), an input counts from the start to its last read, an output from
/// its first write to the end, and a Save takes over the buffer it saves when that dies
/// there. A partition of a backend with a static plan and devices of bounded memory is
/// then charged what Backend::preparePlan lays out for it under PartitionerBackend::
/// compileOptions (the plan its compile makes, kept in Partition::prepared for it), and
/// for a backend whose model counts reuse, cuts are checked against that plan first: a
/// device load it refuses is ruled out and the cut made again. The devices' memory is the
/// smallest of the backend's.
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

/// A backend the partitioner may use, the memory of one of its devices (the smallest,
/// when they differ) and how many devices it has.
struct PartitionerBackend {
  const Backend *backend = nullptr;
  uint64_t deviceMemory = 0;
  /// The most pieces the groups of this backend are cut into, all together; 0: as many
  /// as it takes (the fewest that fit, then balanced).
  unsigned numDevices = 0;
  /// The options its partitions will be compiled with (the Provisioner's): the memory
  /// rules follow its compile spec under them, and the plans it is charged are made under
  /// them (a compile under other settings plans again). Its tracer records that planning.
  CompileOptions compileOptions;
};

/// What a partition needs on its device (see the file comment).
struct PartitionFootprint {
  uint64_t weightBytes = 0;     ///< Constants it reads.
  uint64_t ioBytes = 0;         ///< Placeholders it reads or writes (0 when ioInActivations).
  uint64_t activationBytes = 0; ///< Activations at their planned peak.
  /// The backend plans placeholders in the activation arena, each live only while the
  /// piece uses it (BackendCompileSpec::placeholdersInArena): activationBytes counts them.
  bool ioInActivations = false;
  uint64_t total() const { return weightBytes + ioBytes + activationBytes; }
};

/// One partition of a plan.
struct Partition {
  std::string name;        ///< Its Function's name.
  std::string backendName; ///< The backend that compiles and runs it.
  Function *function = nullptr;
  size_t numNodes = 0;                     ///< Nodes of the original function it holds.
  uint64_t memoryBytes = 0;                ///< footprint.total(): what its device is charged.
  PartitionFootprint footprint;
  /// Its backend's estimate of one run: its nodes plus moving its inputs and outputs.
  double costSeconds = 0;
  std::vector<unsigned> parents, children; ///< Indices of partitions in the plan.
  /// Bytes it reads from each parent per run (parallel to parents).
  std::vector<uint64_t> parentBytes;
  std::vector<Placeholder *> inputs;  ///< Placeholders it reads (network inputs, intermediates).
  std::vector<Placeholder *> outputs; ///< Placeholders it writes.
  std::vector<std::string> devices;   ///< Where it is loaded (filled by the Provisioner).
  /// The device load the partitioner planned it in: partitions of one backend with the
  /// same number fit one device together and are loaded together (-1: any device).
  int device = -1;
  /// The plan its footprint was measured from, for a backend charged by its plan (see the
  /// file comment); the Provisioner's compile takes it over (Backend::compile), so the
  /// function is planned once. Empty otherwise, and once compiled.
  PreparedPlan prepared;
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
/// user partition too large for its backend's device, or a function too large for a
/// backend's devices all together (OutOfMemory, with the sizes), a user partition with a
/// cycle or an unmapped node (InvalidArgument).
Expected<PartitionPlan> partitionFunction(Function *f, const std::string &networkName,
                                          const std::vector<PartitionerBackend> &backends,
                                          const PartitionConfig *user = nullptr);

/// Places device loads of \p loadBytes bytes on devices with \p freeBytes free, each load on
/// one device, none overflowing: largest load first, each on the device with the most
/// room (spreading the model), backtracking to other devices when a later load finds none
/// (so a tight fit that the greedy choice misses is still found; the search gives up after
/// a bounded number of steps). Returns the device index of each load, or an empty vector
/// when they cannot be placed (every load of zero bytes fits anywhere).
std::vector<unsigned> packDeviceLoads(const std::vector<uint64_t> &loadBytes,
                                      const std::vector<uint64_t> &freeBytes);

/// What \p f needs on a device as one partition, its nodes in topological order, by the
/// model without a backend's rules (no buffer shared in place, placeholders held for the
/// whole run; see the file comment).
Expected<PartitionFootprint> estimateFootprint(Function &f);

/// Device bytes of \p f with no buffer reuse: its constants, the placeholders it reads
/// or writes, and every activation it allocates (an upper bound of estimateFootprint).
/// Reshapes are views and cost nothing.
uint64_t estimateMemory(const Function &f);

} // namespace kiln

#endif // KILN_RUNTIME_PARTITIONER_H
