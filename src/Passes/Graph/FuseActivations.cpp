// fuse-activations: Relu, Clip, LeakyRelu, Sigmoid or Tanh of a float Convolution or
// FullyConnected (used only there) becomes one FusedConvolution / FusedFullyConnected
// node, so a backend applies the activation while the result is still in registers. The
// backend decides: the fused node is built, shown to `backend.isOpSupported`, and dropped
// again when it says no. Without a backend nothing is fused.

#include "FuseActivations.h"

#include "PassUtils.h"

#include "kiln/Backend/Backend.h"

namespace kiln {

namespace {

/// The activation name and parameters of \p n, when it is a fusable activation.
bool activationOf(const Node *n, std::string &act, float &alpha, float &beta) {
  alpha = beta = 0;
  switch (n->getKind()) {
  case NodeKind::Relu:
    act = "Relu";
    return true;
  case NodeKind::Sigmoid:
    act = "Sigmoid";
    return true;
  case NodeKind::Tanh:
    act = "Tanh";
    return true;
  case NodeKind::Clip:
    act = "Clip";
    alpha = cast<ClipNode>(n)->getMin();
    beta = cast<ClipNode>(n)->getMax();
    return true;
  case NodeKind::LeakyRelu:
    act = "LeakyRelu";
    alpha = cast<LeakyReluNode>(n)->getAlpha();
    return true;
  default:
    return false;
  }
}

/// The fused node, named after the producer and the activation ("conv1.relu").
Node *fusedNode(Function *f, Node *producer, Node *act, const std::string &name, float alpha,
                float beta) {
  TypeRef ty = act->getType(0);
  std::string fusedName = producer->getName() + "." + act->getName();
  if (auto *c = dyn_cast<ConvolutionNode>(producer))
    return f->createFusedConvolution(fusedName, ty, c->getInput(), c->getFilter(), c->getBias(),
                                     c->getKernels(), c->getStrides(), c->getPads(),
                                     c->getDilations(), c->getGroup(), name, alpha, beta);
  auto *fc = cast<FullyConnectedNode>(producer);
  return f->createFusedFullyConnected(fusedName, ty, fc->getInput(), fc->getWeights(),
                                      fc->getBias(), name, alpha, beta);
}

} // namespace

bool fuseActivations(Function *f, const PassContext &ctx) {
  if (!ctx.backend)
    return false;
  return passutil::rewriteNodes(f, [&](Node *n) {
    std::string act;
    float alpha, beta;
    if (!activationOf(n, act, alpha, beta))
      return NodeValue();
    Node *p = n->getNthInput(0).node;
    if (!isa<ConvolutionNode>(p) && !isa<FullyConnectedNode>(p))
      return NodeValue();
    // Same type in and out (no requantisation), float, and the activation is p's only use.
    if (p->getUsers().size() != 1 || p->getType(0) != n->getType(0) ||
        !isFloatKind(n->getType(0)->kind))
      return NodeValue();
    Node *fused = fusedNode(f, p, n, act, alpha, beta);
    if (!ctx.backend->isOpSupported(*fused)) {
      f->eraseNode(fused);
      return NodeValue();
    }
    return NodeValue(fused);
  });
}

} // namespace kiln
