// fuse-activations: a float Convolution or FullyConnected (used only there), then an Add
// of its result with another tensor of the same type (used only there, optional), then an
// activation (optional) becomes one FusedConvolution / FusedFullyConnected node with the
// other tensor as its Residual operand and the activation ("None" when there is none), so
// a backend adds and activates while the result is still in registers or cache. The
// backend decides: each fused node is built, shown to `backend.isOpSupported`, and dropped
// again when it says no. Without a backend nothing is fused.
//
// The activation is one node (Relu, Clip, LeakyRelu, Sigmoid, Tanh, Swish, HardSwish,
// Gelu, a PRelu of one slope) or a chain of element-wise nodes that computes one of them
// from the result alone, as importers write them: x * Sigmoid(x) (Swish),
// Clip(x * a + b, 0, 1) (HardSigmoid), x * HardSigmoid(x) (HardSwish), and
// x * (Erf(x / sqrt 2) + 1) * 0.5 (Gelu). Every node of the chain and the producer must be
// used only inside the chain. A MatMul with a constant 2-D right-hand side counts as a
// FullyConnected without bias, also behind a Reshape (the chain then runs on the MatMul's
// 2-D result, and the Reshape follows the fused node).
//
// Nodes are visited operands first, so the Add fuses first (activation None) and the
// activation then fuses into that node.
//
// Quantized: a Relu or Clip of an int8 layer (a Convolution or FullyConnected on Int8Q,
// a ChannelwiseQuantizedConvolution or ChannelwiseQuantizedFullyConnected with 8-bit result
// and no activation yet; the layer used only there) becomes the layer with the activation
// and the Relu's or Clip's result type: a FusedConvolution / FusedFullyConnected on Int8Q,
// or the channelwise node with its Activation set. The layer then requantizes straight to
// the activation's grid and saturates at its bounds, one rounding instead of two: where
// the activation's grid is the layer's (the quantizer's clamp), the numbers are unchanged;
// on another grid the result may differ from the unfused pair by one step.
//
// Squeeze-and-excitation: a Convolution (group 1, batch 1, constant filter) whose input is
// Mul(x, Broadcast(s)) with s of shape [1, C, 1, 1] (the Mul used only there) convolves x
// with its filter scaled by s per input channel instead, when the filter has fewer
// elements than x: the scaled activation is then never written.

#include "FuseActivations.h"

#include "PassUtils.h"

#include "kiln/Backend/Backend.h"

#include <algorithm>
#include <cmath>

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
  case NodeKind::Swish:
    act = "Swish";
    return true;
  case NodeKind::HardSwish:
    act = "HardSwish";
    alpha = 1.0f / 6.0f;
    beta = 0.5f;
    return true;
  case NodeKind::Gelu:
    act = cast<GeluNode>(n)->getApproximate() ? "GeluTanh" : "Gelu";
    return true;
  case NodeKind::PRelu: {
    double slope;
    if (!passutil::getUniformValue(cast<PReluNode>(n)->getSlope(), slope))
      return false;
    act = "LeakyRelu";
    alpha = float(slope);
    return true;
  }
  default:
    return false;
  }
}

/// True when \p v is a known uniform value within a relative 1e-6 of \p want.
bool uniformNear(NodeValue v, double want) {
  double got;
  return passutil::getUniformValue(v, got) && std::fabs(got - want) <= 1e-6 * std::fabs(want);
}

/// An activation written as a chain of element-wise nodes ending at \p n, applied to one
/// value \p x: its name, parameters and the chain's nodes other than n.
struct Chain {
  NodeValue x;
  std::string act;
  float alpha = 0, beta = 0;
  std::vector<Node *> inner;
};

/// The operand of the binary node \p n that is not \p other's side: with \p pred true for
/// one operand, sets \p match to it and \p rest to the other.
template <typename Pred>
bool eitherSide(const Node *n, Pred pred, NodeValue &match, NodeValue &rest) {
  for (unsigned side = 0; side < 2; side++) {
    NodeValue a = n->getNthInput(side), b = n->getNthInput(1 - side);
    if (pred(a)) {
      match = a, rest = b;
      return true;
    }
  }
  return false;
}

