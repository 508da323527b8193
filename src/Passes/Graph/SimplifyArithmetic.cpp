// simplify-arithmetic: identities of element-wise arithmetic, where "0" and "1" are Splats,
// Broadcasts of them, or Constants whose elements all equal that value:
//   x * 1 = 1 * x = x;  x + 0 = 0 + x = x;  x - 0 = x;  x / 1 = x;
//   max(x, x) = min(x, x) = x;  x - x = 0 (a Splat; like every compiler, this assumes x
//   holds no inf or NaN).
// Quantized operands are left alone (their scales make "1" a different number).

#include "SimplifyArithmetic.h"

#include "PassUtils.h"

namespace kiln {

namespace {

/// What \p n simplifies to, or null.
NodeValue simplified(Function *f, Node *n) {
  if (n->getNumInputs() != 2 || n->getNumResults() != 1 || n->getType(0)->isQuantizedType())
    return NodeValue();
  NodeValue a = n->getNthInput(0), b = n->getNthInput(1);
  auto same = [&](NodeValue v) { return v.getType() == n->getType(0) ? v : NodeValue(); };
  switch (n->getKind()) {
  case NodeKind::Mul:
    if (passutil::isUniformValue(b, 1))
      return same(a);
    if (passutil::isUniformValue(a, 1))
      return same(b);
    return NodeValue();
  case NodeKind::Add:
    if (passutil::isUniformValue(b, 0))
      return same(a);
    if (passutil::isUniformValue(a, 0))
      return same(b);
    return NodeValue();
  case NodeKind::Sub:
    if (passutil::isUniformValue(b, 0))
      return same(a);
    if (a == b)
      return passutil::makeSplat(f, n->getName(), *n->getType(0), 0);
    return NodeValue();
  case NodeKind::Div:
    return passutil::isUniformValue(b, 1) ? same(a) : NodeValue();
  case NodeKind::Max:
  case NodeKind::Min:
    return a == b ? same(a) : NodeValue();
  default:
    return NodeValue();
  }
}

} // namespace

bool simplifyArithmetic(Function *f, const PassContext &) {
  return passutil::rewriteNodes(f, [&](Node *n) { return simplified(f, n); });
}

} // namespace kiln
