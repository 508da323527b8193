/// \file
/// ExecutionEngine: the one-object convenience API for one backend. Build a graph in
/// getModule(), compile() it, run() it many times.
#ifndef KILN_EXECUTIONENGINE_EXECUTIONENGINE_H
#define KILN_EXECUTIONENGINE_EXECUTIONENGINE_H

#include "kiln/Backend/Backend.h"

#include <map>
#include <memory>
#include <string>

namespace kiln {

enum class CompilationMode { Infer };

class ExecutionEngine {
public:
  /// An engine for the backend registered as \p backendName. An unknown name is reported
  /// by compile() and run().
  explicit ExecutionEngine(const std::string &backendName = "Interpreter");
  ~ExecutionEngine();
  ExecutionEngine(const ExecutionEngine &) = delete;
  ExecutionEngine &operator=(const ExecutionEngine &) = delete;

  Module &getModule() { return *module_; }
  const std::string &getBackendName() const { return backendName_; }
  /// The backend, or null when the name was unknown.
  Backend *getBackend() const { return backend_.get(); }

  /// Verifies and compiles every function of the module.
  Error compile(CompilationMode mode = CompilationMode::Infer, const CompileOptions &opts = {});
  /// Runs the compiled function \p name (may be empty when the module has exactly one).
  Error run(PlaceholderBindings &bindings, const std::string &name = "");

  /// Drops the module and everything compiled, starting afresh.
  void clear();

private:
  std::string backendName_;
  std::unique_ptr<Backend> backend_;
  Error backendError_ = Error::success();
  std::unique_ptr<Module> module_;
  std::map<std::string, std::unique_ptr<CompiledFunction>> compiled_;
};

} // namespace kiln

#endif // KILN_EXECUTIONENGINE_EXECUTIONENGINE_H
