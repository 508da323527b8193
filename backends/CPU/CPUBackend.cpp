#include "CPUBackend.h"

#include "ThreadPool.h"
#include "codegen/Codegen.h"
#include "kiln/Memory/MemoryPipeline.h"
#include "kiln/Passes/IR/IRPasses.h"
#include "kiln/Passes/Pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
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
} // namespace

namespace {

/// Pools are shared by thread count and spin bound: many compiled functions, few threads.
std::shared_ptr<ThreadPool> getPool(unsigned threads, unsigned spinMicros) {
  static std::mutex m;
  static std::map<std::pair<unsigned, unsigned>, std::weak_ptr<ThreadPool>> pools;
  std::lock_guard<std::mutex> l(m);
  auto &w = pools[{threads, spinMicros}];
  if (auto p = w.lock())
    return p;
  auto p = std::make_shared<ThreadPool>(threads, spinMicros);
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

} // namespace

bool CPUBackend::shouldLower(const Node &node) const {
  switch (node.getKind()) {
  case NodeKind::FullyConnected:
  case NodeKind::BatchNormalization:
  case NodeKind::Relu:
  case NodeKind::Sigmoid:
  case NodeKind::Tanh:
  case NodeKind::Gelu:
  case NodeKind::Swish:
  case NodeKind::HardSwish:
  case NodeKind::LeakyRelu:
  case NodeKind::Clip:
  case NodeKind::SoftMax:
  case NodeKind::LogSoftMax:
  case NodeKind::LayerNormalization:
    return false;
  default:
    // Lower only what the kernels cannot run as it is: grouped and depthwise convolutions,
    // BatchMatMul, Broadcast, Tile and Pad all have direct kernels, and splitting them
    // (per group, per batch, into copies) would only cost time and memory.
    return !isOpSupported(node);
  }
}

BackendCompileSpec CPUBackend::getCompileSpec(const CompileOptions &opts) const {
  (void)opts;
  BackendCompileSpec spec;
  // By default a memory-aware node order and the default IR pipeline (a Concat's operands
  // become views of its result, copies into saved results disappear, element-wise results
  // share dead buffers), so the plan has less to hold and less to copy; off: topological
  // order and the IR as IRGen wrote it. The generic CompileOptions::optimizeIR does not
  // apply. The plan is always static.
  spec.memoryAwareSchedule = opts_.optimizeIR;
  if (opts_.optimizeIR)
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

Expected<std::unique_ptr<CompiledFunction>>
CPUBackend::generateCode(Function *f, PlannedIR &P, const CompileOptions &opts) const {
  IRFunction &F = *P.F;
  if (!P.planned)
    return makeError(ErrorCode::InvalidArgument, "CPU backend: function '", f->getName(),
                     "' comes without a memory plan");
  // The compile driver verified the plan it made; one handed in another way is checked
  // here, so every plan the CPU compiles from has passed the verifier.
  if (Error e = verifyMemoryPlan(F, P.plan))
    return std::move(e).addContext("CPU backend compiling '" + f->getName() + "'");
  CodegenOptions co;
  co.threads = opts.threads ? opts.threads : ThreadPool::hardwareThreads();
  co.jit.keepIR = opts_.keepIR || !opts.dumpLLVMIR.empty();
  co.jit.keepAsm = opts_.keepAsm || !opts.dumpAsm.empty();
  co.jit.disableAvx512 = opts_.disableAvx512;
  co.jit.preferVectorWidth = opts_.preferVectorWidth;
  co.fuseElementwise = opts_.fuseElementwise;
  co.specializeGemm = opts_.specializeGemm;
  Expected<std::unique_ptr<Program>> prog = generateProgram(F, P.plan, co);
  if (!prog)
    return prog.takeError().addContext("CPU backend compiling '" + f->getName() + "'");
  if (!opts.dumpLLVMIR.empty())
    KILN_RETURN_IF_ERR(writeDump(opts.dumpLLVMIR, f->getName(), (*prog)->jit->getIR()));
  if (!opts.dumpAsm.empty())
    KILN_RETURN_IF_ERR(writeDump(opts.dumpAsm, f->getName(), (*prog)->jit->getAsm()));
  std::shared_ptr<ThreadPool> pool = getPool(co.threads, opts_.spinMicros);
  return std::unique_ptr<CompiledFunction>(new CPUFunction(std::move(prog).get(), pool));
}

CPUFunction::CPUFunction(std::unique_ptr<Program> prog, std::shared_ptr<ThreadPool> pool)
    : prog_(std::move(prog)), pool_(std::move(pool)) {}

CPUFunction::~CPUFunction() {
  for (char *a : arenas_)
    std::free(a);
  if (!profile_.empty()) {
    double total = 0;
    for (double t : profile_)
      total += t;
    std::vector<size_t> order(profile_.size());
    for (size_t i = 0; i < order.size(); i++)
      order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return profileMin_[a] > profileMin_[b]; });
    double minTotal = 0;
    for (double t : profileMin_)
      minTotal += t;
    std::fprintf(stderr, "CPU profile: %zu stages, %llu runs, %.3f ms per run (sum of minima %.3f ms)\n",
                 profile_.size(), (unsigned long long)profileRuns_,
                 total / double(std::max<uint64_t>(profileRuns_, 1)), minTotal);
    std::fprintf(stderr, "   mean ms    min ms\n");
    for (size_t i : order)
      std::fprintf(stderr, "  %8.3f  %8.3f %5.1f%%  %s %s\n",
                   profile_[i] / double(std::max<uint64_t>(profileRuns_, 1)), profileMin_[i],
                   100.0 * profileMin_[i] / std::max(minTotal, 1e-9),
                   prog_->stages[i].parallel ? "P" : "S", prog_->stages[i].desc.c_str());
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

Error CPUFunction::execute(ExecutionContext &ctx) {
  PlaceholderBindings *b = ctx.getBindings();
  if (!b)
    return makeError(ErrorCode::InvalidArgument, "execute: no placeholder bindings");
  std::vector<char *> bufs(kFirstPlaceholderBase + prog_->placeholders.size());
  bufs[kConstantBase] = prog_->constants;
  for (size_t k = 0; k < prog_->placeholders.size(); k++) {
    const Placeholder *ph = prog_->placeholders[k];
    KILN_ASSIGN_OR_RETURN(Tensor * t, b->getChecked(ph));
    bufs[kFirstPlaceholderBase + k] = t->getUnsafePtr();
  }
  char *arena = takeArena();
  if (!arena)
    return makeError(ErrorCode::OutOfMemory, "CPU backend: cannot allocate ",
                     prog_->activationBytes, " bytes of activations");
  bufs[kActivationBase] = arena;
  char **bp = bufs.data();
  unsigned nth = pool_->size();
  static const bool profile = std::getenv("KILN_CPU_PROFILE") != nullptr;
  std::vector<double> times;
  if (profile)
    times.resize(prog_->stages.size());
  for (size_t i = 0; i < prog_->stages.size(); i++) {
    const Stage &s = prog_->stages[i];
    auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    if (s.parallel && nth > 1) {
      StageFn fn = s.fn;
      pool_->run([fn, bp, nth](unsigned tid) { fn(bp, int64_t(tid), int64_t(nth)); });
    } else {
      s.fn(bp, 0, 1);
    }
    if (profile)
      times[i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  if (profile) {
    std::lock_guard<std::mutex> l(arenasMutex_);
    if (profile_.empty()) {
      profile_.assign(times.size(), 0.0);
      profileMin_.assign(times.size(), 1e300);
    } else {
      for (size_t i = 0; i < times.size(); i++) {
        profile_[i] += times[i];
        profileMin_[i] = std::min(profileMin_[i], times[i]);
      }
      profileRuns_++;
    }
  }
  returnArena(arena);
  return Error::success();
}

} // namespace kiln::cpu
