/// \file
/// The CPU backend's code generator: from the planned low-level IR of one function to
/// native code. The IR comes from the compile driver (kiln/Backend/Compiler.h): the graph
/// pipeline has fused each Convolution/FullyConnected's residual Add and activation into a
/// FusedConvolution/FusedFullyConnected (fuse-activations), the IR passes have run, and
/// the shared static planner (kiln/Memory/MemoryPlanner.h) has placed every activation.
///
/// 1. Buffers: activations at their planned offsets in one arena (a view inside its
///    buffer), followed by the kernels' scratch; placeholders are bound per run; constants
///    (raw or packed in the GEMM micro-kernel's layout) live in a constant arena owned by
///    the program.
/// 2. LLVM IR (LLVMIRGen.cpp drives the emitters of Emitter.h: EmitConv.cpp, EmitLinalg.cpp,
///    EmitNorm.cpp, EmitData.cpp, EmitElementwise.cpp): one LLVM function per stage, calling
///    the libjit kernels with constant shapes (specialised by inlining); a fused
///    instruction's residual and activation become the GEMM kernels' epilogue; chains of
///    element-wise instructions become one loop. A stage is either serial or parallel (run
///    by every thread of the pool with its thread id); consecutive serial work shares one
///    stage.
/// 3. JIT (jit/Jit.h) for the host CPU.
///
/// This header is the code generator's interface, and no LLVM type is used in it (Jit.h
/// only declares the ones the EmittedProgram holds). It begins with the choices made from
/// the shape alone, before any IR is emitted: the instruction set, the convolution
/// kernel and the weight layouts the families' kernels take (chooseConvAlgorithm, pure,
/// defined in EmitConv.cpp over the cost model of ConvCost.h, checked by
/// test/cpu:conv_plan_test and, against measured kernels, test/cpu:conv_cost_test; the
/// model and its calibration are in backends/CPU/README.md).
#ifndef KILN_BACKENDS_CPU_CODEGEN_CODEGEN_H
#define KILN_BACKENDS_CPU_CODEGEN_CODEGEN_H

#include "kiln/Base/Trace.h"
#include "backends/CPU/jit/Jit.h"
#include "kiln/IR/IR.h"
#include "kiln/Memory/MemoryPlanner.h"

#include <cstdint>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu {

// ---------------------------------------------- the choice of kernels (no IR, no LLVM)

/// The instruction set the kernels are compiled for.
enum class Isa { Avx2, Avx512 };

/// A convolution in NCHW: input N x C x H x W, output N x O x OH x OW.
struct ConvShape {
  int64_t N = 1, C = 1, H = 1, W = 1;
  int64_t O = 1, OH = 1, OW = 1;
  int64_t KH = 1, KW = 1; ///< kernel
  int64_t SH = 1, SW = 1; ///< strides
  int64_t PT = 0, PL = 0; ///< top and left padding
  int64_t DH = 1, DW = 1; ///< dilations
  int64_t group = 1;
  /// The weights are a constant (they can be transformed at compile time).
  bool constantWeights = true;
  /// The fused epilogue adds a residual operand.
  bool residualAdd = false;
};

/// The kernel that computes a convolution; the profile name of each in brackets.
enum class ConvAlgorithm {
  Depthwise,     ///< [conv_dw] one filter per channel (libjit_conv2d_dw)
  Grouped,       ///< [conv_grp] groups as a batch of direct convolutions (libjit_conv2d_grouped)
  WinogradRows2, ///< [conv_wino2] F(2x2, 3x3), tiles as GEMM rows
  WinogradRows4, ///< [conv_wino4r] F(4x4, 3x3), tiles as GEMM rows
  Winograd,      ///< [conv_wino] F(4x4, 3x3), tiles as GEMM columns
  Transposed,    ///< [convT] GEMM with the pixels as rows (libjit_conv2d_t)
  Strip,         ///< [convS] strip kernel over the unpacked filter (libjit_conv2d_strip)
  PackedGemm,    ///< [conv] packed GEMM over im2col (libjit_conv2d)
};

