#include "kiln/ExecutionEngine/ExecutionEngine.h"
#include "kiln/Backend/Backend.h"

#include "kiln/Runtime/HostManager.h"

#include <iostream>

namespace kiln {

ExecutionEngine::ExecutionEngine(const std::string &backendName, unsigned numDevices,
                                 uint64_t deviceMemory)
    : backendName_(backendName), numDevices_(numDevices ? numDevices : 1),
      deviceMemory_(deviceMemory), module_(std::make_unique<Module>()) {
  Expected<std::unique_ptr<Backend>> b = createBackend(backendName);
  if (!b) {
    backendError_ = b.takeError();
    return;
  }
  backend_ = std::move(b).get();
  std::vector<DeviceConfig> devices(numDevices_);
  for (DeviceConfig &d : devices) {
    d.backendName = backendName;
    d.memoryBytes = deviceMemory;
  }
  Expected<std::unique_ptr<HostManager>> hm = HostManager::create(std::move(devices));
  if (hm)
    host_ = std::move(hm).get();
  else
    backendError_ = hm.takeError();
}

ExecutionEngine::~ExecutionEngine() {
  host_.reset(); // compiled code refers to the module's functions and constants
  module_.reset();
}

void ExecutionEngine::unload() {
  if (host_)
    for (const std::string &n : networks_)
      (void)host_->removeNetwork(n); // also erases the partition functions it made
  networks_.clear();
}

void ExecutionEngine::clear() {
  unload();
  module_ = std::make_unique<Module>();
}

Error ExecutionEngine::compile(const CompileOptions &opts) {
  if (!host_)
    return makeError(backendError_.code(), backendError_.message());
  unload();
  if (module_->getFunctions().empty())
    return makeError(ErrorCode::InvalidArgument, "compile: the module has no functions");
  std::vector<Function *> fns; // adding networks may add partition functions
  for (const auto &f : module_->getFunctions())
    fns.push_back(f.get());
  NetworkOptions no;
  no.backends = {backendName_};
  no.replicas = numDevices_;
  no.compile = opts;
  no.prepare = true; // the compile driver's front half (kiln/Backend/Compiler.h)
  no.strictBackend = strict_;
  // One warning for the whole compile, however many functions fell back.
  std::string warnings;
  no.onWarning = [&warnings](const std::string &w) { warnings += (warnings.empty() ? "" : "\n") + w; };
  for (Function *f : fns) {
    std::string ctx = "compiling function '" + f->getName() + "' for " + backendName_;
    if (Error e = guardHostMemory("", [&] { return host_->addNetwork(f, no); })) {
      unload();
      return std::move(e).addContext(ctx);
    }
    networks_.push_back(f->getName());
  }
  if (!warnings.empty()) {
    if (onWarning_)
      onWarning_(warnings);
    else
      std::cerr << "kiln: warning: " << warnings << std::endl;
  }
  return Error::success();
}

Expected<std::string> ExecutionEngine::networkName(const std::string &name) const {
  if (!host_)
    return makeError(backendError_.code(), backendError_.message());
  if (networks_.empty())
    return makeError(ErrorCode::InvalidArgument, "nothing compiled; call compile() first");
  if (!name.empty())
    return name;
  if (networks_.size() != 1)
    return makeError(ErrorCode::InvalidArgument, "the module has ", networks_.size(),
                     " functions; name one");
  return networks_.front();
}

Expected<NetworkSplit> ExecutionEngine::getNetworkSplit(const std::string &name) const {
  KILN_ASSIGN_OR_RETURN(std::string n, networkName(name));
  return host_->getNetworkSplit(n);
}

void ExecutionEngine::startTrace(const TraceOptions &opts) {
  if (host_)
    host_->startTrace(opts);
}

std::shared_ptr<Tracer> ExecutionEngine::stopTrace() {
  if (!host_)
    return nullptr;
  std::shared_ptr<Tracer> t = host_->stopTrace();
  if (t)
    lastTrace_ = t;
  return t;
}

std::shared_ptr<Tracer> ExecutionEngine::getTrace() const {
  return host_ ? host_->getTrace() : nullptr;
}

Error ExecutionEngine::writeTrace(const std::string &path) const {
  std::shared_ptr<Tracer> t = getTrace();
  if (!t)
    t = lastTrace_;
  if (!t)
    return makeError(ErrorCode::InvalidArgument,
                     "writeTrace: no trace was started (call startTrace first)");
  return t->writeJSON(path);
}

Error ExecutionEngine::run(PlaceholderBindings &bindings, const std::string &name) {
  Expected<std::string> n = networkName(name);
  if (!n)
    return n.takeError().addContext("run");
  return host_->runNetworkBlocking(*n, bindings);
}

} // namespace kiln
