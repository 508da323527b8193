// fuse-activations: a float Convolution or FullyConnected (used only there), then an Add
// of its result with another tensor of the same type (used only there, optional), then
// Relu, Clip, LeakyRelu, Sigmoid or Tanh (optional) becomes one FusedConvolution /
// FusedFullyConnected node with the other tensor as its Residual operand and the
// activation ("None" when there is none), so a backend adds and activates while the result
// is still in registers. The backend decides: each fused node is built, shown to
// `backend.isOpSupported`, and dropped again when it says no. Without a backend nothing is
// fused.
//
// Nodes are visited operands first, so the Add fuses first (activation None) and the
// activation then fuses into that node.

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

/// The residual operands of a fused node (none or one).
std::vector<NodeValue> residualOf(const Node *p) {
  if (auto *c = dyn_cast<FusedConvolutionNode>(p))
    return c->getResidual();
  if (auto *fc = dyn_cast<FusedFullyConnectedNode>(p))
    return fc->getResidual();
  return {};
}

/// The activation of a fused node.
const std::string &activationOfFused(const Node *p) {
  if (auto *c = dyn_cast<FusedConvolutionNode>(p))
    return c->getActivation();
  return cast<FusedFullyConnectedNode>(p)->getActivation();
}

/// A FusedConvolution with \p c's operands and attributes (\p c a Convolution or a
/// FusedConvolution), \p residual and activation \p act.
template <typename ConvT>
Node *fusedConvolution(Function *f, const std::string &name, TypeRef ty, const ConvT *c,
                       const std::vector<NodeValue> &residual, const std::string &act,
                       float alpha, float beta) {
  return f->createFusedConvolution(name, ty, c->getInput(), c->getFilter(), c->getBias(),
                                   residual, c->getKernels(), c->getStrides(), c->getPads(),
                                   c->getDilations(), c->getGroup(), act, alpha, beta);
}

/// The same for a FullyConnected or a FusedFullyConnected.
template <typename FCT>
Node *fusedFullyConnected(Function *f, const std::string &name, TypeRef ty, const FCT *fc,
                          const std::vector<NodeValue> &residual, const std::string &act,
                          float alpha, float beta) {
  return f->createFusedFullyConnected(name, ty, fc->getInput(), fc->getWeights(), fc->getBias(),
                                      residual, act, alpha, beta);
}

/// The fused node of \p producer (a Convolution, a FullyConnected, or a fused node whose
/// operands it keeps) with \p residual and activation \p act, named "producer.last" after
/// the node it replaces.
Node *fusedNode(Function *f, Node *producer, Node *last, const std::vector<NodeValue> &residual,
                const std::string &act, float alpha, float beta) {
  TypeRef ty = last->getType(0);
  std::string name = producer->getName() + "." + last->getName();
  if (auto *c = dyn_cast<ConvolutionNode>(producer))
    return fusedConvolution(f, name, ty, c, residual, act, alpha, beta);
  if (auto *c = dyn_cast<FusedConvolutionNode>(producer))
    return fusedConvolution(f, name, ty, c, residual, act, alpha, beta);
  if (auto *fc = dyn_cast<FusedFullyConnectedNode>(producer))
    return fusedFullyConnected(f, name, ty, fc, residual, act, alpha, beta);
  return fusedFullyConnected(f, name, ty, cast<FullyConnectedNode>(producer), residual, act,
                             alpha, beta);
}

bool isGemm(const Node *p) { return isa<ConvolutionNode>(p) || isa<FullyConnectedNode>(p); }

/// True when \p p's result can be folded into its user \p n: p's only use, the same type
/// in and out (no requantisation), float.
bool fusable(const Node *p, const Node *n) {
  return p->getUsers().size() == 1 && p->getType(0) == n->getType(0) &&
         isFloatKind(n->getType(0)->kind);
}

/// What \p n fuses into: its producer, the residual and the activation; false if nothing.
bool match(Node *n, Node *&producer, std::vector<NodeValue> &residual, std::string &act,
           float &alpha, float &beta) {
  if (auto *add = dyn_cast<AddNode>(n)) {
    // Convolution/FullyConnected + other, or other + Convolution/FullyConnected.
    for (unsigned side = 0; side < 2; side++) {
      NodeValue mine = side ? add->getRHS() : add->getLHS();
      NodeValue other = side ? add->getLHS() : add->getRHS();
      if (!isGemm(mine.node) || mine.node == other.node || !fusable(mine.node, n) ||
          other.getType() != n->getType(0))
        continue;
      producer = mine.node;
      residual = {other};
      act = "None";
      alpha = beta = 0;
      return true;
    }
    return false;
  }
  if (!activationOf(n, act, alpha, beta))
    return false;
  Node *p = n->getNthInput(0).node;
  if (!fusable(p, n))
    return false;
  if (isGemm(p)) {
    producer = p;
    residual.clear();
    return true;
  }
  // A fused Add (activation None) takes the activation too.
  if ((isa<FusedConvolutionNode>(p) || isa<FusedFullyConnectedNode>(p)) &&
      activationOfFused(p) == "None") {
    producer = p;
    residual = residualOf(p);
    return true;
  }
  return false;
}

} // namespace

bool fuseActivations(Function *f, const PassContext &ctx) {
  if (!ctx.backend)
    return false;
  return passutil::rewriteNodes(f, [&](Node *n) {
    Node *producer = nullptr;
    std::vector<NodeValue> residual;
    std::string act;
    float alpha, beta;
    if (!match(n, producer, residual, act, alpha, beta))
      return NodeValue();
    Node *fused = fusedNode(f, producer, n, residual, act, alpha, beta);
    if (!ctx.backend->isOpSupported(*fused)) {
      f->eraseNode(fused);
      return NodeValue();
    }
    return NodeValue(fused);
  });
}

} // namespace kiln
