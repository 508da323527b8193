/// \file
/// The CPU backend: compiles a function's low-level IR to native code with LLVM (ORC JIT)
/// over the libjit kernels, and runs it with an intra-op thread pool. Registered as "CPU".
/// Its settings come from CompileOptions::backendOptions (`--backend-opt spin-us=0`; see
/// getParameters), over the defaults the backend was constructed with.
#ifndef KILN_BACKENDS_CPU_CPUBACKEND_H
#define KILN_BACKENDS_CPU_CPUBACKEND_H

#include "kiln/Backend/Backend.h"
#include "kiln/Base/Trace.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu {

// codegen/Codegen.h
struct CodegenOptions;
struct Program;
enum class ConvAlgorithm;
class ThreadPool;

/// CPU-only settings: the registered backend starts from the defaults; the backend
/// parameters of each compile override them (parseCPUBackendOptions).
struct CPUBackendOptions {
  /// Keep the optimised LLVM IR / assembly of each compiled function (CPUFunction::getIR).
  bool keepIR = false;
  bool keepAsm = false;
  /// Use the AVX2 kernels and target even on an AVX-512 host.
  bool disableAvx512 = false;
  /// Preferred vector width for auto-vectorised loops (0: 512 on AVX-512 hosts).
  unsigned preferVectorWidth = 0;
  /// Run FusedConvolution/FusedFullyConnected (the graph pass fuse-activations folds a
  /// residual Add and an activation into them); off: isOpSupported refuses them, nothing
  /// fuses. A constructor option, not a backend parameter: fusion happens in the graph
  /// pipeline, before the compile options reach the backend.
  bool fuseEpilogues = true;
  /// Also fuse Sigmoid, Tanh and Swish, whose cost is their arithmetic rather than memory:
  /// the kernels run them, but measured no faster fused than as their own element-wise
  /// stage (backends/CPU/README.md), so by default they stay unfused.
  bool fuseSigmoids = false;
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
  /// The same bound while a run is between stages (at least spinMicros): a worker that
  /// blocked during a serial stage costs a wake-up at the next parallel one, while the
  /// run's end puts the pool to sleep after spinMicros whatever this is.
  unsigned stageSpinMicros = 1000; // ThreadPool::kDefaultStageSpinMicros
  /// Inline GEMM/convolution drivers per call (slower compiles; see CodegenOptions).
  bool specializeGemm = false;
  /// Winograd and transposed-GEMM convolutions where they pay (see CodegenOptions).
  bool winograd = true;
  bool transposedConv = true;
  /// Winograd F(4x4, 3x3) where it is fastest also below 512 input channels (backend option
  /// winograd=fast): faster there, with 1.2-2.3x the per-layer error of a plain float32
  /// loop (CodegenOptions::fastWinograd).
  bool fastWinograd = false;
  /// Float16 weights held as float16 in the constant arena (backend option half-weights:
  /// 0 off, 1 by the kernels that read them so at no cost, all: every convolution but
  /// depthwise ones; CodegenOptions::halfWeights, halfWeightsAllConvs).
  bool halfWeights = true;
  bool halfWeightsAllConvs = false;
  /// Compute every convolution it applies to with this algorithm (CodegenOptions::forceConv).
  std::optional<ConvAlgorithm> forceConv;
  /// Write the optimised LLVM IR / the host assembly of each compiled function to this
  /// file ("-": stderr; empty: no dump). The first dump to a path in a process truncates
  /// it, later ones append.
  std::string dumpLLVMIR;
  std::string dumpAsm;
  /// Time every instruction's stage on its own (CPUFunction::getProfile).
  bool profile = false;
  /// Print the load, optimise and codegen time of every JIT module to stderr.
  bool jitTimes = false;
  /// Shared kernels from those compiled when Kiln was built (JitOptions::prebuilt).
  bool prebuiltKernels = true;
  /// Free the graph's copy of each constant once packed for its only reader
  /// (CodegenOptions::releaseConstants): the function cannot be compiled again.
  bool releaseConstants = false;
  /// The on-disk cache of precompiled kernels ("" or "off": none); by default
  /// defaultKernelCacheDir().
  std::string cacheDir = defaultKernelCacheDir();

  /// The directory named by KILN_CPU_CACHE_DIR, else $XDG_CACHE_HOME/kiln-cpu, else
  /// $HOME/.cache/kiln-cpu, read once per process.
  static std::string defaultKernelCacheDir();
};

