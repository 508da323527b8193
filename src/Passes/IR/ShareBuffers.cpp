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

#include <algorithm>
#include <unordered_map>

namespace kiln {

namespace {

using namespace irutil;

/// The merges decided so far, over a snapshot of the function taken before any edit: every
/// buffer merged away points at the buffer that takes it over (never itself merged, since a
/// buffer is merged only at its first use and a target has uses before that), and each
/// target's last use grows with the buffers it absorbs. Deciding on the snapshot and
/// editing once at the end keeps the pass linear in the function's size.
class Merges {
public:
  explicit Merges(IRFunction &F) : bu_(F) {
    const auto &acts = bu_.activations();
    for (size_t i = 0; i < acts.size(); i++) {
      BufferInfo *bi = acts[i];
      order_[bi->alloc] = i;
      last_[bi->alloc] = bi->lastUse();
      if (!bi->uses.empty())
        dyingAt_[bi->lastUse()].push_back(bi->alloc);
    }
  }

  BufferUses &uses() { return bu_; }

  /// The buffer that now holds the root of \p v.
  const Value *target(const Value *v) const {
    const Value *root = getRoot(v);
    auto it = into_.find(root);
    return it == into_.end() ? root : it->second;
  }

  size_t lastUse(AllocActivationInst *A) const { return last_.at(A); }

  /// \p v as the operand the merged function would hold: the target itself when the
  /// operand was a buffer merged with an identical type, null when it would be a view.
  AllocActivationInst *asAlloc(Value *v) const {
    auto *A = dyn_cast<AllocActivationInst>(v);
    if (!A)
      return nullptr;
    auto it = into_.find(A);
    if (it == into_.end())
      return A;
    return *it->second->getType() == *A->getType() ? it->second : nullptr;
  }

  /// Activations whose last use is at \p pos, earliest allocated first.
  std::vector<AllocActivationInst *> dyingAt(size_t pos) const {
    auto it = dyingAt_.find(pos);
    if (it == dyingAt_.end())
      return {};
    std::vector<AllocActivationInst *> v = it->second;
    std::sort(v.begin(), v.end(), [&](AllocActivationInst *a, AllocActivationInst *b) {
      return order_.at(a) < order_.at(b);
    });
    return v;
  }

  void merge(AllocActivationInst *B, AllocActivationInst *A, Instruction *at) {
    into_[B] = A;
    firstUse_[B] = at;
    unlist(B, last_[B]);
    if (last_[B] != BufferInfo::npos && (last_[A] == BufferInfo::npos || last_[B] > last_[A])) {
      unlist(A, last_[A]);
      last_[A] = last_[B];
      dyingAt_[last_[A]].push_back(A);
    }
  }

  /// Edits \p F once: operands of merged buffers point at their targets (through a view,
  /// inserted before the merged buffer's first use, when the types differ), the merged
  /// buffers' allocs and deallocs go, and each target's alloc and dealloc move around its
  /// new first and last touch.
  void apply(IRFunction &F) {
    if (into_.empty())
      return;
    auto &L = F.getInstrs();
    std::unordered_map<const Value *, Value *> repl;
    for (auto &[B, A] : into_)
      repl[B] = A;
    // Views for type-changing merges, inserted before each merged buffer's first use.
    std::unordered_map<const Instruction *, std::vector<const Value *>> viewsBefore;
    for (auto &[B, A] : into_)
      if (*A->getType() != *B->getType())
        viewsBefore[firstUse_[B]].push_back(B);
    for (auto it = L.begin(); it != L.end(); ++it) {
      auto vb = viewsBefore.find(it->get());
      if (vb == viewsBefore.end())
        continue;
      for (const Value *B : vb->second) {
        AllocActivationInst *A = into_[B];
        std::vector<dim_t> zeros(A->getType()->rank(), 0);
        repl[B] = F.insert(it, new TensorViewInst(B->getName() + ".view", B->getType(), A, zeros));
      }
    }
    // Operands, and the merged buffers' allocs and deallocs.
    for (auto it = L.begin(); it != L.end();) {
      Instruction *I = it->get();
      auto *own = dyn_cast<AllocActivationInst>(I);
      auto *d = dyn_cast<DeallocActivationInst>(I);
      if ((own && into_.count(own)) || (d && into_.count(d->getSrc()))) {
        it = F.erase(it);
        continue;
      }
      if (!d)
        for (unsigned i = 0; i < I->getNumOperands(); i++) {
          auto r = repl.find(I->getOperand(i).first);
          if (r != repl.end() && r->second != I)
            I->setOperand(i, r->second);
        }
      ++it;
    }
    fixLifetimes(F);
  }

private:
  void unlist(AllocActivationInst *A, size_t pos) {
    auto it = dyingAt_.find(pos);
    if (it == dyingAt_.end())
      return;
    auto &v = it->second;
    v.erase(std::remove(v.begin(), v.end(), A), v.end());
  }

