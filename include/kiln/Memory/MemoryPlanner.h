/// \file
/// The static memory planner: gives every buffer of an IRFunction a fixed offset in one of
/// three regions, so a backend allocates three blocks once and never calls an allocator
/// while running:
///  - Constant: the constant weights, back to back;
///  - Mutable: the placeholders (inputs and outputs), back to back;
///  - Activation: every AllocActivation, placed so that two buffers share bytes only when
///    they are never live at once. A buffer is live from its AllocActivation to its
///    DeallocActivation (to the end of the function without one); TensorViews live inside
///    their buffer.
/// Every offset is a multiple of the alignment (64 bytes). Activation placement is an
/// offline interval packing problem; the planner runs several greedy strategies and keeps
/// the smallest arena. The lower bound any placement must reach is the largest total size
/// of buffers live at one instruction (max-live); efficiency is max-live / arena.
#ifndef KILN_MEMORY_MEMORYPLANNER_H
#define KILN_MEMORY_MEMORYPLANNER_H

#include "kiln/IR/IR.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

enum class MemoryRegion { Constant, Mutable, Activation };
/// "constant", "mutable", "activation".
const char *memoryRegionName(MemoryRegion r);

/// One buffer with a planned place.
struct PlannedBuffer {
  const Value *value = nullptr; ///< A WeightVar or an AllocActivationInst.
  MemoryRegion region = MemoryRegion::Activation;
  uint64_t size = 0;   ///< Bytes the buffer's type needs.
  uint64_t offset = 0; ///< From the start of its region.
  /// Live range in instruction positions: [start, end). Weights span the whole function.
  size_t start = 0, end = 0;
};

/// How activations are placed: an order to visit buffers in, and a rule to pick the gap
/// between buffers already placed (that overlap in time) where the next one goes.
enum class PlacementOrder {
  BySize,      ///< Largest first (ties: earlier start).
  ByStart,     ///< Earliest allocation first, as a run-time allocator would see them.
  ByArea,      ///< Largest size x lifetime first.
  ByLifetime,  ///< Longest lifetime first.
};
enum class PlacementFit {
  FirstFit, ///< The lowest gap that fits.
  BestFit,  ///< The smallest gap that fits.
};
/// One way of placing activations: an order of the buffers and a fit rule.
struct PlacementStrategy {
  PlacementOrder order;
  PlacementFit fit;
  /// "by-size/best-fit", ...
  std::string name() const;
};
/// Every combination of order and fit.
std::vector<PlacementStrategy> getAllPlacementStrategies();

/// Options of the static memory planner.
struct PlannerOptions {
  /// Alignment of every offset and of region sizes.
  uint64_t alignment = 64;
  /// Strategies to try for activations (empty: all); the smallest arena wins, ties go to
  /// the earlier strategy.
  std::vector<PlacementStrategy> strategies;
  /// Placeholders (mutable weights) go in the activation arena, live only while the
  /// function needs them (computePlaceholderLifetimes), and the mutable region stays
  /// empty: for a device that copies a run's inputs in before it starts and its outputs
  /// out after it ends, so an input's bytes serve activations after its last read and an
  /// output's before its first write.
  bool placeholdersInArena = false;
};

/// The plan of one function.
struct MemoryPlan {
  uint64_t alignment = 64;
  std::vector<PlannedBuffer> buffers; ///< Weights in declaration order, then activations.
  uint64_t constantBytes = 0;   ///< Size of the constant region.
  uint64_t mutableBytes = 0;    ///< Size of the mutable region.
  uint64_t activationBytes = 0; ///< Size of the activation arena.
  /// PlannerOptions::placeholdersInArena: placeholders are planned in the activation
  /// region with their lifetimes (mutableBytes is 0).
  bool placeholdersInArena = false;
  /// Largest total of (aligned) activation sizes live at one instruction: the lower bound
  /// of activationBytes.
  uint64_t maxLiveBytes = 0;
  /// The same without rounding sizes up to the alignment.
  uint64_t maxLiveBytesUnaligned = 0;
  size_t numInstrs = 0;
  std::string strategy; ///< The placement strategy that won.
  /// Arena bytes of every strategy tried.
  std::vector<std::pair<std::string, uint64_t>> strategyArenas;

  /// max-live / arena (1 for an empty arena).
  double efficiency() const {
    return activationBytes ? double(maxLiveBytes) / double(activationBytes) : 1.0;
  }
  /// The planned buffer of \p v (a weight or an alloc), or null.
  const PlannedBuffer *find(const Value *v) const;
  /// Region and byte offset of any buffer or TensorView of the function (a view lies
  /// inside its buffer); false for values without a place.
  bool locate(const Value *v, MemoryRegion &region, uint64_t &offset) const;
  /// A short report: region sizes, max-live, efficiency, strategies.
  std::string summary() const;
};

/// Live ranges of the activations of \p F, in allocation order (regions and offsets
/// unset): [position of the alloc, position of the dealloc).
std::vector<PlannedBuffer> computeActivationLifetimes(const IRFunction &F);

/// Live ranges of the placeholders (mutable weights) of \p F, in declaration order, as
/// PlannerOptions::placeholdersInArena places them: one whose first use reads it (an
/// input; also one never used) from the start, one whose first use writes it from that
/// write; one the function writes to the end of the function (its value leaves the run),
/// one it only reads to just after its last read. Uses through views count.
std::vector<PlannedBuffer> computePlaceholderLifetimes(const IRFunction &F);

/// Largest total of sizes (rounded up to \p alignment; 1 for none) live at one position.
uint64_t computeMaxLiveBytes(const std::vector<PlannedBuffer> &lifetimes, uint64_t alignment);

/// Plans \p F. Errors: an activation deallocated twice or used before its alloc (the IR
/// verifier rejects these too).
Expected<MemoryPlan> planMemory(const IRFunction &F, const PlannerOptions &opts = {});

/// Places \p buffers (activations with sizes and live ranges) with one strategy and
/// returns the arena size; sets each buffer's offset.
uint64_t placeActivations(std::vector<PlannedBuffer> &buffers, const PlacementStrategy &s,
                          uint64_t alignment);

/// Checks \p plan against \p F: every weight and activation has exactly one place, every
/// offset is aligned, every buffer lies inside its region, no two weights overlap, and no
/// two activations that are live at the same time share a byte. The message names the
/// buffers.
Error verifyMemoryPlan(const IRFunction &F, const MemoryPlan &plan);

/// An SVG picture of the activation plan: x is the instruction position, y the offset in
/// the arena; one labelled rectangle per activation (hover for name, size, offset and
/// range), and the live-bytes curve whose maximum is the lower bound.
std::string renderMemoryPlanSVG(const IRFunction &F, const MemoryPlan &plan,
                                const std::string &title = "");

} // namespace kiln

#endif // KILN_MEMORY_MEMORYPLANNER_H
