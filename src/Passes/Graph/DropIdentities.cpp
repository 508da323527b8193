// drop-identities: nodes that compute their input, or a value already computed:
//   ConvertTo / RescaleQuantized to the input's own type: the input;
//   Quantize(Dequantize(x)) back to x's type: x;
//   Clip(x, -inf, inf): x;
//   idempotent chains f(f(x)) = f(x) for Relu, Abs, Floor, Ceil, Round;
//   Neg(Neg(x)) = x (exact; Reciprocal(Reciprocal(x)) is not, because of rounding).

#include "DropIdentities.h"

#include "PassUtils.h"

#include <cmath>

namespace kiln {

namespace {

bool isIdempotent(NodeKind k) {
  return k == NodeKind::Relu || k == NodeKind::Abs || k == NodeKind::Floor || k == NodeKind::Ceil ||
         k == NodeKind::Round;
}

NodeValue identityOf(Node *n) {
  if (n->getNumResults() != 1 || n->getNumInputs() == 0)
    return NodeValue();
  NodeValue in = n->getNthInput(0);
  TypeRef ty = n->getType(0);
  switch (n->getKind()) {
  case NodeKind::ConvertTo:
  case NodeKind::RescaleQuantized:
    return in.getType() == ty ? in : NodeValue();
  case NodeKind::Quantize: {
    auto *dq = dyn_cast<DequantizeNode>(in.node);
    return dq && dq->getInput().getType() == ty ? dq->getInput() : NodeValue();
  }
  case NodeKind::Clip: {
    auto *c = cast<ClipNode>(n);
    bool open =
        std::isinf(c->getMin()) && c->getMin() < 0 && std::isinf(c->getMax()) && c->getMax() > 0;
    return open && in.getType() == ty ? in : NodeValue();
  }
  case NodeKind::Neg: {
    auto *inner = dyn_cast<NegNode>(in.node);
    return inner && inner->getInput().getType() == ty ? inner->getInput() : NodeValue();
  }
  default:
    break;
  }
  if (isIdempotent(n->getKind()) && in.node->getKind() == n->getKind() && in.getType() == ty)
    return in;
  return NodeValue();
}

} // namespace

bool dropIdentities(Function *f, const PassContext &) {
  return passutil::rewriteNodes(f, [](Node *n) { return identityOf(n); });
}

} // namespace kiln
