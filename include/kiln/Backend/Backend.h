/// \file
/// The backend interface. A backend implements a small core (name, isOpSupported,
/// shouldLower, getCompileSpec, generateCode; createDeviceManager for accelerators) and gets
/// everything else (graph passes, scheduling, IRGen, IR passes, memory planning, runtime,
/// the operator test-suite) from Kiln: the compile driver (kiln/Backend/Compiler.h) runs
/// the shared steps and hands the backend a planned IR. Backends register themselves by
/// name.
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
class Instruction;
struct PlannedIR;

/// The result of compiling one Function for one backend.
class CompiledFunction {
public:
  virtual ~CompiledFunction() = default;
  /// Runs once with the tensors bound in \p ctx. Placeholders the function reads must be
  /// bound with tensors of their exact type; outputs must be bound too.
  virtual Error execute(ExecutionContext &ctx) = 0;
  /// Name of the backend that compiled it.
  virtual std::string getBackendName() const = 0;
  /// Per-stage timings, in program order, for backends that profile when asked to (the
  /// CPU backend with `profile=1`); empty otherwise.
  virtual std::vector<StageTiming> getProfile() const { return {}; }
  /// Bytes of the constant storage the backend holds itself (the CPU's constant arena:
  /// weights packed in its kernels' layouts); 0 where the backend reads the graph's own
  /// constants.
  virtual uint64_t getConstantBytes() const { return 0; }
};

/// What the compile driver does for a backend between the graph and its code generation
/// (kiln/Backend/Compiler.h): a backend describes itself by this data rather than by
/// running the steps itself.
struct BackendCompileSpec {
  /// Graph rewrites the backend's code generation needs, run in order on every function it
  /// compiles (prepared or not), in place, before scheduling: (name, step), the step
  /// returning true when it changed the function (the driver then verifies it). The CPU's
  /// widen-half-floats computes 16-bit float nodes on float32 this way.
  std::vector<std::pair<std::string, std::function<bool(Function *)>>> graphSteps;
  /// Order nodes for low peak memory (kiln/Memory/Scheduler.h); otherwise topologically.
  bool memoryAwareSchedule = false;
  /// The IR passes to run after IRGen, in order (names of kiln/Passes/IR/IRPasses.h).
  std::vector<std::string> irPasses;
  /// Give every buffer a static place (kiln/Memory/MemoryPlanner.h); the plan is always
  /// checked by verifyMemoryPlan. Off: PlannedIR::plan stays empty and the backend
  /// allocates buffers itself.
  bool staticPlan = false;
  /// Alignment of every planned offset, in bytes.
  uint64_t alignment = 64;
  /// With staticPlan: placeholders share the activation arena, each live only while the
  /// function uses it (PlannerOptions::placeholdersInArena); for a device that copies a
  /// run's inputs in at its start and its outputs out at its end.
  bool placeholdersInArena = false;
  /// In-place rule: true for an instruction whose results must each have a buffer of their
  /// own, never shared with one of its inputs (e.g. a fused epilogue that reads a residual
  /// while partial sums are written to its destination). The IR passes respect it.
  std::function<bool(const Instruction &)> needsOwnBuffer;
};

/// A function's IR and memory plan made ahead of its compile (Backend::preparePlan), with
/// what it was made for. The partitioner charges a partition the plan its compile makes and
/// keeps it here; the Provisioner hands it to Backend::compile, so that no function is
/// scheduled, lowered to IR and planned twice. The IR refers to the function's nodes: the
/// function must not change, nor be erased, while the plan is kept.
struct PreparedPlan {
  std::string backend;                ///< The backend that planned it.
  const Function *function = nullptr; ///< The function it was planned from.
  size_t numNodes = 0;                ///< That function's node count when it was planned.
  /// The options it was planned under, as that backend takes them (forBackend).
  CompileOptions options;
  /// The IR and plan; null once a compile took them over (or when none was made).
  std::shared_ptr<PlannedIR> ir;
};