/// How weights are laid out for their kernel; all but None are packed at compile time
/// for constant weights.
enum class WeightPacking {
  None,            ///< as they are
  GemmA,           ///< GEMM A panels (MR rows), per group
  GemmB,           ///< GEMM B panels (NR columns)
  GemmBTransposed, ///< W [cols x rows] packed as the B operand W^T
  Winograd4x4,     ///< F(4x4, 3x3) transformed, for the tiles-as-columns kernel
  WinogradRows2x2, ///< F(2x2, 3x3) transformed, for the tiles-as-rows kernel
  WinogradRows4x4, ///< F(4x4, 3x3) transformed, for the tiles-as-rows kernel
  GroupedTaps,     ///< [G][C/G][KH KW][O/G]: per group, the taps' output channels adjacent
  GemmBBf16Pairs,  ///< bf16 B in pairs of rows, 16-column panels (libjit_pack_b_bf16)
  ConvBf16Pairs,   ///< bf16 filter in blocks of 4 channels of k-pairs (libjit_pack_conv_w_bf16)
  ConvBf16ChannelPanels, ///< bf16 filter in 16-channel panels of k-pairs (libjit_pack_conv_wt_bf16)
  GemmAHalf,       ///< GemmA, each element a float16 (CodegenOptions::halfWeights)
  GemmBHalf,       ///< GemmB, each element a float16
  GemmBTransposedHalf, ///< GemmBTransposed, each element a float16
  NoneHalf,        ///< as they are (row-major), each element a float16
};

/// The machine limits the convolution cost model (ConvCost.h) divides work by: fixed
/// defaults (this project's Zen 4 host: src/tools/MachineLimits' figures, and the weight
/// stream fitted to measured kernels; backends/CPU/README.md), so that a compile does not
/// depend on a measurement; CodegenOptions::convMachine can give others.
struct ConvMachine {
  double peakGflops = 115;  ///< one core's multiply-add peak, GFLOP/s (2 per multiply-add)
  double cacheGBs = 75;     ///< one core's copy bandwidth within L2, GB/s read plus written
  double memoryGBs = 13.7;  ///< weights streamed from memory, GB/s, all cores together
};

/// Algorithms that may be switched off (CodegenOptions::winograd, transposedConv), and
/// one that may be forced (CodegenOptions::forceConv: measurements and tests).
/// The fewest input channels at which Winograd F(4x4, 3x3) is a default candidate. Its
/// error (points 0, +-1, 1/2, -2, channel sums in blocks) is about 8e-7 RMS whatever the
/// channel count, a plain float32 loop's grows with it: from 512 channels F(4x4) is within
/// the plain loop's RMS and maximum, below it outside (README, "Accuracy";
/// conv_accuracy_test).
constexpr int64_t kWino4MinChannels = 512;

struct ConvAlgorithmSet {
  bool winograd = true;
  bool transposed = true;
  /// Winograd F(4x4, 3x3) where it is fastest on every layer (CodegenOptions::fastWinograd):
  /// outside the error budget below kWino4MinChannels input channels (README, "Accuracy");
  /// otherwise F(4x4) only from kWino4MinChannels, F(2x2, 3x3) below.
  bool fastWinograd = false;
  /// Taken wherever it can compute the shape (convAlgorithmApplies), whatever its speed
  /// and error; other convolutions follow the rules.
  std::optional<ConvAlgorithm> force;
  /// The limits the cost model estimates with (CodegenOptions::convMachine).
  ConvMachine machine = {};
};

/// A stride-1 dilated convolution as DH DW undilated ones: output phase (r, s) (rows
/// r + DH i, columns s + DW k) reads only the input rows r - eH + DH j and columns
/// s - eW + DW k (eH = PT mod DH, eW = PL mod DW), so it is an undilated convolution with
/// pads PT / DH, PL / DW over that sub-image (zero where it leaves the image). All phases
/// have one shape: Hp = ceil((H + eH) / DH) rows, ceil(OH / DH) output rows (the rows past
/// OH of the last phases computed and dropped), and the same for columns.
struct ConvPhases {
  int64_t DH = 1, DW = 1, eH = 0, eW = 0;
  ConvShape shape; ///< the undilated convolution over the N DH DW phase images
};

/// \p s as its dilation phases: stride 1, dilation above 1 along an axis (at most
/// kMaxPhaseDilation each) and no residual add (the merge copies the results as the
/// kernel's epilogue left them); nullopt otherwise.
std::optional<ConvPhases> dilationPhases(const ConvShape &s);
constexpr int64_t kMaxPhaseDilation = 8;

struct ConvPlan {
  ConvAlgorithm algorithm = ConvAlgorithm::PackedGemm;
  WeightPacking packing = WeightPacking::GemmA;
  /// Set when the algorithm computes the layer's dilation phases (dilationPhases) as a
  /// batch of undilated convolutions, between a split of the input and a merge of the
  /// results: the phases it was chosen for.
  std::optional<ConvPhases> phases;
};

