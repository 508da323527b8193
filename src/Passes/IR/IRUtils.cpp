#include "IRUtils.h"

#include <algorithm>

#include <glog/logging.h>

namespace kiln::irutil {

Value *getRoot(Value *v) {
  while (auto *tv = dyn_cast<TensorViewInst>(v))
    v = tv->getSrc();
  return v;
}

const Value *getRoot(const Value *v) { return getRoot(const_cast<Value *>(v)); }

bool isMemoryInstr(const Instruction *I) {
  return isa<AllocActivationInst>(I) || isa<DeallocActivationInst>(I) || isa<TensorViewInst>(I);
}

bool coversRoot(const Value *v) {
  const Value *root = getRoot(v);
  for (const Value *x = v; x != root; x = cast<TensorViewInst>(x)->getSrc()) {
    const auto &offs = cast<TensorViewInst>(x)->getOffsets();
    if (std::any_of(offs.begin(), offs.end(), [](dim_t o) { return o != 0; }))
      return false;
  }
  return v->getType()->sizeInBytes() == root->getType()->sizeInBytes();
}

bool BufferInfo::touchedBetween(size_t from, size_t to, bool wantRead, bool wantWrite) const {
  for (const Use &u : uses)
    if (u.pos > from && u.pos < to && ((wantRead && u.isRead()) || (wantWrite && u.isWrite())))
      return true;
  return false;
}

BufferUses::BufferUses(IRFunction &F) {
  for (const auto &w : F.getWeights())
    infos_[w.get()].root = w.get();
  size_t p = 0;
  for (auto &ip : F.getInstrs()) {
    Instruction *I = ip.get();
    pos_[I] = p++;
    if (auto *A = dyn_cast<AllocActivationInst>(I)) {
      BufferInfo &bi = infos_[A];
      bi.root = A;
      bi.alloc = A;
      acts_.push_back(&bi);
      continue;
    }
    if (auto *D = dyn_cast<DeallocActivationInst>(I)) {
      if (auto *A = dyn_cast<AllocActivationInst>(D->getSrc()))
        infos_[A].dealloc = D;
      continue;
    }
    if (auto *V = dyn_cast<TensorViewInst>(I)) {
      infos_[getRoot(V)].views.push_back(V);
      continue;
    }
    for (unsigned i = 0; i < I->getNumOperands(); i++) {
      Value *root = getRoot(I->getOperand(i).first);
      infos_[root].root = root;
      infos_[root].uses.push_back({I, i, pos_[I]});
    }
  }
}

BufferInfo *BufferUses::get(const Value *root) {
  auto it = infos_.find(root);
  return it == infos_.end() ? nullptr : &it->second;
}

IRFunction::InstrList::iterator find(IRFunction &F, const Instruction *I) {
  auto &L = F.getInstrs();
  for (auto it = L.begin(); it != L.end(); ++it)
    if (it->get() == I)
      return it;
  LOG(FATAL) << "IR pass: instruction '" << I->getName() << "' is not in the function";
}

void erase(IRFunction &F, const Instruction *I) { F.erase(find(F, I)); }

void moveBefore(IRFunction &F, const Instruction *I, const Instruction *where) {
  auto &L = F.getInstrs();
  auto it = find(F, I);
  auto dst = where ? find(F, where) : L.end();
  if (dst != it)
    L.splice(dst, L, it);
}

void moveAfter(IRFunction &F, const Instruction *I, const Instruction *where) {
  auto &L = F.getInstrs();
  auto it = find(F, I);
  auto dst = std::next(find(F, where));
  if (dst != it)
    L.splice(dst, L, it);
}

void replaceAllUsesWith(IRFunction &F, Value *from, Value *to) {
  for (auto &ip : F.getInstrs()) {
    Instruction *I = ip.get();
    if (isa<DeallocActivationInst>(I))
      continue;
    for (unsigned i = 0; i < I->getNumOperands(); i++)
      if (I->getOperand(i).first == from)
        I->setOperand(i, to);
  }
}

void fixLifetime(IRFunction &F, AllocActivationInst *A) {
  auto &L = F.getInstrs();
  DeallocActivationInst *D = nullptr;
  Instruction *first = nullptr, *last = nullptr;
  for (auto &ip : L) {
    Instruction *I = ip.get();
    if (I == A)
      continue;
    if (auto *d = dyn_cast<DeallocActivationInst>(I)) {
      if (d->getSrc() == A)
        D = d;
      continue;
    }
    bool touches = false;
    for (unsigned i = 0; i < I->getNumOperands() && !touches; i++)
      touches = getRoot(I->getOperand(i).first) == A;
    if (!touches)
      continue;
    if (!first)
      first = I;
    last = I;
  }
  if (first)
    moveBefore(F, A, first);
  if (D)
    moveAfter(F, D, last ? last : A);
}

void eraseActivation(IRFunction &F, AllocActivationInst *A) {
  for (auto it = F.getInstrs().begin(); it != F.getInstrs().end();) {
    auto *d = dyn_cast<DeallocActivationInst>(it->get());
    if (d && d->getSrc() == A)
      it = F.erase(it);
    else
      ++it;
  }
  erase(F, A);
}

} // namespace kiln::irutil