/// The parameters the CPU backend takes in CompileOptions::backendOptions.
std::vector<BackendParameter> getCPUBackendParameters();

/// \p base with the backend parameters of \p opts applied; InvalidArgument naming the
/// parameter for an unknown one or a bad value.
Expected<CPUBackendOptions> parseCPUBackendOptions(const CompileOptions &opts,
                                                   CPUBackendOptions base);

/// The code generator's options for backend options \p o and compile options \p opts
/// (what generateCode compiles with; ahead-of-time bundles use the same).
CodegenOptions getCodegenOptions(const CPUBackendOptions &o, const CompileOptions &opts);

class CPUBackend final : public Backend {
public:
  explicit CPUBackend(CPUBackendOptions opts = {}) : opts_(opts) {}
  std::string getName() const override { return "CPU"; }
  bool isOpSupported(const Node &node) const override;
  /// What the kernels run as the node stands; isOpSupported adds the 16-bit float nodes
  /// computed widened to float32 (widen-half-floats, WidenHalfFloats.h).
  bool isNativelySupported(const Node &node) const;
  /// True for a bf16 FullyConnected or MatMul, which runs natively (vdpbf16ps,
  /// codegen/EmitBf16.cpp) when the host has AVX512_BF16 and AVX-512 is not disabled, and
  /// widened otherwise.
  static bool isBf16Gemm(const Node &node);
  /// A bf16 Convolution / FusedConvolution the bf16 convolution kernel runs (group 1,
  /// constant filter, no activation or Relu/Clip): native on every host (vdpbf16ps with
  /// AVX512_BF16, else the generic kernel), so a fused one is never widened.
  static bool isBf16Conv(const Node &node);
  /// Lowers only the nodes isOpSupported refuses: whatever the CPU claims, it runs as it
  /// is (its kernels fuse better than the lowered forms).
  bool shouldLower(const Node &node) const override;
  /// A memory-aware schedule and the IR passes (CPUBackendOptions::optimizeIR), always a
  /// static plan; fused epilogues need buffers of their own.
  BackendCompileSpec getCompileSpec(const CompileOptions &opts) const override;
  Expected<std::unique_ptr<CompiledFunction>> generateCode(Function *f, PlannedIR &ir,
                                                           const CompileOptions &opts) const override;
  std::vector<BackendParameter> getParameters() const override {
    return getCPUBackendParameters();
  }

private:
  CPUBackendOptions opts_;
};

/// A compiled function. Owns its code, its packed constants and its thread pool, so it
/// does not depend on the Module after compile. execute() may be called from several
/// threads at once (each run takes its own activation arena).
class CPUFunction final : public CompiledFunction {
public:
  CPUFunction(std::unique_ptr<Program> prog, std::shared_ptr<ThreadPool> pool,
              bool profile = false);
  ~CPUFunction() override;
  Error execute(ExecutionContext &ctx) override;
  std::string getBackendName() const override { return "CPU"; }
  /// Per-stage timings when compiled with `profile=1` (one stage per instruction; the
  /// first run is not counted), else empty.
  std::vector<StageTiming> getProfile() const override;

  /// Optimised LLVM IR and assembly (empty unless asked for in CPUBackendOptions).
  const std::string &getIR() const;
  const std::string &getAsm() const;
  /// A one-line summary: stages, fusions, memory, ISA, threads.
  const std::string &getStats() const;
  uint64_t getActivationBytes() const;
  uint64_t getConstantBytes() const override;

private:
  /// The buffer table of a run: constants, placeholders (or borrowed constants); the
  /// activation arena is the caller's to add.
  Error bindBuffers(ExecutionContext &ctx, std::vector<char *> &bufs) const;
  char *takeArena();
  void returnArena(char *a);
  /// The error a kernel reported through the status words (a failed run-time check).
  Error statusError(const int64_t *status) const;

  std::unique_ptr<Program> prog_;
  std::shared_ptr<ThreadPool> pool_;
  mutable std::mutex arenasMutex_; ///< also guards the profile
  std::vector<char *> arenas_;
  /// Folds one run's kernel events into the profile (the first run only warms up).
  void addToProfile(const std::vector<TraceEvent> &events);

  bool profileOn_ = false;
  /// Per stage, the kernel events of the runs after the first: count, sum, minimum.
  std::vector<TraceSummary> profile_;
  bool profileWarm_ = false;
};

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_CPUBACKEND_H
