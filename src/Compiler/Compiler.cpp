// The front half of the compile driver (kiln/Backend/Compiler.h).
#include "kiln/Backend/Compiler.h"
#include "kiln/Passes/Pipeline.h"

namespace kiln {

Error prepareFunction(Function *f, const Backend &backend, const PrepareOptions &opts) {
  if (!f)
    return makeError(ErrorCode::InvalidArgument, "compile: no function");
  std::string ctx = "preparing function '" + f->getName() + "' for " + backend.getName();
  if (Error e = f->verify())
    return std::move(e).addContext(ctx);
  // Verified once, above; the passes' output is checked once after the pipeline (a pass
  // that breaks the graph is a bug of Kiln, not of the caller).
  PassManagerOptions po;
  po.verifyEach = false;
  Expected<PipelineReport> r = runPipeline(f, getPipelineForBackend(&backend), &backend, po);
  if (!r)
    return r.takeError().addContext(ctx);
  bool changed = false;
  for (const PassRecord &p : r->passes)
    changed |= p.changed > 0;
  if (changed)
    if (Error e = f->verify())
      return makeError(ErrorCode::Internal, "the graph pipeline of ", backend.getName(),
                       " left function '", f->getName(), "' invalid: ", e.message());
  if (opts.checkSupport)
    if (Error e = backend.checkAllNodesSupported(*f))
      return std::move(e).addContext(ctx);
  return Error::success();
}

Expected<std::unique_ptr<CompiledFunction>> compileFunction(Function *f, const Backend &backend,
                                                            const CompileOptions &opts) {
  KILN_RETURN_IF_ERR(prepareFunction(f, backend));
  return backend.compile(f, opts);
}

} // namespace kiln
