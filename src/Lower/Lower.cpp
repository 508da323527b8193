// The `lower` pass: asks the backend about each node, dispatches to the lowering functions
// that the family files src/Graph/<Family>.cpp define (the dispatch is generated from the
// operator table, src/ClassGen/NodeTable.cpp), and repeats, because a lowering may produce
// nodes the backend also wants lowered (Broadcast from BatchNormalization, Tile from
// Broadcast, Concat from Tile).

#include "Lower.h"

#include "src/Graph/Lowering.h"

#include "src/Passes/Graph/PassUtils.h"

#include "kiln/Backend/Backend.h"

#include <glog/logging.h>

namespace kiln {

namespace {

/// The replacement of \p n, or null when no lowering applies. The cases are generated
/// from the operator table: each operator names its lowering function (`.lowering`) or
/// has none (`.noLowering`), and the switch has no default.
NodeValue lowerNode(Function *f, Node *n) {
  switch (n->getKind()) {
#include "src/ClassGen/AutoGenLower.inc"
  }
  return NodeValue();
}

} // namespace

bool lowerNodes(Function *f, const PassContext &ctx) {
  constexpr unsigned kMaxRounds = 16;
  passutil::Sweeper sweeper;
  bool changed = false;
  for (unsigned round = 0; round < kMaxRounds; round++) {
    bool any = false;
    for (Node *n : passutil::topoOrder(*f)) {
      if (!n->hasUsers() || n->getNumResults() != 1)
        continue;
      if (ctx.backend && !ctx.backend->shouldLower(*n))
        continue;
      NodeValue r = lowerNode(f, n);
      if (!r)
        continue;
      CHECK(r.getType()->sameShapeAndKind(*n->getType(0)))
          << "lowering " << n->describe() << " produced " << r.getType()->toString();
      passutil::replaceWith(n, r, sweeper);
      any = true;
    }
    if (!any)
      break;
    changed = true;
    sweeper.sweep(f);
  }
  sweeper.sweep(f);
  return changed;
}

} // namespace kiln
