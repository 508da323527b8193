// fuse-bias-add: Add(Convolution, per-channel constant) becomes a Convolution whose bias
// absorbed the constant; likewise Add(FullyConnected, per-column constant) and
// BatchedAdd(FullyConnected, constant slice). "Per-channel constant" is a Splat, or a
// Broadcast of a Constant whose dims, right-aligned to the result, are 1 everywhere except
// the channel axis. Float only; the producer must have no other user.

#include "FuseBiasAdd.h"

#include "PassUtils.h"

namespace kiln {

namespace {

/// Per-channel values of \p v for a result of \p dims with channels along axis 1; empty
/// when \p v is not such a constant.
std::vector<float> perChannel(NodeValue v, const Dims &dims) {
  dim_t channels = dims[1];
  if (auto *s = dyn_cast<SplatNode>(v.node)) {
    if (v.getType()->kind != ElemKind::Float)
      return {};
    return std::vector<float>(channels, s->getValue());
  }
  auto *b = dyn_cast<BroadcastNode>(v.node);
  Constant *c = b ? passutil::asConstant(b->getInput()) : nullptr;
  if (!c || c->getType()->kind != ElemKind::Float)
    return {};
  // Right-align the constant's dims against the result's: 1 everywhere but the channels.
  const Dims &cd = c->getType()->dims;
  if (cd.size() > dims.size())
    return {};
  size_t lead = dims.size() - cd.size();
  for (size_t i = 0; i < dims.size(); i++) {
    dim_t d = i < lead ? 1 : cd[i - lead];
    if (i == 1 ? (d != channels && d != 1) : d != 1)
      return {};
  }
  auto h = c->getPayload().getHandle<float>();
  if (c->getType()->numElements() == 1)
    return std::vector<float>(channels, h.raw(0));
  return std::vector<float>(h.begin(), h.end());
}

bool fuse(Function *f, Node *producer, unsigned biasIdx, const std::vector<float> &add) {
  if (add.empty() || producer->getNumUsesOf(0) != 1)
    return false;
  Constant *bias = passutil::asConstant(producer->getNthInput(biasIdx));
  if (!bias || bias->getType()->kind != ElemKind::Float ||
      bias->getType()->numElements() != add.size())
    return false;
  if (!passutil::isOnlyUse(bias, producer)) {
    bias =
        passutil::makeConstant(f, producer->getName() + ".fused_bias", bias->getPayload().clone());
    producer->setNthInput(biasIdx, NodeValue(bias));
  }
  auto h = bias->getPayloadMutable().getHandle<float>();
  for (size_t i = 0; i < add.size(); i++)
    h.raw(i) += add[i];
  return true;
}

/// The bias operand index of \p n when it is a float Convolution or 2-D FullyConnected.
bool biasIndexOf(const Node *n, unsigned &idx) {
  if (n->getNumResults() != 1 || n->getType(0)->kind != ElemKind::Float)
    return false;
  if (isa<ConvolutionNode>(n)) {
    idx = ConvolutionNode::BiasIdx;
    return true;
  }
  if (isa<FullyConnectedNode>(n) && n->getType(0)->rank() == 2) {
    idx = FullyConnectedNode::BiasIdx;
    return true;
  }
  return false;
}

} // namespace

bool fuseBiasAdds(Function *f, const PassContext &) {
  return passutil::rewriteNodes(f, [&](Node *n) {
    if (auto *ba = dyn_cast<BatchedAddNode>(n)) {
      unsigned idx;
      Node *p = ba->getBatch().node;
      Constant *slice = passutil::asConstant(ba->getSlice());
      if (isa<FullyConnectedNode>(p) && biasIndexOf(p, idx) && slice &&
          slice->getType()->kind == ElemKind::Float &&
          slice->getType()->dims == Dims{p->getType(0)->dims[1]}) {
        auto h = slice->getPayload().getHandle<float>();
        if (fuse(f, p, idx, std::vector<float>(h.begin(), h.end())))
          return NodeValue(p);
      }
      return NodeValue();
    }
    auto *add = dyn_cast<AddNode>(n);
    if (!add)
      return NodeValue();
    for (unsigned side = 0; side < 2; side++) {
      Node *p = add->getNthInput(side).node;
      NodeValue other = add->getNthInput(1 - side);
      unsigned idx;
      if (biasIndexOf(p, idx) && fuse(f, p, idx, perChannel(other, p->getType(0)->dims)))
        return NodeValue(p);
    }
    return NodeValue();
  });
}

} // namespace kiln