/// A target Kiln compiles for: what it supports and how it generates code (see the file
/// comment). One object per registry lookup; its methods are const and thread-safe.
class Backend {
public:
  virtual ~Backend() = default;
  /// The registry name ("Interpreter", "CPU", "Sim").
  virtual std::string getName() const = 0;
  /// True when this backend can run \p node with its operand and result element kinds.
  /// The default is the backend's column of the operator table (docs/Operators.md),
  /// found by getName(); a backend overrides it to add the conditions the table cannot
  /// state (ranks, attribute values). A backend the table has no column for supports
  /// nothing by default.
  virtual bool isOpSupported(const Node &node) const;
  /// True when \p node should be lowered to simpler nodes before compile (default: yes,
  /// whenever a lowering exists).
  virtual bool shouldLower(const Node &node) const {
    (void)node;
    return true;
  }
  /// The cost model the partitioner balances pieces by (kiln/Runtime/Partitioner.h):
  /// seconds one device of this backend spends running \p node. The default counts a
  /// nanosecond per multiply-accumulate of Convolution, FullyConnected, MatMul and
  /// BatchMatMul and per result element of other nodes (Reshape and Save are free); an
  /// accelerator returns its performance model's figure. Only ratios matter: pieces are
  /// compared with pieces of the same backend.
  virtual double estimateNodeSeconds(const Node &node) const;
  /// Seconds one device spends moving \p bytes in or out per run (a piece's inputs and
  /// outputs); default 0.
  virtual double estimateTransferSeconds(uint64_t bytes) const {
    (void)bytes;
    return 0;
  }
  /// The parameters this backend takes in CompileOptions::backendOptions ("threads" is
  /// generic and not listed); Backend::compile rejects any other (checkBackendOptions).
  virtual std::vector<BackendParameter> getParameters() const { return {}; }
  /// How the compile driver prepares this backend's IR under \p opts (default: plain IRGen
  /// in topological order, no IR passes, no static plan).
  virtual BackendCompileSpec getCompileSpec(const CompileOptions &opts) const {
    (void)opts;
    return {};
  }
  /// Generates the code of \p f from its IR, scheduled, optimised and planned as
  /// getCompileSpec() asked (kiln/Memory/MemoryPipeline.h); may take the IR and plan over.
  /// \p f is the graph the IR came from (for backends that also read it).
  virtual Expected<std::unique_ptr<CompiledFunction>>
  generateCode(Function *f, PlannedIR &ir, const CompileOptions &opts) const = 0;

  /// The back half of the compile driver for a function already prepared for this backend
  /// (verified, optimised by its pipeline, every node supported; see
  /// kiln/Backend/Compiler.h, compileFunction does it all): schedule, IRGen, the
  /// backend's IR passes, the memory plan and its verifier, then generateCode().
  Expected<std::unique_ptr<CompiledFunction>> compile(Function *f,
                                                      const CompileOptions &opts) const;
  /// compile() from a plan made ahead (preparePlan): when \p prepared holds a plan of \p f
  /// by this backend, made under options with the settings of \p opts
  /// (CompileOptions::sameSettings) while \p f had the node count it has now, its IR is
  /// compiled as it is and taken out of \p prepared. Otherwise (null, empty or made for
  /// something else) \p f is planned again, as compile() does.
  Expected<std::unique_ptr<CompiledFunction>>
  compile(Function *f, const CompileOptions &opts, PreparedPlan *prepared) const;
  /// The same without the code generation: the IR and plan generateCode() would get. Runs
  /// the backend's graph steps on \p f (in place) first.
  Expected<PlannedIR> planIR(Function *f, const CompileOptions &opts) const;
  /// planIR under \p opts as this backend takes them (CompileOptions::forBackend, as
  /// compile() takes them), kept with what it was made for, for compile(f, opts, &plan).
  Expected<PreparedPlan> preparePlan(Function *f, const CompileOptions &opts) const;

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

/// Makes a new instance of a registered backend.
using BackendFactory = std::function<std::unique_ptr<Backend>()>;

/// Registers a backend factory under \p name (at static-initialisation time, through
/// KILN_REGISTER_BACKEND).
void registerBackend(const std::string &name, BackendFactory factory);
/// Creates the backend registered as \p name.
Expected<std::unique_ptr<Backend>> createBackend(const std::string &name);
/// The names of all registered backends, sorted.
std::vector<std::string> getRegisteredBackends();

/// Registers a backend factory when constructed; KILN_REGISTER_BACKEND defines one.
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
