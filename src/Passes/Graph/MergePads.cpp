// merge-pads: a Pad of only the spatial dims (H, W of NCHW) folds into the window pads of
// the node it feeds, when the padding value is what that node pads with anyway:
//  - Convolution: 0 (float kinds);
//  - MaxPool: -inf (its padding never wins), any kind that is not quantized;
//  - AvgPool: 0, counted in the divisor: CountIncludePads must already be set, or the pool
//    has no padding of its own (then it is set).
// Pooling pads must stay below the kernel size (the pooling type rule), so larger pads
// are left alone. The Pad must have no other user.

#include "MergePads.h"

#include "PassUtils.h"

#include <cmath>

namespace kiln {

namespace {

/// The [top, left, bottom, right] pads of \p pad when it pads only dims 2 and 3 of a
/// rank-4 value; false otherwise.
bool spatialPads(const PadNode *pad, std::vector<dim_t> &out) {
  const std::vector<dim_t> &p = pad->getPads();
  if (pad->getInput().dims().size() != 4 || p.size() != 8)
    return false;
  if (p[0] || p[1] || p[4] || p[5])
    return false;
  out = {p[2], p[3], p[6], p[7]};
  return true;
}

std::vector<dim_t> added(const std::vector<dim_t> &a, const std::vector<dim_t> &b) {
  std::vector<dim_t> r(a.size());
  for (size_t i = 0; i < a.size(); i++)
    r[i] = a[i] + b[i];
  return r;
}

bool fitsKernel(const std::vector<dim_t> &pads, const std::vector<dim_t> &kernels) {
  for (size_t i = 0; i < 4; i++)
    if (pads[i] >= kernels[i % 2])
      return false;
  return true;
}

/// \p n with the Pad that feeds it folded into its own padding, or null.
NodeValue mergedPad(Function *f, Node *n) {
  if (n->getNumInputs() == 0)
    return NodeValue();
  auto *pad = dyn_cast<PadNode>(n->getNthInput(0).node);
  std::vector<dim_t> extra;
  if (!pad || pad->getUsers().size() != 1 || !spatialPads(pad, extra))
    return NodeValue();
  ElemKind kind = pad->getResultType()->kind;
  float value = pad->getValue();
  NodeValue x = pad->getInput();
  if (auto *conv = dyn_cast<ConvolutionNode>(n)) {
    if (!isFloatKind(kind) || value != 0.0f)
      return NodeValue();
    return f->createConvolution(conv->getName(), conv->getResultType(), x, conv->getFilter(),
                                conv->getBias(), conv->getKernels(), conv->getStrides(),
                                added(conv->getPads(), extra), conv->getDilations(),
                                conv->getGroup());
  }
  if (auto *mp = dyn_cast<MaxPoolNode>(n)) {
    std::vector<dim_t> pads = added(mp->getPads(), extra);
    if (isQuantized(kind) || !(std::isinf(value) && value < 0) ||
        !fitsKernel(pads, mp->getKernels()))
      return NodeValue();
    return f->createMaxPool(mp->getName(), mp->getResultType(), x, mp->getKernels(),
                            mp->getStrides(), pads);
  }
  if (auto *ap = dyn_cast<AvgPoolNode>(n)) {
    std::vector<dim_t> pads = added(ap->getPads(), extra);
    bool ownPads = ap->getPads() != std::vector<dim_t>(4, 0);
    if (isQuantized(kind) || value != 0.0f || (ownPads && !ap->getCountIncludePads()) ||
        !fitsKernel(pads, ap->getKernels()))
      return NodeValue();
    return f->createAvgPool(ap->getName(), ap->getResultType(), x, ap->getKernels(),
                            ap->getStrides(), pads, true);
  }
  return NodeValue();
}

} // namespace

bool mergePads(Function *f, const PassContext &) {
  return passutil::rewriteNodes(f, [&](Node *n) { return mergedPad(f, n); });
}

} // namespace kiln
