#include "CPUBackend.h"

#include "ThreadPool.h"
#include "codegen/Codegen.h"

#include <cstdlib>
#include <map>

namespace kiln::cpu {

KILN_REGISTER_BACKEND(CPUBackend, "CPU");

namespace {

/// Pools are shared by thread count: many compiled functions, few threads.
std::shared_ptr<ThreadPool> getPool(unsigned threads) {
  static std::mutex m;
  static std::map<unsigned, std::weak_ptr<ThreadPool>> pools;
  std::lock_guard<std::mutex> l(m);
  auto &w = pools[threads];
  if (auto p = w.lock())
    return p;
  auto p = std::make_shared<ThreadPool>(threads);
  w = p;
  return p;
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
    return true;
  }
}

Expected<std::unique_ptr<CompiledFunction>> CPUBackend::compile(Function *f,
                                                                const CompileOptions &opts) const {
  KILN_RETURN_IF_ERR(checkAllNodesSupported(*f));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<IRFunction> F, generateIR(f));
  CodegenOptions co;
  co.threads = opts.threads ? opts.threads : ThreadPool::hardwareThreads();
  co.jit.keepIR = opts_.keepIR;
  co.jit.keepAsm = opts_.keepAsm;
  co.jit.disableAvx512 = opts_.disableAvx512;
  co.jit.preferVectorWidth = opts_.preferVectorWidth;
  co.fuseEpilogues = opts_.fuseEpilogues;
  co.fuseElementwise = opts_.fuseElementwise;
  co.specializeGemm = opts_.specializeGemm;
  Expected<std::unique_ptr<Program>> prog = generateProgram(*F, co);
  if (!prog)
    return prog.takeError().addContext("CPU backend compiling '" + f->getName() + "'");
  std::shared_ptr<ThreadPool> pool = getPool(co.threads);
  return std::unique_ptr<CompiledFunction>(new CPUFunction(std::move(prog).get(), pool));
}

CPUFunction::CPUFunction(std::unique_ptr<Program> prog, std::shared_ptr<ThreadPool> pool)
    : prog_(std::move(prog)), pool_(std::move(pool)) {}

CPUFunction::~CPUFunction() {
  for (char *a : arenas_)
    std::free(a);
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
  uint64_t bytes = (std::max<uint64_t>(prog_->activationBytes, 64) + 63) / 64 * 64;
  return static_cast<char *>(std::aligned_alloc(64, bytes));
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
    Tensor *t = b->get(ph);
    if (!t)
      return makeError(ErrorCode::InvalidArgument, "placeholder '", ph->getName(), "' of type ",
                       ph->getType()->toString(), " is not bound to a tensor");
    if (t->getType() != *ph->getType())
      return makeError(ErrorCode::InvalidArgument, "placeholder '", ph->getName(),
                       "' expects a tensor of type ", ph->getType()->toString(),
                       " but is bound to ", t->getType().toString());
    bufs[kFirstPlaceholderBase + k] = t->getUnsafePtr();
  }
  char *arena = takeArena();
  if (!arena)
    return makeError(ErrorCode::OutOfMemory, "CPU backend: cannot allocate ",
                     prog_->activationBytes, " bytes of activations");
  bufs[kActivationBase] = arena;
  char **bp = bufs.data();
  unsigned nth = pool_->size();
  for (const Stage &s : prog_->stages) {
    if (s.parallel && nth > 1) {
      StageFn fn = s.fn;
      pool_->run([fn, bp, nth](unsigned tid) { fn(bp, int64_t(tid), int64_t(nth)); });
    } else {
      s.fn(bp, 0, 1);
    }
  }
  returnArena(arena);
  return Error::success();
}

} // namespace kiln::cpu
