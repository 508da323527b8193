/// \file
/// Memory-aware scheduling: the order in which a Function's nodes become instructions
/// decides how many activations are alive at once. The scheduler tries several
/// heuristics (plain topological order among them) and keeps the order with the lowest
/// peak, so it is never worse than plain topological order. Feed the order to
/// generateIR(f, order) (kiln/IR/IR.h).
///
/// Cost model (the one IRGen's lifetimes follow): every result of a node is allocated when
/// the node runs and freed after its last user; a Reshape result is a view of its input
/// (no bytes of its own, and it keeps the input alive); Placeholders and Constants are not
/// activations. Sizes are rounded up to the planner's alignment.
#ifndef KILN_MEMORY_SCHEDULER_H
#define KILN_MEMORY_SCHEDULER_H

#include "kiln/Graph/Graph.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// Peak live activation bytes of running the nodes of \p f in \p order (a topological
/// order of the nodes that reach a Save, as scheduleTopologically returns; storage nodes
/// in it are ignored), each result's size rounded up to \p alignment.
uint64_t computePeakLiveBytes(const std::vector<Node *> &order, uint64_t alignment = 64);

/// Options of scheduleForMemory.
struct SchedulerOptions {
  uint64_t alignment = 64; ///< Each result's size is rounded up to this many bytes.
};

/// A node order and what it costs.
struct Schedule {
  std::vector<Node *> order;
  std::string strategy;               ///< The heuristic that produced it.
  uint64_t peakBytes = 0;             ///< Peak live activation bytes of `order`.
  uint64_t topologicalPeakBytes = 0;  ///< The same for plain topological order.
  /// Every heuristic tried, with its peak.
  std::vector<std::pair<std::string, uint64_t>> candidates;
};

/// The order of \p f's live nodes with the lowest peak live activation bytes among the
/// heuristics: plain topological order, a depth-first order that visits the operand
/// needing the most memory first (Sethi-Ullman), and greedy list scheduling that runs the
/// ready node that grows live memory least.
Expected<Schedule> scheduleForMemory(Function *f, const SchedulerOptions &opts = {});

} // namespace kiln

#endif // KILN_MEMORY_SCHEDULER_H
