// remove-no-ops: nodes that return their input unchanged are replaced by it:
// a Slice of everything, a Reshape to the same dims, an identity Transpose, a Concat of
// one operand, a Pad of zeros, a Tile by ones, a Broadcast to the input's own dims, and
// 1x1 pooling with stride 1 and no padding. The result type must equal the input's
// (quantized pooling may rescale).

#include "RemoveNoOps.h"

#include "PassUtils.h"

#include <algorithm>

namespace kiln {

namespace {

bool allEqual(const std::vector<dim_t> &v, dim_t x) {
  return std::all_of(v.begin(), v.end(), [&](dim_t e) { return e == x; });
}

bool isUnitWindow(const std::vector<dim_t> &kernels, const std::vector<dim_t> &strides,
                  const std::vector<dim_t> &pads) {
  return allEqual(kernels, 1) && allEqual(strides, 1) && allEqual(pads, 0);
}

/// The operand \p n passes through unchanged, or null.
NodeValue passThrough(Node *n) {
  switch (n->getKind()) {
  case NodeKind::Slice: {
    auto *s = cast<SliceNode>(n);
    const Dims &d = s->getInput().dims();
    for (size_t i = 0; i < d.size(); i++)
      if (s->getStarts()[i] != 0 || s->getEnds()[i] != d[i])
        return NodeValue();
    return s->getInput();
  }
  case NodeKind::Reshape:
    return n->getNthInput(0);
  case NodeKind::Transpose:
    return passutil::isIdentityPermutation(cast<TransposeNode>(n)->getShuffle()) ? n->getNthInput(0)
                                                                                 : NodeValue();
  case NodeKind::Concat:
    return n->getNumInputs() == 1 ? n->getNthInput(0) : NodeValue();
  case NodeKind::Pad:
    return allEqual(cast<PadNode>(n)->getPads(), 0) ? n->getNthInput(0) : NodeValue();
  case NodeKind::Tile:
    return allEqual(cast<TileNode>(n)->getRepeats(), 1) ? n->getNthInput(0) : NodeValue();
  case NodeKind::Broadcast:
    return n->getNthInput(0);
  case NodeKind::MaxPool: {
    auto *p = cast<MaxPoolNode>(n);
    return isUnitWindow(p->getKernels(), p->getStrides(), p->getPads()) ? p->getInput()
                                                                        : NodeValue();
  }
  case NodeKind::AvgPool: {
    auto *p = cast<AvgPoolNode>(n);
    return isUnitWindow(p->getKernels(), p->getStrides(), p->getPads()) ? p->getInput()
                                                                        : NodeValue();
  }
  default:
    return NodeValue();
  }
}

} // namespace

bool removeNoOps(Function *f, const PassContext &) {
  return passutil::rewriteNodes(f, [](Node *n) {
    if (n->getNumResults() != 1)
      return NodeValue();
    NodeValue in = passThrough(n);
    // Same type (pointer equality of uniqued types): same dims, kind and quantization.
    return in && in.getType() == n->getType(0) ? in : NodeValue();
  });
}

} // namespace kiln
