/// \file
/// The CPU backend: compiles a function's low-level IR to native code with LLVM (ORC JIT)
/// over the libjit kernels, and runs it with an intra-op thread pool. Registered as "CPU".
/// Tools that want dumps or other CPU-only settings construct CPUBackend with options.
#ifndef KILN_BACKENDS_CPU_CPUBACKEND_H
#define KILN_BACKENDS_CPU_CPUBACKEND_H

#include "kiln/Backend/Backend.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::cpu {

struct Program;
class ThreadPool;

/// CPU-only settings (the registered backend uses the defaults).
struct CPUBackendOptions {
  /// Keep the optimised LLVM IR / assembly of each compiled function (CPUFunction::getIR).
  bool keepIR = false;
  bool keepAsm = false;
  /// Use the AVX2 kernels and target even on an AVX-512 host.
  bool disableAvx512 = false;
  /// Preferred vector width for auto-vectorised loops (0: 512 on AVX-512 hosts).
  unsigned preferVectorWidth = 0;
  /// Run FusedConvolution/FusedFullyConnected (the graph pass fuse-activations folds a
  /// residual Add and Relu/Clip into them); off: isOpSupported refuses them, nothing fuses.
  bool fuseEpilogues = true;
  bool fuseElementwise = true;
  /// Schedule nodes for low peak memory and run the default IR pass pipeline (views for
  /// Concat operands, copy elimination, buffer sharing) before the static plan; off: plain
  /// topological order and the IR as IRGen wrote it.
  bool optimizeIR = true;
  /// How long the pool's threads spin-wait (for the next stage, or for each other) before
  /// they block, in microseconds. Longer bounds save wake-ups between short stages (small
  /// networks at several threads run faster) but let an idle pool keep cores busy for up
  /// to that long after each run; 0 blocks at once.
  unsigned spinMicros = 100; // ThreadPool::kDefaultSpinMicros
  /// Inline GEMM/convolution drivers per call (slower compiles; see CodegenOptions).
  bool specializeGemm = false;
};

class CPUBackend final : public Backend {
public:
  explicit CPUBackend(CPUBackendOptions opts = {}) : opts_(opts) {}
  std::string getName() const override { return "CPU"; }
  bool isOpSupported(const Node &node) const override;
  /// The CPU backend runs FullyConnected, BatchNormalization and the activations as they
  /// are (its kernels fuse them better than their lowered forms).
  bool shouldLower(const Node &node) const override;
  /// A memory-aware schedule and the IR passes (CPUBackendOptions::optimizeIR), always a
  /// static plan; fused epilogues need buffers of their own.
  BackendCompileSpec getCompileSpec(const CompileOptions &opts) const override;
  Expected<std::unique_ptr<CompiledFunction>> generateCode(Function *f, PlannedIR &ir,
                                                           const CompileOptions &opts) const override;

private:
  CPUBackendOptions opts_;
};

/// A compiled function. Owns its code, its packed constants and its thread pool, so it
/// does not depend on the Module after compile. execute() may be called from several
/// threads at once (each run takes its own activation arena).
class CPUFunction final : public CompiledFunction {
public:
  CPUFunction(std::unique_ptr<Program> prog, std::shared_ptr<ThreadPool> pool);
  ~CPUFunction() override;
  Error execute(ExecutionContext &ctx) override;
  std::string getBackendName() const override { return "CPU"; }

  /// Optimised LLVM IR and assembly (empty unless asked for in CPUBackendOptions).
  const std::string &getIR() const;
  const std::string &getAsm() const;
  /// A one-line summary: stages, fusions, memory, ISA, threads.
  const std::string &getStats() const;
  uint64_t getActivationBytes() const;
  uint64_t getConstantBytes() const;

private:
  char *takeArena();
  void returnArena(char *a);

  std::unique_ptr<Program> prog_;
  std::shared_ptr<ThreadPool> pool_;
  std::mutex arenasMutex_;
  std::vector<char *> arenas_;
  /// Per-stage milliseconds summed over runs after the first (KILN_CPU_PROFILE=1), printed
  /// to stderr on destruction.
  std::vector<double> profile_, profileMin_;
  uint64_t profileRuns_ = 0;
};

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_CPUBACKEND_H
