// SimCopy: the Sim accelerator registered under another name, as a backend kept outside
// Kiln's tree would be. It sees Kiln only through its public backend API (kiln/backend.h)
// and the registry, and is tested against the Interpreter with the operator suite
// (test/external_backend/BUILD: kiln_operator_suite). It is not in the operator table, so
// isOpSupported must be its own: here, the Sim's answer.

#include "kiln/backend.h"

#include <mutex>

namespace {

using namespace kiln;

/// Sim's code under SimCopy's name.
class SimCopyFunction final : public CompiledFunction {
public:
  explicit SimCopyFunction(std::unique_ptr<CompiledFunction> inner) : inner_(std::move(inner)) {}
  Error execute(ExecutionContext &ctx) override { return inner_->execute(ctx); }
  std::string getBackendName() const override { return "SimCopy"; }
  std::vector<StageTiming> getProfile() const override { return inner_->getProfile(); }

private:
  std::unique_ptr<CompiledFunction> inner_;
};

class SimCopyBackend final : public Backend {
public:
  std::string getName() const override { return "SimCopy"; }
  bool isOpSupported(const Node &n) const override { return sim() && sim()->isOpSupported(n); }
  bool shouldLower(const Node &n) const override { return !sim() || sim()->shouldLower(n); }
  BackendCompileSpec getCompileSpec(const CompileOptions &opts) const override {
    return sim() ? sim()->getCompileSpec(opts) : BackendCompileSpec();
  }
  Expected<std::unique_ptr<CompiledFunction>> generateCode(Function *f, PlannedIR &ir,
                                                           const CompileOptions &opts) const override {
    if (!sim())
      return makeError(ErrorCode::NotFound, "SimCopy runs the Sim's code; link //backends/Sim");
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledFunction> inner, sim()->generateCode(f, ir, opts));
    return std::unique_ptr<CompiledFunction>(new SimCopyFunction(std::move(inner)));
  }
  double estimateNodeSeconds(const Node &n) const override {
    return sim() ? sim()->estimateNodeSeconds(n) : Backend::estimateNodeSeconds(n);
  }
  double estimateTransferSeconds(uint64_t bytes) const override {
    return sim() ? sim()->estimateTransferSeconds(bytes) : 0.0;
  }
  // No createDeviceManager: in the runtime it runs on the generic host device.

private:
  /// The Sim, from the registry (not in the constructor: backends are built under the
  /// registry's lock); null when it is not linked.
  const Backend *sim() const {
    std::call_once(once_, [this] {
      Expected<std::unique_ptr<Backend>> b = createBackend("Sim");
      if (b)
        sim_ = std::move(b).get();
      else
        (void)b.takeError();
    });
    return sim_.get();
  }
  mutable std::once_flag once_;
  mutable std::unique_ptr<Backend> sim_;
};

KILN_REGISTER_BACKEND(SimCopyBackend, "SimCopy");

} // namespace
