#include "kiln/ExecutionEngine/ExecutionEngine.h"

namespace kiln {

ExecutionEngine::ExecutionEngine(const std::string &backendName)
    : backendName_(backendName), module_(std::make_unique<Module>()) {
  Expected<std::unique_ptr<Backend>> b = createBackend(backendName);
  if (b)
    backend_ = std::move(b).get();
  else
    backendError_ = b.takeError();
}

ExecutionEngine::~ExecutionEngine() {
  compiled_.clear(); // compiled code may refer to the module's constants
  module_.reset();
}

void ExecutionEngine::clear() {
  compiled_.clear();
  module_ = std::make_unique<Module>();
}

Error ExecutionEngine::compile(CompilationMode mode, const CompileOptions &opts) {
  (void)mode;
  if (!backend_)
    return makeError(backendError_.code(), backendError_.message());
  if (module_->getFunctions().empty())
    return makeError(ErrorCode::InvalidArgument, "compile: the module has no functions");
  compiled_.clear();
  for (const auto &f : module_->getFunctions()) {
    std::string ctx = "compiling function '" + f->getName() + "' for " + backendName_;
    if (Error e = f->verify())
      return std::move(e).addContext(ctx);
    if (Error e = backend_->checkAllNodesSupported(*f))
      return std::move(e).addContext(ctx);
    Expected<std::unique_ptr<CompiledFunction>> cf = backend_->compile(f.get(), opts);
    if (!cf)
      return cf.takeError().addContext(ctx);
    compiled_[f->getName()] = std::move(cf).get();
  }
  return Error::success();
}

Error ExecutionEngine::run(PlaceholderBindings &bindings, const std::string &name) {
  if (!backend_)
    return makeError(backendError_.code(), backendError_.message());
  if (compiled_.empty())
    return makeError(ErrorCode::InvalidArgument, "run: nothing compiled; call compile() first");
  CompiledFunction *cf = nullptr;
  if (name.empty()) {
    if (compiled_.size() != 1)
      return makeError(ErrorCode::InvalidArgument, "run: the module has ", compiled_.size(),
                       " functions; name the one to run");
    cf = compiled_.begin()->second.get();
  } else {
    auto it = compiled_.find(name);
    if (it == compiled_.end())
      return makeError(ErrorCode::NotFound, "run: no compiled function named '", name, "'");
    cf = it->second.get();
  }
  ExecutionContext ctx(&bindings);
  return cf->execute(ctx);
}

} // namespace kiln
