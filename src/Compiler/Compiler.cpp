// The front half of the compile driver (kiln/Backend/Compiler.h).
#include "kiln/Backend/Compiler.h"
#include "kiln/Base/Trace.h"
#include "kiln/Passes/Pipeline.h"

namespace kiln {

Error prepareFunction(Function *f, const Backend &backend, const PrepareOptions &opts) {
  if (!f)
    return makeError(ErrorCode::InvalidArgument, "compile: no function");
  std::string ctx = "preparing function '" + f->getName() + "' for " + backend.getName();
  TraceScope prepare(opts.tracer, "compile", "prepare " + f->getName());
  prepare.arg("backend", backend.getName());
  TraceScope verify(opts.tracer, "compile", "verify");
  if (Error e = f->verify())
    return std::move(e).addContext(ctx);
  verify.end();
  // Verified once, above; the passes' output is checked once after the pipeline (a pass
  // that breaks the graph is a bug of Kiln, not of the caller).
  PassManagerOptions po;
  po.verifyEach = false;
  po.tracer = opts.tracer;
  po.afterPass = opts.afterPass;
  TraceScope graphPasses(opts.tracer, "compile", "graph-passes");
  Expected<PipelineReport> r = runPipeline(f, getPipelineForBackend(&backend), &backend, po);
  if (!r)
    return r.takeError().addContext(ctx);
  graphPasses.end();
  bool changed = false;
  for (const PassRecord &p : r->passes)
    changed |= p.changed > 0;
  TraceScope check(opts.tracer, "compile", "verify");
  if (changed)
    if (Error e = f->verify())
      return makeError(ErrorCode::Internal, "the graph pipeline of ", backend.getName(),
                       " left function '", f->getName(), "' invalid: ", e.message());
  check.end();
  TraceScope support(opts.checkSupport ? opts.tracer : nullptr, "compile", "support-check");
  if (opts.checkSupport)
    if (Error e = backend.checkAllNodesSupported(*f))
      return std::move(e).addContext(ctx);
  return Error::success();
}

static Expected<std::unique_ptr<CompiledFunction>>
compileUnguarded(Function *f, const Backend &backend, const CompileOptions &opts) {
  PrepareOptions prep;
  prep.tracer = opts.tracer;
  prep.afterPass = opts.afterGraphPass;
  KILN_RETURN_IF_ERR(prepareFunction(f, backend, prep));
  return backend.compile(f, opts);
}

Expected<std::unique_ptr<CompiledFunction>> compileFunction(Function *f, const Backend &backend,
                                                            const CompileOptions &opts) {
  return guardHostMemory("compiling function '" + (f ? f->getName() : std::string()) + "' for " +
                             backend.getName(),
                         [&] { return compileUnguarded(f, backend, opts); });
}

} // namespace kiln
