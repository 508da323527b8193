/// \file
/// The Interpreter: Kiln's reference backend. It executes the low-level IR one instruction
/// at a time with simple, obviously correct kernels for every instruction and element
/// kind; every other backend is tested against it. Kernels live in one file per operator
/// family (Interpreter<Family>.cpp); this header is private to the backend.
#ifndef KILN_BACKENDS_INTERPRETER_INTERPRETER_H
#define KILN_BACKENDS_INTERPRETER_INTERPRETER_H

#include "kiln/Backend/Backend.h"
#include "kiln/Memory/MemoryPlanner.h"

#include <cstdlib>
#include <memory>
#include <unordered_map>

namespace kiln {

class InterpreterBackend final : public Backend {
public:
  std::string getName() const override { return "Interpreter"; }
  // isOpSupported: Backend's default, the Interpreter column of the operator table
  // (src/ClassGen/NodeTable.cpp, docs/Operators.md): every kind it claims has a kernel here
  // and a test in the operator suite.
  /// The Interpreter runs every node as it is; it lowers nothing by itself.
  bool shouldLower(const Node &) const override { return false; }
  /// Plain IRGen by default; CompileOptions::optimizeIR adds the memory-aware schedule and
  /// the default IR pipeline, staticMemoryPlan runs from the static plan.
  BackendCompileSpec getCompileSpec(const CompileOptions &opts) const override;
  Expected<std::unique_ptr<CompiledFunction>> generateCode(Function *f, PlannedIR &ir,
                                                           const CompileOptions &opts) const override;
};

/// Bytes aligned for a memory plan, freed with std::free.
struct FreeDeleter {
  void operator()(char *p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<char[], FreeDeleter>;

/// Where a planned run keeps its buffers: the three regions of a MemoryPlan.
struct PlannedMemory {
  char *constants = nullptr;
  char *mutables = nullptr;
  char *activations = nullptr;
  /// Offset of every weight and activation in its region.
  const std::unordered_map<const Value *, uint64_t> *offsets = nullptr;
};

/// A compiled function: the IR of the graph. Holds pointers to the module's constants, so
/// it must not outlive the Module. With a memory plan (CompileOptions::staticMemoryPlan)
/// it runs every buffer at its planned offset: constants are copied into their region
/// once, placeholders are copied in and out of theirs on each run, and activations live
/// in one arena per run.
class InterpreterFunction final : public CompiledFunction {
public:
  explicit InterpreterFunction(std::unique_ptr<IRFunction> F,
                               std::unique_ptr<MemoryPlan> plan = nullptr);
  Error execute(ExecutionContext &ctx) override;
  std::string getBackendName() const override { return "Interpreter"; }
  const IRFunction &getIR() const { return *F_; }
  /// The memory plan, or null when running unplanned.
  const MemoryPlan *getMemoryPlan() const { return plan_.get(); }

private:
  Error executePlanned(PlaceholderBindings &bindings, Tracer *tracer, uint32_t pid);

  std::unique_ptr<IRFunction> F_;
  std::unique_ptr<MemoryPlan> plan_;
  std::unordered_map<const Value *, uint64_t> offsets_;
  AlignedBytes constants_;
};

/// The state of one run: a tensor (owning or view) for every buffer the IR touches, and
/// one method per instruction kind.
class InterpreterRun {
public:
  /// A run of \p F; with \p mem, buffers live at their planned offsets.
  explicit InterpreterRun(const IRFunction &F, const PlannedMemory *mem = nullptr)
      : F_(F), mem_(mem) {}

  /// Binds weights (constants and placeholders), then executes every instruction; with
  /// \p tracer asking for kernel events, records one per instruction on process \p pid.
  Error run(PlaceholderBindings &bindings, Tracer *tracer = nullptr, uint32_t pid = 0);

  /// The tensor of buffer \p v (a weight, an activation, or a view).
  Tensor &getTensor(const Value *v);

  // One method per instruction kind, defined in the family files.
#define DEF_INSTR(NAME) Error fwd##NAME(const NAME##Inst *I);
#include "kiln/IR/AutoGenInstrs.def"

private:
  Error execute(const Instruction *I);

  const IRFunction &F_;
  const PlannedMemory *mem_;
  std::unordered_map<const Value *, Tensor> tensors_;
};

/// An Unsupported error for instruction \p I whose operands have element kinds the
/// Interpreter has no kernel for (compile-time checks make this unreachable for graphs
/// that passed isOpSupported).
Error unsupportedKinds(const Instruction *I);

} // namespace kiln

#endif // KILN_BACKENDS_INTERPRETER_INTERPRETER_H
