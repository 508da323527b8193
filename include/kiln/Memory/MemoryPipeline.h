/// \file
/// Graph to planned low-level IR in one call: a memory-aware schedule, IRGen in that
/// order, the IR pass pipeline, then the static memory plan (always checked by its
/// verifier). The compile driver (kiln/Backend/Compiler.h) runs it with the options a
/// backend's BackendCompileSpec asks for and hands the result to the backend.
#ifndef KILN_MEMORY_MEMORYPIPELINE_H
#define KILN_MEMORY_MEMORYPIPELINE_H

#include "kiln/Memory/MemoryPlanner.h"
#include "kiln/Memory/Scheduler.h"
#include "kiln/Passes/IR/IRPasses.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// What generatePlannedIR does after the graph: schedule, IR passes, memory plan.
struct MemoryPipelineOptions {
  /// Order nodes with scheduleForMemory(); otherwise plain topological order.
  bool memoryAwareSchedule = true;
  /// IR passes to run (names of IRPasses.h); the default pipeline when empty. Set
  /// `runIRPasses` to false to run none.
  std::vector<std::string> irPasses;
  bool runIRPasses = true;
  IRPassManagerOptions passManager;
  /// Plan memory (and verify the plan); off: PlannedIR::plan stays empty.
  bool staticPlan = true;
  PlannerOptions planner;
  /// In-place rule (BackendCompileSpec::needsOwnBuffer): after the IR passes, an
  /// instruction it names must not write a buffer that one of its inputs lives in; a pass
  /// that broke this is reported as an Internal error.
  std::function<bool(const Instruction &)> needsOwnBuffer;
  /// Records the phases (schedule, irgen, ir-passes and each pass, memory-plan) when set;
  /// not owned (kiln/Base/Trace.h).
  Tracer *tracer = nullptr;
};

/// The IR of a function with its schedule, pass report and memory plan.
struct PlannedIR {
  std::unique_ptr<IRFunction> F;
  Schedule schedule;
  IRPipelineReport passes;
  MemoryPlan plan;
  bool planned = false; ///< plan was computed (MemoryPipelineOptions::staticPlan)
};

/// Schedules, lowers, optimises and plans \p f (which must be valid: the compile driver
/// verifies it once, before the graph passes).
Expected<PlannedIR> generatePlannedIR(Function *f, const MemoryPipelineOptions &opts = {});

} // namespace kiln

#endif // KILN_MEMORY_MEMORYPIPELINE_H
