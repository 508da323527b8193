// IR pass `share-buffers`: an instruction's output buffer %b (an activation it writes
// first) takes over the storage of another activation %a when their lifetimes do not
// overlap, so that the two become one buffer:
//  - in place: the instruction is element-wise (isDataParallel) and reads %a for the last
//    time; element i of the result overwrites element i of the input, which is safe
//    because both have the same element size and count;
//  - a dead buffer: %a has the same type as %b and was used for the last time by the
//    data instruction just before (so merging leaves no gap in which a buffer is live
//    without being used).
// Only activations take part: weights (inputs, outputs, constants) are observable.

#include "ShareBuffers.h"

#include "IRUtils.h"

namespace kiln {

namespace {

using namespace irutil;

/// True when \p I uses \p v only through operands that read it.
bool onlyReads(const Instruction *I, const Value *root) {
  for (unsigned i = 0; i < I->getNumOperands(); i++)
    if (getRoot(I->getOperand(i).first) == root && writes(I, i))
      return false;
  return true;
}

/// Rewrites every use of \p B to \p A (through a view when the types differ).
void merge(IRFunction &F, AllocActivationInst *B, AllocActivationInst *A, Instruction *at) {
  Value *repl = A;
  if (*A->getType() != *B->getType()) {
    std::vector<dim_t> zeros(A->getType()->rank(), 0);
    repl = F.insert(find(F, at), new TensorViewInst(B->getName() + ".view", B->getType(), A, zeros));
  }
  replaceAllUsesWith(F, B, repl);
  eraseActivation(F, B);
  fixLifetime(F, A);
}

/// An input of element-wise \p I that dies at \p I and can hold \p B in place.
AllocActivationInst *inPlaceCandidate(BufferUses &bu, Instruction *I, AllocActivationInst *B) {
  if (!I->isDataParallel())
    return nullptr;
  const Type &bt = *B->getType();
  for (unsigned j = 0; j < I->getNumOperands(); j++) {
    auto *A = dyn_cast<AllocActivationInst>(I->getOperand(j).first);
    if (!A || A == B || writes(I, j) || !onlyReads(I, A))
      continue;
    const Type &at = *A->getType();
    if (at.elemBytes() != bt.elemBytes() || at.numElements() != bt.numElements())
      continue;
    if (bu.get(A)->lastUse() == bu.pos(I))
      return A;
  }
  return nullptr;
}

/// A buffer of \p B's type whose last use is the data instruction just before \p I.
AllocActivationInst *deadCandidate(BufferUses &bu, Instruction *I, Instruction *prevData,
                                   AllocActivationInst *B) {
  if (!prevData)
    return nullptr;
  size_t prev = bu.pos(prevData);
  for (BufferInfo *ai : bu.activations()) {
    if (ai->alloc == B || ai->uses.empty() || ai->lastUse() != prev)
      continue;
    if (*ai->alloc->getType() == *B->getType() && bu.pos(ai->alloc) < bu.pos(I))
      return ai->alloc;
  }
  return nullptr;
}

} // namespace

bool shareBuffers(IRFunction &F) {
  bool changed = false;
  std::vector<Instruction *> data;
  for (auto &ip : F.getInstrs())
    if (!isMemoryInstr(ip.get()))
      data.push_back(ip.get());
  auto bu = std::make_unique<BufferUses>(F);
  Instruction *prevData = nullptr;
  for (Instruction *I : data) {
    for (unsigned o = 0; o < I->getNumOperands(); o++) {
      if (I->getOperand(o).second != OperandKind::Out)
        continue;
      auto *B = dyn_cast<AllocActivationInst>(I->getOperand(o).first);
      if (!B)
        continue;
      BufferInfo *bi = bu->get(B);
      if (bi->uses.front().I != I || !bi->dealloc)
        continue;
      AllocActivationInst *A = inPlaceCandidate(*bu, I, B);
      if (!A)
        A = deadCandidate(*bu, I, prevData, B);
      if (!A || !bu->get(A)->dealloc)
        continue;
      merge(F, B, A, I);
      changed = true;
      bu = std::make_unique<BufferUses>(F);
    }
    prevData = I;
  }
  return changed;
}

} // namespace kiln
