// IR pass `sink-allocs`: each AllocActivation and TensorView moves to just before the
// first instruction that refers to it, so buffers start living where they are first
// needed. Views move first (the last one first, so views of views settle), then allocs.

#include "SinkAllocs.h"

#include "IRUtils.h"

#include <unordered_map>

namespace kiln {

namespace {

/// Moves each of \p defs just before the first instruction that has it as an operand
/// (deallocs excluded); true when something moved.
bool sink(IRFunction &F, const std::vector<Instruction *> &defs) {
  bool changed = false;
  for (Instruction *V : defs) {
    auto &L = F.getInstrs();
    auto self = irutil::find(F, V);
    for (auto it = std::next(self); it != L.end(); ++it) {
      Instruction *I = it->get();
      if (isa<DeallocActivationInst>(I))
        continue;
      bool uses = false;
      for (const auto &op : I->getOperands())
        uses |= op.first == V;
      if (!uses)
        continue;
      if (std::next(self) != it) {
        L.splice(it, L, self);
        changed = true;
      }
      break;
    }
  }
  return changed;
}

} // namespace

bool sinkAllocs(IRFunction &F) {
  std::vector<Instruction *> views, allocs;
  for (auto &ip : F.getInstrs()) {
    if (isa<TensorViewInst>(ip.get()))
      views.insert(views.begin(), ip.get());
    else if (isa<AllocActivationInst>(ip.get()))
      allocs.push_back(ip.get());
  }
  bool changed = sink(F, views);
  changed |= sink(F, allocs);
  return changed;
}

} // namespace kiln
