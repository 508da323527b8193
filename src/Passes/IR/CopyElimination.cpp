// IR pass `copy-elimination`: `Copy @out %d, @in %s` copies a whole buffer. The copy goes
// when %s and %d can be one buffer:
//  - backward: %s is an activation whose last use is the copy, and %d's buffer is neither
//    read nor written while %s is in use; the producers of %s write into %d directly (this
//    is how a Save's copy into an output placeholder disappears);
//  - forward: %d is an activation written only by the copy, and %s's buffer is not written
//    while %d is in use; the readers of %d read %s.
// A copy of a buffer onto itself is deleted. When the two types differ but have the same
// size (a copy from a reshaped view), the replaced buffer becomes a TensorView.

#include "CopyElimination.h"

#include "IRUtils.h"

namespace kiln {

namespace {

using namespace irutil;

/// \p v itself when it has type \p ty, else a new zero-offset view of \p v with type
/// \p ty inserted before \p where.
Value *asType(IRFunction &F, Value *v, TypeRef ty, const Instruction *where,
              const std::string &name) {
  if (*v->getType() == *ty)
    return v;
  std::vector<dim_t> zeros(v->getType()->rank(), 0);
  return F.insert(find(F, where), new TensorViewInst(name + ".view", ty, v, zeros));
}

bool backward(IRFunction &F, CopyInst *C) {
  auto *A = dyn_cast<AllocActivationInst>(getRoot(C->getSrc()));
  Value *D = C->getDest();
  if (!A || !coversRoot(C->getSrc()) || getRoot(D) != D || D == A)
    return false;
  if (A->getType()->sizeInBytes() != D->getType()->sizeInBytes())
    return false;
  BufferUses bu(F);
  BufferInfo *ai = bu.get(A), *di = bu.get(D);
  if (ai->uses.back().I != C)
    return false;
  // D must be untouched from A's first use up to the copy.
  if (di->touchedBetween(ai->firstUse() - 1, bu.pos(C), true, true))
    return false;
  Value *repl = asType(F, D, A->getType(), A, A->getName());
  replaceAllUsesWith(F, A, repl);
  erase(F, C);
  eraseActivation(F, A);
  if (auto *DA = dyn_cast<AllocActivationInst>(D))
    fixLifetime(F, DA);
  return true;
}

bool forward(IRFunction &F, CopyInst *C) {
  auto *DA = dyn_cast<AllocActivationInst>(C->getDest());
  Value *S = C->getSrc();
  if (!DA || getRoot(S) == DA)
    return false;
  if (DA->getType()->sizeInBytes() != S->getType()->sizeInBytes())
    return false;
  BufferUses bu(F);
  BufferInfo *di = bu.get(DA), *si = bu.get(getRoot(S));
  if (di->uses.front().I != C)
    return false;
  for (const Use &u : di->uses)
    if (u.isWrite() && u.I != C)
      return false;
  if (si->touchedBetween(bu.pos(C), di->lastUse() + 1, false, true))
    return false;
  Value *repl = asType(F, S, DA->getType(), C, DA->getName());
  replaceAllUsesWith(F, DA, repl);
  erase(F, C);
  eraseActivation(F, DA);
  if (auto *SA = dyn_cast<AllocActivationInst>(getRoot(S)))
    fixLifetime(F, SA);
  return true;
}

} // namespace

bool eliminateCopies(IRFunction &F) {
  bool changed = false;
  for (bool again = true; again;) {
    again = false;
    std::vector<CopyInst *> copies;
    for (auto &ip : F.getInstrs())
      if (auto *C = dyn_cast<CopyInst>(ip.get()))
        copies.push_back(C);
    for (CopyInst *C : copies) {
      if (C->getDest() == C->getSrc()) {
        erase(F, C);
        again = true;
      } else if (backward(F, C) || forward(F, C)) {
        again = true;
        break; // Positions are stale: start over.
      }
    }
    changed |= again;
  }
  return changed;
}

} // namespace kiln
