// fold-batch-norm: inference BatchNormalization is an affine map per channel,
//   y = x * A + B,  A = Scale / sqrt(Var + Epsilon),  B = Bias - Mean * A,
// so when x comes straight from a Convolution (channel axis 1) or a FullyConnected
// (columns, axis 1) whose weights and bias are Constants, A scales the filter rows
// (weight columns) and the bias becomes (bias - Mean) * A + Bias. A and B are computed in
// double. Float only; the producer must have no other user. A weight Constant used only
// by this producer is rewritten in place; a shared one is copied.

#include "FoldBatchNorm.h"

#include "PassUtils.h"

#include <cmath>

namespace kiln {

namespace {

/// The float elements of \p c, or null when it is not a Float constant of \p n elements.
const float *floatsOf(NodeValue v, size_t n) {
  Constant *c = passutil::asConstant(v);
  if (!c || c->getType()->kind != ElemKind::Float || c->getType()->numElements() != n)
    return nullptr;
  return c->getPayload().getHandle<float>().begin();
}

/// A payload of \p c to write: \p c's own when \p user is its only user, else a copy that
/// becomes a new Constant operand \p idx of \p user.
float *writableFloats(Function *f, Node *user, unsigned idx, const std::string &suffix) {
  Constant *c = passutil::asConstant(user->getNthInput(idx));
  if (!passutil::isOnlyUse(c, user)) {
    Constant *copy = passutil::makeConstant(f, user->getName() + suffix, c->getPayload().clone());
    user->setNthInput(idx, NodeValue(copy));
    c = copy;
  }
  return c->getPayloadMutable().getHandle<float>().begin();
}

bool foldInto(Function *f, BatchNormalizationNode *bn, Node *producer, unsigned weightsIdx,
              unsigned biasIdx, bool channelsAreRows) {
  NodeValue in = bn->getInput();
  if (in.getElementType() != ElemKind::Float || bn->getChannelIdx() != 1 ||
      producer->getNumUsesOf(0) != 1 || producer->getUsers().size() != 1)
    return false;
  dim_t channels = in.dims()[1];
  const float *scale = floatsOf(bn->getScale(), channels);
  const float *beta = floatsOf(bn->getBias(), channels);
  const float *mean = floatsOf(bn->getMean(), channels);
  const float *var = floatsOf(bn->getVar(), channels);
  NodeValue w = producer->getNthInput(weightsIdx);
  NodeValue b = producer->getNthInput(biasIdx);
  if (!scale || !beta || !mean || !var || !floatsOf(b, channels) ||
      !floatsOf(w, w.getType()->numElements()))
    return false;

  std::vector<double> a(channels), shift(channels);
  for (dim_t c = 0; c < channels; c++) {
    a[c] = double(scale[c]) / std::sqrt(double(var[c]) + double(bn->getEpsilon()));
    shift[c] = double(beta[c]) - double(mean[c]) * a[c];
  }
  float *wp = writableFloats(f, producer, weightsIdx, ".folded_weights");
  float *bp = writableFloats(f, producer, biasIdx, ".folded_bias");
  dim_t total = w.getType()->numElements();
  if (channelsAreRows) { // Convolution filter [O, C/g, kH, kW]
    dim_t per = total / channels;
    for (dim_t c = 0; c < channels; c++)
      for (dim_t i = 0; i < per; i++)
        wp[c * per + i] = float(double(wp[c * per + i]) * a[c]);
  } else { // FullyConnected weights [K, M]
    dim_t rows = total / channels;
    for (dim_t k = 0; k < rows; k++)
      for (dim_t c = 0; c < channels; c++)
        wp[k * channels + c] = float(double(wp[k * channels + c]) * a[c]);
  }
  for (dim_t c = 0; c < channels; c++)
    bp[c] = float(double(bp[c]) * a[c] + shift[c]);
  return true;
}

} // namespace

bool foldBatchNorms(Function *f, const PassContext &) {
  return passutil::rewriteNodes(f, [&](Node *n) {
    auto *bn = dyn_cast<BatchNormalizationNode>(n);
    if (!bn)
      return NodeValue();
    Node *producer = bn->getInput().node;
    bool folded = false;
    if (auto *conv = dyn_cast<ConvolutionNode>(producer))
      folded = foldInto(f, bn, conv, ConvolutionNode::FilterIdx, ConvolutionNode::BiasIdx, true);
    else if (auto *fc = dyn_cast<FullyConnectedNode>(producer))
      folded =
          fc->getResultType()->rank() == 2 &&
          foldInto(f, bn, fc, FullyConnectedNode::WeightsIdx, FullyConnectedNode::BiasIdx, false);
    return folded ? NodeValue(producer) : NodeValue();
  });
}

} // namespace kiln
