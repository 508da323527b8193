/// \file
/// Graph to planned low-level IR in one call: a memory-aware schedule, IRGen in that
/// order, the IR pass pipeline, then the static memory plan (checked by its verifier).
/// Backends that run with static memory call this instead of generateIR().
#ifndef KILN_MEMORY_MEMORYPIPELINE_H
#define KILN_MEMORY_MEMORYPIPELINE_H

#include "kiln/Memory/MemoryPlanner.h"
#include "kiln/Memory/Scheduler.h"
#include "kiln/Passes/IR/IRPasses.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct MemoryPipelineOptions {
  /// Order nodes with scheduleForMemory(); otherwise plain topological order.
  bool memoryAwareSchedule = true;
  /// IR passes to run (names of IRPasses.h); the default pipeline when empty. Set
  /// `runIRPasses` to false to run none.
  std::vector<std::string> irPasses;
  bool runIRPasses = true;
  IRPassManagerOptions passManager;
  PlannerOptions planner;
};

/// The IR of a function with its schedule, pass report and memory plan.
struct PlannedIR {
  std::unique_ptr<IRFunction> F;
  Schedule schedule;
  IRPipelineReport passes;
  MemoryPlan plan;
};

/// Schedules, lowers, optimises and plans \p f.
Expected<PlannedIR> generatePlannedIR(Function *f, const MemoryPipelineOptions &opts = {});

} // namespace kiln

#endif // KILN_MEMORY_MEMORYPIPELINE_H