/// The kernel for \p s on \p isa compiled for \p threads threads: a forced one where it
/// applies (to \p s, or else to its dilation phases), otherwise the candidate
/// (rankConvAlgorithms, ConvCost.h: what applies and is allowed, and the accuracy rule)
/// with the least estimated time, over \p s and, where it has them, its dilation phases
/// (their best kernel's estimate plus the split and the merge: dilationPhaseCopySeconds).
ConvPlan chooseConvAlgorithm(const ConvShape &s, Isa isa, unsigned threads,
                             const ConvAlgorithmSet &allowed = {});

/// The profile name of \p a ("conv_dw", "convS", ...).
const char *convAlgorithmName(ConvAlgorithm a);

/// The algorithm whose profile name is \p name; nullopt when none is.
std::optional<ConvAlgorithm> parseConvAlgorithmName(const std::string &name);

/// Whether \p a's kernel can compute \p s at all, fast or not: depthwise needs group =
/// channels and no residual add; the grouped kernel 1 < group, constant weights and groups
/// of at most kGroupedMaxWidth input and output channels; Winograd a 3x3 stride-1 undilated kernel, one group and
/// constant weights; the transposed GEMM constant weights and one group; the strip one
/// group and a reduction C KH KW <= 9904 (its block of one strip in the GEMM scratch); the
/// packed GEMM takes everything.
bool convAlgorithmApplies(ConvAlgorithm a, const ConvShape &s);

/// The widest group (input or output channels) the grouped kernel takes: its per-thread
/// copy of one group's padded input planes stays small.
constexpr int64_t kGroupedMaxWidth = 64;

// ------------------------------------ what the kernels take (asked by CPUSupport.cpp)

/// Whether a fused epilogue (FusedConvolution, FusedFullyConnected) runs activation \p act
/// fused: every activation the type rule admits, but Sigmoid, Tanh and Swish only with
/// \p fuseSigmoids (CPUBackendOptions::fuseSigmoids).
bool epilogueRunsFused(const std::string &act, bool fuseSigmoids);

/// Whether the convolution kernels compute \p n, a Convolution or FusedConvolution whose
/// element kinds the operator table accepts: input and filter of rank 4; a FusedConvolution
/// only with \p fuseEpilogues (CPUBackendOptions::fuseEpilogues), an activation
/// epilogueRunsFused, and no residual when it is depthwise (that kernel has none). The
/// int8 convolution's conditions on its operands are CPUSupport.cpp's (int8Operands).
bool convolutionSupported(const Node &n, bool fuseEpilogues, bool fuseSigmoids);

// ---------------------------------------------------------------- the program

/// Where a buffer lives: bufs[base] + offset at run time. base 0 is the constant arena,
/// 1 the activation arena, 2 + k the k-th placeholder of the program.
struct Location {
  unsigned base = 0;
  uint64_t offset = 0;
  bool operator==(const Location &o) const { return base == o.base && offset == o.offset; }
};
constexpr unsigned kConstantBase = 0;
constexpr unsigned kActivationBase = 1;
constexpr unsigned kFirstPlaceholderBase = 2;

/// A buffer of at least \p bytes for a program's constants or activations, 64-byte aligned
/// (free it with std::free), or null. Buffers of 4 MB and more are 2 MB aligned and asked
/// for transparent huge pages: the weights are streamed once per run, and with 4 KB pages
/// every page of them costs a TLB miss.
char *allocArena(uint64_t bytes);

/// A program's constant arena while the emitter packs weights into it: grows in place
/// (on Linux, anonymous memory that mremap extends without copying), new bytes zero,
/// 64-byte aligned. The program takes it over with release(), so the packed weights are
/// in memory once: no doubling while they grow, no final copy.
class ConstantArena {
public:
  ConstantArena() = default;
  ~ConstantArena();
  ConstantArena(const ConstantArena &) = delete;
  ConstantArena &operator=(const ConstantArena &) = delete;

  char *data() { return data_; }
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// Grows to \p bytes (never shrinks); false when the memory cannot be had.
  bool resize(uint64_t bytes);

  /// The memory and its ownership; pass the pointer to freeConstantArena. The arena is
  /// then empty. Never null: an empty arena hands over a minimal allocation.
  struct Released {
    char *data;
    uint64_t mappedBytes;
  };
  Expected<Released> release();

private:
  char *data_ = nullptr;
  uint64_t size_ = 0, capacity_ = 0;
};

