/// \file
/// The Interpreter: Kiln's reference backend. It executes the low-level IR one instruction
/// at a time with simple, obviously correct kernels for every instruction and element
/// kind; every other backend is tested against it. Kernels live in one file per operator
/// family (Interpreter<Family>.cpp); this header is private to the backend.
#ifndef KILN_BACKENDS_INTERPRETER_INTERPRETER_H
#define KILN_BACKENDS_INTERPRETER_INTERPRETER_H

#include "kiln/Backend/Backend.h"

#include <memory>
#include <unordered_map>

namespace kiln {

class InterpreterBackend final : public Backend {
public:
  std::string getName() const override { return "Interpreter"; }
  bool isOpSupported(const Node &node) const override;
  /// The Interpreter runs every node as it is; it lowers nothing by itself.
  bool shouldLower(const Node &) const override { return false; }
  Expected<std::unique_ptr<CompiledFunction>> compile(Function *f,
                                                      const CompileOptions &opts) const override;
};

/// A compiled function: the IR of the graph. Holds pointers to the module's constants, so
/// it must not outlive the Module.
class InterpreterFunction final : public CompiledFunction {
public:
  explicit InterpreterFunction(std::unique_ptr<IRFunction> F) : F_(std::move(F)) {}
  Error execute(ExecutionContext &ctx) override;
  std::string getBackendName() const override { return "Interpreter"; }
  const IRFunction &getIR() const { return *F_; }

private:
  std::unique_ptr<IRFunction> F_;
};

/// The state of one run: a tensor (owning or view) for every buffer the IR touches, and
/// one method per instruction kind.
class InterpreterRun {
public:
  explicit InterpreterRun(const IRFunction &F) : F_(F) {}

  /// Binds weights (constants and placeholders), then executes every instruction.
  Error run(PlaceholderBindings &bindings);

  /// The tensor of buffer \p v (a weight, an activation, or a view).
  Tensor &getTensor(const Value *v);

  // One method per instruction kind, defined in the family files.
#define DEF_INSTR(NAME) Error fwd##NAME(const NAME##Inst *I);
#include "kiln/IR/AutoGenInstrs.def"

private:
  Error execute(const Instruction *I);

  const IRFunction &F_;
  std::unordered_map<const Value *, Tensor> tensors_;
};

/// An Unsupported error for instruction \p I whose operands have element kinds the
/// Interpreter has no kernel for (compile-time checks make this unreachable for graphs
/// that passed isOpSupported).
Error unsupportedKinds(const Instruction *I);

} // namespace kiln

#endif // KILN_BACKENDS_INTERPRETER_INTERPRETER_H