  /// Moves each target's alloc before its first touch and its dealloc after its last.
  void fixLifetimes(IRFunction &F) {
    auto &L = F.getInstrs();
    using It = IRFunction::InstrList::iterator;
    struct Span {
      It alloc, dealloc, first, last;
      bool hasDealloc = false, touched = false;
    };
    std::unordered_map<const Value *, Span> spans;
    for (auto &[B, A] : into_)
      spans[A];
    for (auto it = L.begin(); it != L.end(); ++it) {
      Instruction *I = it->get();
      if (auto *A = dyn_cast<AllocActivationInst>(I)) {
        auto s = spans.find(A);
        if (s != spans.end())
          s->second.alloc = it;
        continue;
      }
      if (auto *d = dyn_cast<DeallocActivationInst>(I)) {
        auto s = spans.find(d->getSrc());
        if (s != spans.end()) {
          s->second.dealloc = it;
          s->second.hasDealloc = true;
        }
        continue;
      }
      for (unsigned i = 0; i < I->getNumOperands(); i++) {
        auto s = spans.find(getRoot(I->getOperand(i).first));
        if (s == spans.end())
          continue;
        if (!s->second.touched)
          s->second.first = it;
        s->second.touched = true;
        s->second.last = it;
      }
    }
    for (auto &[A, s] : spans) {
      if (s.touched && s.alloc != s.first)
        L.splice(s.first, L, s.alloc);
      if (s.hasDealloc) {
        It after = std::next(s.touched ? s.last : s.alloc);
        if (after != s.dealloc)
          L.splice(after, L, s.dealloc);
      }
    }
  }

  BufferUses bu_;
  std::unordered_map<const Value *, AllocActivationInst *> into_;
  std::unordered_map<const Value *, Instruction *> firstUse_;
  std::unordered_map<const Value *, size_t> order_, last_;
  std::unordered_map<size_t, std::vector<AllocActivationInst *>> dyingAt_;
};

/// True when \p I uses the buffer now held by \p A only through operands that read it.
bool onlyReads(const Merges &m, const Instruction *I, const AllocActivationInst *A) {
  for (unsigned i = 0; i < I->getNumOperands(); i++)
    if (m.target(I->getOperand(i).first) == A && writes(I, i))
      return false;
  return true;
}

/// An input of element-wise \p I that dies at \p I and can hold \p B in place.
AllocActivationInst *inPlaceCandidate(Merges &m, Instruction *I, AllocActivationInst *B) {
  if (!I->isDataParallel())
    return nullptr;
  const Type &bt = *B->getType();
  for (unsigned j = 0; j < I->getNumOperands(); j++) {
    AllocActivationInst *A = m.asAlloc(I->getOperand(j).first);
    if (!A || A == B || writes(I, j) || !onlyReads(m, I, A))
      continue;
    const Type &at = *A->getType();
    if (at.elemBytes() != bt.elemBytes() || at.numElements() != bt.numElements())
      continue;
    if (m.lastUse(A) == m.uses().pos(I))
      return A;
  }
  return nullptr;
}

/// A buffer of \p B's type whose last use is the data instruction just before \p I.
AllocActivationInst *deadCandidate(Merges &m, Instruction *I, Instruction *prevData,
                                   AllocActivationInst *B) {
  if (!prevData)
    return nullptr;
  for (AllocActivationInst *A : m.dyingAt(m.uses().pos(prevData)))
    if (A != B && *A->getType() == *B->getType() && m.uses().pos(A) < m.uses().pos(I))
      return A;
  return nullptr;
}

} // namespace

bool shareBuffers(IRFunction &F) {
  Merges m(F);
  BufferUses &bu = m.uses();
  bool changed = false;
  Instruction *prevData = nullptr;
  for (auto &ip : F.getInstrs()) {
    Instruction *I = ip.get();
    if (isMemoryInstr(I))
      continue;
    for (unsigned o = 0; o < I->getNumOperands(); o++) {
      if (I->getOperand(o).second != OperandKind::Out)
        continue;
      auto *B = dyn_cast<AllocActivationInst>(I->getOperand(o).first);
      if (!B)
        continue;
      BufferInfo *bi = bu.get(B);
      if (bi->uses.front().I != I || !bi->dealloc)
        continue;
      AllocActivationInst *A = inPlaceCandidate(m, I, B);
      if (!A)
        A = deadCandidate(m, I, prevData, B);
      if (!A || !bu.get(A)->dealloc)
        continue;
      m.merge(B, A, I);
      changed = true;
    }
    prevData = I;
  }
  m.apply(F);
  return changed;
}

} // namespace kiln