/// Frees what ConstantArena::release handed over.
void freeConstantArena(char *data, uint64_t mappedBytes);

/// One step of a compiled program.
using StageFn = void (*)(char **bufs, int64_t tid, int64_t nthreads);
struct Stage {
  StageFn fn = nullptr;
  bool parallel = false;
  std::string name;
  std::string desc; ///< what the stage computes, for profiles (CodegenOptions::profile)
  /// Its operations and bytes (StageWork.h), for the profile's rates.
  double flops = 0, bytes = 0;
};

struct CodegenOptions {
  unsigned threads = 1; ///< intra-op threads the program is compiled for (>= 1)
  /// Records the phases (llvm-irgen, jit) when set; not owned (kiln/Base/Trace.h).
  Tracer *tracer = nullptr;
  JitOptions jit;
  bool fuseElementwise = true;
  /// Inline the GEMM/convolution drivers into each call (constant shapes everywhere);
  /// off by default: the register-blocked micro-kernels are not specialised either way,
  /// and one shared copy of the drivers compiles many times faster.
  bool specializeGemm = false;
  /// Convolutions of small images computed with pixels as GEMM rows (libjit_conv2d_t).
  bool transposedConv = true;
  /// 3x3 stride-1 convolutions computed with Winograd F(4x4, 3x3) (libjit_conv2d_wino)
  /// where that is faster.
  bool winograd = true;
  /// Winograd F(4x4, 3x3) where it is the fastest also below kWino4MinChannels input
  /// channels, where it is outside the error budget (ConvAlgorithmSet::fastWinograd;
  /// backends/CPU/README.md, "Accuracy").
  bool fastWinograd = false;
  /// A constant float32 weight tensor whose every value is a float16 (one the graph step
  /// widen-half-floats made from a float16 constant: a network run in fp16) is held as
  /// float16 in the constant arena, in its kernel's packed layout, by the packed-GEMM and
  /// transposed convolutions (libjit_conv2d_f16w_*, libjit_conv2d_t_f16w_*: not a
  /// transposed layer that keeps a padded copy of its input) and the fully-connected /
  /// MatMul kernels (libjit_fc_f16w_*, libjit_fc_row_f16w_*), which widen it as they load
  /// it and compute as the float32 kernels do: the same results, half the weight bytes.
  /// Other kernels (Winograd, strip, grouped, depthwise) keep float32 weights, and so do
  /// targets without F16C.
  bool halfWeights = true;
  /// With halfWeights, every convolution with such weights holds them so (depthwise ones
  /// aside): Winograd, strip and grouped layers take the packed GEMM, transposed ones go
  /// without their padded input copy.
  bool halfWeightsAllConvs = false;
  /// Every convolution this algorithm can compute is computed with it, whatever the rules
  /// say (convAlgorithmApplies; measurements and tests of each kernel in a network).
  std::optional<ConvAlgorithm> forceConv;
  /// The machine limits the convolution cost model chooses kernels with (ConvCost.h).
  ConvMachine convMachine;
  /// One stage per instruction, so that a profile times each on its own.
  bool profile = false;
  /// Stages call the shared kernels through a table of their addresses in the constant
  /// arena (Program::kernelSlots, filled by generateProgram once the kernels are loaded)
  /// instead of by name. The JIT generates code for the large code model, where the fast
  /// instruction selection of an optnone stage cannot call a global and hands every such
  /// call to SelectionDAG: most of a stage's code generation. A call through a pointer
  /// loaded from the arena is selected fast, and is what SelectionDAG makes of a call in
  /// the large code model anyway (the address in a register, an indirect call). The
  /// kernels' index tables (dims, strides) are read from the arena too. Off for
  /// ahead-of-time bundles, whose constants are a file written before any address is known.
  bool kernelTable = false;
  /// Kernels that read a constant in the graph's own layout read it where the graph
  /// holds it (Program::borrowed) instead of from a copy in the constant arena: the
  /// weights of a one-row fully-connected layer. Off for bundles, whose weights are one
  /// file (the same kernel then reads a plain copy in it).
  bool borrowConstants = true;
  /// Frees the graph's copy of a constant once it is packed into the constant arena for
  /// the one instruction that reads it, when no node outside the compiled function uses
  /// it (its payload becomes a typed view of no memory): the weights are then held once,
  /// in the program's layout. The function can then not be compiled again (codegen
  /// refuses a constant without data). Off by default: the Interpreter and later compiles
  /// read the graph's constants (kiln-run turns it on).
  bool releaseConstants = false;
};

