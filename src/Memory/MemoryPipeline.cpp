#include "kiln/Memory/MemoryPipeline.h"
#include "kiln/Base/Trace.h"

#include <unordered_set>

namespace kiln {

namespace {

/// The buffer (alloc or weight) \p v lives in.
const Value *rootOf(const Value *v) {
  while (auto *tv = dyn_cast<TensorViewInst>(v))
    v = tv->getSrc();
  return v;
}

/// Checks the in-place rule: no instruction it names writes a buffer it also reads.
Error checkOwnBuffers(const IRFunction &F,
                      const std::function<bool(const Instruction &)> &needsOwnBuffer) {
  for (const auto &ip : F.getInstrs()) {
    const Instruction &I = *ip;
    if (!needsOwnBuffer(I))
      continue;
    std::unordered_set<const Value *> ins;
    for (unsigned i = 0; i < I.getNumOperands(); i++)
      if (I.getOperand(i).second == OperandKind::In)
        ins.insert(rootOf(I.getOperand(i).first));
    for (unsigned i = 0; i < I.getNumOperands(); i++)
      if (I.getOperand(i).second != OperandKind::In && ins.count(rootOf(I.getOperand(i).first)))
        return makeError(ErrorCode::Internal, I.getKindName(), " '", I.getName(),
                         "' must write a buffer of its own, but its ", I.getOperandName(i),
                         " shares '", rootOf(I.getOperand(i).first)->getName(),
                         "' with one of its inputs");
  }
  return Error::success();
}

} // namespace

Expected<PlannedIR> generatePlannedIR(Function *f, const MemoryPipelineOptions &opts) {
  PlannedIR r;
  TraceScope schedule(opts.tracer, "compile", "schedule");
  if (opts.memoryAwareSchedule) {
    KILN_ASSIGN_OR_RETURN(r.schedule, scheduleForMemory(f, {opts.planner.alignment}));
  } else {
    KILN_ASSIGN_OR_RETURN(r.schedule.order, scheduleTopologically(f));
    r.schedule.strategy = "topological";
    r.schedule.peakBytes = r.schedule.topologicalPeakBytes =
        computePeakLiveBytes(r.schedule.order, opts.planner.alignment);
  }
  schedule.arg("strategy", r.schedule.strategy);
  schedule.end();
  TraceScope irgen(opts.tracer, "compile", "irgen");
  KILN_ASSIGN_OR_RETURN(r.F, generateIR(f, r.schedule.order));
  irgen.arg("instructions", int64_t(r.F->getInstrs().size()));
  irgen.end();
  if (opts.runIRPasses) {
    TraceScope irPasses(opts.tracer, "compile", "ir-passes");
    std::vector<std::string> passes = opts.irPasses.empty() ? getDefaultIRPipeline() : opts.irPasses;
    IRPassManagerOptions pm = opts.passManager;
    if (!pm.tracer)
      pm.tracer = opts.tracer;
    KILN_ASSIGN_OR_RETURN(r.passes, runIRPipeline(*r.F, passes, pm));
  }
  if (opts.needsOwnBuffer)
    KILN_RETURN_IF_ERR(checkOwnBuffers(*r.F, opts.needsOwnBuffer));
  if (!opts.staticPlan)
    return r;
  TraceScope plan(opts.tracer, "compile", "memory-plan");
  KILN_ASSIGN_OR_RETURN(r.plan, planMemory(*r.F, opts.planner));
  KILN_RETURN_IF_ERR(verifyMemoryPlan(*r.F, r.plan));
  r.planned = true;
  return r;
}

} // namespace kiln
