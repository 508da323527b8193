// merge-reshapes: Reshape(Reshape(x)) is one Reshape of x (row-major order is unchanged
// by any reshape), and a Reshape back to x's own dims is x.

#include "MergeReshapes.h"

#include "PassUtils.h"

namespace kiln {

bool mergeReshapes(Function *f, const PassContext &) {
  return passutil::rewriteNodes(f, [&](Node *n) {
    auto *r = dyn_cast<ReshapeNode>(n);
    auto *inner = r ? dyn_cast<ReshapeNode>(r->getInput().node) : nullptr;
    if (!inner)
      return NodeValue();
    NodeValue x = inner->getInput();
    return x.dims() == r->getResultType()->dims
               ? x
               : NodeValue(f->createReshape(r->getName(), x, r->getDims()));
  });
}

} // namespace kiln
