// The Sim backend: registration, compile, and its device manager.

#include "Sim.h"

#include "SimDeviceManager.h"

#include "kiln/Base/Trace.h"
#include "kiln/Memory/MemoryPipeline.h"

#include <cstdio>
#include <cstdlib>

namespace kiln {

KILN_REGISTER_BACKEND(SimBackend, "Sim");

const Backend *SimBackend::interpreter() const {
  // Not in the constructor: backends are built under the registry's lock.
  std::call_once(once_, [this] {
    Expected<std::unique_ptr<Backend>> b = createBackend("Interpreter");
    if (b)
      interpreter_ = std::move(b).get();
  });
  return interpreter_.get();
}

BackendCompileSpec SimBackend::getCompileSpec(const CompileOptions &opts) const {
  const Backend *interp = interpreter();
  BackendCompileSpec spec = interp ? interp->getCompileSpec(opts) : BackendCompileSpec();
  spec.memoryAwareSchedule = true;
  spec.irPasses = getDefaultIRPipeline();
  spec.staticPlan = true; // device memory
  // A run copies its inputs into device memory when it starts and its outputs out when it
  // ends, so they need device memory only while the program uses them.
  spec.placeholdersInArena = true;
  return spec;
}

std::vector<BackendParameter> SimBackend::getParameters() const {
  return {{"config", "PATH", "a SimConfig JSON file the program is built for"},
          {"scratchpad", "BYTES", "on-chip scratchpad size (overrides the config's)"},
          {"report", "0|1", "print the program's per-layer cycles and DMA bytes to stderr"}};
}

Expected<SimConfig> simConfigFromOptions(const CompileOptions &opts) {
  SimConfig c;
  auto it = opts.backendOptions.find("config");
  if (it != opts.backendOptions.end()) {
    KILN_ASSIGN_OR_RETURN(c, SimConfig::fromFile(it->second));
  }
  it = opts.backendOptions.find("scratchpad");
  if (it != opts.backendOptions.end()) {
    char *end = nullptr;
    double v = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0')
      return makeError(ErrorCode::InvalidArgument, "Sim: scratchpad = '", it->second,
                       "' is not a number of bytes");
    KILN_RETURN_IF_ERR(c.set("scratchpad_bytes", v));
  }
  it = opts.backendOptions.find("report");
  if (it != opts.backendOptions.end() && it->second != "0" && it->second != "1")
    return makeError(ErrorCode::InvalidArgument, "Sim: report must be 0 or 1, got '", it->second,
                     "'");
  return c;
}

Expected<std::unique_ptr<CompiledFunction>>
SimBackend::generateCode(Function *f, PlannedIR &P, const CompileOptions &opts) const {
  if (!interpreter())
    return makeError(ErrorCode::NotFound, "Sim runs its host steps with the Interpreter's "
                                          "kernels; link //backends/Interpreter");
  KILN_ASSIGN_OR_RETURN(SimConfig config, simConfigFromOptions(opts));
  SimWork work = countWork(*f);
  Expected<std::unique_ptr<SimProgram>> program = SimProgram::build(P, config);
  if (!program)
    return program.takeError().addContext("compiling '" + f->getName() + "' for Sim");
  auto it = opts.backendOptions.find("report");
  if (it != opts.backendOptions.end() && it->second == "1")
    std::fprintf(stderr, "Sim program of '%s' (scratchpad %llu bytes):\n%s", f->getName().c_str(),
                 (unsigned long long)config.scratchpadBytes, (*program)->report().c_str());
  return std::unique_ptr<CompiledFunction>(new SimFunction(std::move(program).get(), work));
}

Error SimFunction::execute(ExecutionContext &ctx) {
  if (!ctx.getBindings())
    return makeError(ErrorCode::InvalidArgument, "execute: no placeholder bindings");
  Tracer *tracer = ctx.getTracer() && ctx.getTracer()->kernels() ? ctx.getTracer() : nullptr;
  return program_->run(*ctx.getBindings(), tracer, ctx.getTracePid());
}

double SimBackend::estimateNodeSeconds(const Node &node) const {
  SimWork w;
  countNodeWork(node, w);
  SimConfig c;
  return double(estimateCost(w, c).computeCycles) / (c.clockMHz * 1e6);
}

double SimBackend::estimateTransferSeconds(uint64_t bytes) const {
  SimConfig c;
  return double((bytes + c.dmaBytesPerCycle - 1) / c.dmaBytesPerCycle) / (c.clockMHz * 1e6);
}

std::shared_ptr<DeviceManager> SimBackend::createDeviceManager(const DeviceConfig &config) const {
  return std::make_shared<SimDeviceManager>(config);
}

} // namespace kiln
