/// \file
/// The backend interface. A backend implements a small core (name, isOpSupported,
/// shouldLower, compile; createDeviceManager for accelerators) and gets everything else
/// (graph passes, memory planning, runtime, the operator test-suite) from Kiln. Backends
/// register themselves by name.
#ifndef KILN_BACKEND_BACKEND_H
#define KILN_BACKEND_BACKEND_H

#include "kiln/Backend/CompileOptions.h"
#include "kiln/Backend/ExecutionContext.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class DeviceManager;
struct DeviceConfig;

/// The result of compiling one Function for one backend.
class CompiledFunction {
public:
  virtual ~CompiledFunction() = default;
  /// Runs once with the tensors bound in \p ctx. Placeholders the function reads must be
  /// bound with tensors of their exact type; outputs must be bound too.
  virtual Error execute(ExecutionContext &ctx) = 0;
  /// Name of the backend that compiled it.
  virtual std::string getBackendName() const = 0;
};

class Backend {
public:
  virtual ~Backend() = default;
  /// The registry name ("Interpreter", "CPU", "Sim").
  virtual std::string getName() const = 0;
  /// True when this backend can run \p node with its operand and result element kinds.
  virtual bool isOpSupported(const Node &node) const = 0;
  /// True when \p node should be lowered to simpler nodes before compile (default: yes,
  /// whenever a lowering exists).
  virtual bool shouldLower(const Node &node) const {
    (void)node;
    return true;
  }
  /// Compiles a verified function. Errors name the unsupported nodes.
  virtual Expected<std::unique_ptr<CompiledFunction>> compile(Function *f,
                                                              const CompileOptions &opts) const = 0;

  /// Creates the manager of one device of this backend (kiln/Runtime/DeviceManager.h).
  /// The default, null, selects the runtime's generic host device manager, which runs
  /// compiled functions on a worker thread (createDeviceManager in the runtime resolves
  /// it); an accelerator returns its own subclass. Shared ownership only because the
  /// type is incomplete here.
  virtual std::shared_ptr<DeviceManager> createDeviceManager(const DeviceConfig &config) const {
    (void)config;
    return nullptr;
  }

  /// An error listing every node of \p f this backend does not support, or success.
  Error checkAllNodesSupported(const Function &f) const;
};

using BackendFactory = std::function<std::unique_ptr<Backend>()>;

/// Registers a backend factory under \p name (at static-initialisation time, through
/// KILN_REGISTER_BACKEND).
void registerBackend(const std::string &name, BackendFactory factory);
/// Creates the backend registered as \p name.
Expected<std::unique_ptr<Backend>> createBackend(const std::string &name);
/// The names of all registered backends, sorted.
std::vector<std::string> getRegisteredBackends();

struct BackendRegistration {
  BackendRegistration(const std::string &name, BackendFactory f) {
    registerBackend(name, std::move(f));
  }
};

} // namespace kiln

/// Registers backend class CLASS under NAME. Link the backend library with alwayslink.
#define KILN_REGISTER_BACKEND(CLASS, NAME)                                                 \
  static ::kiln::BackendRegistration kilnBackendRegistration_##CLASS(                        \
      NAME, [] { return std::unique_ptr<::kiln::Backend>(new CLASS()); })

#endif // KILN_BACKEND_BACKEND_H
