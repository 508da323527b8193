#include "Interpreter.h"

#include "kiln/Base/Trace.h"
#include "kiln/Memory/MemoryPipeline.h"

#include <cstring>

#include <glog/logging.h>

namespace kiln {

KILN_REGISTER_BACKEND(InterpreterBackend, "Interpreter");

BackendCompileSpec InterpreterBackend::getCompileSpec(const CompileOptions &opts) const {
  BackendCompileSpec spec;
  spec.memoryAwareSchedule = opts.optimizeIR;
  if (opts.optimizeIR)
    spec.irPasses = getDefaultIRPipeline();
  spec.staticPlan = opts.staticMemoryPlan;
  return spec;
}

Expected<std::unique_ptr<CompiledFunction>>
InterpreterBackend::generateCode(Function *f, PlannedIR &P, const CompileOptions &opts) const {
  (void)f;
  (void)opts;
  std::unique_ptr<MemoryPlan> plan;
  if (P.planned)
    plan = std::make_unique<MemoryPlan>(std::move(P.plan));
  return std::unique_ptr<CompiledFunction>(new InterpreterFunction(std::move(P.F), std::move(plan)));
}

namespace {

AlignedBytes allocAligned(uint64_t bytes, uint64_t alignment) {
  uint64_t n = std::max<uint64_t>(alignment, (bytes + alignment - 1) / alignment * alignment);
  auto *p = static_cast<char *>(std::aligned_alloc(alignment, n));
  CHECK(p) << "Interpreter: cannot allocate " << n << " bytes for a memory plan";
  return AlignedBytes(p);
}

} // namespace

InterpreterFunction::InterpreterFunction(std::unique_ptr<IRFunction> F,
                                         std::unique_ptr<MemoryPlan> plan)
    : F_(std::move(F)), plan_(std::move(plan)) {
  if (!plan_)
    return;
  for (const PlannedBuffer &b : plan_->buffers)
    offsets_[b.value] = b.offset;
  constants_ = allocAligned(plan_->constantBytes, plan_->alignment);
  for (const auto &w : F_->getWeights())
    if (auto *c = dyn_cast<Constant>(w->getOrigin()))
      std::memcpy(constants_.get() + offsets_.at(w.get()), c->getPayload().getUnsafePtr(),
                  c->getPayload().getSizeInBytes());
}

Error InterpreterFunction::execute(ExecutionContext &ctx) {
  if (!ctx.getBindings())
    return makeError(ErrorCode::InvalidArgument, "execute: no placeholder bindings");
  Tracer *tracer = ctx.getTracer() && ctx.getTracer()->kernels() ? ctx.getTracer() : nullptr;
  if (plan_)
    return executePlanned(*ctx.getBindings(), tracer, ctx.getTracePid());
  InterpreterRun run(*F_);
  return run.run(*ctx.getBindings(), tracer, ctx.getTracePid());
}

Error InterpreterFunction::executePlanned(PlaceholderBindings &bindings, Tracer *tracer,
                                          uint32_t pid) {
  AlignedBytes mutables = allocAligned(plan_->mutableBytes, plan_->alignment);
  AlignedBytes activations = allocAligned(plan_->activationBytes, plan_->alignment);
  // All ones: float NaNs, so a kernel that reads a byte nobody wrote shows in the output.
  std::memset(activations.get(), 0xff, std::max<uint64_t>(plan_->activationBytes, 1));
  std::vector<std::pair<const WeightVar *, Tensor *>> outputs;
  for (const auto &w : F_->getWeights()) {
    auto *ph = dyn_cast<Placeholder>(w->getOrigin());
    if (!ph)
      continue;
    KILN_ASSIGN_OR_RETURN(Tensor * t, bindings.getChecked(ph));
    std::memcpy(mutables.get() + offsets_.at(w.get()), t->getUnsafePtr(), t->getSizeInBytes());
    outputs.push_back({w.get(), t});
  }
  PlannedMemory mem{constants_.get(), mutables.get(), activations.get(), &offsets_};
  InterpreterRun run(*F_, &mem);
  KILN_RETURN_IF_ERR(run.run(bindings, tracer, pid));
  for (auto &[w, t] : outputs)
    std::memcpy(t->getUnsafePtr(), mutables.get() + offsets_.at(w), t->getSizeInBytes());
  return Error::success();
}

Tensor &InterpreterRun::getTensor(const Value *v) {
  auto it = tensors_.find(v);
  CHECK(it != tensors_.end()) << "Interpreter: no tensor for buffer '" << v->getName() << "'";
  return it->second;
}

Error InterpreterRun::run(PlaceholderBindings &bindings, Tracer *tracer, uint32_t pid) {
  for (const auto &w : F_.getWeights()) {
    Storage *s = w->getOrigin();
    if (mem_) {
      char *base = w->isConstant() ? mem_->constants : mem_->mutables;
      tensors_.emplace(w.get(), Tensor::view(*w->getType(), base + mem_->offsets->at(w.get())));
      continue;
    }
    if (auto *c = dyn_cast<Constant>(s)) {
      Tensor &payload = c->getPayloadMutable();
      tensors_.emplace(w.get(), Tensor::view(payload.getType(), payload.getUnsafePtr()));
      continue;
    }
    auto *ph = cast<Placeholder>(s);
    KILN_ASSIGN_OR_RETURN(Tensor * t, bindings.getChecked(ph));
    tensors_.emplace(w.get(), Tensor::view(t->getType(), t->getUnsafePtr()));
  }
  if (!tracer) {
    for (const auto &I : F_.getInstrs())
      KILN_RETURN_IF_ERR(execute(I.get()));
    return Error::success();
  }
  // One kernel event per instruction, gathered here and handed over in one piece.
  std::vector<TraceEvent> events;
  events.reserve(F_.getInstrs().size());
  Error err = Error::success();
  for (const auto &I : F_.getInstrs()) {
    int64_t t0 = tracer->nowNs();
    err = execute(I.get());
    TraceEvent e;
    e.name = I->getName();
    e.category = "kernel";
    e.pid = pid;
    e.startNs = t0;
    e.durNs = tracer->nowNs() - t0;
    e.args.push_back({"kind", I->getKindName(), false});
    events.push_back(std::move(e));
    if (err)
      break;
  }
  tracer->append(std::move(events));
  return err;
}

Error InterpreterRun::execute(const Instruction *I) {
  switch (I->getKind()) {
#define DEF_INSTR(NAME)                                                                    \
  case InstrKind::NAME:                                                                    \
    return fwd##NAME(static_cast<const NAME##Inst *>(I));
#include "kiln/IR/AutoGenInstrs.def"
  }
  return makeError(ErrorCode::Internal, "Interpreter: unknown instruction kind");
}

Error unsupportedKinds(const Instruction *I) {
  std::string kinds;
  for (unsigned i = 0; i < I->getNumOperands(); i++) {
    const Value *v = I->getOperand(i).first;
    kinds += (i ? ", " : "") + I->getOperandName(i) + ": " +
             (v && v->getType() ? v->getType()->toString() : std::string("?"));
  }
  return makeError(ErrorCode::Unsupported, "Interpreter has no kernel for ", I->getKindName(),
                   " '", I->getName(), "' with operands ", kinds);
}

// ---- Memory instructions ----

Error InterpreterRun::fwdAllocActivation(const AllocActivationInst *I) {
  if (mem_) {
    tensors_.emplace(I, Tensor::view(*I->getType(), mem_->activations + mem_->offsets->at(I)));
    return Error::success();
  }
  tensors_.emplace(I, Tensor(*I->getType()));
  return Error::success();
}

Error InterpreterRun::fwdDeallocActivation(const DeallocActivationInst *I) {
  tensors_.erase(I->getSrc());
  return Error::success();
}

Error InterpreterRun::fwdTensorView(const TensorViewInst *I) {
  Tensor &src = getTensor(I->getSrc());
  char *base = src.getUnsafePtr() + viewElementOffset(I) * src.getType().elemBytes();
  tensors_.erase(I);
  tensors_.emplace(I, Tensor::view(*I->getType(), base));
  return Error::success();
}

Error InterpreterRun::fwdCopy(const CopyInst *I) {
  Tensor &dst = getTensor(I->getDest());
  const Tensor &src = getTensor(I->getSrc());
  if (dst.getSizeInBytes() != src.getSizeInBytes())
    return makeError(ErrorCode::Internal, "Copy '", I->getName(), "': ", src.getType().toString(),
                     " into ", dst.getType().toString());
  std::memmove(dst.getUnsafePtr(), src.getUnsafePtr(), src.getSizeInBytes());
  return Error::success();
}

} // namespace kiln
