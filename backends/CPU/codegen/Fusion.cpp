// Epilogue fusion: Convolution/FullyConnected -> [Add of its result] -> [Relu or Clip] becomes one
// instruction writing the final buffer. The intermediate buffers disappear; the final
// buffer's allocation moves before the fused instruction so the memory planner keeps it
// apart from the instruction's inputs.
#include "Codegen.h"

#include <cmath>

namespace kiln::cpu {

namespace {

using Iter = IRFunction::InstrList::iterator;

/// Instructions other than deallocs that name \p v (directly or as a view's source).
unsigned usesOf(const IRFunction &F, const Value *v) {
  unsigned n = 0;
  for (const auto &I : F.getInstrs()) {
    if (I->getKind() == InstrKind::DeallocActivation)
      continue;
    for (const auto &op : I->getOperands())
      if (op.first == v)
        n++;
  }
  return n;
}

Iter nextWork(IRFunction &F, Iter it) {
  for (++it; it != F.getInstrs().end(); ++it) {
    InstrKind k = (*it)->getKind();
    if (k != InstrKind::AllocActivation && k != InstrKind::DeallocActivation &&
        k != InstrKind::TensorView)
      return it;
  }
  return it;
}

Iter find(IRFunction &F, const Instruction *I) {
  for (auto it = F.getInstrs().begin(); it != F.getInstrs().end(); ++it)
    if (it->get() == I)
      return it;
  return F.getInstrs().end();
}

void eraseAllocAndDealloc(IRFunction &F, const Value *a) {
  auto &L = F.getInstrs();
  for (auto it = L.begin(); it != L.end();) {
    auto *d = dyn_cast<DeallocActivationInst>(it->get());
    if (it->get() == a || (d && d->getSrc() == a))
      it = L.erase(it);
    else
      ++it;
  }
}

/// A buffer an instruction can write: an activation, or a view of one (e.g. a Concat's
/// operand that the IR passes turned into a slice of the Concat's result).
bool isActivationOrView(const Value *v) {
  return isa<AllocActivationInst>(v) || isa<TensorViewInst>(v);
}

/// Moves the instruction that defines \p v (an alloc, or a view and then its source) to
/// before \p where when it comes later, so the buffer lives across the fused instruction.
void defineBefore(IRFunction &F, Value *v, Iter where) {
  auto *def = dyn_cast<Instruction>(v);
  if (!def || !(isa<AllocActivationInst>(def) || isa<TensorViewInst>(def)))
    return;
  auto &L = F.getInstrs();
  bool later = false;
  for (auto it = where; it != L.end(); ++it)
    if (it->get() == def) {
      later = true;
      break;
    }
  if (!later)
    return;
  if (auto *tv = dyn_cast<TensorViewInst>(def))
    defineBefore(F, tv->getSrc(), where);
  L.splice(where, L, find(F, def));
}

bool isFloat(const Value *v) { return v->getType() && v->getType()->kind == ElemKind::Float; }

bool isDepthwise(const ConvolutionInst *c) {
  const Type &in = *c->getInput()->getType();
  const Type &out = *c->getDest()->getType();
  return c->getGroup() > 1 && c->getGroup() == in.dims[1] && out.dims[1] == in.dims[1];
}

} // namespace

FusionMap fuseEpilogues(IRFunction &F, bool fuseAdd) {
  FusionMap fused;
  auto &L = F.getInstrs();
  for (auto it = L.begin(); it != L.end(); ++it) {
    Instruction *I = it->get();
    auto *conv = dyn_cast<ConvolutionInst>(I);
    if (!conv && !isa<FullyConnectedInst>(I))
      continue;
    Value *cur = I->getOperand(0).first;
    if (!isFloat(cur) || !isa<AllocActivationInst>(cur))
      continue;
    bool addOk = fuseAdd && !(conv && isDepthwise(conv));
    FusedEpilogue epi;
    std::vector<const Value *> dead;
    std::vector<const Instruction *> erased;
    Iter next = nextWork(F, it);
    if (addOk && next != L.end()) {
      if (auto *a = dyn_cast<AddInst>(next->get())) {
        Value *other = a->getLHS() == cur   ? a->getRHS()
                       : a->getRHS() == cur ? a->getLHS()
                                            : nullptr;
        // cur is named twice: by I (which writes it) and by the Add.
        if (other && other != cur && usesOf(F, cur) == 2 &&
            isActivationOrView(a->getDest()) && isFloat(a->getDest()) &&
            other->getType()->dims == cur->getType()->dims) {
          epi.add = other;
          dead.push_back(cur);
          cur = a->getDest();
          erased.push_back(a);
          next = nextWork(F, next);
        }
      }
    }
    if (next != L.end()) {
      // Relu clamps to [0, inf]; Clip (e.g. ReLU6) to [Min, Max].
      Instruction *act = next->get();
      auto *relu = dyn_cast<ReluInst>(act);
      auto *clip = dyn_cast<ClipInst>(act);
      if ((relu || clip) && act->getOperand(1).first == cur && usesOf(F, cur) == 2 &&
          isActivationOrView(act->getOperand(0).first) &&
          isFloat(act->getOperand(0).first)) {
        epi.act = true;
        epi.lo = relu ? 0.0f : clip->getMin();
        epi.hi = relu ? INFINITY : clip->getMax();
        dead.push_back(cur);
        cur = act->getOperand(0).first;
        erased.push_back(act);
      }
    }
    if (erased.empty())
      continue;
    // The final buffer is allocated (and viewed) before I and written by it.
    defineBefore(F, cur, it);
    I->setOperand(0, cur);
    for (const Instruction *e : erased)
      L.erase(find(F, e));
    for (const Value *d : dead)
      eraseAllocAndDealloc(F, d);
    fused[I] = epi;
  }
  return fused;
}

} // namespace kiln::cpu
