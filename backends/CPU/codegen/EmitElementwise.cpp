// Element-wise instructions: the default kernel of a data-parallel instruction comes from
// the operator table (libjit_elem_<lower-case kind>_f32, its float attributes appended as
// arguments); only exceptions are listed here. Chains of them become one loop.
#include "Emitter.h"

#include <cctype>

namespace kiln::cpu {

namespace {

/// Collects an instruction's float attributes in table order (Clip: Min, Max; LeakyRelu:
/// Alpha); any other kind of attribute means the default kernel does not apply.
class FloatAttrs : public AttrVisitor {
public:
  std::vector<float> values;
  bool other = false;
  void visit(const char *, dim_t &) override { other = true; }
  void visit(const char *, int64_t &) override { other = true; }
  void visit(const char *, float &v) override { values.push_back(v); }
  void visit(const char *, bool &) override { other = true; }
  void visit(const char *, std::vector<dim_t> &) override { other = true; }
  void visit(const char *, std::vector<int64_t> &) override { other = true; }
  void visit(const char *, std::string &) override { other = true; }
};

} // namespace

bool Emitter::elemOpOf(Instruction *I, ElemOp &op) {
  if (!I->isDataParallel())
    return false;
  // The exceptions to the table-driven default.
  if (auto *g = dyn_cast<GeluInst>(I)) {
    op.fn = g->getApproximate() ? "libjit_elem_gelu_tanh_f32" : "libjit_elem_gelu_f32";
    op.attrs.clear();
    return true;
  }
  FloatAttrs attrs;
  I->visitAttrs(attrs);
  if (attrs.other)
    return false;
  std::string name = "libjit_elem_";
  for (const char *c = I->getKindName(); *c; c++)
    name += char(std::tolower(static_cast<unsigned char>(*c)));
  name += "_f32";
  // Data-parallel kinds without a float kernel (comparisons, Select, conversions) are not
  // element-wise here; plan() reports them unsupported.
  llvm::Function *f = M_.getFunction(name);
  if (!f || f->arg_size() != I->getNumOperands() - 1 + attrs.values.size())
    return false;
  op.fn = std::move(name);
  op.attrs = std::move(attrs.values);
  return true;
}

void Emitter::emitElementwise(const std::vector<Instruction *> &group, int64_t n,
                              bool parallel) {
  llvm::Value *begin = I64(0), *end = I64(n);
  if (parallel) {
    // Chunks of whole cache lines per thread.
    llvm::Value *per = B_.CreateUDiv(B_.CreateAdd(I64(n), B_.CreateSub(nth_, I64(1))), nth_);
    per = B_.CreateMul(B_.CreateUDiv(B_.CreateAdd(per, I64(15)), I64(16)), I64(16));
    begin = B_.CreateMul(tid_, per);
    begin = B_.CreateSelect(B_.CreateICmpULT(begin, I64(n)), begin, I64(n));
    end = B_.CreateAdd(begin, per);
    end = B_.CreateSelect(B_.CreateICmpULT(end, I64(n)), end, I64(n));
  }
  llvm::BasicBlock *pre = B_.GetInsertBlock();
  auto *loop = llvm::BasicBlock::Create(ctx_, "ew.loop", fn_);
  auto *exit = llvm::BasicBlock::Create(ctx_, "ew.exit", fn_);
  B_.CreateCondBr(B_.CreateICmpULT(begin, end), loop, exit);
  B_.SetInsertPoint(loop);
  llvm::PHINode *i = B_.CreatePHI(i64_, 2, "i");
  i->addIncoming(begin, pre);
  llvm::MDNode *group_ = llvm::MDNode::getDistinct(ctx_, {});
  std::map<std::pair<unsigned, uint64_t>, llvm::Value *> ssa;
  auto elemPtr = [&](const Value *v) {
    Location l = *loc(v);
    llvm::Value *p = B_.CreatePointerCast(at(l), f32_->getPointerTo());
    return B_.CreateInBoundsGEP(f32_, p, i);
  };
  for (Instruction *I : group) {
    ElemOp op;
    elemOpOf(I, op);
    std::vector<llvm::Value *> args;
    for (unsigned k = 1; k < I->getNumOperands(); k++) {
      const Value *v = I->getOperand(k).first;
      Location l = *loc(v);
      auto it = ssa.find({l.base, l.offset});
      if (it != ssa.end()) {
        args.push_back(it->second);
        continue;
      }
      llvm::LoadInst *ld = B_.CreateLoad(f32_, elemPtr(v));
      ld->setMetadata(llvm::LLVMContext::MD_access_group, group_);
      args.push_back(ld);
    }
    for (float a : op.attrs)
      args.push_back(F32(a));
    llvm::Value *r = call(op.fn, args);
    if (!r)
      return;
    const Value *dest = I->getOperand(0).first;
    llvm::StoreInst *st = B_.CreateStore(r, elemPtr(dest));
    st->setMetadata(llvm::LLVMContext::MD_access_group, group_);
    Location dl = *loc(dest);
    ssa[{dl.base, dl.offset}] = r;
  }
  llvm::Value *next = B_.CreateAdd(i, I64(1));
  i->addIncoming(next, B_.GetInsertBlock());
  auto *br = B_.CreateCondBr(B_.CreateICmpULT(next, end), loop, exit);
  llvm::TempMDTuple tmp = llvm::MDTuple::getTemporary(ctx_, {});
  llvm::Metadata *par[] = {llvm::MDString::get(ctx_, "llvm.loop.parallel_accesses"), group_};
  llvm::MDNode *loopId = llvm::MDNode::getDistinct(ctx_, {tmp.get(), llvm::MDNode::get(ctx_, par)});
  loopId->replaceOperandWith(0, loopId);
  br->setMetadata(llvm::LLVMContext::MD_loop, loopId);
  B_.SetInsertPoint(exit);
}

Error Emitter::planElementwise(std::vector<Instruction *> &group, std::vector<Item> &items) {
  if (group.empty())
    return Error::success();
  int64_t n = int64_t(group.front()->getOperand(0).first->getType()->numElements());
  bool parallel = opts_.threads > 1 && n >= 16384;
  std::vector<Instruction *> g = group;
  fusedLoops_++;
  fusedInstrs_ += unsigned(g.size());
  items.push_back({parallel, "elementwise", [this, g, n, parallel] {
                     emitElementwise(g, n, parallel && opts_.threads > 1);
                   }});
  group.clear();
  return Error::success();
}

} // namespace kiln::cpu
