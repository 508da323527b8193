#include "Interpreter.h"

namespace kiln {

KILN_REGISTER_BACKEND(InterpreterBackend, "Interpreter");

Expected<std::unique_ptr<CompiledFunction>>
InterpreterBackend::compile(Function *f, const CompileOptions &) const {
  KILN_RETURN_IF_ERR(checkAllNodesSupported(*f));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<IRFunction> F, generateIR(f));
  return std::unique_ptr<CompiledFunction>(new InterpreterFunction(std::move(F)));
}

Error InterpreterFunction::execute(ExecutionContext &ctx) {
  if (!ctx.getBindings())
    return makeError(ErrorCode::InvalidArgument, "execute: no placeholder bindings");
  InterpreterRun run(*F_);
  return run.run(*ctx.getBindings());
}

Tensor &InterpreterRun::getTensor(const Value *v) {
  auto it = tensors_.find(v);
  CHECK(it != tensors_.end()) << "Interpreter: no tensor for buffer '" << v->getName() << "'";
  return it->second;
}

Error InterpreterRun::run(PlaceholderBindings &bindings) {
  for (const auto &w : F_.getWeights()) {
    Storage *s = w->getOrigin();
    if (auto *c = dyn_cast<Constant>(s)) {
      Tensor &payload = c->getPayloadMutable();
      tensors_.emplace(w.get(), Tensor::view(payload.getType(), payload.getUnsafePtr()));
      continue;
    }
    auto *ph = cast<Placeholder>(s);
    Tensor *t = bindings.get(ph);
    if (!t)
      return makeError(ErrorCode::InvalidArgument, "placeholder '", ph->getName(), "' of type ",
                       ph->getType()->toString(), " is not bound to a tensor");
    if (t->getType() != *ph->getType())
      return makeError(ErrorCode::InvalidArgument, "placeholder '", ph->getName(),
                       "' expects a tensor of type ", ph->getType()->toString(), " but is bound to ",
                       t->getType().toString());
    tensors_.emplace(w.get(), Tensor::view(t->getType(), t->getUnsafePtr()));
  }
  for (const auto &I : F_.getInstrs())
    KILN_RETURN_IF_ERR(execute(I.get()));
  return Error::success();
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
  tensors_.emplace(I, Tensor(*I->getType()));
  return Error::success();
}

Error InterpreterRun::fwdDeallocActivation(const DeallocActivationInst *I) {
  tensors_.erase(I->getSrc());
  return Error::success();
}

Error InterpreterRun::fwdTensorView(const TensorViewInst *I) {
  Tensor &src = getTensor(I->getSrc());
  const Type &st = src.getType();
  Dims strides = st.strides();
  size_t offset = 0;
  const auto &offs = I->getOffsets();
  for (size_t i = 0; i < offs.size() && i < strides.size(); i++)
    offset += offs[i] * strides[i];
  char *base = src.getUnsafePtr() + offset * st.elemBytes();
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