/// Clip(x * a + b, 0, 1) at \p n: x, a, b and the chain's nodes.
bool hardSigmoidChain(Node *n, Chain &c) {
  auto *clip = dyn_cast<ClipNode>(n);
  if (!clip || clip->getMin() != 0.0f || clip->getMax() != 1.0f)
    return false;
  Node *add = clip->getInput().node;
  if (!isa<AddNode>(add))
    return false;
  NodeValue bv, prod, av, x;
  double a, b;
  if (!eitherSide(add, [&](NodeValue v) { return passutil::getUniformValue(v, b); }, bv, prod) ||
      !isa<MulNode>(prod.node) ||
      !eitherSide(prod.node, [&](NodeValue v) { return passutil::getUniformValue(v, a); }, av, x))
    return false;
  c.x = x;
  c.act = "HardSigmoid";
  c.alpha = float(a), c.beta = float(b);
  c.inner = {add, prod.node};
  return true;
}

/// The chains of the file comment ending at \p n.
bool chainOf(Node *n, Chain &c) {
  if (hardSigmoidChain(n, c))
    return true;
  if (!isa<MulNode>(n))
    return false;
  NodeValue l = n->getNthInput(0), r = n->getNthInput(1);
  for (unsigned side = 0; side < 2; side++) {
    NodeValue x = side ? r : l, g = side ? l : r;
    // x * Sigmoid(x).
    if (auto *sg = dyn_cast<SigmoidNode>(g.node)) {
      if (sg->getInput() == x) {
        c = {x, "Swish", 0, 0, {sg}};
        return true;
      }
    }
    // x * HardSigmoid(x).
    Chain h;
    if (hardSigmoidChain(g.node, h) && h.x == x) {
      c = {x, "HardSwish", h.alpha, h.beta, h.inner};
      c.inner.push_back(g.node);
      return true;
    }
  }
  // (x * (Erf(x / sqrt 2) + 1)) * 0.5.
  NodeValue half, m;
  if (!eitherSide(n, [](NodeValue v) { return uniformNear(v, 0.5); }, half, m) ||
      !isa<MulNode>(m.node))
    return false;
  for (unsigned side = 0; side < 2; side++) {
    NodeValue x = m.node->getNthInput(side), e = m.node->getNthInput(1 - side);
    NodeValue one, erf;
    if (!isa<AddNode>(e.node) ||
        !eitherSide(e.node, [](NodeValue v) { return uniformNear(v, 1.0); }, one, erf) ||
        !isa<ErfNode>(erf.node))
      continue;
    Node *z = cast<ErfNode>(erf.node)->getInput().node;
    bool scaled = false;
    if (auto *d = dyn_cast<DivNode>(z))
      scaled = d->getLHS() == x && uniformNear(d->getRHS(), std::sqrt(2.0));
    else if (auto *mz = dyn_cast<MulNode>(z)) {
      NodeValue k, y;
      scaled = eitherSide(mz, [](NodeValue v) { return uniformNear(v, std::sqrt(0.5)); }, k, y) &&
               y == x;
    }
    if (!scaled)
      continue;
    c = {x, "Gelu", 0, 0, {m.node, e.node, erf.node, z}};
    return true;
  }
  return false;
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

/// True when every use of \p n is by a node of \p chain or by \p last.
bool usedOnlyBy(const Node *n, const std::vector<Node *> &chain, const Node *last) {
  for (const NodeUse &u : n->getUsers())
    if (u.user != last && std::find(chain.begin(), chain.end(), u.user) == chain.end())
      return false;
  return true;
}

/// A MatMul whose right-hand side is a constant matrix: a FullyConnected without bias.
bool isConstantMatMul(const Node *p) {
  auto *mm = dyn_cast<MatMulNode>(p);
  return mm && passutil::asConstant(mm->getRHS()) && mm->getLHS().dims().size() == 2 &&
         mm->getRHS().dims().size() == 2 && isFloatKind(mm->getType(0)->kind);
}

/// A 2-D matrix product that may stand behind a Reshape and take a bias or an activation:
/// a constant-weight MatMul, a FullyConnected, or a FusedFullyConnected with neither
/// residual nor activation.
bool isPlainMatrixProduct(const Node *q) {
  if (isConstantMatMul(q) || isa<FullyConnectedNode>(q))
    return true;
  auto *fc = dyn_cast<FusedFullyConnectedNode>(q);
  return fc && fc->getResidual().empty() && fc->getActivation() == "None";
}

/// What a node fuses into (see match).
struct Match {
  Node *producer = nullptr;
  /// The Reshape between a matrix product and the chain, or null.
  Node *reshape = nullptr;
  std::vector<NodeValue> residual;
  /// A bias [M] for a matrix product that has none yet (a MatMul's bias Add), or empty.
  NodeValue bias;
  std::string act = "None";
  float alpha = 0, beta = 0;
  /// The nodes other than the matched one that the fused node replaces.
  std::vector<Node *> chain;
};

/// A constant [.., M] with M elements broadcast to \p n's type: a bias row, as a value of
/// shape [M] in \p bias.
bool biasRow(Function *f, NodeValue v, const Node *n, dim_t M, NodeValue &bias) {
  auto *bc = dyn_cast<BroadcastNode>(v.node);
  if (!bc || bc->getType(0) != n->getType(0))
    return false;
  Constant *c = passutil::asConstant(bc->getInput());
  if (!c || c->getType()->numElements() != M || c->getType()->dims.empty() ||
      c->getType()->dims[c->getType()->dims.size() - 1] != M ||
      c->getType()->kind != n->getType(0)->kind)
    return false;
  bias = c->getType()->dims.size() == 1
             ? NodeValue(c)
             : NodeValue(f->createReshape(c->getName() + ".row", NodeValue(c), {M}));
  return true;
}

/// What \p n fuses into: its producer, the residual, the activation, a Reshape the
/// producer's result goes through on its way (a matrix product's), and the chain's nodes;
/// false if nothing.
bool match(Function *f, Node *n, Match &m) {
  m = Match();
  if (auto *add = dyn_cast<AddNode>(n)) {
    for (unsigned side = 0; side < 2; side++) {
      NodeValue mine = side ? add->getRHS() : add->getLHS();
      NodeValue other = side ? add->getLHS() : add->getRHS();
      // Convolution/FullyConnected + other, or other + Convolution/FullyConnected.
      if (isGemm(mine.node) && mine.node != other.node && fusable(mine.node, n) &&
          other.getType() == n->getType(0)) {
        m.producer = mine.node;
        m.residual = {other};
        return true;
      }
      // A MatMul (behind a Reshape) plus a broadcast constant row: its bias.
      Node *q = mine.node;
      Node *rs = nullptr;
      if (isa<ReshapeNode>(q) && q->getUsers().size() == 1) {
        rs = q;
        q = cast<ReshapeNode>(q)->getInput().node;
      }
      if (!isConstantMatMul(q) || q->getUsers().size() != 1 ||
          (!rs && mine.getType() != n->getType(0)))
        continue;
      if (biasRow(f, other, n, q->getType(0)->dims[1], m.bias)) {
        m.producer = q;
        m.reshape = rs;
        return true;
      }
    }
    return false;
  }
  NodeValue x;
  Chain c;
  // A chain first: its last node may be an activation too (HardSigmoid's Clip).
  if (chainOf(n, c)) {
    x = c.x, m.act = c.act, m.alpha = c.alpha, m.beta = c.beta, m.chain = c.inner;
    for (Node *k : m.chain)
      if (!usedOnlyBy(k, m.chain, n) || k->getType(0) != n->getType(0))
        return false;
  } else if (activationOf(n, m.act, m.alpha, m.beta)) {
    x = n->getNthInput(0);
  } else {
    return false;
  }
  Node *p = x.node;
  if (x.getType() != n->getType(0) || !isFloatKind(n->getType(0)->kind) ||
      !usedOnlyBy(p, m.chain, n))
    return false;
  if (auto *rs = dyn_cast<ReshapeNode>(p)) {
    Node *q = rs->getInput().node;
    if (!isPlainMatrixProduct(q) || q->getUsers().size() != 1)
      return false;
    m.reshape = rs;
    m.producer = q;
    return true;
  }
  if (isGemm(p) || isConstantMatMul(p)) {
    m.producer = p;
    return true;
  }
  // A fused Add (activation None) takes the activation too.
  if ((isa<FusedConvolutionNode>(p) || isa<FusedFullyConnectedNode>(p)) &&
      activationOfFused(p) == "None") {
    m.producer = p;
    m.residual = residualOf(p);
    return true;
  }
  return false;
}

/// The fused node of a match whose producer is a matrix product behind a Reshape or a
/// MatMul: a FusedFullyConnected on its 2-D operands.
Node *fusedMatrixProduct(Function *f, const Match &m, const std::string &name) {
  Node *q = m.producer;
  TypeRef ty = q->getType(0);
  NodeValue in, w, bias = m.bias;
  if (auto *mm = dyn_cast<MatMulNode>(q)) {
    in = mm->getLHS(), w = mm->getRHS();
    if (!bias) {
      Type bt = Type::withDims(*ty, Dims({ty->dims[1]}));
      bias = passutil::makeConstant(f, q->getName() + ".zero_bias", Tensor(bt));
    }
  } else if (auto *fc = dyn_cast<FullyConnectedNode>(q)) {
    in = fc->getInput(), w = fc->getWeights(), bias = fc->getBias();
  } else {
    auto *ffc = cast<FusedFullyConnectedNode>(q);
    in = ffc->getInput(), w = ffc->getWeights(), bias = ffc->getBias();
  }
  return f->createFusedFullyConnected(name, ty, in, w, bias, m.residual, m.act, m.alpha,
                                      m.beta);
}

/// The quantized layer \p p (see the file comment) with activation \p act, the result type
/// \p ty and the name \p name, or null when p is not one.
Node *quantizedLayerWith(Function *f, Node *p, TypeRef ty, const std::string &name,
                         const std::string &act, float alpha, float beta) {
  const ElemKind k = p->getType(0)->kind;
  if (auto *c = dyn_cast<ChannelwiseQuantizedConvolutionNode>(p)) {
    if (c->getActivation() != "None" || (k != ElemKind::Int8Q && k != ElemKind::UInt8Q))
      return nullptr;
    return f->createChannelwiseQuantizedConvolution(
        name, ty, c->getInput(), c->getFilter(), c->getFilterScales(), c->getFilterOffsets(),
        c->getBias(), c->getKernels(), c->getStrides(), c->getPads(), c->getDilations(),
        c->getGroup(), act, alpha, beta);
  }
  if (auto *fc = dyn_cast<ChannelwiseQuantizedFullyConnectedNode>(p)) {
    if (fc->getActivation() != "None" || (k != ElemKind::Int8Q && k != ElemKind::UInt8Q))
      return nullptr;
    return f->createChannelwiseQuantizedFullyConnected(
        name, ty, fc->getInput(), fc->getWeights(), fc->getWeightScales(),
        fc->getWeightOffsets(), fc->getBias(), act, alpha, beta);
  }
  if (k != ElemKind::Int8Q || ty->kind != ElemKind::Int8Q)
    return nullptr;
  if (auto *c = dyn_cast<ConvolutionNode>(p))
    return fusedConvolution(f, name, ty, c, {}, act, alpha, beta);
  if (auto *fc = dyn_cast<FullyConnectedNode>(p))
    return fusedFullyConnected(f, name, ty, fc, {}, act, alpha, beta);
  return nullptr;
}

/// The quantized rewrite of the file comment at the Relu or Clip \p n, or null.
Node *fuseQuantizedActivation(Function *f, Node *n) {
  std::string act;
  float alpha, beta;
  if ((!isa<ReluNode>(n) && !isa<ClipNode>(n)) || !isQuantized(n->getType(0)->kind) ||
      !activationOf(n, act, alpha, beta))
    return nullptr;
  Node *p = n->getNthInput(0).node;
  if (p->getUsers().size() != 1)
    return nullptr;
  return quantizedLayerWith(f, p, n->getType(0), p->getName() + "." + n->getName(), act, alpha,
                            beta);
}

/// The squeeze-and-excitation rewrite of the file comment at the Convolution \p n, or null.
Node *foldChannelScale(Function *f, Node *n) {
  auto *conv = dyn_cast<ConvolutionNode>(n);
  if (!conv || conv->getGroup() != 1)
    return nullptr;
  auto *mul = dyn_cast<MulNode>(conv->getInput().node);
  Constant *w = passutil::asConstant(conv->getFilter());
  if (!mul || !w || mul->getUsers().size() != 1 || !isFloatKind(mul->getType(0)->kind))
    return nullptr;
  const Dims &xd = mul->getType(0)->dims, &wd = w->getType()->dims;
  if (xd.size() != 4 || xd[0] != 1 || wd.size() != 4)
    return nullptr;
  for (unsigned side = 0; side < 2; side++) {
    NodeValue x = mul->getNthInput(side);
    auto *bc = dyn_cast<BroadcastNode>(mul->getNthInput(1 - side).node);
    if (!bc)
      continue;
    NodeValue s = bc->getInput();
    const Dims &sd = s.dims();
    if (sd.size() != 4 || sd[0] != 1 || sd[1] != xd[1] || sd[2] != 1 || sd[3] != 1 ||
        x.getType() != mul->getType(0) || s.getElementType() != x.getElementType())
      continue;
    // Only where the filter is smaller than the activation it saves writing.
    if (w->getType()->numElements() >= mul->getType(0)->numElements())
      return nullptr;
    NodeValue sb = f->createBroadcast(n->getName() + ".channel_scale", s, wd.vec());
    NodeValue scaled = f->createMul(n->getName() + ".scaled_filter", NodeValue(w), sb);
    return f->createConvolution(n->getName(), conv->getType(0), x, scaled, conv->getBias(),
                                conv->getKernels(), conv->getStrides(), conv->getPads(),
                                conv->getDilations(), conv->getGroup());
  }
  return nullptr;
}

} // namespace

