// IR pass `dead-store-elimination`: an instruction whose every write goes to activations
// whose values are never read afterwards (before being overwritten whole or deallocated)
// does nothing observable and is deleted. Writes to weights are always observable.
// A backward walk tracks which activations hold a value that is still needed.

#include "DeadStoreElimination.h"

#include "IRUtils.h"

#include <unordered_set>

namespace kiln {

bool eliminateDeadStores(IRFunction &F) {
  using namespace irutil;
  std::vector<Instruction *> order;
  for (auto &ip : F.getInstrs())
    order.push_back(ip.get());
  std::unordered_set<const Value *> needed;
  std::vector<Instruction *> dead;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Instruction *I = *it;
    if (auto *D = dyn_cast<DeallocActivationInst>(I)) {
      needed.erase(D->getSrc());
      continue;
    }
    if (isMemoryInstr(I))
      continue;
    bool keep = false, anyWrite = false;
    for (unsigned i = 0; i < I->getNumOperands(); i++) {
      if (!writes(I, i))
        continue;
      anyWrite = true;
      const Value *root = getRoot(I->getOperand(i).first);
      keep |= !isa<AllocActivationInst>(root) || needed.count(root);
    }
    if (anyWrite && !keep) {
      dead.push_back(I);
      continue;
    }
    for (unsigned i = 0; i < I->getNumOperands(); i++)
      if (I->getOperand(i).second == OperandKind::Out && coversRoot(I->getOperand(i).first))
        needed.erase(getRoot(I->getOperand(i).first));
    for (unsigned i = 0; i < I->getNumOperands(); i++)
      if (reads(I, i))
        needed.insert(getRoot(I->getOperand(i).first));
  }
  for (Instruction *I : dead)
    erase(F, I);
  return !dead.empty();
}

} // namespace kiln
