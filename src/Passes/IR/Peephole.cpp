// IR pass `peephole`: small local cleanups that other passes leave behind.
//  - `Copy @out %a, @in %a` is deleted.
//  - A TensorView with zero offsets and its source's type is its source.
//  - A TensorView with zero offsets of another TensorView views the inner view's source
//    directly (same byte offset, new type).
//  - A TensorView that nothing uses is deleted.

#include "Peephole.h"

#include "IRUtils.h"

#include <algorithm>
#include <unordered_set>

namespace kiln {

namespace {

bool zeroOffsets(const TensorViewInst *V) {
  const auto &o = V->getOffsets();
  return std::all_of(o.begin(), o.end(), [](dim_t x) { return x == 0; });
}

/// One sweep; true when it changed something.
bool sweep(IRFunction &F) {
  bool changed = false;
  auto &L = F.getInstrs();
  for (auto it = L.begin(); it != L.end();) {
    Instruction *I = it->get();
    if (auto *C = dyn_cast<CopyInst>(I)) {
      if (C->getDest() == C->getSrc()) {
        it = F.erase(it);
        changed = true;
        continue;
      }
    }
    if (auto *V = dyn_cast<TensorViewInst>(I)) {
      if (zeroOffsets(V) && *V->getType() == *V->getSrc()->getType()) {
        irutil::replaceAllUsesWith(F, V, V->getSrc());
        it = F.erase(it);
        changed = true;
        continue;
      }
      if (auto *inner = dyn_cast<TensorViewInst>(V->getSrc())) {
        if (zeroOffsets(V)) {
          V->setOperand(0, inner->getSrc());
          V->setOffsets(inner->getOffsets());
          changed = true;
        }
      }
    }
    ++it;
  }
  // Views nothing refers to.
  std::unordered_set<const Value *> used;
  for (const auto &ip : L)
    for (const auto &op : ip->getOperands())
      used.insert(op.first);
  for (auto it = L.begin(); it != L.end();) {
    if (isa<TensorViewInst>(it->get()) && !used.count(it->get())) {
      it = F.erase(it);
      changed = true;
      continue;
    }
    ++it;
  }
  return changed;
}

} // namespace

bool peepholeIR(IRFunction &F) {
  bool changed = false;
  while (sweep(F))
    changed = true;
  return changed;
}

} // namespace kiln