bool fuseActivations(Function *f, const PassContext &ctx) {
  if (!ctx.backend)
    return false;
  return passutil::rewriteNodes(f, [&](Node *n, passutil::Sweeper &sweeper) {
    if (Node *folded = foldChannelScale(f, n)) {
      if (ctx.backend->isOpSupported(*folded) &&
          ctx.backend->isOpSupported(*folded->getNthInput(1).node))
        return NodeValue(folded);
      Node *scaled = folded->getNthInput(1).node, *sb = scaled->getNthInput(1).node;
      f->eraseNode(folded);
      f->eraseNode(scaled);
      f->eraseNode(sb);
      return NodeValue();
    }
    if (Node *fused = fuseQuantizedActivation(f, n)) {
      if (ctx.backend->isOpSupported(*fused))
        return NodeValue(fused);
      f->eraseNode(fused);
      return NodeValue();
    }
    Match m;
    if (!match(f, n, m))
      return NodeValue();
    Node *fused;
    if (m.reshape || isConstantMatMul(m.producer))
      fused = fusedMatrixProduct(f, m, m.producer->getName() + "." + n->getName());
    else
      fused = fusedNode(f, m.producer, n, m.residual, m.act, m.alpha, m.beta);
    if (!ctx.backend->isOpSupported(*fused)) {
      f->eraseNode(fused);
      return NodeValue();
    }
    for (Node *k : m.chain)
      sweeper.add(k);
    if (m.reshape) {
      sweeper.add(m.reshape);
      return NodeValue(f->createReshape(m.reshape->getName(), n->getType(0), NodeValue(fused),
                                        n->getType(0)->dims.vec()));
    }
    return NodeValue(fused);
  });
}

} // namespace kiln
