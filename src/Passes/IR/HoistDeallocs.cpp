// IR pass `hoist-deallocs`: each DeallocActivation moves to just after the last
// instruction that touches its buffer (directly or through a view), so buffers stop
// living as soon as they are no longer needed. A buffer nothing touches is deallocated
// right after its alloc.

#include "HoistDeallocs.h"

#include "IRUtils.h"

#include <unordered_map>

namespace kiln {

bool hoistDeallocs(IRFunction &F) {
  using namespace irutil;
  std::unordered_map<const Value *, Instruction *> last;
  std::vector<DeallocActivationInst *> deallocs;
  for (auto &ip : F.getInstrs()) {
    Instruction *I = ip.get();
    if (auto *D = dyn_cast<DeallocActivationInst>(I)) {
      deallocs.push_back(D);
      continue;
    }
    if (isa<AllocActivationInst>(I)) {
      last[I] = I;
      continue;
    }
    for (const auto &op : I->getOperands())
      last[getRoot(op.first)] = I;
  }
  bool changed = false;
  for (DeallocActivationInst *D : deallocs) {
    auto &L = F.getInstrs();
    auto it = find(F, D);
    Instruction *after = last.count(D->getSrc()) ? last[D->getSrc()] : nullptr;
    if (!after || (it != L.begin() && std::prev(it)->get() == after))
      continue;
    // Keep deallocs that already sit right after their last user's other deallocs.
    auto dst = std::next(find(F, after));
    bool already = false;
    for (auto j = dst; j != L.end() && isa<DeallocActivationInst>(j->get()); ++j)
      already |= j == it;
    if (already)
      continue;
    L.splice(dst, L, it);
    changed = true;
  }
  return changed;
}

} // namespace kiln
