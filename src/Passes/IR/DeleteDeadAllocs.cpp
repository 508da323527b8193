// IR pass `delete-dead-allocs`: an activation that no data instruction touches (directly
// or through views) is deleted with its dealloc and its views.

#include "DeleteDeadAllocs.h"

#include "IRUtils.h"

namespace kiln {

bool deleteDeadAllocs(IRFunction &F) {
  using namespace irutil;
  BufferUses bu(F);
  std::vector<BufferInfo *> dead;
  for (BufferInfo *bi : bu.activations())
    if (bi->uses.empty())
      dead.push_back(bi);
  for (BufferInfo *bi : dead) {
    // Views of views come later in the list: delete from the back.
    for (auto it = bi->views.rbegin(); it != bi->views.rend(); ++it)
      erase(F, *it);
    eraseActivation(F, bi->alloc);
  }
  return !dead.empty();
}

} // namespace kiln
