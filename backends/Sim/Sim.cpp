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

Expected<std::unique_ptr<CompiledFunction>> SimBackend::compile(Function *f,
                                                                const CompileOptions &opts) const {
  const Backend *interp = interpreter();
  if (!interp)
    return makeError(ErrorCode::NotFound, "Sim executes through the Interpreter's kernels; "
                                          "link //backends/Interpreter");
  KILN_RETURN_IF_ERR(checkBackendOptions("Sim", opts, getParameters()));
  KILN_RETURN_IF_ERR(checkAllNodesSupported(*f));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledFunction> inner, interp->compile(f, opts));
  return std::unique_ptr<CompiledFunction>(new SimFunction(std::move(inner), countWork(*f)));
}

std::shared_ptr<DeviceManager> SimBackend::createDeviceManager(const DeviceConfig &config) const {
  return std::make_shared<SimDeviceManager>(config);
}

} // namespace kiln
