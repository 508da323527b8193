#include "CPUBackend.h"

#include "ThreadPool.h"
#include "WidenHalfFloats.h"
#include "codegen/Codegen.h"
#include "kiln/Graph/Graph.h"
#include "kiln/Memory/MemoryPipeline.h"
#include "kiln/Passes/IR/IRPasses.h"
#include "kiln/Passes/Pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>
#include <set>

namespace kiln::cpu {

KILN_REGISTER_BACKEND(CPUBackend, "CPU");

namespace {

/// The CPU's graph pipeline fuses residual Adds and activations into the GEMM-based nodes
/// (fuse-activations; which ones is decided by isOpSupported).
[[maybe_unused]] const bool kPipelineRegistered = [] {
  registerBackendPipeline("CPU", getFusingPipeline);
  return true;
}();

/// Pools are shared by thread count and spin bounds: many compiled functions, few threads.
std::shared_ptr<ThreadPool> getPool(unsigned threads, unsigned spinMicros, unsigned stageSpin) {
  static std::mutex m;
  static std::map<std::tuple<unsigned, unsigned, unsigned>, std::weak_ptr<ThreadPool>> pools;
  std::lock_guard<std::mutex> l(m);
  auto &w = pools[{threads, spinMicros, stageSpin}];
  if (auto p = w.lock())
    return p;
  auto p = std::make_shared<ThreadPool>(threads, spinMicros, stageSpin);
  w = p;
  return p;
}

/// Writes a dump of function \p fn to \p path ("-": stderr); the first dump to a path in
/// this process truncates the file, later ones append.
Error writeDump(const std::string &path, const std::string &fn, const std::string &text) {
  std::string header = "; ---- CPU backend, function '" + fn + "'\n";
  if (path == "-") {
    std::fputs(header.c_str(), stderr);
    std::fputs(text.c_str(), stderr);
    return Error::success();
  }
  static std::mutex m;
  static std::set<std::string> written;
  std::lock_guard<std::mutex> l(m);
  bool first = written.insert(path).second;
  FILE *f = std::fopen(path.c_str(), first ? "w" : "a");
  if (!f)
    return makeError(ErrorCode::InvalidArgument, "CPU backend: cannot write '", path, "'");
  std::fputs(header.c_str(), f);
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return Error::success();
}

/// With release-constants: frees the payload of each module constant that no node of any
/// function reads any more (what the graph passes replaced: a filter a fold copied, an
/// operand the Interpreter folded into a new constant). Nothing can read them, and without
/// this the module held them to the end. They keep their type and no memory, as packed
/// ones do (Emitter::releaseIfPacked).
void releaseUnreadConstants(Module &m) {
  for (const auto &c : m.getConstants()) {
    Tensor &t = c->getPayloadMutable();
    if (!c->hasUsers() && t.isOwning())
      t = Tensor::view(t.getType(), nullptr);
  }
}

} // namespace

std::string CPUBackendOptions::defaultKernelCacheDir() {
  static const std::string dir = [] {
    if (const char *d = std::getenv("KILN_CPU_CACHE_DIR"))
      return std::string(d);
    if (const char *x = std::getenv("XDG_CACHE_HOME"))
      return std::string(x) + "/kiln-cpu";
    if (const char *h = std::getenv("HOME"))
      return std::string(h) + "/.cache/kiln-cpu";
    return std::string();
  }();
  return dir;
}

std::vector<BackendParameter> getCPUBackendParameters() {
  return {
      {"spin-us", "N", "microseconds the pool's threads spin before they block"},
      {"stage-spin-us", "N",
       "microseconds they spin between the stages of a run (at least spin-us)"},
      {"avx512", "0|1", "0: the AVX2 kernels and target even on an AVX-512 host"},
      {"vector-width", "N", "preferred bits per auto-vectorised loop (0: the host's)"},
      {"fuse-elementwise", "0|1", "fuse chains of element-wise instructions into one loop"},
      {"optimize-ir", "0|1", "memory-aware order and the IR passes before codegen"},
      {"specialize-gemm", "0|1", "inline the GEMM/convolution drivers per call"},
      {"half-weights", "0|1|all",
       "fp16 networks: weights held as float16 in the constant arena and widened as they are "
       "loaded; 1 by the packed-GEMM and unpadded transposed convolutions and the "
       "fully-connected layers (other kernels keep float32), all: every non-depthwise "
       "convolution (Winograd, strip and grouped ones take the packed GEMM), 0: float32"},
      {"winograd", "0|1|fast",
       "Winograd 3x3 convolutions where they pay, within the error budget: 1 F(2x2), and "
       "F(4x4) from 512 input channels; fast F(4x4) on fewer channels too (faster, up to "
       "2.3x the error per layer)"},
      {"transposed-conv", "0|1", "pixels-as-rows GEMM convolutions for small images"},
      {"conv-algorithm", "NAME",
       "compute every convolution it applies to with this kernel (conv_wino, conv_wino4r, "
       "conv_wino2, convT, convS, conv, conv_dw, conv_grp)"},
      {"dump-llvm-ir", "PATH", "write the optimised LLVM IR (- is stderr)"},
      {"dump-asm", "PATH", "write the host assembly (- is stderr)"},
      {"keep-ir", "0|1", "keep the LLVM IR and assembly in the compiled function"},
      {"profile", "0|1", "time every stage (CompiledFunction::getProfile)"},
      {"jit-times", "0|1", "print the JIT's time per module and phase to stderr"},
      {"cache-dir", "PATH", "on-disk kernel cache (off: none)"},
      {"release-constants", "0|1",
       "1: free the graph's copy of each weight once packed for the program (the function "
       "cannot be compiled again)"},
      {"prebuilt-kernels", "0|1",
       "1: the shared kernels compiled when Kiln was built; 0: JIT-compile them for this CPU"},
  };
}

Expected<CPUBackendOptions> parseCPUBackendOptions(const CompileOptions &opts,
                                                   CPUBackendOptions o) {
  KILN_RETURN_IF_ERR(checkBackendOptions("CPU", opts, getCPUBackendParameters()));
  for (const auto &[k, v] : opts.backendOptions) {
    auto flag = [&, k = k, v = v](bool &out) -> Error {
      KILN_ASSIGN_OR_RETURN(out, parseBoolParameter(k, v));
      return Error::success();
    };
    auto number = [&, k = k, v = v](unsigned &out) -> Error {
      KILN_ASSIGN_OR_RETURN(out, parseUnsignedParameter(k, v));
      return Error::success();
    };
    if (k == "spin-us" || k == "stage-spin-us") {
      KILN_RETURN_IF_ERR(number(k == "spin-us" ? o.spinMicros : o.stageSpinMicros));
    } else if (k == "avx512") {
      bool on = true;
      KILN_RETURN_IF_ERR(flag(on));
      o.disableAvx512 = !on;
    } else if (k == "vector-width") {
      KILN_RETURN_IF_ERR(number(o.preferVectorWidth));
      if (o.preferVectorWidth && o.preferVectorWidth != 128 && o.preferVectorWidth != 256 &&
          o.preferVectorWidth != 512)
        return makeError(ErrorCode::InvalidArgument, "backend option 'vector-width': bad value '",
                         v, "' (expected 0, 128, 256 or 512)");
    } else if (k == "fuse-elementwise") {
      KILN_RETURN_IF_ERR(flag(o.fuseElementwise));
    } else if (k == "optimize-ir") {
      KILN_RETURN_IF_ERR(flag(o.optimizeIR));
    } else if (k == "specialize-gemm") {
      KILN_RETURN_IF_ERR(flag(o.specializeGemm));
    } else if (k == "winograd") {
      // 0: none; 1: F(2x2, 3x3) only (within the error budget); fast: F(4x4, 3x3) too.
      bool on = v == "1" || v == "true" || v == "on";
      o.fastWinograd = v == "fast";
      if (!on && !o.fastWinograd && v != "0" && v != "false" && v != "off")
        return makeError(ErrorCode::InvalidArgument, "backend option 'winograd': bad value '", v,
                         "' (expected 0, 1 or fast)");
      o.winograd = on || o.fastWinograd;
    } else if (k == "half-weights") {
      bool all = v == "all";
      bool on = all || v == "1" || v == "true" || v == "on";
      if (!on && v != "0" && v != "false" && v != "off")
        return makeError(ErrorCode::InvalidArgument, "backend option 'half-weights': bad value '",
                         v, "' (expected 0, 1 or all)");
      o.halfWeights = on;
      o.halfWeightsAllConvs = all;
    } else if (k == "transposed-conv") {
      KILN_RETURN_IF_ERR(flag(o.transposedConv));
    } else if (k == "conv-algorithm") {
      o.forceConv = parseConvAlgorithmName(v);
      if (!o.forceConv)
        return makeError(ErrorCode::InvalidArgument, "backend option 'conv-algorithm': bad value '",
                         v, "' (expected conv_wino, conv_wino4r, conv_wino2, convT, convS, conv, "
                            "conv_dw or conv_grp)");
    } else if (k == "keep-ir") {
      KILN_RETURN_IF_ERR(flag(o.keepIR));
      o.keepAsm = o.keepIR;
    } else if (k == "profile") {
      KILN_RETURN_IF_ERR(flag(o.profile));
    } else if (k == "jit-times") {
      KILN_RETURN_IF_ERR(flag(o.jitTimes));
    } else if (k == "prebuilt-kernels") {
      KILN_RETURN_IF_ERR(flag(o.prebuiltKernels));
    } else if (k == "release-constants") {
      KILN_RETURN_IF_ERR(flag(o.releaseConstants));
    } else if (k == "dump-llvm-ir" || k == "dump-asm" || k == "cache-dir") {
      if (v.empty())
        return makeError(ErrorCode::InvalidArgument, "backend option '", k,
                         "': expected a path");
      (k == "dump-llvm-ir" ? o.dumpLLVMIR : k == "dump-asm" ? o.dumpAsm : o.cacheDir) = v;
    }
  }
  return o;
}

bool CPUBackend::shouldLower(const Node &node) const {
  // Lower only what the kernels cannot run as it is: every kind the CPU column of the
  // operator table claims (FullyConnected, BatchNormalization, LayerNormalization, the
  // activations, grouped convolutions, BatchMatMul, Broadcast, Tile, Pad, ...) has a kernel
  // that beats its lowered form, and splitting it would only cost time and memory.
  return !isOpSupported(node);
}

BackendCompileSpec CPUBackend::getCompileSpec(const CompileOptions &opts) const {
  // A bad parameter is reported by generateCode; the spec then follows the defaults.
  Expected<CPUBackendOptions> parsed = parseCPUBackendOptions(opts, opts_);
  bool optimizeIR = parsed ? parsed->optimizeIR : opts_.optimizeIR;
  BackendCompileSpec spec;
  // Float16 and BFloat16 nodes the kernels do not run as they stand compute on float32
  // between ConvertTos (the table's rule: computed in float, rounded once per operator).
  // bf16 FullyConnected / MatMul run natively only with AVX512_BF16 in this compile's ISA
  // (not under avx512=0).
  const bool noAvx512 = parsed ? parsed->disableAvx512 : opts_.disableAvx512;
  spec.graphSteps.push_back({"widen-half-floats", [this, noAvx512](Function *f) {
                               return widenHalfFloats(f, [this, noAvx512](const Node &n) {
                                 return (!isNativelySupported(n) || (noAvx512 && isBf16Gemm(n))) &&
                                        isOpSupported(n);
                               });
                             }});
  // By default a memory-aware node order and the default IR pipeline (a Concat's operands
  // become views of its result, copies into saved results disappear, element-wise results
  // share dead buffers), so the plan has less to hold and less to copy; off: topological
  // order and the IR as IRGen wrote it. The generic CompileOptions::optimizeIR does not
  // apply. The plan is always static.
  spec.memoryAwareSchedule = optimizeIR;
  if (optimizeIR)
    spec.irPasses = getDefaultIRPipeline();
  spec.staticPlan = true;
  spec.alignment = 64; // the kernels' vector alignment (codegen's kAlign)
  // A fused epilogue reads its residual while blocked GEMMs write partial sums to the
  // destination: the two must not share bytes.
  spec.needsOwnBuffer = [](const Instruction &I) {
    return isa<FusedConvolutionInst>(&I) || isa<FusedFullyConnectedInst>(&I);
  };
  return spec;
}

CodegenOptions getCodegenOptions(const CPUBackendOptions &o, const CompileOptions &opts) {
  CodegenOptions co;
  co.threads = opts.threads ? opts.threads : ThreadPool::hardwareThreads();
  co.jit.keepIR = o.keepIR || !o.dumpLLVMIR.empty();
  co.jit.keepAsm = o.keepAsm || !o.dumpAsm.empty();
  co.jit.disableAvx512 = o.disableAvx512;
  co.jit.preferVectorWidth = o.preferVectorWidth;
  co.jit.times = o.jitTimes;
  co.jit.cacheDir = o.cacheDir == "off" || o.cacheDir == "0" ? "" : o.cacheDir;
  co.jit.prebuilt = o.prebuiltKernels;
  co.fuseElementwise = o.fuseElementwise;
  co.specializeGemm = o.specializeGemm;
  co.winograd = o.winograd;
  co.fastWinograd = o.fastWinograd;
  co.transposedConv = o.transposedConv;
  co.halfWeights = o.halfWeights;
  co.halfWeightsAllConvs = o.halfWeightsAllConvs;
  co.forceConv = o.forceConv;
  co.profile = o.profile;
  co.releaseConstants = o.releaseConstants;
  co.tracer = opts.tracer;
  return co;
}

Expected<std::unique_ptr<CompiledFunction>>
CPUBackend::generateCode(Function *f, PlannedIR &P, const CompileOptions &opts) const {
  KILN_ASSIGN_OR_RETURN(CPUBackendOptions o, parseCPUBackendOptions(opts, opts_));
  IRFunction &F = *P.F;
  if (!P.planned)
    return makeError(ErrorCode::InvalidArgument, "CPU backend: function '", f->getName(),
                     "' comes without a memory plan");
  // The compile driver verified the plan it made; one handed in another way is checked
  // here, so every plan the CPU compiles from has passed the verifier.
  if (Error e = verifyMemoryPlan(F, P.plan))
    return std::move(e).addContext("CPU backend compiling '" + f->getName() + "'");
  CodegenOptions co = getCodegenOptions(o, opts);
  if (co.releaseConstants && f->getParent())
    releaseUnreadConstants(*f->getParent());
  Expected<std::unique_ptr<Program>> prog = generateProgram(F, P.plan, co);
  if (!prog)
    return prog.takeError().addContext("CPU backend compiling '" + f->getName() + "'");
  if (!o.dumpLLVMIR.empty())
    KILN_RETURN_IF_ERR(writeDump(o.dumpLLVMIR, f->getName(), (*prog)->jit->getIR()));
  if (!o.dumpAsm.empty())
    KILN_RETURN_IF_ERR(writeDump(o.dumpAsm, f->getName(), (*prog)->jit->getAsm()));
  std::shared_ptr<ThreadPool> pool = getPool(co.threads, o.spinMicros, o.stageSpinMicros);
  return std::unique_ptr<CompiledFunction>(
      new CPUFunction(std::move(prog).get(), pool, o.profile));
}

CPUFunction::CPUFunction(std::unique_ptr<Program> prog, std::shared_ptr<ThreadPool> pool,
                         bool profile)
    : prog_(std::move(prog)), pool_(std::move(pool)), profileOn_(profile) {}

CPUFunction::~CPUFunction() {
  for (char *a : arenas_)
    std::free(a);
}

std::vector<StageTiming> CPUFunction::getProfile() const {
  std::lock_guard<std::mutex> l(arenasMutex_);
  std::vector<StageTiming> out;
  for (size_t i = 0; i < profile_.size(); i++) {
    const Stage &s = prog_->stages[i];
    const TraceSummary &k = profile_[i];
    StageTiming t;
    t.name = std::string(s.parallel ? "P " : "S ") + s.desc;
    t.runs = k.count;
    t.meanMs = k.count ? double(k.sumNs) / double(k.count) * 1e-6 : 0.0;
    t.minMs = k.count ? double(k.minNs) * 1e-6 : 0.0;
    t.flops = s.flops;
    t.bytes = s.bytes;
    t.threads = s.parallel ? std::max(1u, prog_->threads) : 1u;
    out.push_back(std::move(t));
  }
  return out;
}

void CPUFunction::addToProfile(const std::vector<TraceEvent> &events) {
  // The profile is the kernel events of every run but the first, summed per stage: event
  // i of a run is stage i (names repeat: two stages may compute alike).
  std::lock_guard<std::mutex> l(arenasMutex_);
  if (!profileWarm_) {
    profileWarm_ = true;
    profile_.assign(events.size(), TraceSummary{});
    for (size_t i = 0; i < events.size(); i++)
      profile_[i].name = events[i].name;
    return;
  }
  for (size_t i = 0; i < events.size() && i < profile_.size(); i++) {
    TraceSummary &p = profile_[i];
    int64_t d = events[i].durNs;
    p.minNs = p.count ? std::min(p.minNs, d) : d;
    p.count++;
    p.sumNs += d;
  }
}

const std::string &CPUFunction::getIR() const { return prog_->jit->getIR(); }
const std::string &CPUFunction::getAsm() const { return prog_->jit->getAsm(); }
const std::string &CPUFunction::getStats() const { return prog_->stats; }
uint64_t CPUFunction::getActivationBytes() const { return prog_->activationBytes; }
uint64_t CPUFunction::getConstantBytes() const { return prog_->constantBytes; }

char *CPUFunction::takeArena() {
  {
    std::lock_guard<std::mutex> l(arenasMutex_);
    if (!arenas_.empty()) {
      char *a = arenas_.back();
      arenas_.pop_back();
      return a;
    }
  }
  return allocArena(prog_->activationBytes);
}

void CPUFunction::returnArena(char *a) {
  std::lock_guard<std::mutex> l(arenasMutex_);
  arenas_.push_back(a);
}

Error CPUFunction::bindBuffers(ExecutionContext &ctx, std::vector<char *> &bufs) const {
  PlaceholderBindings *b = ctx.getBindings();
  if (!b)
    return makeError(ErrorCode::InvalidArgument, "execute: no placeholder bindings");
  bufs.assign(kFirstPlaceholderBase + prog_->placeholders.size(), nullptr);
  bufs[kConstantBase] = prog_->constants;
  for (size_t k = 0; k < prog_->placeholders.size(); k++) {
    const Placeholder *ph = prog_->placeholders[k];
    if (!ph) { // a constant read in place (Program::borrowed)
      bufs[kFirstPlaceholderBase + k] = const_cast<char *>(prog_->borrowed[k]);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Tensor * t, b->getChecked(ph));
    bufs[kFirstPlaceholderBase + k] = t->getUnsafePtr();
  }
  return Error::success();
}

namespace {

/// The kernel events of one run, one per stage, for a trace that asks for them and for the
/// profile (profile=1). A parallel stage's event says how late its last share started, how
/// long the caller waited for the other shares after its own, how many it took over and how
/// many ran on the caller's CPU (ThreadPool::RunTimes).
class StageEvents {
public:
  StageEvents(Tracer *tracer, uint32_t pid, size_t stages) : tracer_(tracer), pid_(pid) {
    events_.reserve(stages);
  }
  int64_t now() const {
    return tracer_ ? tracer_->nowNs()
                   : int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
  }
  void add(const Stage &s, int64_t t0, const ThreadPool::RunTimes *pool) {
    TraceEvent e;
    e.name = s.desc;
    e.category = "kernel";
    e.pid = pid_;
    e.startNs = t0;
    e.durNs = now() - t0;
    e.args.push_back({"parallel", pool ? "1" : "0", true});
    if (pool) {
      e.args.push_back({"late_ns", std::to_string(pool->lateNs), true});
      e.args.push_back({"wait_ns", std::to_string(pool->waitNs), true});
      e.args.push_back({"taken_over", std::to_string(pool->takenOver), true});
      e.args.push_back({"same_cpu", std::to_string(pool->sameCpu), true});
    }
    events_.push_back(std::move(e));
  }
  std::vector<TraceEvent> &events() { return events_; }

private:
  Tracer *tracer_;
  uint32_t pid_;
  std::vector<TraceEvent> events_;
};

} // namespace

Error CPUFunction::statusError(const int64_t *status) const {
  size_t check = size_t(status[0] - 1);
  int64_t position = status[1], value = status[2];
  if (check >= prog_->checks.size())
    return makeError(ErrorCode::Internal, "CPU backend: unknown run-time check ", status[0]);
  const RunCheck &c = prog_->checks[check];
  return makeError(ErrorCode::InvalidArgument, c.before, value, " at position ", position,
                   c.after);
}

Error CPUFunction::execute(ExecutionContext &ctx) {
  std::vector<char *> bufs;
  KILN_RETURN_IF_ERR(bindBuffers(ctx, bufs));
  char *arena = takeArena();
  if (!arena)
    return makeError(ErrorCode::OutOfMemory, "CPU backend: cannot allocate ",
                     prog_->activationBytes, " bytes of activations");
  bufs[kActivationBase] = arena;
  // Kernels that check their inputs (Gather's indices) report through the status words.
  int64_t *status = prog_->statusOffset >= 0
                        ? reinterpret_cast<int64_t *>(arena + prog_->statusOffset)
                        : nullptr;
  if (status)
    status[0] = status[1] = status[2] = 0;
  char **bp = bufs.data();
  unsigned nth = pool_->size();
  ThreadPool::RunScope running(*pool_);
  Tracer *tracer = ctx.getTracer() && ctx.getTracer()->kernels() ? ctx.getTracer() : nullptr;
  const bool record = tracer || profileOn_;
  StageEvents events(tracer, ctx.getTracePid(), record ? prog_->stages.size() : 0);
  // One task for every parallel stage, which it reads from `current`: no std::function
  // (and no allocation) per stage.
  StageFn current = nullptr;
  const std::function<void(unsigned)> task = [&current, bp, nth](unsigned tid) {
    current(bp, int64_t(tid), int64_t(nth));
  };
  ThreadPool::RunTimes times;
  for (const Stage &s : prog_->stages) {
    int64_t t0 = record ? events.now() : 0;
    bool par = s.parallel && nth > 1;
    if (par) {
      current = s.fn;
      pool_->run(task, record ? &times : nullptr);
    } else {
      s.fn(bp, 0, 1);
    }
    if (record)
      events.add(s, t0, par ? &times : nullptr);
    if (status && status[0]) {
      Error e = statusError(status);
      returnArena(arena);
      return e;
    }
  }
  if (profileOn_)
    addToProfile(events.events());
  if (tracer)
    tracer->append(std::move(events.events()));
  returnArena(arena);
  return Error::success();
}

} // namespace kiln::cpu
