// merge-reshapes: Reshape(Reshape(x)) is one Reshape of x (row-major order is unchanged
// by any reshape), and a Reshape back to x's own dims is x.

#include "MergeReshapes.h"

#include "PassUtils.h"

namespace kiln {

bool mergeReshapes(Function *f, const PassContext &) {
  passutil::Sweeper sweeper;
  bool changed = false;
  for (Node *n : passutil::topoOrder(*f)) {
    auto *r = dyn_cast<ReshapeNode>(n);
    if (!r || !r->hasUsers())
      continue;
    auto *inner = dyn_cast<ReshapeNode>(r->getInput().node);
    if (!inner)
      continue;
    NodeValue x = inner->getInput();
    NodeValue repl = x.dims() == r->getResultType()->dims
                         ? x
                         : NodeValue(f->createReshape(r->getName(), x, r->getDims()));
    passutil::replaceWith(r, repl, sweeper);
    changed = true;
  }
  sweeper.sweep(f);
  return changed;
}

} // namespace kiln
