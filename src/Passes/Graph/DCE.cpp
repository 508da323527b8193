// dce: delete nodes whose results nobody uses. Saves are the roots; a node reachable from
// no Save is dead. With PassOptions::eraseUnusedConstants, module Constants that no
// function uses any more go too.

#include "DCE.h"

#include "kiln/Graph/Graph.h"

namespace kiln {

bool eliminateDeadCode(Function *f, const PassContext &ctx) {
  bool changed = f->eraseDeadNodes() != 0;
  if (ctx.options.eraseUnusedConstants)
    changed |= f->getParent()->eraseUnusedConstants() != 0;
  return changed;
}

} // namespace kiln
