// The back half of the compile driver (kiln/Backend/Compiler.h): from a prepared function
// to the backend's code, through the shared schedule, IRGen, IR passes and memory plan.
#include "kiln/Backend/Backend.h"
#include "kiln/Base/Trace.h"
#include "kiln/Memory/MemoryPipeline.h"

namespace kiln {

Expected<PlannedIR> Backend::planIR(Function *f, const CompileOptions &opts) const {
  TraceScope scope(opts.tracer, "compile", "plan " + f->getName());
  scope.arg("backend", getName());
  BackendCompileSpec spec = getCompileSpec(opts);
  for (const auto &[name, step] : spec.graphSteps)
    if (step(f))
      if (Error e = f->verify())
        return makeError(ErrorCode::Internal, getName(), " backend step '", name, "' left '",
                         f->getName(), "' invalid: ", e.message());
  MemoryPipelineOptions mo;
  mo.memoryAwareSchedule = spec.memoryAwareSchedule;
  mo.irPasses = spec.irPasses;
  mo.runIRPasses = !spec.irPasses.empty();
  mo.staticPlan = spec.staticPlan;
  mo.planner.alignment = spec.alignment;
  mo.planner.placeholdersInArena = spec.placeholdersInArena;
  mo.needsOwnBuffer = spec.needsOwnBuffer;
  mo.tracer = opts.tracer;
  Expected<PlannedIR> P = generatePlannedIR(f, mo);
  if (!P)
    return P.takeError().addContext(getName() + " backend planning '" + f->getName() + "'");
  return P;
}

Expected<PreparedPlan> Backend::preparePlan(Function *f, const CompileOptions &options) const {
  PreparedPlan prepared;
  prepared.backend = getName();
  prepared.options = options.forBackend(getName());
  // The graph steps planIR runs may add or remove nodes: the count is taken after them.
  KILN_ASSIGN_OR_RETURN(PlannedIR P, planIR(f, prepared.options));
  prepared.function = f;
  prepared.numNodes = f->numNodes();
  prepared.ir = std::make_shared<PlannedIR>(std::move(P));
  return prepared;
}

Expected<std::unique_ptr<CompiledFunction>> Backend::compile(Function *f,
                                                             const CompileOptions &options) const {
  return compile(f, options, nullptr);
}

Expected<std::unique_ptr<CompiledFunction>>
Backend::compile(Function *f, const CompileOptions &options, PreparedPlan *prepared) const {
  // Parameters qualified for another backend ("CPU:profile") are not this one's.
  CompileOptions opts = options.forBackend(getName());
  TraceScope scope(opts.tracer, "compile", "compile " + f->getName());
  scope.arg("backend", getName());
  KILN_RETURN_IF_ERR(checkBackendOptions(getName(), opts, getParameters()));
  // (A copy of a Partition shares the plan: one that another compile took over has no IR.)
  bool reuse = prepared && prepared->ir && prepared->ir->F && prepared->backend == getName() &&
               prepared->function == f && prepared->numNodes == f->numNodes() &&
               prepared->options.sameSettings(opts);
  scope.arg("plan", reuse ? "prepared" : "made");
  PlannedIR P;
  if (reuse)
    P = std::move(*prepared->ir);
  if (prepared) // taken over, or stale: planIR below may change the function it refers to
    prepared->ir.reset();
  if (!reuse) {
    KILN_ASSIGN_OR_RETURN(P, planIR(f, opts));
  }
  TraceScope codegen(opts.tracer, "compile", "codegen");
  return generateCode(f, P, opts);
}

} // namespace kiln