/// A check made by a kernel at run time (a Gather index in range): a failed one writes
/// {id, position, value} into the program's status words, and the run then fails with
/// `before` value " at position " position `after`.
struct RunCheck {
  std::string before, after;
};

/// The process's memcpy among Program::kernelSlots.
constexpr const char *kProcessMemcpy = "memcpy";

/// A compiled function: native code, the constant arena, and the activation arena size.
struct Program {
  /// Native code; shared with other programs compiled from the same LLVM IR (see
  /// generateProgram), which differ only in their constants.
  std::shared_ptr<JitModule> jit;
  bool jitReused = false;   ///< the code came from an earlier compile in this process
  bool jitFromDisk = false; ///< the code was loaded from the kernel cache on disk
  std::vector<Stage> stages;
  /// bufs[kFirstPlaceholderBase + k] is placeholder k's tensor, bound at each run, or
  /// where placeholders[k] is null, borrowed[k]: a constant's payload the program reads
  /// in place (CodegenOptions::borrowConstants). The constant must outlive the program
  /// and keep its values (its Module owns it; the Interpreter reads constants so too).
  std::vector<const Placeholder *> placeholders;
  std::vector<const char *> borrowed; ///< as long as placeholders
  std::vector<bool> placeholderWritten; ///< written by the program
  char *constants = nullptr;                      ///< 64-byte aligned, owned
  uint64_t constantBytes = 0;
  uint64_t constantMappedBytes = 0; ///< for freeConstantArena
  uint64_t activationBytes = 0;
  uint64_t activationPeakBytes = 0; ///< of which activations proper (the rest is scratch)
  unsigned threads = 1;
  bool avx512 = false;
  std::string stats; ///< a short human-readable summary
  /// Byte offset in the activation arena of three int64 status words (-1: no kernel checks
  /// anything at run time), cleared before a run and read after each stage; a nonzero
  /// first word is 1 + the index of the failed check in `checks`.
  int64_t statusOffset = -1;
  std::vector<RunCheck> checks;
  /// The shared kernels the stages call through the constant arena
  /// (CodegenOptions::kernelTable): each one's name (kProcessMemcpy for the process's
  /// memcpy) and the offset of its address there.
  std::vector<std::pair<std::string, uint64_t>> kernelSlots;
  ~Program();
};

/// Compiles \p F, with activations where \p plan puts them (a plan of F that
/// verifyMemoryPlan accepted), for the host. Generated code addresses constants
/// through the program's constant arena, never by value, so a program whose stages have
/// the same LLVM IR as one compiled earlier in this process (the same graph, weights
/// aside, with the same options) reuses that native code instead of running the JIT again;
/// the 32 most recently compiled modules are kept for reuse.
Expected<std::unique_ptr<Program>> generateProgram(IRFunction &F, const MemoryPlan &plan,
                                                   const CodegenOptions &opts);

/// A program emitted as LLVM IR but not compiled yet: generateProgram hands it to the JIT,
/// an ahead-of-time bundle (backends/CPU/bundle) to LLVM's object-file emitter.
struct EmittedProgram {
  /// Stages named (Stage::fn still null), placeholders, constants packed for host.avx512.
  std::unique_ptr<Program> prog;
  std::unique_ptr<llvm::LLVMContext> ctx;
  /// The stage functions (`entries`) over the lazily loaded kernel library.
  std::unique_ptr<llvm::Module> module;
  std::vector<std::string> entries;
  /// Kernels the program calls that the JIT compiles once per process and calls by
  /// address (getSharedKernels) rather than compiling them into the program's module.
  std::vector<std::string> sharedKernels;
  /// The target (JitOptions::targetCpu or the host).
  HostInfo host;
  unsigned fusedLoops = 0, fusedInstrs = 0;
  unsigned sharedLoops = 0; ///< of the fused loops, those that call a shared loop kernel
  EmittedProgram();
  EmittedProgram(EmittedProgram &&);
  ~EmittedProgram();
};

/// The first half of generateProgram: \p F as LLVM IR for the target of \p opts.jit.
Expected<EmittedProgram> emitProgram(IRFunction &F, const MemoryPlan &plan,
                                     const CodegenOptions &opts);

/// Modules in the reuse cache, and how many compiles reused one (for tests and stats).
struct JitCacheStats {
  size_t entries = 0;
  size_t hits = 0;
};
JitCacheStats getJitCacheStats();

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_CODEGEN_CODEGEN_H
