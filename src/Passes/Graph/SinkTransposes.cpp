// sink-transposes: move Transposes toward the outputs so that pairs meet and cancel.
//  - Transpose(Transpose(x, s1), s2) is Transpose(x, s1∘s2), or x when that is the
//    identity.
//  - Transpose(Constant) is a new, transposed Constant.
//  - An element-wise node whose non-splat operands are all Transposes with one shuffle
//    (each used only there) computes on the untransposed values and is transposed once:
//    U(T(x)) -> T(U(x)); B(T(x), T(y)) -> T(B(x, y)); Splat and Constant operands are
//    re-shaped (inverse-transposed) to match.
//  - BatchNormalization(Transpose(x)) is Transpose(BatchNormalization'(x)) with the
//    channel axis mapped through the shuffle.

#include "SinkTransposes.h"

#include "PassUtils.h"

namespace kiln {

namespace {

using passutil::inversePermutation;
using passutil::permuteDims;

/// Operand \p v of an element-wise node rewritten into the untransposed domain of a
/// Transpose with \p shuffle; null when it cannot be.
NodeValue untransposed(Function *f, NodeValue v, const std::vector<dim_t> &shuffle,
                       const std::string &name) {
  if (auto *t = dyn_cast<TransposeNode>(v.node))
    return t->getShuffle() == shuffle ? t->getInput() : NodeValue();
  std::vector<dim_t> inv = inversePermutation(shuffle);
  if (auto *s = dyn_cast<SplatNode>(v.node))
    return passutil::makeSplat(f, name, Type::withDims(*v.getType(), permuteDims(v.dims(), inv)),
                               s->getValue());
  if (auto *c = dyn_cast<Constant>(v.node))
    return passutil::makeConstant(f, c->getName() + ".untransposed",
                                  passutil::transposeTensor(c->getPayload(), inv));
  return NodeValue();
}

/// Element-wise \p n computed on the untransposed operands and transposed once, or null.
NodeValue sinkBelowElementwise(Function *f, Node *n) {
  if (!n->isDataParallel() || n->getNumResults() != 1 || n->getNumInputs() == 0)
    return NodeValue();
  // All Transposes among the operands share one shuffle and are used only by n.
  const std::vector<dim_t> *shuffle = nullptr;
  for (unsigned i = 0; i < n->getNumInputs(); i++) {
    auto *t = dyn_cast<TransposeNode>(n->getNthInput(i).node);
    if (!t)
      continue;
    if (shuffle && t->getShuffle() != *shuffle)
      return NodeValue();
    for (const NodeUse &u : t->getUsers())
      if (u.user != n)
        return NodeValue();
    shuffle = &t->getShuffle();
  }
  if (!shuffle)
    return NodeValue();
  std::vector<dim_t> sh = *shuffle;
  // Rewriting splat or constant operands costs a node each; only worth it when at least
  // one operand is a real Transpose (checked above).
  for (unsigned i = 0; i < n->getNumInputs(); i++) {
    Node *in = n->getNthInput(i).node;
    if (!isa<TransposeNode>(in) && !isa<SplatNode>(in) && !isa<Constant>(in))
      return NodeValue();
  }
  std::vector<NodeValue> ins;
  for (unsigned i = 0; i < n->getNumInputs(); i++)
    ins.push_back(untransposed(f, n->getNthInput(i), sh, n->getName() + ".splat"));
  Dims inner = ins[0].dims();
  TypeRef ty = passutil::withDims(f, *n->getType(0), inner);
  Node *c = passutil::cloneWith(f, n, ins, {ty});
  return f->createTranspose(n->getName() + ".transpose", NodeValue(c), sh);
}

/// \p bn moved below the Transpose that feeds it, or null.
NodeValue sinkBelowBatchNorm(Function *f, BatchNormalizationNode *bn) {
  auto *t = dyn_cast<TransposeNode>(bn->getInput().node);
  if (!t || t->getUsers().size() != 1)
    return NodeValue();
  const std::vector<dim_t> &sh = t->getShuffle();
  std::vector<NodeValue> ins;
  for (unsigned i = 0; i < bn->getNumInputs(); i++)
    ins.push_back(bn->getNthInput(i));
  ins[0] = t->getInput();
  auto *c = cast<BatchNormalizationNode>(passutil::cloneWith(
      f, bn, ins, {passutil::withDims(f, *bn->getType(0), t->getInput().dims())}));
  c->setChannelIdx(sh[bn->getChannelIdx()]);
  return f->createTranspose(bn->getName() + ".transpose", NodeValue(c), sh);
}

} // namespace

bool sinkTransposes(Function *f, const PassContext &) {
  return passutil::rewriteNodes(f, [&](Node *n) -> NodeValue {
    if (auto *t = dyn_cast<TransposeNode>(n)) {
      if (auto *inner = dyn_cast<TransposeNode>(t->getInput().node)) {
        std::vector<dim_t> composed;
        for (dim_t s : t->getShuffle())
          composed.push_back(inner->getShuffle()[s]);
        NodeValue x = inner->getInput();
        return passutil::isIdentityPermutation(composed)
                   ? x
                   : NodeValue(f->createTranspose(t->getName(), x, composed));
      }
      if (auto *c = dyn_cast<Constant>(t->getInput().node))
        return passutil::makeConstant(f, c->getName() + ".transposed",
                                      passutil::transposeTensor(c->getPayload(), t->getShuffle()));
      return NodeValue();
    }
    if (auto *bn = dyn_cast<BatchNormalizationNode>(n))
      return sinkBelowBatchNorm(f, bn);
    return sinkBelowElementwise(f, n);
  });
}

} // namespace kiln
