#include "kiln/Memory/MemoryPipeline.h"

namespace kiln {

Expected<PlannedIR> generatePlannedIR(Function *f, const MemoryPipelineOptions &opts) {
  PlannedIR r;
  KILN_RETURN_IF_ERR(f->verify());
  KILN_ASSIGN_OR_RETURN(r.schedule, scheduleForMemory(f, {opts.planner.alignment}));
  if (!opts.memoryAwareSchedule) {
    KILN_ASSIGN_OR_RETURN(r.schedule.order, scheduleTopologically(f));
    r.schedule.strategy = "topological";
    r.schedule.peakBytes = r.schedule.topologicalPeakBytes;
  }
  KILN_ASSIGN_OR_RETURN(r.F, generateIR(f, r.schedule.order));
  if (opts.runIRPasses) {
    std::vector<std::string> passes = opts.irPasses.empty() ? getDefaultIRPipeline() : opts.irPasses;
    KILN_ASSIGN_OR_RETURN(r.passes, runIRPipeline(*r.F, passes, opts.passManager));
  }
  KILN_ASSIGN_OR_RETURN(r.plan, planMemory(*r.F, opts.planner));
  KILN_RETURN_IF_ERR(verifyMemoryPlan(*r.F, r.plan));
  return r;
}

} // namespace kiln
