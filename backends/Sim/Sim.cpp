// The Sim backend: registration, compile, and its device manager.

#include "Sim.h"

#include "SimDeviceManager.h"

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
  return interp ? interp->getCompileSpec(opts) : BackendCompileSpec();
}

Expected<std::unique_ptr<CompiledFunction>>
SimBackend::generateCode(Function *f, PlannedIR &P, const CompileOptions &opts) const {
  const Backend *interp = interpreter();
  if (!interp)
    return makeError(ErrorCode::NotFound, "Sim executes through the Interpreter's kernels; "
                                          "link //backends/Interpreter");
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledFunction> inner, interp->generateCode(f, P, opts));
  return std::unique_ptr<CompiledFunction>(new SimFunction(std::move(inner), countWork(*f)));
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
